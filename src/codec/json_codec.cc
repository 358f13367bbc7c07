#include "codec/json_codec.h"

#include <algorithm>

#include "chronoq/time.h"

#include "common/text.h"

namespace chronoq {
namespace {

// How deep `text` nests arrays and objects, stopping early past `limit`.
// nlohmann parses iteratively but dumps recursively: a payload of 256 KiB of
// '[' would overflow the stack when written back, so depth is checked first.
int NestingDepth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string_view TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "null";
  }
}

int64_t Millis(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// An enum field given by its name; `parse` is ParseMisfire, ParseOverlap, ...
template <typename Enum>
Status ReadEnum(ObjectReader& r, std::string_view name,
                Result<Enum> (*parse)(std::string_view, std::string_view),
                std::optional<Enum>& out) {
  std::optional<std::string> text;
  CHRONOQ_RETURN_IF_ERROR(r.String(name, text));
  if (text) {
    CHRONOQ_ASSIGN_OR_RETURN(out, parse(*text, r.Field(name)));
  }
  return {};
}

// `append(out, *value)`, or null.
template <typename T, typename Append>
void AppendOptional(std::string& out, const std::optional<T>& value, Append append) {
  if (value) {
    append(out, *value);
  } else {
    out += "null";
  }
}

// `text` as a JSON string, or null when it is empty.
void AppendStringOrNull(std::string& out, std::string_view text) {
  if (text.empty()) {
    out += "null";
  } else {
    AppendString(out, text);
  }
}

}  // namespace

Result<Json> ParseBody(std::string_view body) {
  if (NestingDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return Status::InvalidArgument("body", "JSON nested deeper than 64 levels");
  }
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::InvalidArgument("body", "not valid JSON");
  if (!parsed.is_object()) return Status::InvalidArgument("body", "must be a JSON object");
  return parsed;
}

Status ExpectNoFields(std::string_view body) {
  if (body.empty()) return {};
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  return ObjectReader(json).Finish();
}

ObjectReader::ObjectReader(const Json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

const Json* ObjectReader::Find(std::string_view name) {
  read_.emplace_back(name);
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status ObjectReader::String(std::string_view name, std::optional<std::string>& out) {
  const Json* v = Find(name);
  if (v == nullptr) return {};
  if (!v->is_string()) {
    return Status::InvalidArgument(Field(name),
                                   "must be a string, not " + std::string(TypeName(*v)));
  }
  out = v->get_ref<const std::string&>();
  return {};
}

Status ObjectReader::Bool(std::string_view name, std::optional<bool>& out) {
  const Json* v = Find(name);
  if (v == nullptr) return {};
  if (!v->is_boolean()) {
    return Status::InvalidArgument(Field(name),
                                   "must be true or false, not " + std::string(TypeName(*v)));
  }
  out = v->get<bool>();
  return {};
}

Status ObjectReader::Int(std::string_view name, std::optional<int64_t>& out, int64_t min,
                         int64_t max) {
  const Json* v = Find(name);
  if (v == nullptr) return {};
  const auto range = [&] {
    return Status::InvalidArgument(
        Field(name), "must be between " + std::to_string(min) + " and " + std::to_string(max));
  };
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) return range();
    out = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    out = v->get<int64_t>();
  } else {
    return Status::InvalidArgument(Field(name),
                                   "must be an integer, not " + std::string(TypeName(*v)));
  }
  if (*out < min || *out > max) {
    out.reset();
    return range();
  }
  return {};
}

Status ObjectReader::Int(std::string_view name, std::optional<int>& out) {
  std::optional<int64_t> wide;
  CHRONOQ_RETURN_IF_ERROR(Int(name, wide, INT32_MIN, INT32_MAX));
  if (wide) out = static_cast<int>(*wide);
  return {};
}

Status ObjectReader::Millis(std::string_view name, std::optional<Duration>& out) {
  std::optional<int64_t> ms;
  CHRONOQ_RETURN_IF_ERROR(Int(name, ms, -kMaxMillis, kMaxMillis));
  if (ms) out = std::chrono::milliseconds(*ms);
  return {};
}

