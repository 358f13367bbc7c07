// The last hour of the engine's throughput and dispatch lateness, one sample
// every ten seconds, for the dashboard's charts (GET /v1/stats/history).
// Counters since start (Engine::Stats) become rates per interval; the
// lateness histogram's growth in an interval gives its p50 and p99.
#pragma once

#include <atomic>
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

  StatsHistory(Duration interval, size_t capacity) : interval_(interval), capacity_(capacity) {}

  // Records `stats` as read at `now`: the first call sets the baseline, each
  // later one adds a sample for the time since the previous call. Returns
  // whether that sample counted anything (false for the baseline).
  bool Add(Timestamp now, const EngineStats& stats) CHRONOQ_EXCLUDES(mu_);
  // Adds an empty sample (nothing counted) for every whole interval after
  // the last sample that ends at or before `until`: what Add would have
  // recorded there for an engine whose counters did not move.
  void FillIdle(Timestamp until) CHRONOQ_EXCLUDES(mu_);
  // When the next sample is due: an interval after the last one (or the
  // baseline).
  Timestamp NextAt() const CHRONOQ_EXCLUDES(mu_);
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
// its own (on `clock`), until destroyed; but not while nothing happens.
//
// An idle chronoqd must not wake up (W5: no wake-ups, docs/OPERATIONS.md,
// "Idle cost"), and a sample every 10 s is a wake-up. So once a sample
// counted nothing and no activity was noted (Poke) during its interval, the
// sampler sleeps until the engine's own timed work is due
// (EngineStats::next_wake) or until Poke. Nothing the history counts can
// change before either: the engine's counters move in calls, which come
// from requests and webhook deliveries, both noted first, or in its timed
// work. Then it records the intervals it slept through as empty (FillIdle),
// exactly what sampling would have recorded, and samples on from there. A
// call that began before the sampler went idle and commits after it (a
// request slower than an interval) is counted, in the interval where the
// sampler next samples.
class StatsSampler {
 public:
  StatsSampler(Engine& engine, Clock& clock, StatsHistory& history);
  ~StatsSampler();
  StatsSampler(const StatsSampler&) = delete;
  StatsSampler& operator=(const StatsSampler&) = delete;

  // Notes activity that may change the engine's counters: call it before
  // handing the engine a call. Thread-safe; while the sampler samples, an
  // atomic flag that is nearly always set already (a read), and the idle
  // intervals' filling when it slept.
  void Poke();

 private:
  void Run(Engine& engine);

  Clock& clock_;
  StatsHistory& history_;
  std::atomic<bool> noted_{false};      // a poke since the last sample
  std::atomic<bool> idle_flag_{false};  // idle_, for Poke to read without the lock
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_, as the three below
  bool idle_ = false;      // asleep until wake_ or a poke
  bool poked_ = false;     // a poke ended the sleep and filled the history
  Timestamp wake_;         // the engine's next timed work when idle_ began
  std::thread thread_;
};

}  // namespace chronoq::server
