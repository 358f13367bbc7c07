// The HTTP/JSON API of chronoqd, independent of the transport: a request in,
// a response out through a callback (at once, or later from the engine's loop
// thread once the change is committed). docs/API.md lists every endpoint.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/engine.h"

#include "common/manual_clock.h"
#include "server/stats_history.h"
#include "server/tokens.h"

namespace chronoq::server {

struct ApiRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, still percent-encoded
  std::string body;
  // The node that forwarded this request (header X-Chronoq-Forwarded-By),
  // empty when it came from a client: a forwarded request is never
  // forwarded again.
  std::string forwarded_by;
};

struct ApiResponse {
  int status = 200;
  std::string body;  // JSON unless content_type says otherwise
  std::string content_type = "application/json";
  std::string allow;  // for 405: the methods the path accepts
  // More headers (the dashboard's Content-Security-Policy, a redirect's Location).
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, writes the body. Answers that come from the engine's loop
  // thread carry the engine's result here instead of a finished body, so the
  // loop never formats JSON; the transport renders on its own thread.
  std::function<void(std::string&)> render;

  // The body, rendering it first if need be.
  std::string& Render() {
    if (render) {
      render(body);
      render = nullptr;
    }
    return body;
  }
};

using Respond = std::function<void(ApiResponse)>;

// Counts requests by status class for /metrics.
struct ApiCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> client_errors{0};  // 4xx
  std::atomic<uint64_t> server_errors{0};  // 5xx
};

// How often chronoqd samples the engine's statistics for GET /v1/stats/history.
inline constexpr Duration kDefaultStatsInterval = std::chrono::seconds(10);

// The header a cluster node adds to a request it forwards, naming itself.
inline constexpr std::string_view kForwardedBy = "X-Chronoq-Forwarded-By";

// What the transport hands every request to: the Api, or in a cluster the
// node, which hands it to its Api while it leads and forwards it otherwise.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // Answers `request` through `respond`, exactly once.
  virtual void Handle(ApiRequest request, Respond respond) = 0;
  // The scope a token needs for `method` on `target` (path and query): the
  // scope of the route Handle would take it to (Route::scope). The transport
  // checks it before it reads the body.
  virtual Scope RequiredScope(std::string_view method, std::string_view target) const = 0;
};

// One endpoint of the Api: a method and a path pattern, whose `{name}`
// segments each match one percent-encoded path segment (handed to the
// endpoint decoded; a bad encoding is a 400 naming `name`).
// Each names the scope a token needs to call it (docs/API.md, "Scopes").
struct Route {
  std::string_view method;   // "GET", "POST", ...
  std::string_view pattern;  // "/v1/tasks/{id}/ack"
  Scope scope;
};

// docs/openapi.yaml, as built into the binary (GET /v1/openapi.yaml).
std::string_view OpenApiYaml();

class Api final : public RequestHandler {
 public:
  // Every endpoint the Api serves, in the order they are matched (a literal
  // segment before a `{name}` at the same place). docs/openapi.yaml
  // describes each of them and no other (tests/server/openapi_routes_test.cc).
  static std::vector<Route> Routes();
  // The scope of the endpoint `method` on `target` reaches; read when it
  // reaches none (the answer is a 404 or 405, which changes nothing).
  static Scope ScopeOf(std::string_view method, std::string_view target);

  // `run_blocking` runs rare calls that block on a commit (queue settings,
  // schedules) off the I/O threads.
  // `on_webhook_queue` is told the queue of every task with a target that
  // was enqueued (chronoqd's deliverer then serves that queue).
  // `stats_interval` paces GET /v1/stats/history's samples (an hour of them is kept).
  // When `clock` is a ManualClock (chronoqd --test-clock), GET and POST
  // /v1/test/clock read and move it; otherwise they answer 404.
  Api(Engine& engine, Clock& clock, std::function<void(std::function<void()>)> run_blocking,
      std::function<void(const std::string& queue)> on_webhook_queue = {},
      Duration stats_interval = kDefaultStatsInterval);

  void Handle(ApiRequest request, Respond respond) override;
  Scope RequiredScope(std::string_view method, std::string_view target) const override {
    return ScopeOf(method, target);
  }

  const ApiCounters& counters() const { return counters_; }
  // Notes engine activity that comes in no request (webhook deliveries
  // settled), for the statistics history (StatsSampler::Poke). Thread-safe.
  void NoteActivity() { sampler_.Poke(); }