Status ObjectReader::Time(std::string_view name, std::optional<Timestamp>& out) {
  const Json* v = Find(name);
  if (v == nullptr) return {};
  if (v->is_string()) {
    CHRONOQ_ASSIGN_OR_RETURN(Timestamp t, ParseTime(v->get_ref<const std::string&>(), Field(name)));
    out = t;
    return {};
  }
  if (v->is_number_integer() || v->is_number_unsigned()) {
    std::optional<int64_t> ms;
    CHRONOQ_RETURN_IF_ERROR(Int(name, ms, 0, kMaxEpochMillis));
    out = Timestamp(std::chrono::milliseconds(*ms));
    return {};
  }
  return Status::InvalidArgument(
      Field(name),
      "must be an RFC 3339 time or epoch milliseconds, not " + std::string(TypeName(*v)));
}

Status ObjectReader::Value(std::string_view name, std::optional<std::string>& out) {
  const Json* v = Find(name);
  if (v != nullptr) out = v->dump();
  return {};
}

Status ObjectReader::Object(std::string_view name, const Json*& out) {
  out = Find(name);
  if (out != nullptr && !out->is_object()) {
    const std::string type(TypeName(*out));
    out = nullptr;
    return Status::InvalidArgument(Field(name), "must be an object, not " + type);
  }
  return {};
}

Status ObjectReader::Array(std::string_view name, const Json*& out) {
  out = Find(name);
  if (out != nullptr && !out->is_array()) {
    const std::string type(TypeName(*out));
    out = nullptr;
    return Status::InvalidArgument(Field(name), "must be an array, not " + type);
  }
  return {};
}

Status ObjectReader::Required(std::string_view name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return Status::InvalidArgument(Field(name), "missing");
  return {};
}

Status ObjectReader::Finish() const {
  for (const auto& [key, value] : object_.items()) {
    if (std::find(read_.begin(), read_.end(), key) == read_.end()) {
      return Status::InvalidArgument(Field(key), "unknown field");
    }
  }
  return {};
}

Status ReadToken(ObjectReader& r, uint64_t& token) {
  std::optional<int64_t> t;
  CHRONOQ_RETURN_IF_ERROR(r.Required("token"));
  CHRONOQ_RETURN_IF_ERROR(r.Int("token", t, 1, INT64_MAX));
  token = static_cast<uint64_t>(*t);
  return {};
}

namespace {

// 0 means "not given" to the engine (the queue's default applies), so a
// given 0 cannot be passed on: it is refused here, where it is still known
// to have been given.
Status PositiveIfGiven(const ObjectReader& r, std::string_view name,
                       const std::optional<int>& value) {
  if (value && *value == 0) {
    return Status::InvalidArgument(r.Field(name),
                                   "must be at least 1 (leave it out for the "
                                   "default)");
  }
  return {};
}

// {base_ms, cap_ms?}: without a cap, the default cap, or the base if larger.
Result<Backoff> ReadBackoff(const Json& object, std::string prefix) {
  ObjectReader b(object, std::move(prefix));
  std::optional<Duration> base, cap;
  CHRONOQ_RETURN_IF_ERROR(b.Required("base_ms"));
  CHRONOQ_RETURN_IF_ERROR(b.Millis("base_ms", base));
  CHRONOQ_RETURN_IF_ERROR(b.Millis("cap_ms", cap));
  CHRONOQ_RETURN_IF_ERROR(b.Finish());
  return Backoff{.base = *base, .cap = cap.value_or(std::max(*base, Backoff().cap))};
}

}  // namespace

