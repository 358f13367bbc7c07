// chronoq's dashboard: plain JavaScript modules served by chronoqd itself,
// no build step. This file is the router (location hash -> page) and the
// refresh loop. Each page is a module of its own:
//   overview.js  #/                 queues, charts of the last hour, the cluster
//   queue.js     #/queue/NAME       one queue: counts, key backlogs, retry all dead, settings
//   tasks.js     #/tasks?...        the task browser: filters, selection, bulk retry/cancel
//   task.js      #/task/ID          one task: details and actions
//   schedules.js #/schedules        schedules and the cron preview
//   locks.js     #/locks            keyed locks
// Shared: api.js (the only one that talks to chronoqd), dom.js (elements,
// dialogs, focus), format.js (times), actions.js (task actions), charts.js.
//
// A page is { mount(), update(), unmount()? }: mount() draws it the first
// time (and again if that failed), update() redraws what changed, every
// REFRESH_MS while the tab is visible, and unmount() stops its own timers.
import { ApiError } from "./api.js";
import { hashQuery, keepingFocus, main, setRefresh, status } from "./dom.js";
import { locksPage } from "./locks.js";
import { overviewPage } from "./overview.js";
import { queuePage } from "./queue.js";
import { schedulesPage } from "./schedules.js";
import { taskPage } from "./task.js";
import { tasksPage } from "./tasks.js";

const REFRESH_MS = 2000;

/** The page for a location hash. */
function pageFor(hash) {
  const m = /^#\/queue\/(.+)$/.exec(hash);
  if (m) return queuePage(decodeURIComponent(m[1]));
  if (hash === "#/schedules" || hash.startsWith("#/schedules?")) return schedulesPage(hashQuery(hash));
  if (hash === "#/tasks" || hash.startsWith("#/tasks?")) return tasksPage(hashQuery(hash));
  const task = /^#\/task\/(.+)$/.exec(hash);
  if (task) return taskPage(decodeURIComponent(task[1]));
  if (hash === "#/locks") return locksPage();
  return overviewPage();
}

/** Marks the navigation link of the page shown, if it has one (aria-current). */
function markNav(hash) {
  const section = (/^#\/(\w*)/.exec(hash) || ["", ""])[1]; // "", "tasks", "queue", ...
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === `#/${section}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

let timer = 0;
let current = null; // { hash, page }
let running = null; // the refresh under way
let again = false; // asked for while one was under way

/**
 * Draws the page of the location hash, or redraws it. One at a time: a call
 * while one runs (a hash change during a slow page, a button's refresh
 * during the timer's) makes it run once more when it ends.
 */
function refresh() {
  if (running) {
    again = true;
    return running;
  }
  running = (async () => {
    do {
      again = false;
      await refreshOnce();
    } while (again);
  })().finally(() => { running = null; });
  return running;
}

async function refreshOnce() {
  clearTimeout(timer);
  const hash = location.hash || "#/";
  try {
    if (!current || current.hash !== hash) {
      const page = pageFor(hash);
      if (current && current.page.unmount) current.page.unmount();
      current = null;
      markNav(hash);
      await page.mount(); // if it fails, the next refresh mounts it again
      current = { hash, page };
      main.focus({ preventScroll: true });
    } else {
      await keepingFocus(() => current.page.update());
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

setRefresh(refresh);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") refresh();
  else clearTimeout(timer);
});
window.addEventListener("hashchange", refresh);
refresh();
