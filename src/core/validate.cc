#include "core/validate.h"

#include <algorithm>
#include <array>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "chronoq/cron.h"

#include "codec/json_codec.h"
#include "common/text.h"

namespace chronoq {
namespace {

std::string Field(std::string_view prefix, std::string_view name) {
  std::string f(prefix);
  f.append(name);
  return f;
}

// An HTTP token character (RFC 9110 tchar).
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

// Schedules and webhook targets are kept in their API form, which counts in
// milliseconds: a finer value would not survive a restart.
Status WholeMillis(Duration d, std::string_view field) {
  if (d % std::chrono::milliseconds(1) != Duration::zero()) {
    return Status::InvalidArgument(field, "must be a whole number of milliseconds");
  }
  return {};
}

Status ValidateInterval(Duration d, std::string_view field) {
  CHRONOQ_RETURN_IF_ERROR(WholeMillis(d, field));
  if (d < kMinScheduleInterval) return Status::InvalidArgument(field, "must be at least 1 ms");
  if (d > kMaxScheduleInterval) return Status::InvalidArgument(field, "must be at most 10 years");
  return {};
}

constexpr std::array<std::string_view, 5> kTargetMethods = {"POST", "PUT", "PATCH", "GET",
                                                            "DELETE"};

}  // namespace

Status ValidateEngineOptions(const EngineOptions& options) {
  if (options.default_max_attempts < 1 || options.default_max_attempts > kMaxAttemptsLimit) {
    return Status::InvalidArgument("default_max_attempts", "must be between 1 and 1000");
  }
  if (options.lookahead <= Duration::zero()) {
    return Status::InvalidArgument("lookahead", "must be positive");
  }
  if (options.max_window_tasks < 2) {
    return Status::InvalidArgument("max_window_tasks", "must be at least 2");
  }
  if (options.claim_ahead < Duration::zero() || options.claim_ahead > std::chrono::seconds(1)) {
    return Status::InvalidArgument("claim_ahead", "must be between 0 and 1 s");
  }
  if (options.purge_chunk < 1) return Status::InvalidArgument("purge_chunk", "must be positive");
  if (options.bulk_chunk < 1 || options.bulk_chunk > kMaxListLimit) {
    return Status::InvalidArgument("bulk_chunk", "must be between 1 and 1000");
  }
  if (options.retention < Duration::zero()) {
    return Status::InvalidArgument("retention", "must not be negative");
  }
  if (options.attempt_history < 0 || options.attempt_history > kMaxAttemptHistory) {
    return Status::InvalidArgument("attempt_history", "must be between 0 and 100");
  }
  if (options.node.size() > kMaxNodeNameBytes) {
    return Status::InvalidArgument("node", "longer than 200 bytes");
  }
  return options.node.empty() ? Status() : ValidateText(options.node, "node");  // empty: none
}

Status ValidateQueueName(std::string_view queue, std::string_view field) {
  if (queue.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (queue.size() > kMaxQueueNameBytes) {
    return Status::InvalidArgument(field, "longer than 100 bytes");
  }
  return ValidateNameChars(queue, field);
}

Status ValidateTaskId(std::string_view id, std::string_view field) {
  if (id.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (id.size() > kMaxIdBytes) return Status::InvalidArgument(field, "longer than 200 bytes");
  if (id[0] == '_') {
    return Status::InvalidArgument(field, "must not start with '_' (reserved for generated ids)");
  }
  return ValidateText(id, field);
}

Status ValidateTaskKey(std::string_view key, std::string_view field) {
  if (key.size() > kMaxKeyBytes) return Status::InvalidArgument(field, "longer than 200 bytes");
  return ValidateText(key, field);
}

Status ValidatePayload(std::string_view payload, std::string_view field) {
  if (payload.size() > kMaxPayloadBytes) {
    return Status::InvalidArgument(field, "larger than 256 KiB");
  }
  if (!nlohmann::json::accept(payload)) return Status::InvalidArgument(field, "not valid JSON");
  return {};
}

Status ValidateTaskRef(std::string_view id, std::string_view field) {
  if (id.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (id.size() > kMaxIdBytes) return Status::InvalidArgument(field, "longer than 200 bytes");
  return {};
}

Status ValidateLeaseRefs(const std::vector<AckRequest>& requests, const std::string& field) {
  if (requests.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (requests.size() > kMaxBatchTasks) {
    return Status::InvalidArgument(field, "more than 10000 entries");
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string item = field + "[" + std::to_string(i) + "].";
    CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(requests[i].id, item + "id"));
    if (requests[i].failure) {
      CHRONOQ_RETURN_IF_ERROR(
          ValidateRetryIn(requests[i].failure->retry_after, item + "retry_in_ms"));
    }
  }
  return {};
}

Status ValidateClaim(std::string_view queue, int max, Duration lease, Duration wait) {
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  if (max < 1 || max > kMaxClaimBatch) {
    return Status::InvalidArgument("max", "must be between 1 and 10000");
  }
  CHRONOQ_RETURN_IF_ERROR(ValidateLease(lease));
  if (wait < Duration::zero() || wait > kMaxClaimWait) {
    return Status::InvalidArgument("wait_ms", "must be between 0 and 1 hour");
  }
  return {};
}

Status ValidateWorkerName(std::string_view worker) {
  if (worker.size() > kMaxWorkerNameBytes) {
    return Status::InvalidArgument("worker", "longer than 200 bytes");
  }
  return worker.empty() ? Status() : ValidateText(worker, "worker");  // empty: none named
}

Status ValidateRetryIn(std::optional<Duration> retry_in, const std::string& field) {
  if (retry_in && (*retry_in < Duration::zero() || *retry_in > kMaxDelay)) {
    return Status::InvalidArgument(field, "must be between 0 and 100 years");
  }
  return {};
}

Status ValidateLockKey(std::string_view key) {
  if (key.size() > kMaxLockKeyBytes) return Status::InvalidArgument("key", "longer than 200 bytes");
  return ValidateText(key, "key");
}

Status ValidateLockRequest(std::string_view key, const LockRequest& request) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLockKey(key));
  if (request.wait < Duration::zero()) {
    return Status::InvalidArgument("wait_ms", "must not be negative");
  }
  if (request.wait > kMaxLockWait) {
    return Status::InvalidArgument("wait_ms", "must be at most 1 hour");
  }
  CHRONOQ_RETURN_IF_ERROR(ValidateLease(request.lease));
  if (request.owner.size() > kMaxLockOwnerBytes) {
    return Status::InvalidArgument("owner", "longer than 200 bytes");
  }
  if (!request.owner.empty()) CHRONOQ_RETURN_IF_ERROR(ValidateText(request.owner, "owner"));
  return {};
}

Status ValidateLimit(int limit, int max, std::string_view field) {
  if (limit < 1 || limit > max) {
    return Status::InvalidArgument(field, "must be between 1 and " + std::to_string(max));
  }
  return {};
}

Status ValidateLease(Duration lease, std::string_view field) {
  if (lease < kMinLease) return Status::InvalidArgument(field, "must be at least 1 ms");
  if (lease > kMaxLease) return Status::InvalidArgument(field, "must be at most 7 days");
  return {};
}

Status ValidateDue(Timestamp due, Timestamp now, std::string_view field) {
  if (due < Timestamp()) return Status::InvalidArgument(field, "before 1970");
  if (due > now + kMaxDelay) return Status::InvalidArgument(field, "more than 100 years ahead");
  return {};
}

Status ValidateBulkRequest(const BulkRequest& request, Timestamp now) {
  const BulkFilter& f = request.filter;
  if (f.queue) CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(*f.queue, "filter.queue"));
  if (f.key) {
    // No task has the empty key (it means none).
    if (f.key->empty()) return Status::InvalidArgument("filter.key", "must not be empty");
    CHRONOQ_RETURN_IF_ERROR(ValidateTaskKey(*f.key, "filter.key"));
  }
  if (f.run_at_from && f.run_at_to && *f.run_at_to <= *f.run_at_from) {
    return Status::InvalidArgument("filter.run_at_to", "must be after filter.run_at_from");
  }
  if (request.action == BulkAction::kReschedule) {
    if (request.run_at && request.shift) {
      return Status::InvalidArgument("shift_ms", "give run_at or shift_ms, not both");
    }
    if (!request.run_at && !request.shift) {
      return Status::InvalidArgument("run_at", "missing (or shift_ms): where to move the tasks");
    }
    if (request.run_at) CHRONOQ_RETURN_IF_ERROR(ValidateDue(*request.run_at, now, "run_at"));
    if (request.shift && (*request.shift == Duration::zero() || *request.shift > kMaxDelay ||
                          *request.shift < -kMaxDelay)) {
      return Status::InvalidArgument("shift_ms",
                                     "must be between -100 years and 100 years, and not 0");
    }
  } else if (request.run_at || request.shift) {
    return Status::InvalidArgument(request.run_at ? "run_at" : "shift_ms",
                                   "only for the reschedule action");
  }
  // Every task at once is never what a filter left empty by mistake means.
  if (f.all && !f.empty()) {
    return Status::InvalidArgument("filter.all", "only without other conditions");
  }
  if (f.empty() && !f.all) {
    return Status::InvalidArgument("filter",
                                   "names no condition: give one, or \"all\": true for every task");
  }
  return {};
}

Status ValidateTarget(const WebhookTarget& target, std::string_view field) {
  const std::string url_field = Field(field, ".url");
  const std::string_view url = target.url;
  if (url.empty()) return Status::InvalidArgument(url_field, "must not be empty");
  if (url.size() > kMaxTargetUrlBytes) {
    return Status::InvalidArgument(url_field, "longer than 2048 bytes");
  }
  size_t host = 0;
  if (StartsWithNoCase(url, "http://")) {
    host = 7;
  } else if (StartsWithNoCase(url, "https://")) {
    host = 8;
  } else {
    return Status::InvalidArgument(url_field, "must start with http:// or https://");
  }
  if (host == url.size() || url[host] == '/' || url[host] == '?' || url[host] == '#') {
    return Status::InvalidArgument(url_field, "has no host");
  }
  for (char c : url) {
    // Printable ASCII only: anything else must be percent-encoded.
    if (c <= ' ' || c == 0x7f) {
      return Status::InvalidArgument(url_field,
                                     "must not contain spaces, control characters or non-ASCII "
                                     "bytes (percent-encode them)");
    }
  }

  if (std::find(kTargetMethods.begin(), kTargetMethods.end(), target.method) ==
      kTargetMethods.end()) {
    return Status::InvalidArgument(Field(field, ".method"),
                                   "must be one of POST, PUT, PATCH, GET, DELETE");
  }

  if (target.headers.size() > kMaxTargetHeaders) {
    return Status::InvalidArgument(Field(field, ".headers"), "more than 32 headers");
  }
  for (size_t i = 0; i < target.headers.size(); ++i) {
    const auto& [name, value] = target.headers[i];
    const std::string at = Field(field, ".headers[" + std::to_string(i) + "]");
    if (name.empty()) return Status::InvalidArgument(at + ".name", "must not be empty");
    if (name.size() > kMaxTargetHeaderNameBytes) {
      return Status::InvalidArgument(at + ".name", "longer than 256 bytes");
    }
    if (!std::all_of(name.begin(), name.end(), IsTokenChar)) {
      return Status::InvalidArgument(at + ".name", "must be an HTTP token (no spaces, CR, LF, :)");
    }
    if (value.size() > kMaxTargetHeaderValueBytes) {
      return Status::InvalidArgument(at + ".value", "longer than 8 KiB");
    }
    if (std::string_view why = BadText(value, /*tabs=*/true); !why.empty()) {
      return Status::InvalidArgument(at + ".value", std::string(why));
    }
  }

  if (target.timeout < kMinTargetTimeout || target.timeout > kMaxTargetTimeout) {
    return Status::InvalidArgument(Field(field, ".timeout_ms"),
                                   "must be between 1 ms and 5 minutes");
  }
  return WholeMillis(target.timeout, Field(field, ".timeout_ms"));
}

Status ValidateQueueSettings(const QueueSettings& s, const std::vector<QueueSetting>& reset) {
  for (QueueSetting field : reset) {
    if (WithQueueSetting(s, field, [](const auto& value) { return value.has_value(); })) {
      return Status::InvalidArgument(QueueSettingName(field), "is both given and reset");
    }
  }
  if (s.concurrency && (*s.concurrency < 1 || *s.concurrency > kMaxQueueConcurrency)) {
    return Status::InvalidArgument("concurrency", "must be between 1 and 100000");
  }
  if (s.max_attempts && (*s.max_attempts < 1 || *s.max_attempts > kMaxAttemptsLimit)) {
    return Status::InvalidArgument("max_attempts", "must be between 1 and 1000");
  }
  if (s.backoff) {
    if (s.backoff->base < std::chrono::milliseconds(1)) {
      return Status::InvalidArgument("backoff.base_ms", "must be at least 1 ms");
    }
    if (s.backoff->cap < s.backoff->base || s.backoff->cap > kMaxQueueBackoffCap) {
      return Status::InvalidArgument("backoff.cap_ms",
                                     "must be at least backoff.base_ms and at most 7 days");
    }
  }
  if (s.retention && (*s.retention < Duration::zero() || *s.retention > kMaxQueueRetention)) {
    return Status::InvalidArgument("retention_ms", "must be between 0 and 3650 days");
  }
  if (s.max_in_flight_per_key &&
      (*s.max_in_flight_per_key < 1 || *s.max_in_flight_per_key > kMaxInFlightPerKey)) {
    return Status::InvalidArgument("max_in_flight_per_key", "must be between 1 and 100000");
  }
  if (s.max_pending_per_key &&
      (*s.max_pending_per_key < 1 || *s.max_pending_per_key > kMaxPendingPerKey)) {
    return Status::InvalidArgument("max_pending_per_key", "must be between 1 and 1000000000");
  }
  if (s.rate_limit) {
    if (s.rate_limit->count < 1 || s.rate_limit->count > kMaxRateLimitCount) {
      return Status::InvalidArgument("rate_limit.count", "must be between 1 and 1000000");
    }
    if (s.rate_limit->period < std::chrono::milliseconds(1) ||
        s.rate_limit->period > kMaxRateLimitPeriod) {
      return Status::InvalidArgument("rate_limit.period_ms", "must be between 1 ms and 1 day");
    }
  }
  if (s.final_statuses) {
    const std::vector<int>& statuses = *s.final_statuses;
    if (statuses.size() > kMaxFinalStatuses) {
      return Status::InvalidArgument("final_statuses", "holds more than 32 statuses");
    }
    for (size_t i = 0; i < statuses.size(); ++i) {
      const std::string at = "final_statuses[" + std::to_string(i) + "]";
      if (statuses[i] < 300 || statuses[i] > 599) {
        return Status::InvalidArgument(at, "must be an HTTP status between 300 and 599");
      }
      if (statuses[i] == 410) {
        return Status::InvalidArgument(at, "410 Gone always cancels the task; leave it out");
      }
      if (std::find(statuses.begin(), statuses.begin() + static_cast<std::ptrdiff_t>(i),
                    statuses[i]) != statuses.begin() + static_cast<std::ptrdiff_t>(i)) {
        return Status::InvalidArgument(at, std::to_string(statuses[i]) + " is listed twice");
      }
    }
  }
  return {};
}

Result<ValidTask> ValidateTaskSpec(const TaskSpec& spec, Timestamp now, int default_max_attempts,
                                   std::string_view prefix) {
  ValidTask t;
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(spec.queue, Field(prefix, "queue")));
  t.queue = spec.queue;
  CHRONOQ_RETURN_IF_ERROR(ValidatePayload(spec.payload, Field(prefix, "payload")));
  t.payload = spec.payload;

