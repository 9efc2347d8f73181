// The admin JSON API, as the CLI calls it, with the credentials of the login view.
// Credentials live in sessionStorage (this tab only) and go out as an Authorization header
// on every call; a 401 sends the user to the login view, a 403 is shown where it happened.
const KEY = "letterbox.console.auth";

export class ApiError extends Error {
  constructor(status, reason, path) {
    super(describe(status, reason, path));
    this.status = status;
    this.reason = reason;
    this.path = path;
  }
}

function describe(status, reason, path) {
  if (status === 401) return `Not signed in or credentials refused (401): ${reason}`;
  if (status === 403) return `Not allowed (403): ${reason}`;
  if (status === 0) return `Cannot reach the broker's admin API (${path}): ${reason}`;
  return `${reason} (HTTP ${status} from ${path})`;
}

export const auth = {
  get() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "null"); } catch { return null; }
  },
  setToken(token) {
    sessionStorage.setItem(KEY, JSON.stringify({ kind: "token", header: `Bearer ${token.trim()}`, who: "token" }));
  },
  setBasic(user, password) {
    const bytes = new TextEncoder().encode(`${user}:${password}`);
    const b64 = btoa(String.fromCharCode(...bytes));
    sessionStorage.setItem(KEY, JSON.stringify({ kind: "basic", header: `Basic ${b64}`, who: user }));
  },
  clear() { sessionStorage.removeItem(KEY); },
};

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export async function api(method, path, body = undefined, { quiet401 = false } = {}) {
  const headers = { Accept: "application/json" };
  const cred = auth.get();
  if (cred) headers.Authorization = cred.header;
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, e.message, path);
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!resp.ok) {
    const reason = (data && data.reason) || (typeof data === "string" && data) || resp.statusText;
    const err = new ApiError(resp.status, reason, path);
    if (resp.status === 401 && !quiet401) onUnauthorized(err);
    throw err;
  }
  return data;
}

// REST paths of the Pulsar admin v2 shape; every name segment encoded.
const enc = encodeURIComponent;
export const paths = {
  tenants: () => "/admin/v2/tenants",
  namespaces: (t) => `/admin/v2/namespaces/${enc(t)}`,
  topics: (t, ns) => `/admin/v2/persistent/${enc(t)}/${enc(ns)}`,
  deadLetterTopics: (t, ns) => `/admin/v2/namespaces/${enc(t)}/${enc(ns)}/letterbox/deadLetterTopics`,
  failing: (t, ns) => `/admin/v2/namespaces/${enc(t)}/${enc(ns)}/letterbox/failing`,
  poisonSuspects: (t, ns, topic, sub, limit = 1000) => `/admin/v2/persistent/${enc(t)}/${enc(ns)}/${enc(topic)}`
    + `/subscription/${enc(sub)}/letterbox/poison-suspects?limit=${limit}`,
  topic: (t, ns, topic) => `/admin/v2/persistent/${enc(t)}/${enc(ns)}/${enc(topic)}`,
};

// "persistent://t/ns/name" -> [t, ns, name]
export function splitTopic(full) {
  const m = /^(?:persistent|non-persistent):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(full);
  return m ? [m[1], m[2], m[3]] : null;
}

// Console links (hash routes) to a topic's views, from its full name.
const route = (kind, full, ...rest) => {
  const parts = splitTopic(full);
  return parts ? `#/${kind}/${[...parts, ...rest].map(enc).join("/")}` : null;
};
export const hrefs = {
  dlq: (full) => route("dlq", full),
  sub: (full, sub) => route("sub", full, sub),
  poison: (full, sub) => route("poison", full, sub),
};
