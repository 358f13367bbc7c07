// EngineImpl: the Engine behind chronoq/engine.h.
//
// Callers validate their input on their own thread, then hand an Op to the
// engine loop and wait for it. The loop thread takes every Op that arrived
// while it was busy, runs them all in one transaction, does the time-driven
// work (lapsed leases, waiting claims, window refill, purge), commits once and
// only then answers every Op of the batch: group commit. When nothing is
// pending it sleeps until Core::NextWake(), which is "never" for an idle
// engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "chronoq/engine.h"

#include "common/mutex.h"
#include "core/bulk.h"
#include "core/core.h"
#include "dispatch/answer_timer.h"
#include "dispatch/worker_pool.h"
#include "store/store.h"

namespace chronoq {

class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineOptions options, std::unique_ptr<Store> store);
  ~EngineImpl() override;

  // Recovers the store and starts the loop thread.
  Status Start();

  Result<Task> Enqueue(const TaskSpec& spec) override;
  Result<std::vector<Task>> EnqueueBatch(const std::vector<TaskSpec>& specs) override;
  Result<Task> Cancel(std::string_view id) override;
  Result<Task> Reschedule(std::string_view id, Timestamp run_at,
                          std::optional<std::string> payload) override;
  Result<Task> Retry(std::string_view id) override;
  Result<Task> Purge(std::string_view id) override;
  Result<Task> Get(std::string_view id) override;
  Result<TaskPage> List(const ListRequest& request) override;
  Result<std::vector<KeyBacklog>> KeyBacklogs(std::string_view queue, int limit) override;
  Result<std::vector<Lease>> Claim(std::string_view queue, int max, Duration lease,
                                   Duration wait) override;
  Result<ClaimAnswer> Claim(ClaimRequest request) override;
  Status Ack(std::string_view id, uint64_t token) override;
  Result<std::vector<Status>> AckMany(const std::vector<AckRequest>& acks) override;
  Status Fail(std::string_view id, uint64_t token, std::string_view error,
              std::optional<Duration> retry_after) override;
  Result<Timestamp> Extend(std::string_view id, uint64_t token, Duration lease) override;
  Result<std::vector<Status>> ExtendMany(const std::vector<AckRequest>& leases,
                                         Duration lease) override;
  Status RegisterHandler(std::string_view queue, HandlerOptions options, Handler handler) override;
  Status RegisterBatchHandler(std::string_view queue, HandlerOptions options,
                              BatchHandler handler) override;
  Result<std::vector<QueueInfo>> ListQueues() override;
  Result<QueueInfo> GetQueue(std::string_view queue) override;
  using Engine::ConfigureQueue;
  Result<QueueInfo> ConfigureQueue(std::string_view queue, const QueueSettings& settings,
                                   const std::vector<QueueSetting>& reset) override;
  Result<QueueInfo> PauseQueue(std::string_view queue, bool paused) override;
  Result<Schedule> CreateSchedule(const ScheduleSpec& spec) override;
  Result<Schedule> PutSchedule(const ScheduleSpec& spec) override;
  Result<Schedule> GetSchedule(std::string_view name) override;
  Result<SchedulePage> ListSchedules(const ListSchedulesRequest& request) override;
  Status DeleteSchedule(std::string_view name) override;
  Result<Schedule> PauseSchedule(std::string_view name, bool paused) override;
  Result<std::vector<Timestamp>> NextOccurrences(std::string_view name, int count) override;
  Result<LockGrant> AcquireLock(std::string_view key, const LockRequest& request) override;
  Status ReleaseLock(std::string_view key, uint64_t token) override;
  Result<LockGrant> ExtendLock(std::string_view key, uint64_t token, Duration lease) override;
  Result<LockInfo> GetLock(std::string_view key) override;
  Result<std::vector<LockInfo>> ListLocks(std::string_view after, int limit) override;
  void AcquireLockAsync(std::string key, LockRequest request, Done<LockGrant> done) override;
  void ReleaseLockAsync(std::string key, uint64_t token, DoneStatus done) override;
  void ExtendLockAsync(std::string key, uint64_t token, Duration lease,
                       Done<LockGrant> done) override;
  EngineStats Stats() override;
  void Sync() override;
  Result<BulkJob> StartBulk(const BulkRequest& request) override;
  Result<BulkJob> GetBulk(std::string_view id) override;
  std::vector<BulkJob> ListBulk() override;
  Result<BulkJob> CancelBulk(std::string_view id) override;

  void EnqueueAsync(TaskSpec spec, Done<Task> done) override;
  void EnqueueBatchAsync(std::vector<TaskSpec> specs, Done<std::vector<Task>> done) override;
  void CancelAsync(std::string id, Done<Task> done) override;
  void RescheduleAsync(std::string id, Timestamp run_at, std::optional<std::string> payload,
                       Done<Task> done) override;
  void RetryAsync(std::string id, Done<Task> done) override;
  void PurgeAsync(std::string id, Done<Task> done) override;
  void ClaimAsync(std::string queue, int max, Duration lease, Duration wait,
                  Done<std::vector<Lease>> done) override;
  void ClaimAsync(ClaimRequest request, Done<ClaimAnswer> done) override;
  void AckManyAsync(std::vector<AckRequest> acks, Done<std::vector<Status>> done) override;
  void FailAsync(std::string id, uint64_t token, std::string error,
                 std::optional<Duration> retry_after, std::string response,
                 DoneStatus done) override;
  void ExtendAsync(std::string id, uint64_t token, Duration lease, Done<Timestamp> done) override;
  void ReleaseWaitingClaims() override;

 private:
  // Runs `fn` on the loop thread inside the next transaction; returns its
  // result once that transaction committed (or the commit error).
  template <typename T>
  Result<T> Call(CoreFn<T> fn);
  // Call for a prepared operation: its validation error, or its result.
  template <typename T>
  Result<T> CallPrepared(Result<CoreFn<T>> fn);
  // The asynchronous Call: `done` gets the validation error at once, or the
  // committed result later on the loop thread.
  template <typename T>
  void CallAsync(Result<CoreFn<T>> fn, Done<T> done);
  // Validate an operation's input and return its work for the loop thread.
  Result<CoreFn<std::vector<Task>>> PrepareEnqueue(std::span<const TaskSpec> specs, bool batch);
  Result<CoreFn<Task>> PrepareCancel(std::string_view id);
  Result<CoreFn<Task>> PrepareReschedule(std::string_view id, Timestamp run_at,
                                         std::optional<std::string> payload);
  Result<CoreFn<Task>> PrepareRetry(std::string_view id);
  Result<CoreFn<Task>> PreparePurge(std::string_view id);
  Result<CoreFn<std::vector<Status>>> PrepareAckMany(std::vector<AckRequest> acks);
  Result<CoreFn<bool>> PrepareFail(std::string_view id, uint64_t token, std::string_view error,
                                   std::optional<Duration> retry_after, std::string response);
  Result<CoreFn<bool>> PrepareReleaseLock(std::string_view key, uint64_t token);
  Result<CoreFn<LockGrant>> PrepareExtendLock(std::string_view key, uint64_t token, Duration lease);
  Result<CoreFn<Timestamp>> PrepareExtend(std::string_view id, uint64_t token, Duration lease);
  // Checks a claim's arguments; returns the deadline of its wait.
  Result<Timestamp> ClaimDeadline(std::string_view queue, int max, Duration lease, Duration wait);
  Status CallStatus(std::function<Status(Core&)> fn);
  // CreateSchedule (replace false) and PutSchedule (true).
  Result<Schedule> SaveSchedule(const ScheduleSpec& spec, bool replace);
  // Hands `op` to the loop; answers it with Unavailable when stopping.
  void Submit(Op* op) CHRONOQ_EXCLUDES(mu_);
  // Wakes every caller waiting for an op (see CallOp in engine_impl.cc).
  void WakeCallers();
  void Loop();
  // Runs one cycle (one transaction) and answers its ops; false when its
  // commit failed.
  bool RunCycle(std::vector<Op*>& batch);
  Result<std::vector<Lease>> ClaimWaiting(const std::string& queue, int max, Duration lease,
                                          Duration wait, const std::atomic<bool>* cancel);
  Result<Task> ReadTask(std::string_view id);
  // List's id prefix and creation range, as seq and name ranges.
  static Status NarrowToIds(const ListRequest& request, Store::ListQuery& q);
  // Adds a committed cycle to the statistics.
  void RecordCycle(const CycleStats& cycle, size_t ops);
  // Notes a failed cycle's status: the store is down while it is Unavailable.
  void RecordFailure(const Status& s);
  // After a cycle that could not reach the store (and whose reload failed):
  // waiting claims answer with no tasks (Core::TakeWaitingClaims).
  void AnswerWaitingClaims();
  // Rebuilds memory from the store in a transaction of its own.
  Status ReloadFromStore();

  // EngineStats as the loop accumulates them: histograms per bucket, not
  // cumulative (Stats() sums them up).
  struct StatsTotals {
    uint64_t enqueued = 0, acked = 0, failed = 0, dead = 0, commits = 0;
    uint64_t lock_keys = 0, locks_held = 0, lock_waiters = 0;  // gauges
    std::array<uint64_t, kCommitOpsBounds.size() + 1> commit_ops{};
    double commit_ops_sum = 0;
    std::array<uint64_t, kLatenessBounds.size() + 1> lateness{};
    double lateness_sum = 0;
    bool store_up = true;
    std::string store_error;
  };

  Clock& clock_;
  // Claims served ahead wait here for their instant. Destroyed after the
  // loop and the worker pools, whose claims it may still answer.
  AnswerTimer answers_;
  const EngineOptions options_;
  const std::unique_ptr<Store> store_;
  Core core_;  // loop thread only
  // Memory holds what a failed cycle did and could not be rebuilt yet (the
  // store was down): the next cycle rebuilds it before anything else.
  bool needs_reload_ = false;  // loop thread only

  Mutex mu_;
  std::condition_variable cv_;  // the loop waits here for ops or its next deadline
  // Where the loop last went to sleep until (EngineStats::next_wake), in
  // microseconds since the epoch; kForever's count when only an op wakes it.
  std::atomic<int64_t> next_wake_{kForever.time_since_epoch().count()};
  std::vector<Op*> pending_ CHRONOQ_GUARDED_BY(mu_);
  bool stop_ CHRONOQ_GUARDED_BY(mu_) = false;
  std::thread loop_;
  std::atomic<uint32_t> cycles_{0};   // bumped after each cycle's ops are answered
  std::atomic<uint64_t> ops_run_{0};  // ops the loop ran, for bulk jobs' pacing

  // Written by the loop once per commit, read by Stats(): both hold the lock
  // only to copy a few hundred bytes.
  Mutex stats_mu_;
  StatsTotals stats_ CHRONOQ_GUARDED_BY(stats_mu_);

  BulkJobs bulk_;  // stopped first on destruction: its jobs call the loop

  Mutex pools_mu_;
  std::unordered_map<std::string, std::unique_ptr<WorkerPool>> pools_ CHRONOQ_GUARDED_BY(pools_mu_);
};

}  // namespace chronoq
