// The dead letter topic view: its failure groups first (groups.js), counts by reason and source
// (the broker's summary of every live dead letter) and over time (of the listed ones), a
// searchable, paginated list (each dead letter with its failure description, times to the
// millisecond), and the
// redrive / purge actions on the selected or the filtered messages.
// The list holds the oldest LIST_LIMIT live dead letters (the reason filter is applied by the
// broker, key and text filters here); "filtered" actions send the reason filter when it is the
// only one, else the ids of every listed message that matches.
import { api, paths } from "./api.js";
import { barChart, columnChart, timeBuckets } from "./chart.js";
import { append, clear, errorBox, fmtNum, h, nsCrumbs, setCrumbs, table, td } from "./dom.js";
import { failureDescription, fmtTime, preview } from "./format.js";
import { groupsSection } from "./groups.js";
import { purgeFlow, redriveFlow, watchTask } from "./redrive.js";

export const LIST_LIMIT = 1000;
const PAGE = 25;
const enc = encodeURIComponent;
const filters = new Map(); // per DLQ topic, kept while the tab lives (back from a message)
export const messageCache = new Map(); // `${base}|${messageId}` -> message JSON

export function shortTopic(full) {
  return full ? full.replace(/^persistent:\/\//, "") : "–";
}

export async function dlqView(root, tenant, ns, topic) {
  setCrumbs([...nsCrumbs(tenant, ns), [topic, null]]);
  const base = paths.topic(tenant, ns, topic);
  const full = `persistent://${tenant}/${ns}/${topic}`;
  if (!filters.has(full)) filters.set(full, { reason: "", key: "", text: "", page: 0, selected: new Set() });
  const st = filters.get(full);
  const summaryHost = h("div", { class: "cards", id: "dlq-charts" });
  const toolbar = h("div", { class: "toolbar" });
  const actions = h("div", { class: "toolbar" });
  const progress = h("div", { id: "progress-host" });
  const errors = h("div", { id: "action-errors" });
  const listHost = h("div", { id: "list-host" });
  const groups = groupsSection(base, tenant, ns, topic, () => reload().catch(showError));
  root.append(h("h1", {}, `Dead letters of ${tenant}/${ns}/${topic}`), groups.host, summaryHost,
    h("h2", {}, "Messages"), toolbar, actions, errors, progress, listHost);
  let messages = [];

  const reload = async () => {
    const [summaries, listed, tasks] = await Promise.all([
      api("GET", paths.deadLetterTopics(tenant, ns)),
      api("GET", `${base}/letterbox/deadLetters?limit=${LIST_LIMIT}${st.reason ? `&reason=${enc(st.reason)}` : ""}`),
      api("GET", `${base}/letterbox/redriveTasks`).catch(() => []), // 403 for a reader: no tasks shown
    ]);
    const running = tasks.find((t) => t.state === "running");
    if (running) watchTask(base, running, progress, after);
    const summary = summaries.find((s) => s.topic === full) || { messages: 0, byReason: {}, sourceTopics: {} };
    messages = listed;
    for (const m of listed) messageCache.set(`${base}|${m.messageId}`, m);
    const live = new Set(listed.map((m) => m.messageId));
    for (const id of [...st.selected]) if (!live.has(id)) st.selected.delete(id);
    renderSummary(summary);
    renderToolbar(summary);
    renderList();
  };

  const renderSummary = (summary) => {
    const times = messages.map((m) => Number(m.properties.DEAD_LETTER_TIME || 0));
    const { unit, buckets } = timeBuckets(times);
    clear(summaryHost).append(
      h("div", { class: "card narrow" }, h("h2", {}, "Live dead letters"),
        h("p", { id: "live-count", style: "font-size: 2rem; margin: 0" }, fmtNum(summary.messages))),
      h("div", { class: "card", id: "chart-reason" }, h("h2", {}, "By reason"),
        barChart(Object.entries(summary.byReason), { title: "dead letters by reason", width: 380 })),
      h("div", { class: "card", id: "chart-source" }, h("h2", {}, "By source topic"),
        barChart(Object.entries(summary.sourceTopics).map(([k, v]) => [shortTopic(k), v]),
          { title: "dead letters by source topic", width: 380 })),
      h("div", { class: "card wide", id: "chart-hour" },
        h("h2", {}, `Dead-lettered per ${unit} (UTC${st.reason ? `, reason ${st.reason}` : ""})`),
        columnChart(buckets, { title: `dead letters per ${unit}`, width: 880, height: 200 })));
  };

  // built once: a reload only refreshes the reason choices, so typing in the filters is never cut off
  let reasonSelect = null;
  const renderToolbar = (summary) => {
    const reasons = [...new Set([...Object.keys(summary.byReason), st.reason].filter(Boolean))].sort();
    if (!reasonSelect) {
      reasonSelect = h("select", { id: "reason-filter" });
      reasonSelect.addEventListener("change", () => {
        st.reason = reasonSelect.value;
        st.page = 0;
        reload().catch(showError);
      });
      const key = h("input", { id: "key-filter", placeholder: "key", value: st.key, size: 14 });
      const text = h("input", { id: "text-filter", placeholder: "search payload, properties, id", value: st.text,
        size: 30 });
      for (const [el, field] of [[key, "key"], [text, "text"]]) {
        for (const ev of ["input", "change"]) {
          el.addEventListener(ev, () => {
            if (st[field] === el.value) return; // a blur's change after input: the list is current
            st[field] = el.value;
            st.page = 0;
            renderList();
          });
        }
      }
      const refresh = h("button", { type: "button", id: "refresh" }, "Refresh");
      refresh.addEventListener("click", () => reload().catch(showError));
      toolbar.append(h("label", {}, "Reason ", reasonSelect), key, text, refresh);
    }
    const wanted = ["", ...reasons];
    const have = [...reasonSelect.options].map((o) => o.value);
    if (wanted.join("\n") !== have.join("\n")) {
      append(clear(reasonSelect), [h("option", { value: "" }, "any reason"),
        reasons.map((r) => h("option", { value: r }, r))]);
    }
    reasonSelect.value = st.reason;
  };

  const matching = () => messages.filter((m) => {
    if (st.key && !(m.key || "").includes(st.key)) return false;
    if (!st.text) return true;
    const needle = st.text.toLowerCase();
    const hay = [m.messageId, m.key || "", m.payloadText || "", ...Object.entries(m.properties).flat()];
    return hay.some((s) => String(s).toLowerCase().includes(needle));
  });

  const filterBody = () => {
    if (!st.key && !st.text) return [st.reason ? { reason: st.reason } : {}, st.reason ? `reason ${st.reason}` : "all"];
    const ids = matching().map((m) => m.messageId);
    return [{ messageIds: ids.length ? ids : ["none"] }, `${ids.length} listed matching the filter`];
  };

  const act = (fn) => async () => {
    clear(errors);
    try {
      await fn();
    } catch (err) {
      showError(err);
    }
  };
  const showError = (err) => { if (err.status !== 401) clear(errors).append(errorBox(err)); };
  const after = () => reload().catch(showError);

  const renderList = () => {
    const found = matching();
    const pages = Math.max(1, Math.ceil(found.length / PAGE));
    st.page = Math.min(st.page, pages - 1);
    const shown = found.slice(st.page * PAGE, (st.page + 1) * PAGE);
    const sel = [...st.selected];
    const [flt, what] = filterBody();
    const btn = (id, label, cls, disabled, fn) => {
      const b = h("button", { type: "button", id, class: cls, disabled }, label);
      b.addEventListener("click", act(fn));
      return b;
    };
    const selBody = { messageIds: sel };
    clear(actions).append(
      btn("redrive-selected", `Redrive selected (${sel.length})`, "primary", !sel.length,
        () => redriveFlow(base, selBody, `${sel.length} selected`, progress, after)),
      btn("redrive-filtered", `Redrive ${what}`, "primary", !found.length,
        () => redriveFlow(base, flt, what, progress, after)),
      btn("purge-selected", `Purge selected (${sel.length})`, "danger", !sel.length,
        () => purgeFlow(base, selBody, `${sel.length} selected`, after)),
      btn("purge-filtered", `Purge ${what}`, "danger", !found.length, () => purgeFlow(base, flt, what, after)));
    const all = h("input", { type: "checkbox", id: "select-page", "aria-label": "select this page",
      checked: shown.length > 0 && shown.every((m) => st.selected.has(m.messageId)) });
    all.addEventListener("change", () => {
      for (const m of shown) { if (all.checked) st.selected.add(m.messageId); else st.selected.delete(m.messageId); }
      renderList();
    });
    const rows = shown.map((m) => {
      const box = h("input", { type: "checkbox", class: "select", checked: st.selected.has(m.messageId),
        "aria-label": `select ${m.messageId}` });
      box.addEventListener("change", () => {
        if (box.checked) st.selected.add(m.messageId); else st.selected.delete(m.messageId);
        renderList();
      });
      const p = m.properties;
      return h("tr", { class: "dl", dataset: { id: m.messageId, reason: p.DEAD_LETTER_REASON || "" } },
        td(box),
        td(h("a", { href: `#/msg/${enc(tenant)}/${enc(ns)}/${enc(topic)}/${enc(m.messageId)}`, class: "msg-link" },
          m.messageId), { class: "nowrap id" }),
        td(m.key ?? "–", { class: "nowrap key", title: m.key ?? "" }), td(p.DEAD_LETTER_REASON || "unspecified",
          { class: "nowrap" }),
        td(failureDescription(p) || "–", { class: "description", title: failureDescription(p) || "" }),
        td(fmtTime(p.DEAD_LETTER_TIME), { class: "nowrap time" }),
        h("td", { class: "num" }, p.DELIVERY_COUNT ?? "–"), td(shortTopic(p.REAL_TOPIC), { class: "nowrap" }),
        td(h("span", { class: "preview" }, preview(m)), { class: "payload-cell" }));
    });
    const prev = h("button", { type: "button", id: "page-prev", disabled: st.page === 0 }, "‹ Previous");
    const next = h("button", { type: "button", id: "page-next", disabled: st.page >= pages - 1 }, "Next ›");
    prev.addEventListener("click", () => { st.page -= 1; renderList(); });
    next.addEventListener("click", () => { st.page += 1; renderList(); });
    const truncated = messages.length >= LIST_LIMIT ? ` (the oldest ${LIST_LIMIT} are listed)` : "";
    clear(listHost).append(
      table([all, "message id", "key", "reason", "failure", "dead-lettered (UTC)",
        { label: "deliveries", num: true }, "source topic", "payload"], rows, { id: "dead-letters", class: "list" }),
      h("div", { class: "toolbar" }, prev,
        h("span", { id: "list-count" }, found.length
          ? `${st.page * PAGE + 1} to ${st.page * PAGE + shown.length} of ${found.length}${truncated}`
          : "No live dead letters match."),
        next));
  };

  await reload();
  return null;
}
