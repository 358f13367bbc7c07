// The server commands: stats (totals, rates and lateness on one screen),
// health and version.
#include "cli/stats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>

#include "cli/cli_common.h"

#ifndef CHRONOQ_VERSION
#define CHRONOQ_VERSION "unknown"
#endif

namespace chronoq::cli {
namespace {

// The value of a sample line ("name{labels} value [timestamp]"), or nullopt.
std::optional<double> SampleValue(std::string_view rest) {
  const size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) return std::nullopt;
  const std::string token(rest.substr(start, rest.find(' ', start) - start));
  char* end = nullptr;
  const double v = std::strtod(token.c_str(), &end);  // reads "+Inf" and "NaN" too
  if (end != token.c_str() + token.size()) return std::nullopt;
  return v;
}

// The value of label `name` in "{a="x",le="0.5"}", or nullopt.
std::optional<std::string> Label(std::string_view labels, std::string_view name) {
  const std::string key = std::string(name) + "=\"";
  size_t at = labels.find(key);
  // A match must start a label: after '{' or ','.
  while (at != std::string_view::npos && at > 0 && labels[at - 1] != '{' && labels[at - 1] != ',') {
    at = labels.find(key, at + 1);
  }
  if (at == std::string_view::npos) return std::nullopt;
  const size_t from = at + key.size();
  const size_t to = labels.find('"', from);
  if (to == std::string_view::npos) return std::nullopt;
  return std::string(labels.substr(from, to - from));
}

// "0.23ms", "45ms", "1.50s".
std::string ShowLatency(double seconds) {
  char buf[32];
  if (seconds < 0.01) {
    std::snprintf(buf, sizeof buf, "%.2fms", seconds * 1000);
  } else if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%.0fms", seconds * 1000);
  } else {
    return ShowSeconds(seconds);
  }
  return buf;
}

// One counter of the screen: its name, and where a sample keeps it.
struct CounterField {
  const char* name;
  std::optional<double> MetricsSample::*field;
};
constexpr CounterField kCounters[] = {{"enqueued", &MetricsSample::enqueued},
                                      {"acked", &MetricsSample::acked},
                                      {"failed", &MetricsSample::failed},
                                      {"dead", &MetricsSample::dead}};

// A counter's rate between the two scrapes; nullopt without both. A counter
// that went down (chronoqd restarted) counts from zero, as Prometheus' rate() does.
std::optional<double> Rate(const StatsView& v, std::optional<double> MetricsSample::*field) {
  if (!v.before || v.interval_s <= 0) return std::nullopt;
  const std::optional<double> now = v.now.*field;
  const std::optional<double> before = (*v.before).*field;
  if (!now || !before) return std::nullopt;
  return (*now >= *before ? *now - *before : *now) / v.interval_s;
}

// Dispatch lateness over the interval when claims happened in it, else
// since chronoqd started.
struct Lateness {
  std::optional<double> p50, p99;
  double claims = 0;
  bool over_interval = false;
};

Lateness LatenessOf(const StatsView& v) {
  Lateness l;
  CumulativeHistogram h = v.now.lateness;
  if (v.before) {
    CumulativeHistogram delta = HistogramDelta(v.before->lateness, v.now.lateness);
    if (!delta.counts.empty() && delta.counts.back() > 0) {
      h = std::move(delta);
      l.over_interval = true;
    }
  }
  l.claims = h.counts.empty() ? 0 : h.counts.back();
  l.p50 = HistogramQuantile(0.5, h);
  l.p99 = HistogramQuantile(0.99, h);
  return l;
}

std::string ShowCounter(std::optional<double> v) {
  return v ? ShowCount(std::llround(*v)) : std::string("-");
}

// GET `target` as text (/metrics is not JSON). Prints errors as Call() does.
int FetchText(Session& s, const std::string& target, std::string& out) {
  Result<HttpResponse> r = s.Send("GET", target, nullptr);
  if (!r.ok()) {
    s.io().err << "error: " << r.status().message() << "\n";
    return kExitUnreachable;
  }
  if (r->status < 200 || r->status > 299) {
    s.ReportError(Reply{.status = r->status, .raw = std::move(r->body)});
    return kExitServerError;
  }
  out = std::move(r->body);
  return kExitOk;
}

int Scrape(Session& s, MetricsSample& sample) {
  std::string text;
  if (const int code = FetchText(s, "/metrics", text); code != kExitOk) return code;
  Result<MetricsSample> parsed = ParseMetrics(text);
  if (!parsed.ok()) {
    s.io().err << "error: cannot read the server's /metrics: " << parsed.status().message() << "\n";
    return kExitServerError;
  }
  sample = std::move(*parsed);
  return kExitOk;
}

