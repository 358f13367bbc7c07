#include "core/engine_impl.h"

#include <algorithm>
#include <charconv>

#include <spdlog/spdlog.h>

#include "common/futex.h"
#include "common/task_id.h"
#include "schedule/schedule_spec.h"
#include <pthread.h>

namespace chronoq {
namespace {

// Wakes a caller blocked on its op. The state is shared between the caller
// and the loop so the loop can notify after unlocking: a caller woken under
// the lock would only block again on the mutex (two wake-ups per op, measured
// as most of the loop's futex time), and once `done` is set the caller may
// destroy the op while the loop is still notifying.
class Completion {
 public:
  Completion() : state_(std::make_shared<State>()) {}
  // `publish` runs under the lock, before the caller can see `done`.
  template <typename F>
  void Signal(F publish) {
    const std::shared_ptr<State> state = state_;  // outlives the op if need be
    {
      MutexLock lock(state->mu);
      publish();
      state->done = true;
    }
    state->cv.notify_one();
  }
  void Wait() {
    MutexLock lock(state_->mu);
    while (!state_->done) state_->cv.wait(lock.std_lock());
  }

 private:
  struct State {
    Mutex mu;
    std::condition_variable cv;
    bool done CHRONOQ_GUARDED_BY(mu) = false;
  };
  std::shared_ptr<State> state_;
};

// An Op that runs a function on the loop thread and keeps its result, or the
// commit's error when the transaction holding its writes failed.
template <typename T>
class ResultOp : public Op {
 public:
  explicit ResultOp(CoreFn<T> fn) : fn_(std::move(fn)) {}
  bool Run(Core& core) override {
    result_.emplace(fn_(core));
    return true;
  }

 protected:
  // The op's answer given the outcome of its commit.
  Result<T> Settle(const Status& commit) {
    if (!commit.ok() && (!result_ || result_->ok())) return commit;
    if (!result_) return Status::Internal("operation was not run");
    return std::move(*result_);
  }

 private:
  CoreFn<T> fn_;
  std::optional<Result<T>> result_;
};

// A ResultOp whose caller waits for it. Callers wait on the engine's cycle
// counter, which the loop bumps once per commit and wakes with one futex call
// for everyone: a wake-up per op, each a cross-CPU interrupt, was measured as
// the single largest cost of one-task-per-call enqueues. Once `done_` is set
// the loop never touches the op again, so the caller may destroy it at once.
template <typename T>
class CallOp final : public ResultOp<T> {
 public:
  CallOp(CoreFn<T> fn, std::atomic<uint32_t>& cycles)
      : ResultOp<T>(std::move(fn)), cycles_(cycles) {}

  void Finish(const Status& commit) override {
    answer_.emplace(this->Settle(commit));
    done_.store(true, std::memory_order_release);
  }
  Result<T> Wait() {
    for (;;) {
      const uint32_t seen = cycles_.load(std::memory_order_acquire);
      if (done_.load(std::memory_order_acquire)) break;
      FutexWait(cycles_, seen);
    }
    return std::move(*answer_);
  }

 private:
  std::atomic<uint32_t>& cycles_;
  std::atomic<bool> done_{false};
  std::optional<Result<T>> answer_;
};

// A ResultOp that hands its answer to a callback and deletes itself.
template <typename T>
class AsyncCallOp final : public ResultOp<T> {
 public:
  AsyncCallOp(CoreFn<T> fn, Engine::Done<T> done)
      : ResultOp<T>(std::move(fn)), done_(std::move(done)) {}
  void Finish(const Status& commit) override {
    Result<T> answer = this->Settle(commit);
    Engine::Done<T> done = std::move(done_);
    delete this;
    done(std::move(answer));
  }

 private:
  Engine::Done<T> done_;
};

// A waiting op (a claim or a lock acquisition) whose caller blocks until it
// is answered.
template <typename Base>
class BlockingOp final : public Base {
 public:
  using Base::Base;
  void Finish(const Status& commit) override {
    completion_.Signal([&] {
      if (!commit.ok()) this->result = commit;
    });
  }
  auto Wait() {
    completion_.Wait();
    return std::move(this->result);
  }

 private:
  Completion completion_;
};

// A waiting op answered through a callback; deletes itself.
template <typename Base, typename T>
class AsyncOp final : public Base {
 public:
  template <typename... Args>
  explicit AsyncOp(Engine::Done<T> done, Args&&... args)
      : Base(std::forward<Args>(args)...), done_(std::move(done)) {}
  void Finish(const Status& commit) override {
    if (!commit.ok()) this->result = commit;
    Result<T> answer = std::move(this->result);
    Engine::Done<T> done = std::move(done_);
    delete this;
    done(std::move(answer));
  }