Result<TaskSpec> ParseTaskSpec(const Json& object, const std::string& prefix) {
  if (!object.is_object()) {
    std::string where = prefix.empty() ? "body" : prefix.substr(0, prefix.size() - 1);
    return Status::InvalidArgument(where, "must be an object");
  }
  ObjectReader r(object, prefix);
  TaskSpec spec;
  std::optional<std::string> queue, id, on_conflict, payload, key;
  std::optional<int> max_attempts, priority;
  const Json* backoff = nullptr;
  const Json* target = nullptr;
  CHRONOQ_RETURN_IF_ERROR(r.Required("queue"));
  CHRONOQ_RETURN_IF_ERROR(r.String("queue", queue));
  CHRONOQ_RETURN_IF_ERROR(r.Value("payload", payload));
  CHRONOQ_RETURN_IF_ERROR(r.Time("run_at", spec.run_at));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("delay_ms", spec.delay));
  CHRONOQ_RETURN_IF_ERROR(r.String("id", id));
  CHRONOQ_RETURN_IF_ERROR(r.String("on_conflict", on_conflict));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_attempts", max_attempts));
  CHRONOQ_RETURN_IF_ERROR(r.Int("priority", priority));
  CHRONOQ_RETURN_IF_ERROR(r.Object("backoff", backoff));
  CHRONOQ_RETURN_IF_ERROR(r.Object("target", target));
  CHRONOQ_RETURN_IF_ERROR(r.String("key", key));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  CHRONOQ_RETURN_IF_ERROR(PositiveIfGiven(r, "max_attempts", max_attempts));

  spec.queue = std::move(*queue);
  if (payload) spec.payload = std::move(*payload);
  // The engine reads an empty id or key as "none": one given must say
  // something.
  if (id) {
    if (id->empty()) return Status::InvalidArgument(r.Field("id"), "must not be empty");
    spec.id = std::move(*id);
  }
  if (key) {
    if (key->empty()) return Status::InvalidArgument(r.Field("key"), "must not be empty");
    spec.key = std::move(*key);
  }
  if (on_conflict) {
    CHRONOQ_ASSIGN_OR_RETURN(spec.on_conflict,
                             ParseOnConflict(*on_conflict, r.Field("on_conflict")));
  }
  spec.max_attempts = max_attempts.value_or(0);
  spec.priority = priority.value_or(0);
  if (backoff != nullptr) {
    CHRONOQ_ASSIGN_OR_RETURN(spec.backoff, ReadBackoff(*backoff, r.Field("backoff.")));
  }
  if (target != nullptr) {
    CHRONOQ_ASSIGN_OR_RETURN(spec.target, ParseTarget(*target, r.Field("target.")));
  }
  return spec;
}

Result<WebhookTarget> ParseTarget(const Json& object, const std::string& prefix) {
  ObjectReader r(object, prefix);
  WebhookTarget target;
  std::optional<std::string> url, method;
  std::optional<Duration> timeout;
  const Json* headers = nullptr;
  CHRONOQ_RETURN_IF_ERROR(r.Required("url"));
  CHRONOQ_RETURN_IF_ERROR(r.String("url", url));
  CHRONOQ_RETURN_IF_ERROR(r.String("method", method));
  CHRONOQ_RETURN_IF_ERROR(r.Object("headers", headers));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("timeout_ms", timeout));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  target.url = std::move(*url);
  if (method) target.method = std::move(*method);
  if (timeout) target.timeout = *timeout;
  if (headers != nullptr) {
    for (const auto& [name, value] : headers->items()) {
      if (!value.is_string()) {
        return Status::InvalidArgument(r.Field("headers." + name), "must be a string");
      }
      target.headers.emplace_back(name, value.get<std::string>());
    }
  }
  // The engine checks the rest (scheme, method, header syntax) by field.
  return target;
}

