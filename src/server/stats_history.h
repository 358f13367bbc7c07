// The last hour of the engine's throughput and dispatch lateness, one sample
// every ten seconds, for the dashboard's charts (GET /v1/stats/history).
// Counters since start (Engine::Stats) become rates per interval; the
// lateness histogram's growth in an interval gives its p50 and p99.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "chronoq/engine.h"

#include "common/mutex.h"

namespace chronoq::server {

// Thread-safe.
class StatsHistory {
 public:
  struct Sample {
    Timestamp at;
    double enqueued_per_s = 0;
    double acked_per_s = 0;
    double failed_per_s = 0;
    // Unset when nothing was claimed in the interval.
    std::optional<double> lateness_p50_s;
    std::optional<double> lateness_p99_s;
  };

  StatsHistory(Duration interval, size_t capacity)
      : interval_(interval), capacity_(capacity) {}

  // Records `stats` as read at `now`: the first call sets the baseline, each
  // later one adds a sample for the time since the previous call.
  void Add(Timestamp now, const EngineStats& stats) CHRONOQ_EXCLUDES(mu_);
  // {"interval_s":10,"samples":[{"at":..., "enqueued_per_s":..., ...}]}, oldest first.
  std::string Json() const CHRONOQ_EXCLUDES(mu_);

  Duration interval() const { return interval_; }

 private:
  const Duration interval_;
  const size_t capacity_;
  mutable Mutex mu_;
  std::optional<Timestamp> last_at_ CHRONOQ_GUARDED_BY(mu_);
  EngineStats last_ CHRONOQ_GUARDED_BY(mu_);
  std::deque<Sample> samples_ CHRONOQ_GUARDED_BY(mu_);
};

// The `q` quantile (0-1) of what a Prometheus-style histogram gained between
// `before` and `after` (same bounds), interpolated inside its bucket; unset
// when it gained nothing. Observations above the last bound count as it.
std::optional<double> QuantileOfGrowth(const EngineStats::Histogram& before,
                                       const EngineStats::Histogram& after, double q);

// Adds engine.Stats() to a history every history.interval() on a thread of
// its own, until destroyed.
class StatsSampler {
 public:
  StatsSampler(Engine& engine, Clock& clock, StatsHistory& history);
  ~StatsSampler();
  StatsSampler(const StatsSampler&) = delete;
  StatsSampler& operator=(const StatsSampler&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chronoq::server
