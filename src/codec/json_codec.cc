#include "codec/json_codec.h"

#include <algorithm>

#include "chronoq/time.h"

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

// Epoch milliseconds accepted for times: 1970 to the end of 9999.
constexpr int64_t kMaxEpochMillis = 253402300799999;

// Bounds on schedule texts the engine parses (far above any real one).
constexpr size_t kMaxCronBytes = 1024;
constexpr size_t kMaxZoneBytes = 128;
constexpr size_t kMaxEnumNameBytes = 32;

int64_t Millis(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// An enum field given by its name; `parse` is ParseMisfire, ParseOverlap, ...
template <typename Enum>
Status ReadEnum(ObjectReader& r, std::string_view name,
                Result<Enum> (*parse)(std::string_view, std::string_view),
                std::optional<Enum>& out) {
  std::optional<std::string> text;
  CHRONOQ_RETURN_IF_ERROR(r.String(name, text, kMaxEnumNameBytes));
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

Status ObjectReader::String(std::string_view name, std::optional<std::string>& out,
                            size_t max_bytes) {
  const Json* v = Find(name);
  if (v == nullptr) return {};
  if (!v->is_string()) {
    return Status::InvalidArgument(Field(name),
                                   "must be a string, not " + std::string(TypeName(*v)));
  }
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return Status::InvalidArgument(Field(name),
                                   "longer than " + std::to_string(max_bytes) + " bytes");
  }
  out = s;
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

Status ObjectReader::Millis(std::string_view name, std::optional<Duration>& out, Duration min,
                            Duration max) {
  std::optional<int64_t> ms;
  CHRONOQ_RETURN_IF_ERROR(Int(name, ms,
                              std::chrono::duration_cast<std::chrono::milliseconds>(min).count(),
                              std::chrono::duration_cast<std::chrono::milliseconds>(max).count()));
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

Result<TaskSpec> ParseTaskSpec(const Json& object, const std::string& prefix) {
  if (!object.is_object()) {
    std::string where = prefix.empty() ? "body" : prefix.substr(0, prefix.size() - 1);
    return Status::InvalidArgument(where, "must be an object");
  }
  ObjectReader r(object, prefix);
  TaskSpec spec;
  std::optional<std::string> queue, id, on_conflict, payload, key;
  std::optional<int64_t> max_attempts, priority;
  std::optional<Duration> delay;
  std::optional<Timestamp> run_at;
  const Json* backoff = nullptr;
  const Json* target = nullptr;
  CHRONOQ_RETURN_IF_ERROR(r.Required("queue"));
  CHRONOQ_RETURN_IF_ERROR(r.String("queue", queue, kMaxQueueNameBytes));
  CHRONOQ_RETURN_IF_ERROR(r.Value("payload", payload));
  CHRONOQ_RETURN_IF_ERROR(r.Time("run_at", run_at));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("delay_ms", delay, Duration::zero(), kMaxDelay));
  CHRONOQ_RETURN_IF_ERROR(r.String("id", id, kMaxIdBytes));
  CHRONOQ_RETURN_IF_ERROR(r.String("on_conflict", on_conflict, 16));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_attempts", max_attempts, 1, kMaxAttemptsLimit));
  CHRONOQ_RETURN_IF_ERROR(r.Int("priority", priority, INT32_MIN, INT32_MAX));
  CHRONOQ_RETURN_IF_ERROR(r.Object("backoff", backoff));
  CHRONOQ_RETURN_IF_ERROR(r.Object("target", target));
  CHRONOQ_RETURN_IF_ERROR(r.String("key", key, kMaxKeyBytes));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  if (run_at && delay)
    return Status::InvalidArgument(r.Field("delay_ms"), "give run_at or delay_ms, not both");

  spec.queue = std::move(*queue);
  if (payload) spec.payload = std::move(*payload);
  spec.run_at = run_at;
  spec.delay = delay;
  if (id) {
    if (id->empty()) return Status::InvalidArgument(r.Field("id"), "must not be empty");
    spec.id = std::move(*id);
  }
  if (key) {
    // The engine reads an empty key as "none": one given must say something.
    // It checks the text (UTF-8, no control characters) by field.
    if (key->empty()) return Status::InvalidArgument(r.Field("key"), "must not be empty");
    spec.key = std::move(*key);
  }
  if (on_conflict) {
    CHRONOQ_ASSIGN_OR_RETURN(spec.on_conflict,
                             ParseOnConflict(*on_conflict, r.Field("on_conflict")));
  }
  if (max_attempts) spec.max_attempts = static_cast<int>(*max_attempts);
  if (priority) spec.priority = static_cast<int>(*priority);
  if (backoff != nullptr) {
    ObjectReader b(*backoff, r.Field("backoff."));
    std::optional<Duration> base, cap;
    CHRONOQ_RETURN_IF_ERROR(b.Required("base_ms"));
    CHRONOQ_RETURN_IF_ERROR(b.Millis("base_ms", base, std::chrono::milliseconds(1), kMaxDelay));
    CHRONOQ_RETURN_IF_ERROR(b.Millis("cap_ms", cap, std::chrono::milliseconds(1), kMaxDelay));
    CHRONOQ_RETURN_IF_ERROR(b.Finish());
    spec.backoff = Backoff{.base = *base, .cap = cap.value_or(Backoff().cap)};
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
  CHRONOQ_RETURN_IF_ERROR(r.String("url", url, kMaxTargetUrlBytes));
  CHRONOQ_RETURN_IF_ERROR(r.String("method", method, 16));
  CHRONOQ_RETURN_IF_ERROR(r.Object("headers", headers));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("timeout_ms", timeout, kMinTargetTimeout, kMaxTargetTimeout));
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
  std::optional<int64_t> max_catchup, priority, max_attempts;
  std::optional<Misfire> misfire;
  std::optional<Overlap> overlap;
  const Json* target = nullptr;
  if (!path_name) CHRONOQ_RETURN_IF_ERROR(r.Required("name"));
  CHRONOQ_RETURN_IF_ERROR(r.String("name", name, kMaxScheduleNameBytes));
  CHRONOQ_RETURN_IF_ERROR(r.Required("queue"));
  CHRONOQ_RETURN_IF_ERROR(r.String("queue", queue, kMaxQueueNameBytes));
  CHRONOQ_RETURN_IF_ERROR(r.String("cron", spec.cron, kMaxCronBytes));
  CHRONOQ_RETURN_IF_ERROR(
      r.Millis("every_ms", spec.every, kMinScheduleInterval, kMaxScheduleInterval));
  CHRONOQ_RETURN_IF_ERROR(
      r.Millis("fixed_delay_ms", spec.fixed_delay, kMinScheduleInterval, kMaxScheduleInterval));
  CHRONOQ_RETURN_IF_ERROR(r.String("tz", spec.tz, kMaxZoneBytes));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "dst_gap", &ParseDstGap, spec.dst_gap));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "dst_repeat", &ParseDstRepeat, spec.dst_repeat));
  CHRONOQ_RETURN_IF_ERROR(r.Time("start", spec.start));
  CHRONOQ_RETURN_IF_ERROR(r.Value("payload", payload));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "misfire", &ParseMisfire, misfire));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_catchup", max_catchup, 1, kMaxCatchupLimit));
  CHRONOQ_RETURN_IF_ERROR(ReadEnum(r, "overlap", &ParseOverlap, overlap));
  CHRONOQ_RETURN_IF_ERROR(r.Int("priority", priority, INT32_MIN, INT32_MAX));
  CHRONOQ_RETURN_IF_ERROR(r.Int("max_attempts", max_attempts, 1, kMaxAttemptsLimit));
  CHRONOQ_RETURN_IF_ERROR(r.Object("target", target));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  if (path_name && name && *name != *path_name) {
    return Status::InvalidArgument(
        "name", "must equal the name in the path (" + std::string(*path_name) + ") or be left out");
  }

  spec.name = path_name ? std::string(*path_name) : std::move(*name);
  spec.queue = std::move(*queue);
  if (payload) spec.payload = std::move(*payload);
  if (misfire) spec.misfire = *misfire;
  if (max_catchup) spec.max_catchup = static_cast<int>(*max_catchup);
  if (overlap) spec.overlap = *overlap;
  if (priority) spec.priority = static_cast<int>(*priority);
  if (max_attempts) spec.max_attempts = static_cast<int>(*max_attempts);
  if (target != nullptr) {
    CHRONOQ_ASSIGN_OR_RETURN(spec.target, ParseTarget(*target, "target."));
  }
  return spec;
}

void AppendString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
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
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void AppendTime(std::string& out, Timestamp t) {
  out += '"';
  out += FormatTime(t);
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
  if (key.empty()) {
    out += "null";
  } else {
    AppendString(out, key);
  }
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

}  // namespace chronoq
