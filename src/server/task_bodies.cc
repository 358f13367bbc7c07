#include "server/task_bodies.h"

#include <cstdint>
#include <string>
#include <utility>

#include "chronoq/limits.h"
#include "chronoq/time.h"

#include "codec/json_codec.h"
#include <simdjson.h>

namespace chronoq::server {
namespace {

namespace dom = simdjson::dom;

// How deep the fast reading follows a payload: a little short of the
// reference's limit (kMaxJsonDepth, counted the same way: the body's object
// is level 1), so that it never takes a body the reference would refuse.
constexpr int kFastDepth = kMaxJsonDepth - 2;

// Each I/O thread keeps its parser (simdjson's DOM parser: it validates the
// whole body, as the reference does) and a copy of the body with the padding
// simdjson reads past the end, so that neither is allocated again for the
// next body of the same size.
struct Scanner {
  dom::parser parser;
  std::string padded;
};

// Parses `body` into `root`, an object.
bool Start(std::string_view body, dom::object& root) {
  // \u escapes are the reference's: the two parsers need not agree on lone
  // surrogates.
  if (body.find("\\u") != std::string_view::npos) return false;
  thread_local Scanner scanner;
  std::string& padded = scanner.padded;
  padded.assign(body);
  padded.resize(body.size() + simdjson::SIMDJSON_PADDING);
  dom::element element;
  return scanner.parser.parse(padded.data(), body.size(), /*realloc_if_needed=*/false)
                 .get(element) == simdjson::SUCCESS &&
         element.get(root) == simdjson::SUCCESS;
}

// Appends a string of a payload (a value or a key) as the reference writes
// it back, unless it holds a control character other than \n, \r and \t:
// nlohmann writes \b and \f as such, AppendString as \u00XX.
bool AppendPayloadString(std::string_view text, std::string& out) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\r' && c != '\t') return false;
  }
  AppendString(out, text);
  return true;
}

// Appends `v` as the reference writes a payload back (nlohmann's dump(): no
// spaces, object keys in byte order, integers as they are, strings escaped as
// AppendString escapes them), or returns false for a value it may write
// differently: an object whose keys are out of order or repeated, a number
// with a fraction or an exponent, a string with a control character other
// than \n, \r and \t. `depth`: the level of `v`'s container.
bool AppendPayload(dom::element v, int depth, std::string& out) {
  switch (v.type()) {
    case dom::element_type::OBJECT: {
      if (depth + 1 > kFastDepth) return false;
      out += '{';
      std::string_view previous;
      bool first = true;
      for (dom::key_value_pair field : dom::object(v)) {
        if (!first && field.key <= previous) return false;
        if (!first) out += ',';
        if (!AppendPayloadString(field.key, out)) return false;
        out += ':';
        if (!AppendPayload(field.value, depth + 1, out)) return false;
        previous = field.key;
        first = false;
      }
      out += '}';
      return true;
    }
    case dom::element_type::ARRAY: {
      if (depth + 1 > kFastDepth) return false;
      out += '[';
      bool first = true;
      for (dom::element element : dom::array(v)) {
        if (!first) out += ',';
        if (!AppendPayload(element, depth + 1, out)) return false;
        first = false;
      }
      out += ']';
      return true;
    }
    case dom::element_type::STRING:
      return AppendPayloadString(std::string_view(v), out);
    case dom::element_type::INT64:
      out += std::to_string(int64_t(v));
      return true;
    case dom::element_type::UINT64:
      out += std::to_string(uint64_t(v));
      return true;
    case dom::element_type::BOOL:
      out += bool(v) ? "true" : "false";
      return true;
    case dom::element_type::NULL_VALUE:
      out += "null";
      return true;
    case dom::element_type::DOUBLE:
      return false;
  }
  return false;
}

std::optional<std::string_view> StringField(dom::element v) {
  std::string_view text;
  if (v.get(text) != simdjson::SUCCESS) return std::nullopt;
  return text;
}

// An integer field between `min` and `max`, as ObjectReader::Int takes it.
std::optional<int64_t> IntegerField(dom::element v, int64_t min, int64_t max) {
  int64_t n;
  if (v.type() != dom::element_type::INT64 || v.get(n) != simdjson::SUCCESS) return std::nullopt;
  if (n < min || n > max) return std::nullopt;
  return n;
}