Result<ScheduleSpec> ParseScheduleSpec(const Json& object,
                                       std::optional<std::string_view> path_name) {
  ObjectReader r(object);
  ScheduleSpec spec;
  std::optional<std::string> name, queue, payload;
  std::optional<int> max_catchup, priority, max_attempts;
  std::optional<Misfire> misfire;
  std::optional<Overlap> overlap;
  const Json* target = nullptr;
  if (!path_name) CHRONOQ_RETURN_IF_ERROR(r.Required("name"));
  CHRONOQ_RETURN_IF_ERROR(r.String("name", name));
  CHRONOQ_RETURN_IF_ERROR(r.Required("queue"));
  CHRONOQ_RETURN_IF_ERROR(r.String("queue", queue));
  CHRONOQ_RETURN_IF_ERROR(r.String("cron", spec.cron));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("every_ms", spec.every));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("fixed_delay_ms", spec.fixed_delay));
  CHRONOQ_RETURN_IF_ERROR(r.String("tz", spec.tz));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "dst_gap", &ParseDstGap, spec.dst_gap));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "dst_repeat", &ParseDstRepeat, spec.dst_repeat));
  CHRONOQ_RETURN_IF_ERROR(r.Time("start", spec.start));
  CHRONOQ_RETURN_IF_ERROR(r.Value("payload", payload));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "misfire", &ParseMisfire, misfire));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_catchup", max_catchup));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "overlap", &ParseOverlap, overlap));
  CHRONOQ_RETURN_IF_ERROR(r.Int("priority", priority));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_attempts", max_attempts));
  CHRONOQ_RETURN_IF_ERROR(r.Object("target", target));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  CHRONOQ_RETURN_IF_ERROR(PositiveIfGiven(r, "max_attempts", max_attempts));
  if (path_name && name && *name != *path_name) {
    return Status::InvalidArgument(
        "name", "must equal the name in the path (" + std::string(*path_name) + ") or be left out");
  }

  spec.name = path_name ? std::string(*path_name) : std::move(*name);
  spec.queue = std::move(*queue);
  if (payload) spec.payload = std::move(*payload);
  if (misfire) spec.misfire = *misfire;
  if (max_catchup) spec.max_catchup = *max_catchup;
  if (overlap) spec.overlap = *overlap;
  spec.priority = priority.value_or(0);
  spec.max_attempts = max_attempts.value_or(0);
  if (target != nullptr) {
    CHRONOQ_ASSIGN_OR_RETURN(spec.target, ParseTarget(*target, "target."));
  }
  return spec;
}

void AppendString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto plain = [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  };
  out += '"';
  for (size_t i = 0; i < text.size(); ++i) {
    // Printable ASCII but the quote and the backslash is written as it is:
    // the whole run at once.
    size_t end = i;
    while (end < text.size() && plain(text[end])) ++end;
    if (end > i) {
      out.append(text.data() + i, end - i);
      if (end == text.size()) break;
      i = end;
    }
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      // JSON text is UTF-8, and some strings are not checked to be: a
      // client's path or id echoed in an error, a webhook's answer. A byte
      // that starts no valid sequence is written as U+FFFD, so the document
      // still parses.
      const size_t n = Utf8SequenceLength(text, i);
      if (n == 0) {
        out += "\\ufffd";
      } else {
        out.append(text.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:  // a control character: the plain ones went out with their run
        out += "\\u00";
        out += kHex[u >> 4];
        out += kHex[u & 15];
    }
  }
  out += '"';
}

void AppendTime(std::string& out, Timestamp t) {
  out += '"';
  AppendFormattedTime(out, t);
  out += '"';
}

namespace {

// The fields a task and a lease share, without the closing brace. The key
// is null when the task has none.
void AppendCommon(std::string& out, std::string_view id, std::string_view queue,
                  std::string_view key, std::string_view payload, Timestamp run_at, int attempt,
                  int max_attempts) {
  out += "{\"id\":";
  AppendString(out, id);
  out += ",\"queue\":";
  AppendString(out, queue);
  out += ",\"key\":";
  AppendStringOrNull(out, key);
  out += ",\"payload\":";
  out += payload;
  out += ",\"run_at\":";
  AppendTime(out, run_at);
  out += ",\"attempt\":";
  out += std::to_string(attempt);
  out += ",\"max_attempts\":";
  out += std::to_string(max_attempts);
}

}  // namespace

void AppendTask(std::string& out, const Task& task) {
  AppendCommon(out, task.id, task.queue, task.key, task.payload, task.run_at, task.attempt,
               task.max_attempts);
  out += ",\"state\":";
  AppendString(out, TaskStateName(task.state));
  out += ",\"priority\":";
  out += std::to_string(task.priority);
  out += ",\"last_error\":";
  if (task.last_error) {
    AppendString(out, *task.last_error);
  } else {
    out += "null";
  }
  if (task.last_response) {
    out += ",\"last_response\":";
    AppendString(out, *task.last_response);
  }
  if (task.lease_until) {
    out += ",\"lease_until\":";
    AppendTime(out, *task.lease_until);
  }
  if (task.lease_token) {
    out += ",\"lease_token\":";
    out += std::to_string(*task.lease_token);
  }
  if (!task.worker.empty()) {
    out += ",\"worker\":";
    AppendString(out, task.worker);
  }
  if (!task.schedule.empty()) {
    out += ",\"schedule\":";
    AppendString(out, task.schedule);
  }
  if (task.target) {
    out += ",\"target\":";
    AppendTarget(out, *task.target);
  }
  out += ",\"created_at\":";
  AppendTime(out, task.created_at);
  out += ",\"updated_at\":";
  AppendTime(out, task.updated_at);
  out += '}';
}

