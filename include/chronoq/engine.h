// chronoq/engine.h: the embeddable engine.
//
// An Engine stores timed tasks durably (in an embedded SQLite file by
// default), hands each one to a worker under a lease when it is due, and
// retries or redelivers it when the work fails or the worker vanishes.
//
//   chronoq::EngineOptions options;
//   options.store = "sqlite:data/chronoq.db";
//   auto engine = chronoq::Engine::Open(options);
//   if (!engine.ok()) return Fail(engine.status());
//
//   chronoq::TaskSpec share;                      // expire share 42 in 7 days
//   share.queue = "expire-share";
//   share.id = "share:42";
//   share.delay = std::chrono::hours(24 * 7);
//   share.payload = R"({"share":42})";
//   (*engine)->Enqueue(share);
//
//   (*engine)->RegisterHandler("expire-share", {}, [](const chronoq::Lease& l) {
//     return RevokeShare(l.payload);   // a non-OK Status or an exception retries
//   });
//
// Every call that changes something returns only after the change is
// committed. Concurrent calls share one commit (group commit), so durability
// costs latency, not throughput.
//
// Thread-safe: every method may be called from any thread, except that
// handlers must not destroy the Engine that runs them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/bulk.h"
#include "chronoq/clock.h"
#include "chronoq/lock.h"
#include "chronoq/queue.h"
#include "chronoq/result.h"
#include "chronoq/schedule.h"
#include "chronoq/status.h"
#include "chronoq/task.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

class Store;  // the durable truth behind an engine (src/store/store.h)

struct EngineOptions {
  // Where the engine keeps its state, as a URL:
  //   "sqlite:PATH"  an embedded SQLite file, created with its directory if
  //                  missing; a PATH without a scheme means the same.
  //                  "?durability=full" adds an fsync to every commit, so a
  //                  commit survives power loss too; the default, "normal",
  //                  survives a crash of the process.
  //   "postgresql://USER@HOST:PORT/DB" (or postgres://)  a PostgreSQL
  //                  database (docs/OPERATIONS.md). "?schema=NAME" names the
  //                  schema chronoq creates and uses (default "chronoq"); other
  //                  parameters are libpq's ("sslmode=require", "host=/socket/dir").
  //                  One engine at a time per schema: a second Open fails with
  //                  FailedPrecondition.
  // Errors name the field "store".
  std::string store;
  // Time source; must outlive the engine. nullptr: the system clock.
  Clock* clock = nullptr;

  int default_max_attempts = 25;
  Backoff default_backoff;
  // How long succeeded and cancelled tasks stay visible before being purged
  // (QueueSettings::retention overrides it per queue).
  Duration retention = std::chrono::hours(24);

  // Memory holds only tasks due within `lookahead` from now, and at most
  // `max_window_tasks` of them; the rest stay on disk until their time nears.
  Duration lookahead = std::chrono::seconds(60);
  size_t max_window_tasks = 1'000'000;

  // A claim waiting for a task due within `claim_ahead` takes it then and is
  // answered at the task's due time: the commit that records the lease, one
  // flush of the disk, is done before the task is due, so a flush that
  // stalls for less than this delays no task. Meanwhile the task is running
  // (Get shows it, with the due time as its claim time; Cancel and
  // Reschedule refuse it). 0 to 1 s; zero takes tasks only once they are due.
  Duration claim_ahead = std::chrono::milliseconds(10);

  // Finished tasks are purged at most this many per commit, so a purge never
  // stalls the hot path.
  int purge_chunk = 1000;

  // A bulk job (StartBulk) reads and changes at most this many tasks per
  // operation of the engine loop (1-1000), so claims wait for no more.
  int bulk_chunk = 1000;

  // Seeds the backoff jitter; 0 picks a random seed.
  uint64_t random_seed = 0;

  // Finished attempts kept per task (Task::attempts), 0-100; 0 keeps none.
  int attempt_history = kDefaultAttemptHistory;
  // This engine's name in the attempts it grants (TaskAttempt::node), at
  // most 200 bytes; empty: none. chronoqd passes --node-id (always set in a
  // cluster). Each claim then stores it with the task (a few percent of W2
  // for a 5-byte name, docs/BENCHMARKS.md "Attempt history"), so a single
  // engine, whose attempts all have the same node, does without by default.
  std::string node;
};