// One task object (ParseTaskSpec's fields but backoff and target), `depth`
// its level in the body.
bool ReadTask(dom::object object, int depth, TaskSpec& spec) {
  enum Field : unsigned {
    kQueue = 1 << 0,
    kPayload = 1 << 1,
    kRunAt = 1 << 2,
    kDelay = 1 << 3,
    kId = 1 << 4,
    kOnConflict = 1 << 5,
    kMaxAttempts = 1 << 6,
    kPriority = 1 << 7,
    kKey = 1 << 8,
  };
  unsigned seen = 0;
  bool has_queue = false;
  for (dom::key_value_pair field : object) {
    const std::string_view name = field.key;
    Field which;
    if (name == "queue") {
      which = kQueue;
    } else if (name == "payload") {
      which = kPayload;
    } else if (name == "run_at") {
      which = kRunAt;
    } else if (name == "delay_ms") {
      which = kDelay;
    } else if (name == "id") {
      which = kId;
    } else if (name == "on_conflict") {
      which = kOnConflict;
    } else if (name == "max_attempts") {
      which = kMaxAttempts;
    } else if (name == "priority") {
      which = kPriority;
    } else if (name == "key") {
      which = kKey;
    } else {
      return false;  // backoff, target, or unknown
    }
    if ((seen & which) != 0) return false;  // the reference takes the last
    seen |= which;
    const dom::element v = field.value;
    if (v.is_null()) continue;  // null is absent, as for the reference
    switch (which) {
      case kQueue: {
        std::optional<std::string_view> text = StringField(v);
        if (!text) return false;
        spec.queue = *text;
        has_queue = true;
        break;
      }
      case kPayload:
        spec.payload.clear();
        if (!AppendPayload(v, depth, spec.payload)) return false;
        break;
      case kRunAt:
        if (std::optional<std::string_view> text = StringField(v)) {
          Result<Timestamp> t = ParseTime(*text, "run_at");
          if (!t.ok()) return false;
          spec.run_at = *t;
        } else {
          std::optional<int64_t> ms = IntegerField(v, 0, kMaxEpochMillis);
          if (!ms) return false;
          spec.run_at = Timestamp(std::chrono::milliseconds(*ms));
        }
        break;
      case kDelay: {
        std::optional<int64_t> ms = IntegerField(v, -kMaxMillis, kMaxMillis);
        if (!ms) return false;
        spec.delay = std::chrono::milliseconds(*ms);
        break;
      }
      case kId:
      case kKey: {
        std::optional<std::string_view> text = StringField(v);
        if (!text || text->empty()) return false;
        (which == kId ? spec.id : spec.key) = *text;
        break;
      }
      case kOnConflict: {
        std::optional<std::string_view> text = StringField(v);
        if (!text) return false;
        Result<OnConflict> on_conflict = ParseOnConflict(*text);
        if (!on_conflict.ok()) return false;
        spec.on_conflict = *on_conflict;
        break;
      }
      case kMaxAttempts:
      case kPriority: {
        std::optional<int64_t> n = IntegerField(v, INT32_MIN, INT32_MAX);
        // A given max_attempts of 0 is the reference's to refuse.
        if (!n || (which == kMaxAttempts && *n == 0)) return false;
        (which == kMaxAttempts ? spec.max_attempts : spec.priority) = static_cast<int>(*n);
        break;
      }
    }
  }
  return has_queue;
}

// Reads the optional array `acks`: [{id, token}] for successes, beside
// [{id, token, error, retry_in_ms?}] for failures (an entry with `error`
// fails its task). The engine checks the count, the ids and retry_in_ms.
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
    std::optional<std::string> error;
    std::optional<Duration> retry_in;
    CHRONOQ_RETURN_IF_ERROR(a.String("error", error));
    CHRONOQ_RETURN_IF_ERROR(a.Millis("retry_in_ms", retry_in));
    CHRONOQ_RETURN_IF_ERROR(a.Finish());
    if (retry_in && !error) {
      return Status::InvalidArgument(prefix + "retry_in_ms",
                                     "only with error (a failure's retry delay)");
    }
    if (error) req.failure = AckFailure{std::move(*error), retry_in};
    req.id = std::move(*id);
    out.push_back(std::move(req));
  }
  return {};
}

