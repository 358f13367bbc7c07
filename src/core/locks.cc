// Core's keyed locks: the few places the engine loop calls the lock table
// (locks/lock_table.h). Tokens come from the engine's fencing-token counter.
#include "core/core.h"

namespace chronoq {

bool LockOp::Run(Core& core) { return core.AcquireLock(this); }

bool Core::AcquireLock(LockOp* op) { return locks_.Acquire(op, clock_.Now()); }

Status Core::ReleaseLock(const std::string& key, uint64_t token) {
  return locks_.Release(key, token, clock_.Now());
}

Result<LockGrant> Core::ExtendLock(const std::string& key, uint64_t token, Duration lease) {
  return locks_.Extend(key, token, clock_.Now() + lease);
}

LockInfo Core::GetLock(const std::string& key) const { return locks_.Get(key); }

std::vector<LockInfo> Core::ListLocks(const std::string& after, int limit) const {
  return locks_.List(after, static_cast<size_t>(limit));
}

}  // namespace chronoq