void AppendAttempt(std::string& out, const TaskAttempt& attempt) {
  out += "{\"attempt\":";
  out += std::to_string(attempt.number);
  out += ",\"started_at\":";
  AppendTime(out, attempt.started_at);
  out += ",\"ended_at\":";
  AppendTime(out, attempt.ended_at);
  out += ",\"duration_ms\":";
  out += std::to_string(std::chrono::floor<std::chrono::milliseconds>(attempt.duration()).count());
  out += ",\"node\":";
  AppendStringOrNull(out, attempt.node);
  out += ",\"worker\":";
  AppendStringOrNull(out, attempt.worker);
  out += ",\"outcome\":";
  AppendString(out, AttemptOutcomeName(attempt.outcome));
  out += ",\"error\":";
  AppendStringOrNull(out, attempt.error);
  out += ",\"response\":";
  AppendStringOrNull(out, attempt.response);
  out += '}';
}

void AppendTaskWithAttempts(std::string& out, const Task& task) {
  AppendTask(out, task);
  out.pop_back();  // its closing brace
  out += ",\"attempts\":";
  AppendArray(out, task.attempts, AppendAttempt);
  out += '}';
}

void AppendTarget(std::string& out, const WebhookTarget& target) {
  out += "{\"url\":";
  AppendString(out, target.url);
  out += ",\"method\":";
  AppendString(out, target.method);
  out += ",\"headers\":{";
  for (size_t i = 0; i < target.headers.size(); ++i) {
    if (i > 0) out += ',';
    AppendString(out, target.headers[i].first);
    out += ':';
    AppendString(out, target.headers[i].second);
  }
  out += "},\"timeout_ms\":";
  out += std::to_string(Millis(target.timeout));
  out += '}';
}

namespace {

// {"name":...,"target":...: a schedule's definition, without the closing brace.
void AppendScheduleSpecFields(std::string& out, const ScheduleSpec& spec) {
  out += "{\"name\":";
  AppendString(out, spec.name);
  out += ",\"queue\":";
  AppendString(out, spec.queue);
  if (spec.cron) {
    out += ",\"cron\":";
    AppendString(out, *spec.cron);
    out += ",\"tz\":";
    AppendString(out, spec.tz.value_or("UTC"));
  } else if (spec.every) {
    out += ",\"every_ms\":";
    out += std::to_string(Millis(*spec.every));
  } else if (spec.fixed_delay) {
    out += ",\"fixed_delay_ms\":";
    out += std::to_string(Millis(*spec.fixed_delay));
  }
  out += ",\"start\":";
  AppendOptional(out, spec.start, AppendTime);
  out += ",\"payload\":";
  out += spec.payload;
  out += ",\"misfire\":";
  AppendString(out, MisfireName(spec.misfire));
  out += ",\"max_catchup\":";
  out += std::to_string(spec.max_catchup);
  out += ",\"overlap\":";
  AppendString(out, OverlapName(spec.overlap));
  out += ",\"dst_gap\":";
  AppendOptional(out, spec.dst_gap,
                 [](std::string& o, DstGap g) { AppendString(o, DstGapName(g)); });
  out += ",\"dst_repeat\":";
  AppendOptional(out, spec.dst_repeat,
                 [](std::string& o, DstRepeat r) { AppendString(o, DstRepeatName(r)); });
  out += ",\"priority\":";
  out += std::to_string(spec.priority);
  out += ",\"max_attempts\":";  // 0: the queue's or the engine's default applies
  out += spec.max_attempts == 0 ? "null" : std::to_string(spec.max_attempts);
  out += ",\"target\":";
  AppendOptional(out, spec.target, AppendTarget);
}

}  // namespace

void AppendScheduleSpec(std::string& out, const ScheduleSpec& spec) {
  AppendScheduleSpecFields(out, spec);
  out += '}';
}

