// What can be done to tasks from the pages: one task (retry, cancel,
// reschedule, purge), or many at once with progress and a report. Every
// action is confirmed first.
import { api } from "./api.js";
import { confirmAction, el } from "./dom.js";

/** Each action: the states it needs, its call, and its words for one task and (bulk) for many. */
export const ACTIONS = {
  retry: { states: ["dead"], label: "Retry", done: "retried",
    call: (id) => api("POST", `${taskPath(id)}/retry`),
    one: "It is scheduled again now, with its attempts reset.",
    many: "Each dead one is scheduled again now, with its attempts reset; the others are reported." },
  cancel: { states: ["scheduled"], label: "Cancel", done: "cancelled",
    call: (id) => api("DELETE", taskPath(id)),
    one: "It will not run.",
    many: "Scheduled ones will not run; the others (running or finished) are reported." },
  purge: { states: ["succeeded", "cancelled", "dead"], label: "Purge", done: "purged",
    call: (id) => api("POST", `${taskPath(id)}/purge`),
    one: "It is deleted now, for good." },
};

export function taskPath(id) {
  return `/v1/tasks/${encodeURIComponent(id)}`;
}

/** "1 task", "2 tasks". */
export function tasksWord(n) {
  return `${n.toLocaleString("en-US")} task${n === 1 ? "" : "s"}`;
}

/**
 * Calls fn(item) for each item, `limit` at a time; onDone(ok, error) after
 * each; stops starting new calls once stopped() is true. Resolves to
 * { ok: count, failed: [{ id, error }] } (id: idOf(item)).
 */
export async function runEach(items, fn, options = {}) {
  const { limit = 6, idOf = (x) => x, onDone = () => {}, stopped = () => false } = options;
  let next = 0;
  let ok = 0;
  const failed = [];
  async function worker() {
    while (next < items.length && !stopped()) {
      const item = items[next++];
      try {
        await fn(item);
        ok++;
        onDone(true, null);
      } catch (e) {
        failed.push({ id: idOf(item), error: e });
        onDone(false, e);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return { ok, failed };
}

/**
 * A button for one action on one task (data-task, data-action set): it asks
 * first, then calls onOutcome(text, isError) and onChange().
 */
export function actionButton(action, t, { onOutcome, onChange }) {
  const a = ACTIONS[action];
  const b = el("button", { type: "button", "data-task": t.id, "data-action": action,
    class: action === "retry" ? "" : "danger" }, a.label);
  b.addEventListener("click", async () => {
    const sure = await confirmAction(`${a.label} task ${t.id}? ${a.one}`, `${a.label} task`);
    if (!sure) return;
    b.disabled = true;
    try {
      await a.call(t.id);
      onOutcome(`Task ${t.id} ${a.done}.`, false);
    } catch (e) {
      onOutcome(`${a.label} ${t.id}: ${e.code || "error"}: ${e.message}`, true);
    } finally {
      b.disabled = false;
      onChange();
    }
  });
  return b;
}

/** The buttons for the actions a task in its state allows (those of `which`). */
export function taskActions(t, which, handlers) {
  return which.filter((a) => ACTIONS[a].states.includes(t.state)).map((a) => actionButton(a, t, handlers));
}
