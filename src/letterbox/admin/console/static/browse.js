// Browsing: tenants -> namespaces -> topics (backlog, rates, subscriptions, dead letter topics
// with their most frequent failure, from the namespace's .../letterbox/failing).
import { api, paths } from "./api.js";
import { errorBox, fmtNum, h, num, setCrumbs, table, td } from "./dom.js";

const enc = encodeURIComponent;
export const DLQ_HANDLED = "letterbox-dlq-handled";

export async function tenantsView(root) {
  setCrumbs([["failing", "#/"], ["tenants", null]]);
  root.append(h("h1", {}, "Tenants"));
  root.append(openForm());
  let tenants;
  try {
    tenants = await api("GET", paths.tenants());
  } catch (err) {
    if (err.status === 403) {
      root.append(errorBox(err), h("p", { class: "muted" },
        "Listing tenants needs a super user; open a namespace you may read with the form above."));
      return;
    }
    throw err;
  }
  root.append(table(["tenant"], tenants.map((t) => h("tr", {}, td(h("a", { href: `#/t/${enc(t)}` }, t))))));
}

export function openForm() {
  const input = h("input", { id: "open-namespace", placeholder: "tenant/namespace", size: 30 });
  const form = h("form", { class: "toolbar" }, h("label", { for: "open-namespace" }, "Open namespace"), input,
    h("button", { type: "submit" }, "Open"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const [t, ns] = input.value.trim().split("/");
    if (t && ns) location.hash = `#/ns/${enc(t)}/${enc(ns)}`;
  });
  return form;
}

// namespaces opened in this tab: the landing page's scope for a role that may not list tenants
const OPENED = "letterbox.console.namespaces";
export function openedNamespaces() {
  try { return JSON.parse(sessionStorage.getItem(OPENED) || "[]"); } catch { return []; }
}

function rememberNamespace(tenant, ns) {
  const known = openedNamespaces();
  if (!known.includes(`${tenant}/${ns}`)) sessionStorage.setItem(OPENED, JSON.stringify([...known, `${tenant}/${ns}`]));
}

export async function namespacesView(root, tenant) {
  setCrumbs([["failing", "#/"], ["tenants", "#/tenants"], [tenant, null]]);
  root.append(h("h1", {}, `Namespaces of ${tenant}`));
  const names = await api("GET", paths.namespaces(tenant));
  root.append(table(["namespace"], names.map((full) => {
    const ns = full.split("/")[1];
    return h("tr", {}, td(h("a", { href: `#/ns/${enc(tenant)}/${enc(ns)}` }, full)));
  })));
}

export async function topicsView(root, tenant, ns) {
  setCrumbs([["failing", "#/"], ["tenants", "#/tenants"], [tenant, `#/t/${enc(tenant)}`], [ns, null]]);
  root.append(h("h1", {}, `Topics of ${tenant}/${ns}`));
  const [topics, failing] = await Promise.all([
    api("GET", paths.topics(tenant, ns)).then((t) => { rememberNamespace(tenant, ns); return t; }),
    api("GET", paths.failing(tenant, ns)).catch((err) => ({ error: err })),
  ]);
  const dlqs = failing.error ? [] : failing.deadLetterTopics;
  const dlqByName = new Map(dlqs.map((d) => [d.topic, d]));
  if (failing.error) root.append(errorBox(failing.error));
  if (dlqByName.size) {
    root.append(h("h2", {}, "Dead letter topics"));
    root.append(table(["dead letter topic", { label: "live dead letters", num: true }, "by reason",
      "most frequent failure", "source topics"], dlqs.map((d) => {
      const name = d.topic.split("/").pop();
      const [text, count] = d.descriptions[0] || [null, 0];
      return h("tr", { dataset: { topic: d.topic } },
        td(h("a", { href: `#/dlq/${enc(tenant)}/${enc(ns)}/${enc(name)}`, class: "dlq-link" }, name),
          { class: "nowrap" }),
        num(d.messages),
        td(Object.entries(d.byReason).map(([r, n]) => `${r}: ${n}`).join(", "), { class: "nowrap" }),
        td(text ? `${text} (${count})` : "–", { class: "description", title: text || "" }),
        td(Object.keys(d.sourceTopics).join(", ")));
    }), { id: "namespace-dlqs" }));
  }
  root.append(h("h2", {}, "All topics"));
  if (!topics.length) {
    root.append(h("p", { class: "muted" }, "No topics yet."));
    return null;
  }
  const stats = await Promise.all(topics.map((full) => {
    const name = full.split("/").pop();
    return api("GET", `${paths.topic(tenant, ns, name)}/stats`).catch((err) => ({ error: err }));
  }));
  const rows = topics.map((full, i) => {
    const name = full.split("/").pop();
    const st = stats[i];
    if (st.error) return h("tr", {}, td(name), h("td", { colspan: 5, class: "error" }, st.error.message));
    const subs = Object.entries(st.subscriptions || {}).filter(([s]) => s !== DLQ_HANDLED);
    const backlog = subs.reduce((a, [, s]) => a + (s.msgBacklog || 0), 0);
    const subLinks = subs.map(([s, sst]) => h("div", {},
      h("a", { href: `#/sub/${enc(tenant)}/${enc(ns)}/${enc(name)}/${enc(s)}`, class: "sub-link" }, s),
      ` ${sst.type || ""} · backlog ${fmtNum(sst.msgBacklog)} · redeliver ${fmtNum(sst.msgRateRedeliver)}/s`));
    const label = dlqByName.has(full)
      ? h("a", { href: `#/dlq/${enc(tenant)}/${enc(ns)}/${enc(name)}` }, name) : name;
    return h("tr", { dataset: { topic: full } }, td(label), h("td", { class: "num backlog" }, fmtNum(backlog)),
      num(st.msgRateIn), num(st.msgRateOut), num(st.msgInCounter), td(subLinks.length ? subLinks : "–"));
  });
  root.append(table(["topic", { label: "backlog", num: true }, { label: "in msg/s", num: true },
    { label: "out msg/s", num: true }, { label: "published", num: true }, "subscriptions"], rows,
  { id: "topics" }));
  return null;
}
