// The JSON form of chronoq's types: what chronoqd reads and writes on the
// wire, and (for webhook targets and schedule definitions) what the store keeps.
//
// Reading is strict about form: a body is one JSON object nested at most 64
// levels, every field has one type, and a field nobody asked for is an error
// naming it (a typo must not silently do nothing). Ranges and lengths are the
// engine's to check, once, with the same field names. Errors are
// InvalidArgument naming the field with its path ("tasks[3].run_at").
//
// Writing is by hand into one string: payloads are stored as JSON text and
// are spliced in as they are, never parsed again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chronoq/lock.h"
#include "chronoq/queue.h"
#include "chronoq/result.h"
#include "chronoq/schedule.h"
#include "chronoq/task.h"

namespace chronoq {

using Json = nlohmann::json;

// Epoch milliseconds accepted for times (ObjectReader::Time): 1970 to the
// end of 9999.
inline constexpr int64_t kMaxEpochMillis = 253402300799999;
// Milliseconds accepted for durations (ObjectReader::Millis): any count a
// Duration (int64 microseconds) can hold.
inline constexpr int64_t kMaxMillis = INT64_MAX / 1000;

// Parses a request body that must be a JSON object.
Result<Json> ParseBody(std::string_view body);

// A body for an endpoint that takes no fields: empty, or an empty object.
Status ExpectNoFields(std::string_view body);

// Reads the fields of one object; each getter leaves `out` unset when the
// field is absent (or null) and fails naming the field when it is malformed.
class ObjectReader {
 public:
  // `prefix` is prepended to field names in errors, e.g. "tasks[2].".
  ObjectReader(const Json& object, std::string prefix = "");

  // Getters read types, never rules: a value the C++ type can hold is
  // passed on, and the engine checks the limits that apply (chronoq/limits.h).
  Status String(std::string_view name, std::optional<std::string>& out);
  // An integer between `min` and `max` (the range of the C++ type).
  Status Int(std::string_view name, std::optional<int64_t>& out, int64_t min = INT64_MIN,
             int64_t max = INT64_MAX);
  // An integer in the range of `int`.
  Status Int(std::string_view name, std::optional<int>& out);
  Status Bool(std::string_view name, std::optional<bool>& out);
  // Integer milliseconds.
  Status Millis(std::string_view name, std::optional<Duration>& out);
  // An RFC 3339 string with any offset, or integer epoch milliseconds.
  Status Time(std::string_view name, std::optional<Timestamp>& out);
  // Any JSON value, as compact text.
  Status Value(std::string_view name, std::optional<std::string>& out);
  // A nested object or array; nullptr when absent.
  Status Object(std::string_view name, const Json*& out);
  Status Array(std::string_view name, const Json*& out);
  // InvalidArgument naming the field when it was absent.
  Status Required(std::string_view name) const;
  // Fails naming the first field no getter asked for.
  Status Finish() const;

  std::string Field(std::string_view name) const { return prefix_ + std::string(name); }

 private:
  const Json* Find(std::string_view name);

