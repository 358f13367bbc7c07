// chronoq's dashboard: plain JavaScript modules served by chronoqd itself.
// The API token (when chronoqd has one) is asked for once and kept in this
// tab's sessionStorage; it goes only in the Authorization header.

const TOKEN_KEY = "chronoq.token";
const REFRESH_MS = 2000;
const STATES = ["scheduled", "running", "succeeded", "dead", "cancelled"];

const main = document.getElementById("main");
const status = document.getElementById("status");

/** An API error with chronoqd's code, message and field. */
export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "";
    this.field = e.field || "";
  }
}

/** Calls chronoqd's API; on 401 asks for the token (again) and tries again. */
export async function api(method, path, body) {
  for (;;) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit", cache: "no-store",
    });
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null; // not chronoqd's JSON (a proxy's error page): the status tells
    }
    if (res.status === 401) {
      await askToken(token ? "That token was refused." : "");
      continue;
    }
    if (!res.ok) throw new ApiError(res.status, json);
    return json;
  }
}

let signingIn = null; // the sign-in in progress, shared by the calls that wait for it

/** Shows the sign-in dialog until a token is entered. */
function askToken(message) {
  if (!signingIn) signingIn = showLogin(message).finally(() => { signingIn = null; });
  return signingIn;
}

function showLogin(message) {
  const dialog = document.getElementById("login");
  const form = document.getElementById("login-form");
  const input = document.getElementById("login-token");
  document.getElementById("login-error").textContent = message;
  input.value = "";
  return new Promise((resolve) => {
    form.onsubmit = () => {
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      resolve();
    };
    if (!dialog.open) dialog.showModal();
    input.focus();
  });
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function formatMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
}

/** The overview: every queue with its counts by state, lateness and flags. */
async function renderOverview() {
  const { queues = [] } = await api("GET", "/v1/queues");
  const totals = Object.fromEntries(STATES.map((s) => [s, 0]));
  for (const q of queues) for (const s of STATES) totals[s] += (q.counts && q.counts[s]) || 0;

  const view = el("section", { "aria-labelledby": "overview-title" },
    el("h1", { id: "overview-title" }, "Overview"),
    el("ul", { class: "totals" },
      el("li", {}, el("b", {}, queues.length), "queues"),
      ...STATES.map((s) => el("li", { class: s === "dead" && totals[s] ? "dead" : "" }, el("b", {}, totals[s]), s))));
  if (queues.length === 0) {
    view.append(el("p", { class: "empty" }, "No queues yet: enqueue a task and it appears here."));
  } else {
    const head = el("tr", {}, el("th", { scope: "col" }, "queue"),
      ...STATES.map((s) => el("th", { scope: "col" }, s)), el("th", { scope: "col" }, "oldest due"));
    const rows = queues.map((q) => {
      const counts = q.counts || {};
      return el("tr", {},
        el("td", {}, el("span", { class: "name" }, q.name), ...(q.paused ? [el("span", { class: "flag paused" }, "paused")] : []),
          ...(q.rate_limit ? [el("span", { class: "flag" }, "rate-limited")] : [])),
        ...STATES.map((s) => el("td", { "data-label": s, class: s === "dead" && counts[s] ? "dead" : "" },
          counts[s] || 0)),
        el("td", { "data-label": "oldest due" },
          q.oldest_due_lateness_ms > 0 ? formatMs(q.oldest_due_lateness_ms) : "–"));
    });
    view.append(el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
  }
  main.replaceChildren(view);
}

const routes = { "#/": renderOverview };

let timer = 0;
async function refresh() {
  clearTimeout(timer);
  const render = routes[location.hash] || renderOverview;
  try {
    await render();
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.classList.remove("error");
  } catch (e) {
    status.textContent = e instanceof ApiError ? `${e.code || "error"}: ${e.message}` : `chronoqd unreachable: ${e.message}`;
    status.classList.add("error");
  }
  // Live while the tab is visible; nothing polls while it is hidden.
  if (document.visibilityState === "visible") timer = setTimeout(refresh, REFRESH_MS);
}

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") refresh();
  else clearTimeout(timer);
});
window.addEventListener("hashchange", refresh);
refresh();
