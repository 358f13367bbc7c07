// The keyed lock endpoints. An acquisition may wait up to an hour for the
// lock, and release and extend wait for a commit, so all three go through the
// engine's asynchronous calls and are answered from its loop: they never hold
// an I/O thread or a blocking-pool thread (with release on the 2-thread pool,
// W7 managed 15k pairs/s). The read runs on the blocking pool. Request bodies
// are read on the I/O thread; the engine checks them (and the key, the
// percent-decoded path segment) and answers bad ones at once.
#include "chronoq/lock.h"

#include "codec/json_codec.h"
#include "server/api.h"

namespace chronoq::server {
namespace {

// {wait_ms, lease_ms, owner?}
Result<LockRequest> ParseAcquireBody(const std::string& body) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  ObjectReader r(json);
  std::optional<Duration> wait, lease;
  std::optional<std::string> owner;
  CHRONOQ_RETURN_IF_ERROR(r.Required("wait_ms"));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("wait_ms", wait));
  CHRONOQ_RETURN_IF_ERROR(r.Required("lease_ms"));
  CHRONOQ_RETURN_IF_ERROR(r.Millis("lease_ms", lease));
  CHRONOQ_RETURN_IF_ERROR(r.String("owner", owner));
  CHRONOQ_RETURN_IF_ERROR(r.Finish());
  return LockRequest{.wait = *wait, .lease = *lease, .owner = owner.value_or("")};
}

// {token} for a release, {token, lease_ms} for an extension (`lease` set).
Status ParseTokenBody(const std::string& body, uint64_t& token, std::optional<Duration>* lease) {
  CHRONOQ_ASSIGN_OR_RETURN(Json json, ParseBody(body));
  ObjectReader r(json);
  CHRONOQ_RETURN_IF_ERROR(ReadToken(r, token));
  if (lease != nullptr) {
    CHRONOQ_RETURN_IF_ERROR(r.Required("lease_ms"));
    CHRONOQ_RETURN_IF_ERROR(r.Millis("lease_ms", *lease));
  }
  return r.Finish();
}

}  // namespace

void Api::AcquireLock(const std::string& key, const std::string& body, const Respond& respond) {
  Result<LockRequest> request = ParseAcquireBody(body);
  if (!request.ok()) return respond(ErrorResponse(request.status()));
  engine_.AcquireLockAsync(
      key, std::move(*request),
      Reply<LockGrant>(respond, [key](std::string& out, const LockGrant& grant) {
        AppendLockGrant(out, key, grant);
      }));
}

void Api::ReleaseLock(const std::string& key, const std::string& body, const Respond& respond) {
  uint64_t token = 0;
  if (Status s = ParseTokenBody(body, token, nullptr); !s.ok()) return respond(ErrorResponse(s));
  engine_.ReleaseLockAsync(key, token, [respond](Status s) {
    if (!s.ok()) return respond(ErrorResponse(s));
    ApiResponse out;
    out.body = "{}";
    respond(std::move(out));
  });
}

void Api::ExtendLock(const std::string& key, const std::string& body, const Respond& respond) {
  uint64_t token = 0;
  std::optional<Duration> lease;
  if (Status s = ParseTokenBody(body, token, &lease); !s.ok()) return respond(ErrorResponse(s));
  engine_.ExtendLockAsync(
      key, token, *lease,
      Reply<LockGrant>(respond, [key](std::string& out, const LockGrant& grant) {
        AppendLockGrant(out, key, grant);
      }));
}

void Api::ListLocks(std::string_view query, const Respond& respond) {
  std::string after;
  int limit = kMaxListLimit;
  Status s = ForEachQueryParam(query, [&](std::string_view key, std::string value) -> Status {
    if (key == "after") {
      after = std::move(value);
    } else if (key == "limit") {
      CHRONOQ_ASSIGN_OR_RETURN(limit, ParseIntParam(key, value));
    } else {
      return UnknownQueryParam(key);
    }
    return {};
  });
  if (!s.ok()) return respond(ErrorResponse(s));
  run_blocking_([this, after, limit, respond] {
    Result<std::vector<LockInfo>> locks = engine_.ListLocks(after, limit);
    if (!locks.ok()) return respond(ErrorResponse(locks.status()));
    ApiResponse out;
    out.body = "{\"locks\":";
    AppendArray(out.body, *locks, AppendLockInfo);
    // A full page may have more after it: the next one starts after its last key.
    if (static_cast<int>(locks->size()) == limit) {
      out.body += ",\"next_after\":";
      AppendString(out.body, locks->back().key);
    }
    out.body += '}';
    respond(std::move(out));
  });
}

void Api::GetLock(const std::string& key, const Respond& respond) {
  run_blocking_(
      [this, key, respond] { Reply<LockInfo>(respond, AppendLockInfo)(engine_.GetLock(key)); });
}

}  // namespace chronoq::server