 private:
  Engine::Done<T> done_;
};

using BlockingClaimOp = BlockingOp<ClaimOp>;
using AsyncClaimOp = AsyncOp<ClaimOp, std::vector<Lease>>;

// List cursors: "<due bucket>.<seq>" for due-ordered pages, "<seq>" otherwise.
std::string EncodeCursor(const Store::ReadRow& last, bool by_due) {
  std::string seq = std::to_string(last.row.seq);
  if (!by_due) return seq;
  return std::to_string(DueBucket(last.row.due.value_or(Timestamp()))) + "." + seq;
}

Status DecodeCursor(std::string_view cursor, bool by_due, Store::ListQuery& q) {
  const auto bad = [] { return Status::InvalidArgument("cursor", "not a cursor from this list"); };
  auto number = [](std::string_view s, int64_t& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
  };
  const size_t dot = cursor.find('.');
  if (by_due != (dot != std::string_view::npos)) return bad();
  int64_t seq = 0;
  if (!number(by_due ? cursor.substr(dot + 1) : cursor, seq)) return bad();
  q.after_seq = seq;
  if (by_due) {
    int64_t bucket = 0;
    if (!number(cursor.substr(0, dot), bucket)) return bad();
    q.after_bucket = bucket;
  }
  return {};
}

// A histogram in EngineStats' form from per-bucket counts.
template <size_t N>
EngineStats::Histogram MakeHistogram(const std::array<double, N>& bounds,
                                     const std::array<uint64_t, N + 1>& buckets, double sum) {
  EngineStats::Histogram h;
  h.bounds.assign(bounds.begin(), bounds.end());
  h.counts.reserve(N + 1);
  uint64_t total = 0;
  for (uint64_t n : buckets) {
    total += n;
    h.counts.push_back(total);
  }
  h.sum = sum;
  h.total = total;
  return h;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options, std::unique_ptr<Store> store) {
  CHRONOQ_RETURN_IF_ERROR(ValidateEngineOptions(options));
  if (store == nullptr) return Status::InvalidArgument("store", "must not be null");
  auto engine = std::make_unique<EngineImpl>(std::move(options), std::move(store));
  CHRONOQ_RETURN_IF_ERROR(engine->Start());
  return std::unique_ptr<Engine>(std::move(engine));
}

EngineImpl::EngineImpl(EngineOptions options, std::unique_ptr<Store> store)
    : clock_(options.clock != nullptr ? *options.clock : SystemClock()),
      answers_(clock_),
      options_(std::move(options)),
      store_(std::move(store)),
      core_(*store_, clock_, options_),
      bulk_(
          *store_, clock_, options_.bulk_chunk,
          [this](const BulkRequest& request, const std::vector<int64_t>& seqs) {
            return Call<BulkTally>(
                [&request, &seqs](Core& core) { return core.ApplyBulk(request, seqs); });
          },
          [this] {
            return Call<int64_t>([](Core& core) -> Result<int64_t> { return core.last_seq(); });
          },
          [this] { return ops_run_.load(std::memory_order_relaxed); }) {}

Status EngineImpl::Start() {
  // Recovery runs in a transaction of its own, before the loop exists.
  CHRONOQ_RETURN_IF_ERROR(store_->Begin());
  Status s = core_.Recover();
  if (s.ok()) s = core_.CatchUpSchedules();
  // The catch-up may have moved tasks: their queues' counts go with it.
  if (s.ok()) s = core_.BeforeCommit();
  if (s.ok()) s = store_->Commit();
  if (!s.ok()) {
    store_->Rollback();
    return s;
  }
  loop_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "chronoq-loop");
    Loop();
  });
  return {};
}

