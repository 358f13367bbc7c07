// The queue endpoints and /metrics. Their engine calls block on a commit or
// read every queue, so they run on the blocking pool, never on an I/O thread.
#include "chronoq/time.h"

#include "codec/json_codec.h"
#include "server/api.h"
#include "server/metrics.h"

namespace chronoq::server {
namespace {

// GET /v1/queues/{queue}/keys answers the 10 longest backlogs unless asked otherwise.
constexpr int kDefaultKeysLimit = 10;

ApiResponse QueueResponse(const Result<QueueInfo>& q) {
  if (!q.ok()) return ErrorResponse(q.status());
  ApiResponse out;
  AppendQueue(out.body, *q);
  return out;
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

void Api::QueueKeys(const std::string& queue, std::string_view query, const Respond& respond) {
  Result<int> limit = ParseOnlyIntParam(query, "limit", kDefaultKeysLimit);
  if (!limit.ok()) return respond(ErrorResponse(limit.status()));
  run_blocking_([this, queue, limit = *limit, respond] {
    Result<std::vector<KeyBacklog>> keys = engine_.KeyBacklogs(queue, limit);
    if (!keys.ok()) return respond(ErrorResponse(keys.status()));
    ApiResponse out;
    out.body = "{\"keys\":";
    AppendArray(out.body, *keys, [](std::string& o, const KeyBacklog& k) {
      o += "{\"key\":";
      AppendString(o, k.key);
      o += ",\"backlog\":";
      o += std::to_string(k.backlog);
      o += '}';
    });
    out.body += '}';
    respond(std::move(out));
  });
}

void Api::ConfigureQueue(const std::string& queue, const std::string& body,
                         const Respond& respond) {
  Result<QueueSettingsChange> change = [&]() -> Result<QueueSettingsChange> {
    CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
    return ParseQueueSettings(json);
  }();
  if (!change.ok()) return respond(ErrorResponse(change.status()));
  run_blocking_([this, queue, change = *std::move(change), respond] {
    Result<QueueInfo> configured = engine_.ConfigureQueue(queue, change.settings, change.reset);
    if (!configured.ok() && change.as_max_in_flight &&
        configured.status().field() == "concurrency") {
      // The engine knows one name; the caller used the other.
      const Status& s = configured.status();
      configured =
          Status::InvalidArgument("max_in_flight", s.message().substr(s.message().find(": ") + 2));
    }
    respond(QueueResponse(configured));
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