// Options of an in-process worker pool.
struct HandlerOptions {
  int concurrency = 1;                        // worker threads
  Duration lease = std::chrono::seconds(30);  // extended every lease/3 while running
  // Tasks a worker claims at once. A batch handler receives up to this many;
  // a per-task handler runs them one after another.
  int batch_size = 1;
};

// Runs one task. OK acknowledges it; an error (or an exception) fails it into
// the retry policy, and its message is kept as the task's last_error.
using Handler = std::function<Status(const Lease&)>;
// Runs up to HandlerOptions::batch_size tasks and returns one Status per task,
// in order: only the OK ones are acknowledged, the others retry.
using BatchHandler = std::function<std::vector<Status>(std::span<const Lease>)>;

// What a failed task reports (Engine::Fail's arguments), for AckMany.
struct AckFailure {
  std::string error;                    // kept as last_error (its first 4,096 bytes)
  std::optional<Duration> retry_after;  // default: the backoff
  // The work is no longer wanted (a webhook target answered 410 Gone): the
  // task is cancelled at once, keeping `error`, instead of retrying.
  bool cancel = false;
  // The HTTP status a webhook target answered: when the queue lists it in
  // QueueSettings::final_statuses, the task goes dead at once.
  std::optional<int> http_status;

  friend bool operator==(const AckFailure&, const AckFailure&) = default;
};

// One task and the token of its lease, for AckMany and ExtendMany.
struct AckRequest {
  std::string id;
  uint64_t token = 0;
  // Kept as the task's last_response when not empty (a webhook's answer).
  std::string response;
  // Set: AckMany fails the task instead of acknowledging it (it retries or
  // goes dead, as Fail does), in the same commit as the batch's other
  // outcomes. ExtendMany ignores it.
  std::optional<AckFailure> failure;

  friend bool operator==(const AckRequest&, const AckRequest&) = default;
};

// A claim that first acknowledges the tasks of the previous one
// (Engine::ClaimAsync): a worker's loop in one request.
struct ClaimRequest {
  std::string queue;
  int max = 1;
  Duration lease = std::chrono::seconds(30);
  Duration wait = Duration::zero();
  // Who is claiming, kept with each task it gets (Task::worker), for people:
  // e.g. "host:pid". At most 200 bytes of UTF-8 without control characters;
  // empty: nobody named.
  std::string worker;
  // Acknowledged before the claim, usually in the same commit, so the claim
  // can take what they free (the next task of their keys).
  std::vector<AckRequest> acks;

  friend bool operator==(const ClaimRequest&, const ClaimRequest&) = default;
};
struct ClaimAnswer {
  std::vector<Lease> leases;
  std::vector<Status> acks;  // one per ClaimRequest::acks, in order
};

class Engine {
 public:
  // Opens (creating if needed) the store options.store names and starts the
  // engine. Recovers from a crash without scanning the whole table:
  // scheduled tasks fire, expired leases are redelivered.
  static Result<std::unique_ptr<Engine>> Open(EngineOptions options);
  // Starts the engine on `store`, an open Store (options.store is not read):
  // for programs and tests that build their own store.
  static Result<std::unique_ptr<Engine>> Open(EngineOptions options, std::unique_ptr<Store> store);

  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  // Stops the worker pools (running handlers finish), commits what is pending
  // and closes the store.
  virtual ~Engine() = default;

  // --- producing ------------------------------------------------------------
  // Validates and stores one task; returns it as stored. InvalidArgument names
  // the bad field; AlreadyExists when `id` names an unfinished task and
  // on_conflict is kReject.
  virtual Result<Task> Enqueue(const TaskSpec& spec) = 0;
  // Stores all tasks in one commit, or none: the first error is returned with
  // its field prefixed "tasks[i].".
  virtual Result<std::vector<Task>> EnqueueBatch(const std::vector<TaskSpec>& specs) = 0;

