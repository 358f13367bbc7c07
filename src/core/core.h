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

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chronoq/bulk.h"
#include "chronoq/engine.h"
#include "chronoq/lock.h"
#include "chronoq/queue.h"
#include "chronoq/schedule.h"

#include "common/task_id.h"
#include "core/bulk.h"
#include "core/validate.h"
#include "dispatch/lease_table.h"
#include "locks/lock_table.h"
#include "store/store.h"
#include "timer/window.h"

namespace chronoq {

class Core;

// The instant in an occurrence id "<schedule name>@<instant>"; nullopt for
// an id of another form.
std::optional<Timestamp> OccurrenceInstant(const std::string& id);

// The bucket bounds of EngineStats' histograms.
inline constexpr std::array<double, 13> kCommitOpsBounds = {1,   2,   4,   8,    16,   32,  64,
                                                            128, 256, 512, 1024, 2048, 4096};
inline constexpr std::array<double, 12> kLatenessBounds = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.05,
                                                           0.1,    0.5,   1,     5,     10,   60};

// The index of the histogram bucket holding `value`: the first bound >= value,
// else the +Inf bucket (bounds.size()).
template <size_t N>
size_t BucketOf(const std::array<double, N>& bounds, double value) {
  size_t i = 0;
  while (i < N && value > bounds[i]) ++i;
  return i;
}

// What one cycle of the loop adds to EngineStats. The loop adds it to the
// totals once the cycle committed and drops it when the commit failed.
struct CycleStats {
  uint64_t enqueued = 0;
  uint64_t acked = 0;
  uint64_t failed = 0;
  uint64_t dead = 0;
  std::array<uint64_t, kLatenessBounds.size() + 1> lateness{};  // per bucket, not cumulative
  double lateness_sum = 0;
};

// The client's view of a stored row. Its attempts are the newest
// `attempt_history` of the stored history (failures and lapses) and, for a
// succeeded task, the acknowledged attempt, which the row's own columns
// describe (claimed, node, worker, updated, response).
Task TaskFromRow(const TaskRow& row, const std::string& queue, int attempt_history);
// Task::run_at of a stored row.
Timestamp RunAtOf(const TaskRow& row);
// Whether the single-task call of `action` (Cancel, Reschedule, Retry,
// Purge) takes a task in `state`: the one state rule they and bulk jobs share.
bool ActionTakes(BulkAction action, TaskState state);
// ... of a row read with its queue's and schedule's names.
Task TaskFromRead(const Store::ReadRow& read, int attempt_history);
// A stored webhook target; nullopt (and a logged warning) when it is corrupt.
std::optional<WebhookTarget> StoredTarget(const std::string& json);
// A stored attempt history (TaskRow::attempts); empty (and a logged warning)
// when it is corrupt.
std::vector<TaskAttempt> StoredAttempts(const std::string& json);
// The stored history `history` (empty: none) with `attempt` added at the end,
// keeping its last `keep` attempts and at most kMaxAttemptHistoryBytes of
// JSON: the oldest go first (the newest always fits). Empty when keep is 0.
// Parses `history` only when it is not empty, so a first attempt costs one
// record's formatting.
std::string AppendAttemptHistory(const std::string& history, const TaskAttempt& attempt, int keep);

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
  // When a committed op is to be answered: at once (Timestamp::min()), or,
  // for a claim served ahead (EngineOptions::claim_ahead), at this instant.
  virtual Timestamp answer_at() const { return Timestamp::min(); }
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
  Timestamp answer_at() const override { return answer_at_; }

  const std::string queue;
  const int max;
  const Duration lease;
  const Timestamp deadline;
  const std::atomic<bool>* const cancel;
  std::string worker;  // ClaimRequest::worker; set before the op is submitted
  Result<std::vector<Lease>> result{std::vector<Lease>()};

 private:
  friend class Core;

  int64_t qid_ = 0;
  std::list<ClaimOp*>::iterator parked_at_;
  Timestamp answer_at_ = Timestamp::min();  // served ahead: its tasks' due time
};

