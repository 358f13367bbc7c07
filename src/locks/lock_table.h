// LockTable: the engine's keyed locks (chronoq/lock.h).
//
// One holder per key, waiters first come first served, a lease on every
// grant. Held locks are stored (one row per key held, written in the engine's
// transaction); waiters live only in memory, so after a restart they are
// gone and their callers retry. A key with neither a holder nor waiters is
// forgotten, so idle keys cost nothing.
//
// Tokens come from the engine's fencing-token counter (`next_token`), so a
// grant's token is larger than every token handed out before it, for any key,
// across restarts.
//
// The table never blocks and never finishes a caller itself: a waiting
// acquisition is a LockWait the caller owns; when the table answers it (a
// grant, DeadlineExceeded, Unavailable) it hands the wait back from
// TimedWork() or AnswerAllWaiters(), and the caller reports it once the
// transaction holding its writes committed.
//
// Not thread-safe: confined to the engine loop thread.
#pragma once

#include <functional>
#include <list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "chronoq/lock.h"
#include "chronoq/result.h"

#include "store/store.h"

namespace chronoq {

class LockTable;

// A lock acquisition that may have to wait for its key. Owned by the caller;
// the table keeps a pointer to it while it waits.
class LockWait {
 public:
  LockWait(std::string lock_key, LockRequest lock_request, Timestamp wait_until)
      : key(std::move(lock_key)), request(std::move(lock_request)), deadline(wait_until) {}
  virtual ~LockWait() = default;

  const std::string key;
  const LockRequest request;
  const Timestamp deadline;
  // The answer, once the table gave one.
  Result<LockGrant> result{LockGrant{}};

 private:
  friend class LockTable;
  std::list<LockWait*>::iterator waiting_at_;
};

class LockTable {
 public:
  // `store` must outlive the table; `next_token` hands out fencing tokens.
  LockTable(Store& store, std::function<uint64_t()> next_token);
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  // Loads the held locks from the store (at start, inside its transaction).
  Status Load();
  // After a failed commit: forgets every held lock (Load() brings back what
  // was committed) but keeps the waiters; keys that turn out free are handed
  // to them by the next TimedWork().
  void Forget();

  // Grants the lock when the key is free (true), answers DeadlineExceeded
  // when wait->deadline has passed (true), or queues `wait` behind the
  // holder (false): TimedWork() answers it later.
  bool Acquire(LockWait* wait, Timestamp now);
  // Frees the lock; its next waiter gets it at once. FailedPrecondition
  // (field "token") when `token` is not the key's current grant.
  Status Release(const std::string& key, uint64_t token, Timestamp now);
  // Moves the grant's lease end to `expires`; FailedPrecondition as Release.
  Result<LockGrant> Extend(const std::string& key, uint64_t token, Timestamp expires);
  LockInfo Get(const std::string& key) const;
  // Keys held or waited for after `after`, in key order, at most `limit`.
  std::vector<LockInfo> List(const std::string& after, size_t limit) const;

  // Frees lapsed leases (handing their keys to the next waiters) and answers
  // waits that ran out; appends every wait answered since the last call
  // (here, or by Release) to `answered`.
  Status TimedWork(Timestamp now, std::vector<LockWait*>& answered);
  // Answers every waiter with `status` (the engine is stopping); they are
  // handed back by the next TimedWork().
  void AnswerAllWaiters(const Status& status);
  // When TimedWork() next has something to do; kForever when nothing.
  Timestamp NextWake() const;

  size_t keys() const { return locks_.size(); }
  size_t held() const { return leases_.size(); }
  size_t waiters() const { return waits_.size(); }

 private:
  struct LockState {
    bool held = false;
    uint64_t token = 0;
    std::string owner;
    Timestamp expires;
    std::list<LockWait*> waiters;  // first come, first served
  };
  using Locks = std::map<std::string, LockState>;

  static LockInfo InfoOf(const std::string& key, const LockState& lock);
  // Makes the key's lock held by a new grant.
  Result<LockGrant> Grant(const std::string& key, LockState& lock, const LockRequest& request,
                          Timestamp now);
  // The held lock `it` is free: the next waiter gets it, or the key is
  // forgotten.
  void HandOver(Locks::iterator it, Timestamp now);
  // The current grant of `key` with `token`, or FailedPrecondition.
  Result<LockState*> Held(const std::string& key, uint64_t token);
  // Removes the waiter whose wait ends first. REQUIRES: !waits_.empty()
  LockWait* PopFirstWait();

  Store& store_;
  const std::function<uint64_t()> next_token_;
  // Keys with a holder or waiters; a key with neither is erased (a tree, so
  // erasing gives the memory back).
  Locks locks_;
  std::set<std::pair<Timestamp, std::string>> leases_;  // held locks by lease end
  std::set<std::pair<Timestamp, LockWait*>> waits_;     // waiters by deadline
  std::vector<std::string> handovers_;                  // keys Forget() freed with waiters
  std::vector<LockWait*> answered_;                     // answered outside TimedWork()
};

}  // namespace chronoq
