// The task browser (#/tasks?queue=&state=&key=&id_prefix=&created_after=&created_before=):
// filters kept in the hash, a page at a time, and a selection to retry or
// cancel many tasks at once.
import { ACTIONS, runEach, taskActions, tasksWord } from "./actions.js";
import { api, ApiError, STATES } from "./api.js";
import { confirmAction, el, main, refresh, report, showFieldError, tableWrap, updateRows } from "./dom.js";
import { formatIn, fromLocalInput, toLocalInput } from "./format.js";

const PAGE_SIZE = 50;

/**
 * The filters, in the hash as in the API's query: [name, label, kind]. A
 * time is RFC 3339 UTC in the hash and the viewer's zone in its input.
 */
const FILTERS = [
  ["queue", "Queue", "text"], ["state", "State", "state"], ["key", "Key", "text"],
  ["id_prefix", "Id prefix", "text"],
  ["created_after", "Created from", "time"], ["created_before", "Created before", "time"],
];

/** A filter's label and input, showing `value`. */
function filterField([name, label, kind], value) {
  const attrs = { id: `f-${name}`, name, "aria-describedby": `err-${name}` };
  let input;
  if (kind === "state") {
    input = el("select", attrs, el("option", { value: "" }, "any"),
      ...STATES.map((st) => el("option", { value: st, selected: st === value }, st)));
  } else if (kind === "time") {
    input = el("input", { ...attrs, type: "datetime-local", step: "1", value: toLocalInput(value),
      "aria-describedby": `err-${name} tz-note` });
  } else {
    input = el("input", { ...attrs, value });
  }
  return el("span", { class: "filter" }, el("label", { for: `f-${name}` }, label), input);
}

function taskRow(t, selected, handlers) {
  const pick = el("input", { type: "checkbox", class: "pick", value: t.id, "aria-label": `Select task ${t.id}`,
    checked: selected.has(t.id) });
  return el("tr", { "data-task": t.id },
    el("td", { class: "select" }, pick),
    el("td", { "data-label": "task" }, el("a", { class: "name", href: `#/task/${encodeURIComponent(t.id)}` }, t.id)),
    el("td", { "data-label": "queue" }, t.queue),
    el("td", { "data-label": "state", class: t.state === "dead" ? "dead" : "" }, t.state),
    el("td", { "data-label": "key" }, t.key ?? "–"),
    el("td", { "data-label": "attempt" }, `${t.attempt}/${t.max_attempts}`),
    el("td", { "data-label": "run at" }, formatIn(t.run_at, "local")),
    el("td", { "data-label": "last error", class: "error-text" }, (t.last_error || "–").split("\n")[0]),
    el("td", { class: "actions" }, ...taskActions(t, ["retry", "cancel"], handlers)));
}

