#include "chronoq/engine.h"
#include "chronoq/lock.h"

namespace chronoq {

Result<LockGuard> LockGuard::Acquire(Engine& engine, std::string key, LockRequest request) {
  CHRONOQ_ASSIGN_OR_RETURN(LockGrant grant, engine.AcquireLock(key, request));
  return LockGuard(&engine, std::move(key), grant);
}

LockGuard::LockGuard(LockGuard&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)),
      key_(std::move(other.key_)),
      grant_(other.grant_) {}

LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    Release().IgnoreError();
    engine_ = std::exchange(other.engine_, nullptr);
    key_ = std::move(other.key_);
    grant_ = other.grant_;
  }
  return *this;
}

LockGuard::~LockGuard() { Release().IgnoreError(); }

Status LockGuard::Extend(Duration lease) {
  if (engine_ == nullptr) {
    return {StatusCode::kFailedPrecondition, "the lock was released", "token",
            StatusReason::kStaleToken};
  }
  CHRONOQ_ASSIGN_OR_RETURN(grant_, engine_->ExtendLock(key_, grant_.token, lease));
  return {};
}

Status LockGuard::Release() {
  if (engine_ == nullptr) return {};
  Engine* engine = std::exchange(engine_, nullptr);
  return engine->ReleaseLock(key_, grant_.token);
}

}  // namespace chronoq