  if (spec.run_at.has_value() && spec.delay.has_value()) {
    return Status::InvalidArgument(Field(prefix, "delay_ms"), "give run_at or delay_ms, not both");
  }
  if (spec.delay.has_value()) {
    if (*spec.delay < Duration::zero()) {
      return Status::InvalidArgument(Field(prefix, "delay_ms"), "must not be negative");
    }
    if (*spec.delay > kMaxDelay) {
      return Status::InvalidArgument(Field(prefix, "delay_ms"), "more than 100 years");
    }
    t.due = now + *spec.delay;
  } else if (spec.run_at.has_value()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateDue(*spec.run_at, now, Field(prefix, "run_at")));
    t.due = *spec.run_at;
  } else {
    t.due = now;
  }

  if (!spec.id.empty()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateTaskId(spec.id, Field(prefix, "id")));
    t.name = spec.id;
  }
  t.on_conflict = spec.on_conflict;
  if (!spec.key.empty()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateTaskKey(spec.key, Field(prefix, "key")));
    t.key = spec.key;
  }

  if (spec.max_attempts < 0 || spec.max_attempts > kMaxAttemptsLimit) {
    return Status::InvalidArgument(Field(prefix, "max_attempts"), "must be between 1 and 1000");
  }
  t.max_attempts = spec.max_attempts == 0 ? default_max_attempts : spec.max_attempts;
  t.priority = spec.priority;

  if (spec.backoff.has_value()) {
    const Backoff& b = *spec.backoff;
    if (b.base <= Duration::zero()) {
      return Status::InvalidArgument(Field(prefix, "backoff.base_ms"), "must be positive");
    }
    if (b.cap < b.base || b.cap > kMaxDelay) {
      return Status::InvalidArgument(Field(prefix, "backoff.cap_ms"),
                                     "must be at least backoff.base_ms and at most 100 years");
    }
    t.backoff = b;
  }

  if (spec.target.has_value()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateTarget(*spec.target, Field(prefix, "target")));
    t.target = EncodeTarget(*spec.target);
  }
  return t;
}