EngineImpl::~EngineImpl() {
  // Bulk jobs first: each finishes the chunk it has on the loop.
  bulk_.Stop();
  // Workers first: they finish their handlers and acknowledge while the loop
  // still runs.
  std::unordered_map<std::string, std::unique_ptr<WorkerPool>> pools;
  {
    MutexLock lock(pools_mu_);
    pools.swap(pools_);
  }
  for (auto& [queue, pool] : pools) pool->RequestStop();
  if (!pools.empty()) {
    CallStatus([](Core& core) {
      core.ReleaseParked("");
      return Status();
    }).IgnoreError();
  }
  pools.clear();  // joins
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

// --- the loop ---------------------------------------------------------------

void EngineImpl::Submit(Op* op) {
  {
    MutexLock lock(mu_);
    if (!stop_) {
      pending_.push_back(op);
      // The loop only sleeps with nothing pending, so only the first op of a
      // batch needs to wake it.
      if (pending_.size() == 1) cv_.notify_one();
      return;
    }
  }
  op->Finish(Status::Unavailable("the engine is stopping"));
  WakeCallers();
}

void EngineImpl::WakeCallers() {
  cycles_.fetch_add(1, std::memory_order_release);
  FutexWakeAll(cycles_);
}

void EngineImpl::Loop() {
  std::vector<Op*> batch;
  bool stopping = false;
  // After a failed commit, time-driven work waits this long before it tries
  // again. Work that is due stays due when the store keeps failing (a lost
  // PostgreSQL connection, a full disk), and the loop would otherwise fail
  // it again at once, for ever: a core busy and about 50,000 log lines a
  // second, measured with chronoqd on a lost connection. Ops still run as
  // soon as they arrive.
  constexpr Duration kRetryAfterFailure = std::chrono::seconds(1);
  Timestamp not_before = Timestamp::min();
  while (!stopping) {
    {
      MutexLock lock(mu_);
      while (pending_.empty() && !stop_) {
        const Timestamp wake = std::max(core_.NextWake(), not_before);
        if (wake <= clock_.Now()) break;
        next_wake_.store(wake.time_since_epoch().count(), std::memory_order_relaxed);
        clock_.WaitUntil(cv_, lock.std_lock(), wake);
      }
      batch.swap(pending_);
      stopping = stop_;
    }
    // On the way out, waiting claims are answered with no tasks.
    if (stopping) core_.ReleaseParked("");
    const bool committed = RunCycle(batch);
    not_before = committed ? Timestamp::min() : clock_.Now() + kRetryAfterFailure;
    ops_run_.fetch_add(batch.size(), std::memory_order_relaxed);
    batch.clear();
    WakeCallers();
  }
}

Status EngineImpl::ReloadFromStore() {
  Status s = store_->Begin();
  if (s.ok()) s = core_.Reload();
  if (s.ok()) s = store_->Commit();
  if (!s.ok()) store_->Rollback();
  return s;
}

void EngineImpl::RecordFailure(const Status& s) {
  if (s.code() != StatusCode::kUnavailable) return;
  MutexLock lock(stats_mu_);
  stats_.store_up = false;
  stats_.store_error = s.message();
}

bool EngineImpl::RunCycle(std::vector<Op*>& batch) {
  if (needs_reload_) {
    // A failed cycle's changes are still in memory: nothing may run on them.
    Status reload = ReloadFromStore();
    if (!reload.ok()) {
      RecordFailure(reload);
      for (Op* op : batch) op->Finish(reload);
      AnswerWaitingClaims();
      return false;
    }
    needs_reload_ = false;
  }
  std::vector<Op*> finished;
  finished.reserve(batch.size());
  Status s = store_->Begin();
  if (s.ok()) {
    // Time-driven work runs first, so the ops see leases that lapsed and tasks
    // that entered the window by now, and again after them, to serve claims
    // that were parked or made servable by this batch.
    s = core_.TimedWork(finished);
  }
  for (Op* op : batch) {
    // After a failure the rest of the batch is not run, only answered.
    if (!s.ok() || op->Run(core_)) finished.push_back(op);
  }
  if (s.ok()) s = core_.TimedWork(finished);
  if (s.ok()) s = core_.BeforeCommit();
  if (s.ok()) s = store_->Commit();
  // Counted only once committed: a failed cycle changed nothing.
  const CycleStats cycle = core_.TakeCycleStats();
  if (s.ok()) RecordCycle(cycle, finished.size());
  if (!s.ok()) {
    // Nothing of this cycle is durable (or, if its COMMIT's answer was lost,
    // nothing of it can be known to be): memory must forget it too.
    spdlog::error("commit failed, {} operations rejected: {}", finished.size(), s.ToString());
    RecordFailure(s);
    store_->Rollback();
    if (Status reload = ReloadFromStore(); !reload.ok()) {
      spdlog::error("reloading after a failed commit: {}", reload.ToString());
      needs_reload_ = true;
    }
  }
  for (Op* op : finished) {
    // A claim served ahead is answered at its tasks' due time, not before
    // (the clock is read only for such a claim, not for every op).
    if (const Timestamp at = op->answer_at();
        s.ok() && at != Timestamp::min() && at > clock_.Now()) {
      answers_.At(at, [op] { op->Finish(Status()); });
    } else {
      op->Finish(s);
    }
  }
  if (!s.ok() && needs_reload_) AnswerWaitingClaims();
  return s.ok();
}

void EngineImpl::AnswerWaitingClaims() {
  std::vector<Op*> waiting;
  core_.TakeWaitingClaims(waiting);
  for (Op* op : waiting) op->Finish(Status());
}

void EngineImpl::RecordCycle(const CycleStats& cycle, size_t ops) {
  const size_t ops_bucket = BucketOf(kCommitOpsBounds, static_cast<double>(ops));
  MutexLock lock(stats_mu_);
  stats_.lock_keys = core_.lock_keys();
  stats_.locks_held = core_.locks_held();
  stats_.lock_waiters = core_.lock_waiters();
  stats_.enqueued += cycle.enqueued;
  stats_.acked += cycle.acked;
  stats_.failed += cycle.failed;
  stats_.dead += cycle.dead;
  ++stats_.commits;
  ++stats_.commit_ops[ops_bucket];
  stats_.commit_ops_sum += static_cast<double>(ops);
  for (size_t i = 0; i < cycle.lateness.size(); ++i) stats_.lateness[i] += cycle.lateness[i];
  stats_.lateness_sum += cycle.lateness_sum;
  stats_.store_up = true;
  stats_.store_error.clear();
}

EngineStats EngineImpl::Stats() {
  StatsTotals t;
  {
    MutexLock lock(stats_mu_);
    t = stats_;
  }
  EngineStats out;
  out.enqueued = t.enqueued;
  out.acked = t.acked;
  out.failed = t.failed;
  out.dead = t.dead;
  out.commits = t.commits;
  out.lock_keys = t.lock_keys;
  out.locks_held = t.locks_held;
  out.lock_waiters = t.lock_waiters;
  out.store_up = t.store_up;
  out.store_error = std::move(t.store_error);
  out.commit_ops = MakeHistogram(kCommitOpsBounds, t.commit_ops, t.commit_ops_sum);
  out.dispatch_lateness_s = MakeHistogram(kLatenessBounds, t.lateness, t.lateness_sum);
  const Timestamp wake(Duration(next_wake_.load(std::memory_order_relaxed)));
  if (wake != kForever) out.next_wake = wake;
  return out;
}

template <typename T>
Result<T> EngineImpl::Call(CoreFn<T> fn) {
  CallOp<T> op(std::move(fn), cycles_);
  Submit(&op);
  return op.Wait();
}

template <typename T>
void EngineImpl::CallAsync(Result<CoreFn<T>> fn, Done<T> done) {
  if (!fn.ok()) return done(fn.status());
  Submit(new AsyncCallOp<T>(std::move(*fn), std::move(done)));
}

template <typename T>
Result<T> EngineImpl::CallPrepared(Result<CoreFn<T>> fn) {
  CHRONOQ_RETURN_IF_ERROR(fn.status());
  return Call<T>(std::move(*fn));
}

Status EngineImpl::CallStatus(std::function<Status(Core&)> fn) {
  return Call<bool>([&fn](Core& core) -> Result<bool> {
           CHRONOQ_RETURN_IF_ERROR(fn(core));
           return true;
         })
      .status();
}

void EngineImpl::Sync() {
  CallStatus([](Core&) { return Status(); }).IgnoreError();
}

// Each operation validates its input on the caller's thread and returns the
// work for the loop thread; the blocking and the asynchronous forms share it.

// --- producing ----------------------------------------------------------------

Result<CoreFn<std::vector<Task>>> EngineImpl::PrepareEnqueue(std::span<const TaskSpec> specs,
                                                             bool batch) {
  if (specs.empty()) return Status::InvalidArgument("tasks", "must not be empty");
  if (specs.size() > kMaxBatchTasks)
    return Status::InvalidArgument("tasks", "more than 10000 tasks");
  const Timestamp now = clock_.Now();
  std::vector<ValidTask> valid;
  valid.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    // max_attempts 0 is resolved by the loop, from the queue's settings.
    Result<ValidTask> t = ValidateTaskSpec(specs[i], now, 0, "");
    if (!t.ok() && batch) {
      // The same error again, its field named with the task's place in the
      // batch: naming every field so up front cost a string per field and task.
      t = ValidateTaskSpec(specs[i], now, 0, "tasks[" + std::to_string(i) + "].");
    }
    CHRONOQ_RETURN_IF_ERROR(t.status());
    valid.push_back(std::move(*t));
  }
  return CoreFn<std::vector<Task>>([valid = std::move(valid), batch](Core& core) mutable {
    return core.Enqueue(std::move(valid), batch);
  });
}

