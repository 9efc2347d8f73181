// Charts as inline SVG, drawn here (no library): horizontal bars for counts by a label
// (reason, source topic), vertical bars for counts over time buckets, and a line over samples.
// Ticks are whole numbers for counts; every bar carries its count as text.
const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs = {}, text = null) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== null) el.textContent = String(text);
  return el;
}

function svg(width, height, title) {
  const root = s("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  root.append(s("title", {}, title));
  return root;
}

function ellipsis(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

// entries: [[label, count], ...] -> one bar per label, largest first
export function barChart(entries, { title = "", width = 420 } = {}) {
  const rows = [...entries].sort((a, b) => b[1] - a[1]).slice(0, 12);
  const rowH = 22;
  const height = Math.max(rows.length, 1) * rowH + 8;
  const root = svg(width, height, title);
  if (!rows.length) {
    root.append(s("text", { x: 4, y: 16 }, "no data"));
    return root;
  }
  const labelW = Math.min(190, width * 0.45);
  const max = Math.max(...rows.map((r) => r[1]), 1);
  const barMax = width - labelW - 50;
  rows.forEach(([label, count], i) => {
    const y = 4 + i * rowH;
    const t = s("text", { x: labelW - 6, y: y + 14, "text-anchor": "end" }, ellipsis(String(label), 30));
    t.append(s("title", {}, String(label)));
    root.append(t);
    const w = Math.max(2, (count / max) * barMax);
    root.append(s("rect", { class: "bar", x: labelW, y: y + 2, width: w, height: rowH - 6, "data-label": label }));
    root.append(s("text", { x: labelW + w + 4, y: y + 14 }, count));
  });
  return root;
}

// buckets: [[label, count], ...] in time order -> vertical bars with integer ticks
export function columnChart(buckets, { title = "", width = 560, height = 180 } = {}) {
  const root = svg(width, height, title);
  if (!buckets.length) {
    root.append(s("text", { x: 4, y: 16 }, "no data"));
    return root;
  }
  const left = 36, bottom = 34, top = 14;
  const plotW = width - left - 8, plotH = height - bottom - top;
  const max = Math.max(...buckets.map((b) => b[1]), 1);
  const step = Math.max(1, Math.ceil(max / 4));
  const top_ = Math.ceil(max / step) * step;
  for (let v = 0; v <= top_; v += step) {
    const y = top + plotH - (v / top_) * plotH;
    root.append(s("line", { class: "axis", x1: left, x2: width - 8, y1: y, y2: y, "stroke-dasharray": v ? "2 3" : "" }));
    root.append(s("text", { x: left - 4, y: y + 4, "text-anchor": "end" }, v));
  }
  const slot = plotW / buckets.length;
  const labelEvery = Math.ceil(buckets.length / 8);
  buckets.forEach(([label, count], i) => {
    const h = (count / top_) * plotH;
    const x = left + i * slot + slot * 0.15;
    root.append(s("rect", { class: "bar", x, y: top + plotH - h, width: Math.max(1, slot * 0.7), height: h,
      "data-label": label, "data-count": count }));
    if (count) root.append(s("text", { x: x + slot * 0.35, y: top + plotH - h - 2, "text-anchor": "middle" }, count));
    if (i % labelEvery === 0) {
      root.append(s("text", { x: x + slot * 0.35, y: height - bottom + 14, "text-anchor": "middle" }, label));
    }
  });
  return root;
}

// samples: [[timeMs, value], ...] -> a line with min/max ticks
export function lineChart(samples, { title = "", width = 560, height = 160, unit = "" } = {}) {
  const root = svg(width, height, title);
  if (samples.length < 1) {
    root.append(s("text", { x: 4, y: 16 }, "waiting for samples…"));
    return root;
  }
  const left = 48, bottom = 22, top = 10;
  const plotW = width - left - 8, plotH = height - bottom - top;
  const t0 = samples[0][0], t1 = Math.max(samples[samples.length - 1][0], t0 + 1);
  const max = Math.max(...samples.map((p) => p[1]), 1);
  const x = (t) => left + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v) => top + plotH - (v / max) * plotH;
  root.append(s("line", { class: "axis", x1: left, x2: width - 8, y1: top + plotH, y2: top + plotH }));
  root.append(s("line", { class: "axis", x1: left, x2: left, y1: top, y2: top + plotH }));
  const fmt = (v) => (Number.isInteger(v) ? v : v.toFixed(2));
  root.append(s("text", { x: left - 4, y: top + 8, "text-anchor": "end" }, `${fmt(max)}${unit}`));
  root.append(s("text", { x: left - 4, y: top + plotH, "text-anchor": "end" }, `0${unit}`));
  root.append(s("text", { x: width - 8, y: height - 4, "text-anchor": "end" }, `${Math.round((t1 - t0) / 1000)} s`));
  const d = samples.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
  root.append(s("path", { class: "line", d }));
  return root;
}

const BUCKETS = [[60_000, "minute"], [300_000, "5 minutes"], [900_000, "15 minutes"], [3600_000, "hour"],
  [6 * 3600_000, "6 hours"], [86400_000, "day"]];
const MIN_SLOTS = 12;
const MAX_SLOTS = 48;

// times (epoch ms) -> { unit, buckets: [[label, count]] }: the bucket size is chosen from the
// span (minute .. day, at most MAX_SLOTS), and at least MIN_SLOTS slots ending at the last one are
// shown, so dead letters that all fall in one hour are not one bar across the whole chart.
export function timeBuckets(times) {
  const valid = times.filter((t) => Number.isFinite(t) && t > 0);
  if (!valid.length) return { unit: "hour", buckets: [] };
  const lo = Math.min(...valid), hi = Math.max(...valid);
  const [size, unit] = BUCKETS.find(([ms]) => (hi - lo) / ms < MAX_SLOTS) || BUCKETS[BUCKETS.length - 1];
  const last = Math.floor(hi / size);
  const first = Math.min(Math.floor(lo / size), last - MIN_SLOTS + 1, last);
  const from = Math.max(first, last - MAX_SLOTS * 4);
  const counts = new Array(last - from + 1).fill(0);
  for (const t of valid) {
    const i = Math.floor(t / size) - from;
    if (i >= 0) counts[i] += 1;
  }
  const pad = (n) => String(n).padStart(2, "0");
  return {
    unit,
    buckets: counts.map((c, i) => {
      const d = new Date((from + i) * size);
      const day = `${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
      const label = size >= 86400_000 ? day : size >= 3600_000 ? `${day} ${pad(d.getUTCHours())}h`
        : `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
      return [label, c];
    }),
  };
}

// counts in time order -> a small inline bar strip (no axes) with the total as its title
export function sparkline(counts, { width = 120, height = 22, title = "" } = {}) {
  const root = svg(width, height, title);
  root.classList.add("spark");
  const max = Math.max(...counts, 1);
  const slot = width / Math.max(counts.length, 1);
  counts.forEach((c, i) => {
    const h = c ? Math.max(2, (c / max) * (height - 2)) : 1;
    root.append(s("rect", { class: c ? "bar" : "zero", x: i * slot + 1, y: height - h, width: Math.max(1, slot - 2),
      height: h, "data-count": c }));
  });
  return root;
}
