// Input validation: every rejection names the field and the reason, and
// happens before anything is written.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/bulk.h"
#include "chronoq/engine.h"
#include "chronoq/lock.h"
#include "chronoq/queue.h"
#include "chronoq/schedule.h"
#include "chronoq/task.h"

#include "common/text.h"

namespace chronoq {

// A TaskSpec checked and resolved against `now` and the engine defaults.
struct ValidTask {
  std::string queue;
  std::string payload;
  Timestamp due;
  std::optional<std::string> name;  // client-chosen id
  OnConflict on_conflict = OnConflict::kReject;
  int max_attempts = 0;  // 0: the queue's default, else the engine's (resolved by the loop)
  int priority = 0;
  std::optional<Backoff> backoff;     // unset: the queue's default, if any
  std::optional<std::string> target;  // EncodeTarget() of the spec's target
  std::optional<int64_t> sid;         // set for a schedule's occurrences
  std::optional<std::string> key;     // per-key ordering
};

// The engine's own options (EngineOptions); errors name the member.
Status ValidateEngineOptions(const EngineOptions& options);

Status ValidateQueueName(std::string_view queue, std::string_view field = "queue");
Status ValidateTaskId(std::string_view id, std::string_view field = "id");
// A task's ordering key: 1-200 bytes of UTF-8 without control characters.
Status ValidateTaskKey(std::string_view key, std::string_view field = "key");
Status ValidatePayload(std::string_view payload, std::string_view field = "payload");
Status ValidateLease(Duration lease, std::string_view field = "lease_ms");
// An id naming a task to act on (generated or client-chosen): 1-200 bytes.
Status ValidateTaskRef(std::string_view id, std::string_view field = "id");
// The tasks of an acknowledgement or extension call: 1 to kMaxBatchTasks,
// each id a task reference, each failure's retry delay in range; errors name
// `field`, "<field>[i].id" or "<field>[i].retry_in_ms".
Status ValidateLeaseRefs(const std::vector<AckRequest>& requests, const std::string& field);
// A claim's arguments; errors name "queue", "max", "lease_ms", "wait_ms".
Status ValidateClaim(std::string_view queue, int max, Duration lease, Duration wait);
// A claimer's name (ClaimRequest::worker; field "worker").
Status ValidateWorkerName(std::string_view worker);
// A failure's retry delay (errors name `field`).
Status ValidateRetryIn(std::optional<Duration> retry_in, const std::string& field = "retry_in_ms");
// A lock key (field "key") and a whole acquisition ("wait_ms", "lease_ms", "owner").
Status ValidateLockKey(std::string_view key);
Status ValidateLockRequest(std::string_view key, const LockRequest& request);
// A page size or count between 1 and `max`.
Status ValidateLimit(int limit, int max, std::string_view field);
// A due instant must lie between 1970 and 100 years from now.
Status ValidateDue(Timestamp due, Timestamp now, std::string_view field = "run_at");

// A bulk job's filter and action (field names as the HTTP API spells them:
// "filter.queue", "filter.key", "filter.run_at_to", "run_at", "shift_ms",
// "filter" for a filter without a condition or `all`, "filter.all" for both). The filter's
// id_prefix is checked where it is turned into seq ranges (EngineImpl::NarrowToIds).
Status ValidateBulkRequest(const BulkRequest& request, Timestamp now);

// `field` names the target ("target", "tasks[3].target"); errors name its
// parts ("target.url", "target.headers[2].name").
Status ValidateTarget(const WebhookTarget& target, std::string_view field = "target");
// Errors name the field: "concurrency", "max_attempts", "backoff.base",
// "backoff.cap", "retention".
// Calls f(member) with the member of `s` that `field` names, and returns
// what f returns (the same type for every member).
template <typename Settings, typename F>
auto WithQueueSetting(Settings& s, QueueSetting field, F&& f) {
  switch (field) {
    case QueueSetting::kConcurrency:
      return f(s.concurrency);
    case QueueSetting::kMaxAttempts:
      return f(s.max_attempts);
    case QueueSetting::kBackoff:
      return f(s.backoff);
    case QueueSetting::kRetention:
      return f(s.retention);
    case QueueSetting::kRateLimit:
      return f(s.rate_limit);
    case QueueSetting::kInFlightPerKey:
      return f(s.max_in_flight_per_key);
    case QueueSetting::kPendingPerKey:
      return f(s.max_pending_per_key);
    case QueueSetting::kFinalStatuses:
      break;
  }
  return f(s.final_statuses);
}

// Also refuses a field both set and reset.
Status ValidateQueueSettings(const QueueSettings& settings,
                             const std::vector<QueueSetting>& reset = {});

// `prefix` is prepended to field names ("tasks[3]." in a batch). A spec
// without max_attempts gets `default_max_attempts`; 0 leaves it 0, for the
// engine loop to resolve from the queue's settings.
Result<ValidTask> ValidateTaskSpec(const TaskSpec& spec, Timestamp now, int default_max_attempts,
                                   std::string_view prefix = "");

// Checks `spec`; errors are InvalidArgument naming the field ("cron", "tz",
// "every_ms", "payload", "target.url", ...). The result is normalised: the
// payload is compact JSON and a cron schedule has its tz. (An every schedule
// without start is anchored by the engine loop, at the instant it saves it.)
Result<ScheduleSpec> ValidateScheduleSpec(const ScheduleSpec& spec, Timestamp now);
Status ValidateScheduleName(std::string_view name, std::string_view field = "name");

}  // namespace chronoq