Result<Task> EngineImpl::Enqueue(const TaskSpec& spec) {
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<Task> tasks,
                           CallPrepared(PrepareEnqueue(std::span(&spec, 1), false)));
  return std::move(tasks.front());
}

Result<std::vector<Task>> EngineImpl::EnqueueBatch(const std::vector<TaskSpec>& specs) {
  return CallPrepared(PrepareEnqueue(specs, true));
}

void EngineImpl::EnqueueAsync(TaskSpec spec, Done<Task> done) {
  CallAsync(PrepareEnqueue(std::span(&spec, 1), false),
            Done<std::vector<Task>>([done = std::move(done)](Result<std::vector<Task>> tasks) {
              if (!tasks.ok()) return done(tasks.status());
              done(std::move(tasks->front()));
            }));
}

void EngineImpl::EnqueueBatchAsync(std::vector<TaskSpec> specs, Done<std::vector<Task>> done) {
  CallAsync(PrepareEnqueue(specs, true), std::move(done));
}

// --- managing -----------------------------------------------------------------

Result<CoreFn<Task>> EngineImpl::PrepareCancel(std::string_view id) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  return CoreFn<Task>([id = std::string(id)](Core& core) { return core.Cancel(id); });
}

Result<CoreFn<Task>> EngineImpl::PrepareReschedule(std::string_view id, Timestamp run_at,
                                                   std::optional<std::string> payload) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  CHRONOQ_RETURN_IF_ERROR(ValidateDue(run_at, clock_.Now()));
  if (payload) CHRONOQ_RETURN_IF_ERROR(ValidatePayload(*payload));
  return CoreFn<Task>([id = std::string(id), run_at, payload = std::move(payload)](Core& core) {
    return core.Reschedule(id, run_at, payload);
  });
}

Result<CoreFn<Task>> EngineImpl::PrepareRetry(std::string_view id) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  return CoreFn<Task>([id = std::string(id)](Core& core) { return core.Retry(id); });
}

Result<CoreFn<Task>> EngineImpl::PreparePurge(std::string_view id) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  return CoreFn<Task>([id = std::string(id)](Core& core) { return core.Purge(id); });
}

Result<Task> EngineImpl::Cancel(std::string_view id) { return CallPrepared(PrepareCancel(id)); }

Result<Task> EngineImpl::Reschedule(std::string_view id, Timestamp run_at,
                                    std::optional<std::string> payload) {
  return CallPrepared(PrepareReschedule(id, run_at, std::move(payload)));
}

Result<Task> EngineImpl::Retry(std::string_view id) { return CallPrepared(PrepareRetry(id)); }

Result<Task> EngineImpl::Purge(std::string_view id) { return CallPrepared(PreparePurge(id)); }

void EngineImpl::CancelAsync(std::string id, Done<Task> done) {
  CallAsync(PrepareCancel(id), std::move(done));
}

void EngineImpl::RescheduleAsync(std::string id, Timestamp run_at,
                                 std::optional<std::string> payload, Done<Task> done) {
  CallAsync(PrepareReschedule(id, run_at, std::move(payload)), std::move(done));
}

void EngineImpl::RetryAsync(std::string id, Done<Task> done) {
  CallAsync(PrepareRetry(id), std::move(done));
}

void EngineImpl::PurgeAsync(std::string id, Done<Task> done) {
  CallAsync(PreparePurge(id), std::move(done));
}

Result<Task> EngineImpl::ReadTask(std::string_view id) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  std::optional<Store::ReadRow> row;
  if (auto seq = ParseGeneratedId(id)) {
    CHRONOQ_ASSIGN_OR_RETURN(row, store_->ReadBySeq(*seq));
  } else {
    CHRONOQ_ASSIGN_OR_RETURN(row, store_->ReadByName(std::string(id)));
  }
  if (!row) return Status::NotFound("task " + std::string(id) + " does not exist");
  return TaskFromRead(*row, options_.attempt_history);
}

