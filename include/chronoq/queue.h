// chronoq/queue.h: per-queue settings, a queue's live view, engine statistics.
//
// A queue exists once it has had a task, a claim or settings. Its settings
// and paused flag are durable; unset settings take the engine's defaults
// (EngineOptions). The counts are exact and kept in memory, so reading them
// scans nothing.
//
//   chronoq::QueueSettings s;
//   s.concurrency = 4;                      // at most 4 of its tasks running
//   s.retention = std::chrono::hours(1);    // finished tasks go after an hour
//   auto q = engine->ConfigureQueue("emails", s);
//   engine->PauseQueue("emails", true);     // claims get nothing until resumed
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/limits.h"
#include "chronoq/task.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

// At most `count` tasks handed out per sliding `period`.
struct RateLimit {
  int count = 1;
  Duration period = std::chrono::seconds(1);

  friend bool operator==(const RateLimit&, const RateLimit&) = default;
};

// Per-queue settings; unset fields take the engine default.
struct QueueSettings {
  // At most this many tasks of the queue running at once (1-100000).
  std::optional<int> concurrency;
  // For tasks enqueued without one (1-1000).
  std::optional<int> max_attempts;
  // For tasks enqueued without one (base >= 1 ms, cap >= base, cap <= 7 days).
  std::optional<Backoff> backoff;
  // How long succeeded/cancelled tasks stay (0 - 3650 days). Applies to
  // tasks that finish after it is set: a task's purge time is fixed when it
  // finishes.
  std::optional<Duration> retention;
  // At most rate_limit.count (1-1,000,000) claims of its tasks per sliding
  // rate_limit.period (1 ms - 1 day), across every worker: over the limit,
  // due tasks simply wait (claims get fewer or none, or wait) until the
  // oldest claim in the period leaves it. The window lives in memory: it
  // starts empty after a restart.
  std::optional<RateLimit> rate_limit;
  // Keyed tasks (TaskSpec::key): at most this many tasks of one key started
  // and unfinished at once (1-100000; unset: 1). A task holds its place from
  // its first claim until it succeeds, dies or is cancelled, retries
  // included.
  std::optional<int> max_in_flight_per_key;
  // At most this many tasks of one key waiting to start (scheduled, never
  // claimed) (1-1,000,000,000; unset: no limit): an enqueue past it fails
  // with ResourceExhausted naming the key, and writes nothing.
  std::optional<int64_t> max_pending_per_key;
  // Webhook queues: HTTP statuses of a target's answer that fail the task
  // for good (dead at once, whatever attempts remain) instead of retrying,
  // e.g. {400, 401, 404}. 300-599 except 410 (which cancels the task), at
  // most 32, no repeats; kept sorted. Unset or empty: every non-2xx answer
  // retries.
  std::optional<std::vector<int>> final_statuses;
};

// One field of QueueSettings, to put back to its default (the engine's, or
// none) with Engine::ConfigureQueue.
enum class QueueSetting {
  kConcurrency,
  kMaxAttempts,
  kBackoff,
  kRetention,
  kRateLimit,
  kInFlightPerKey,
  kPendingPerKey,
  kFinalStatuses,
};
// Its name in the API, as errors name it ("concurrency", "retention_ms", ...).
std::string_view QueueSettingName(QueueSetting setting);

struct QueueInfo {
  std::string name;
  // Tasks by state, indexed by static_cast<int>(TaskState): scheduled,
  // running, succeeded, cancelled, dead.
  std::array<int64_t, 5> counts{};
  bool paused = false;
  // The queue has held a task with a webhook target (durable): chronoqd
  // delivers its tasks itself.
  bool webhooks = false;
  // How late the earliest due scheduled task is (now - its run_at); zero when
  // none is due. Known only for tasks in the engine's look-ahead window: a
  // queue whose earliest task is not in memory is not late.
  Duration oldest_due_lateness{};
  // Scheduled tasks whose run_at has passed and that a claim could take now
  // (a keyed task counts once it is its key's next), as far as the engine's
  // look-ahead window holds them (EngineOptions::max_window_tasks).
  int64_t due = 0;
  // As configured: unset fields take the engine default.
  QueueSettings settings;
};

// Counters since the engine started, and histograms, for /metrics.
struct EngineStats {
  uint64_t enqueued = 0;  // tasks stored by enqueue (not the ignored ones)
  uint64_t acked = 0;     // tasks that succeeded
  uint64_t failed = 0;    // failed attempts (fail() or lapsed lease), whether retried or buried
  uint64_t dead = 0;      // tasks that went dead
  uint64_t commits = 0;
  // Keyed locks now (as of the last commit): keys in memory (held or waited
  // for; a key with neither is forgotten), locks held, acquisitions waiting.
  uint64_t lock_keys = 0;
  uint64_t locks_held = 0;
  uint64_t lock_waiters = 0;
  // Bucket upper bounds and cumulative counts (Prometheus style: counts[i] =
  // observations <= bounds[i]; the last count is +Inf = total), plus sum.
  struct Histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;
    double sum = 0;
    uint64_t total = 0;
  };
  // Operations answered per commit (bounds 1,2,4,...,4096); a commit of
  // time-driven work alone (lease lapses, purges) counts 0.
  Histogram commit_ops;
  Histogram dispatch_lateness_s;  // for each claimed task: claim time - run_at, in seconds
  // Whether the store answered the last cycle: false once a cycle failed
  // with Unavailable (PostgreSQL unreachable), true again after the next
  // commit; store_error says why it is down.
  bool store_up = true;
  std::string store_error;
  // When the engine loop, asleep, next wakes for timed work of its own (a
  // task entering the look-ahead window, a lease ending, a waiting claim's
  // deadline, a purge); unset while it waits only for a call. As of when it
  // last went to sleep: nothing counted above changes before then unless a
  // call comes in.
  std::optional<Timestamp> next_wake;
};

}  // namespace chronoq
#pragma GCC visibility pop