  // --- managing -------------------------------------------------------------
  // Cancels a scheduled task. NotFound; FailedPrecondition if not scheduled.
  virtual Result<Task> Cancel(std::string_view id) = 0;
  // Moves a scheduled task to `run_at`, optionally with a new payload.
  virtual Result<Task> Reschedule(std::string_view id, Timestamp run_at,
                                  std::optional<std::string> payload = std::nullopt) = 0;
  // Schedules a dead task again, now, with its attempts reset.
  virtual Result<Task> Retry(std::string_view id) = 0;
  // Deletes a finished task (succeeded, cancelled or dead) now rather than
  // after its retention; returns it as it was. FailedPrecondition if it is
  // scheduled or running (cancel it first).
  virtual Result<Task> Purge(std::string_view id) = 0;
  virtual Result<Task> Get(std::string_view id) = 0;
  // Lists tasks, filtered by queue and/or state. With a state other than
  // dead, in due order to a few minutes (4.5-minute buckets), then creation order;
  // otherwise in creation order.
  virtual Result<TaskPage> List(const ListRequest& request) = 0;
  // The keys of `queue` with the most scheduled tasks, most first (then by
  // key), at most `limit` (1-1000). Reads the whole queue's keyed backlog:
  // for people, not for hot paths.
  virtual Result<std::vector<KeyBacklog>> KeyBacklogs(std::string_view queue, int limit) = 0;

  // --- bulk actions (chronoq/bulk.h) -----------------------------------------
  // Checks the request (InvalidArgument names the field: "filter.state",
  // "filter.run_at_to", "shift_ms", "filter" for a filter with no condition
  // and no `all`). A dry run walks the matching tasks now, changes nothing
  // and returns what a job would count (state done, empty id); otherwise
  // starts a job in the background and returns it running.
  virtual Result<BulkJob> StartBulk(const BulkRequest& request) = 0;
  // A job of this engine's lifetime; NotFound (field "id") otherwise.
  virtual Result<BulkJob> GetBulk(std::string_view id) = 0;
  // The running jobs and the last 100 finished ones, newest first.
  virtual std::vector<BulkJob> ListBulk() = 0;
  // Stops a running job after the chunk it is in (what it did stays done);
  // returns the job. A finished job is returned as it is.
  virtual Result<BulkJob> CancelBulk(std::string_view id) = 0;

  // --- consuming (remote or custom workers) ---------------------------------
  // Claims up to `max` due tasks of `queue` under a lease of `lease`, and no
  // more than the queue's concurrency leaves room for (none while it is
  // paused). When none can be had, waits until one can or until `wait` has
  // passed (then returns none).
  virtual Result<std::vector<Lease>> Claim(std::string_view queue, int max, Duration lease,
                                           Duration wait = Duration::zero()) = 0;
  // The same with every ClaimRequest field: the worker's name, and
  // acknowledgements of the previous claim (ClaimAsync's rules).
  virtual Result<ClaimAnswer> Claim(ClaimRequest request) = 0;
  // Completes a claimed task. FailedPrecondition (field "token") when the token
  // is stale: the lease was lost and the task may run elsewhere.
  virtual Status Ack(std::string_view id, uint64_t token) = 0;
  // Acknowledges many tasks in one commit, or fails those whose request has a
  // `failure` (a batch's outcomes, successes and failures, in one call); one
  // Status per request, in order.
  virtual Result<std::vector<Status>> AckMany(const std::vector<AckRequest>& acks) = 0;
  // Fails a claimed task: it retries after `retry_after` (default: backoff), or
  // goes dead after its last attempt, keeping `error`.
  virtual Status Fail(std::string_view id, uint64_t token, std::string_view error,
                      std::optional<Duration> retry_after = std::nullopt) = 0;
  // Extends a lease to now + `lease`; returns the new lease end.
  virtual Result<Timestamp> Extend(std::string_view id, uint64_t token, Duration lease) = 0;
  // Extends many leases to now + `lease` in one commit; one Status per request.
  virtual Result<std::vector<Status>> ExtendMany(const std::vector<AckRequest>& leases,
                                                 Duration lease) = 0;

