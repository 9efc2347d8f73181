// One dead letter in full, in the order of triage: why it failed (reason and description) on top,
// its fields, its delivery attempts (the first table under them), its edits (EDIT_LOG) when it was
// redriven with a change, the payload as text / JSON / hex, and every raw property last and
// collapsed (epoch times shown as times); redrive / purge of just this message.
import { api, paths, splitTopic } from "./api.js";
import { clear, errorBox, h, nsCrumbs, setCrumbs, table, td } from "./dom.js";
import { LIST_LIMIT, messageCache, shortTopic } from "./dlq.js";
import { asJson, byteCount, failureDescription, fmtTime, hexDump, isEpochProperty, payloadBytes } from "./format.js";
import { purgeFlow, redriveFlow } from "./redrive.js";

const enc = encodeURIComponent;

async function find(base, id) {
  const cached = messageCache.get(`${base}|${id}`);
  if (cached) return cached;
  const listed = await api("GET", `${base}/letterbox/deadLetters?limit=${Math.max(LIST_LIMIT, 10000)}`);
  for (const m of listed) messageCache.set(`${base}|${m.messageId}`, m);
  return listed.find((m) => m.messageId === id) || null;
}

export async function messageView(root, tenant, ns, topic, id) {
  const back = `#/dlq/${enc(tenant)}/${enc(ns)}/${enc(topic)}`;
  setCrumbs([...nsCrumbs(tenant, ns),
    [topic, back], [id, null]]);
  const base = paths.topic(tenant, ns, topic);
  const m = await find(base, id);
  root.append(h("h1", {}, `Dead letter ${id}`));
  if (!m) {
    root.append(h("p", { class: "notice", id: "not-live" },
      "This message is no longer a live dead letter of the topic (redriven or purged), or is not among the oldest "
      + "10,000."), h("a", { href: back }, "Back to the dead letter topic"));
    return null;
  }
  const p = m.properties;
  const description = failureDescription(p);
  const fields = [
    ["message id", m.messageId], ["key", m.key ?? "–"], ["reason", p.DEAD_LETTER_REASON || "unspecified"],
    ["failure description", description || "–"], ["dead-lettered at", fmtTime(p.DEAD_LETTER_TIME)],
    ["subscription", p.DEAD_LETTER_SUBSCRIPTION || "–"], ["delivery count", p.DELIVERY_COUNT ?? "–"],
    ["first delivery", fmtTime(p.FIRST_DELIVERY_TIME)], ["last delivery", fmtTime(p.LAST_DELIVERY_TIME)],
    ["published", fmtTime(m.publishTime)], ["first published", fmtTime(p.ORIGIN_PUBLISH_TIME)],
    ["event time", fmtTime(m.eventTime)], ["source topic", shortTopic(p.REAL_TOPIC)],
    ["origin message id", p.ORIGIN_MESSAGE_ID || "–"], ["payload size", `${byteCount(m)} bytes`],
  ];
  if (m.error) fields.push(["stored as is", m.error]);
  const errors = h("div");
  const progress = h("div", { id: "progress-host" });
  const done = () => { location.hash = back; };
  const act = (fn) => async () => {
    clear(errors);
    try { await fn(); } catch (err) { if (err.status !== 401) errors.append(errorBox(err)); }
  };
  const redrive = h("button", { type: "button", id: "redrive-one", class: "primary" }, "Redrive this message");
  redrive.addEventListener("click", act(() => redriveFlow(base, { messageIds: [m.messageId] }, "this message",
    progress, () => {})));
  const purge = h("button", { type: "button", id: "purge-one", class: "danger" }, "Purge this message");
  purge.addEventListener("click", act(() => purgeFlow(base, { messageIds: [m.messageId] }, "this message", done)));
  const attemptsHost = h("div", { id: "attempts-host" }, h("p", { class: "muted" }, "Reading the attempt log…"));
  const props = Object.entries(p).sort();
  root.append(
    h("div", { class: "failure", id: "failure" },
      h("span", { class: "reason", id: "failure-reason" }, p.DEAD_LETTER_REASON || "unspecified"),
      h("span", { id: "failure-description" }, description || "no description was given")),
    h("div", { class: "toolbar" }, h("a", { href: back }, "‹ Back to the list"), redrive, purge),
    errors, progress,
    table(["field", "value"], fields.map(([k, v]) => h("tr", {}, td(k, { class: "nowrap" }), td(String(v)))),
      { id: "message-fields", class: "fields" }),
    h("h2", {}, "Delivery attempts"), attemptsHost,
    h("h2", {}, "Payload"), payloadPanel(m),
    h("details", { id: "raw-properties" }, h("summary", {}, `Raw properties (${props.length})`),
      table(["property", "value"], props.map(([k, v]) => h("tr", {}, td(k, { class: "nowrap" }),
        td(isEpochProperty(k, v) ? `${fmtTime(v)} (${v})` : v, { class: "raw" }))), { id: "message-properties" })));
  clear(attemptsHost).append(await attemptsPanel(p));
  const edits = parseAttempts(p.EDIT_LOG); // edit-and-replay: who changed it, when, the old payload's hash
  if (edits.length) {
    attemptsHost.after(h("h2", {}, "Edits"), table(["edited", "by", "old payload sha256", "changes", "original"],
      edits.map((e) => h("tr", { class: "edit" }, td(fmtTime(e.at)), td(e.by || "–"),
        td(h("code", {}, String(e.oldPayloadSha256 || "–"))), td((e.changes || []).join(", ")),
        td(String(e.original || "–")))), { id: "edits" }));
  }
  return null;
}

