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
  if (ms < 120000) return `${ms % 1000 === 0 ? ms / 1000 : (ms / 1000).toFixed(1)} s`;
  if (ms < 7200000) return `${Math.round(ms / 60000)} min`;
  return `${Math.round(ms / 3600000)} h`;
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
        el("td", {}, el("a", { class: "name", href: `#/queue/${encodeURIComponent(q.name)}` }, q.name),
          ...(q.paused ? [el("span", { class: "flag paused" }, "paused")] : []),
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

/** A queue's settings as the form edits them: [wire field, label, help]. */
const SETTINGS = [
  ["concurrency", "Concurrency", "tasks of the queue running at once (1–100,000; empty: no limit)"],
  ["max_in_flight_per_key", "In flight per key", "a key's tasks started and unfinished (empty: 1)"],
  ["max_pending_per_key", "Pending per key", "a key's tasks waiting to start (empty: no limit)"],
  ["max_attempts", "Max attempts", "for tasks enqueued without one (empty: 25)"],
  ["backoff.base_ms", "Backoff base (ms)", "first retry delay (empty: the engine's)"],
  ["backoff.cap_ms", "Backoff cap (ms)", "largest retry delay"],
  ["retention_ms", "Retention (ms)", "how long finished tasks stay visible"],
  ["rate_limit.count", "Rate limit: claims", "at most this many claims per period (empty: none)"],
  ["rate_limit.period_ms", "Rate limit: period (ms)", "the sliding window"],
];

/** The value of a dotted wire field in a queue ("" when unset). */
function settingOf(q, field) {
  const [a, b] = field.split(".");
  const v = b ? (q[a] || {})[b] : q[a];
  return v === null || v === undefined ? "" : String(v);
}

/** The PUT body of the form: each setting, null for an empty one (its default). */
function settingsBody(form) {
  const num = (field) => {
    const v = form.elements[field].value.trim();
    return v === "" ? null : Number(v);
  };
  const body = {};
  for (const [field] of SETTINGS) if (!field.includes(".")) body[field] = num(field);
  for (const group of ["backoff", "rate_limit"]) {
    const parts = SETTINGS.filter(([f]) => f.startsWith(group + ".")).map(([f]) => f);
    const values = Object.fromEntries(parts.map((f) => [f.split(".")[1], num(f)]));
    // All empty: back to the default; otherwise what was given (chronoqd names a missing member).
    body[group] = Object.values(values).every((v) => v === null) ? null
      : Object.fromEntries(Object.entries(values).filter(([, v]) => v !== null));
  }
  return body;
}

/** Shows chronoqd's error at the field it names (or at the form's end). */
function showFieldError(form, error) {
  for (const p of form.querySelectorAll(".field-error")) p.textContent = "";
  for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  if (!error) return;
  const input = error.field && form.elements[error.field];
  const where = input ? form.querySelector(`#err-${CSS.escape(error.field)}`) : form.querySelector("#err-form");
  where.textContent = error.message;
  if (input) {
    input.setAttribute("aria-invalid", "true");
    input.focus();
  }
}

/** A queue: counts, pause and resume, and its settings, editable. */
function queuePage(name) {
  const path = `/v1/queues/${encodeURIComponent(name)}`;
  const counts = el("ul", { class: "totals" });
  const flag = el("span", { class: "flag paused", hidden: "" }, "paused");
  const toggle = el("button", { type: "button", id: "pause" }, "Pause");
  const form = el("form", { class: "settings", id: "settings", novalidate: "" });
  let paused = false;

  function show(q) {
    paused = q.paused;
    flag.hidden = !paused;
    toggle.textContent = paused ? "Resume" : "Pause";
    counts.replaceChildren(...STATES.map((s) =>
      el("li", { class: s === "dead" && q.counts[s] ? "dead" : "" }, el("b", {}, q.counts[s] || 0), s)));
  }

  toggle.addEventListener("click", async () => {
    try {
      show(await api("POST", `${path}/${paused ? "resume" : "pause"}`));
      status.textContent = `${name} ${paused ? "paused" : "resumed"}`;
    } catch (e) {
      status.textContent = `${e.code || "error"}: ${e.message}`;
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const q = await api("PUT", path, settingsBody(form));
      showFieldError(form, null);
      for (const [field] of SETTINGS) form.elements[field].value = settingOf(q, field);
      show(q);
      form.querySelector("#err-form").textContent = "";
      status.textContent = `${name}: settings saved`;
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      showFieldError(form, e);
    }
  });

  return {
    async mount() {
      const q = await api("GET", path);
      form.replaceChildren(
        ...SETTINGS.map(([field, label, help]) => el("div", { class: "field" },
          el("label", { for: `set-${field}` }, label),
          el("input", { id: `set-${field}`, name: field, inputmode: "numeric", value: settingOf(q, field),
            "aria-describedby": `help-${field} err-${field}` }),
          el("small", { id: `help-${field}` }, help),
          el("p", { id: `err-${field}`, class: "field-error error", role: "alert" }))),
        el("p", { id: "err-form", class: "field-error error", role: "alert" }),
        el("button", { type: "submit" }, "Save settings"));
      show(q);
      main.replaceChildren(el("section", { "aria-labelledby": "queue-title" },
        el("p", {}, el("a", { href: "#/" }, "← Overview")),
        el("h1", { id: "queue-title" }, name, flag),
        counts, el("p", {}, toggle),
        el("h2", {}, "Settings"), form));
    },
    async update() { show(await api("GET", path)); },
  };
}

/** A schedule's rule in words. */
function ruleInWords(sc) {
  if (sc.cron) return `cron ${sc.cron} (${sc.tz || "UTC"})`;
  if (sc.every_ms) return `every ${formatMs(sc.every_ms)}`;
  if (sc.fixed_delay_ms) return `${formatMs(sc.fixed_delay_ms)} after each run ends`;
  return "–";
}

/** An instant in a zone ("local": the viewer's), as YYYY-MM-DD HH:MM:SS. */
function formatIn(instant, zone) {
  const options = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
    minute: "2-digit", second: "2-digit", hourCycle: "h23" };
  if (zone !== "local") options.timeZone = zone;
  const parts = Object.fromEntries(new Intl.DateTimeFormat("en-CA", options).formatToParts(new Date(instant))
    .map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}`;
}

/** Every schedule: its rule, the next 5 runs in its zone and the viewer's, the last run, pause. */
function schedulesPage() {
  const nextRuns = new Map(); // name@next_run -> instants, asked for once per occurrence
  const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

  async function runsOf(sc) {
    const key = `${sc.name}@${sc.next_run}`;
    if (!nextRuns.has(key)) {
      const { next = [] } = await api("GET", `/v1/schedules/${encodeURIComponent(sc.name)}/next?count=5`);
      nextRuns.set(key, next);
    }
    return nextRuns.get(key);
  }

  async function render() {
    const schedules = [];
    let cursor = "";
    do {
      const page = await api("GET", `/v1/schedules?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      schedules.push(...(page.schedules || []));
      cursor = page.next_cursor || "";
    } while (cursor);
    const view = el("section", { "aria-labelledby": "schedules-title" },
      el("h1", { id: "schedules-title" }, "Schedules"));
    if (schedules.length === 0) {
      view.append(el("p", { class: "empty" }, "No schedules yet."));
      return main.replaceChildren(view);
    }
    const rows = [];
    for (const sc of schedules) {
      const zone = sc.tz || "UTC";
      const runs = await runsOf(sc);
      const toggle = el("button", { type: "button", class: "toggle", "data-schedule": sc.name },
        sc.paused ? "Resume" : "Pause");
      toggle.addEventListener("click", async () => {
        await api("POST", `/v1/schedules/${encodeURIComponent(sc.name)}/${sc.paused ? "resume" : "pause"}`);
        refresh();
      });
      const last = sc.last_run
        ? `${sc.last_run.state} (${formatIn(sc.last_run.scheduled_for, zone)})` +
          (sc.last_run.error ? `: ${sc.last_run.error}` : "")
        : "–";
      rows.push(el("tr", { "data-schedule": sc.name },
        el("td", {}, el("span", { class: "name" }, sc.name),
          ...(sc.paused ? [el("span", { class: "flag paused" }, "paused")] : [])),
        el("td", { "data-label": "queue" }, sc.queue),
        el("td", { "data-label": "rule", class: "rule" }, ruleInWords(sc)),
        el("td", { "data-label": `next (${zone})`, class: "runs" },
          ...runs.map((r) => el("div", {}, formatIn(r, zone)))),
        el("td", { "data-label": `next (${viewerZone})`, class: "runs local" },
          ...runs.map((r) => el("div", {}, formatIn(r, "local")))),
        el("td", { "data-label": "last run" }, last),
        el("td", {}, toggle)));
    }
    view.append(el("table", { class: "schedules" },
      el("thead", {}, el("tr", {}, ...["schedule", "queue", "rule", "next runs (its zone)",
        `next runs (${viewerZone})`, "last run", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...rows)));
    main.replaceChildren(view);
  }
  return { mount: render, update: render };
}

