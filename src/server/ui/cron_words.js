// A cron rule in words, for the common shapes ("at 03:00 every day",
// "every 15 minutes on Monday to Friday"); null for the others, which the
// page then shows as written. Only words: when a rule runs is always the
// server's answer (GET /v1/cron/next), never computed here.

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
  "September", "October", "November", "December"];
const MACROS = {
  "@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
  "@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *",
  "@hourly": "0 0 * * * *",
};

const isAny = (f) => f === "*" || f === "?";
const isNumber = (f) => /^\d+$/.test(f);
const pad = (n) => String(n).padStart(2, "0");

/** A day-of-week or month field's value as a number (names in any case), or NaN. */
function valueOf(text, names) {
  if (isNumber(text)) return Number(text);
  const i = names.findIndex((n) => n.slice(0, 3).toLowerCase() === text.toLowerCase());
  return i < 0 ? NaN : i + (names === MONTHS ? 1 : 0);
}

/** "Monday to Friday", "Monday and Wednesday", "Saturday": a list of values and ranges. */
function listInWords(field, names, offset) {
  const parts = [];
  for (const item of field.split(",")) {
    const range = item.split("-");
    if (range.length > 2) return null;
    const [a, b] = range.map((v) => valueOf(v, names));
    if (Number.isNaN(a) || (range.length === 2 && Number.isNaN(b))) return null;
    const name = (v) => names[v - offset];
    if (name(a) === undefined || (range.length === 2 && name(b) === undefined)) return null;
    parts.push(range.length === 2 ? `${name(a)} to ${name(b)}` : name(a));
  }
  return parts.length > 1 ? `${parts.slice(0, -1).join(", ")} and ${parts[parts.length - 1]}` : parts[0];
}

function timeInWords(sec, min, hour) {
  if ([sec, min, hour].every(isNumber)) {
    return `at ${pad(hour)}:${pad(min)}${Number(sec) ? `:${pad(sec)}` : ""}`;
  }
  if (isAny(hour) && isNumber(min) && sec === "0") return `every hour at minute ${Number(min)}`;
  if (isAny(hour) && isAny(min) && sec === "0") return "every minute";
  if (isAny(hour) && isAny(min) && isAny(sec)) return "every second";
  let m = /^(\*|0)\/(\d+)$/.exec(min);
  if (m && isAny(hour) && sec === "0") return `every ${m[2]} minutes`;
  m = /^(\*|0)\/(\d+)$/.exec(hour);
  if (m && isNumber(min) && sec === "0") return `every ${m[2]} hours at minute ${Number(min)}`;
  m = /^(\*|0)\/(\d+)$/.exec(sec);
  if (m && isAny(min) && isAny(hour)) return `every ${m[2]} seconds`;
  return null;
}

function daysInWords(dom, month, dow) {
  if (isAny(dom) && isAny(month) && isAny(dow)) return "every day";
  if (isAny(dom) && isAny(month)) {
    const days = listInWords(dow, DAYS, 0);
    return days && `on ${days}`;
  }
  if (isNumber(dom) && isAny(month) && isAny(dow)) return `on day ${Number(dom)} of every month`;
  if (dom === "L" && isAny(month) && isAny(dow)) return "on the last day of every month";
  if (isNumber(dom) && isAny(dow)) {
    const months = listInWords(month, MONTHS, 1);
    return months && `on ${Number(dom)} ${months}`;
  }
  return null;
}

/** The rule in words, or null when it is not one of the shapes described here. */
export function cronInWords(expr) {
  const text = (MACROS[expr.trim().toLowerCase()] || expr).trim();
  const fields = text.split(/\s+/);
  if (fields.length === 5) fields.unshift("0");
  if (fields.length !== 6) return null;
  const [sec, min, hour, dom, month, dow] = fields;
  const time = timeInWords(sec, min, hour);
  const days = daysInWords(dom, month, dow);
  return time && days ? `${time} ${days}` : null;
}