// The attempt log of the message in the subscription that dead-lettered it (GET
// .../subscription/{sub}/letterbox/attempts/{ORIGIN_MESSAGE_ID}, which answers from the dead
// letter's DELIVERY_ATTEMPTS once it left the subscription); the property itself when the
// route cannot answer (no source recorded, or the role may not read the source topic).
async function attemptsPanel(p) {
  const source = p.REAL_TOPIC ? splitTopic(p.REAL_TOPIC) : null;
  let list = null;
  let note = null;
  if (source && p.DEAD_LETTER_SUBSCRIPTION && p.ORIGIN_MESSAGE_ID) {
    const path = `${paths.topic(...source)}/subscription/${enc(p.DEAD_LETTER_SUBSCRIPTION)}`
      + `/letterbox/attempts/${enc(p.ORIGIN_MESSAGE_ID)}`;
    try {
      list = (await api("GET", path)).attempts;
    } catch (err) {
      if (err.status === 401) throw err;
      note = `The attempt log could not be read: ${err.message}`;
    }
  }
  if (list === null) list = parseAttempts(p.DELIVERY_ATTEMPTS);
  const out = h("div");
  if (note) out.append(h("p", { class: "muted" }, note));
  if (!list || !list.length) {
    out.append(h("p", { class: "muted" }, "No delivery attempts recorded for this message."));
    return out;
  }
  out.append(table(["#", "delivered", "ended", "ending", "reason", "consumer", "address"],
    list.map((a, i) => h("tr", { class: "attempt" }, td(String(i + 1)), td(fmtTime(a.deliveredAt), { class: "nowrap time" }),
      td(fmtTime(a.endedAt), { class: "nowrap time" }), td(a.ending || "–", { class: "nowrap" }),
      td(a.reason || "–", { class: "wide" }), td(a.consumer || "–", { class: "nowrap" }),
      td(a.address || "–", { class: "nowrap" }))), { id: "attempts" }));
  return out;
}

function parseAttempts(raw) {
  if (!raw) return [];
  try {
    const list = JSON.parse(raw);
    return Array.isArray(list) ? list.filter((a) => a && typeof a === "object") : [];
  } catch {
    return [];
  }
}

function payloadPanel(m) {
  const json = asJson(m.payloadText);
  const views = { text: m.payloadText ?? "(not UTF-8 text: see hex)", json: json ?? "(not JSON)",
    hex: hexDump(payloadBytes(m)) };
  const pre = h("pre", { class: "payload", id: "payload" });
  const tabs = h("div", { class: "toolbar tabs" });
  const show = (which) => {
    pre.textContent = views[which];
    pre.dataset.view = which;
    for (const b of tabs.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.value === which));
  };
  for (const which of ["text", "json", "hex"]) {
    const b = h("button", { type: "button", value: which, id: `payload-${which}` }, which.toUpperCase());
    b.addEventListener("click", () => show(which));
    tabs.append(b);
  }
  show(json ? "json" : m.payloadText !== null && m.payloadText !== undefined ? "text" : "hex");
  return h("div", {}, tabs, pre);
}
