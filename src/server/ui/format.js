// Times and durations as the pages write them.

/** A duration in milliseconds, rounded to what a person reads: "250 ms", "1.5 s", "4 min", "2 h". */
export function formatMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${ms % 1000 === 0 ? ms / 1000 : (ms / 1000).toFixed(1)} s`;
  if (ms < 7200000) return `${Math.round(ms / 60000)} min`;
  return `${Math.round(ms / 3600000)} h`;
}

/** An instant in a zone ("local": the viewer's), as YYYY-MM-DD HH:MM:SS. */
export function formatIn(instant, zone) {
  const options = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
    minute: "2-digit", second: "2-digit", hourCycle: "h23" };
  if (zone !== "local") options.timeZone = zone;
  const parts = Object.fromEntries(new Intl.DateTimeFormat("en-CA", options).formatToParts(new Date(instant))
    .map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}`;
}

/** A duration in seconds as lateness reads: "0 ms", "0.25 ms", "2.5 ms", "12 ms", "1.4 s", "2 min". */
export function formatSeconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 0.01) return `${Number((s * 1000).toFixed(2))} ms`;
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  return formatMs(Math.round(s * 1000));
}

/** A rate per second: "0/s", "0.25/s", "12/s", "1,250/s". */
export function formatRate(v) {
  if (v === null || v === undefined) return "–";
  const digits = v === 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return `${Number(v.toFixed(digits)).toLocaleString("en-US")}/s`;
}

/** Time left until an instant, as a countdown: "45 s", "3 min 05 s", "2 h 10 min"; "expired" once past. */
export function formatCountdown(ms) {
  if (ms <= 0) return "expired";
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/** How long ago an instant was, from `now` (ms since the epoch): "just now", "12 s ago", "in 3 min". */
export function formatAgo(instant, now = Date.now()) {
  const ms = now - Date.parse(instant);
  if (Number.isNaN(ms)) return "–";
  if (Math.abs(ms) < 1000) return "just now";
  const text = formatMs(Math.abs(Math.round(ms / 1000)) * 1000);
  return ms >= 0 ? `${text} ago` : `in ${text}`;
}

/** An instant as a datetime-local input's value in the viewer's zone ("2026-11-27T12:00:05"). */
export function toLocalInput(instant) {
  const d = new Date(instant);
  if (Number.isNaN(d.getTime())) return "";
  const p = (n) => String(n).padStart(2, "0");
  const date = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
  return `${date}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** A datetime-local input's value (the viewer's zone) as RFC 3339 UTC, or "" when empty or not a time. */
export function fromLocalInput(value) {
  if (!value) return "";
  const d = new Date(value); // a date-time without an offset is local time
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}