  // --- queues ----------------------------------------------------------------
  // These run on the engine loop like every other call: each waits for one
  // cycle (one commit), so the counts they return are exact.
  // Every queue that has ever had a task, a claim or settings, by name.
  virtual Result<std::vector<QueueInfo>> ListQueues() = 0;
  // NotFound if the queue is unknown.
  virtual Result<QueueInfo> GetQueue(std::string_view queue) = 0;
  // Puts the `reset` fields of the queue's settings back to their defaults,
  // then merges `settings` into them (unset fields unchanged), creating the
  // queue if new; returns the result. InvalidArgument names the field
  // ("concurrency", "max_attempts", "backoff.base", "backoff.cap",
  // "retention", or one both set and reset). A higher concurrency serves
  // waiting claims at once.
  virtual Result<QueueInfo> ConfigureQueue(std::string_view queue, const QueueSettings& settings,
                                           const std::vector<QueueSetting>& reset) = 0;
  Result<QueueInfo> ConfigureQueue(std::string_view queue, const QueueSettings& settings) {
    return ConfigureQueue(queue, settings, {});
  }
  // A paused queue hands out no tasks (claims wait or return empty as if
  // nothing were due) while its tasks still become due; resuming serves
  // waiting claims at once. Durable. Creates the queue if new.
  virtual Result<QueueInfo> PauseQueue(std::string_view queue, bool paused) = 0;
  // Counters and histograms since the engine started. Cheap, never waits for
  // the engine loop; callable from any thread.
  virtual EngineStats Stats() = 0;

  // --- schedules (chronoq/schedule.h) ---------------------------------------
  // Creates a schedule and its next occurrence. InvalidArgument names the
  // field; AlreadyExists when the name is taken.
  virtual Result<Schedule> CreateSchedule(const ScheduleSpec& spec) = 0;
  // Creates or replaces the schedule spec.name. Its unclaimed next occurrence
  // is dropped and the next one follows the new definition from now; running
  // occurrences finish; a paused schedule stays paused.
  virtual Result<Schedule> PutSchedule(const ScheduleSpec& spec) = 0;
  // NotFound if there is no such schedule.
  virtual Result<Schedule> GetSchedule(std::string_view name) = 0;
  virtual Result<SchedulePage> ListSchedules(const ListSchedulesRequest& request) = 0;
  // Deletes the schedule and its unclaimed next occurrence; running
  // occurrences finish. NotFound if there is no such schedule.
  virtual Status DeleteSchedule(std::string_view name) = 0;
  // Pausing drops the unclaimed next occurrence and creates none until
  // resumed; resuming creates the next one after now (occurrences that fell
  // in the pause are not missed, just not wanted). Durable.
  virtual Result<Schedule> PauseSchedule(std::string_view name, bool paused) = 0;
  // The next `count` (1-1000) occurrence instants: the unclaimed next
  // occurrence, then what the rule gives after it (from now when there is
  // none). A fixed_delay schedule has only one: later ones depend on when
  // runs finish.
  virtual Result<std::vector<Timestamp>> NextOccurrences(std::string_view name, int count) = 0;

  // --- keyed locks (chronoq/lock.h) -----------------------------------------
  // Grants the lock on `key` (1-200 bytes of UTF-8 without control
  // characters) for request.lease, waiting up to request.wait for it.
  // DeadlineExceeded when the wait passes first (at once for a try-lock);
  // InvalidArgument names the field ("key", "wait", "lease", "owner").
  virtual Result<LockGrant> AcquireLock(std::string_view key, const LockRequest& request) = 0;
  // Frees the lock; the next waiter gets it at once. FailedPrecondition
  // (field "token") when `token` is not the key's current grant: its lease
  // lapsed, or it was released.
  virtual Status ReleaseLock(std::string_view key, uint64_t token) = 0;
  // Moves the grant's lease end to now + `lease`; FailedPrecondition (field
  // "token") as for ReleaseLock.
  virtual Result<LockGrant> ExtendLock(std::string_view key, uint64_t token, Duration lease) = 0;
  // The key's holder and waiters; a key nobody holds is simply not held.
  virtual Result<LockInfo> GetLock(std::string_view key) = 0;
  // Keys held or waited for, in key order, starting after `after` (empty:
  // from the first), at most `limit` (1-1000).
  virtual Result<std::vector<LockInfo>> ListLocks(std::string_view after, int limit) = 0;

