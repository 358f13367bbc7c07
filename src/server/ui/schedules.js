// The schedules page (#/schedules, #/schedules?schedule=NAME to point at
// one): each schedule's rule, next runs and last run, and a form that
// previews a cron rule while it is typed (GET /v1/cron/next).
import { api, ApiError } from "./api.js";
import { el, main, refresh, report, showFieldError, tableWrap } from "./dom.js";
import { cronInWords } from "./cron_words.js";
import { formatIn, formatMs } from "./format.js";

const PREVIEW_DELAY_MS = 250; // after the last keystroke
const PREVIEW_RUNS = 5;

/** A schedule's rule in words. */
function ruleInWords(sc) {
  if (sc.cron) {
    const words = cronInWords(sc.cron);
    return `${words ? `${words}, ` : ""}cron ${sc.cron} (${sc.tz || "UTC"})`;
  }
  if (sc.every_ms) return `every ${formatMs(sc.every_ms)}`;
  if (sc.fixed_delay_ms) return `${formatMs(sc.fixed_delay_ms)} after each run ends`;
  return "–";
}

/** Whether `zone` is one this browser knows (Intl throws on others). */
function knownZone(zone) {
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** The cron preview: a rule and a zone; the next runs in that zone and the viewer's. */
function cronPreview(viewerZone) {
  const cron = el("input", { id: "preview-cron", name: "cron", autocomplete: "off", spellcheck: "false",
    placeholder: "e.g. 0 3 * * *", "aria-describedby": "help-cron err-cron" });
  const tz = el("input", { id: "preview-tz", name: "tz", value: "UTC", autocomplete: "off", spellcheck: "false",
    list: "zones", "aria-describedby": "err-tz" });
  const zones = el("datalist", { id: "zones" });
  const inZone = el("ol", { id: "preview-zone", class: "runs" });
  const inViewer = el("ol", { id: "preview-local", class: "runs" });
  const zoneTitle = el("h3", {});
  const words = el("p", { id: "preview-words" });
  const runs = el("div", { class: "preview-runs", hidden: true }, words,
    el("div", {}, zoneTitle, inZone),
    el("div", {}, el("h3", {}, `In ${viewerZone} (yours)`), inViewer));
  const form = el("form", { id: "cron-preview", class: "preview", novalidate: true },
    el("div", { class: "field" }, el("label", { for: "preview-cron" }, "Cron rule"), cron,
      el("small", { id: "help-cron" }, "5 or 6 fields or a macro (docs/SCHEDULES.md)"),
      el("p", { id: "err-cron", class: "field-error error", "aria-live": "polite" })),
    el("div", { class: "field" }, el("label", { for: "preview-tz" }, "Zone"), tz, zones,
      el("p", { id: "err-tz", class: "field-error error", "aria-live": "polite" })),
    el("button", { type: "submit" }, "Preview"),
    el("p", { id: "err-form", class: "field-error error", "aria-live": "polite" }));
  let timer = 0;
  let asked = 0; // the latest question: an older answer arriving late is dropped

  async function preview() {
    clearTimeout(timer);
    const rule = cron.value.trim();
    const zone = tz.value.trim() || "UTC";
    const n = ++asked;
    if (!rule) {
      showFieldError(form, null);
      runs.hidden = true;
      return;
    }
    const q = new URLSearchParams({ cron: rule, tz: zone, count: String(PREVIEW_RUNS) });
    try {
      const { next = [] } = await api("GET", `/v1/cron/next?${q}`);
      if (n !== asked) return;
      showFieldError(form, null);
      const said = cronInWords(rule);
      words.textContent = said ? `Runs ${said} (${zone}).` : "";
      // chronoqd knows the zone; this browser may not (an older tz database): then UTC.
      const shownZone = knownZone(zone) ? zone : "UTC";
      zoneTitle.textContent = shownZone === zone ? `In ${zone}` : `In UTC (this browser does not know ${zone})`;
      inZone.replaceChildren(...next.map((r) => el("li", { "data-instant": r }, formatIn(r, shownZone))));
      inViewer.replaceChildren(...next.map((r) => el("li", { "data-instant": r }, formatIn(r, "local"))));
      runs.hidden = false;
    } catch (e) {
      if (n !== asked) return;
      if (!(e instanceof ApiError) || e.status !== 400) {
        showFieldError(form, { field: "", message: `${e.code || "error"}: ${e.message}` }, { focus: false });
      } else {
        // count is ours, not a field of the form: its error goes with the rule.
        showFieldError(form, e.field === "tz" ? e : { field: "cron", message: e.message }, { focus: false });
      }
      runs.hidden = true;
    }
  }

  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(preview, PREVIEW_DELAY_MS);
  };
  cron.addEventListener("input", later);
  tz.addEventListener("input", later);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    preview();
  });
  return {
    view: el("section", { "aria-labelledby": "preview-title" },
      el("h2", { id: "preview-title" }, "Preview a cron rule"), form, runs),
    fillZones() {
      if (zones.childElementCount || !Intl.supportedValuesOf) return;
      zones.replaceChildren(...Intl.supportedValuesOf("timeZone").map((z) => el("option", { value: z })));
    },
  };
}

