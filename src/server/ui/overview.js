// The overview (#/): every queue with its counts by state, its due backlog,
// lateness and flags; charts of the last hour (GET /v1/stats/history); and
// the cluster's nodes when chronoqd runs as a cluster (GET /v1/cluster).
import { api, STATES } from "./api.js";
import { ago, lineChart } from "./charts.js";
import { el, main, tableWrap, updateRows } from "./dom.js";
import { formatAgo, formatIn, formatMs, formatRate, formatSeconds } from "./format.js";

// chronoqd samples every interval_s (10 s unless --stats-interval-ms says
// otherwise): asking more often than that shows nothing new.
const DEFAULT_HISTORY_EVERY_MS = 10000;
const HOUR_MS = 3600000;

/** What a chart shows: [title, unit formatter, series: [sample field, legend label]]. */
const CHARTS = [
  ["Throughput", formatRate, [["enqueued_per_s", "enqueued"], ["acked_per_s", "acked"], ["failed_per_s", "failed"]]],
  ["Lateness (run_at to claim)", formatSeconds, [["lateness_p50_s", "p50"], ["lateness_p99_s", "p99"]]],
];

/** A row of the queue table, with its cells' labels (a phone shows them), to be cloned. */
const ROW = el("tr", {}, el("td", {}, el("a", { class: "name" })),
  ...STATES.map((s) => el("td", { "data-label": s })),
  el("td", { "data-label": "due now" }), el("td", { "data-label": "oldest due" }));

// Cloned and filled rather than built element by element: the overview of
// 1,000 queues is drawn in half the time.
function queueRow(q) {
  const counts = q.counts || {};
  const tr = ROW.cloneNode(true);
  const [first, ...cells] = tr.children;
  const name = first.firstChild;
  name.href = `#/queue/${encodeURIComponent(q.name)}`;
  name.textContent = q.name;
  if (q.paused) first.append(el("span", { class: "flag paused" }, "paused"));
  if (q.rate_limit) first.append(el("span", { class: "flag" }, "rate-limited"));
  STATES.forEach((s, i) => {
    cells[i].textContent = counts[s] || 0;
    if (s === "dead" && counts[s]) cells[i].className = "dead";
  });
  const [due, oldest] = cells.slice(STATES.length);
  due.textContent = q.due ?? "–";
  if (q.due) due.className = "due";
  oldest.textContent = q.oldest_due_lateness_ms > 0 ? formatMs(q.oldest_due_lateness_ms) : "–";
  return tr;
}

