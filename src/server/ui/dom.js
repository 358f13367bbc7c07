// Building the page: el() makes elements from data without ever parsing it
// as HTML (payloads and errors come from users), and the page's shared parts:
// the status line, the confirmation dialog, outcome reports, focus kept
// across redraws.

/** An element: el("a", {href: "#/"}, "text", child, ...). Strings become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

/** Where pages draw themselves. */
export const main = document.getElementById("main");

/** The status line in the header: "updated 10:00:02", or what went wrong. */
export const status = document.getElementById("status");

let refresher = () => {};

/** Redraws the current page now (app.js sets what that means). */
export function refresh() {
  return refresher();
}

/** Called once by app.js with its refresh function. */
export function setRefresh(fn) {
  refresher = fn;
}

/** The query of a hash ("#/tasks?queue=q&state=dead") as URLSearchParams. */
export function hashQuery(hash) {
  const i = hash.indexOf("?");
  return new URLSearchParams(i < 0 ? "" : hash.slice(i + 1));
}

/** A wide table in a container of its own that scrolls sideways, so the page does not. */
export function tableWrap(label, table) {
  return el("div", { class: "table-wrap", role: "region", "aria-label": label, tabindex: "0" }, table);
}

/**
 * Makes `tbody`'s rows those of `items`, in order, building a row (build(item))
 * only for an item that is new or changed (its JSON differs): a page of 1,000
 * queues redraws in a few milliseconds, and a focused row that did not change
 * keeps its focus. Each row gets data-row = keyOf(item).
 */
const rowData = new WeakMap(); // row -> the JSON it was built from
export function updateRows(tbody, items, keyOf, build) {
  const old = new Map();
  for (const tr of tbody.children) old.set(tr.dataset.row, tr);
  const rows = items.map((item) => {
    const key = String(keyOf(item));
    const json = JSON.stringify(item);
    const tr = old.get(key);
    if (tr && rowData.get(tr) === json) return tr;
    const row = build(item);
    row.dataset.row = key;
    rowData.set(row, json);
    return row;
  });
  rows.forEach((row, i) => {
    const at = tbody.children[i];
    if (at !== row) tbody.insertBefore(row, at || null);
  });
  while (tbody.children.length > rows.length) tbody.lastElementChild.remove();
}

const FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";

/**
 * Runs draw(), which may replace elements of the page, and then puts the
 * focus back where it was: on the element with the same id, or the same
 * control of the row with the same data-row. Without this a keyboard user
 * would be thrown back to the top at every refresh.
 */
export async function keepingFocus(draw) {
  const place = focusPlace(document.activeElement);
  await draw();
  if (!place || place.element.isConnected) return;
  let target = null;
  if (place.id) {
    target = document.getElementById(place.id);
  } else if (place.row !== null) {
    const row = main.querySelector(`[data-row="${CSS.escape(place.row)}"]`);
    target = row && row.querySelectorAll(FOCUSABLE)[place.index];
  }
  if (target) target.focus({ preventScroll: true });
}

function focusPlace(e) {
  if (!e || e === main || !main.contains(e)) return null;
  if (e.id) return { element: e, id: e.id };
  const row = e.closest("[data-row]");
  if (!row) return null;
  return { element: e, id: "", row: row.dataset.row, index: [...row.querySelectorAll(FOCUSABLE)].indexOf(e) };
}

let confirmBox = null;

/**
 * Asks before an action: a modal dialog with `message`, a button `okLabel`
 * (id confirm-ok) and "Back" (id confirm-back, focused first: the safe
 * choice). Resolves to true when confirmed; Back and Escape resolve to false.
 */
export function confirmAction(message, okLabel) {
  if (!confirmBox) {
    confirmBox = el("dialog", { id: "confirm", "aria-labelledby": "confirm-message" },
      el("form", { method: "dialog" },
        el("p", { id: "confirm-message" }),
        el("p", { class: "buttons" },
          el("button", { type: "submit", value: "back", id: "confirm-back" }, "Back"),
          el("button", { type: "submit", value: "ok", id: "confirm-ok", class: "danger" }, "OK"))));
    document.body.append(confirmBox);
  }
  confirmBox.querySelector("#confirm-message").textContent = message;
  confirmBox.querySelector("#confirm-ok").textContent = okLabel;
  confirmBox.returnValue = "";
  return new Promise((resolve) => {
    confirmBox.addEventListener("close", () => resolve(confirmBox.returnValue === "ok"), { once: true });
    confirmBox.showModal();
    confirmBox.querySelector("#confirm-back").focus();
  });
}

/**
 * Shows an outcome in a page's report area (a role=status element): a line
 * of text, then the failures if any ([{id, error}]), at most 20 of them.
 */
export function report(area, text, failures = [], isError = false) {
  if (!text && !failures.length) return area.replaceChildren();
  const shown = failures.slice(0, 20);
  area.classList.toggle("error", isError || failures.length > 0);
  const parts = [el("p", {}, text)];
  if (shown.length) {
    parts.push(el("ul", { class: "failures" }, ...shown.map((f) => el("li", {},
      el("span", { class: "name" }, f.id), `: ${f.error.code || "error"}: ${f.error.message}`))));
  }
  if (failures.length > shown.length) parts.push(el("p", {}, `and ${failures.length - shown.length} more`));
  area.replaceChildren(...parts);
}

/**
 * Shows chronoqd's error at the form's field it names, in the element
 * #<prefix><field> (or #<prefix>form), marks the field invalid and, unless
 * told not to, focuses it. A null error clears them all.
 */
export function showFieldError(form, error, { prefix = "err-", focus = true } = {}) {
  for (const p of form.querySelectorAll(".field-error")) p.textContent = "";
  for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  if (!error) return;
  const input = error.field && form.elements[error.field];
  const where = (input && form.querySelector(`#${prefix}${CSS.escape(error.field)}`)) ||
    form.querySelector(`#${prefix}form`);
  if (where) where.textContent = error.message;
  if (input && input.setAttribute) {
    input.setAttribute("aria-invalid", "true");
    if (focus) input.focus();
  }
}
