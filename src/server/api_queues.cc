// The queue endpoints and /metrics. Their engine calls block on a commit or
// read every queue, so they run on the blocking pool, never on an I/O thread.
#include "chronoq/time.h"

#include "codec/json_codec.h"
#include "core/validate.h"
#include "server/api.h"
#include "server/metrics.h"

namespace chronoq::server {
namespace {

int64_t Millis(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

template <typename T>
void AppendOptional(std::string& out, const std::optional<T>& value) {
  if (value) {
    out += std::to_string(*value);
  } else {
    out += "null";
  }
}

void AppendQueue(std::string& out, const QueueInfo& q) {
  out += "{\"name\":";
  AppendString(out, q.name);
  out += ",\"counts\":{";
  for (size_t s = 0; s < q.counts.size(); ++s) {
    if (s > 0) out += ',';
    AppendString(out, TaskStateName(static_cast<TaskState>(s)));
    out += ':';
    out += std::to_string(q.counts[s]);
  }
  out += "},\"paused\":";
  out += q.paused ? "true" : "false";
  out += ",\"oldest_due_lateness_ms\":";
  out += std::to_string(Millis(q.oldest_due_lateness));
  out += ",\"concurrency\":";
  AppendOptional(out, q.settings.concurrency);
  out += ",\"max_in_flight\":";  // another name for concurrency
  AppendOptional(out, q.settings.concurrency);
  out += ",\"max_in_flight_per_key\":";
  AppendOptional(out, q.settings.max_in_flight_per_key);
  out += ",\"max_pending_per_key\":";
  AppendOptional(out, q.settings.max_pending_per_key);
  out += ",\"max_attempts\":";
  AppendOptional(out, q.settings.max_attempts);
  out += ",\"backoff\":";
  if (q.settings.backoff) {
    out += "{\"base_ms\":" + std::to_string(Millis(q.settings.backoff->base)) +
           ",\"cap_ms\":" + std::to_string(Millis(q.settings.backoff->cap)) + "}";
  } else {
    out += "null";
  }
  out += ",\"retention_ms\":";
  if (q.settings.retention) {
    out += std::to_string(Millis(*q.settings.retention));
  } else {
    out += "null";
  }
  out += ",\"rate_limit\":";
  if (q.settings.rate_limit) {
    out += "{\"count\":" + std::to_string(q.settings.rate_limit->count) +
           ",\"period_ms\":" + std::to_string(Millis(q.settings.rate_limit->period)) + "}";
  } else {
    out += "null";
  }
  out += '}';
}

ApiResponse QueueResponse(const Result<QueueInfo>& q) {
  if (!q.ok()) return ErrorResponse(q.status());
  ApiResponse out;
  AppendQueue(out.body, *q);
  return out;
}

// A PUT /v1/queues/{queue} body: the settings given, and those given as
// null, which go back to their defaults.
struct QueueSettingsChange {
  QueueSettings settings;
  std::vector<QueueSetting> reset;
};

Result<QueueSettingsChange> ParseQueueSettings(const std::string& body) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  QueueSettingsChange change;
  if (json.is_object()) {
    static constexpr std::pair<std::string_view, QueueSetting> kFields[] = {
        {"concurrency", QueueSetting::kConcurrency},
        {"max_in_flight", QueueSetting::kConcurrency},
        {"max_attempts", QueueSetting::kMaxAttempts},
        {"backoff", QueueSetting::kBackoff},
        {"retention_ms", QueueSetting::kRetention},
        {"rate_limit", QueueSetting::kRateLimit},
        {"max_in_flight_per_key", QueueSetting::kInFlightPerKey},
        {"max_pending_per_key", QueueSetting::kPendingPerKey}};
    for (const auto& [name, field] : kFields) {
      auto it = json.find(name);
      if (it == json.end() || !it->is_null()) continue;
      if (std::find(change.reset.begin(), change.reset.end(), field) == change.reset.end()) {
        change.reset.push_back(field);
      }
    }
  }
  ObjectReader r(json);
  QueueSettings& settings = change.settings;
  std::optional<int64_t> concurrency, max_in_flight, max_attempts, in_flight_per_key,
      pending_per_key;
  const Json* backoff = nullptr;
  const Json* rate_limit = nullptr;
  CHRONOQ_RETURN_IF_ERROR(r.Int("concurrency", concurrency, 1, kMaxQueueConcurrency));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_in_flight", max_in_flight, 1, kMaxQueueConcurrency));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_in_flight_per_key", in_flight_per_key, 1, kMaxInFlightPerKey));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_pending_per_key", pending_per_key, 1, kMaxPendingPerKey));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_attempts", max_attempts, 1, kMaxAttemptsLimit));
  CHRONOQ_RETURN_IF_ERROR(r.Object("backoff", backoff));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("retention_ms", settings.retention, Duration::zero(),
                                   std::chrono::hours(24 * 3650)));
  CHRONOQ_RETURN_IF_ERROR(r.Object("rate_limit", rate_limit));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  // max_in_flight is another name for concurrency: either, or both if equal.
  if (concurrency && max_in_flight && *concurrency != *max_in_flight) {
    return Status::InvalidArgument(
        "max_in_flight", "is another name for concurrency (" + std::to_string(*concurrency) +
                             "): give one of them, or both with the same value");
  }
  if (!concurrency) concurrency = max_in_flight;
  if (concurrency) settings.concurrency = static_cast<int>(*concurrency);
  if (in_flight_per_key) settings.max_in_flight_per_key = static_cast<int>(*in_flight_per_key);
  settings.max_pending_per_key = pending_per_key;
  if (max_attempts) settings.max_attempts = static_cast<int>(*max_attempts);
  if (backoff != nullptr) {
    ObjectReader b(*backoff, "backoff.");
    std::optional<Duration> base, cap;
    CHRONOQ_RETURN_IF_ERROR(b.Required("base_ms"));
    CHRONOQ_RETURN_IF_ERROR(b.Millis("base_ms", base, std::chrono::milliseconds(1), kMaxLease));
    CHRONOQ_RETURN_IF_ERROR(b.Millis("cap_ms", cap, std::chrono::milliseconds(1), kMaxLease));
    CHRONOQ_RETURN_IF_ERROR(b.Finish());
    settings.backoff = Backoff{.base = *base, .cap = cap.value_or(std::max(*base, Backoff().cap))};
  }
  if (rate_limit != nullptr) {
    ObjectReader l(*rate_limit, "rate_limit.");
    std::optional<int64_t> count;
    std::optional<Duration> period;
    CHRONOQ_RETURN_IF_ERROR(l.Required("count"));
    CHRONOQ_RETURN_IF_ERROR(l.Required("period_ms"));
    CHRONOQ_RETURN_IF_ERROR(l.Int("count", count, 1, kMaxRateLimitCount));
    CHRONOQ_RETURN_IF_ERROR(
        l.Millis("period_ms", period, std::chrono::milliseconds(1), kMaxRateLimitPeriod));
    CHRONOQ_RETURN_IF_ERROR(l.Finish());
    settings.rate_limit = RateLimit{static_cast<int>(*count), *period};
  }
  // Both names of concurrency, one null and one not, contradict each other.
  if (settings.concurrency && std::find(change.reset.begin(), change.reset.end(),
                                        QueueSetting::kConcurrency) != change.reset.end()) {
    return Status::InvalidArgument(
        "max_in_flight", "is another name for concurrency: give one of them, or both the same");
  }
  return change;
}

}  // namespace