// A lock acquisition that waits for the key to be free: the lock table's
// LockWait, run and finished as an op. (Every LockWait the Core hands the
// table is a LockOp, so what the table answers is one.)
class LockOp : public Op, public LockWait {
 public:
  using LockWait::LockWait;
  bool Run(Core& core) override;
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
  // A batch (even of one task) is stored whole or not at all, and its errors
  // name the task's index (`tasks[3].key`).
  Result<std::vector<Task>> Enqueue(std::vector<ValidTask> tasks, bool batch);
  Result<Task> Cancel(const std::string& id);
  Result<Task> Reschedule(const std::string& id, Timestamp run_at,
                          const std::optional<std::string>& payload);
  Result<Task> Retry(const std::string& id);
  Result<Task> Purge(const std::string& id);
  // Applies a bulk job's action to the tasks `seqs` that still match its
  // filter (core/bulk.cc). REQUIRES: ValidateBulkRequest(request).ok()
  Result<BulkTally> ApplyBulk(const BulkRequest& request, const std::vector<int64_t>& seqs);
  // The largest seq handed out so far: a bulk job covers the tasks up to it.
  int64_t last_seq() const { return seqs_.last(); }
  // A claim made at `at` when later than now: a parked claim served ahead
  // takes the tasks due by then, as it would at that instant.
  Result<std::vector<Lease>> Claim(const std::string& queue, int max, Duration lease,
                                   const std::string& worker, Timestamp at = Timestamp::min());
  Status Ack(const std::string& id, uint64_t token);
  // One Status per acknowledgement; the valid ones are written together.
  Result<std::vector<Status>> AckMany(const std::vector<AckRequest>& acks);
  Status Fail(const std::string& id, uint64_t token, const std::string& error,
              std::optional<Duration> retry_after, const std::string& response = "");
  // The same with every AckFailure field: cancel, or bury at once when the
  // queue's final_statuses hold failure.http_status.
  Status Fail(const std::string& id, uint64_t token, const AckFailure& failure,
              const std::string& response);
  Result<Timestamp> Extend(const std::string& id, uint64_t token, Duration lease);

  // --- schedules (inside the transaction; core/schedules.cc) ---
  // Creates (or with `replace`, creates or replaces) a schedule and its next
  // occurrence. REQUIRES: `spec` passed ValidateScheduleSpec.
  Result<Schedule> SaveSchedule(const ScheduleSpec& spec, bool replace);
  Result<Schedule> GetSchedule(const std::string& name);
  Result<SchedulePage> ListSchedules(const ListSchedulesRequest& request);
  Status DeleteSchedule(const std::string& name);
  Result<Schedule> PauseSchedule(const std::string& name, bool paused);
  Result<std::vector<Timestamp>> NextOccurrences(const std::string& name, int count);
  // Applies the misfire policies to the occurrences that came due while the
  // engine was down. Once, at start, after Recover().
  Status CatchUpSchedules();

  // --- keyed locks (inside the transaction; locks/lock_table.h) ---
  // Grants the lock when the key is free (true), answers DeadlineExceeded
  // when op->deadline has passed (true), or queues `op` behind the holder
  // (false); TimedWork finishes it later.
  bool AcquireLock(LockOp* op);
  Status ReleaseLock(const std::string& key, uint64_t token);
  Result<LockGrant> ExtendLock(const std::string& key, uint64_t token, Duration lease);
  LockInfo GetLock(const std::string& key) const;
  std::vector<LockInfo> ListLocks(const std::string& after, int limit) const;

  // --- queues (inside the transaction) ---
  std::vector<QueueInfo> ListQueues() const;
  Result<QueueInfo> GetQueue(const std::string& name) const;
  // REQUIRES: ValidateQueueSettings(settings).ok()
  Result<QueueInfo> ConfigureQueue(const std::string& name, const QueueSettings& settings,
                                   const std::vector<QueueSetting>& reset);
  Result<QueueInfo> PauseQueue(const std::string& name, bool paused);

  // Parks `op` until its queue has a task due within claim_ahead, or its
  // deadline passes.
  void Park(ClaimOp* op);
  // Answers every parked claim of `queue` (all queues when empty) with no
  // tasks; TimedWork hands them to the loop to finish.
  void ReleaseParked(const std::string& queue);
  // Moves every waiting claim (parked or released) to `out`, to be answered
  // with no tasks: what a cycle that cannot reach the store does, so that no
  // long poll outlives its wait, or a release, while the store is down or
  // the engine was deposed (they could not be served anyway).
  void TakeWaitingClaims(std::vector<Op*>& out);

  // Time-driven work after the ops of a cycle: lapse expired leases, serve
  // parked claims, refill the window, purge a chunk. Appends the parked claims
  // it finished to `finished`.
  Status TimedWork(std::vector<Op*>& finished);
  // Writes what must be durable with this commit: the token counter and the
  // counts of the queues this cycle touched (one statement per queue).
  Status BeforeCommit();
  // What this cycle counted for EngineStats; starts the next cycle's.
  CycleStats TakeCycleStats() { return std::exchange(cycle_stats_, CycleStats()); }
  // When TimedWork next has something to do; kForever when nothing.
  Timestamp NextWake() const;

