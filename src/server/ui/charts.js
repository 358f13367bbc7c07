// Small line charts drawn as inline SVG, no library: the overview's last hour
// of throughput and lateness. Colours come from style.css (.series-N), so
// they follow the light and dark themes.

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

/** The smallest of 1, 2, 5 × 10^n at or above v (the top of the y axis). */
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** A span of the time axis as text: "30 min", "45 s". */
export function ago(ms) {
  return ms >= 120000 ? `${Math.round(ms / 60000)} min` : `${Math.round(ms / 1000)} s`;
}

/**
 * A line chart, `width` × `height` pixels.
 *   times:  instants (ms since the epoch), one per sample, oldest first
 *   span:   the x axis covers [end - span, end], end being the last time
 *   series: [{ name, values: [number | null] }]; null leaves a gap
 *   format: a y value as text (axis labels)
 *   title:  what the chart shows, for screen readers (with the latest values)
 */
export function lineChart({ width, height = 150, times, span, series, format, title }) {
  const m = { left: 56, right: 10, top: 10, bottom: 22 };
  const w = Math.max(width - m.left - m.right, 40);
  const h = height - m.top - m.bottom;
  const end = times.length ? times[times.length - 1] : Date.now();
  const start = end - span;
  let top = 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > top) top = v;
  top = niceMax(top);
  const x = (t) => m.left + ((t - start) / span) * w;
  const y = (v) => m.top + h - (v / top) * h;

  const chart = svg("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": title });
  chart.append(svg("title", {}, title));
  for (const v of [0, top / 2, top]) {
    chart.append(svg("line", { class: "grid", x1: m.left, x2: m.left + w, y1: y(v), y2: y(v) }),
      svg("text", { class: "axis", x: m.left - 6, y: y(v) + 4, "text-anchor": "end" }, format(v)));
  }
  chart.append(
    svg("text", { class: "axis", x: m.left, y: height - 6 }, `${ago(span)} ago`),
    svg("text", { class: "axis", x: m.left + w / 2, y: height - 6, "text-anchor": "middle" },
      `${ago(span / 2)} ago`),
    svg("text", { class: "axis", x: m.left + w, y: height - 6, "text-anchor": "end" }, "now"));
  series.forEach((s, i) => {
    let d = "";
    let open = false;
    s.values.forEach((v, j) => {
      if (v === null || v === undefined || times[j] < start) {
        open = false;
        return;
      }
      // A point alone still shows: a zero-length segment with round caps.
      d += `${open ? "L" : "M"}${x(times[j]).toFixed(1)} ${y(v).toFixed(1)}` + (open ? "" : "h0");
      open = true;
    });
    chart.append(svg("path", { class: `line series-${i + 1}`, d: d || "M0 0", "data-series": s.name }));
  });
  return chart;
}