Result<Task> EngineImpl::Get(std::string_view id) { return ReadTask(id); }

namespace {

// The first seq created at or after `t` (seqs carry their creation
// millisecond, task_id.h).
int64_t FirstSeqAt(Timestamp t) {
  const int64_t us =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const int64_t ms = us / 1000 + (us % 1000 > 0 ? 1 : 0);  // up to the next whole millisecond
  if (ms <= 0) return 0;
  if (ms >= (INT64_MAX >> kSeqCounterBits)) return INT64_MAX;
  return ms << kSeqCounterBits;
}

}  // namespace

// Turns the id prefix and the creation range into the seq and name ranges
// the store can walk on its indexes: a generated id ("_" and 16 hex digits)
// is its seq, so a prefix of one is a range of seqs.
Status EngineImpl::NarrowToIds(const ListRequest& request, Store::ListQuery& q) {
  if (request.created_after) q.min_seq = std::max(q.min_seq, FirstSeqAt(*request.created_after));
  if (request.created_before) {
    q.max_seq = std::min(q.max_seq, FirstSeqAt(*request.created_before) - 1);
  }
  const std::string& prefix = request.id_prefix;
  if (prefix.empty()) return {};
  if (prefix.size() > kMaxIdBytes) {
    return Status::InvalidArgument(
        "id_prefix", "is longer than an id (" + std::to_string(kMaxIdBytes) + " bytes)");
  }
  if (prefix[0] != '_') {
    q.name_prefix = prefix;
    return {};
  }
  const std::string_view hex = std::string_view(prefix).substr(1);
  constexpr size_t kDigits = 16;
  if (hex.size() > kDigits || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    return Status::InvalidArgument(
        "id_prefix",
        "starts with \"_\" (a generated id: \"_\" and 16 lowercase hex digits) "
        "but no generated id starts with \"" +
            prefix + "\"");
  }
  // "_0a1" covers seqs 0x0a10...0 to 0x0a1f...f.
  const int shift = static_cast<int>(4 * (kDigits - hex.size()));
  uint64_t high = 0;
  for (char c : hex) high = high * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  const uint64_t low = shift == 64 ? 0 : high << shift;
  const uint64_t top = shift == 64 ? UINT64_MAX : low | ((uint64_t{1} << shift) - 1);
  if (low > static_cast<uint64_t>(INT64_MAX)) {
    q.max_seq = -1;  // no seq is that large: an empty page
    return {};
  }
  q.min_seq = std::max(q.min_seq, static_cast<int64_t>(low));
  q.max_seq = std::min(q.max_seq, static_cast<int64_t>(std::min<uint64_t>(top, INT64_MAX)));
  q.generated_only = true;
  return {};
}

Result<std::vector<KeyBacklog>> EngineImpl::KeyBacklogs(std::string_view queue, int limit) {
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  CHRONOQ_RETURN_IF_ERROR(ValidateLimit(limit, kMaxListLimit, "limit"));
  return store_->KeyBacklogs(std::string(queue), limit);
}

Result<TaskPage> EngineImpl::List(const ListRequest& request) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLimit(request.limit, kMaxListLimit, "limit"));
  if (request.queue) CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(*request.queue));
  if (request.key) CHRONOQ_RETURN_IF_ERROR(ValidateTaskKey(*request.key));
  Store::ListQuery q;
  q.queue = request.queue;
  q.state = request.state;
  q.key = request.key;
  q.limit = request.limit;
  CHRONOQ_RETURN_IF_ERROR(NarrowToIds(request, q));
  const bool by_due = request.state.has_value() && *request.state != TaskState::kDead;
  if (!request.cursor.empty()) CHRONOQ_RETURN_IF_ERROR(DecodeCursor(request.cursor, by_due, q));
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<Store::ReadRow> rows, store_->List(q));
  TaskPage page;
  page.tasks.reserve(rows.size());
  for (const Store::ReadRow& r : rows) {
    page.tasks.push_back(TaskFromRead(r, options_.attempt_history));
  }
  if (static_cast<int>(rows.size()) == request.limit) {
    page.next_cursor = EncodeCursor(rows.back(), by_due);
  }
  return page;
}

// --- bulk actions (core/bulk.h) ---------------------------------------------------

Result<BulkJob> EngineImpl::StartBulk(const BulkRequest& request) {
  CHRONOQ_RETURN_IF_ERROR(ValidateBulkRequest(request, clock_.Now()));
  const BulkFilter& f = request.filter;
  Store::ListQuery q;
  q.queue = f.queue;
  q.state = f.state;
  q.key = f.key;
  Status ids = NarrowToIds({.id_prefix = f.id_prefix}, q);
  if (!ids.ok()) {
    // NarrowToIds names List's field; here it sits in the filter.
    return Status(ids.code(), "filter." + ids.message(), "filter." + ids.field());
  }
  return bulk_.Start(request, std::move(q));
}

Result<BulkJob> EngineImpl::GetBulk(std::string_view id) { return bulk_.Get(std::string(id)); }

std::vector<BulkJob> EngineImpl::ListBulk() { return bulk_.List(); }

Result<BulkJob> EngineImpl::CancelBulk(std::string_view id) {
  return bulk_.Cancel(std::string(id));
}

// --- consuming ------------------------------------------------------------------