struct StatsArgs {
  std::string interval = "1s";
  bool watch = false;
  int count = 0;
};

// chronoq stats [--interval DUR] [--watch [--count N]]
int RunStats(Session& s, const StatsArgs& a, const CLI::Option* count) {
  const CliIo& io = s.io();
  CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t interval_ms, ParseMillis(a.interval, "--interval"), io);
  if (interval_ms < 0)
    return Usage(io, Status::InvalidArgument("--interval", "must not be negative"));
  if (a.watch && interval_ms == 0) {
    return Usage(io, Status::InvalidArgument("--interval", "--watch needs an interval above 0"));
  }
  if (Given(count) && !a.watch)
    return Usage(io, Status::InvalidArgument("--count", "needs --watch"));
  if (Given(count) && a.count < 1)
    return Usage(io, Status::InvalidArgument("--count", "must be 1 or more"));
  using Clock = std::chrono::steady_clock;
  std::optional<MetricsSample> before;
  Clock::time_point before_at;
  if (interval_ms > 0) {
    before.emplace();
    if (const int code = Scrape(s, *before); code != kExitOk) return code;
    before_at = Clock::now();
  }
  for (int screen = 1;; ++screen) {
    // Rates need time to pass between two scrapes: the command waits it out.
    if (before) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    StatsView view;
    if (const int code = Scrape(s, view.now); code != kExitOk) return code;
    const Clock::time_point now_at = Clock::now();
    Reply queues;
    if (const int code = s.Call("GET", "/v1/queues", nullptr, queues); code != kExitOk) return code;
    view.queues = Member(queues.body, "queues");
    if (before) {
      view.before = std::move(before);
      view.interval_s = std::chrono::duration<double>(now_at - before_at).count();
    }
    if (a.watch && io.out_is_terminal && !s.json_output()) io.out << "\x1b[H\x1b[2J";
    if (s.json_output()) {
      io.out << StatsJson(view).dump() << "\n";
    } else {
      PrintStats(io.out, view);
    }
    io.out.flush();
    if (!a.watch || (Given(count) && screen >= a.count)) return kExitOk;
    before = std::move(view.now);
    before_at = now_at;
  }
}

}  // namespace

Result<MetricsSample> ParseMetrics(std::string_view text) {
  MetricsSample out;
  std::vector<std::pair<double, double>> buckets;  // (le, count)
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) {
      return Status::InvalidArgument("line " + std::to_string(line_no), "no value");
    }
    const std::string_view name = line.substr(0, name_end);
    std::string_view labels;
    std::string_view rest = line.substr(name_end);
    if (rest.front() == '{') {
      const size_t close = rest.find('}');
      if (close == std::string_view::npos) {
        return Status::InvalidArgument("line " + std::to_string(line_no), "unterminated {");
      }
      labels = rest.substr(0, close + 1);
      rest.remove_prefix(close + 1);
    }
    const std::optional<double> value = SampleValue(rest);
    if (!value) return Status::InvalidArgument("line " + std::to_string(line_no), "no value");
    if (name == "chronoq_tasks_enqueued_total") out.enqueued = value;
    if (name == "chronoq_tasks_acked_total") out.acked = value;
    if (name == "chronoq_tasks_failed_total") out.failed = value;
    if (name == "chronoq_tasks_dead_total") out.dead = value;
    if (name == "chronoq_dispatch_lateness_seconds_bucket") {
      const std::optional<std::string> le = Label(labels, "le");
      if (!le)
        return Status::InvalidArgument("line " + std::to_string(line_no), "a bucket without le");
      buckets.emplace_back(std::strtod(le->c_str(), nullptr), *value);
    }
  }
  std::sort(buckets.begin(), buckets.end());
  for (const auto& [le, count] : buckets) {
    out.lateness.bounds.push_back(le);
    out.lateness.counts.push_back(count);
  }
  return out;
}

std::optional<double> HistogramQuantile(double q, const CumulativeHistogram& h) {
  // Prometheus' histogram_quantile (promql/quantile.go), for one histogram.
  const size_t n = std::min(h.bounds.size(), h.counts.size());
  if (n == 0 || h.counts[n - 1] <= 0 || std::isnan(q)) return std::nullopt;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * h.counts[n - 1];
  size_t b = 0;
  while (b + 1 < n && h.counts[b] < rank) ++b;
  if (std::isinf(h.bounds[b])) {
    // Past the last finite bound the spread is unknown: its bound is the answer.
    return b > 0 ? h.bounds[b - 1] : 0.0;
  }
  const double lower = b == 0 ? std::min(0.0, h.bounds[0]) : h.bounds[b - 1];
  const double below = b == 0 ? 0 : h.counts[b - 1];
  const double in_bucket = h.counts[b] - below;
  if (in_bucket <= 0) return h.bounds[b];
  return lower + (h.bounds[b] - lower) * (rank - below) / in_bucket;
}

