// A queue's page (#/queue/NAME): counts, pause and resume, the keys with the
// longest backlogs, "Retry all dead", and its settings, editable.
import { ACTIONS, runEach, tasksWord } from "./actions.js";
import { api, ApiError, STATES } from "./api.js";
import { confirmAction, el, main, refresh, report, showFieldError, status, tableWrap, updateRows } from "./dom.js";

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

const KEYS_SHOWN = 10;
const DEAD_PAGE = 1000; // tasks asked for per page by "Retry all dead" (the API's largest)

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

/** The link to the task browser showing a queue's tasks of one key. */
function keyLink(queue, key) {
  const q = new URLSearchParams({ queue, key });
  return el("a", { class: "name", href: `#/tasks?${q}` }, key);
}

export function queuePage(name) {
  const path = `/v1/queues/${encodeURIComponent(name)}`;
  const counts = el("ul", { class: "totals" });
  const flag = el("span", { class: "flag paused", hidden: true }, "paused");
  const toggle = el("button", { type: "button", id: "pause" }, "Pause");
  // Why a pause or resume was refused (kept until the next click: the status line is redrawn).
  const pauseReport = el("div", { id: "pause-report", class: "outcome", role: "status" });
  const form = el("form", { class: "settings", id: "settings", novalidate: true });
  let paused = false;
  let dead = 0;

  // The keys with the longest backlogs (GET /v1/queues/{q}/keys).
  const keysBody = el("tbody");
  const keysTable = tableWrap("Keys with the longest backlogs", el("table", { class: "keys", id: "keys" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "key"), el("th", { scope: "col" }, "scheduled tasks"))),
    keysBody));
  const keysEmpty = el("p", { class: "empty", hidden: true }, "No scheduled task of this queue has a key.");
  const keys = el("section", { "aria-labelledby": "keys-title", hidden: true },
    el("h2", { id: "keys-title" }, "Longest key backlogs"), keysEmpty, keysTable);
  let noKeys = false; // chronoqd has no such endpoint (404)

  // Retry all dead: pages through the dead tasks and retries each.
  const retryAll = el("button", { type: "button", id: "retry-all-dead" }, "Retry all dead");
  const stop = el("button", { type: "button", id: "stop-retry", hidden: true }, "Stop");
  const progress = el("progress", { id: "retry-progress", hidden: true, max: "1", value: "0",
    "aria-labelledby": "retry-progress-text" });
  const progressText = el("span", { id: "retry-progress-text" });
  const retryReport = el("div", { id: "retry-report", class: "outcome", role: "status" });
  let running = false;
  let stopped = false;

  function show(q) {
    paused = q.paused;
    dead = (q.counts && q.counts.dead) || 0;
    flag.hidden = !paused;
    toggle.textContent = paused ? "Resume" : "Pause";
    counts.replaceChildren(...STATES.map((s) =>
      el("li", { class: s === "dead" && q.counts[s] ? "dead" : "" }, el("b", {}, q.counts[s] || 0), s)),
      ...(q.due === undefined ? [] : [el("li", {}, el("b", {}, q.due), "due now")]));
    retryAll.disabled = running || dead === 0;
  }

  async function loadKeys() {
    if (noKeys) return;
    let list;
    try {
      ({ keys: list = [] } = await api("GET", `${path}/keys?limit=${KEYS_SHOWN}`));
    } catch (e) {
      // The queue itself is asked for alongside: a 404 here means an older chronoqd.
      if (e.status !== 404) throw e;
      noKeys = true;
      keys.hidden = true;
      return;
    }
    keys.hidden = false;
    keysEmpty.hidden = list.length > 0;
    keysTable.hidden = list.length === 0;
    updateRows(keysBody, list, (k) => k.key, (k) => el("tr", { "data-key": k.key },
      el("td", {}, keyLink(name, k.key)),
      el("td", { "data-label": "scheduled tasks" }, k.backlog.toLocaleString("en-US"))));
  }

  toggle.addEventListener("click", async () => {
    try {
      show(await api("POST", `${path}/${paused ? "resume" : "pause"}`));
      status.textContent = `${name} ${paused ? "paused" : "resumed"}`;
      report(pauseReport, "");
    } catch (e) {
      report(pauseReport, `${paused ? "Resume" : "Pause"} ${name}: ${e.code || "error"}: ${e.message}`, [], true);
    }
  });

  stop.addEventListener("click", () => { stopped = true; });

  retryAll.addEventListener("click", async () => {
    try {
      show(await api("GET", path));
    } catch (e) {
      return report(retryReport, `${e.code || "error"}: ${e.message}`, [], true);
    }
    if (dead === 0) return report(retryReport, "No dead task to retry.");
    if (!await confirmAction(`Retry all ${tasksWord(dead)} dead in ${name}? ` +
      "Each is scheduled again now, with its attempts reset.", "Retry all dead")) return;
    running = true;
    stopped = false;
    retryAll.disabled = true;
    stop.hidden = false;
    progress.hidden = false;
    let total = dead;
    let done = 0;
    let ok = 0;
    const failed = [];
    // Progress is shown as it goes, but announced (role=status) only at the end.
    const tell = () => {
      total = Math.max(total, done);
      progress.max = total;
      progress.value = done;
      progressText.textContent = `retried ${ok.toLocaleString("en-US")} of ${total.toLocaleString("en-US")}` +
        (done > ok ? ` (${done - ok} failed)` : "");
    };
    report(retryReport, "");
    tell();
    try {
      // Dead tasks are listed in creation order and the cursor is a place in
      // that order, so retrying the tasks of a page does not move the next one.
      let cursor = "";
      do {
        const p = new URLSearchParams({ queue: name, state: "dead", limit: String(DEAD_PAGE) });
        if (cursor) p.set("cursor", cursor);
        const page = await api("GET", `/v1/tasks?${p}`);
        const tasks = page.tasks || [];
        cursor = page.next_cursor || "";
        total = Math.max(total, done + tasks.length);
        const r = await runEach(tasks, (t) => ACTIONS.retry.call(t.id), {
          idOf: (t) => t.id, stopped: () => stopped,
          onDone: (success) => { done++; if (success) ok++; tell(); },
        });
        failed.push(...r.failed);
      } while (cursor && !stopped);
      total = stopped ? total : done;
      report(retryReport, `${stopped ? "Stopped: r" : "R"}etried ${tasksWord(ok)} of ${total.toLocaleString("en-US")}` +
        (failed.length ? `; ${failed.length} failed:` : "."), failed);
    } catch (e) {
      report(retryReport, `Retried ${tasksWord(ok)}, then: ${e.code || "error"}: ${e.message}`, failed, true);
    } finally {
      running = false;
      stop.hidden = true;
      progress.hidden = true;
      progressText.textContent = "";
      retryAll.disabled = false;
      refresh();
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
      const [q] = await Promise.all([api("GET", path), loadKeys()]);
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
        el("p", {}, el("a", { href: "#/" }, "← Overview"), " · ",
          el("a", { href: `#/tasks?${new URLSearchParams({ queue: name })}` }, "Its tasks")),
        el("h1", { id: "queue-title" }, name, flag),
        counts, el("p", {}, toggle), pauseReport,
        keys,
        el("section", { "aria-labelledby": "dead-title" },
          el("h2", { id: "dead-title" }, "Dead tasks"),
          el("p", { class: "buttons" }, retryAll, stop, progress, progressText), retryReport),
        el("h2", {}, "Settings"), form));
    },
    async update() {
      const [q] = await Promise.all([api("GET", path), loadKeys()]);
      show(q);
    },
  };
}