  // --- in-process workers ---------------------------------------------------
  // Starts a worker pool for `queue`. One pool per queue; AlreadyExists otherwise.
  // Handlers run on the pool's threads until the engine is destroyed, which
  // waits for every running handler; whatever a handler captures must outlive
  // the engine.
  virtual Status RegisterHandler(std::string_view queue, HandlerOptions options,
                                 Handler handler) = 0;
  virtual Status RegisterBatchHandler(std::string_view queue, HandlerOptions options,
                                      BatchHandler handler) = 0;

  // --- asynchronous forms (for event loops such as chronoqd's) ---------------
  // Each does what its blocking namesake does but returns at once; `done`
  // receives the result, validation errors included, once it is committed.
  // `done` runs on the engine's loop thread (or at once on the caller's, for
  // invalid input): keep it short, never block in it, and never call a
  // blocking Engine method from it. Post the result to your own executor.
  template <typename T>
  using Done = std::function<void(Result<T>)>;
  using DoneStatus = std::function<void(Status)>;
  virtual void EnqueueAsync(TaskSpec spec, Done<Task> done) = 0;
  virtual void EnqueueBatchAsync(std::vector<TaskSpec> specs, Done<std::vector<Task>> done) = 0;
  virtual void CancelAsync(std::string id, Done<Task> done) = 0;
  virtual void RescheduleAsync(std::string id, Timestamp run_at, std::optional<std::string> payload,
                               Done<Task> done) = 0;
  virtual void RetryAsync(std::string id, Done<Task> done) = 0;
  virtual void PurgeAsync(std::string id, Done<Task> done) = 0;
  virtual void ClaimAsync(std::string queue, int max, Duration lease, Duration wait,
                          Done<std::vector<Lease>> done) = 0;
  // Acknowledges request.acks, then claims. Bad arguments (the claim's or
  // any acknowledgement's) refuse the whole request before anything is done;
  // otherwise an error of the acknowledgements' commit, or the claim's, is
  // the answer.
  virtual void ClaimAsync(ClaimRequest request, Done<ClaimAnswer> done) = 0;
  virtual void AckManyAsync(std::vector<AckRequest> acks, Done<std::vector<Status>> done) = 0;
  // `response`, when not empty, is kept as the task's last_response.
  virtual void FailAsync(std::string id, uint64_t token, std::string error,
                         std::optional<Duration> retry_after, std::string response,
                         DoneStatus done) = 0;
  virtual void ExtendAsync(std::string id, uint64_t token, Duration lease,
                           Done<Timestamp> done) = 0;
  virtual void AcquireLockAsync(std::string key, LockRequest request, Done<LockGrant> done) = 0;
  virtual void ReleaseLockAsync(std::string key, uint64_t token, DoneStatus done) = 0;
  virtual void ExtendLockAsync(std::string key, uint64_t token, Duration lease,
                               Done<LockGrant> done) = 0;
  // Answers every waiting claim at once with no tasks, and every waiting lock
  // acquisition with Unavailable (for a server that is shutting down); later
  // ones wait as usual. A claim already served ahead (claim_ahead) is
  // answered at its tasks' due time, or once that much real time has passed
  // when it comes first (a test clock that does not move).
  virtual void ReleaseWaitingClaims() = 0;

  // Returns once everything that was due or submitted before the call has been
  // processed and committed (due tasks handed to waiting claims, lapsed leases
  // redelivered, purges run). For tests on a fake clock and for orderly
  // shutdown; never needed for correctness.
  virtual void Sync() = 0;
};

}  // namespace chronoq
#pragma GCC visibility pop