void AppendSchedule(std::string& out, const Schedule& schedule) {
  AppendScheduleSpecFields(out, schedule.spec);
  out += ",\"paused\":";
  out += schedule.paused ? "true" : "false";
  out += ",\"next_run\":";
  AppendOptional(out, schedule.next_run, AppendTime);
  out += ",\"next_task_id\":";
  AppendOptional(out, schedule.next_task_id, AppendString);
  out += ",\"last_run\":";
  AppendOptional(out, schedule.last_run, [](std::string& o, const ScheduleRun& run) {
    o += "{\"task_id\":";
    AppendString(o, run.task_id);
    o += ",\"scheduled_for\":";
    AppendTime(o, run.scheduled_for);
    o += ",\"state\":";
    AppendString(o, TaskStateName(run.state));
    o += ",\"finished_at\":";
    AppendTime(o, run.finished_at);
    o += ",\"error\":";
    AppendOptional(o, run.error, AppendString);
    o += '}';
  });
  out += ",\"runs\":";
  out += std::to_string(schedule.runs);
  out += ",\"skipped\":";
  out += std::to_string(schedule.skipped);
  out += ",\"created_at\":";
  AppendTime(out, schedule.created_at);
  out += ",\"updated_at\":";
  AppendTime(out, schedule.updated_at);
  out += '}';
}

void AppendLease(std::string& out, const Lease& lease) {
  AppendCommon(out, lease.id, lease.queue, lease.key, lease.payload, lease.run_at, lease.attempt,
               lease.max_attempts);
  out += ",\"state\":\"running\",\"token\":";
  out += std::to_string(lease.token);
  out += ",\"lease_until\":";
  AppendTime(out, lease.lease_until);
  if (lease.target) {
    out += ",\"target\":";
    AppendTarget(out, *lease.target);
  }
  out += '}';
}

void AppendLockGrant(std::string& out, std::string_view key, const LockGrant& grant) {
  out += "{\"key\":";
  AppendString(out, key);
  out += ",\"token\":";
  out += std::to_string(grant.token);
  out += ",\"expires_at\":";
  AppendTime(out, grant.expires_at);
  out += '}';
}

void AppendLockInfo(std::string& out, const LockInfo& info) {
  out += "{\"key\":";
  AppendString(out, info.key);
  out += ",\"held\":";
  out += info.held ? "true" : "false";
  out += ",\"owner\":";
  AppendOptional(out, info.held && !info.owner.empty() ? std::optional(info.owner) : std::nullopt,
                 AppendString);
  out += ",\"token\":";
  out += info.held ? std::to_string(info.token) : "null";
  out += ",\"expires_at\":";
  AppendOptional(out, info.held ? info.expires_at : std::nullopt, AppendTime);
  out += ",\"waiters\":";
  out += std::to_string(info.waiters);
  out += '}';
}

std::string ErrorBody(std::string_view code, const Status& status) {
  std::string out = "{\"error\":{\"code\":";
  AppendString(out, code);
  out += ",\"message\":";
  AppendString(out, status.message());
  if (!status.field().empty()) {
    out += ",\"field\":";
    AppendString(out, status.field());
  }
  out += "}}";
  return out;
}

namespace {

template <typename T>
void AppendOptionalNumber(std::string& out, const std::optional<T>& value) {
  if (value) {
    out += std::to_string(*value);
  } else {
    out += "null";
  }
}

}  // namespace

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
  out += ",\"webhooks\":";
  out += q.webhooks ? "true" : "false";
  out += ",\"oldest_due_lateness_ms\":";
  out += std::to_string(Millis(q.oldest_due_lateness));
  out += ",\"due\":";
  out += std::to_string(q.due);
  out += ",\"concurrency\":";
  AppendOptionalNumber(out, q.settings.concurrency);
  out += ",\"max_in_flight\":";  // another name for concurrency
  AppendOptionalNumber(out, q.settings.concurrency);
  out += ",\"max_in_flight_per_key\":";
  AppendOptionalNumber(out, q.settings.max_in_flight_per_key);
  out += ",\"max_pending_per_key\":";
  AppendOptionalNumber(out, q.settings.max_pending_per_key);
  out += ",\"max_attempts\":";
  AppendOptionalNumber(out, q.settings.max_attempts);
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
  out += ",\"final_statuses\":";
  if (q.settings.final_statuses) {
    AppendArray(out, *q.settings.final_statuses,
                [](std::string& o, int status) { o += std::to_string(status); });
  } else {
    out += "null";
  }
  out += '}';
}