  size_t window_size() const { return window_.size(); }
  size_t lock_keys() const { return locks_.keys(); }
  size_t locks_held() const { return locks_.held(); }
  size_t lock_waiters() const { return locks_.waiters(); }
  size_t running() const { return leases_.size(); }

 private:
  // A queue as stored (QueueRow), plus this cycle's changes.
  struct QueueState : QueueRow {
    bool dirty = false;  // counts changed since the last commit
    // With a rate limit: when its most recent claims were made, oldest
    // first, at most rate_limit->count of them.
    std::deque<Timestamp> claims;
  };
  // The queue named `name`, created (in the store too) when new. The pointer
  // stays valid until Reload().
  Result<QueueState*> QueueOf(const std::string& name);
  QueueState* QueueById(int64_t qid);
  const std::string& QueueName(int64_t qid) const;
  QueueInfo Info(const QueueState& q, Timestamp now) const;
  // Moves `n` tasks of the queue from state `from` to `to` in its counts;
  // unset `from`: new tasks; unset `to`: deleted ones.
  void Count(QueueState& q, std::optional<TaskState> from, std::optional<TaskState> to,
             int64_t n = 1);
  void Count(int64_t qid, std::optional<TaskState> from, std::optional<TaskState> to,
             int64_t n = 1);
  // How many more tasks the queue may hand out now: 0 while paused, else what
  // its concurrency and rate limit leave (no limit when unset).
  static int64_t Room(const QueueState& q, Timestamp now);
  // Room() > 0 for the queue with id `qid` (unknown queues have no limit).
  bool CanHandOut(int64_t qid, Timestamp now) const;
  // When a rate-limited queue next gets room: its oldest claim in the period
  // leaves it. Unset when the rate limit is not what holds it back.
  static std::optional<Timestamp> RateRoomAt(const QueueState& q, Timestamp now);
  Result<std::optional<TaskRow>> Find(const std::string& id);
  Result<TaskRow> FindOrNotFound(const std::string& id);
  Task ToTask(const TaskRow& row) const;
  // The running task `id` if `token` is its current lease; nullptr otherwise.
  const RunningTask* Leased(const std::string& id, uint64_t token) const;
  Status NotFoundOrStale(const std::string& id, uint64_t token);
  // True when a scheduled row due at `due` belongs in memory: before the
  // horizon, or in the bucket a full window stopped in (see Refill).
  bool Loaded(Timestamp due) const;
  // Puts an unkeyed or started scheduled row into the window if it is
  // loaded; otherwise notes that something lies beyond.
  void AddToWindow(int64_t qid, const Window::Key& key);
  // A row became scheduled (or moved): into the window, or, for a keyed task
  // waiting to start, to its key.
  Status Place(int64_t qid, const std::optional<std::string>& key, bool started,
               const Window::Key& at);
  // A scheduled row moved or left: memory forgets where it was. `finished`:
  // it will not run (cancelled, deleted, replaced), so a started keyed task
  // frees its key's place.
  Status Unschedule(const TaskRow& row, bool finished);
  // A scheduled row is cancelled or deleted: Unschedule, and a keyed task
  // waiting to start leaves its key's backlog.
  Status Dropped(const TaskRow& row);
  // A keyed task that has never been claimed (attempt 0). A keyed task that
  // has is *started*: it holds a place of its key until it finishes.
  static bool WaitsToStart(const TaskRow& row) { return row.key && row.attempt == 0; }
  // When a task of `qid` finishing now is purged: its queue's retention, else
  // the engine's.
  Timestamp PurgeAt(int64_t qid, Timestamp now) const;
  void NotePurge(Timestamp at);
  // The work of Cancel, Reschedule, Retry and Purge on a row they take
  // (ActionTakes), shared with ApplyBulk; each updates `row` as written.
  Status CancelRow(TaskRow& row, Timestamp now);
  Status RescheduleRow(TaskRow& row, Timestamp run_at, const std::optional<std::string>& payload,
                       Timestamp now);
  Status RetryRow(TaskRow& row, Timestamp now);
  Status PurgeRow(const TaskRow& row);
  // The running task's attempt history once its current attempt ends now
  // (AppendAttemptHistory, on the stored one): `error` and `response` are
  // cut to kMaxAttemptExcerptBytes.
  Result<std::string> EndAttempt(const RunningTask& task, AttemptOutcome outcome,
                                 std::string_view error, std::string_view response, Timestamp now);
  // Moves a running task back to scheduled (or dead when out of attempts),
  // recording the attempt that ended with `outcome`. `bury`: dead now,
  // whatever attempts remain.
  Status RetryOrBury(const RunningTask& task, Timestamp due, const std::string& error,
                     AttemptOutcome outcome, std::string_view response, Timestamp now,
                     bool bury = false);
  // Moves a running task to cancelled, keeping `error` and recording the
  // attempt as failed with `response`.
  Status CancelRunning(const RunningTask& task, const std::string& error, std::string_view response,
                       Timestamp now);
  Status Refill(Timestamp now);