CumulativeHistogram HistogramDelta(const CumulativeHistogram& before,
                                   const CumulativeHistogram& after) {
  if (before.bounds != after.bounds) return after;
  CumulativeHistogram out = after;
  for (size_t i = 0; i < out.counts.size() && i < before.counts.size(); ++i) {
    if (after.counts[i] < before.counts[i]) return after;  // a restart in between
    out.counts[i] = after.counts[i] - before.counts[i];
  }
  return out;
}

void PrintStats(std::ostream& out, const StatsView& view) {
  PrintQueueTable(out, view.queues);
  out << "\n";
  const bool rates = view.before.has_value() && view.interval_s > 0;
  std::vector<std::vector<std::string>> rows = {{"SERVER", "TOTAL"}};
  if (rates) rows[0].push_back("PER_S");
  for (const CounterField& c : kCounters) {
    rows.push_back({c.name, ShowCounter(view.now.*c.field)});
    if (rates) {
      char rate[32] = "-";
      if (const std::optional<double> r = Rate(view, c.field)) {
        std::snprintf(rate, sizeof rate, "%.1f", *r);
      }
      rows.back().push_back(rate);
    }
  }
  PrintTable(out, rows);
  const Lateness l = LatenessOf(view);
  out << "dispatch lateness (run_at to claim): ";
  if (!l.p50) {
    out << "no claims yet\n";
  } else {
    out << "p50 " << ShowLatency(*l.p50) << ", p99 " << ShowLatency(*l.p99) << " over "
        << ShowCount(std::llround(l.claims)) << (l.claims == 1 ? " claim" : " claims")
        << (l.over_interval ? " in the last " + ShowSeconds(view.interval_s)
                            : std::string(" since chronoqd started"))
        << "\n";
  }
  out << "(chronoqd counts these for the whole server, not per queue"
      << (rates ? "; rates over " + ShowSeconds(view.interval_s) : std::string()) << ")\n";
}

nlohmann::json StatsJson(const StatsView& view) {
  json totals = json::object();
  json per_s = json::object();
  const bool rates = view.before.has_value() && view.interval_s > 0;
  for (const CounterField& c : kCounters) {
    const std::optional<double> v = view.now.*c.field;
    totals[c.name] = v ? json(std::llround(*v)) : json();
    const std::optional<double> r = Rate(view, c.field);
    per_s[c.name] = r ? json(*r) : json();
  }
  const Lateness l = LatenessOf(view);
  return {
      {"queues", view.queues.is_array() ? view.queues : json::array()},
      {"totals", totals},
      {"interval_s", rates ? json(view.interval_s) : json()},
      {"per_s", rates ? per_s : json()},
      {"dispatch_lateness_s",
       {{"p50", l.p50 ? json(*l.p50) : json()},
        {"p99", l.p99 ? json(*l.p99) : json()},
        {"claims", std::llround(l.claims)},
        {"over", l.over_interval ? "interval" : "since_start"}}},
  };
}

void AddServerCommands(CommandTable& table) {
  {
    StatsArgs& a = table.Own<StatsArgs>();
    CLI::App* cmd = table.app().add_subcommand(
        "stats", "Queues, throughput and dispatch lateness on one screen");
    cmd->add_option("--interval", a.interval,
                    "Time between the two samples rates come from (0: one sample, totals only)")
        ->type_name("DUR")
        ->capture_default_str();
    cmd->add_flag("--watch", a.watch, "Refresh every --interval until Ctrl-C");
    CLI::Option* count =
        cmd->add_option("--count", a.count, "With --watch: stop after N screens")->type_name("N");
    table.Add(cmd, [&a, count](Session& s) { return RunStats(s, a, count); });
  }
  {
    CLI::App* cmd = table.app().add_subcommand("health", "Check that the server is up");
    table.Add(cmd, [](Session& s) {
      return s.Simple("GET", "/healthz", nullptr,
                      [&](const Reply& r) { s.io().out << Show(r.body, "status") << "\n"; });
    });
  }
  {
    CLI::App* cmd = table.app().add_subcommand("version", "Show the client and server versions");
    table.Add(cmd, [](Session& s) {
      if (!s.json_output()) s.io().out << "client " << CHRONOQ_VERSION << "\n";
      return s.Simple("GET", "/v1/version", nullptr, [&](const Reply& r) {
        s.io().out << "server " << Show(r.body, "version") << "\n";
      });
    });
  }
}

}  // namespace chronoq::cli
