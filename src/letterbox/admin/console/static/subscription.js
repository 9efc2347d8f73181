// One subscription: links to where its failures go (dead letter topic, retry topic and tiers,
// poison suspects), backlog over time and redelivery rate, sampled by this page from the
// topic's stats every SAMPLE_MS while it is open (the broker keeps no history), plus its
// consumers. The samples stop when the user leaves the page.
import { api, hrefs, paths } from "./api.js";
import { lineChart } from "./chart.js";
import { clear, errorBox, fmtNum, h, nsCrumbs, setCrumbs, table, td } from "./dom.js";

const SAMPLE_MS = 2000;
const MAX_SAMPLES = 450; // 15 minutes
const enc = encodeURIComponent;

export async function subscriptionView(root, tenant, ns, topic, sub) {
  setCrumbs([...nsCrumbs(tenant, ns),
    [topic, null], [sub, null]]);
  const base = paths.topic(tenant, ns, topic);
  const samples = [];
  const now = h("div", { class: "cards", id: "sub-now" });
  const charts = h("div", { class: "cards" });
  const consumers = h("div", { id: "sub-consumers" });
  const err = h("div");
  const links = h("div", { id: "sub-links", class: "card wide" }, h("h2", {}, "Where its failures go"));
  root.append(h("h1", {}, `Subscription ${sub} on ${tenant}/${ns}/${topic}`), links,
    h("p", { class: "muted" }, `Sampled every ${SAMPLE_MS / 1000} s while this page is open.`), err, now, charts,
    h("h2", {}, "Consumers"), consumers);
  links.append(await failureLinks(tenant, ns, topic, sub));
  let stopped = false;
  let timer = null;

  const sample = async () => {
    try {
      const st = await api("GET", `${base}/stats`);
      const s = (st.subscriptions || {})[sub];
      clear(err);
      if (!s) {
        err.append(h("div", { class: "error" }, `No subscription ${sub} on this topic.`));
        return;
      }
      samples.push({ t: Date.now(), backlog: s.msgBacklog || 0, redeliver: s.msgRateRedeliver || 0 });
      if (samples.length > MAX_SAMPLES) samples.shift();
      const card = (label, value, id) => h("div", { class: "card narrow" }, h("h2", {}, label),
        h("p", { id, style: "font-size: 1.6rem; margin: 0" }, fmtNum(value)));
      clear(now).append(card("backlog", s.msgBacklog, "sub-backlog"), card("unacked", s.unackedMessages, "sub-unacked"),
        card("delayed", s.msgDelayed, "sub-delayed"), card("redeliveries / s", s.msgRateRedeliver, "sub-redeliver"),
        card("parked keys", Object.keys(s.letterboxPoisonedKeys || {}).length, "sub-parked"),
        card("type", s.type || "–", "sub-type"),
        card("circuit", s.letterboxCircuit ? s.letterboxCircuit.state : "off", "sub-circuit"));
      clear(charts).append(
        h("div", { class: "card", id: "chart-backlog" }, h("h2", {}, "Backlog"),
          lineChart(samples.map((x) => [x.t, x.backlog]), { title: "backlog over time" })),
        h("div", { class: "card", id: "chart-redeliver" }, h("h2", {}, "Redelivery rate"),
          lineChart(samples.map((x) => [x.t, x.redeliver]), { title: "redeliveries per second", unit: "/s" })));
      clear(consumers).append((s.consumers || []).length
        ? table(["consumer", "address", { label: "unacked", num: true }, { label: "msg/s out", num: true }],
          s.consumers.map((c) => h("tr", {}, td(c.consumerName), td(c.address || "–"),
            h("td", { class: "num" }, fmtNum(c.unackedMessages)), h("td", { class: "num" }, fmtNum(c.msgRateOut)))))
        : h("p", { class: "muted" }, "No consumer connected."));
    } catch (e) {
      if (e.status === 401) { stopped = true; return; }
      clear(err).append(errorBox(e));
    } finally {
      if (!stopped) timer = setTimeout(sample, SAMPLE_MS);
    }
  };
  await sample();
  return () => { stopped = true; clearTimeout(timer); };
}

// Links to the subscription's dead letter topic (`<topic>-<sub>-DLQ`), its retry topic
// (`<topic>-<sub>-RETRY`, consumed by the same subscription) and retry tiers, and its poison
// suspects; a topic that does not exist yet is named, not linked.
async function failureLinks(tenant, ns, topic, sub) {
  const full = `persistent://${tenant}/${ns}/${topic}`;
  const [topics, dlqs] = await Promise.all([
    api("GET", paths.topics(tenant, ns)).catch(() => []),
    api("GET", paths.deadLetterTopics(tenant, ns)).catch(() => []),
  ]);
  const exists = new Set(topics);
  const dlq = `${full}-${sub}-DLQ`;
  const retry = `${full}-${sub}-RETRY`;
  const tiers = topics.filter((t) => t.startsWith(`${retry}-`)).sort();
  const live = (dlqs.find((d) => d.topic === dlq) || {}).messages;
  const local = (t) => t.split("/").pop();
  const row = (label, id, content) => h("tr", { id }, td(label, { class: "nowrap" }), td(content));
  return table(["", "topic"], [
    row("dead letter topic", "link-dlq", exists.has(dlq) || live !== undefined
      ? [h("a", { href: hrefs.dlq(dlq), class: "dlq-link" }, local(dlq)), ` · ${fmtNum(live ?? 0)} live dead letters`]
      : `${local(dlq)} (none yet: nothing was dead-lettered from this subscription)`),
    row("retry topic", "link-retry", exists.has(retry)
      ? h("a", { href: hrefs.sub(retry, sub), class: "retry-link" }, local(retry))
      : `${local(retry)} (none yet: nothing was sent to retry)`),
    tiers.length ? row("retry tiers", "link-tiers", tiers.map((t, i) => [i ? ", " : "",
      h("a", { href: hrefs.sub(t, sub), class: "retry-link" }, local(t))])) : null,
    row("poison suspects", "link-poison", h("a", { href: hrefs.poison(full, sub), class: "poison-link" },
      "messages close to their dead-letter limit")),
  ].filter(Boolean), { class: "fields" });
}