  // --- per-key ordering (core/keys.cc) ---
  // A key of a queue that has a task started and unfinished, or a task
  // waiting to start that is loaded. Its head (the first task waiting to
  // start, by due, priority, seq) is read from the store's key index; only
  // the head can be claimed, and only while the key has room, so a claim
  // never sees the key's other tasks.
  using KeyId = std::pair<int64_t, std::string>;  // queue, key
  struct KeyState {
    int in_flight = 0;                // started, unfinished: running, or scheduled to retry
    std::optional<Window::Key> head;  // at its real due
    // The tasks waiting to start right after the head, farthest first: read
    // with it, and exactly the next ones (arrivals and departures keep them
    // so). With ahead_complete they are all of them, else only the first.
    std::vector<Window::Key> ahead;
    bool ahead_complete = false;
    // How many tasks past the head the key's next read takes; grows while
    // reads come back full (keys.cc, ReadAhead). 0: the first size.
    int read_ahead = 0;
    // The head's entry in the window while the key has room: due at the
    // later of its due and its key's turn (when the key's previous task was
    // claimed or finished), which rotates claims among busy keys.
    std::optional<Window::Key> queued;
    // Before every task of the key that waits to start: where a read of the
    // index starts. Unset: from the cursor saved in the store.
    std::optional<KeyPosition> cursor;
    int takes_unsaved = 0;  // heads taken since the cursor was last queued to save
  };
  using Keys = std::map<KeyId, KeyState>;
  Status LoadKeys();
  int KeyLimit(int64_t qid) const;
  // Queues the head in the window if the key has room.
  void Offer(Keys::iterator it, Timestamp turn);
  void Withdraw(Keys::iterator it);
  // Re-reads the key's head and the tasks after it from the store (after
  // its cursor) and offers the head at `turn`; may forget the key (`it` is
  // then invalid).
  Status RefetchHead(Keys::iterator it, Timestamp turn);
  // The head is gone (claimed, cancelled, moved): the next one becomes the
  // head, read from the store if need be. May forget the key.
  Status NextHead(Keys::iterator it, Timestamp turn);
  // Makes the nearest task of `ahead` (if any) the head. May forget the key.
  Status PromoteAhead(Keys::iterator it, Timestamp turn);
  // A task waiting behind the head: kept in `ahead` if it falls among them.
  static void AddAhead(KeyState& k, const Window::Key& at);
  // How many tasks past the head the key's next read takes.
  static int ReadAhead(const KeyState& k);
  // A task of key `id` waits to start at `at`: the key's cursor (`k`, when
  // in memory and set) and its queued save move back to just before it if
  // past it.
  void CursorBefore(const KeyId& id, KeyState* k, const Window::Key& at);
  // Queues a save of the key's cursor at `at`, done at the end of the cycle.
  void QueueCursorSave(Keys::iterator it, const KeyPosition& at);
  // Forgets a key that holds no place and has no loaded head, queueing a
  // save of its cursor.
  void MaybeForget(Keys::iterator it);
  // A task of the key is waiting to start at `at` (enqueued, retried by
  // hand, rescheduled, refilled).
  Status KeyedArrived(int64_t qid, const std::string& key, const Window::Key& at);
  // The task `seq` of the key no longer waits to start at its old place.
  Status KeyedLeft(int64_t qid, const std::string& key, int64_t seq);
  // The claim being built popped window entry `entry`. When it is a key's
  // head, the head takes a place and the next one is queued at `now` (it
  // can join the same claim); returns that key, else nullopt. With
  // `read_later`, a key that is full and must read its next head from the
  // store is added there instead, for the claim to read with RefetchHeads.
  Result<std::optional<Keys::iterator>> TakeHead(const Window::Key& entry, Timestamp now,
                                                 std::vector<Keys::iterator>* read_later = nullptr);
  // RefetchHead for each of `keys`, in one store call (KeyHeadsOf).
  Status RefetchHeads(const std::vector<Keys::iterator>& keys, Timestamp turn);
  // The head and `ahead` of a key from a read of its store index.
  Status Refetched(Keys::iterator it, const std::vector<DueEntry>& rows, Timestamp turn);
  // Undoes TakeHead for a claim whose statement failed.
  Status UntakeHeads(const std::vector<Keys::iterator>& taken);
  // A started task of the key finished (or was replaced): its place is free.
  Status KeyReleased(int64_t qid, const std::string& key, Timestamp now);
  // After the queue's max_in_flight_per_key changed.
  void ReofferKeys(int64_t qid, Timestamp now);
  // Reads how many tasks of the key wait to start into pending_, unless it
  // is there. Call before writing a task of the key.
  Status CountPending(const QueueState& q, const std::string& key);
  // Backpressure: counts one more task of the key waiting to start, or
  // refuses it (ResourceExhausted naming `field`) at max_pending_per_key.
  Status AdmitKeyed(const QueueState& q, const std::string& key, std::string_view field);
  // Adjusts the cached count of the key's tasks waiting to start, if cached.
  void NotePending(int64_t qid, const std::string& key, int64_t delta);
  // Saves the queued key cursors (BeforeCommit).
  Status FlushKeyCursors();