// One entry of `acks` (ReadAcks' fields).
bool ReadAck(dom::object object, AckRequest& ack) {
  bool has_id = false, has_token = false, seen_error = false, seen_retry = false;
  std::optional<std::string_view> error;
  std::optional<int64_t> retry_in;
  for (dom::key_value_pair field : object) {
    const std::string_view name = field.key;
    const dom::element v = field.value;
    if (name == "id" && !has_id) {
      std::optional<std::string_view> id = StringField(v);
      if (!id) return false;  // null too: the id is required
      ack.id = *id;
      has_id = true;
    } else if (name == "token" && !has_token) {
      std::optional<int64_t> token = IntegerField(v, 1, INT64_MAX);
      if (!token) return false;
      ack.token = static_cast<uint64_t>(*token);
      has_token = true;
    } else if (name == "error" && !seen_error) {
      seen_error = true;
      if (v.is_null()) continue;
      error = StringField(v);
      if (!error) return false;
    } else if (name == "retry_in_ms" && !seen_retry) {
      seen_retry = true;
      if (v.is_null()) continue;
      retry_in = IntegerField(v, -kMaxMillis, kMaxMillis);
      if (!retry_in) return false;
    } else {
      return false;
    }
  }
  if (!has_id || !has_token || (retry_in && !error)) return false;
  if (error) {
    ack.failure = AckFailure{std::string(*error), std::optional<Duration>()};
    if (retry_in) ack.failure->retry_after = std::chrono::milliseconds(*retry_in);
  }
  return true;
}

// A non-empty array of acks.
bool ReadAckArray(dom::element v, std::vector<AckRequest>& out) {
  dom::array acks;
  if (v.get(acks) != simdjson::SUCCESS || acks.size() == 0) return false;
  out.reserve(acks.size());
  for (dom::element element : acks) {
    dom::object ack;
    if (element.get(ack) != simdjson::SUCCESS || !ReadAck(ack, out.emplace_back())) return false;
  }
  return true;
}

}  // namespace

namespace task_bodies {

std::optional<TaskSpec> ReadTaskFast(std::string_view body) {
  dom::object root;
  TaskSpec spec;
  if (!Start(body, root) || !ReadTask(root, 1, spec)) return std::nullopt;
  return spec;
}

std::optional<TaskBatch> ReadBatchFast(std::string_view body) {
  dom::object root;
  if (!Start(body, root)) return std::nullopt;
  TaskBatch batch;
  bool has_tasks = false, has_return = false;
  for (dom::key_value_pair field : root) {
    if (field.key == "tasks" && !has_tasks) {
      has_tasks = true;
      dom::array tasks;
      if (field.value.get(tasks) != simdjson::SUCCESS) return std::nullopt;
      batch.specs.reserve(tasks.size());
      for (dom::element element : tasks) {
        dom::object task;
        if (element.get(task) != simdjson::SUCCESS) return std::nullopt;
        if (!ReadTask(task, 3, batch.specs.emplace_back())) return std::nullopt;
      }
    } else if (field.key == "return" && !has_return) {
      has_return = true;
      if (field.value.is_null()) continue;
      std::optional<std::string_view> answer = StringField(field.value);
      if (!answer || (*answer != "tasks" && *answer != "ids")) return std::nullopt;
      batch.ids_only = *answer == "ids";
    } else {
      return std::nullopt;
    }
  }
  if (!has_tasks) return std::nullopt;
  return batch;
}

std::optional<ClaimRequest> ReadClaimFast(std::string_view body) {
  dom::object root;
  if (!Start(body, root)) return std::nullopt;
  ClaimRequest request;
  bool seen_max = false, seen_lease = false, seen_wait = false, seen_worker = false;
  bool seen_acks = false;
  for (dom::key_value_pair field : root) {
    const std::string_view name = field.key;
    const dom::element v = field.value;
    bool* seen = name == "max"        ? &seen_max
                 : name == "lease_ms" ? &seen_lease
                 : name == "wait_ms"  ? &seen_wait
                 : name == "worker"   ? &seen_worker
                 : name == "acks"     ? &seen_acks
                                      : nullptr;
    if (seen == nullptr || *seen) return std::nullopt;
    *seen = true;
    if (v.is_null()) continue;
    if (name == "worker") {
      std::optional<std::string_view> worker = StringField(v);
      if (!worker) return std::nullopt;
      request.worker = *worker;
    } else if (name == "acks") {
      if (!ReadAckArray(v, request.acks)) return std::nullopt;
    } else if (name == "max") {
      std::optional<int64_t> max = IntegerField(v, INT32_MIN, INT32_MAX);
      if (!max) return std::nullopt;
      request.max = static_cast<int>(*max);
    } else {
      std::optional<int64_t> ms = IntegerField(v, -kMaxMillis, kMaxMillis);
      if (!ms) return std::nullopt;
      (name == "lease_ms" ? request.lease : request.wait) = std::chrono::milliseconds(*ms);
    }
  }
  return request;
}

std::optional<std::vector<AckRequest>> ReadAcksFast(std::string_view body) {
  dom::object root;
  if (!Start(body, root)) return std::nullopt;
  std::vector<AckRequest> acks;
  bool seen = false;
  for (dom::key_value_pair field : root) {
    if (field.key != "acks" || seen) return std::nullopt;
    seen = true;
    if (!ReadAckArray(field.value, acks)) return std::nullopt;
  }
  if (!seen) return std::nullopt;
  return acks;
}

Result<TaskSpec> ReadTaskReference(std::string_view body) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  return ParseTaskSpec(json, "");
}