/** The query of a hash ("#/tasks?queue=q&state=dead") as URLSearchParams. */
function hashQuery(hash) {
  const i = hash.indexOf("?");
  return new URLSearchParams(i < 0 ? "" : hash.slice(i + 1));
}

/** A button that calls the API, then refreshes the page (errors go to the status line). */
function actionButton(label, method, path, attrs = {}) {
  const b = el("button", { type: "button", ...attrs }, label);
  b.addEventListener("click", async () => {
    try {
      await api(method, path);
      status.textContent = `${label}: done`;
      refresh();
    } catch (e) {
      status.textContent = `${label}: ${e.code || "error"}: ${e.message}`;
      status.classList.add("error");
    }
  });
  return b;
}

/** The actions a task in its state allows. */
function taskActions(t) {
  const path = `/v1/tasks/${encodeURIComponent(t.id)}`;
  const out = [];
  if (t.state === "dead") out.push(actionButton("Retry", "POST", `${path}/retry`, { "data-task": t.id }));
  if (t.state === "scheduled") out.push(actionButton("Cancel", "DELETE", path, { "data-task": t.id }));
  return out;
}

/** The task browser: filter by queue, state and key; a page at a time. */
function tasksPage(query) {
  const filter = { queue: query.get("queue") || "", state: query.get("state") || "", key: query.get("key") || "" };
  const cursors = [""]; // the cursor of each page seen, to go back
  let page = 0;

  const form = el("form", { id: "task-filter", class: "filters" },
    el("label", { for: "f-queue" }, "Queue"), el("input", { id: "f-queue", name: "queue", value: filter.queue }),
    el("label", { for: "f-state" }, "State"),
    el("select", { id: "f-state", name: "state" }, el("option", { value: "" }, "any"),
      ...STATES.map((st) => el("option", st === filter.state ? { value: st, selected: "" } : { value: st }, st))),
    el("label", { for: "f-key" }, "Key"), el("input", { id: "f-key", name: "key", value: filter.key }),
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    for (const name of ["queue", "state", "key"]) {
      const v = form.elements[name].value.trim();
      if (v) q.set(name, v);
    }
    location.hash = `#/tasks?${q}`;
  });
  const results = el("div", { id: "task-results" });
  const prev = el("button", { type: "button", id: "prev-page" }, "← Previous");
  const next = el("button", { type: "button", id: "next-page" }, "Next →");
  prev.addEventListener("click", () => { if (page > 0) { page--; render(); } });
  next.addEventListener("click", () => { if (cursors[page + 1] !== undefined) { page++; render(); } });

  async function render() {
    const q = new URLSearchParams({ limit: "50" });
    for (const [k, v] of Object.entries(filter)) if (v) q.set(k, v);
    if (cursors[page]) q.set("cursor", cursors[page]);
    const { tasks = [], next_cursor: nextCursor } = await api("GET", `/v1/tasks?${q}`);
    cursors.length = page + 1;
    if (nextCursor) cursors.push(nextCursor);
    prev.disabled = page === 0;
    next.disabled = !nextCursor;
    if (tasks.length === 0) {
      results.replaceChildren(el("p", { class: "empty" }, "No task matches."));
      return;
    }
    results.replaceChildren(el("table", { class: "tasks" },
      el("thead", {}, el("tr", {}, ...["task", "queue", "state", "key", "attempt", "run at", "last error", ""]
        .map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...tasks.map((t) => el("tr", { "data-task": t.id },
        el("td", {}, el("a", { class: "name", href: `#/task/${encodeURIComponent(t.id)}` }, t.id)),
        el("td", { "data-label": "queue" }, t.queue),
        el("td", { "data-label": "state", class: t.state === "dead" ? "dead" : "" }, t.state),
        el("td", { "data-label": "key" }, t.key ?? "–"),
        el("td", { "data-label": "attempt" }, `${t.attempt}/${t.max_attempts}`),
        el("td", { "data-label": "run at" }, formatIn(t.run_at, "local")),
        el("td", { "data-label": "last error", class: "error-text" }, (t.last_error || "–").split("\n")[0]),
        el("td", {}, ...taskActions(t)))))));
  }

  return {
    async mount() {
      await render();
      main.replaceChildren(el("section", { "aria-labelledby": "tasks-title" },
        el("h1", { id: "tasks-title" }, "Tasks"), form, results, el("p", { class: "pager" }, prev, " ", next)));
    },
    update: render,
  };
}

