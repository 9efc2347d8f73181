// Redrive and purge as the console runs them, through the admin API the CLI uses:
// a dry run counts what the filter matches, a confirmation dialog names that count, then the
// redrive runs as a broker-side background task (POST .../letterbox/redrive with background:
// true) whose progress the page polls (GET .../letterbox/redrive/{taskId}) and can cancel
// (DELETE the same path). Each chunk is one storage transaction on the broker: what moved stays
// moved. A task already running when the page opens (started by the CLI, another tab) is shown
// the same way (watchTask).
import { api } from "./api.js";
import { clear, confirmDialog, errorBox, h, toast } from "./dom.js";

const POLL_MS = 500;
const watching = new Set(); // task ids this page polls

export async function redriveFlow(base, filter, what, host, onDone) {
  const dry = await api("POST", `${base}/letterbox/redrive`, { ...filter, dryRun: true });
  if (!dry.matched) {
    toast(`Nothing to redrive: no live dead letter matches ${what}.`);
    return;
  }
  const target = h("input", { id: "redrive-target", size: 44, placeholder: "persistent://tenant/ns/topic" });
  const rate = h("input", { id: "redrive-rate", type: "number", min: 1, max: 100000, placeholder: "no limit" });
  const subOnly = h("input", { id: "redrive-subscription-only", type: "checkbox" });
  const extra = h("div", { class: "dialog-fields" },
    h("label", {}, "Target topic (empty: each message's source topic, REAL_TOPIC) ", target),
    h("label", {}, "Messages per second ", rate),
    h("label", {}, subOnly, " only back into the subscription each message was dead-lettered from"));
  const ok = await confirmDialog("Redrive dead letters",
    `Redrive ${dry.matched} message(s) (${what})? They are appended to their topic and leave this dead letter topic.`,
    `Redrive ${dry.matched}`, extra);
  if (!ok) return;
  const body = { ...filter, background: true };
  if (target.value.trim()) body.target = target.value.trim();
  if (rate.value) body.ratePerSecond = Number(rate.value);
  if (subOnly.checked) body.subscriptionOnly = true;
  const task = await api("POST", `${base}/letterbox/redrive`, body);
  await watchTask(base, task, host, onDone);
}

export async function watchTask(base, task, host, onDone) {
  if (watching.has(task.taskId)) return;
  watching.add(task.taskId);
  const taskPath = `${base}/letterbox/redrive/${encodeURIComponent(task.taskId)}`;
  const bar = h("div");
  const line = h("p", { id: "redrive-status" });
  const cancel = h("button", { type: "button", id: "redrive-cancel" }, "Cancel redrive");
  const errors = h("div");
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try { show(await api("DELETE", taskPath)); } catch (err) { if (err.status !== 409) errors.append(errorBox(err)); }
  });
  const panel = h("div", { class: "card", id: "redrive-progress", dataset: { task: task.taskId } },
    h("h2", {}, `Redrive task ${task.taskId}`), h("div", { class: "progress" }, bar), line, cancel, errors);
  clear(host).append(panel);
  const show = (t) => {
    const total = Math.max(t.moved + (t.remaining || 0), 1);
    bar.style.width = `${Math.round((100 * t.moved) / total)}%`;
    const tail = t.remaining ? `, ${t.remaining} still match` : "";
    if (t.state === "running") line.textContent = `Redrive running: ${t.moved} of ${t.moved + (t.remaining || 0)} moved`;
    else if (t.state === "failed") line.textContent = `Redrive failed: ${t.moved} moved${tail}: ${t.error}`;
    else line.textContent = `Redrive ${t.state}: ${t.moved} moved${tail}`;
    line.dataset.state = t.state;
    return t.state !== "running";
  };
  try {
    let current = task;
    while (!show(current)) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      if (!host.isConnected) return; // the user left the page: stop polling
      current = await api("GET", taskPath);
    }
    cancel.remove();
    toast(line.textContent);
    onDone();
  } catch (err) {
    if (err.status !== 401) errors.append(errorBox(err));
  } finally {
    watching.delete(task.taskId);
  }
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