export function overviewPage() {
  const totals = el("ul", { class: "totals" });
  const tbody = el("tbody");
  const table = el("table", { class: "queues" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "queue"),
      ...STATES.map((s) => el("th", { scope: "col" }, s)),
      el("th", { scope: "col" }, "due now"), el("th", { scope: "col" }, "oldest due"))),
    tbody);
  const queues = el("div", {}, tableWrap("Queues", table));
  const empty = el("p", { class: "empty", hidden: true }, "No queues yet: enqueue a task and it appears here.");

  const charts = el("div", { class: "charts" });
  const history = el("section", { id: "history", "aria-labelledby": "history-title", hidden: true },
    el("h2", { id: "history-title" }, "Last hour"), charts);
  let samples = null; // the last history, to redraw at another width
  let historyAt = 0; // when it was asked for (performance.now())
  let historyEveryMs = DEFAULT_HISTORY_EVERY_MS; // chronoqd's interval_s
  let noHistory = false; // chronoqd has no history endpoint (404)

  const cluster = el("section", { id: "cluster", "aria-labelledby": "cluster-title", hidden: true });
  let noCluster = false; // not a cluster (404): asked once per visit of the page

  const view = el("section", { "aria-labelledby": "overview-title" },
    el("h1", { id: "overview-title" }, "Overview"), totals, history, cluster,
    el("h2", {}, "Queues"), empty, queues);

  // Redrawn to fit when the page's width changes (not its height: drawing changes that).
  const resize = new ResizeObserver(() => {
    if (samples && samples.length && Math.abs(chartsWidth() - drawnWidth) > 1) drawCharts();
  });
  const chartsWidth = () => Math.min(Math.max(charts.clientWidth, 300), 1200);
  let drawnWidth = 0;

  function drawQueues(list) {
    const sum = Object.fromEntries([...STATES, "due"].map((s) => [s, 0]));
    for (const q of list) {
      for (const s of STATES) sum[s] += (q.counts && q.counts[s]) || 0;
      sum.due += q.due || 0;
    }
    totals.replaceChildren(
      el("li", {}, el("b", {}, list.length), "queues"),
      ...STATES.map((s) => el("li", { class: s === "dead" && sum[s] ? "dead" : "" }, el("b", {}, sum[s]), s)),
      el("li", {}, el("b", {}, sum.due), "due now"));
    empty.hidden = list.length > 0;
    queues.hidden = list.length === 0;
    updateRows(tbody, list, (q) => q.name, queueRow);
  }

  function drawCharts() {
    if (!samples || samples.length === 0) {
      history.hidden = noHistory;
      charts.replaceChildren(el("p", { class: "empty" }, noHistory ? "" :
        `No samples yet: chronoqd takes one every ${historyEveryMs / 1000} s.`));
      return;
    }
    history.hidden = false;
    const width = chartsWidth();
    const wide = width >= 760; // two charts side by side
    const each = wide ? Math.floor((width - 24) / 2) : width;
    drawnWidth = width;
    const times = samples.map((s) => Date.parse(s.at));
    // The last hour, or less while chronoqd has not been up that long (at
    // least a minute): the samples there are fill the chart.
    const span = Math.min(HOUR_MS, Math.max(60000, times[times.length - 1] - times[0] + historyEveryMs));
    charts.replaceChildren(...CHARTS.map(([title, format, fields], n) => {
      const series = fields.map(([field, name]) => ({ name, values: samples.map((s) => s[field] ?? null) }));
      const latest = series.map((s) => `${s.name} ${format(s.values[s.values.length - 1])}`).join(", ");
      return el("figure", { class: "chart-box", id: `chart-${n}` },
        el("figcaption", {}, title),
        lineChart({ width: each, times, span, series, format,
          title: `${title} over the last ${ago(span)}; latest: ${latest}` }),
        el("ul", { class: "legend" }, ...series.map((s, i) => el("li", { class: `series-${i + 1}` },
          `${s.name} `, el("b", {}, format(s.values[s.values.length - 1]))))));
    }));
  }

  // Fetches the history when a new sample may be there; says whether it changed.
  async function loadHistory() {
    if (noHistory || (samples && performance.now() - historyAt < historyEveryMs)) return false;
    historyAt = performance.now();
    try {
      const h = await api("GET", "/v1/stats/history");
      samples = h.samples || [];
      if (h.interval_s > 0) historyEveryMs = h.interval_s * 1000;
    } catch (e) {
      if (e.status !== 404) throw e;
      noHistory = true;
      samples = null;
    }
    return true;
  }

  async function loadCluster() {
    if (noCluster) return;
    let c;
    try {
      c = await api("GET", "/v1/cluster");
    } catch (e) {
      if (e.status !== 404) throw e;
      noCluster = true; // chronoqd runs alone
      cluster.hidden = true;
      return;
    }
    const leader = c.leader;
    const link = (address) => /^https?:\/\//.test(address || "")
      ? el("a", { href: `${address.replace(/\/$/, "")}/ui/` }, address) : (address || "–");
    cluster.hidden = false;
    cluster.replaceChildren(el("h2", { id: "cluster-title" }, "Cluster"),
      el("p", {}, `This node: ${c.node} (${c.role}). `,
        leader ? `Leader: ${leader.node_id}, epoch ${leader.epoch}, since ${formatIn(leader.since, "local")}.`
          : "No node leads right now."),
      tableWrap("Cluster nodes", el("table", { class: "nodes" },
        el("thead", {}, el("tr", {}, ...["node", "address", "role", "alive", "last heartbeat", "started", "version"]
          .map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, ...(c.nodes || []).map((n) => el("tr", { "data-node": n.node_id, "data-row": n.node_id },
          el("td", {}, el("span", { class: "name" }, n.node_id),
            n.node_id === c.node ? el("span", { class: "flag" }, "this node") : null),
          el("td", { "data-label": "address" }, link(n.address)),
          el("td", { "data-label": "role", class: n.role === "leader" ? "leader" : "" }, n.role),
          el("td", { "data-label": "alive", class: n.alive ? "" : "dead" }, n.alive ? "yes" : "no"),
          el("td", { "data-label": "last heartbeat" }, n.last_heartbeat ? formatAgo(n.last_heartbeat) : "–"),
          el("td", { "data-label": "started" }, n.started ? formatIn(n.started, "local") : "–"),
          el("td", { "data-label": "version" }, n.version || "–")))))));
  }

  // The queues are drawn as soon as they come; the charts and the cluster
  // after (drawn once the page is in place, to fit its width).
  // Their errors are shown in their sections: the queues are the page.
  async function drawRest(more) {
    const [h, c] = await Promise.allSettled(more);
    if (h.status === "fulfilled" && h.value) drawCharts();
    if (h.status === "rejected") {
      history.hidden = false;
      charts.replaceChildren(el("p", { class: "error" }, `history: ${h.reason.code || "error"}: ${h.reason.message}`));
      samples = null; // asked again at the next refresh
    }
    if (c.status === "rejected") {
      cluster.hidden = false;
      cluster.replaceChildren(el("h2", { id: "cluster-title" }, "Cluster"),
        el("p", { class: "error" }, `${c.reason.code || "error"}: ${c.reason.message}`));
    }
  }

  return {
    async mount() {
      const more = [loadHistory(), loadCluster()];
      for (const p of more) p.catch(() => {}); // seen by drawRest, unless the queues fail first
      const { queues: list = [] } = await api("GET", "/v1/queues");
      drawQueues(list);
      main.replaceChildren(view);
      await drawRest(more);
      resize.observe(charts);
    },
    async update() {
      const more = [loadHistory(), loadCluster()];
      for (const p of more) p.catch(() => {});
      drawQueues((await api("GET", "/v1/queues")).queues || []);
      await drawRest(more);
    },
    unmount() { resize.disconnect(); },
  };
}