// Checks a claim's arguments; returns the deadline of its wait.
Result<Timestamp> EngineImpl::ClaimDeadline(std::string_view queue, int max, Duration lease,
                                            Duration wait) {
  CHRONOQ_RETURN_IF_ERROR(chronoq::ValidateClaim(queue, max, lease, wait));
  return wait > Duration::zero() ? clock_.Now() + wait : Timestamp::min();
}

Result<std::vector<Lease>> EngineImpl::ClaimWaiting(const std::string& queue, int max,
                                                    Duration lease, Duration wait,
                                                    const std::atomic<bool>* cancel) {
  CHRONOQ_ASSIGN_OR_RETURN(Timestamp deadline, ClaimDeadline(queue, max, lease, wait));
  BlockingClaimOp op(queue, max, lease, deadline, cancel);
  Submit(&op);
  return op.Wait();
}

Result<std::vector<Lease>> EngineImpl::Claim(std::string_view queue, int max, Duration lease,
                                             Duration wait) {
  return ClaimWaiting(std::string(queue), max, lease, wait, nullptr);
}

Result<ClaimAnswer> EngineImpl::Claim(ClaimRequest request) {
  // Answered on the loop thread, or on this one when refused at once; the
  // wait ends with the claim's own (request.wait).
  std::optional<Result<ClaimAnswer>> answer;
  Completion answered;
  ClaimAsync(std::move(request), [&answer, answered](Result<ClaimAnswer> a) mutable {
    answered.Signal([&] { answer.emplace(std::move(a)); });
  });
  answered.Wait();
  return std::move(*answer);
}

void EngineImpl::ClaimAsync(std::string queue, int max, Duration lease, Duration wait,
                            Done<std::vector<Lease>> done) {
  Result<Timestamp> deadline = ClaimDeadline(queue, max, lease, wait);
  if (!deadline.ok()) return done(deadline.status());
  Submit(new AsyncClaimOp(std::move(done), std::move(queue), max, lease, *deadline));
}

void EngineImpl::ClaimAsync(ClaimRequest request, Done<ClaimAnswer> done) {
  Result<Timestamp> deadline =
      ClaimDeadline(request.queue, request.max, request.lease, request.wait);
  Status valid = deadline.status();
  if (valid.ok()) valid = ValidateWorkerName(request.worker);
  // Checked before anything is sent: acknowledgements must not go through
  // for a claim that is refused.
  if (valid.ok() && !request.acks.empty()) valid = ValidateLeaseRefs(request.acks, "acks");
  if (!valid.ok()) return done(valid);
  if (request.acks.empty()) {
    auto* op = new AsyncClaimOp(
        [done = std::move(done)](Result<std::vector<Lease>> leases) {
          if (!leases.ok()) return done(leases.status());
          done(ClaimAnswer{std::move(*leases), {}});
        },
        std::move(request.queue), request.max, request.lease, *deadline);
    op->worker = std::move(request.worker);
    Submit(op);
    return;
  }
  // The acknowledgements go to the loop first, so they usually commit in the
  // same cycle as the claim, which may then take the tasks they free (the
  // next of the same keys). The answer waits for both, which may come on
  // different cycles; whichever comes last answers.
  struct Joined {
    Mutex mu;
    int left CHRONOQ_GUARDED_BY(mu) = 2;
    // Each written once, under mu; read by the last to arrive, after.
    std::optional<Result<std::vector<Status>>> acked;
    std::optional<Result<std::vector<Lease>>> claimed;
    Done<ClaimAnswer> done;
  };
  auto joined = std::make_shared<Joined>();
  joined->done = std::move(done);
  auto arrive = [joined](auto slot) {
    return [joined, slot](auto result) {
      {
        MutexLock lock(joined->mu);
        (*joined).*slot = std::move(result);
        if (--joined->left > 0) return;
      }
      Joined& j = *joined;
      if (!j.acked->ok()) return j.done(j.acked->status());
      if (!j.claimed->ok()) return j.done(j.claimed->status());
      j.done(ClaimAnswer{std::move(**j.claimed), std::move(**j.acked)});
    };
  };
  CallAsync(PrepareAckMany(std::move(request.acks)),
            Done<std::vector<Status>>(arrive(&Joined::acked)));
  auto* op = new AsyncClaimOp(Done<std::vector<Lease>>(arrive(&Joined::claimed)),
                              std::move(request.queue), request.max, request.lease, *deadline);
  op->worker = std::move(request.worker);
  Submit(op);
}

void EngineImpl::ReleaseWaitingClaims() {
  answers_.Hurry();
  CallAsync<bool>(CoreFn<bool>([](Core& core) -> Result<bool> {
                    core.ReleaseParked("");
                    return true;
                  }),
                  [](Result<bool>) {});
}

Status EngineImpl::Ack(std::string_view id, uint64_t token) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  return CallStatus([id = std::string(id), token](Core& core) { return core.Ack(id, token); });
}

Result<CoreFn<std::vector<Status>>> EngineImpl::PrepareAckMany(std::vector<AckRequest> acks) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLeaseRefs(acks, "acks"));
  return CoreFn<std::vector<Status>>(
      [acks = std::move(acks)](Core& core) { return core.AckMany(acks); });
}

Result<std::vector<Status>> EngineImpl::AckMany(const std::vector<AckRequest>& acks) {
  return CallPrepared(PrepareAckMany(acks));
}

void EngineImpl::AckManyAsync(std::vector<AckRequest> acks, Done<std::vector<Status>> done) {
  CallAsync(PrepareAckMany(std::move(acks)), std::move(done));
}

