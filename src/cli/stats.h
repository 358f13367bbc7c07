// cli/stats.h: what `chronoq stats` computes from chronoqd's /metrics and
// /v1/queues, apart from the fetching, so that tests can check the numbers
// and the screen. Internal to src/cli and its tests.
//
//   Result<MetricsSample> before = ParseMetrics(first_scrape);
//   Result<MetricsSample> after = ParseMetrics(second_scrape);   // 1 s later
//   StatsView view{.queues = queues_answer["queues"], .now = *after, .before = *before,
//                  .interval_s = 1.0};
//   PrintStats(std::cout, view);
//
// chronoqd counts enqueues, acks, failures and dispatch lateness for the
// whole server, not per queue; per queue it reports counts by state and the
// lateness of the oldest due task. The screen shows exactly that.
#pragma once

#include <iosfwd>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chronoq/result.h"

namespace chronoq::cli {

// A Prometheus histogram: cumulative counts (observations <= bounds[i]); the
// last bound is +Inf, so counts.back() is the number of observations.
struct CumulativeHistogram {
  std::vector<double> bounds;
  std::vector<double> counts;
};

// The figures of one /metrics scrape that `stats` shows; nullopt when the
// server did not report the metric.
struct MetricsSample {
  std::optional<double> enqueued;  // chronoq_tasks_enqueued_total
  std::optional<double> acked;     // chronoq_tasks_acked_total
  std::optional<double> failed;    // chronoq_tasks_failed_total
  std::optional<double> dead;      // chronoq_tasks_dead_total
  CumulativeHistogram lateness;    // chronoq_dispatch_lateness_seconds, in seconds
};

// Reads the Prometheus text format (0.0.4) as chronoqd writes it; other
// metrics are ignored. InvalidArgument naming the line when a sample line
// cannot be read.
Result<MetricsSample> ParseMetrics(std::string_view text);

// The q-quantile (0 <= q <= 1) of `h` the way Prometheus' histogram_quantile
// computes it: find the bucket where the rank q * count falls and
// interpolate linearly between its lower bound (the previous bound, 0 for
// the first bucket) and its upper bound, as if the observations were spread
// evenly within it. A rank in the +Inf bucket gives the highest finite
// bound. nullopt when `h` holds no observation.
std::optional<double> HistogramQuantile(double q, const CumulativeHistogram& h);

// The observations of `after` that came since `before`, bucket by bucket.
// A histogram that shrank (chronoqd restarted in between) counts as all new.
CumulativeHistogram HistogramDelta(const CumulativeHistogram& before,
                                   const CumulativeHistogram& after);

// One screen of `stats`.
struct StatsView {
  nlohmann::json queues;                // GET /v1/queues' "queues" array
  MetricsSample now;                    // the later scrape
  std::optional<MetricsSample> before;  // the earlier one: rates need two
  double interval_s = 0;                // between the two scrapes
};

// The queues table, then each counter's total and, with two scrapes, its
// rate per second, then dispatch lateness p50/p99 (over the interval when
// claims happened in it, else since chronoqd started).
void PrintStats(std::ostream& out, const StatsView& view);

// The same as one JSON object:
//   {"queues":[...], "totals":{"enqueued":N,...}, "interval_s":1.0|null,
//    "per_s":{"enqueued":x,...}|null,
//    "dispatch_lateness_s":{"p50":x|null,"p99":x|null,"claims":N,"over":"interval"|"since_start"}}
nlohmann::json StatsJson(const StatsView& view);

}  // namespace chronoq::cli
