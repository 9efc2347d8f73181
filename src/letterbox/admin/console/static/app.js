// The console's entry point: a hash router (#/..., so the server serves one page; #/ is what is
// failing right now), the header
// (breadcrumbs, who is signed in) and the login view. Each view renders into <main> and may
// return a cleanup function (stops its polling) that runs when the route changes.
import { api, auth, paths, setUnauthorizedHandler } from "./api.js";
import { clear, errorBox, h, setCrumbs } from "./dom.js";
import { namespacesView, tenantsView, topicsView } from "./browse.js";
import { dlqView } from "./dlq.js";
import { messageView } from "./message.js";
import { failingView } from "./overview.js";
import { poisonView } from "./poison.js";
import { subscriptionView } from "./subscription.js";

const main = document.getElementById("view");
let cleanup = null;
let loginReason = null;

const ROUTES = [
  [/^$/, failingView],
  [/^tenants$/, tenantsView],
  [/^t\/([^/]+)$/, namespacesView],
  [/^ns\/([^/]+)\/([^/]+)$/, topicsView],
  [/^dlq\/([^/]+)\/([^/]+)\/([^/]+)$/, dlqView],
  [/^msg\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)$/, messageView],
  [/^sub\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)$/, subscriptionView],
  [/^poison\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)$/, poisonView],
  [/^login$/, loginView],
];

function showWho() {
  const cred = auth.get();
  document.getElementById("who").textContent = cred ? `signed in (${cred.who})` : "";
  document.getElementById("logout").hidden = !cred;
}

async function route() {
  if (cleanup) { try { cleanup(); } catch (e) { console.warn(e); } }
  cleanup = null;
  showWho();
  const path = location.hash.replace(/^#\/?/, "");
  for (const [rx, view] of ROUTES) {
    const m = rx.exec(path);
    if (m) {
      // a fresh root per visit: a slow answer for a page already left lands in a detached node
      const root = h("div", { class: "page" });
      clear(main).append(root);
      try {
        cleanup = (await view(root, ...m.slice(1).map(decodeURIComponent))) || null;
      } catch (err) {
        if (err.status !== 401) root.append(errorBox(err));
      }
      return;
    }
  }
  clear(main).append(h("p", { class: "error" }, `No such page: #/${path}`), h("a", { href: "#/" }, "Home"));
}

function loginView(root) {
  setCrumbs([["sign in", null]]);
  const back = sessionStorage.getItem("letterbox.console.back") || "#/";
  const status = h("div", { id: "login-status" });
  if (loginReason) status.append(h("div", { class: "error", role: "alert" }, loginReason));
  const kind = h("select", { id: "login-kind" }, h("option", { value: "token" }, "Token (JWT)"),
    h("option", { value: "basic" }, "User and password (basic)"));
  const token = h("textarea", { id: "login-token", rows: 4, cols: 50, autocomplete: "off", spellcheck: "false" });
  const user = h("input", { id: "login-user", autocomplete: "username" });
  const password = h("input", { id: "login-password", type: "password", autocomplete: "current-password" });
  const tokenRow = h("label", {}, "Token", token);
  const basicRows = h("div", { hidden: true }, h("label", {}, "User", user), h("label", {}, "Password", password));
  kind.addEventListener("change", () => {
    tokenRow.hidden = kind.value !== "token";
    basicRows.hidden = kind.value !== "basic";
  });
  const form = h("form", { class: "login", id: "login-form" },
    h("p", {}, "This broker asks for credentials. They are kept in this browser tab only (sessionStorage) and sent "
      + "with every admin API call."),
    h("label", {}, "Method", kind), tokenRow, basicRows,
    h("button", { type: "submit", class: "primary", id: "login-submit" }, "Sign in"), status);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (kind.value === "token") auth.setToken(token.value);
    else auth.setBasic(user.value, password.value);
    clear(status);
    try {
      await api("GET", paths.tenants(), undefined, { quiet401: true });
    } catch (err) {
      if (err.status === 401) {
        auth.clear();
        status.append(h("div", { class: "error", role: "alert" }, err.message));
        return;
      }
      // 403: the credentials are good, this role just may not list tenants
    }
    loginReason = null;
    sessionStorage.removeItem("letterbox.console.back");
    location.hash = back === "#/login" ? "#/" : back;
  });
  root.append(h("h1", {}, "Sign in"), form);
}

setUnauthorizedHandler((err) => {
  loginReason = auth.get() ? err.message : null;
  auth.clear();
  if (location.hash !== "#/login") {
    sessionStorage.setItem("letterbox.console.back", location.hash || "#/");
    location.hash = "#/login";
  }
});

document.getElementById("logout").addEventListener("click", () => {
  auth.clear();
  loginReason = null;
  sessionStorage.removeItem("letterbox.console.back");
  location.hash = "#/login";
});
window.addEventListener("hashchange", route);
route();
