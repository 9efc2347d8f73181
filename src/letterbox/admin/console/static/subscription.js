// One subscription: backlog over time and redelivery rate, sampled by this page from the
// topic's stats every SAMPLE_MS while it is open (the broker keeps no history), plus its
// consumers. The samples stop when the user leaves the page.
import { api, paths } from "./api.js";
import { lineChart } from "./chart.js";
import { clear, errorBox, fmtNum, h, setCrumbs, table, td } from "./dom.js";

const SAMPLE_MS = 2000;
const MAX_SAMPLES = 450; // 15 minutes
const enc = encodeURIComponent;

export async function subscriptionView(root, tenant, ns, topic, sub) {
  setCrumbs([["tenants", "#/"], [tenant, `#/t/${enc(tenant)}`], [ns, `#/ns/${enc(tenant)}/${enc(ns)}`],
    [topic, null], [sub, null]]);
  const base = paths.topic(tenant, ns, topic);
  const samples = [];
  const now = h("div", { class: "cards", id: "sub-now" });
  const charts = h("div", { class: "cards" });
  const consumers = h("div", { id: "sub-consumers" });
  const err = h("div");
  root.append(h("h1", {}, `Subscription ${sub} on ${tenant}/${ns}/${topic}`),
    h("p", { class: "muted" }, `Sampled every ${SAMPLE_MS / 1000} s while this page is open.`), err, now, charts,
    h("h2", {}, "Consumers"), consumers);
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