Status ValidateScheduleName(std::string_view name, std::string_view field) {
  if (name.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (name.size() > kMaxScheduleNameBytes) {
    return Status::InvalidArgument(field, "longer than 150 bytes");
  }
  if (name[0] == '_') {
    return Status::InvalidArgument(field, "must not start with '_' (reserved for generated ids)");
  }
  return ValidateNameChars(name, field);
}

Result<ScheduleSpec> ValidateScheduleSpec(const ScheduleSpec& spec, Timestamp now) {
  ScheduleSpec out = spec;
  CHRONOQ_RETURN_IF_ERROR(ValidateScheduleName(spec.name));
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(spec.queue));
  const int kinds =
      int{spec.cron.has_value()} + int{spec.every.has_value()} + int{spec.fixed_delay.has_value()};
  if (kinds != 1) {
    return Status::InvalidArgument(
        "cron", kinds == 0 ? "one of cron, every_ms and fixed_delay_ms is required"
                           : "give only one of cron, every_ms and fixed_delay_ms");
  }
  if (spec.cron && spec.cron->size() > kMaxCronBytes) {
    return Status::InvalidArgument("cron", "longer than 1024 bytes");
  }
  if (spec.tz && spec.tz->size() > kMaxZoneBytes) {
    return Status::InvalidArgument("tz", "longer than 128 bytes");
  }
  if (spec.cron) {
    CronOptions options{spec.tz.value_or("UTC"), spec.dst_gap, spec.dst_repeat};
    CHRONOQ_RETURN_IF_ERROR(CronExpr::Parse(*spec.cron, options).status());
    out.tz = options.tz;
  } else {
    if (spec.tz) return Status::InvalidArgument("tz", "applies to cron schedules only");
    if (spec.dst_gap) return Status::InvalidArgument("dst_gap", "applies to cron schedules only");
    if (spec.dst_repeat) {
      return Status::InvalidArgument("dst_repeat", "applies to cron schedules only");
    }
  }
  if (spec.every) CHRONOQ_RETURN_IF_ERROR(ValidateInterval(*spec.every, "every_ms"));
  if (spec.fixed_delay)
    CHRONOQ_RETURN_IF_ERROR(ValidateInterval(*spec.fixed_delay, "fixed_delay_ms"));
  if (spec.start) {
    CHRONOQ_RETURN_IF_ERROR(ValidateDue(*spec.start, now, "start"));
    CHRONOQ_RETURN_IF_ERROR(WholeMillis(spec.start->time_since_epoch(), "start"));
  }

  CHRONOQ_RETURN_IF_ERROR(ValidatePayload(spec.payload, "payload"));
  const nlohmann::ordered_json payload = nlohmann::ordered_json::parse(spec.payload);
  if (!payload.is_object()) return Status::InvalidArgument("payload", "must be a JSON object");
  if (payload.contains("scheduled_for")) {
    return Status::InvalidArgument(
        "payload", "must not have a scheduled_for member (each occurrence gets one)");
  }
  out.payload = payload.dump();

  if (spec.max_catchup < 1 || spec.max_catchup > kMaxCatchupLimit) {
    return Status::InvalidArgument("max_catchup", "must be between 1 and 10000");
  }
  if (spec.max_attempts < 0 || spec.max_attempts > kMaxAttemptsLimit) {
    return Status::InvalidArgument("max_attempts", "must be between 1 and 1000");
  }
  if (spec.target) CHRONOQ_RETURN_IF_ERROR(ValidateTarget(*spec.target));
  return out;
}

}  // namespace chronoq
