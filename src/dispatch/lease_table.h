// LeaseTable: every running task, by task and by lease end.
//
// Running tasks are few (one per busy worker), so all of them live here, not
// only the near future. Each holds the fencing token of the claim that leased
// it; tokens come from one counter that only grows, so a task re-claimed after
// its lease lapsed always carries a larger token than any earlier holder's.
// (One Claim call hands its tasks the same token: a stale caller is still
// recognised, since the task's current token differs from the one it holds.)
//
// Not thread-safe: confined to the engine loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "chronoq/clock.h"
#include "chronoq/task.h"

namespace chronoq {

struct RunningTask {
  int64_t seq = 0;
  int64_t qid = 0;
  std::string id;  // the client-chosen id, or the generated one
  uint64_t token = 0;
  Timestamp lease_until;
  int attempt = 0;
  int max_attempts = 0;
  int priority = 0;
  std::optional<Backoff> backoff;
  int64_t sid = 0;  // the schedule it is an occurrence of; 0: none
  std::string key;  // per-key ordering; empty: none
  // For the attempt it records when it ends (Task::attempts): when it was
  // claimed, who claimed it and through which engine (EngineOptions::node).
  Timestamp claimed_at;
  std::string worker;
  std::string node;
};

class LeaseTable {
 public:
  // Adds or replaces the lease of task.seq.
  void Add(RunningTask task);
  // nullptr when the task is not running.
  const RunningTask* Find(int64_t seq) const;
  // By task id (generated or client-chosen); nullptr when not running.
  const RunningTask* FindById(std::string_view id) const;
  std::optional<RunningTask> Remove(int64_t seq);
  // REQUIRES: Find(seq) != nullptr
  void Extend(int64_t seq, Timestamp until);
  // The task whose lease ends first, if it has ended by `now`.
  std::optional<int64_t> FirstExpired(Timestamp now) const;
  std::optional<Timestamp> EarliestExpiry() const;
  size_t size() const { return by_seq_.size(); }
  void Clear();

 private:
  std::unordered_map<int64_t, RunningTask> by_seq_;
  std::unordered_map<std::string, int64_t> by_name_;  // client-chosen ids only
  std::set<std::pair<Timestamp, int64_t>> by_expiry_;
};

}  // namespace chronoq
