// Micro benchmarks for the cron calculator: Parse() and Next() for three
// typical expressions, in UTC and in a zone with DST.
//
//   build/release/bench/cron-bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <array>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "chronoq/clock.h"
#include "chronoq/cron.h"

namespace chronoq {
namespace {

struct Case {
  const char* expr;
  const char* tz;
};

// 0: every five minutes; 1: a nightly fixed-time job; 2: weekdays at 09:00.
constexpr std::array<Case, 6> kCases = {{
    {"*/5 * * * *", "UTC"},
    {"0 30 2 * * *", "UTC"},
    {"0 0 9 ? * MON-FRI", "UTC"},
    {"*/5 * * * *", "America/New_York"},
    {"0 30 2 * * *", "America/New_York"},
    {"0 0 9 ? * MON-FRI", "Europe/London"},
}};

void BenchParse(benchmark::State& state) {
  const Case& c = kCases[static_cast<size_t>(state.range(0))];
  CronOptions options;
  options.tz = c.tz;
  for (auto _ : state) {
    Result<CronExpr> expr = CronExpr::Parse(c.expr, options);
    benchmark::DoNotOptimize(expr);
  }
  state.SetLabel(std::string(c.expr) + " " + c.tz);
}
BENCHMARK(BenchParse)->DenseRange(0, 5);

void BenchNext(benchmark::State& state) {
  const Case& c = kCases[static_cast<size_t>(state.range(0))];
  CronOptions options;
  options.tz = c.tz;
  Result<CronExpr> expr = CronExpr::Parse(c.expr, options);
  if (!expr.ok()) {
    state.SkipWithError(expr.status().ToString().c_str());
    return;
  }
  // Random instants in 2020-2036, so the zone lookup and the calendar walk
  // are not always served from the same spot.
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> dist(1'577'836'800'000'000, 2'082'758'400'000'000);
  std::vector<Timestamp> froms(1024);
  for (Timestamp& t : froms) t = Timestamp(std::chrono::microseconds(dist(rng)));
  size_t i = 0;
  for (auto _ : state) {
    std::optional<Timestamp> next = expr->Next(froms[i++ & 1023]);
    benchmark::DoNotOptimize(next);
  }
  state.SetLabel(std::string(c.expr) + " " + c.tz);
}
BENCHMARK(BenchNext)->DenseRange(0, 5);

}  // namespace
}  // namespace chronoq

BENCHMARK_MAIN();
