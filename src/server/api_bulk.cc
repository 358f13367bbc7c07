// The bulk endpoints (chronoq/bulk.h): POST /v1/tasks:bulk starts a job, or
// with dry_run counts what it would do; GET /v1/bulk and /v1/bulk/{id} read
// jobs; POST /v1/bulk/{id}/cancel stops one. Starting blocks (a dry run walks
// every matching task), so it runs on the blocking pool; reading and
// cancelling a job only take the jobs' lock.
#include "chronoq/bulk.h"

#include "codec/json_codec.h"
#include "server/api.h"

namespace chronoq::server {
namespace {

Result<BulkFilter> ParseBulkFilter(const Json& object) {
  if (!object.is_object()) return Status::InvalidArgument("filter", "must be an object");
  ObjectReader r(object, "filter.");
  BulkFilter f;
  std::optional<std::string> state, id_prefix;
  std::optional<bool> all;
  CHRONOQ_RETURN_IF_ERROR(r.String("queue", f.queue));
  CHRONOQ_RETURN_IF_ERROR(r.String("state", state));
  CHRONOQ_RETURN_IF_ERROR(r.String("key", f.key));
  CHRONOQ_RETURN_IF_ERROR(r.String("id_prefix", id_prefix));
  CHRONOQ_RETURN_IF_ERROR(r.Time("run_at_from", f.run_at_from));
  CHRONOQ_RETURN_IF_ERROR(r.Time("run_at_to", f.run_at_to));
  CHRONOQ_RETURN_IF_ERROR(r.Bool("all", all));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  if (state) {
    CHRONOQ_ASSIGN_OR_RETURN(f.state, ParseTaskState(*state, "filter.state"));
  }
  if (id_prefix) {
    if (id_prefix->empty()) return Status::InvalidArgument("filter.id_prefix", "must not be empty");
    f.id_prefix = std::move(*id_prefix);
  }
  f.all = all.value_or(false);
  return f;
}

// The body of POST /v1/tasks:bulk: {filter, action, run_at?, shift_ms?,
// dry_run?}. Types here; the engine checks the rest.
Result<BulkRequest> ParseBulkRequest(const std::string& body) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  ObjectReader r(json);
  BulkRequest request;
  const Json* filter = nullptr;
  std::optional<std::string> action;
  std::optional<bool> dry_run;
  CHRONOQ_RETURN_IF_ERROR(r.Required("filter"));
  CHRONOQ_RETURN_IF_ERROR(r.Object("filter", filter));
  CHRONOQ_RETURN_IF_ERROR(r.Required("action"));
  CHRONOQ_RETURN_IF_ERROR(r.String("action", action));
  CHRONOQ_RETURN_IF_ERROR(r.Time("run_at", request.run_at));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("shift_ms", request.shift));
  CHRONOQ_RETURN_IF_ERROR(r.Bool("dry_run", dry_run));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  CHRONOQ_ASSIGN_OR_RETURN(request.filter, ParseBulkFilter(*filter));
  CHRONOQ_ASSIGN_OR_RETURN(request.action, ParseBulkAction(*action, "action"));
  request.dry_run = dry_run.value_or(false);
  return request;
}

void AppendOptionalTime(std::string& out, const std::optional<Timestamp>& t) {
  if (t) {
    AppendTime(out, *t);
  } else {
    out += "null";
  }
}

// The text, or null when it is empty.
void AppendTextOrNull(std::string& out, const std::string& text) {
  if (text.empty()) {
    out += "null";
  } else {
    AppendString(out, text);
  }
}

// A job as the API shows it. The filter carries only the conditions given.
void AppendBulkJob(std::string& out, const BulkJob& job) {
  const BulkRequest& r = job.request;
  const BulkFilter& f = r.filter;
  out += "{\"id\":";
  AppendTextOrNull(out, job.id);
  out += ",\"state\":";
  AppendString(out, BulkJobStateName(job.state));
  out += ",\"action\":";
  AppendString(out, BulkActionName(r.action));
  out += ",\"dry_run\":";
  out += r.dry_run ? "true" : "false";
  out += ",\"filter\":{";
  size_t start = out.size();
  auto field = [&](std::string_view name) {
    if (out.size() > start) out += ',';
    AppendString(out, name);
    out += ':';
  };
  auto text = [&](std::string_view name, std::string_view value) {
    field(name);
    AppendString(out, value);
  };
  auto time = [&](std::string_view name, Timestamp value) {
    field(name);
    AppendTime(out, value);
  };
  if (f.queue) text("queue", *f.queue);
  if (f.state) text("state", TaskStateName(*f.state));
  if (f.key) text("key", *f.key);
  if (!f.id_prefix.empty()) text("id_prefix", f.id_prefix);
  if (f.run_at_from) time("run_at_from", *f.run_at_from);
  if (f.run_at_to) time("run_at_to", *f.run_at_to);
  if (f.all) {
    field("all");
    out += "true";
  }
  out += "},\"run_at\":";
  AppendOptionalTime(out, r.run_at);
  out += ",\"shift_ms\":";
  out +=
      r.shift
          ? std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*r.shift).count())
          : "null";
  out += ",\"matched\":" + std::to_string(job.matched);
  out += ",\"applied\":" + std::to_string(job.applied);
  out += ",\"skipped\":{";
  start = out.size();
  for (const auto& [reason, n] : job.skipped) {
    field(reason);
    out += std::to_string(n);
  }
  out += "},\"started_at\":";
  AppendTime(out, job.started);
  out += ",\"finished_at\":";
  AppendOptionalTime(out, job.finished);
  out += ",\"error\":";
  AppendTextOrNull(out, job.error);
  out += ",\"cursor\":";
  AppendTextOrNull(out, job.cursor);
  out += '}';
}

ApiResponse BulkJobResponse(const Result<BulkJob>& job, int status = 200) {
  if (!job.ok()) return ErrorResponse(job.status());
  ApiResponse out;
  out.status = status;
  AppendBulkJob(out.body, *job);
  return out;
}

}  // namespace

void Api::StartBulk(const std::string& body, const Respond& respond) {
  Result<BulkRequest> request = ParseBulkRequest(body);
  if (!request.ok()) return respond(ErrorResponse(request.status()));
  run_blocking_([this, request = std::move(*request), respond] {
    // A job runs on after the answer: 202 Accepted; a dry run is done.
    respond(BulkJobResponse(engine_.StartBulk(request), request.dry_run ? 200 : 202));
  });
}

void Api::GetBulkJob(const std::string& id, const Respond& respond) {
  respond(BulkJobResponse(engine_.GetBulk(id)));
}

void Api::ListBulkJobs(std::string_view query, const Respond& respond) {
  if (!query.empty()) {
    Status s = ForEachQueryParam(
        query, [](std::string_view key, const std::string&) { return UnknownQueryParam(key); });
    if (!s.ok()) return respond(ErrorResponse(s));
  }
  ApiResponse out;
  out.body = "{\"jobs\":";
  AppendArray(out.body, engine_.ListBulk(), AppendBulkJob);
  out.body += '}';
  respond(std::move(out));
}

void Api::CancelBulkJob(const std::string& id, const std::string& body, const Respond& respond) {
  if (Status s = ExpectNoFields(body); !s.ok()) return respond(ErrorResponse(s));
  respond(BulkJobResponse(engine_.CancelBulk(id)));
}

}  // namespace chronoq::server
