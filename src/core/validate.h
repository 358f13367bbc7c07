// Input validation: every rejection names the field and the reason, and
// happens before anything is written.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/queue.h"
#include "chronoq/task.h"

namespace chronoq {

inline constexpr Duration kMinLease = std::chrono::milliseconds(1);
inline constexpr Duration kMaxLease = std::chrono::hours(24 * 7);
inline constexpr Duration kMaxClaimWait = std::chrono::hours(1);
inline constexpr int kMaxClaimBatch = 10'000;
inline constexpr size_t kMaxErrorBytes = 4096;  // longer error texts are truncated

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

Status ValidateQueueName(std::string_view queue, std::string_view field = "queue");
// Queue and schedule names: only A-Z a-z 0-9 _ - . :
Status ValidateNameChars(std::string_view name, std::string_view field);
Status ValidateTaskId(std::string_view id, std::string_view field = "id");
// A task's ordering key: 1-200 bytes of UTF-8 without control characters.
Status ValidateTaskKey(std::string_view key, std::string_view field = "key");
// Non-empty UTF-8 without control characters (ids, lock keys, owners).
Status ValidateText(std::string_view text, std::string_view field);
Status ValidatePayload(std::string_view payload, std::string_view field = "payload");
Status ValidateLease(Duration lease, std::string_view field = "lease");
// A due instant must lie between 1970 and 100 years from now.
Status ValidateDue(Timestamp due, Timestamp now, std::string_view field = "run_at");

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
      break;
  }
  return f(s.max_pending_per_key);
}

// Also refuses a field both set and reset.
Status ValidateQueueSettings(const QueueSettings& settings,
                             const std::vector<QueueSetting>& reset = {});

// `prefix` is prepended to field names ("tasks[3]." in a batch). A spec
// without max_attempts gets `default_max_attempts`; 0 leaves it 0, for the
// engine loop to resolve from the queue's settings.
Result<ValidTask> ValidateTaskSpec(const TaskSpec& spec, Timestamp now, int default_max_attempts,
                                   std::string_view prefix = "");

// The stored form of a webhook target: compact JSON that leaves defaults out,
// e.g. {"url":"https://example.com/hook","headers":[["X-Key","v"]]}.
std::string EncodeTarget(const WebhookTarget& target);
// The inverse of EncodeTarget; nullopt (and a logged warning) when `json` is
// not a target.
std::optional<WebhookTarget> DecodeTarget(std::string_view json);

// Cuts `text` to at most `max` bytes without splitting a UTF-8 sequence.
std::string TruncateUtf8(std::string_view text, size_t max);

// The length (1-4) of the valid UTF-8 sequence that starts at s[i], or 0
// when none does: overlong forms, surrogates and code points past U+10FFFF
// are not valid. REQUIRES: i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);

}  // namespace chronoq
