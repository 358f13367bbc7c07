// The locks page (#/locks): every key held or waited for (GET /v1/locks),
// with its holder, fencing token, the time its lease has left (counting down
// each second from expires_at, on this page's clock) and its waiters.
import { api } from "./api.js";
import { el, main, tableWrap, updateRows } from "./dom.js";
import { formatCountdown, formatIn } from "./format.js";

function lockRow(l) {
  return el("tr", { "data-lock": l.key },
    el("td", {}, el("span", { class: "name" }, l.key),
      l.held ? null : el("span", { class: "flag" }, "not held")),
    el("td", { "data-label": "owner", class: "text" }, l.held ? (l.owner ?? "–") : "–"),
    el("td", { "data-label": "token" }, l.held && l.token !== undefined && l.token !== null ? l.token : "–"),
    el("td", { "data-label": "time left", class: "time-left",
      "data-expires": l.held && l.expires_at ? l.expires_at : "",
      title: l.held && l.expires_at ? `expires ${formatIn(l.expires_at, "local")}` : "" }, "–"),
    el("td", { "data-label": "waiters" }, l.waiters ?? 0));
}

export function locksPage() {
  const tbody = el("tbody");
  const table = tableWrap("Locks", el("table", { class: "locks" },
    el("thead", {}, el("tr", {}, ...["key", "owner", "token", "time left", "waiters"]
      .map((h) => el("th", { scope: "col", class: h === "owner" ? "text" : "" }, h)))), tbody));
  const empty = el("p", { class: "empty" }, "No lock is held or waited for.");
  const list = el("div", { id: "lock-list" });
  let ticker = 0;

  // Each second, on this page's clock; the list itself comes with the refresh.
  function tick() {
    const now = Date.now();
    for (const td of tbody.querySelectorAll("td.time-left")) {
      const expires = td.dataset.expires;
      const text = expires ? formatCountdown(Date.parse(expires) - now) : "–";
      if (td.textContent !== text) td.textContent = text;
    }
  }

  async function render() {
    const { locks = [] } = await api("GET", "/v1/locks");
    list.replaceChildren(locks.length ? table : empty);
    updateRows(tbody, locks, (l) => l.key, lockRow);
    tick();
  }

  return {
    async mount() {
      await render();
      main.replaceChildren(el("section", { "aria-labelledby": "locks-title" },
        el("h1", { id: "locks-title" }, "Locks"),
        el("p", { class: "note" }, "Keys held or waited for. Time left counts down on this browser's clock."),
        list));
      ticker = setInterval(() => { if (document.visibilityState === "visible") tick(); }, 1000);
    },
    update: render,
    unmount() { clearInterval(ticker); },
  };
}
