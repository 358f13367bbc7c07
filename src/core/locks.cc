// Core's keyed locks: one holder per key, FIFO waiters parked as ops, lease
// lapses handled by TimedWork. Held locks are stored (one row per key held),
// waiters only in memory. Tokens come from the engine's fencing-token counter,
// so they grow across keys and restarts. See chronoq/lock.h.
#include "core/core.h"

namespace chronoq {
namespace {

Status Stale(const std::string& key, uint64_t token) {
  return Status::FailedPrecondition("token " + std::to_string(token) + " does not hold lock " +
                                        key + " (its lease lapsed, or it was released)",
                                    "token");
}

Status WaitedOut(const std::string& key) {
  return {StatusCode::kDeadlineExceeded, "lock " + key + " is held by someone else", "wait"};
}

}  // namespace

bool LockOp::Run(Core& core) { return core.AcquireLock(this); }

Status Core::LoadLocks() {
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<LockRow> rows, store_.LoadLocks());
  for (LockRow& row : rows) {
    LockState& lock = locks_[row.key];
    lock.held = true;
    lock.token = row.token;
    lock.owner = std::move(row.owner);
    lock.expires = row.expires;
    lock_leases_.emplace(row.expires, row.key);
  }
  return {};
}

Result<LockGrant> Core::Grant(const std::string& key, LockState& lock, const LockRequest& request,
                              Timestamp now) {
  const uint64_t token = next_token_++;
  const Timestamp expires = now + request.lease;
  CHRONOQ_RETURN_IF_ERROR(store_.SaveLock({key, token, request.owner, expires}));
  lock.held = true;
  lock.token = token;
  lock.owner = request.owner;
  lock.expires = expires;
  lock_leases_.emplace(expires, key);
  return LockGrant{token, expires};
}

bool Core::AcquireLock(LockOp* op) {
  const Timestamp now = clock_.Now();
  auto [it, created] = locks_.try_emplace(op->key);
  LockState& lock = it->second;
  if (!lock.held && lock.waiters.empty()) {
    op->result = Grant(op->key, lock, op->request, now);
    if (!op->result.ok()) locks_.erase(it);
    return true;
  }
  if (op->deadline <= now) {
    op->result = WaitedOut(op->key);
    return true;
  }
  op->waiting_at_ = lock.waiters.insert(lock.waiters.end(), op);
  lock_waits_.emplace(op->deadline, op);
  return false;
}

void Core::HandOver(std::map<std::string, LockState>::iterator it, Timestamp now) {
  LockState& lock = it->second;
  lock.held = false;
  if (lock.waiters.empty()) {
    locks_.erase(it);
    return;
  }
  LockOp* op = lock.waiters.front();
  lock.waiters.pop_front();
  lock_waits_.erase({op->deadline, op});
  op->result = Grant(it->first, lock, op->request, now);
  released_.push_back(op);
  // A failed grant fails the commit too; Reload() then hands the key over.
}

Result<Core::LockState*> Core::Held(const std::string& key, uint64_t token) {
  auto it = locks_.find(key);
  if (it == locks_.end() || !it->second.held || it->second.token != token) {
    return Stale(key, token);
  }
  return &it->second;
}

Status Core::ReleaseLock(const std::string& key, uint64_t token) {
  CHRONOQ_ASSIGN_OR_RETURN(LockState * lock, Held(key, token));
  CHRONOQ_RETURN_IF_ERROR(store_.DeleteLock(key));
  lock_leases_.erase({lock->expires, key});
  HandOver(locks_.find(key), clock_.Now());
  return {};
}

Result<LockGrant> Core::ExtendLock(const std::string& key, uint64_t token, Duration lease) {
  CHRONOQ_ASSIGN_OR_RETURN(LockState * lock, Held(key, token));
  const Timestamp expires = clock_.Now() + lease;
  CHRONOQ_RETURN_IF_ERROR(store_.SaveLock({key, token, lock->owner, expires}));
  lock_leases_.erase({lock->expires, key});
  lock->expires = expires;
  lock_leases_.emplace(expires, key);
  return LockGrant{token, expires};
}

LockInfo Core::GetLock(const std::string& key) const {
  LockInfo info;
  info.key = key;
  auto it = locks_.find(key);
  if (it == locks_.end()) return info;
  const LockState& lock = it->second;
  info.held = lock.held;
  if (lock.held) {
    info.owner = lock.owner;
    info.expires_at = lock.expires;
  }
  info.waiters = static_cast<int64_t>(lock.waiters.size());
  return info;
}

LockOp* Core::PopFirstWait() {
  LockOp* op = lock_waits_.begin()->second;
  lock_waits_.erase(lock_waits_.begin());
  // Waiters queue only behind a holder, so the key is there.
  locks_.at(op->key).waiters.erase(op->waiting_at_);
  return op;
}

Status Core::LockTimedWork(Timestamp now, std::vector<Op*>& finished) {
  // Keys Reload() found free with waiters queued.
  for (const std::string& key : std::exchange(lock_handovers_, {})) {
    auto it = locks_.find(key);
    if (it != locks_.end() && !it->second.held) HandOver(it, now);
  }
  // Lapsed leases: the holder vanished or is too slow; the next waiter gets
  // the lock at once.
  while (!lock_leases_.empty() && lock_leases_.begin()->first <= now) {
    const std::string key = lock_leases_.begin()->second;
    lock_leases_.erase(lock_leases_.begin());
    CHRONOQ_RETURN_IF_ERROR(store_.DeleteLock(key));
    HandOver(locks_.find(key), now);
  }
  // Waits that ran out.
  while (!lock_waits_.empty() && lock_waits_.begin()->first <= now) {
    LockOp* op = PopFirstWait();
    op->result = WaitedOut(op->key);
    finished.push_back(op);
  }
  finished.insert(finished.end(), released_.begin(), released_.end());
  released_.clear();
  return {};
}

}  // namespace chronoq