Result<CoreFn<bool>> EngineImpl::PrepareFail(std::string_view id, uint64_t token,
                                             std::string_view error,
                                             std::optional<Duration> retry_after,
                                             std::string response) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  CHRONOQ_RETURN_IF_ERROR(ValidateRetryIn(retry_after));
  return CoreFn<bool>([id = std::string(id), token, error = std::string(error), retry_after,
                       response = std::move(response)](Core& core) -> Result<bool> {
    CHRONOQ_RETURN_IF_ERROR(core.Fail(id, token, error, retry_after, response));
    return true;
  });
}

Status EngineImpl::Fail(std::string_view id, uint64_t token, std::string_view error,
                        std::optional<Duration> retry_after) {
  return CallPrepared(PrepareFail(id, token, error, retry_after, "")).status();
}

void EngineImpl::FailAsync(std::string id, uint64_t token, std::string error,
                           std::optional<Duration> retry_after, std::string response,
                           DoneStatus done) {
  CallAsync(PrepareFail(id, token, error, retry_after, std::move(response)),
            Done<bool>([done = std::move(done)](Result<bool> r) { done(r.status()); }));
}

Result<std::vector<Status>> EngineImpl::ExtendMany(const std::vector<AckRequest>& leases,
                                                   Duration lease) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLeaseRefs(leases, "leases"));
  CHRONOQ_RETURN_IF_ERROR(ValidateLease(lease));
  return Call<std::vector<Status>>([&](Core& core) -> Result<std::vector<Status>> {
    std::vector<Status> out;
    out.reserve(leases.size());
    for (const AckRequest& l : leases) out.push_back(core.Extend(l.id, l.token, lease).status());
    return out;
  });
}

Result<CoreFn<Timestamp>> EngineImpl::PrepareExtend(std::string_view id, uint64_t token,
                                                    Duration lease) {
  CHRONOQ_RETURN_IF_ERROR(ValidateTaskRef(id));
  CHRONOQ_RETURN_IF_ERROR(ValidateLease(lease));
  return CoreFn<Timestamp>(
      [id = std::string(id), token, lease](Core& core) { return core.Extend(id, token, lease); });
}

Result<Timestamp> EngineImpl::Extend(std::string_view id, uint64_t token, Duration lease) {
  return CallPrepared(PrepareExtend(id, token, lease));
}

void EngineImpl::ExtendAsync(std::string id, uint64_t token, Duration lease, Done<Timestamp> done) {
  CallAsync(PrepareExtend(id, token, lease), std::move(done));
}

// --- queues -------------------------------------------------------------------------

Result<std::vector<QueueInfo>> EngineImpl::ListQueues() {
  return Call<std::vector<QueueInfo>>(
      [](Core& core) -> Result<std::vector<QueueInfo>> { return core.ListQueues(); });
}

Result<QueueInfo> EngineImpl::GetQueue(std::string_view queue) {
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  return Call<QueueInfo>([name = std::string(queue)](Core& core) { return core.GetQueue(name); });
}

Result<QueueInfo> EngineImpl::ConfigureQueue(std::string_view queue, const QueueSettings& settings,
                                             const std::vector<QueueSetting>& reset) {
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueSettings(settings, reset));
  return Call<QueueInfo>([name = std::string(queue), settings, reset](Core& core) {
    return core.ConfigureQueue(name, settings, reset);
  });
}

Result<QueueInfo> EngineImpl::PauseQueue(std::string_view queue, bool paused) {
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  return Call<QueueInfo>(
      [name = std::string(queue), paused](Core& core) { return core.PauseQueue(name, paused); });
}

// --- in-process workers --------------------------------------------------------------

Status EngineImpl::RegisterHandler(std::string_view queue, HandlerOptions options,
                                   Handler handler) {
  if (!handler) return Status::InvalidArgument("handler", "must not be empty");
  return RegisterBatchHandler(
      queue, options, [handler = std::move(handler)](std::span<const Lease> leases) {
        std::vector<Status> out;
        out.reserve(leases.size());
        for (const Lease& l : leases) {
          try {
            out.push_back(handler(l));
          } catch (const std::exception& e) {
            out.emplace_back(StatusCode::kAborted, std::string("exception: ") + e.what());
          } catch (...) {
            out.emplace_back(StatusCode::kAborted, "exception of unknown type");
          }
        }
        return out;
      });
}

Status EngineImpl::RegisterBatchHandler(std::string_view queue, HandlerOptions options,
                                        BatchHandler handler) {
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  if (!handler) return Status::InvalidArgument("handler", "must not be empty");
  CHRONOQ_RETURN_IF_ERROR(
      ValidateLimit(options.concurrency, kMaxHandlerConcurrency, "concurrency"));
  CHRONOQ_RETURN_IF_ERROR(ValidateLimit(options.batch_size, kMaxClaimBatch, "batch_size"));
  CHRONOQ_RETURN_IF_ERROR(ValidateLease(options.lease, "lease"));
  MutexLock lock(pools_mu_);
  const std::string name(queue);
  if (pools_.contains(name)) {
    return Status::AlreadyExists("queue " + name + " already has a handler");
  }
  auto pool = std::make_unique<WorkerPool>(
      *this, clock_, name, options, std::move(handler),
      [this, name, options](const std::atomic<bool>& stop) {
        return ClaimWaiting(name, options.batch_size, options.lease, kMaxClaimWait, &stop);
      });
  pool->Start();
  pools_.emplace(name, std::move(pool));
  return {};
}

}  // namespace chronoq