 private:
  struct Call;
  struct Endpoint;
  static const std::vector<Endpoint>& Endpoints();
  // The first endpoint (in Endpoints()'s order) whose pattern fits the path
  // `segments` and whose method is `method`, or nullptr; `allow`, when
  // given, collects the methods of the endpoints whose pattern fits.
  static const Endpoint* Find(std::string_view method,
                              const std::vector<std::string_view>& segments, std::string* allow);
  void Dispatch(const ApiRequest& request, const Respond& respond);
  // One per endpoint; each answers through `respond` exactly once.
  void CreateTask(const std::string& body, const Respond& respond);
  void CreateBatch(const std::string& body, const Respond& respond);
  void GetTask(const std::string& id, std::string_view query, const Respond& respond);
  void ListTasks(std::string_view query, const Respond& respond);
  void CancelTask(const std::string& id, const std::string& body, const Respond& respond);
  void RetryTask(const std::string& id, const std::string& body, const Respond& respond);
  void RescheduleTask(const std::string& id, const std::string& body, const Respond& respond);
  void Claim(const std::string& queue, const std::string& body, const Respond& respond);
  void AckTask(const std::string& id, const std::string& body, const Respond& respond);
  void AckMany(const std::string& body, const Respond& respond);
  void FailTask(const std::string& id, const std::string& body, const Respond& respond);
  void ExtendTask(const std::string& id, const std::string& body, const Respond& respond);
  void PurgeTask(const std::string& id, const std::string& body, const Respond& respond);
  void StatsHistoryOf(const Respond& respond);
  // api_queues.cc
  void ListQueues(const Respond& respond);
  void GetQueue(const std::string& queue, const Respond& respond);
  void QueueKeys(const std::string& queue, std::string_view query, const Respond& respond);
  void ConfigureQueue(const std::string& queue, const std::string& body, const Respond& respond);
  void PauseQueue(const std::string& queue, bool paused, const std::string& body,
                  const Respond& respond);
  void Metrics(const Respond& respond);
  // GET /healthz: 200 {"status":"ok","store":"up"}, or 503
  // {"status":"unavailable","store":"down","error":{"code":"store_unavailable",
  // "message":...}} while the store cannot be reached (EngineStats::store_up),
  // or 503 with "status" and "store" "degraded" while its writes fail but
  // it answers reads (a full disk under SQLite).
  void Health(const Respond& respond);
  // api_schedules.cc
  void CreateSchedule(const std::string& body, const Respond& respond);
  void ListSchedules(std::string_view query, const Respond& respond);
  void GetSchedule(const std::string& name, const Respond& respond);
  void PutSchedule(const std::string& name, const std::string& body, const Respond& respond);
  void DeleteSchedule(const std::string& name, const std::string& body, const Respond& respond);
  void PauseSchedule(const std::string& name, bool paused, const std::string& body,
                     const Respond& respond);
  void NextOccurrences(const std::string& name, std::string_view query, const Respond& respond);
  // GET /v1/cron/next: a cron rule's next runs, by the schedules' own calculator.
  void CronNext(std::string_view query, const Respond& respond);
  // api_bulk.cc
  void StartBulk(const std::string& body, const Respond& respond);
  void GetBulkJob(const std::string& id, const Respond& respond);
  void ListBulkJobs(std::string_view query, const Respond& respond);
  void CancelBulkJob(const std::string& id, const std::string& body, const Respond& respond);
  // api_locks.cc
  void AcquireLock(const std::string& key, const std::string& body, const Respond& respond);
  void ReleaseLock(const std::string& key, const std::string& body, const Respond& respond);
  void ExtendLock(const std::string& key, const std::string& body, const Respond& respond);
  void GetLock(const std::string& key, const Respond& respond);
  void ListLocks(std::string_view query, const Respond& respond);
  // api_test_clock.cc
  void GetTestClock(const Respond& respond);
  void MoveTestClock(const std::string& body, const Respond& respond);
  // Answers with the schedule (or the error); tells on_webhook_queue_ about a
  // schedule with a target, whose occurrences chronoqd must deliver.
  void RespondSchedule(const Result<Schedule>& schedule, int status, const Respond& respond);

  Engine& engine_;
  Clock& clock_;
  ManualClock* test_clock_;  // clock_, when it is one: /v1/test/clock is served
  std::function<void(std::function<void()>)> run_blocking_;
  std::function<void(const std::string& queue)> on_webhook_queue_;
  ApiCounters counters_;
  StatsHistory history_;
  StatsSampler sampler_;  // last: its thread reads engine_ and history_
};

// The HTTP status and wire code for an engine error: InvalidArgument 400
// "invalid_argument", NotFound 404, AlreadyExists 409 "conflict",
// FailedPrecondition 409, ResourceExhausted 429, Unavailable 503, ...; an
// error with a reason (Status::reason()) has the reason's name as its code:
// 409 "stale_token", 409 "lock_wait_timeout", 429 "key_backlog_full",
// 503 "store_unavailable".
int HttpStatusOf(const Status& status);
std::string_view WireCodeOf(const Status& status);
ApiResponse ErrorResponse(const Status& status);
// `status` with the JSON `body`, already rendered.
ApiResponse JsonResponse(int status, std::string body);
// 405 method_not_allowed for `method` on `path`, with Allow: `allow`.
ApiResponse MethodNotAllowed(std::string_view method, std::string_view path, std::string allow);

// A Done callback that answers with `write(body, value)` or the error.
// The body is rendered later, off the engine's loop thread (ApiResponse::render).
template <typename T, typename Write>
Engine::Done<T> Reply(Respond respond, Write write, int status = 200) {
  return [respond = std::move(respond), write = std::move(write), status](Result<T> r) {
    if (!r.ok()) return respond(ErrorResponse(r.status()));
    ApiResponse out;
    out.status = status;
    out.render = [write, value = std::move(*r)](std::string& body) { write(body, value); };
    respond(std::move(out));
  };
}

// Calls `on(key, value)` for each `key=value` of a query string (the value
// percent-decoded, '+' a space; empty pairs skipped) until one fails.
Status ForEachQueryParam(std::string_view query,
                         const std::function<Status(std::string_view key, std::string value)>& on);
// ForEachQueryParam for a listing: reads `queue`, `limit` and `cursor` into
// the request's fields and hands any other parameter to `other` (none: an
// unknown parameter).
Status ForEachListParam(
    std::string_view query, std::optional<std::string>& queue, int& limit, std::string& cursor,
    const std::function<Status(std::string_view key, std::string value)>& other = nullptr);
// A query parameter that must be an integer between `min` and `max`.
Result<int> ParseIntParam(std::string_view key, std::string_view value, int min = INT32_MIN,
                          int max = INT32_MAX);
// The integer parameter `name` (`fallback` when absent) of a query that may
// have no other parameter.
Result<int> ParseOnlyIntParam(std::string_view query, std::string_view name, int fallback);
// An error for a query parameter nobody asked for.
Status UnknownQueryParam(std::string_view key);

}  // namespace chronoq::server