  const Json& object_;
  const std::string prefix_;
  std::vector<std::string> read_;
};

// The required `token` of a lease or lock: an integer from 1 to 2^63-1.
Status ReadToken(ObjectReader& r, uint64_t& token);

// POST /v1/tasks and each element of POST /v1/tasks/batch.
Result<TaskSpec> ParseTaskSpec(const Json& object, const std::string& prefix);
// A task's `target`: {url, method?, headers?: {name: value}, timeout_ms?}.
Result<WebhookTarget> ParseTarget(const Json& object, const std::string& prefix);
// The body of POST /v1/schedules (no `path_name`: `name` is required) and of
// PUT /v1/schedules/{name} (`name` may be left out; if given it must equal
// `path_name`). Reads types and ranges; the engine checks the rest (exactly
// one of cron, every_ms and fixed_delay_ms; the cron text and zone; ...).
Result<ScheduleSpec> ParseScheduleSpec(const Json& object,
                                       std::optional<std::string_view> path_name = std::nullopt);

// The body of PUT /v1/queues/{queue}: the settings given, and those given as
// null, which go back to their defaults. `max_in_flight` is another name for
// `concurrency`: either, or both if equal.
struct QueueSettingsChange {
  QueueSettings settings;
  std::vector<QueueSetting> reset;
  // Concurrency was given as max_in_flight: errors about it should say so.
  bool as_max_in_flight = false;
};
Result<QueueSettingsChange> ParseQueueSettings(const Json& object);

// Writers: append one JSON value to `out`.
void AppendString(std::string& out, std::string_view text);
void AppendTime(std::string& out, Timestamp t);
void AppendTask(std::string& out, const Task& task);
// AppendTask with the task's attempt history: "attempts":[AppendAttempt...].
void AppendTaskWithAttempts(std::string& out, const Task& task);
// [a,b,...] with `append(out, item)` writing each item.
template <typename T, typename Append>
void AppendArray(std::string& out, const std::vector<T>& items, Append append) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    append(out, items[i]);
  }
  out += ']';
}
// {"<key>":[...],"next_cursor":...}: one page of a listing; next_cursor is
// null on the last page (`next_cursor` empty).
template <typename T, typename Append>
void AppendPage(std::string& out, std::string_view key, const std::vector<T>& items, Append append,
                const std::string& next_cursor) {
  out += '{';
  AppendString(out, key);
  out += ':';
  AppendArray(out, items, append);
  out += ",\"next_cursor\":";
  if (next_cursor.empty()) {
    out += "null";
  } else {
    AppendString(out, next_cursor);
  }
  out += '}';
}
void AppendLease(std::string& out, const Lease& lease);
// {"attempt":N,"started_at":...,"ended_at":...,"duration_ms":N,"node":...,
//  "worker":string|null,"outcome":...,"error":string|null,"response":string|null};
// worker, error and response are null when empty.
void AppendAttempt(std::string& out, const TaskAttempt& attempt);
// A queue: counts, settings (null when unset), paused, lateness.
void AppendQueue(std::string& out, const QueueInfo& queue);
void AppendTarget(std::string& out, const WebhookTarget& target);
// The definition alone, as POST /v1/schedules takes it.
void AppendScheduleSpec(std::string& out, const ScheduleSpec& spec);
// The definition and where the schedule stands (GET /v1/schedules/{name}).
void AppendSchedule(std::string& out, const Schedule& schedule);
// {"key":...,"token":N,"expires_at":...}: a lock grant on `key`.
void AppendLockGrant(std::string& out, std::string_view key, const LockGrant& grant);
// {"key":...,"held":bool,"owner":string|null,"expires_at":time|null,"waiters":N};
// owner is null unless held with a non-empty owner.
void AppendLockInfo(std::string& out, const LockInfo& info);
// {"error":{"code":...,"message":...,"field":...}}; the field only when set.
std::string ErrorBody(std::string_view code, const Status& status);

// --- stored forms -------------------------------------------------------------
// A type has one JSON form: the store keeps webhook targets and schedule
// definitions exactly as the API writes them, and reads them back with the
// API's own strict reader. Decoding errors are DataLoss (the store is
// corrupt), with the reader's message.
std::string EncodeTarget(const WebhookTarget& target);
Result<WebhookTarget> DecodeTarget(std::string_view json);
std::string EncodeScheduleSpec(const ScheduleSpec& spec);
Result<ScheduleSpec> DecodeScheduleSpec(std::string_view json);
// A task's attempt history is the exception: the store keeps it compact,
// since a row gains a record at every acknowledgement. Each attempt is
//   [number, started_at (epoch ms), duration (ms), outcome (enum value), node,
//    worker, error, response]
// where worker, error and response are null when empty and trailing nulls
// are left out: [1,1795305600012,178,0,"local"] (about 35 bytes against
// AppendAttempt's 190).
void AppendStoredAttempt(std::string& out, const TaskAttempt& attempt);
// An array of AppendStoredAttempt records.
std::string EncodeAttempts(const std::vector<TaskAttempt>& attempts);
Result<std::vector<TaskAttempt>> DecodeAttempts(std::string_view json);

}  // namespace chronoq
