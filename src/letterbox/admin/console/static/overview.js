// The landing page (#/): what is failing right now, over every namespace the signed-in role can
// see (a super user: all of them; another role: the namespaces it opened in this tab, or by name
// with the form). One GET .../letterbox/failing per namespace gives live dead letters per dead
// letter topic (counts, reasons, the most frequent failure description, the last hour's trend),
// poison suspects and parked keys per subscription, and the running redrive tasks; each row
// links to the view where it is triaged.
import { api, hrefs, paths } from "./api.js";
import { sparkline } from "./chart.js";
import { clear, errorBox, fmtNum, h, num, setCrumbs, table, td } from "./dom.js";
import { fmtTime } from "./format.js";
import { shortTopic } from "./dlq.js";
import { openForm, openedNamespaces } from "./browse.js";

// every namespace of every tenant, or (403: not a super user) the ones opened in this tab
async function visibleNamespaces() {
  let tenants;
  try {
    tenants = await api("GET", paths.tenants());
  } catch (err) {
    if (err.status === 403) return { names: openedNamespaces(), limited: true };
    throw err;
  }
  const lists = await Promise.all(tenants.map((t) => api("GET", paths.namespaces(t)).catch(() => [])));
  return { names: lists.flat().sort(), limited: false };
}

export async function failingView(root) {
  setCrumbs([["what is failing", null]]);
  const host = h("div", { id: "failing" });
  const refresh = h("button", { type: "button", id: "failing-refresh" }, "Refresh");
  root.append(h("div", { class: "toolbar" }, h("h1", { class: "inline" }, "What is failing right now"), refresh,
    h("a", { href: "#/tenants" }, "Browse tenants and topics")), host);
  const load = async () => {
    const { names, limited } = await visibleNamespaces();
    const answers = await Promise.all(names.map((full) => {
      const [t, ns] = full.split("/");
      return api("GET", paths.failing(t, ns)).catch((error) => ({ namespace: full, error }));
    }));
    render(clear(host), answers, limited);
  };
  refresh.addEventListener("click", () => load().catch((err) => { if (err.status !== 401) host.append(errorBox(err)); }));
  await load();
  return null;
}