/** One task, whole: payload, attempts, error, lease, webhook; retry or cancel. */
function taskPage(id) {
  async function render() {
    const t = await api("GET", `/v1/tasks/${encodeURIComponent(id)}`);
    const row = (label, value) => [el("dt", {}, label), el("dd", {}, value)];
    main.replaceChildren(el("section", { "aria-labelledby": "task-title" },
      el("p", {}, el("a", { href: `#/tasks?queue=${encodeURIComponent(t.queue)}` }, `← Tasks of ${t.queue}`)),
      el("h1", { id: "task-title" }, t.id),
      el("dl", { class: "task" },
        ...row("state", el("span", { id: "task-state", class: t.state === "dead" ? "dead" : "" }, t.state)),
        ...row("queue", t.queue), ...row("key", t.key ?? "–"),
        ...row("attempt", `${t.attempt} of ${t.max_attempts}`), ...row("priority", t.priority),
        ...row("run at", `${formatIn(t.run_at, "local")} (${t.run_at})`),
        ...(t.lease_until ? row("lease until", `${formatIn(t.lease_until, "local")} (${t.lease_until})`) : []),
        ...(t.target ? row("webhook", `${t.target.method} ${t.target.url}`) : []),
        ...(t.last_response ? row("last response", t.last_response) : []),
        ...row("created", t.created_at), ...row("updated", t.updated_at)),
      el("h2", {}, "Last error"), el("pre", { class: "error-text" }, t.last_error || "–"),
      el("h2", {}, "Payload"), el("pre", { id: "task-payload" }, JSON.stringify(t.payload, null, 2)),
      el("p", {}, ...taskActions(t))));
  }
  return { mount: render, update: render };
}

/** The overview: rendered whole at each refresh. */
function overviewPage() {
  return { mount: renderOverview, update: renderOverview };
}

/** The page for a location hash. */
function pageFor(hash) {
  const m = /^#\/queue\/(.+)$/.exec(hash);
  if (m) return queuePage(decodeURIComponent(m[1]));
  if (hash === "#/schedules") return schedulesPage();
  if (hash === "#/tasks" || hash.startsWith("#/tasks?")) return tasksPage(hashQuery(hash));
  const task = /^#\/task\/(.+)$/.exec(hash);
  if (task) return taskPage(decodeURIComponent(task[1]));
  return overviewPage();
}

let timer = 0;
let current = null; // { hash, page }
async function refresh() {
  clearTimeout(timer);
  const hash = location.hash || "#/";
  try {
    if (!current || current.hash !== hash) {
      const page = pageFor(hash);
      await page.mount(); // if it fails, the next refresh mounts it again
      current = { hash, page };
      main.focus({ preventScroll: true });
    } else {
      await current.page.update();
    }
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
