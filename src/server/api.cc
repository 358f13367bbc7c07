#include "server/api.h"

#include <algorithm>
#include <charconv>
#include <memory>

#include "chronoq/time.h"

#include "codec/json_codec.h"
#include "server/task_bodies.h"
#include "server/ui.h"

namespace chronoq::server {

ApiResponse JsonResponse(int status, std::string body) {
  ApiResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

namespace {

using std::chrono::milliseconds;

std::vector<std::string> AckIds(const std::vector<AckRequest>& acks) {
  std::vector<std::string> ids;
  ids.reserve(acks.size());
  for (const AckRequest& a : acks) ids.push_back(a.id);
  return ids;
}

// [{"id":..,"ok":true} or {"id":..,"ok":false,"error":{...}}, ...]
void AppendAckResults(std::string& out, const std::vector<std::string>& ids,
                      const std::vector<Status>& results) {
  out += '[';
  for (size_t i = 0; i < results.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"id\":";
    AppendString(out, ids[i]);
    if (results[i].ok()) {
      out += ",\"ok\":true}";
    } else {
      out += ",\"ok\":false,";
      const std::string error = ErrorBody(WireCodeOf(results[i]), results[i]);
      out.append(error, 1, error.size() - 1);  // "error":{...}} without the outer '{'
    }
  }
  out += ']';
}

Engine::Done<Task> ReplyTask(Respond respond) {
  return Reply<Task>(std::move(respond),
                     [](std::string& body, const Task& t) { AppendTask(body, t); });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (and '+' as a space in queries).
Result<std::string> PercentDecode(std::string_view text, std::string_view field, bool query) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      const int hi = i + 2 < text.size() ? HexValue(text[i + 1]) : -1;
      const int lo = hi >= 0 ? HexValue(text[i + 2]) : -1;
      if (lo < 0) return Status::InvalidArgument(field, "bad percent-encoding");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (query && text[i] == '+') {
      out += ' ';
    } else {
      out += text[i];
    }
  }
  return out;
}

// A `{name}` segment of a route's pattern.
bool IsParam(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t start = 1;  // skip the leading '/'
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    segments.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return segments;
}

}  // namespace

void Api::Health(const Respond& respond) {
  const EngineStats stats = engine_.Stats();
  if (stats.store_up) return respond(JsonResponse(200, R"({"status":"ok","store":"up"})"));
  // The last commit failed. A store that still answers reads is degraded
  // (SQLite on a full or failing disk: reads are served, writes are not);
  // one that answers nothing is down (PostgreSQL out of reach). One read of
  // a task that does not exist tells them apart.
  const Status read = engine_.Get("healthz-probe").status();
  const bool reads = read.ok() || read.code() == StatusCode::kNotFound;
  // The error in the API's error form, so that any client shows it.
  std::string body = reads ? R"({"status":"degraded","store":"degraded",)"
                           : R"({"status":"unavailable","store":"down",)";
  body += ErrorBody("store_unavailable", Status::Unavailable(stats.store_error)).substr(1);
  respond(JsonResponse(503, std::move(body)));
}

int HttpStatusOf(const Status& status) {
  // A lock that stayed busy is an answer about the lock, not a server that
  // ran out of time.
  if (status.reason() == StatusReason::kLockWaitTimeout) return 409;
  switch (status.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return 503;
    case StatusCode::kDataLoss:
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

std::string_view WireCodeOf(const Status& status) {
  if (status.reason() != StatusReason::kNone) return StatusReasonName(status.reason());
  if (status.code() == StatusCode::kAlreadyExists) return "conflict";
  return StatusCodeName(status.code());
}

ApiResponse ErrorResponse(const Status& status) {
  return JsonResponse(HttpStatusOf(status), ErrorBody(WireCodeOf(status), status));
}

Status ForEachQueryParam(std::string_view query,
                         const std::function<Status(std::string_view key, std::string value)>& on) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string_view key = pair.substr(0, eq);
    CHRONOQ_ASSIGN_OR_RETURN(
        std::string value,
        PercentDecode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), key, true));
    CHRONOQ_RETURN_IF_ERROR(on(key, std::move(value)));
  }
  return {};
}

