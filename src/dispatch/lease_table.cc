#include "dispatch/lease_table.h"

namespace chronoq {

void LeaseTable::Add(uint64_t token, RunningTask task) {
  by_expiry_.emplace(task.lease_until, token);
  by_token_.insert_or_assign(token, std::move(task));
}

const RunningTask* LeaseTable::Find(uint64_t token) const {
  auto it = by_token_.find(token);
  return it == by_token_.end() ? nullptr : &it->second;
}

std::optional<RunningTask> LeaseTable::Remove(uint64_t token) {
  auto it = by_token_.find(token);
  if (it == by_token_.end()) return std::nullopt;
  RunningTask task = std::move(it->second);
  by_expiry_.erase({task.lease_until, token});
  by_token_.erase(it);
  return task;
}

void LeaseTable::Extend(uint64_t token, Timestamp until) {
  RunningTask& task = by_token_.at(token);
  by_expiry_.erase({task.lease_until, token});
  task.lease_until = until;
  by_expiry_.emplace(until, token);
}

std::optional<uint64_t> LeaseTable::FirstExpired(Timestamp now) const {
  if (by_expiry_.empty() || by_expiry_.begin()->first > now) return std::nullopt;
  return by_expiry_.begin()->second;
}

std::optional<Timestamp> LeaseTable::EarliestExpiry() const {
  if (by_expiry_.empty()) return std::nullopt;
  return by_expiry_.begin()->first;
}

void LeaseTable::Clear() {
  by_token_.clear();
  by_expiry_.clear();
}

}  // namespace chronoq