/** Every schedule: its rule, the next 5 runs in its zone and the viewer's, the last run, pause. */
export function schedulesPage(query) {
  const nextRuns = new Map(); // name@next_run -> instants, asked for once per occurrence
  const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const pointed = query.get("schedule") || ""; // a schedule to point at (from a task's page)
  const list = el("div", { id: "schedule-list" });
  // What a pause or resume answered when it failed (a token without the scope, say).
  const outcome = el("div", { id: "schedule-outcome", class: "outcome", role: "status" });
  const preview = cronPreview(viewerZone);

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
    if (schedules.length === 0) {
      list.replaceChildren(el("p", { class: "empty" }, "No schedules yet."));
      return;
    }
    const allRuns = await Promise.all(schedules.map(runsOf));
    const rows = schedules.map((sc, i) => {
      const zone = sc.tz || "UTC";
      const runs = allRuns[i];
      const toggle = el("button", { type: "button", class: "toggle", "data-schedule": sc.name },
        sc.paused ? "Resume" : "Pause");
      toggle.addEventListener("click", async () => {
        const verb = sc.paused ? "resume" : "pause";
        try {
          await api("POST", `/v1/schedules/${encodeURIComponent(sc.name)}/${verb}`);
          report(outcome, "");
        } catch (e) {
          report(outcome, `${sc.paused ? "Resume" : "Pause"} ${sc.name}: ${e.code || "error"}: ${e.message}`, [], true);
        }
        refresh();
      });
      const last = sc.last_run
        ? `${sc.last_run.state} (${formatIn(sc.last_run.scheduled_for, zone)})` +
          (sc.last_run.error ? `: ${sc.last_run.error}` : "")
        : "–";
      return el("tr", { "data-schedule": sc.name, "data-row": sc.name, class: sc.name === pointed ? "pointed" : "" },
        el("td", {}, el("span", { class: "name" }, sc.name),
          sc.paused ? el("span", { class: "flag paused" }, "paused") : null),
        el("td", { "data-label": "queue" }, sc.queue),
        el("td", { "data-label": "rule", class: "rule" }, ruleInWords(sc)),
        el("td", { "data-label": `next (${zone})`, class: "runs" },
          ...runs.map((r) => el("div", {}, formatIn(r, zone)))),
        el("td", { "data-label": `next (${viewerZone})`, class: "runs local" },
          ...runs.map((r) => el("div", {}, formatIn(r, "local")))),
        el("td", { "data-label": "last run" }, last),
        el("td", {}, toggle));
    });
    list.replaceChildren(tableWrap("Schedules", el("table", { class: "schedules" },
      el("thead", {}, el("tr", {}, ...["schedule", "queue", "rule", "next runs (its zone)",
        `next runs (${viewerZone})`, "last run", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...rows))));
  }

  return {
    async mount() {
      await render();
      main.replaceChildren(el("section", { "aria-labelledby": "schedules-title" },
        el("h1", { id: "schedules-title" }, "Schedules"), outcome, list, preview.view));
      preview.fillZones();
      const row = pointed && list.querySelector(`tr[data-row="${CSS.escape(pointed)}"]`);
      if (row) row.scrollIntoView({ block: "center" });
    },
    update: render,
  };
}