Status ForEachListParam(
    std::string_view query, std::optional<std::string>& queue, int& limit, std::string& cursor,
    const std::function<Status(std::string_view key, std::string value)>& other) {
  return ForEachQueryParam(query, [&](std::string_view key, std::string value) -> Status {
    if (key == "queue") {
      queue = std::move(value);
    } else if (key == "limit") {
      CHRONOQ_ASSIGN_OR_RETURN(limit, ParseIntParam(key, value));
    } else if (key == "cursor") {
      cursor = std::move(value);
    } else if (other) {
      return other(key, std::move(value));
    } else {
      return UnknownQueryParam(key);
    }
    return {};
  });
}

Result<int> ParseIntParam(std::string_view key, std::string_view value, int min, int max) {
  int n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || p != value.data() + value.size()) {
    return Status::InvalidArgument(key, "must be an integer");
  }
  if (n < min || n > max) {
    return Status::InvalidArgument(
        key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
  }
  return n;
}

Result<int> ParseOnlyIntParam(std::string_view query, std::string_view name, int fallback) {
  int value = fallback;
  CHRONOQ_RETURN_IF_ERROR(
      ForEachQueryParam(query, [&](std::string_view key, std::string text) -> Status {
        if (key != name) return UnknownQueryParam(key);
        CHRONOQ_ASSIGN_OR_RETURN(value, ParseIntParam(key, text));
        return {};
      }));
  return value;
}

Status UnknownQueryParam(std::string_view key) {
  return Status::InvalidArgument(key, "unknown query parameter");
}

Api::Api(Engine& engine, Clock& clock, std::function<void(std::function<void()>)> run_blocking,
         std::function<void(const std::string& queue)> on_webhook_queue, Duration stats_interval)
    : engine_(engine),
      clock_(clock),
      test_clock_(dynamic_cast<ManualClock*>(&clock)),
      run_blocking_(std::move(run_blocking)),
      on_webhook_queue_(std::move(on_webhook_queue)),
      history_(stats_interval,
               static_cast<size_t>(std::max<int64_t>(1, std::chrono::hours(1) / stats_interval))),
      sampler_(engine, clock, history_) {}

void Api::Handle(ApiRequest request, Respond respond) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  sampler_.Poke();  // before the engine hears of it (StatsSampler)
  Dispatch(request, [this, respond = std::move(respond)](ApiResponse r) {
    if (r.status >= 500) {
      counters_.server_errors.fetch_add(1, std::memory_order_relaxed);
    } else if (r.status >= 400) {
      counters_.client_errors.fetch_add(1, std::memory_order_relaxed);
    }
    respond(std::move(r));
  });
}

// What an endpoint gets: its `{name}` segments decoded, in order; the query
// string (still encoded); the body; where to answer.
struct Api::Call {
  const std::vector<std::string>& params;
  std::string_view query;
  const std::string& body;
  const Respond& respond;
};

struct Api::Endpoint {
  std::string_view method;
  std::string_view pattern;
  Scope scope;  // what a token needs to call it (the only place that says)
  void (*run)(Api&, const Call&);
  std::vector<std::string_view> segments;  // of the pattern, filled in once
};

