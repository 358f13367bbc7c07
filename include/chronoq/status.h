// chronoq/status.h: how chronoq reports errors.
//
// Every operation that can fail returns a Status (or a Result<T>, see
// result.h). chronoq never throws across its public API. A Status that is not
// OK carries a canonical code, a message for people and, for bad input, the
// name of the offending field:
//
//   Status s = engine->Cancel("share:42");
//   if (s.code() == StatusCode::kNotFound) { ... }
//   std::cerr << s.ToString();   // "not_found: task share:42 does not exist"
#pragma once

#include <string>
#include <string_view>
#include <utility>

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

// A canonical subset of the google.rpc codes. Use the most specific one.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the request is malformed; `field` names what is wrong
  kNotFound,            // the task (or queue) does not exist
  kAlreadyExists,       // a client-chosen id names an unfinished task
  kFailedPrecondition,  // the task is in the wrong state, or a lease token is stale
  kAborted,             // a conflict; retrying the call may succeed
  kUnavailable,         // the engine is stopping or the store failed; retry later
  kDeadlineExceeded,    // a wait ran out
  kResourceExhausted,   // a limit was reached (backlog, memory window)
  kDataLoss,            // the store is corrupt
  kInternal,            // a bug: please report it
};

// "invalid_argument", "not_found", ...: the spelling used on the wire.
std::string_view StatusCodeName(StatusCode code);

// Why, beyond the code, for the errors a caller must tell apart from others
// of their code: a worker drops a task whose token went stale, retries a full
// backlog later, and reports a lock that stayed busy. chronoqd sends the
// reason's name as the error code ("stale_token", ...).
enum class StatusReason {
  kNone = 0,
  kStaleToken,        // FailedPrecondition: the lease or lock token is not current
  kLockWaitTimeout,   // DeadlineExceeded: the lock stayed held for the whole wait
  kKeyBacklogFull,    // ResourceExhausted: the key's max_pending_per_key is reached
  kStoreUnavailable,  // Unavailable: the store's server cannot be reached (PostgreSQL)
  kNotLeader,         // Unavailable: this node does not lead the cluster (any more); ask another
};

// "stale_token", "lock_wait_timeout", "key_backlog_full", "store_unavailable",
// "not_leader";
// "" for kNone.
std::string_view StatusReasonName(StatusReason reason);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, std::string field = {},
         StatusReason reason = StatusReason::kNone)
      : code_(code), message_(std::move(message)), field_(std::move(field)), reason_(reason) {}

  static Status Ok() { return {}; }
  // Bad input: the message becomes "<field>: <reason>".
  static Status InvalidArgument(std::string_view field, std::string_view reason);
  static Status NotFound(std::string message) {
    return {StatusCode::kNotFound, std::move(message)};
  }
  static Status AlreadyExists(std::string message) {
    return {StatusCode::kAlreadyExists, std::move(message)};
  }
  static Status FailedPrecondition(std::string message, std::string field = {}) {
    return {StatusCode::kFailedPrecondition, std::move(message), std::move(field)};
  }
  static Status Unavailable(std::string message) {
    return {StatusCode::kUnavailable, std::move(message)};
  }
  static Status ResourceExhausted(std::string message) {
    return {StatusCode::kResourceExhausted, std::move(message)};
  }
  static Status Internal(std::string message) {
    return {StatusCode::kInternal, std::move(message)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The request field the error is about ("run_at", "tasks[3].id"), or empty.
  const std::string& field() const { return field_; }
  StatusReason reason() const { return reason_; }
  // "ok" or "<code name>: <message>".
  std::string ToString() const;

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
  StatusReason reason_ = StatusReason::kNone;
};

}  // namespace chronoq
#pragma GCC visibility pop

// Returns from the enclosing function when `expr` is not OK.
#define CHRONOQ_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::chronoq::Status chronoq_status_ = (expr);        \
    if (!chronoq_status_.ok()) return chronoq_status_; \
  } while (false)
