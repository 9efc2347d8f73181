// Redrive and purge as the console runs them, through the admin API the CLI uses:
// a dry run counts what the filter matches, a confirmation dialog names that count, then the
// redrive runs in chunks (maxMessages per call) so the page shows live progress and can stop
// between chunks (Cancel also DELETEs .../letterbox/redrive, which stops a chunk in flight).
// Each chunk is one storage transaction on the broker: what moved stays moved.
import { api } from "./api.js";
import { clear, confirmDialog, errorBox, h, toast } from "./dom.js";

const CHUNK = 100;

export async function redriveFlow(base, filter, what, host, onDone) {
  const dry = await api("POST", `${base}/letterbox/redrive`, { ...filter, dryRun: true });
  if (!dry.matched) {
    toast(`Nothing to redrive: no live dead letter matches ${what}.`);
    return;
  }
  const target = h("input", { id: "redrive-target", size: 48, placeholder: "persistent://tenant/ns/topic" });
  const extra = h("label", {}, "Target topic (empty: each message's source topic, REAL_TOPIC) ", target);
  const ok = await confirmDialog("Redrive dead letters",
    `Redrive ${dry.matched} message(s) (${what})? They are appended to their topic and leave this dead letter topic.`,
    `Redrive ${dry.matched}`, extra);
  if (!ok) return;
  const body = { ...filter };
  if (target.value.trim()) body.target = target.value.trim();
  await runChunks(base, body, dry.matched, host);
  onDone();
}

async function runChunks(base, body, expected, host) {
  let cancelled = false;
  const bar = h("div", { style: "width: 0%" });
  const line = h("p", { id: "redrive-status" }, `Redrive running: 0 of ${expected} moved`);
  const cancel = h("button", { type: "button", id: "redrive-cancel" }, "Cancel redrive");
  cancel.addEventListener("click", () => {
    cancelled = true;
    cancel.disabled = true;
    api("DELETE", `${base}/letterbox/redrive`).catch(() => {}); // 404: no chunk in flight
  });
  const panel = h("div", { class: "card", id: "redrive-progress" }, h("h2", {}, "Redrive progress"),
    h("div", { class: "progress" }, bar), line, cancel);
  clear(host).append(panel);
  let moved = 0;
  let remaining = expected;
  try {
    while (!cancelled) {
      const r = await api("POST", `${base}/letterbox/redrive`, { ...body, maxMessages: CHUNK });
      moved += r.moved;
      remaining = r.remaining;
      const total = Math.max(expected, moved + remaining, 1);
      bar.style.width = `${Math.round((100 * moved) / total)}%`;
      line.textContent = `Redrive running: ${moved} of ${moved + remaining} moved`;
      if (r.cancelled || r.remaining === 0 || r.moved === 0) break;
    }
  } catch (err) {
    panel.append(errorBox(err));
  }
  cancel.remove();
  line.textContent = `Redrive ${cancelled ? "cancelled" : "finished"}: ${moved} moved`
    + (remaining ? `, ${remaining} still match` : "");
  line.dataset.done = "true";
  toast(line.textContent);
}

export async function purgeFlow(base, filter, what, onDone) {
  const dry = await api("POST", `${base}/letterbox/purge`, { ...filter, dryRun: true });
  if (!dry.purged) {
    toast(`Nothing to purge: no live dead letter matches ${what}.`);
    return;
  }
  const ok = await confirmDialog("Purge dead letters",
    `Purge ${dry.purged} message(s) (${what})? They are marked handled and no longer listed; this cannot be undone.`,
    `Purge ${dry.purged}`);
  if (!ok) return;
  const r = await api("POST", `${base}/letterbox/purge`, filter);
  toast(`Purged ${r.purged} message(s).`);
  onDone();
}
