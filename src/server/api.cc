#include "server/api.h"

#include <charconv>
#include <memory>

#include "chronoq/time.h"

#include "codec/json_codec.h"

namespace chronoq::server {
namespace {

using std::chrono::milliseconds;

ApiResponse JsonResponse(int status, std::string body) {
  ApiResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// Reads the optional array `acks` ([{id, token}]); the engine checks the
// count and the ids.
Status ReadAcks(ObjectReader& r, std::vector<AckRequest>& out) {
  const Json* acks = nullptr;
  CHRONOQ_RETURN_IF_ERROR(r.Array("acks", acks));
  if (acks == nullptr) return {};
  // No acknowledgements means "none" to the engine: an empty array given
  // cannot be passed on.
  if (acks->empty()) return Status::InvalidArgument("acks", "must not be empty (leave it out)");
  out.reserve(acks->size());
  for (size_t i = 0; i < acks->size(); ++i) {
    const std::string prefix = "acks[" + std::to_string(i) + "].";
    if (!(*acks)[i].is_object()) {
      return Status::InvalidArgument(prefix.substr(0, prefix.size() - 1), "must be an object");
    }
    ObjectReader a((*acks)[i], prefix);
    std::optional<std::string> id;
    AckRequest req;
    CHRONOQ_RETURN_IF_ERROR(a.Required("id"));
    CHRONOQ_RETURN_IF_ERROR(a.String("id", id));
    CHRONOQ_RETURN_IF_ERROR(ReadToken(a, req.token));
    CHRONOQ_RETURN_IF_ERROR(a.Finish());
    req.id = std::move(*id);
    out.push_back(std::move(req));
  }
  return {};
}

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
  // The error in the API's error form, so that any client shows it.
  std::string body = R"({"status":"unavailable","store":"down",)";
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

Status UnknownQueryParam(std::string_view key) {
  return Status::InvalidArgument(key, "unknown query parameter");
}

Api::Api(Engine& engine, Clock& clock, std::function<void(std::function<void()>)> run_blocking,
         std::function<void(const std::string& queue)> on_webhook_queue)
    : engine_(engine),
      clock_(clock),
      run_blocking_(std::move(run_blocking)),
      on_webhook_queue_(std::move(on_webhook_queue)) {}

void Api::Handle(ApiRequest request, Respond respond) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  Dispatch(request, [this, respond = std::move(respond)](ApiResponse r) {
    if (r.status >= 500) {
      counters_.server_errors.fetch_add(1, std::memory_order_relaxed);
    } else if (r.status >= 400) {
      counters_.client_errors.fetch_add(1, std::memory_order_relaxed);
    }
    respond(std::move(r));
  });
}

void Api::Dispatch(const ApiRequest& request, const Respond& respond) {
  const std::string_view target = request.target;
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
  const std::string& method = request.method;
  const std::vector<std::string_view> seg = SplitPath(path);

  // Answers 405 unless the method is one of `allowed` ("GET, POST").
  auto allows = [&](std::string_view allowed) {
    size_t start = 0;
    while (start < allowed.size()) {
      size_t end = allowed.find(", ", start);
      if (end == std::string_view::npos) end = allowed.size();
      if (allowed.substr(start, end - start) == method) return true;
      start = end + 2;
    }
    ApiResponse r =
        JsonResponse(405, ErrorBody("method_not_allowed",
                                    Status(StatusCode::kInvalidArgument,
                                           method + " is not allowed on " + std::string(path))));
    r.allow = allowed;
    respond(std::move(r));
    return false;
  };
  auto fail = [&](const Status& s) { respond(ErrorResponse(s)); };

  if (seg.size() == 1 && seg[0] == "healthz") {
    if (allows("GET")) Health(respond);
    return;
  }
  if (seg.size() == 1 && seg[0] == "metrics") {
    if (allows("GET")) Metrics(respond);
    return;
  }
  if (seg.size() >= 2 && seg[0] == "v1") {
    if (seg.size() == 2 && seg[1] == "version") {
      if (allows("GET")) respond(JsonResponse(200, R"({"version":")" CHRONOQ_VERSION R"("})"));
      return;
    }
    if (seg[1] == "tasks") {
      if (seg.size() == 2) {
        if (!allows("GET, POST")) return;
        if (method == "POST") return CreateTask(request.body, respond);
        return ListTasks(query, respond);
      }
      if (seg.size() == 3 && seg[2] == "batch" && method == "POST") {
        return CreateBatch(request.body, respond);
      }
      Result<std::string> id = PercentDecode(seg[2], "id", false);
      if (!id.ok()) return fail(id.status());
      if (seg.size() == 3) {
        if (!allows("GET, DELETE, PATCH")) return;
        if (method == "GET") return GetTask(*id, respond);
        if (method == "DELETE") return CancelTask(*id, request.body, respond);
        return RescheduleTask(*id, request.body, respond);
      }
      if (seg.size() == 4) {
        const std::string_view verb = seg[3];
        if (verb == "retry" || verb == "ack" || verb == "fail" || verb == "extend") {
          if (!allows("POST")) return;
          if (verb == "retry") return RetryTask(*id, request.body, respond);
          if (verb == "ack") return AckTask(*id, request.body, respond);
          if (verb == "fail") return FailTask(*id, request.body, respond);
          return ExtendTask(*id, request.body, respond);
        }
      }
    }
    if (seg[1] == "schedules") {
      if (seg.size() == 2) {
        if (!allows("GET, POST")) return;
        if (method == "POST") return CreateSchedule(request.body, respond);
        return ListSchedules(query, respond);
      }
      Result<std::string> name = PercentDecode(seg[2], "name", false);
      if (!name.ok()) return fail(name.status());
      if (seg.size() == 3) {
        if (!allows("GET, PUT, DELETE")) return;
        if (method == "GET") return GetSchedule(*name, respond);
        if (method == "PUT") return PutSchedule(*name, request.body, respond);
        return DeleteSchedule(*name, request.body, respond);
      }
      if (seg.size() == 4) {
        const std::string_view verb = seg[3];
        if (verb == "pause" || verb == "resume") {
          if (allows("POST")) PauseSchedule(*name, verb == "pause", request.body, respond);
          return;
        }
        if (verb == "next") {
          if (allows("GET")) NextOccurrences(*name, query, respond);
          return;
        }
      }
    }
    if (seg[1] == "locks" && seg.size() >= 3) {
      Result<std::string> key = PercentDecode(seg[2], "key", false);
      if (!key.ok()) return fail(key.status());
      if (seg.size() == 3) {
        if (allows("GET")) GetLock(*key, respond);
        return;
      }
      if (seg.size() == 4) {
        const std::string_view verb = seg[3];
        if (verb == "acquire" || verb == "release" || verb == "extend") {
          if (!allows("POST")) return;
          if (verb == "acquire") return AcquireLock(*key, request.body, respond);
          if (verb == "release") return ReleaseLock(*key, request.body, respond);
          return ExtendLock(*key, request.body, respond);
        }
      }
    }
    if (seg.size() == 2 && seg[1] == "acks") {
      if (allows("POST")) AckMany(request.body, respond);
      return;
    }
    if (seg[1] == "queues") {
      if (seg.size() == 2) {
        if (allows("GET")) ListQueues(respond);
        return;
      }
      Result<std::string> queue = PercentDecode(seg[2], "queue", false);
      if (!queue.ok()) return fail(queue.status());
      if (seg.size() == 3) {
        if (allows("GET, PUT")) {
          if (method == "GET") return GetQueue(*queue, respond);
          return ConfigureQueue(*queue, request.body, respond);
        }
        return;
      }
      if (seg.size() == 4) {
        const std::string_view verb = seg[3];
        if (verb == "claim" || verb == "pause" || verb == "resume") {
          if (!allows("POST")) return;
          if (verb == "claim") return Claim(*queue, request.body, respond);
          return PauseQueue(*queue, verb == "pause", request.body, respond);
        }
      }
    }
  }
  respond(ErrorResponse(Status::NotFound("no endpoint at " + std::string(path))));
}

// --- tasks -------------------------------------------------------------------

void Api::CreateTask(const std::string& body, const Respond& respond) {
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  Result<TaskSpec> spec = ParseTaskSpec(*json, "");
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
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  const Json* tasks = nullptr;
  Status s = r.Required("tasks");
  if (s.ok()) s = r.Array("tasks", tasks);
  if (s.ok()) s = r.Finish();
  if (!s.ok()) return respond(ErrorResponse(s));
  std::vector<TaskSpec> specs;
  specs.reserve(tasks->size());
  for (size_t i = 0; i < tasks->size(); ++i) {
    Result<TaskSpec> spec = ParseTaskSpec((*tasks)[i], "tasks[" + std::to_string(i) + "].");
    if (!spec.ok()) return respond(ErrorResponse(spec.status()));
    specs.push_back(std::move(*spec));
  }
  engine_.EnqueueBatchAsync(std::move(specs),
                            Reply<std::vector<Task>>(
                                respond,
                                [this](std::string& out, const std::vector<Task>& stored) {
                                  for (const Task& t : stored) {
                                    if (t.target && on_webhook_queue_) on_webhook_queue_(t.queue);
                                  }
                                  out += "{\"tasks\":";
                                  AppendArray(out, stored, AppendTask);
                                  out += '}';
                                },
                                201));
}

void Api::GetTask(const std::string& id, const Respond& respond) {
  ReplyTask(respond)(engine_.Get(id));
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
  Result<Json> json = body.empty() ? Result<Json>(Json::object()) : ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  std::optional<int> max;
  std::optional<Duration> lease, wait;
  ClaimRequest request;
  Status s = r.Int("max", max);
  if (s.ok()) s = r.Millis("lease_ms", lease);
  if (s.ok()) s = r.Millis("wait_ms", wait);
  if (s.ok()) s = ReadAcks(r, request.acks);
  if (s.ok()) s = r.Finish();
  if (!s.ok()) return respond(ErrorResponse(s));
  request.queue = queue;
  request.max = max.value_or(1);
  request.lease = lease.value_or(milliseconds(30000));
  request.wait = wait.value_or(Duration::zero());
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
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  std::vector<AckRequest> requests;
  Status s = r.Required("acks");
  if (s.ok()) s = ReadAcks(r, requests);
  if (s.ok()) s = r.Finish();
  if (!s.ok()) return respond(ErrorResponse(s));
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
