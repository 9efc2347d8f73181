// The failure groups of a dead letter topic (GET .../letterbox/deadLetters/groups): one row per
// group, largest first, with its reason, error class, normalised error text, count, first and last
// time, and a column chart of the DLQ over time stacked by group (every group's bars share the
// broker's time axis). Each row redrives or purges its group (the `group` filter), and its
// example message opens the detail view. Self-contained: groupsSection(...) returns the section
// and fills it when the answer arrives.
import { api } from "./api.js";
import { clear, errorBox, fmtNum, h, table, td } from "./dom.js";
import { fmtTime } from "./format.js";
import { purgeFlow, redriveFlow } from "./redrive.js";

const NS = "http://www.w3.org/2000/svg";
const COLORS = ["#3b6fd6", "#d6693b", "#3bab6f", "#a23bd6", "#d6b43b", "#3bb4d6", "#d63b7a", "#6f6f6f"];
const enc = encodeURIComponent;

function s(tag, attrs = {}, text = null) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== null) el.textContent = String(text);
  return el;
}

// groups: the broker's groups; axis: {start, bucketMs, buckets} -> stacked columns, one color per group
export function groupsChart(groups, axis, { width = 560, height = 160 } = {}) {
  const root = s("svg", { class: "chart", id: "groups-chart", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img" });
  root.append(s("title", {}, "dead letters over time by failure group"));
  if (!groups.length || !axis.buckets) {
    root.append(s("text", { x: 4, y: 16 }, "no data"));
    return root;
  }
  const left = 36, bottom = 22, top = 8;
  const plotW = width - left - 8, plotH = height - bottom - top;
  const totals = Array.from({ length: axis.buckets }, (_, i) => groups.reduce((n, g) => n + g.histogram[i], 0));
  const max = Math.max(...totals, 1);
  const slot = plotW / axis.buckets;
  root.append(s("text", { x: left - 4, y: top + 8, "text-anchor": "end" }, max));
  root.append(s("line", { class: "axis", x1: left, x2: width - 8, y1: top + plotH, y2: top + plotH }));
  for (let i = 0; i < axis.buckets; i += 1) {
    let y = top + plotH;
    groups.forEach((g, gi) => {
      const n = g.histogram[i];
      if (!n) return;
      const hgt = (n / max) * plotH;
      y -= hgt;
      const bar = s("rect", { class: "group-bar", x: left + i * slot + slot * 0.1, y, width: Math.max(1, slot * 0.8),
        height: hgt, fill: COLORS[gi % COLORS.length], "data-group": g.fingerprint, "data-count": n });
      bar.append(s("title", {}, `${fmtTime(axis.start + i * axis.bucketMs)}: ${n} × ${g.pattern || g.reason}`));
      root.append(bar);
    });
  }
  root.append(s("text", { x: left, y: height - 6 }, fmtTime(axis.start)));
  return root;
}

export function groupsSection(base, tenant, ns, topic, onChanged) {
  const host = h("section", { id: "dlq-groups" }, h("h2", {}, "Failure groups"), h("p", { class: "muted" }, "Loading…"));
  const load = async () => {
    let answer;
    try {
      answer = await api("GET", `${base}/letterbox/deadLetters/groups`);
    } catch (err) {
      clear(host).append(h("h2", {}, "Failure groups"), errorBox(err));
      return;
    }
    const groups = answer.groups;
    const rows = groups.map((g, gi) => {
      const filter = { group: g.fingerprint };
      const what = `failure group ${g.fingerprint}`;
      const done = () => { load(); if (onChanged) onChanged(); };
      const redrive = h("button", { type: "button", class: "group-redrive", "data-group": g.fingerprint }, "Redrive");
      redrive.addEventListener("click", () => redriveFlow(base, filter, what, host, done).catch((e) => host.append(errorBox(e))));
      const purge = h("button", { type: "button", class: "danger group-purge", "data-group": g.fingerprint }, "Purge");
      purge.addEventListener("click", () => purgeFlow(base, filter, what, done).catch((e) => host.append(errorBox(e))));
      const example = h("a", { href: `#/msg/${enc(tenant)}/${enc(ns)}/${enc(topic)}/${enc(g.example.messageId)}`,
        title: g.example.text }, "example");
      return h("tr", { "data-group": g.fingerprint },
        td(h("span", { class: "swatch", style: `color:${COLORS[gi % COLORS.length]}` }, "■")),
        td(fmtNum(g.count), { class: "num group-count" }), td(g.reason), td(g.errorClass || "–"),
        td(h("code", {}, g.pattern || "(no error text)")), td(fmtTime(g.firstDeadLetteredAt)),
        td(fmtTime(g.lastDeadLetteredAt)), td(example), td(h("code", {}, g.fingerprint)), td(h("span", {}, redrive, purge)));
    });
    clear(host).append(h("h2", {}, `Failure groups (${groups.length})`),
      groupsChart(groups, answer.histogram),
      groups.length
        ? table(["", { label: "count", num: true }, "reason", "error class", "error", "first", "last", "", "fingerprint", ""], rows,
          { id: "groups-table" })
        : h("p", { class: "muted" }, "No live dead letters."));
  };
  load();
  return { host, reload: load };
}