export function tasksPage(query) {
  const filter = Object.fromEntries(FILTERS.map(([name]) => [name, query.get(name) || ""]));
  const cursors = [""]; // the cursor of each page seen, to go back
  let page = 0;
  let shown = []; // the tasks on this page
  const selected = new Set(); // ids, kept across pages and refreshes

  const fieldError = (name) => el("span", { id: `err-${name}`, class: "field-error error", role: "alert" });
  const form = el("form", { id: "task-filter", class: "filters", novalidate: true },
    ...FILTERS.map((f) => filterField(f, filter[f[0]])),
    el("button", { type: "submit" }, "Filter"),
    el("small", { id: "tz-note" }, `times in ${Intl.DateTimeFormat().resolvedOptions().timeZone}`),
    el("p", { class: "errors" }, ...FILTERS.map(([name]) => fieldError(name)), fieldError("form")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    for (const [name, , kind] of FILTERS) {
      const raw = form.elements[name].value.trim();
      const v = kind === "time" ? fromLocalInput(raw) : raw;
      if (v) q.set(name, v);
    }
    const hash = `#/tasks?${q}`;
    if (location.hash === hash) refresh(); // the same filters again: no hashchange, so ask
    else location.hash = hash;
  });

  // The selection and what can be done to it.
  const pickAll = el("input", { type: "checkbox", id: "select-page" });
  const count = el("span", { id: "selected-count", "aria-live": "polite" });
  const retry = el("button", { type: "button", id: "retry-selected" }, "Retry selected");
  const cancel = el("button", { type: "button", id: "cancel-selected", class: "danger" }, "Cancel selected");
  const clear = el("button", { type: "button", id: "clear-selection" }, "Clear selection");
  const outcome = el("div", { id: "bulk-report", class: "outcome", role: "status" });
  const toolbar = el("div", { class: "toolbar", role: "group", "aria-label": "Selected tasks" },
    el("label", { class: "check" }, pickAll, "Select all on this page"), count, retry, cancel, clear);

  function showSelection() {
    const onPage = shown.filter((t) => selected.has(t.id)).length;
    pickAll.checked = shown.length > 0 && onPage === shown.length;
    pickAll.indeterminate = onPage > 0 && onPage < shown.length;
    pickAll.disabled = shown.length === 0;
    count.textContent = `${tasksWord(selected.size)} selected`;
    for (const b of [retry, cancel, clear]) b.disabled = selected.size === 0;
  }

  pickAll.addEventListener("change", () => {
    for (const t of shown) {
      if (pickAll.checked) selected.add(t.id);
      else selected.delete(t.id);
    }
    for (const box of results.querySelectorAll("input.pick")) box.checked = selected.has(box.value);
    showSelection();
  });
  clear.addEventListener("click", () => {
    selected.clear();
    for (const box of results.querySelectorAll("input.pick")) box.checked = false;
    showSelection();
  });

  async function onSelection(action) {
    const a = ACTIONS[action];
    const ids = [...selected];
    if (!ids.length) return;
    const what = `${a.label} ${tasksWord(ids.length)}`;
    if (!await confirmAction(`${what}? ${a.many}`, what)) return;
    retry.disabled = cancel.disabled = true;
    report(outcome, `${a.label}: 0 of ${ids.length}…`);
    let done = 0;
    const r = await runEach(ids, a.call, {
      onDone: () => { done++; outcome.firstChild.textContent = `${a.label}: ${done} of ${ids.length}…`; },
    });
    const failedIds = new Set(r.failed.map((f) => f.id));
    for (const id of ids) if (!failedIds.has(id)) selected.delete(id);
    report(outcome, `${a.done[0].toUpperCase()}${a.done.slice(1)} ${r.ok} of ${tasksWord(ids.length)}` +
      (r.failed.length ? `; ${r.failed.length} failed (still selected):` : "."), r.failed);
    showSelection();
    refresh();
  }
  retry.addEventListener("click", () => onSelection("retry"));
  cancel.addEventListener("click", () => onSelection("cancel"));

  const results = el("div", { id: "task-results" });
  results.addEventListener("change", (event) => {
    const box = event.target;
    if (!box.classList || !box.classList.contains("pick")) return;
    if (box.checked) selected.add(box.value);
    else selected.delete(box.value);
    showSelection();
  });
  const tbody = el("tbody");
  const table = tableWrap("Tasks", el("table", { class: "tasks" },
    el("thead", {}, el("tr", {},
      el("th", { scope: "col", class: "select" }, el("span", { class: "sr-only" }, "selected")),
      ...["task", "queue", "state", "key", "attempt", "run at", "last error", ""]
        .map((h) => el("th", { scope: "col" }, h)))),
    tbody));
  const empty = el("p", { class: "empty" }, "No task matches.");
  const handlers = {
    onOutcome: (text, isError) => report(outcome, text, [], isError),
    onChange: () => refresh(),
  };

  const prev = el("button", { type: "button", id: "prev-page" }, "← Previous");
  const next = el("button", { type: "button", id: "next-page" }, "Next →");
  prev.addEventListener("click", () => { if (page > 0) { page--; refresh(); } });
  next.addEventListener("click", () => { if (cursors[page + 1] !== undefined) { page++; refresh(); } });

  async function render() {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    for (const [k, v] of Object.entries(filter)) if (v) q.set(k, v);
    if (cursors[page]) q.set("cursor", cursors[page]);
    let answer;
    try {
      answer = await api("GET", `/v1/tasks?${q}`);
      showFieldError(form, null);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 400) throw e;
      // A filter chronoqd refuses (a bad id prefix, say): shown at its field.
      showFieldError(form, e, { focus: false });
      answer = { tasks: [], next_cursor: null };
    }
    const { tasks = [], next_cursor: nextCursor } = answer;
    cursors.length = page + 1;
    if (nextCursor) cursors.push(nextCursor);
    prev.disabled = page === 0;
    next.disabled = !nextCursor;
    shown = tasks;
    results.replaceChildren(tasks.length ? table : empty);
    updateRows(tbody, tasks, (t) => t.id, (t) => taskRow(t, selected, handlers));
    for (const box of tbody.querySelectorAll("input.pick")) box.checked = selected.has(box.value);
    showSelection();
  }

  return {
    async mount() {
      await render();
      main.replaceChildren(el("section", { "aria-labelledby": "tasks-title" },
        el("h1", { id: "tasks-title" }, "Tasks"), form, toolbar, outcome, results,
        el("p", { class: "pager" }, prev, " ", next)));
    },
    update: render,
  };
}