// --- schedules ------------------------------------------------------------------
namespace chronoq {

Result<Schedule> EngineImpl::SaveSchedule(const ScheduleSpec& spec, bool replace) {
  CHRONOQ_ASSIGN_OR_RETURN(ScheduleSpec valid, ValidateScheduleSpec(spec, clock_.Now()));
  return Call<Schedule>([valid = std::move(valid), replace](Core& core) {
    return core.SaveSchedule(valid, replace);
  });
}

Result<Schedule> EngineImpl::CreateSchedule(const ScheduleSpec& spec) {
  return SaveSchedule(spec, /*replace=*/false);
}

Result<Schedule> EngineImpl::PutSchedule(const ScheduleSpec& spec) {
  return SaveSchedule(spec, /*replace=*/true);
}

Result<Schedule> EngineImpl::GetSchedule(std::string_view name) {
  CHRONOQ_RETURN_IF_ERROR(ValidateScheduleName(name));
  return Call<Schedule>([name = std::string(name)](Core& core) { return core.GetSchedule(name); });
}

Result<SchedulePage> EngineImpl::ListSchedules(const ListSchedulesRequest& request) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLimit(request.limit, kMaxListLimit, "limit"));
  if (request.queue) CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(*request.queue));
  return Call<SchedulePage>([request](Core& core) { return core.ListSchedules(request); });
}

Status EngineImpl::DeleteSchedule(std::string_view name) {
  CHRONOQ_RETURN_IF_ERROR(ValidateScheduleName(name));
  return CallStatus([name = std::string(name)](Core& core) { return core.DeleteSchedule(name); });
}

Result<Schedule> EngineImpl::PauseSchedule(std::string_view name, bool paused) {
  CHRONOQ_RETURN_IF_ERROR(ValidateScheduleName(name));
  return Call<Schedule>(
      [name = std::string(name), paused](Core& core) { return core.PauseSchedule(name, paused); });
}

Result<std::vector<Timestamp>> EngineImpl::NextOccurrences(std::string_view name, int count) {
  CHRONOQ_RETURN_IF_ERROR(ValidateScheduleName(name));
  CHRONOQ_RETURN_IF_ERROR(ValidateLimit(count, kMaxNextCount, "count"));
  return Call<std::vector<Timestamp>>(
      [name = std::string(name), count](Core& core) { return core.NextOccurrences(name, count); });
}

}  // namespace chronoq

// --- keyed locks -------------------------------------------------------------------
namespace chronoq {
namespace {

using BlockingLockOp = BlockingOp<LockOp>;
using AsyncLockOp = AsyncOp<LockOp, LockGrant>;

}  // namespace

Result<LockGrant> EngineImpl::AcquireLock(std::string_view key, const LockRequest& request) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLockRequest(key, request));
  BlockingLockOp op(std::string(key), request, clock_.Now() + request.wait);
  Submit(&op);
  return op.Wait();
}

void EngineImpl::AcquireLockAsync(std::string key, LockRequest request, Done<LockGrant> done) {
  if (Status s = ValidateLockRequest(key, request); !s.ok()) return done(s);
  const Timestamp deadline = clock_.Now() + request.wait;
  Submit(new AsyncLockOp(std::move(done), std::move(key), std::move(request), deadline));
}

Result<CoreFn<bool>> EngineImpl::PrepareReleaseLock(std::string_view key, uint64_t token) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLockKey(key));
  return CoreFn<bool>([key = std::string(key), token](Core& core) -> Result<bool> {
    CHRONOQ_RETURN_IF_ERROR(core.ReleaseLock(key, token));
    return true;
  });
}

Result<CoreFn<LockGrant>> EngineImpl::PrepareExtendLock(std::string_view key, uint64_t token,
                                                        Duration lease) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLockKey(key));
  CHRONOQ_RETURN_IF_ERROR(ValidateLease(lease));
  return CoreFn<LockGrant>([key = std::string(key), token, lease](Core& core) {
    return core.ExtendLock(key, token, lease);
  });
}

Status EngineImpl::ReleaseLock(std::string_view key, uint64_t token) {
  return CallPrepared(PrepareReleaseLock(key, token)).status();
}

void EngineImpl::ReleaseLockAsync(std::string key, uint64_t token, DoneStatus done) {
  CallAsync(PrepareReleaseLock(key, token),
            Done<bool>([done = std::move(done)](Result<bool> r) { done(r.status()); }));
}

Result<LockGrant> EngineImpl::ExtendLock(std::string_view key, uint64_t token, Duration lease) {
  return CallPrepared(PrepareExtendLock(key, token, lease));
}

void EngineImpl::ExtendLockAsync(std::string key, uint64_t token, Duration lease,
                                 Done<LockGrant> done) {
  CallAsync(PrepareExtendLock(key, token, lease), std::move(done));
}

Result<std::vector<LockInfo>> EngineImpl::ListLocks(std::string_view after, int limit) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLimit(limit, kMaxListLimit, "limit"));
  return Call<std::vector<LockInfo>>(
      [after = std::string(after), limit](Core& core) -> Result<std::vector<LockInfo>> {
        return core.ListLocks(after, limit);
      });
}

Result<LockInfo> EngineImpl::GetLock(std::string_view key) {
  CHRONOQ_RETURN_IF_ERROR(ValidateLockKey(key));
  return Call<LockInfo>(
      [key = std::string(key)](Core& core) -> Result<LockInfo> { return core.GetLock(key); });
}

}  // namespace chronoq
