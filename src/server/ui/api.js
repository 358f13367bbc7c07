// chronoqd's API as the dashboard calls it: one fetch wrapper, its error
// type, and the sign-in. The API token (when chronoqd has one) is asked for
// once and kept in this tab's sessionStorage; it goes only in the
// Authorization header.

const TOKEN_KEY = "chronoq.token";

/** A task's states, in the order the pages show them. */
export const STATES = ["scheduled", "running", "succeeded", "dead", "cancelled"];

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