  // --- schedules (core/schedules.cc) ---
  // A scheduled occurrence was claimed / finished (succeeded, dead or
  // cancelled): the schedule records it and creates its next occurrence
  // when that is due now.
  Status OccurrenceClaimed(int64_t sid, int64_t seq, Timestamp now);
  Status OccurrenceFinished(int64_t sid, int64_t seq, const std::string& id, TaskState state,
                            const std::optional<std::string>& error, Timestamp now);
  // Creates the occurrence at `at` as a task (or adopts the unfinished task
  // that already has its id; skips past one that already ran) and makes it
  // the schedule's current one.
  Status Materialise(ScheduleRow& row, const ScheduleSpec& spec, Timestamp at);
  // Creates the next occurrence after the current one (`misfire` chooses
  // among missed ones), unless paused.
  Status Continue(ScheduleRow& row, const ScheduleSpec& spec, Misfire misfire, Timestamp now);
  // Deletes the schedule's unclaimed occurrence, if any.
  Status DropPending(ScheduleRow& row);
  Result<Schedule> ToSchedule(const ScheduleRow& row, Timestamp now);
  Result<ScheduleRow> ScheduleOrNotFound(const std::string& name);
  void ServeParked(int64_t qid, std::vector<Op*>& finished);

  Store& store_;
  Clock& clock_;
  const EngineOptions options_;

  SeqGenerator seqs_{0};
  // Fencing tokens. The store holds a ceiling above every token handed out,
  // raised by kTokenBlock only when the tokens reach it, so most commits
  // that claim write no token; after a restart tokens go on from the
  // ceiling, so they still only grow.
  static constexpr uint64_t kTokenBlock = 4096;
  uint64_t next_token_ = 1;
  uint64_t token_ceiling_ = 1;
  std::mt19937_64 rng_;
  std::unordered_map<std::string, int64_t> qids_;
  std::unordered_map<int64_t, QueueState> queues_;
  std::vector<int64_t> dirty_queues_;  // whose counts BeforeCommit writes
  CycleStats cycle_stats_;

  Window window_;
  // When the last refill stopped at max_window_tasks inside a bucket: the
  // last seq it read of the horizon's bucket (the next refill goes on from
  // there); 0 otherwise.
  int64_t resume_seq_ = 0;
  Keys keys_;
  std::unordered_map<int64_t, Keys::iterator> queued_heads_;  // by the head's seq
  // Tasks waiting to start per key, for queues with max_pending_per_key:
  // counted from the store on first use, then kept; a key at 0 is forgotten.
  std::map<KeyId, int64_t> pending_;
  // Key cursors to save before the commit (keys.cc), by key.
  std::map<KeyId, KeyPosition> cursor_saves_;
  // A lower bound of the earliest due of a scheduled row beyond the horizon
  // (its bucket's start); nothing when there is none.
  std::optional<Timestamp> beyond_;
  bool window_full_ = false;  // the last refill stopped at max_window_tasks
  LeaseTable leases_;
  std::optional<Timestamp> next_purge_;

  std::unordered_map<int64_t, std::list<ClaimOp*>> parked_;  // per queue, FIFO
  std::set<std::pair<Timestamp, ClaimOp*>> parked_deadlines_;
  std::vector<Op*> released_;  // parked claims answered outside TimedWork

  LockTable locks_;  // its tokens come from next_token_
};

}  // namespace chronoq
