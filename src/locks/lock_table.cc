#include "locks/lock_table.h"

#include "common/check.h"

namespace chronoq {
namespace {

Status Stale(const std::string& key, uint64_t token) {
  return {StatusCode::kFailedPrecondition,
          "token " + std::to_string(token) + " does not hold lock " + key +
              " (its lease lapsed, or it was released)",
          "token", StatusReason::kStaleToken};
}

Status WaitedOut(const LockWait& wait) {
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(wait.request.wait).count();
  return {StatusCode::kDeadlineExceeded,
          "lock " + wait.key + " is still held after waiting " + std::to_string(ms) + " ms",
          "wait_ms", StatusReason::kLockWaitTimeout};
}

}  // namespace

LockTable::LockTable(Store& store, std::function<uint64_t()> next_token)
    : store_(store), next_token_(std::move(next_token)) {}

Status LockTable::Load() {
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<LockRow> rows, store_.LoadLocks());
  for (LockRow& row : rows) {
    LockState& lock = locks_[row.key];
    lock.held = true;
    lock.token = row.token;
    lock.owner = std::move(row.owner);
    lock.expires = row.expires;
    leases_.emplace(row.expires, row.key);
  }
  return {};
}

void LockTable::Forget() {
  leases_.clear();
  for (auto it = locks_.begin(); it != locks_.end();) {
    it->second.held = false;
    if (it->second.waiters.empty()) {
      it = locks_.erase(it);
    } else {
      handovers_.push_back(it->first);
      ++it;
    }
  }
}

Result<LockGrant> LockTable::Grant(const std::string& key, LockState& lock,
                                   const LockRequest& request, Timestamp now) {
  const uint64_t token = next_token_();
  const Timestamp expires = now + request.lease;
  CHRONOQ_RETURN_IF_ERROR(store_.SaveLock({key, token, request.owner, expires}));
  lock.held = true;
  lock.token = token;
  lock.owner = request.owner;
  lock.expires = expires;
  leases_.emplace(expires, key);
  return LockGrant{token, expires};
}

bool LockTable::Acquire(LockWait* wait, Timestamp now) {
  auto [it, created] = locks_.try_emplace(wait->key);
  LockState& lock = it->second;
  if (!lock.held && lock.waiters.empty()) {
    wait->result = Grant(wait->key, lock, wait->request, now);
    if (!wait->result.ok()) locks_.erase(it);
    return true;
  }
  if (wait->deadline <= now) {
    wait->result = WaitedOut(*wait);
    return true;
  }
  wait->waiting_at_ = lock.waiters.insert(lock.waiters.end(), wait);
  waits_.emplace(wait->deadline, wait);
  return false;
}

void LockTable::HandOver(Locks::iterator it, Timestamp now) {
  LockState& lock = it->second;
  lock.held = false;
  if (lock.waiters.empty()) {
    locks_.erase(it);
    return;
  }
  LockWait* wait = lock.waiters.front();
  lock.waiters.pop_front();
  waits_.erase({wait->deadline, wait});
  wait->result = Grant(it->first, lock, wait->request, now);
  answered_.push_back(wait);
  // A failed grant fails the commit too; Forget() then hands the key over.
}

Result<LockTable::LockState*> LockTable::Held(const std::string& key, uint64_t token) {
  auto it = locks_.find(key);
  if (it == locks_.end() || !it->second.held || it->second.token != token) {
    return Stale(key, token);
  }
  return &it->second;
}

Status LockTable::Release(const std::string& key, uint64_t token, Timestamp now) {
  CHRONOQ_ASSIGN_OR_RETURN(LockState * lock, Held(key, token));
  CHRONOQ_RETURN_IF_ERROR(store_.DeleteLock(key));
  leases_.erase({lock->expires, key});
  HandOver(locks_.find(key), now);
  return {};
}

Result<LockGrant> LockTable::Extend(const std::string& key, uint64_t token, Timestamp expires) {
  CHRONOQ_ASSIGN_OR_RETURN(LockState * lock, Held(key, token));
  CHRONOQ_RETURN_IF_ERROR(store_.SaveLock({key, token, lock->owner, expires}));
  leases_.erase({lock->expires, key});
  lock->expires = expires;
  leases_.emplace(expires, key);
  return LockGrant{token, expires};
}

LockInfo LockTable::InfoOf(const std::string& key, const LockState& lock) {
  LockInfo info;
  info.key = key;
  info.held = lock.held;
  if (lock.held) {
    info.owner = lock.owner;
    info.token = lock.token;
    info.expires_at = lock.expires;
  }
  info.waiters = static_cast<int64_t>(lock.waiters.size());
  return info;
}

LockInfo LockTable::Get(const std::string& key) const {
  auto it = locks_.find(key);
  if (it == locks_.end()) {
    LockInfo info;
    info.key = key;
    return info;
  }
  return InfoOf(key, it->second);
}

std::vector<LockInfo> LockTable::List(const std::string& after, size_t limit) const {
  std::vector<LockInfo> out;
  for (auto it = locks_.upper_bound(after); it != locks_.end() && out.size() < limit; ++it) {
    out.push_back(InfoOf(it->first, it->second));
  }
  return out;
}

LockWait* LockTable::PopFirstWait() {
  LockWait* wait = waits_.begin()->second;
  waits_.erase(waits_.begin());
  const auto it = locks_.find(wait->key);
  CHRONOQ_CHECK(it != locks_.end(), "a waiter's key is in the table (it waits behind a holder)");
  it->second.waiters.erase(wait->waiting_at_);
  return wait;
}

void LockTable::AnswerAllWaiters(const Status& status) {
  while (!waits_.empty()) {
    LockWait* wait = PopFirstWait();
    wait->result = status;
    answered_.push_back(wait);
  }
}

Status LockTable::TimedWork(Timestamp now, std::vector<LockWait*>& answered) {
  // Keys Forget() found free with waiters queued.
  for (const std::string& key : std::exchange(handovers_, {})) {
    auto it = locks_.find(key);
    if (it != locks_.end() && !it->second.held) HandOver(it, now);
  }
  // Lapsed leases: the holder vanished or is too slow; the next waiter gets
  // the lock at once.
  while (!leases_.empty() && leases_.begin()->first <= now) {
    const std::string key = leases_.begin()->second;
    leases_.erase(leases_.begin());
    CHRONOQ_RETURN_IF_ERROR(store_.DeleteLock(key));
    HandOver(locks_.find(key), now);
  }
  // Waits that ran out.
  while (!waits_.empty() && waits_.begin()->first <= now) {
    LockWait* wait = PopFirstWait();
    wait->result = WaitedOut(*wait);
    answered_.push_back(wait);
  }
  answered.insert(answered.end(), answered_.begin(), answered_.end());
  answered_.clear();
  return {};
}

Timestamp LockTable::NextWake() const {
  if (!handovers_.empty() || !answered_.empty()) return Timestamp::min();
  Timestamp wake = kForever;
  if (!leases_.empty()) wake = std::min(wake, leases_.begin()->first);
  if (!waits_.empty()) wake = std::min(wake, waits_.begin()->first);
  return wake;
}

}  // namespace chronoq
