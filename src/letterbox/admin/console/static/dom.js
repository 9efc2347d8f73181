// DOM helpers: every piece of data goes in as text (textContent / attributes), never as HTML,
// so a payload, key or property can not inject markup into the console.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style") el.style.cssText = v; // CSSOM: allowed by the page's CSP, a style attribute is not
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function table(headers, rows, attrs = {}) {
  const head = h("tr", {}, headers.map((t) => h("th", { class: t.num ? "num" : null }, t.label ?? t)));
  return h("table", attrs, h("thead", {}, head), h("tbody", {}, rows));
}

export function td(content, attrs = {}) {
  return h("td", attrs, content);
}

export function num(n) {
  return h("td", { class: "num" }, fmtNum(n));
}

export function fmtNum(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  if (Number.isInteger(n)) return n.toLocaleString("en-US");
  return n.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

export function errorBox(err) {
  return h("div", { class: "error", role: "alert" }, err.message || String(err));
}

let toastTimer = null;
export function toast(text) {
  const el = document.getElementById("toast");
  el.textContent = text;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

// A modal confirmation; resolves true when the user presses OK.
export function confirmDialog(title, text, okLabel = "OK", extra = null) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  clear(document.getElementById("confirm-extra"));
  if (extra) document.getElementById("confirm-extra").append(extra);
  document.getElementById("confirm-ok").textContent = okLabel;
  dlg.returnValue = "";
  dlg.showModal();
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
  });
}

export function setCrumbs(items) {
  const nav = clear(document.getElementById("crumbs"));
  items.forEach(([label, href], i) => {
    nav.append(i < items.length - 1 && href ? h("a", { href }, label) : h("span", {}, label));
  });
}

// the breadcrumbs down to a namespace: failing (home) / tenants / tenant / namespace
export function nsCrumbs(tenant, ns) {
  const enc = encodeURIComponent;
  return [["failing", "#/"], ["tenants", "#/tenants"], [tenant, `#/t/${enc(tenant)}`],
    [ns, `#/ns/${enc(tenant)}/${enc(ns)}`]];
}