function render(host, answers, limited) {
  const ok = answers.filter((a) => !a.error);
  const dlqs = ok.flatMap((a) => a.deadLetterTopics).filter((d) => d.messages > 0)
    .sort((a, b) => b.messages - a.messages || a.topic.localeCompare(b.topic));
  const suspects = ok.flatMap((a) => a.poisonSuspects).sort((a, b) => b.suspectCount - a.suspectCount);
  const parked = ok.flatMap((a) => a.parkedKeys).sort((a, b) => b.keys - a.keys);
  const taskLists = ok.map((a) => a.redriveTasks);
  const tasks = taskLists.filter(Array.isArray).flat();
  const sum = (xs, f) => xs.reduce((n, x) => n + f(x), 0);
  const card = (label, value, id) => h("div", { class: "card narrow" }, h("h2", {}, label),
    h("p", { class: "big", id }, fmtNum(value)));
  host.append(h("div", { class: "cards", id: "failing-summary" },
    card("live dead letters", sum(dlqs, (d) => d.messages), "sum-dead-letters"),
    card("dead letter topics", dlqs.length, "sum-dlqs"),
    card("poison suspects", sum(suspects, (s) => s.suspectCount), "sum-suspects"),
    card("parked keys", sum(parked, (p) => p.keys), "sum-parked"),
    card("redrives running", taskLists.some((l) => l === null) && !tasks.length ? null : tasks.length,
      "sum-redrives")));
  for (const a of answers.filter((x) => x.error)) host.append(errorBox(a.error));
  if (limited) {
    host.append(h("p", { class: "muted", id: "failing-limited" }, answers.length
      ? `Showing the namespaces opened in this tab (${answers.map((a) => a.namespace).join(", ")}); listing every `
        + "tenant needs a super user."
      : "Listing tenants needs a super user: open a namespace you may read."), openForm());
  }

  host.append(h("h2", { id: "dlqs" }, "Dead letters by dead letter topic"));
  host.append(dlqs.length ? table(["dead letter topic", { label: "live", num: true }, { label: "last hour", num: true },
    "last hour per 5 min", "by reason", "most frequent failure", "newest"], dlqs.map((d) => {
    const [text, count] = d.descriptions[0] || [null, 0];
    return h("tr", { class: "failing-dlq", dataset: { topic: d.topic } },
      td(h("a", { href: hrefs.dlq(d.topic), class: "dlq-link" }, shortTopic(d.topic)), { class: "nowrap" }),
      h("td", { class: "num live" }, fmtNum(d.messages)), num(d.lastHour),
      td(sparkline(d.trend.counts, { title: `${d.lastHour} dead-lettered in the last hour, per 5 minutes` })),
      td(Object.entries(d.byReason).map(([r, n]) => `${r}: ${n}`).join(", "), { class: "nowrap" }),
      td(text ? `${text} (${count})` : "–", { class: "wide description" }),
      td(fmtTime(d.newestDeadLetterTime), { class: "nowrap time" }));
  }), { id: "failing-dlqs" }) : h("p", { class: "notice", id: "no-dead-letters" }, "No live dead letters."));

  host.append(h("h2", {}, "Poison suspects"),
    h("p", { class: "muted" }, "Messages still in their subscription, redelivered more than half the times its "
      + "dead-letter policy allows: they are on their way to the dead letter topic."));
  host.append(suspects.length ? table(["subscription", "topic", { label: "suspects", num: true },
    { label: "max redeliveries", num: true }], suspects.map((s) => h("tr", { class: "failing-suspect" },
    td(h("a", { href: hrefs.poison(s.topic, s.subscription), class: "poison-link" }, s.subscription),
      { class: "nowrap" }),
    td(shortTopic(s.topic), { class: "nowrap" }), num(s.suspectCount), num(s.maxRedeliveries))),
  { id: "failing-suspects" }) : h("p", { class: "muted", id: "no-suspects" }, "No poison suspects."));

  host.append(h("h2", {}, "Parked keys"),
    h("p", { class: "muted" }, "Keys of an ordered subscription (onKeyFailure = park) whose failed message is in the "
      + "dead letter topic: the key's later messages wait there behind it until it is redriven or purged."));
  host.append(parked.length ? table(["subscription", "topic", { label: "keys", num: true }, "keys parked"],
    parked.map((p) => h("tr", { class: "failing-parked" },
      td(h("a", { href: hrefs.sub(p.topic, p.subscription), class: "sub-link" }, p.subscription), { class: "nowrap" }),
      td(shortTopic(p.topic), { class: "nowrap" }), num(p.keys),
      td(p.sample.slice(0, 8).map((k) => k.key).join(", ") + (p.keys > 8 ? ", …" : ""), { class: "wide" }))),
    { id: "failing-parked" }) : h("p", { class: "muted", id: "no-parked" }, "No parked keys."));

  host.append(h("h2", {}, "Redrive tasks running"));
  if (!tasks.length) {
    host.append(h("p", { class: "muted", id: "no-redrives" }, taskLists.some((l) => l === null)
      ? "None visible: listing redrive tasks needs a tenant admin." : "No redrive is running."));
    return;
  }
  host.append(table(["dead letter topic", "task", "progress", "started"], tasks.map((t) => h("tr",
    { class: "failing-redrive", dataset: { task: t.taskId } },
    td(h("a", { href: hrefs.dlq(t.dlq) }, shortTopic(t.dlq)), { class: "nowrap" }), td(t.taskId, { class: "nowrap id" }),
    td(`${t.moved} of ${t.moved + (t.remaining || 0)} moved`, { class: "nowrap" }),
    td(fmtTime(t.createdAt), { class: "nowrap time" }))), { id: "failing-redrives" }));
}