void Api::ListQueues(const Respond& respond) {
  run_blocking_([this, respond] {
    Result<std::vector<QueueInfo>> queues = engine_.ListQueues();
    if (!queues.ok()) return respond(ErrorResponse(queues.status()));
    ApiResponse out;
    out.body = "{\"queues\":";
    AppendArray(out.body, *queues, AppendQueue);
    out.body += '}';
    respond(std::move(out));
  });
}

void Api::GetQueue(const std::string& queue, const Respond& respond) {
  run_blocking_([this, queue, respond] { respond(QueueResponse(engine_.GetQueue(queue))); });
}

void Api::ConfigureQueue(const std::string& queue, const std::string& body,
                         const Respond& respond) {
  Result<QueueSettingsChange> change = ParseQueueSettings(body);
  if (!change.ok()) return respond(ErrorResponse(change.status()));
  run_blocking_([this, queue, change = *std::move(change), respond] {
    respond(QueueResponse(engine_.ConfigureQueue(queue, change.settings, change.reset)));
  });
}

void Api::PauseQueue(const std::string& queue, bool paused, const std::string& body,
                     const Respond& respond) {
  if (Status s = ExpectNoFields(body); !s.ok()) return respond(ErrorResponse(s));
  run_blocking_([this, queue, paused, respond] {
    respond(QueueResponse(engine_.PauseQueue(queue, paused)));
  });
}

void Api::Metrics(const Respond& respond) {
  run_blocking_([this, respond] {
    Result<std::vector<QueueInfo>> queues = engine_.ListQueues();
    if (!queues.ok()) return respond(ErrorResponse(queues.status()));
    ApiResponse out;
    out.content_type = std::string(kMetricsContentType);
    out.body = RenderMetrics(engine_.Stats(), *queues, counters_);
    respond(std::move(out));
  });
}

}  // namespace chronoq::server