// The route table: matched in this order, the first whose pattern and
// method fit wins. Each endpoint names the scope a token needs for it:
// read for every GET; write for what applications do (enqueue, claim, ack,
// fail, extend, cancel, reschedule, retry one task, locks, their
// schedules); admin for an operator's actions on a whole queue or on
// history (queue settings, pausing a queue, purging a task, bulk actions
// and cancelling them). docs/API.md,
// "Scopes", has the same table.
const std::vector<Api::Endpoint>& Api::Endpoints() {
  using C = const Call&;
  static const std::vector<Endpoint> endpoints = [] {
    std::vector<Endpoint> e = {
        {"GET", "/healthz", Scope::kRead, [](Api& api, C c) { api.Health(c.respond); }, {}},
        // the dashboard (server/ui.h)
        {"GET", "/", Scope::kRead, [](Api&, C c) { c.respond(UiResponse("GET", "/")); }, {}},
        {"GET", "/ui/", Scope::kRead, [](Api&, C c) { c.respond(UiResponse("GET", "/ui/")); }, {}},
        {"GET",
         "/ui/{file}",
         Scope::kRead,
         [](Api&, C c) { c.respond(UiResponse("GET", "/ui/" + c.params[0])); },
         {}},
        {"GET", "/metrics", Scope::kRead, [](Api& api, C c) { api.Metrics(c.respond); }, {}},
        {"GET",
         "/v1/version",
         Scope::kRead,
         [](Api&, C c) { c.respond(JsonResponse(200, R"({"version":")" CHRONOQ_VERSION R"("})")); },
         {}},
        {"GET",
         "/v1/openapi.yaml",
         Scope::kRead,
         [](Api&, C c) {
           ApiResponse r = JsonResponse(200, std::string(OpenApiYaml()));
           r.content_type = "application/yaml";
           c.respond(std::move(r));
         },
         {}},
        // tasks
        {"GET",
         "/v1/tasks",
         Scope::kRead,
         [](Api& api, C c) { api.ListTasks(c.query, c.respond); },
         {}},
        {"POST",
         "/v1/tasks",
         Scope::kWrite,
         [](Api& api, C c) { api.CreateTask(c.body, c.respond); },
         {}},
        {"POST",
         "/v1/tasks/batch",
         Scope::kWrite,
         [](Api& api, C c) { api.CreateBatch(c.body, c.respond); },
         {}},
        {"GET",
         "/v1/tasks/{id}",
         Scope::kRead,
         [](Api& api, C c) { api.GetTask(c.params[0], c.query, c.respond); },
         {}},
        {"DELETE",
         "/v1/tasks/{id}",
         Scope::kWrite,
         [](Api& api, C c) { api.CancelTask(c.params[0], c.body, c.respond); },
         {}},
        {"PATCH",
         "/v1/tasks/{id}",
         Scope::kWrite,
         [](Api& api, C c) { api.RescheduleTask(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/tasks/{id}/retry",
         Scope::kWrite,
         [](Api& api, C c) { api.RetryTask(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/tasks/{id}/ack",
         Scope::kWrite,
         [](Api& api, C c) { api.AckTask(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/tasks/{id}/fail",
         Scope::kWrite,
         [](Api& api, C c) { api.FailTask(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/tasks/{id}/extend",
         Scope::kWrite,
         [](Api& api, C c) { api.ExtendTask(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/tasks/{id}/purge",
         Scope::kAdmin,
         [](Api& api, C c) { api.PurgeTask(c.params[0], c.body, c.respond); },
         {}},
        // bulk actions (api_bulk.cc)
        {"POST",
         "/v1/tasks:bulk",
         Scope::kAdmin,
         [](Api& api, C c) { api.StartBulk(c.body, c.respond); },
         {}},
        {"GET",
         "/v1/bulk",
         Scope::kRead,
         [](Api& api, C c) { api.ListBulkJobs(c.query, c.respond); },
         {}},
        {"GET",
         "/v1/bulk/{id}",
         Scope::kRead,
         [](Api& api, C c) { api.GetBulkJob(c.params[0], c.respond); },
         {}},
        {"POST",
         "/v1/bulk/{id}/cancel",
         Scope::kAdmin,
         [](Api& api, C c) { api.CancelBulkJob(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/acks",
         Scope::kWrite,
         [](Api& api, C c) { api.AckMany(c.body, c.respond); },
         {}},
        {"GET",
         "/v1/stats/history",
         Scope::kRead,
         [](Api& api, C c) { api.StatsHistoryOf(c.respond); },
         {}},
        // schedules
        {"GET",
         "/v1/schedules",
         Scope::kRead,
         [](Api& api, C c) { api.ListSchedules(c.query, c.respond); },
         {}},
        {"POST",
         "/v1/schedules",
         Scope::kWrite,
         [](Api& api, C c) { api.CreateSchedule(c.body, c.respond); },
         {}},
        {"GET",
         "/v1/schedules/{name}",
         Scope::kRead,
         [](Api& api, C c) { api.GetSchedule(c.params[0], c.respond); },
         {}},
        {"PUT",
         "/v1/schedules/{name}",
         Scope::kWrite,
         [](Api& api, C c) { api.PutSchedule(c.params[0], c.body, c.respond); },
         {}},
        {"DELETE",
         "/v1/schedules/{name}",
         Scope::kWrite,
         [](Api& api, C c) { api.DeleteSchedule(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/schedules/{name}/pause",
         Scope::kWrite,
         [](Api& api, C c) { api.PauseSchedule(c.params[0], true, c.body, c.respond); },
         {}},
        {"POST",
         "/v1/schedules/{name}/resume",
         Scope::kWrite,
         [](Api& api, C c) { api.PauseSchedule(c.params[0], false, c.body, c.respond); },
         {}},
        {"GET",
         "/v1/schedules/{name}/next",
         Scope::kRead,
         [](Api& api, C c) { api.NextOccurrences(c.params[0], c.query, c.respond); },
         {}},
        {"GET",
         "/v1/cron/next",
         Scope::kRead,
         [](Api& api, C c) { api.CronNext(c.query, c.respond); },
         {}},
        // locks
        {"GET",
         "/v1/locks",
         Scope::kRead,
         [](Api& api, C c) { api.ListLocks(c.query, c.respond); },
         {}},
        {"GET",
         "/v1/locks/{key}",
         Scope::kRead,
         [](Api& api, C c) { api.GetLock(c.params[0], c.respond); },
         {}},
        {"POST",
         "/v1/locks/{key}/acquire",
         Scope::kWrite,
         [](Api& api, C c) { api.AcquireLock(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/locks/{key}/release",
         Scope::kWrite,
         [](Api& api, C c) { api.ReleaseLock(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/locks/{key}/extend",
         Scope::kWrite,
         [](Api& api, C c) { api.ExtendLock(c.params[0], c.body, c.respond); },
         {}},
        // queues
        {"GET", "/v1/queues", Scope::kRead, [](Api& api, C c) { api.ListQueues(c.respond); }, {}},
        {"GET",
         "/v1/queues/{queue}",
         Scope::kRead,
         [](Api& api, C c) { api.GetQueue(c.params[0], c.respond); },
         {}},
        {"GET",
         "/v1/queues/{queue}/keys",
         Scope::kRead,
         [](Api& api, C c) { api.QueueKeys(c.params[0], c.query, c.respond); },
         {}},
        {"PUT",
         "/v1/queues/{queue}",
         Scope::kAdmin,
         [](Api& api, C c) { api.ConfigureQueue(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/queues/{queue}/claim",
         Scope::kWrite,
         [](Api& api, C c) { api.Claim(c.params[0], c.body, c.respond); },
         {}},
        {"POST",
         "/v1/queues/{queue}/pause",
         Scope::kAdmin,
         [](Api& api, C c) { api.PauseQueue(c.params[0], true, c.body, c.respond); },
         {}},
        {"POST",
         "/v1/queues/{queue}/resume",
         Scope::kAdmin,
         [](Api& api, C c) { api.PauseQueue(c.params[0], false, c.body, c.respond); },
         {}},
        // tests only: 404 unless chronoqd keeps a test clock (api_test_clock.cc)
        {"GET",
         "/v1/test/clock",
         Scope::kRead,
         [](Api& api, C c) { api.GetTestClock(c.respond); },
         {}},
        {"POST",
         "/v1/test/clock",
         Scope::kAdmin,
         [](Api& api, C c) { api.MoveTestClock(c.body, c.respond); },
         {}},
    };
    for (Endpoint& endpoint : e) endpoint.segments = SplitPath(endpoint.pattern);
    return e;
  }();
  return endpoints;
}

std::vector<Route> Api::Routes() {
  std::vector<Route> out;
  for (const Endpoint& e : Endpoints()) out.push_back({e.method, e.pattern, e.scope});
  return out;
}

const Api::Endpoint* Api::Find(std::string_view method, const std::vector<std::string_view>& seg,
                               std::string* allow) {
  auto fits = [&](const Endpoint& e) {
    if (e.segments.size() != seg.size()) return false;
    for (size_t i = 0; i < seg.size(); ++i) {
      if (!IsParam(e.segments[i]) && e.segments[i] != seg[i]) return false;
    }
    return true;
  };
  for (const Endpoint& e : Endpoints()) {
    if (!fits(e)) continue;
    if (e.method == method) return &e;
    if (allow != nullptr && allow->find(e.method) == std::string::npos) {
      if (!allow->empty()) *allow += ", ";
      *allow += e.method;
    }
  }
  return nullptr;
}

Scope Api::ScopeOf(std::string_view method, std::string_view target) {
  const Endpoint* e = Find(method, SplitPath(target.substr(0, target.find('?'))), nullptr);
  return e == nullptr ? Scope::kRead : e->scope;
}

void Api::Dispatch(const ApiRequest& request, const Respond& respond) {
  const std::string_view target = request.target;
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
  const std::vector<std::string_view> seg = SplitPath(path);
  std::string allow;  // the methods of the endpoints at this path, for a 405
  if (const Endpoint* e = Find(request.method, seg, &allow); e != nullptr) {
    std::vector<std::string> params;
    for (size_t i = 0; i < seg.size(); ++i) {
      if (!IsParam(e->segments[i])) continue;
      const std::string_view name = e->segments[i].substr(1, e->segments[i].size() - 2);
      Result<std::string> value = PercentDecode(seg[i], name, false);
      if (!value.ok()) return respond(ErrorResponse(value.status()));
      params.push_back(std::move(*value));
    }
    return e->run(*this, Call{params, query, request.body, respond});
  }
  if (allow.empty()) {
    return respond(ErrorResponse(Status::NotFound("no endpoint at " + std::string(path))));
  }
  respond(MethodNotAllowed(request.method, path, std::move(allow)));
}

ApiResponse MethodNotAllowed(std::string_view method, std::string_view path, std::string allow) {
  ApiResponse r = JsonResponse(
      405, ErrorBody("method_not_allowed",
                     Status(StatusCode::kInvalidArgument,
                            std::string(method) + " is not allowed on " + std::string(path))));
  r.allow = std::move(allow);
  return r;
}

// --- tasks -------------------------------------------------------------------

void Api::CreateTask(const std::string& body, const Respond& respond) {
  Result<TaskSpec> spec = ReadTaskBody(body);
  if (!spec.ok()) return respond(ErrorResponse(spec.status()));
  engine_.EnqueueAsync(std::move(*spec), [this, respond](Result<Task> t) {
    if (!t.ok()) return respond(ErrorResponse(t.status()));
    if (t->target && on_webhook_queue_) on_webhook_queue_(t->queue);
    ApiResponse out;
    out.status = t->existed ? 200 : 201;
    out.render = [task = std::move(*t)](std::string& out_body) { AppendTask(out_body, task); };
    respond(std::move(out));
  });
}

void Api::CreateBatch(const std::string& body, const Respond& respond) {
  Result<TaskBatch> batch = ReadTaskBatchBody(body);
  if (!batch.ok()) return respond(ErrorResponse(batch.status()));
  const bool ids_only = batch->ids_only;
  engine_.EnqueueBatchAsync(
      std::move(batch->specs),
      Reply<std::vector<Task>>(
          respond,
          [this, ids_only](std::string& out, const std::vector<Task>& stored) {
            for (const Task& t : stored) {
              if (t.target && on_webhook_queue_) on_webhook_queue_(t.queue);
            }
            if (!ids_only) {
              out += "{\"tasks\":";
              AppendArray(out, stored, AppendTask);
              out += '}';
              return;
            }
            out += "{\"ids\":";
            AppendArray(out, stored, [](std::string& o, const Task& t) { AppendString(o, t.id); });
            out += '}';
          },
          201));
}

void Api::GetTask(const std::string& id, std::string_view query, const Respond& respond) {
  bool attempts = false;  // ?attempts=true adds the attempt history
  Status s = ForEachQueryParam(query, [&attempts](std::string_view key, std::string value) {
    if (key != "attempts") return UnknownQueryParam(key);
    if (value != "true" && value != "false") {
      return Status::InvalidArgument(key, "must be true or false");
    }
    attempts = value == "true";
    return Status();
  });
  if (!s.ok()) return respond(ErrorResponse(s));
  if (!attempts) return ReplyTask(respond)(engine_.Get(id));
  Reply<Task>(respond, AppendTaskWithAttempts)(engine_.Get(id));
}

void Api::ListTasks(std::string_view query, const Respond& respond) {
  ListRequest req;
  const auto other = [&req](std::string_view name, std::string value) -> Status {
    if (name == "state") {
      CHRONOQ_ASSIGN_OR_RETURN(req.state, ParseTaskState(value, "state"));
    } else if (name == "key") {
      // No task has the empty key (it means none); the engine checks the rest.
      if (value.empty()) return Status::InvalidArgument("key", "must not be empty");
      req.key = std::move(value);
    } else if (name == "id_prefix") {
      req.id_prefix = std::move(value);
    } else if (name == "created_after") {
      CHRONOQ_ASSIGN_OR_RETURN(req.created_after, ParseTime(value, name));
    } else if (name == "created_before") {
      CHRONOQ_ASSIGN_OR_RETURN(req.created_before, ParseTime(value, name));
    } else {
      return UnknownQueryParam(name);
    }
    return {};
  };
  Status s = ForEachListParam(query, req.queue, req.limit, req.cursor, other);
  if (!s.ok()) return respond(ErrorResponse(s));
  Result<TaskPage> page = engine_.List(req);
  if (!page.ok()) return respond(ErrorResponse(page.status()));
  ApiResponse out;
  AppendPage(out.body, "tasks", page->tasks, AppendTask, page->next_cursor);
  respond(std::move(out));
}

void Api::CancelTask(const std::string& id, const std::string& body, const Respond& respond) {
  Status s = ExpectNoFields(body);
  if (!s.ok()) return respond(ErrorResponse(s));
  engine_.CancelAsync(id, ReplyTask(respond));
}

void Api::RetryTask(const std::string& id, const std::string& body, const Respond& respond) {
  Status s = ExpectNoFields(body);
  if (!s.ok()) return respond(ErrorResponse(s));
  engine_.RetryAsync(id, ReplyTask(respond));
}

void Api::PurgeTask(const std::string& id, const std::string& body, const Respond& respond) {
  Status s = ExpectNoFields(body);
  if (!s.ok()) return respond(ErrorResponse(s));
  engine_.PurgeAsync(id, ReplyTask(respond));
}

void Api::StatsHistoryOf(const Respond& respond) { respond(JsonResponse(200, history_.Json())); }

void Api::RescheduleTask(const std::string& id, const std::string& body, const Respond& respond) {
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  std::optional<Timestamp> run_at;
  std::optional<Duration> delay;
  std::optional<std::string> payload;
  Status s = r.Time("run_at", run_at);
  if (s.ok()) s = r.Millis("delay_ms", delay);
  if (s.ok()) s = r.Value("payload", payload);
  if (s.ok()) s = r.Finish();
  // The engine moves a task to an instant; a delay is turned into one here,
  // so what only a delay can get wrong is checked here.
  if (s.ok() && run_at && delay) {
    s = Status::InvalidArgument("delay_ms", "give run_at or delay_ms, not both");
  }
  if (s.ok() && !run_at && !delay) s = Status::InvalidArgument("run_at", "missing (or delay_ms)");
  if (s.ok() && delay && (*delay < Duration::zero() || *delay > kMaxDelay)) {
    s = Status::InvalidArgument("delay_ms", "must be between 0 and 100 years");
  }
  if (!s.ok()) return respond(ErrorResponse(s));
  const Timestamp when = run_at ? *run_at : clock_.Now() + *delay;
  engine_.RescheduleAsync(id, when, std::move(payload), ReplyTask(respond));
}

// --- workers -------------------------------------------------------------------

void Api::Claim(const std::string& queue, const std::string& body, const Respond& respond) {
  Result<ClaimRequest> read = ReadClaimBody(body);
  if (!read.ok()) return respond(ErrorResponse(read.status()));
  ClaimRequest request = std::move(*read);
  request.queue = queue;
  const bool with_acks = !request.acks.empty();
  std::vector<std::string> ids = AckIds(request.acks);
  engine_.ClaimAsync(std::move(request),
                     Reply<ClaimAnswer>(respond, [with_acks, ids = std::move(ids)](
                                                     std::string& out, const ClaimAnswer& answer) {
                       out += "{\"tasks\":";
                       AppendArray(out, answer.leases, AppendLease);
                       if (with_acks) {
                         out += ",\"acks\":";
                         AppendAckResults(out, ids, answer.acks);
                       }
                       out += '}';
                     }));
}

void Api::AckTask(const std::string& id, const std::string& body, const Respond& respond) {
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  uint64_t token = 0;
  Status s = ReadToken(r, token);
  if (s.ok()) s = r.Finish();
  if (!s.ok()) return respond(ErrorResponse(s));
  engine_.AckManyAsync({AckRequest{id, token}}, [respond](Result<std::vector<Status>> acked) {
    Status status = acked.ok() ? acked->front() : acked.status();
    respond(status.ok() ? JsonResponse(200, "{}") : ErrorResponse(status));
  });
}

void Api::AckMany(const std::string& body, const Respond& respond) {
  Result<std::vector<AckRequest>> read = ReadAcksBody(body);
  if (!read.ok()) return respond(ErrorResponse(read.status()));
  std::vector<AckRequest> requests = std::move(*read);
  std::vector<std::string> ids = AckIds(requests);
  engine_.AckManyAsync(
      std::move(requests),
      Reply<std::vector<Status>>(
          respond, [ids = std::move(ids)](std::string& out, const std::vector<Status>& results) {
            out += "{\"results\":";
            AppendAckResults(out, ids, results);
            out += '}';
          }));
}

void Api::FailTask(const std::string& id, const std::string& body, const Respond& respond) {
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  uint64_t token = 0;
  std::optional<std::string> error;
  std::optional<Duration> retry_in;
  Status s = ReadToken(r, token);
  if (s.ok()) s = r.String("error", error);
  if (s.ok()) s = r.Millis("retry_in_ms", retry_in);
  if (s.ok()) s = r.Finish();
  if (!s.ok()) return respond(ErrorResponse(s));
  engine_.FailAsync(id, token, error.value_or(""), retry_in, "", [respond](Status status) {
    respond(status.ok() ? JsonResponse(200, "{}") : ErrorResponse(status));
  });
}

void Api::ExtendTask(const std::string& id, const std::string& body, const Respond& respond) {
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  uint64_t token = 0;
  std::optional<Duration> lease;
  Status s = ReadToken(r, token);
  if (s.ok()) s = r.Required("lease_ms");
  if (s.ok()) s = r.Millis("lease_ms", lease);
  if (s.ok()) s = r.Finish();
  if (!s.ok()) return respond(ErrorResponse(s));
  engine_.ExtendAsync(id, token, *lease,
                      Reply<Timestamp>(respond, [](std::string& out, const Timestamp& until) {
                        out += "{\"lease_until\":";
                        AppendTime(out, until);
                        out += '}';
                      }));
}

}  // namespace chronoq::server
