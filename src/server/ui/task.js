// One task's page (#/task/ID): everything about it, and what can be done to
// it (retry, cancel, reschedule, purge), each asked first and reported in
// the page's own status area.
import { taskActions, taskPath } from "./actions.js";
import { api, ApiError } from "./api.js";
import { confirmAction, el, main, refresh, report, showFieldError, tableWrap, updateRows } from "./dom.js";
import { formatIn, formatMs, fromLocalInput, toLocalInput } from "./format.js";

/** Header names whose values are secrets: shown masked. */
const SECRET_HEADER = /auth|token|secret|key|cookie|password|signature/i;

function target(t) {
  const g = t.target;
  const headers = Object.entries(g.headers || {});
  return el("div", { id: "task-target" },
    el("div", {}, el("b", {}, g.method || "POST"), " ", el("span", { class: "url" }, g.url)),
    el("div", {}, `timeout ${formatMs(g.timeout_ms ?? 10000)}`),
    headers.length ? el("ul", { class: "headers" }, ...headers.map(([k, v]) =>
      el("li", {}, `${k}: ${SECRET_HEADER.test(k) ? "•••••• (hidden)" : v}`))) : null);
}

/** One finished attempt: its error, else its webhook response, in the last cell. */
function attemptRow(a) {
  const detail = a.error ?? a.response ?? "–";
  return el("tr", {},
    el("td", {}, a.attempt), el("td", { class: a.outcome === "succeeded" ? "" : "dead" }, a.outcome),
    el("td", { title: a.started_at }, formatIn(a.started_at, "local")),
    el("td", {}, formatMs(a.duration_ms)), el("td", {}, a.node ?? "–"), el("td", {}, a.worker ?? "–"),
    el("td", { class: "error-text" }, detail));
}