Result<QueueSettingsChange> ParseQueueSettings(const Json& json) {
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
        {"max_pending_per_key", QueueSetting::kPendingPerKey},
        {"final_statuses", QueueSetting::kFinalStatuses}};
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
  std::optional<int> concurrency, max_in_flight, max_attempts, in_flight_per_key;
  std::optional<int64_t> pending_per_key;
  const Json* backoff = nullptr;
  const Json* rate_limit = nullptr;
  const Json* final_statuses = nullptr;
  CHRONOQ_RETURN_IF_ERROR(r.Int("concurrency", concurrency));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_in_flight", max_in_flight));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_in_flight_per_key", in_flight_per_key));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_pending_per_key", pending_per_key));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_attempts", max_attempts));
  CHRONOQ_RETURN_IF_ERROR(r.Object("backoff", backoff));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("retention_ms", settings.retention));
  CHRONOQ_RETURN_IF_ERROR(r.Object("rate_limit", rate_limit));
  CHRONOQ_RETURN_IF_ERROR(r.Array("final_statuses", final_statuses));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  // max_in_flight is another name for concurrency: either, or both if equal.
  if (concurrency && max_in_flight && *concurrency != *max_in_flight) {
    return Status::InvalidArgument(
        "max_in_flight", "is another name for concurrency (" + std::to_string(*concurrency) +
                             "): give one of them, or both with the same value");
  }
  if (!concurrency) {
    concurrency = max_in_flight;
    change.as_max_in_flight = max_in_flight.has_value();
  }
  settings.concurrency = concurrency;
  settings.max_in_flight_per_key = in_flight_per_key;
  settings.max_pending_per_key = pending_per_key;
  settings.max_attempts = max_attempts;
  if (backoff != nullptr) {
    CHRONOQ_ASSIGN_OR_RETURN(settings.backoff, ReadBackoff(*backoff, "backoff."));
  }
  if (rate_limit != nullptr) {
    ObjectReader l(*rate_limit, "rate_limit.");
    std::optional<int> count;
    std::optional<Duration> period;
    CHRONOQ_RETURN_IF_ERROR(l.Required("count"));
    CHRONOQ_RETURN_IF_ERROR(l.Required("period_ms"));
    CHRONOQ_RETURN_IF_ERROR(l.Int("count", count));
    CHRONOQ_RETURN_IF_ERROR(l.Millis("period_ms", period));
    CHRONOQ_RETURN_IF_ERROR(l.Finish());
    settings.rate_limit = RateLimit{*count, *period};
  }
  if (final_statuses != nullptr) {
    settings.final_statuses.emplace();
    for (size_t i = 0; i < final_statuses->size(); ++i) {
      const Json& status = (*final_statuses)[i];
      if (!status.is_number_integer() || status.get<int64_t>() < 0 || status.get<int64_t>() > 999) {
        return Status::InvalidArgument("final_statuses[" + std::to_string(i) + "]",
                                       "must be an HTTP status (an integer)");
      }
      settings.final_statuses->push_back(status.get<int>());
    }
  }
  // Both names of concurrency, one null and one not, contradict each other.
  if (settings.concurrency && std::find(change.reset.begin(), change.reset.end(),
                                        QueueSetting::kConcurrency) != change.reset.end()) {
    return Status::InvalidArgument(
        "max_in_flight", "is another name for concurrency: give one of them, or both the same");
  }
  return change;
}

// --- stored forms ------------------------------------------------------------

std::string EncodeTarget(const WebhookTarget& target) {
  std::string out;
  AppendTarget(out, target);
  return out;
}

Result<WebhookTarget> DecodeTarget(std::string_view json) {
  Result<WebhookTarget> target = [&]() -> Result<WebhookTarget> {
    CHRONOQ_ASSIGN_OR_RETURN(const Json object, ParseBody(json));
    return ParseTarget(object, "target.");
  }();
  if (target.ok()) return target;
  return Status(StatusCode::kDataLoss,
                "stored webhook target is corrupt (" + target.status().message() + ")");
}

