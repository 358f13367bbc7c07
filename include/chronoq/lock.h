// chronoq/lock.h: keyed locks with a wait timeout, a lease and fencing tokens.
//
//   auto lock = engine->AcquireLock("invoice:42", {.wait = 5s, .lease = 30s});
//   if (lock.status().code() == chronoq::StatusCode::kDeadlineExceeded) ...  // busy
//   WriteInvoice(42, lock->token);        // the resource refuses smaller tokens
//   engine->ReleaseLock("invoice:42", lock->token);
//
// or, releasing on scope exit:
//
//   auto guard = chronoq::LockGuard::Acquire(*engine, "invoice:42", {.wait = 5s});
//   if (!guard.ok()) return guard.status();
//
// One holder per key at a time. A holder keeps the lock until it releases it
// or its lease lapses; a lapsed lease frees the lock and hands it to the next
// waiter at once. Waiters are served first come, first served. Tokens are
// fencing tokens: every grant's token is larger than any earlier grant's, for
// every key and across restarts, so a resource that remembers the largest
// token it saw can refuse a holder whose lease lapsed. Held locks are durable
// and survive a restart until their lease ends; waiters do not (they retry).
// A key with no holder and no waiters leaves nothing behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "chronoq/clock.h"
#include "chronoq/limits.h"
#include "chronoq/result.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

class Engine;

struct LockRequest {
  // How long to wait for the lock; zero: try once (a try-lock).
  Duration wait = Duration::zero();
  // How long the grant lasts unless extended (1 ms - 7 days).
  Duration lease = std::chrono::seconds(30);
  // Shown to others by GetLock (e.g. "worker-3"), at most 200 bytes.
  std::string owner;
};

struct LockGrant {
  uint64_t token = 0;
  Timestamp expires_at;
};

// A key's current state.
struct LockInfo {
  std::string key;
  bool held = false;
  std::string owner;                    // the holder's, when held
  uint64_t token = 0;                   // the holder's fencing token, when held
  std::optional<Timestamp> expires_at;  // when held
  int64_t waiters = 0;
};

// Holds a lock for its lifetime: releases it on destruction (errors ignored).
// Move-only. Does not extend the lease: hold it for less than the lease, or
// call Extend().
class LockGuard {
 public:
  // AcquireLock, wrapped.
  static Result<LockGuard> Acquire(Engine& engine, std::string key, LockRequest request);
  LockGuard(LockGuard&& other) noexcept;
  LockGuard& operator=(LockGuard&& other) noexcept;
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  ~LockGuard();

  uint64_t token() const { return grant_.token; }
  Timestamp expires_at() const { return grant_.expires_at; }
  const std::string& key() const { return key_; }
  // ExtendLock for this grant.
  Status Extend(Duration lease);
  // Releases now; the destructor then does nothing.
  Status Release();

 private:
  LockGuard(Engine* engine, std::string key, LockGrant grant)
      : engine_(engine), key_(std::move(key)), grant_(grant) {}
  Engine* engine_ = nullptr;  // nullptr once released or moved from
  std::string key_;
  LockGrant grant_;
};

}  // namespace chronoq
#pragma GCC visibility pop
