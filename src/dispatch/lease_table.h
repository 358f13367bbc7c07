// LeaseTable: every running task, by fencing token and by lease end.
//
// Running tasks are few (one per busy worker), so all of them live here, not
// only the near future. A token is issued once per claim and never reused, so
// a token found here is the current lease of its task.
//
// Not thread-safe: confined to the engine loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "chronoq/clock.h"
#include "chronoq/task.h"

namespace chronoq {

struct RunningTask {
  int64_t seq = 0;
  int64_t qid = 0;
  std::string id;
  Timestamp lease_until;
  int attempt = 0;
  int max_attempts = 0;
  int priority = 0;
  std::optional<Backoff> backoff;
};

class LeaseTable {
 public:
  void Add(uint64_t token, RunningTask task);
  // nullptr when `token` is not a current lease.
  const RunningTask* Find(uint64_t token) const;
  std::optional<RunningTask> Remove(uint64_t token);
  // REQUIRES: Find(token) != nullptr
  void Extend(uint64_t token, Timestamp until);
  // The token whose lease ends first, if it has ended by `now`.
  std::optional<uint64_t> FirstExpired(Timestamp now) const;
  std::optional<Timestamp> EarliestExpiry() const;
  size_t size() const { return by_token_.size(); }
  void Clear();

 private:
  std::unordered_map<uint64_t, RunningTask> by_token_;
  std::set<std::pair<Timestamp, uint64_t>> by_expiry_;
};

}  // namespace chronoq
