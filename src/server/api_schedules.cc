// The schedule endpoints. Every engine call here blocks (on a commit, or on
// the engine's loop for a read), so each runs on the blocking pool, never on
// an I/O thread; request bodies and queries are checked before, on the I/O
// thread, and bad ones are answered at once.
#include "chronoq/schedule.h"

#include "codec/json_codec.h"
#include "server/api.h"

namespace chronoq::server {
namespace {

// GET /v1/schedules/{name}/next answers 10 instants unless asked otherwise.
constexpr int kDefaultNextCount = 10;
// GET /v1/cron/next: 5 runs unless asked otherwise, at most 100.
constexpr int kDefaultCronPreviewCount = 5;
constexpr int kMaxCronPreviewCount = 100;

Result<ScheduleSpec> ParseScheduleBody(const std::string& body,
                                       std::optional<std::string_view> path_name) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  return ParseScheduleSpec(json, path_name);
}

}  // namespace

void Api::RespondSchedule(const Result<Schedule>& schedule, int status, const Respond& respond) {
  if (!schedule.ok()) return respond(ErrorResponse(schedule.status()));
  if (schedule->spec.target && on_webhook_queue_) on_webhook_queue_(schedule->spec.queue);
  ApiResponse out;
  out.status = status;
  AppendSchedule(out.body, *schedule);
  respond(std::move(out));
}

void Api::CreateSchedule(const std::string& body, const Respond& respond) {
  Result<ScheduleSpec> spec = ParseScheduleBody(body, std::nullopt);
  if (!spec.ok()) return respond(ErrorResponse(spec.status()));
  run_blocking_([this, spec = std::move(*spec), respond] {
    RespondSchedule(engine_.CreateSchedule(spec), 201, respond);
  });
}

void Api::PutSchedule(const std::string& name, const std::string& body, const Respond& respond) {
  Result<ScheduleSpec> spec = ParseScheduleBody(body, name);
  if (!spec.ok()) return respond(ErrorResponse(spec.status()));
  run_blocking_([this, spec = std::move(*spec), respond] {
    RespondSchedule(engine_.PutSchedule(spec), 200, respond);
  });
}

void Api::GetSchedule(const std::string& name, const Respond& respond) {
  run_blocking_(
      [this, name, respond] { RespondSchedule(engine_.GetSchedule(name), 200, respond); });
}

void Api::ListSchedules(std::string_view query, const Respond& respond) {
  ListSchedulesRequest req;
  if (Status s = ForEachListParam(query, req.queue, req.limit, req.cursor); !s.ok()) {
    return respond(ErrorResponse(s));
  }
  run_blocking_([this, req = std::move(req), respond] {
    Result<SchedulePage> page = engine_.ListSchedules(req);
    if (!page.ok()) return respond(ErrorResponse(page.status()));
    ApiResponse out;
    AppendPage(out.body, "schedules", page->schedules, AppendSchedule, page->next_cursor);
    respond(std::move(out));
  });
}

void Api::DeleteSchedule(const std::string& name, const std::string& body, const Respond& respond) {
  if (Status s = ExpectNoFields(body); !s.ok()) return respond(ErrorResponse(s));
  run_blocking_([this, name, respond] {
    const Status s = engine_.DeleteSchedule(name);
    if (!s.ok()) return respond(ErrorResponse(s));
    ApiResponse out;
    out.status = 204;
    respond(std::move(out));
  });
}

void Api::PauseSchedule(const std::string& name, bool paused, const std::string& body,
                        const Respond& respond) {
  if (Status s = ExpectNoFields(body); !s.ok()) return respond(ErrorResponse(s));
  run_blocking_([this, name, paused, respond] {
    RespondSchedule(engine_.PauseSchedule(name, paused), 200, respond);
  });
}

void Api::NextOccurrences(const std::string& name, std::string_view query, const Respond& respond) {
  Result<int> count = ParseOnlyIntParam(query, "count", kDefaultNextCount);
  if (!count.ok()) return respond(ErrorResponse(count.status()));
  run_blocking_([this, name, count = *count, respond] {
    Result<std::vector<Timestamp>> next = engine_.NextOccurrences(name, count);
    if (!next.ok()) return respond(ErrorResponse(next.status()));
    ApiResponse out;
    out.body = "{\"next\":";
    AppendArray(out.body, *next, AppendTime);
    out.body += '}';
    respond(std::move(out));
  });
}

void Api::CronNext(std::string_view query, const Respond& respond) {
  std::string cron;
  CronOptions options;
  int count = kDefaultCronPreviewCount;
  Status s = ForEachQueryParam(query, [&](std::string_view key, std::string value) -> Status {
    if (key == "cron") {
      cron = std::move(value);
    } else if (key == "tz") {
      options.tz = std::move(value);
    } else if (key == "dst_gap") {
      CHRONOQ_ASSIGN_OR_RETURN(options.dst_gap, ParseDstGap(value, key));
    } else if (key == "dst_repeat") {
      CHRONOQ_ASSIGN_OR_RETURN(options.dst_repeat, ParseDstRepeat(value, key));
    } else if (key == "count") {
      CHRONOQ_ASSIGN_OR_RETURN(count, ParseIntParam(key, value, 1, kMaxCronPreviewCount));
    } else {
      return UnknownQueryParam(key);
    }
    return {};
  });
  if (s.ok() && cron.empty()) s = Status::InvalidArgument("cron", "is required");
  Result<CronExpr> expr = s.ok() ? CronExpr::Parse(cron, options) : Result<CronExpr>(s);
  if (!expr.ok()) return respond(ErrorResponse(expr.status()));
  std::vector<Timestamp> next;
  for (Timestamp at = clock_.Now(); static_cast<int>(next.size()) < count;) {
    std::optional<Timestamp> n = expr->Next(at);
    if (!n) break;
    next.push_back(*n);
    at = *n;
  }
  ApiResponse out;
  out.body = "{\"next\":";
  AppendArray(out.body, next, AppendTime);
  out.body += '}';
  respond(std::move(out));
}

}  // namespace chronoq::server
