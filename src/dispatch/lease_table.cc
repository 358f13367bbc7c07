#include "dispatch/lease_table.h"

#include "common/check.h"
#include "common/task_id.h"

namespace chronoq {

void LeaseTable::Add(RunningTask task) {
  Remove(task.seq);
  by_expiry_.emplace(task.lease_until, task.seq);
  if (!ParseGeneratedId(task.id)) by_name_.insert_or_assign(task.id, task.seq);
  const int64_t seq = task.seq;
  by_seq_.emplace(seq, std::move(task));
}

const RunningTask* LeaseTable::Find(int64_t seq) const {
  auto it = by_seq_.find(seq);
  return it == by_seq_.end() ? nullptr : &it->second;
}

const RunningTask* LeaseTable::FindById(std::string_view id) const {
  if (auto seq = ParseGeneratedId(id)) return Find(*seq);
  auto it = by_name_.find(std::string(id));
  return it == by_name_.end() ? nullptr : Find(it->second);
}

std::optional<RunningTask> LeaseTable::Remove(int64_t seq) {
  auto it = by_seq_.find(seq);
  if (it == by_seq_.end()) return std::nullopt;
  RunningTask task = std::move(it->second);
  by_seq_.erase(it);
  by_expiry_.erase({task.lease_until, seq});
  if (!ParseGeneratedId(task.id)) by_name_.erase(task.id);
  return task;
}

void LeaseTable::Extend(int64_t seq, Timestamp until) {
  const auto it = by_seq_.find(seq);
  CHRONOQ_CHECK(it != by_seq_.end(), "only a leased task's lease is extended");
  RunningTask& task = it->second;
  by_expiry_.erase({task.lease_until, seq});
  task.lease_until = until;
  by_expiry_.emplace(until, seq);
}

std::optional<int64_t> LeaseTable::FirstExpired(Timestamp now) const {
  if (by_expiry_.empty() || by_expiry_.begin()->first > now) return std::nullopt;
  return by_expiry_.begin()->second;
}

std::optional<Timestamp> LeaseTable::EarliestExpiry() const {
  if (by_expiry_.empty()) return std::nullopt;
  return by_expiry_.begin()->first;
}

void LeaseTable::Clear() {
  by_seq_.clear();
  by_name_.clear();
  by_expiry_.clear();
}

}  // namespace chronoq