std::string EncodeScheduleSpec(const ScheduleSpec& spec) {
  std::string out;
  AppendScheduleSpec(out, spec);
  return out;
}

Result<ScheduleSpec> DecodeScheduleSpec(std::string_view json) {
  Result<ScheduleSpec> spec = [&]() -> Result<ScheduleSpec> {
    CHRONOQ_ASSIGN_OR_RETURN(const Json object, ParseBody(json));
    return ParseScheduleSpec(object);
  }();
  if (spec.ok()) return spec;
  return Status(StatusCode::kDataLoss,
                "stored schedule is corrupt (" + spec.status().message() + ")");
}

void AppendStoredAttempt(std::string& out, const TaskAttempt& attempt) {
  using std::chrono::floor;
  using std::chrono::milliseconds;
  const int64_t started = floor<milliseconds>(attempt.started_at.time_since_epoch()).count();
  const int64_t ended = floor<milliseconds>(attempt.ended_at.time_since_epoch()).count();
  out += '[';
  out += std::to_string(attempt.number);
  out += ',';
  out += std::to_string(started);
  out += ',';
  out += std::to_string(ended - started);
  out += ',';
  out += std::to_string(static_cast<int>(attempt.outcome));
  out += ',';
  AppendString(out, attempt.node);
  // The optional texts, null when empty, trailing nulls left out.
  const std::string* texts[] = {&attempt.worker, &attempt.error, &attempt.response};
  size_t n = 3;
  while (n > 0 && texts[n - 1]->empty()) --n;
  for (size_t i = 0; i < n; ++i) {
    out += ',';
    AppendStringOrNull(out, *texts[i]);
  }
  out += ']';
}

std::string EncodeAttempts(const std::vector<TaskAttempt>& attempts) {
  std::string out;
  AppendArray(out, attempts, AppendStoredAttempt);
  return out;
}

Result<std::vector<TaskAttempt>> DecodeAttempts(std::string_view json) {
  Result<std::vector<TaskAttempt>> attempts = [&]() -> Result<std::vector<TaskAttempt>> {
    const Json array = Json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (!array.is_array()) return Status::InvalidArgument("attempts", "not a JSON array");
    std::vector<TaskAttempt> out;
    for (size_t i = 0; i < array.size(); ++i) {
      const std::string field = "attempts[" + std::to_string(i) + "]";
      const Json& r = array[i];
      const auto text = [&r](size_t at) -> std::optional<std::string> {
        if (at >= r.size() || r[at].is_null()) return std::string();
        if (!r[at].is_string()) return std::nullopt;
        return r[at].get<std::string>();
      };
      if (!r.is_array() || r.size() < 5 || r.size() > 8 || !r[0].is_number_integer() ||
          !r[1].is_number_integer() || !r[2].is_number_integer() || !r[3].is_number_integer() ||
          !r[4].is_string()) {
        return Status::InvalidArgument(field, "not [number, start, duration, outcome, node, ...]");
      }
      const int64_t outcome = r[3].get<int64_t>();
      if (outcome < 0 || outcome > static_cast<int64_t>(AttemptOutcome::kLeaseExpired)) {
        return Status::InvalidArgument(field, "unknown outcome " + std::to_string(outcome));
      }
      std::optional<std::string> worker = text(5), error = text(6), response = text(7);
      if (!worker || !error || !response) {
        return Status::InvalidArgument(field, "worker, error and response must be text or null");
      }
      TaskAttempt a;
      a.number = static_cast<int>(r[0].get<int64_t>());
      a.started_at = Timestamp(std::chrono::milliseconds(r[1].get<int64_t>()));
      a.ended_at = a.started_at + std::chrono::milliseconds(r[2].get<int64_t>());
      a.outcome = static_cast<AttemptOutcome>(outcome);
      a.node = r[4].get<std::string>();
      a.worker = std::move(*worker);
      a.error = std::move(*error);
      a.response = std::move(*response);
      out.push_back(std::move(a));
    }
    return out;
  }();
  if (attempts.ok()) return attempts;
  return Status(StatusCode::kDataLoss,
                "stored attempt history is corrupt (" + attempts.status().message() + ")");
}

}  // namespace chronoq
