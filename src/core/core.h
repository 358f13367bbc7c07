// Core: the task state machine, run by the engine loop.
//
// Every state change of every task happens here, on one thread, inside the
// transaction of the current group commit: enqueue, cancel, claim, ack, fail,
// extend, lease lapses, window refills and purges. Because one thread does all
// of it, the in-memory window and lease table can never disagree with the
// store about what was committed; when a commit fails, Reload() rebuilds both
// from the store.
//
// Not thread-safe: confined to the engine loop thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "chronoq/engine.h"

#include "core/task_id.h"
#include "core/validate.h"
#include "dispatch/lease_table.h"
#include "store/store.h"
#include "timer/window.h"

namespace chronoq {

class Core;

// The client's view of a stored row.
Task TaskFromRow(const TaskRow& row, const std::string& queue);

// One request to the engine loop. The loop calls Run() inside a transaction;
// once the request has its result and the transaction committed, Finish()
// reports the commit outcome. Run() returns false when the request must wait
// (a parked claim); the Core then finishes it in a later cycle.
// Work for the loop thread: runs inside a transaction and returns its answer.
template <typename T>
using CoreFn = std::function<Result<T>(Core&)>;

class Op {
 public:
  virtual ~Op() = default;
  virtual bool Run(Core& core) = 0;
  // `commit` is the outcome of the transaction that held the op's writes;
  // when it failed, the op must report that instead of its own result.
  virtual void Finish(const Status& commit) = 0;
};

// A claim that waits for tasks to become due.
class ClaimOp : public Op {
 public:
  // Waits until `deadline` (Timestamp::min(): not at all), or until `*cancel`
  // is set and the engine answers waiting claims.
  ClaimOp(std::string queue_name, int max_tasks, Duration lease_for, Timestamp wait_until,
          const std::atomic<bool>* cancel_flag = nullptr)
      : queue(std::move(queue_name)),
        max(max_tasks),
        lease(lease_for),
        deadline(wait_until),
        cancel(cancel_flag) {}
  bool Run(Core& core) override;

  const std::string queue;
  const int max;
  const Duration lease;
  const Timestamp deadline;
  const std::atomic<bool>* const cancel;
  Result<std::vector<Lease>> result{std::vector<Lease>()};

 private:
  friend class Core;

  // The client's view of a stored row.
  Task TaskFromRow(const TaskRow& row, const std::string& queue);
  int64_t qid_ = 0;
  std::list<ClaimOp*>::iterator parked_at_;
};

class Core {
 public:
  Core(Store& store, Clock& clock, const EngineOptions& options);

  // Loads the meta data, the running leases and the first window. Not a scan:
  // only index ranges.
  Status Recover();
  // Throws away memory and recovers again (after a failed commit).
  Status Reload();

  // --- operations (inside the transaction) ---
  Result<std::vector<Task>> Enqueue(std::vector<ValidTask> tasks);
  Result<Task> Cancel(const std::string& id);
  Result<Task> Reschedule(const std::string& id, Timestamp run_at,
                          const std::optional<std::string>& payload);
  Result<Task> Retry(const std::string& id);
  Result<std::vector<Lease>> Claim(const std::string& queue, int max, Duration lease);
  Status Ack(const std::string& id, uint64_t token);
  // One Status per acknowledgement; the valid ones are written together.
  Result<std::vector<Status>> AckMany(const std::vector<AckRequest>& acks);
  Status Fail(const std::string& id, uint64_t token, const std::string& error,
              std::optional<Duration> retry_after);
  Result<Timestamp> Extend(const std::string& id, uint64_t token, Duration lease);

  // Parks `op` until its queue has a due task or its deadline passes.
  void Park(ClaimOp* op);
  // Answers every parked claim of `queue` (all queues when empty) with no
  // tasks; TimedWork hands them to the loop to finish.
  void ReleaseParked(const std::string& queue);

  // Time-driven work after the ops of a cycle: lapse expired leases, serve
  // parked claims, refill the window, purge a chunk. Appends the parked claims
  // it finished to `finished`.
  Status TimedWork(std::vector<Op*>& finished);
  // Writes what must be durable with this commit (the token counter).
  Status BeforeCommit();
  // When TimedWork next has something to do; kForever when nothing.
  Timestamp NextWake() const;

  size_t window_size() const { return window_.size(); }
  size_t running() const { return leases_.size(); }

 private:
  Result<int64_t> QueueIdOf(const std::string& name);
  const std::string& QueueName(int64_t qid) const;
  Result<std::optional<TaskRow>> Find(const std::string& id);
  Result<TaskRow> FindOrNotFound(const std::string& id);
  Task ToTask(const TaskRow& row) const;
  // The running task `id` if `token` is its current lease; nullptr otherwise.
  const RunningTask* Leased(const std::string& id, uint64_t token) const;
  Status NotFoundOrStale(const std::string& id, uint64_t token);
  // Puts a scheduled row into the window if it is near enough.
  void Schedule(int64_t qid, Timestamp due, int priority, int64_t seq);
  void Unschedule(const TaskRow& row);
  Timestamp PurgeAt(Timestamp now) const { return now + options_.retention; }
  void NotePurge(Timestamp at);
  // Moves a running task back to scheduled (or dead when out of attempts).
  Status RetryOrBury(const RunningTask& task, Timestamp due, const std::string& error,
                     Timestamp now);
  Status Refill(Timestamp now);
  void ServeParked(int64_t qid, std::vector<Op*>& finished);

  Store& store_;
  Clock& clock_;
  const EngineOptions options_;

  SeqGenerator seqs_{0};
  uint64_t next_token_ = 1;
  uint64_t saved_token_ = 1;
  std::mt19937_64 rng_;
  std::unordered_map<std::string, int64_t> qids_;
  std::unordered_map<int64_t, std::string> queue_names_;

  Window window_;
  // A lower bound of the earliest due of a scheduled row beyond the horizon
  // (its bucket's start); nothing when there is none.
  std::optional<Timestamp> beyond_;
  bool window_full_ = false;  // the last refill stopped at max_window_tasks
  LeaseTable leases_;
  std::optional<Timestamp> next_purge_;

  std::unordered_map<int64_t, std::list<ClaimOp*>> parked_;  // per queue, FIFO
  std::set<std::pair<Timestamp, ClaimOp*>> parked_deadlines_;
  std::vector<Op*> released_;  // parked claims answered outside TimedWork
};

}  // namespace chronoq
