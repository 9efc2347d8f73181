// Formatting of times (UTC, to the millisecond: three attempts within one second stay apart),
// payloads (text / JSON / hex), message ids and failure descriptions.
export function fmtTime(ms) {
  if (ms === null || ms === undefined || ms === "" || Number.isNaN(Number(ms)) || Number(ms) <= 0) return "–";
  return new Date(Number(ms)).toISOString().replace("T", " ");
}

// A property that holds an epoch time in milliseconds: the known ones, and any *_TIME whose value
// is a plausible epoch (2001..2286); DELAY_TIME is a duration, never a time.
const EPOCH_PROPS = new Set(["DEAD_LETTER_TIME", "FIRST_DELIVERY_TIME", "LAST_DELIVERY_TIME", "ORIGIN_PUBLISH_TIME"]);
export function isEpochProperty(key, value) {
  if (key === "DELAY_TIME" || !/^\d{12,13}$/.test(String(value))) return false;
  return EPOCH_PROPS.has(key) || /_TIME$/.test(key);
}

// The text a client or the broker gave for a dead letter's failure, else null.
export function failureDescription(props) {
  return props.FAILURE_DESCRIPTION || props.DEAD_LETTER_DESCRIPTION || null;
}

export function payloadBytes(msg) {
  if (!msg.payloadBase64) return new Uint8Array(0);
  const bin = atob(msg.payloadBase64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function hexDump(bytes, max = 4096) {
  const lines = [];
  const n = Math.min(bytes.length, max);
  for (let off = 0; off < n; off += 16) {
    const row = bytes.slice(off, Math.min(off + 16, n));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const asc = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${asc}`);
  }
  if (bytes.length > max) lines.push(`… ${bytes.length - max} more bytes`);
  return lines.join("\n");
}

export function asJson(text) {
  if (text === null || text === undefined) return null;
  const t = text.trim();
  if (!t.startsWith("{") && !t.startsWith("[")) return null;
  try { return JSON.stringify(JSON.parse(t), null, 2); } catch { return null; }
}

export function preview(msg, len = 80) {
  if (msg.error && !msg.payloadBase64) return `(${msg.error})`;
  if (msg.payloadText !== null && msg.payloadText !== undefined) {
    const t = msg.payloadText.replace(/\s+/g, " ");
    return t.length > len ? `${t.slice(0, len)}…` : t;
  }
  const bytes = payloadBytes(msg);
  const hex = Array.from(bytes.slice(0, 24), (b) => b.toString(16).padStart(2, "0")).join(" ");
  return `hex ${hex}${bytes.length > 24 ? " …" : ""}`;
}

export function byteCount(msg) {
  return msg.payloadBase64 ? payloadBytes(msg).length : 0;
}