export function taskPage(id) {
  const details = el("dl", { class: "task" });
  const error = el("pre", { class: "error-text" });
  const payload = el("pre", { id: "task-payload" });
  // The last attempts, oldest first (GET /v1/tasks/{id}?attempts=true).
  const attemptRows = el("tbody");
  const attemptTable = tableWrap("Attempts", el("table", { id: "task-attempts", class: "attempts" },
    el("thead", {}, el("tr", {}, ...["#", "outcome", "started", "took", "node", "worker",
      "error or response"].map((h) => el("th", { scope: "col" }, h)))),
    attemptRows));
  const noAttempts = el("p", { class: "empty" }, "None finished yet.");
  const attempts = el("div", { id: "task-attempts-area" });
  const title = el("h1", { id: "task-title" }, id);
  const back = el("p", {});
  const actions = el("p", { class: "buttons", id: "task-actions" });
  const outcome = el("div", { id: "task-outcome", class: "outcome", role: "status" });
  let purged = false; // once purged, the page keeps what it last showed
  let shownState = "";

  // Reschedule: a time in the viewer's zone, kept while the page refreshes.
  const when = el("input", { id: "reschedule-at", name: "run_at", type: "datetime-local", step: "1",
    "aria-describedby": "err-run_at" });
  const reschedule = el("form", { id: "reschedule", class: "inline-form", hidden: true, novalidate: true },
    el("label", { for: "reschedule-at" }, "Run at"), when,
    el("small", {}, Intl.DateTimeFormat().resolvedOptions().timeZone),
    el("button", { type: "submit" }, "Reschedule"),
    el("span", { id: "err-run_at", class: "field-error error", role: "alert" }),
    el("span", { id: "err-form", class: "field-error error", role: "alert" }));
  reschedule.addEventListener("submit", async (event) => {
    event.preventDefault();
    const runAt = fromLocalInput(when.value);
    if (!runAt) return showFieldError(reschedule, { field: "run_at", message: "Pick a date and time." });
    showFieldError(reschedule, null);
    if (!await confirmAction(`Reschedule task ${id} to ${formatIn(runAt, "local")} (${runAt})?`,
      "Reschedule task")) return;
    try {
      const t = await api("PATCH", taskPath(id), { run_at: runAt });
      report(outcome, `Task ${id} rescheduled to ${formatIn(t.run_at, "local")}.`);
      when.value = toLocalInput(t.run_at);
    } catch (e) {
      if (e instanceof ApiError && e.field === "run_at") showFieldError(reschedule, e);
      report(outcome, `Reschedule ${id}: ${e.code || "error"}: ${e.message}`, [], true);
    }
    refresh();
  });

  const handlers = {
    onOutcome(text, isError) {
      report(outcome, text, [], isError);
    },
    onChange() {
      refresh();
    },
  };
  // A purge answers the task as it was: the page shows that, and stops asking.
  const purgeHandlers = {
    onOutcome(text, isError) {
      if (!isError) {
        purged = true;
        text += " It is gone; what it was stays shown below.";
        actions.replaceChildren();
        reschedule.hidden = true;
        title.append(el("span", { class: "flag" }, "purged"));
      }
      report(outcome, text, [], isError);
    },
    onChange() {},
  };

  function show(t) {
    const row = (label, value, attrs = {}) => [el("dt", {}, label), el("dd", attrs, value)];
    const local = (instant) => `${formatIn(instant, "local")} (${instant})`;
    back.replaceChildren(el("a", { id: "task-back", href: `#/tasks?${new URLSearchParams({ queue: t.queue })}` },
      `← Tasks of ${t.queue}`));
    details.replaceChildren(
      ...row("state", el("span", { id: "task-state", class: t.state === "dead" ? "dead" : "" }, t.state)),
      ...row("queue", el("a", { id: "task-queue", href: `#/queue/${encodeURIComponent(t.queue)}` }, t.queue)),
      ...row("key", t.key ?? "–"),
      ...(t.schedule ? row("schedule", el("a", { id: "task-schedule",
        href: `#/schedules?${new URLSearchParams({ schedule: t.schedule })}` }, t.schedule)) : []),
      ...row("attempt", `${t.attempt} of ${t.max_attempts}`), ...row("priority", t.priority),
      ...row("run at", local(t.run_at)),
      ...(t.lease_until ? row("lease until", local(t.lease_until)) : []),
      ...(t.lease_token !== undefined && t.lease_token !== null
        ? row("lease token", t.lease_token, { id: "task-lease-token" }) : []),
      // The claim's worker: the lease holder while it runs, who ran it last after.
      ...(t.worker ? row(t.state === "running" ? "lease holder" : "last worker", t.worker,
        { id: "task-worker" }) : []),
      ...(t.target ? row("webhook", target(t)) : []),
      ...(t.target || t.last_response
        ? row("last response", t.last_response || "none yet", { id: "task-response" }) : []),
      ...row("created", local(t.created_at)), ...row("updated", local(t.updated_at)));
    error.textContent = t.last_error || "–";
    const finished = t.attempts || [];
    attempts.replaceChildren(finished.length ? attemptTable : noAttempts);
    updateRows(attemptRows, finished, (a) => a.started_at + "/" + a.ended_at, attemptRow);
    payload.textContent = JSON.stringify(t.payload, null, 2);
    // The buttons and the reschedule form change only with the state, so
    // that one being used is not replaced under the pointer.
    if (t.state !== shownState) {
      shownState = t.state;
      const buttons = [...taskActions(t, ["retry", "cancel"], handlers),
        ...taskActions(t, ["purge"], purgeHandlers)];
      actions.replaceChildren(...(buttons.length ? buttons
        : [el("span", { class: "empty" }, "None while it runs: it finishes, fails or its lease ends first.")]));
      reschedule.hidden = t.state !== "scheduled";
      if (!reschedule.hidden) when.value = toLocalInput(t.run_at);
    }
  }

  async function update() {
    if (purged) return;
    show(await api("GET", `${taskPath(id)}?attempts=true`));
  }

  return {
    async mount() {
      await update();
      main.replaceChildren(el("section", { "aria-labelledby": "task-title" },
        back, title, details,
        el("h2", {}, "Actions"), actions, reschedule, outcome,
        el("h2", {}, "Last error"), error,
        el("h2", {}, "Attempts"), attempts,
        el("h2", {}, "Payload"), payload));
    },
    update,
  };
}