Result<ClaimRequest> ReadClaimReference(std::string_view body) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json,
                           body.empty() ? Result<Json>(Json::object()) : ParseBody(body));
  ObjectReader r(json);
  std::optional<int> max;
  std::optional<Duration> lease, wait;
  std::optional<std::string> worker;
  ClaimRequest request;
  CHRONOQ_RETURN_IF_ERROR(r.Int("max", max));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("lease_ms", lease));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("wait_ms", wait));
  CHRONOQ_RETURN_IF_ERROR(r.String("worker", worker));
  CHRONOQ_RETURN_IF_ERROR(ReadAcks(r, request.acks));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  if (max) request.max = *max;
  if (lease) request.lease = *lease;
  if (wait) request.wait = *wait;
  if (worker) request.worker = std::move(*worker);
  return request;
}

Result<std::vector<AckRequest>> ReadAcksReference(std::string_view body) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  ObjectReader r(json);
  std::vector<AckRequest> requests;
  CHRONOQ_RETURN_IF_ERROR(r.Required("acks"));
  CHRONOQ_RETURN_IF_ERROR(ReadAcks(r, requests));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  return requests;
}

Result<TaskBatch> ReadBatchReference(std::string_view body) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  ObjectReader r(json);
  const Json* tasks = nullptr;
  // "return": "ids" answers the ids alone, in order: for clients that need
  // no more, it saves rendering each task (issue 19).
  std::optional<std::string> answer;
  CHRONOQ_RETURN_IF_ERROR(r.Required("tasks"));
  CHRONOQ_RETURN_IF_ERROR(r.Array("tasks", tasks));
  CHRONOQ_RETURN_IF_ERROR(r.String("return", answer));
  if (answer && *answer != "tasks" && *answer != "ids") {
    return Status::InvalidArgument("return", "must be tasks or ids, not '" + *answer + "'");
  }
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  TaskBatch batch;
  batch.ids_only = answer == "ids";
  batch.specs.reserve(tasks->size());
  for (size_t i = 0; i < tasks->size(); ++i) {
    CHRONOQ_ASSIGN_OR_RETURN(TaskSpec spec,
                             ParseTaskSpec((*tasks)[i], "tasks[" + std::to_string(i) + "]."));
    batch.specs.push_back(std::move(spec));
  }
  return batch;
}

}  // namespace task_bodies

Result<TaskSpec> ReadTaskBody(std::string_view body) {
  if (std::optional<TaskSpec> spec = task_bodies::ReadTaskFast(body)) return std::move(*spec);
  return task_bodies::ReadTaskReference(body);
}

Result<TaskBatch> ReadTaskBatchBody(std::string_view body) {
  if (std::optional<TaskBatch> batch = task_bodies::ReadBatchFast(body)) return std::move(*batch);
  return task_bodies::ReadBatchReference(body);
}

Result<ClaimRequest> ReadClaimBody(std::string_view body) {
  if (std::optional<ClaimRequest> claim = task_bodies::ReadClaimFast(body))
    return std::move(*claim);
  return task_bodies::ReadClaimReference(body);
}

Result<std::vector<AckRequest>> ReadAcksBody(std::string_view body) {
  if (std::optional<std::vector<AckRequest>> acks = task_bodies::ReadAcksFast(body)) {
    return std::move(*acks);
  }
  return task_bodies::ReadAcksReference(body);
}

}  // namespace chronoq::server
