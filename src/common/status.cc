#include "chronoq/status.h"

namespace chronoq {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kAlreadyExists:
      return "already_exists";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kAborted:
      return "aborted";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kDataLoss:
      return "data_loss";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string_view StatusReasonName(StatusReason reason) {
  switch (reason) {
    case StatusReason::kNone:
      return "";
    case StatusReason::kStaleToken:
      return "stale_token";
    case StatusReason::kLockWaitTimeout:
      return "lock_wait_timeout";
    case StatusReason::kKeyBacklogFull:
      return "key_backlog_full";
    case StatusReason::kStoreUnavailable:
      return "store_unavailable";
    case StatusReason::kNotLeader:
      return "not_leader";
  }
  return "";
}

Status Status::InvalidArgument(std::string_view field, std::string_view reason) {
  std::string msg;
  msg.reserve(field.size() + 2 + reason.size());
  msg.append(field).append(": ").append(reason);
  return {StatusCode::kInvalidArgument, std::move(msg), std::string(field)};
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace chronoq
