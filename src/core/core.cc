#include "core/core.h"

#include <algorithm>
#include <limits>

#include <spdlog/spdlog.h>

#include "codec/json_codec.h"
#include "common/check.h"
#include "core/backoff.h"
#include "core/validate.h"

namespace chronoq {
namespace {

// Purges run at most this often, so a steady stream of finishing tasks does not
// wake the loop once per task.
constexpr Duration kPurgeInterval = std::chrono::seconds(1);

bool Unfinished(TaskState s) { return s == TaskState::kScheduled || s == TaskState::kRunning; }

// The lease table's view of a running row.
RunningTask RunningFromRow(const TaskRow& row) {
  RunningTask t{row.seq,
                row.qid,
                row.name.value_or(FormatGeneratedId(row.seq)),
                row.token.value_or(0),
                row.due.value_or(Timestamp()),
                row.attempt,
                row.max_attempts,
                row.priority,
                std::nullopt,
                row.sid.value_or(0),
                row.key.value_or("")};
  if (row.backoff_base && row.backoff_cap) t.backoff = Backoff{*row.backoff_base, *row.backoff_cap};
  // Rows claimed before schema 11 have no claim time: their last update (the
  // claim or an extension) stands in.
  t.claimed_at = row.claimed.value_or(row.updated.value_or(Timestamp()));
  t.worker = row.worker.value_or("");
  t.node = row.node.value_or("");
  return t;
}

Status WrongState(const std::string& id, TaskState state, std::string_view wanted) {
  return Status::FailedPrecondition(
      "task " + id + " is " + std::string(TaskStateName(state)) + ", not " + std::string(wanted),
      "id");
}

}  // namespace

std::optional<WebhookTarget> StoredTarget(const std::string& json) {
  Result<WebhookTarget> target = DecodeTarget(json);
  if (target.ok()) return std::move(*target);
  // The task is shown (and delivered) without its target rather than not at
  // all; the delivery then fails it with "no target".
  spdlog::warn("{}", target.status().message());
  return std::nullopt;
}

Timestamp RunAtOf(const TaskRow& row) {
  // While scheduled, due is the run time; afterwards run_at keeps it.
  const Timestamp due = row.due.value_or(Timestamp());
  return row.state == TaskState::kScheduled ? due : row.run_at.value_or(due);
}

std::vector<TaskAttempt> StoredAttempts(const std::string& json) {
  Result<std::vector<TaskAttempt>> attempts = DecodeAttempts(json);
  if (attempts.ok()) return std::move(*attempts);
  // The task is shown without its history rather than not at all; its next
  // attempt starts a new one.
  spdlog::warn("{}", attempts.status().message());
  return {};
}

std::string AppendAttemptHistory(const std::string& history, const TaskAttempt& attempt, int keep) {
  if (keep <= 0) return {};
  std::string out = "[";
  if (history.empty()) {
    AppendStoredAttempt(out, attempt);
    out += ']';
    return out;
  }
  std::vector<std::string> records;
  for (const TaskAttempt& a : StoredAttempts(history)) {
    AppendStoredAttempt(records.emplace_back(), a);
  }
  AppendStoredAttempt(records.emplace_back(), attempt);
  size_t first = records.size() > static_cast<size_t>(keep) ? records.size() - keep : 0;
  size_t bytes = 1;  // "[" and "]", with a "," before every record but the first
  for (size_t i = first; i < records.size(); ++i) bytes += records[i].size() + 1;
  while (bytes > kMaxAttemptHistoryBytes && first + 1 < records.size()) {
    bytes -= records[first++].size() + 1;
  }
  for (size_t i = first; i < records.size(); ++i) {
    if (i > first) out += ',';
    out += records[i];
  }
  out += ']';
  return out;
}

Task TaskFromRow(const TaskRow& row, const std::string& queue, int attempt_history) {
  Task t;
  t.id = row.name.value_or(FormatGeneratedId(row.seq));
  t.queue = queue;
  t.state = row.state;
  t.payload = row.payload;
  const Timestamp due = row.due.value_or(Timestamp());
  t.run_at = RunAtOf(row);
  t.attempt = row.attempt;
  t.max_attempts = row.max_attempts;
  t.priority = row.priority;
  t.last_error = row.last_error;
  t.last_response = row.response;
  if (row.state == TaskState::kRunning) {
    t.lease_until = due;
    t.lease_token = row.token;
  }
  t.created_at = SeqCreatedAt(row.seq);
  t.updated_at = row.updated.value_or(t.created_at);
  if (row.target) t.target = StoredTarget(*row.target);
  t.key = row.key.value_or("");
  t.worker = row.worker.value_or("");
  if (attempt_history > 0) {
    if (row.attempts) t.attempts = StoredAttempts(*row.attempts);
    if (row.state == TaskState::kSucceeded && row.claimed && row.updated) {
      TaskAttempt& a = t.attempts.emplace_back();
      a.number = row.attempt;
      a.started_at = *row.claimed;
      a.ended_at = *row.updated;
      a.node = row.node.value_or("");
      a.worker = t.worker;
      a.outcome = AttemptOutcome::kSucceeded;
      if (row.response) a.response = TruncateUtf8(*row.response, kMaxAttemptExcerptBytes);
    }
    const size_t keep = static_cast<size_t>(attempt_history);
    if (t.attempts.size() > keep) {
      t.attempts.erase(t.attempts.begin(), t.attempts.end() - static_cast<ptrdiff_t>(keep));
    }
  }
  return t;
}

Task TaskFromRead(const Store::ReadRow& read, int attempt_history) {
  Task t = TaskFromRow(read.row, read.queue, attempt_history);
  t.schedule = read.schedule;
  return t;
}

bool ClaimOp::Run(Core& core) {
  result = core.Claim(queue, max, lease, worker);
  const bool cancelled = cancel != nullptr && cancel->load();
  if (result.ok() && result->empty() && deadline > Timestamp::min() && !cancelled) {
    core.Park(this);
    return false;
  }
  return true;
}

Core::Core(Store& store, Clock& clock, const EngineOptions& options)
    : store_(store),
      clock_(clock),
      options_(options),
      locks_(store, [this] { return next_token_++; }) {
  rng_.seed(options.random_seed != 0 ? options.random_seed : std::random_device{}());
}

Status Core::Recover() {
  CHRONOQ_ASSIGN_OR_RETURN(StoreMeta meta, store_.LoadMeta());
  seqs_ = SeqGenerator(meta.max_seq);
  next_token_ = token_ceiling_ = meta.next_token;
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<QueueRow> queues, store_.Queues());
  for (QueueRow& row : queues) {
    qids_[row.name] = row.qid;
    const int64_t qid = row.qid;
    static_cast<QueueRow&>(queues_[qid]) = std::move(row);
  }
  // Running rows: their leases continue; lapsed ones are redelivered by the
  // first TimedWork.
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<TaskRow> running, store_.LoadRunning());
  for (const TaskRow& row : running) {
    leases_.Add(RunningFromRow(row));
    if (row.key) ++keys_[{row.qid, *row.key}].in_flight;
  }
  CHRONOQ_RETURN_IF_ERROR(LoadKeys());
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<int64_t> first,
                           store_.NextScheduledBucket(DueBucket(Timestamp::min())));
  if (first) beyond_ = BucketStart(*first);
  CHRONOQ_ASSIGN_OR_RETURN(next_purge_, store_.NextPurgeDue());
  CHRONOQ_RETURN_IF_ERROR(locks_.Load());
  return Refill(clock_.Now());
}

Status Core::Reload() {
  window_.Clear();
  leases_.Clear();
  qids_.clear();
  queues_.clear();
  dirty_queues_.clear();
  cycle_stats_ = CycleStats();
  beyond_.reset();
  window_full_ = false;
  resume_seq_ = 0;
  queued_heads_.clear();
  keys_.clear();
  pending_.clear();
  cursor_saves_.clear();
  // Held locks come back from the store; waiters stay queued, and keys that
  // turn out free are handed to them by the next TimedWork.
  locks_.Forget();
  return Recover();
}

// --- helpers ---------------------------------------------------------------

Result<Core::QueueState*> Core::QueueOf(const std::string& name) {
  auto it = qids_.find(name);
  if (it != qids_.end()) return &queues_.at(it->second);
  // Recover() loaded every stored queue, so this one is new.
  CHRONOQ_ASSIGN_OR_RETURN(int64_t qid, store_.QueueId(name));
  // Cached before the commit; if the commit fails, Reload() drops the cache.
  qids_[name] = qid;
  QueueState& q = queues_[qid];
  q.qid = qid;
  q.name = name;
  return &q;
}

Core::QueueState* Core::QueueById(int64_t qid) {
  auto it = queues_.find(qid);
  return it == queues_.end() ? nullptr : &it->second;
}

const std::string& Core::QueueName(int64_t qid) const {
  static const std::string kUnknown = "?";
  auto it = queues_.find(qid);
  return it == queues_.end() ? kUnknown : it->second.name;
}

void Core::Count(QueueState& q, std::optional<TaskState> from, std::optional<TaskState> to,
                 int64_t n) {
  if (from) q.counts[static_cast<size_t>(*from)] -= n;
  if (to) q.counts[static_cast<size_t>(*to)] += n;
  if (!q.dirty) {
    q.dirty = true;
    dirty_queues_.push_back(q.qid);
  }
}

void Core::Count(int64_t qid, std::optional<TaskState> from, std::optional<TaskState> to,
                 int64_t n) {
  // Every row's queue is loaded or created before the row is touched.
  if (QueueState* q = QueueById(qid)) Count(*q, from, to, n);
}

int64_t Core::Room(const QueueState& q, Timestamp now) {
  if (q.paused) return 0;
  int64_t room = std::numeric_limits<int64_t>::max();
  if (q.settings.concurrency) {
    const int64_t running = q.counts[static_cast<size_t>(TaskState::kRunning)];
    room = std::max<int64_t>(0, *q.settings.concurrency - running);
  }
  if (q.settings.rate_limit) {
    // Claims still inside the sliding period (the deque is in time order).
    const auto in_period =
        std::upper_bound(q.claims.begin(), q.claims.end(), now - q.settings.rate_limit->period);
    const auto recent = static_cast<int64_t>(q.claims.end() - in_period);
    room = std::min<int64_t>(room, std::max<int64_t>(0, q.settings.rate_limit->count - recent));
  }
  return room;
}

bool Core::CanHandOut(int64_t qid, Timestamp now) const {
  auto it = queues_.find(qid);
  return it == queues_.end() || Room(it->second, now) > 0;
}

std::optional<Timestamp> Core::RateRoomAt(const QueueState& q, Timestamp now) {
  if (q.paused || !q.settings.rate_limit || q.claims.empty()) return std::nullopt;
  const RateLimit& limit = *q.settings.rate_limit;
  // Room comes back when the claim `count` places from the newest leaves
  // the period.
  if (static_cast<int64_t>(q.claims.size()) < limit.count) return std::nullopt;
  const Timestamp at = q.claims[q.claims.size() - static_cast<size_t>(limit.count)] + limit.period;
  return at > now ? std::optional<Timestamp>(at) : std::nullopt;
}

Timestamp Core::PurgeAt(int64_t qid, Timestamp now) const {
  auto it = queues_.find(qid);
  if (it != queues_.end() && it->second.settings.retention) {
    return now + *it->second.settings.retention;
  }
  return now + options_.retention;
}

QueueInfo Core::Info(const QueueState& q, Timestamp now) const {
  QueueInfo info;
  info.name = q.name;
  info.counts = q.counts;
  info.paused = q.paused;
  info.webhooks = q.webhooks;
  info.settings = q.settings;
  // The window holds every scheduled task due before its horizon, so its
  // first entry of the queue is the queue's earliest due task, if any is due.
  if (std::optional<Timestamp> due = window_.EarliestDue(q.qid); due && *due <= now) {
    info.oldest_due_lateness = now - *due;
    info.due = static_cast<int64_t>(window_.CountDue(q.qid, now));
  }
  return info;
}

Result<std::optional<TaskRow>> Core::Find(const std::string& id) {
  if (auto seq = ParseGeneratedId(id)) return store_.FindBySeq(*seq);
  return store_.FindByName(id);
}

Result<TaskRow> Core::FindOrNotFound(const std::string& id) {
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<TaskRow> row, Find(id));
  if (!row.has_value()) return Status::NotFound("task " + id + " does not exist");
  return std::move(*row);
}

Task Core::ToTask(const TaskRow& row) const {
  return TaskFromRow(row, QueueName(row.qid), options_.attempt_history);
}

const RunningTask* Core::Leased(const std::string& id, uint64_t token) const {
  const RunningTask* task = leases_.FindById(id);
  return task != nullptr && task->token == token ? task : nullptr;
}

Status Core::NotFoundOrStale(const std::string& id, uint64_t token) {
  CHRONOQ_RETURN_IF_ERROR(FindOrNotFound(id).status());
  return Status(StatusCode::kFailedPrecondition,
                "token " + std::to_string(token) + " is stale: task " + id +
                    " is no longer leased with it (the lease lapsed, or it was acknowledged)",
                "token", StatusReason::kStaleToken);
}

bool Core::Loaded(Timestamp due) const {
  return window_.Covers(due) ||
         (resume_seq_ != 0 && DueBucket(due) == DueBucket(window_.horizon()));
}

void Core::AddToWindow(int64_t qid, const Window::Key& key) {
  if (Loaded(key.due)) {
    window_.Add(qid, key);
  } else if (!beyond_ || key.due < *beyond_) {
    beyond_ = key.due;
  }
}

Status Core::Place(int64_t qid, const std::optional<std::string>& key, bool started,
                   const Window::Key& at) {
  if (key && !started) return KeyedArrived(qid, *key, at);
  AddToWindow(qid, at);
  return {};
}

Status Core::Unschedule(const TaskRow& row, bool finished) {
  if (row.state != TaskState::kScheduled || !row.due) return {};
  if (WaitsToStart(row)) return KeyedLeft(row.qid, *row.key, row.seq);
  window_.Remove(row.qid, {*row.due, row.priority, row.seq});
  if (finished && row.key) return KeyReleased(row.qid, *row.key, clock_.Now());
  return {};
}

Status Core::Dropped(const TaskRow& row) {
  CHRONOQ_RETURN_IF_ERROR(Unschedule(row, /*finished=*/true));
  if (WaitsToStart(row)) NotePending(row.qid, *row.key, -1);
  return {};
}

void Core::NotePurge(Timestamp at) {
  if (!next_purge_ || at < *next_purge_) next_purge_ = at;
}

// --- producing ---------------------------------------------------------------

Result<std::vector<Task>> Core::Enqueue(std::vector<ValidTask> tasks, bool batch) {
  const Timestamp now = clock_.Now();
  // Window changes wait until every row is written, so a failed batch leaves
  // memory untouched as well as the store.
  struct Effect {
    std::optional<TaskRow> unschedule;
    // The queue and state of a row the new one replaced or deleted.
    std::optional<std::pair<int64_t, TaskState>> gone;
    QueueState* queue;
    int64_t seq;
    Timestamp due;
    int priority;
    bool target = false;  // the task has a webhook target
    std::optional<std::string> key;
  };
  std::vector<Effect> effects;
  // Queues this batch creates: rolling the batch back removes them from the
  // store, so memory must forget them too.
  std::vector<std::string> created;
  // Keys whose cached backlog counts this batch changed: a rolled-back batch
  // drops them (they are counted again from the store).
  std::vector<KeyId> admitted;
  std::vector<Task> out;
  out.reserve(tasks.size());
  if (batch) CHRONOQ_RETURN_IF_ERROR(store_.Savepoint());

  auto one = [&](size_t i, ValidTask& t) -> Status {
    if (batch && !qids_.contains(t.queue)) created.push_back(t.queue);
    CHRONOQ_ASSIGN_OR_RETURN(QueueState * queue, QueueOf(t.queue));
    const int64_t qid = queue->qid;
    // The queue's defaults, for what the spec left unset.
    if (t.max_attempts == 0) {
      t.max_attempts = queue->settings.max_attempts.value_or(options_.default_max_attempts);
    }
    if (!t.backoff) t.backoff = queue->settings.backoff;
    TaskRow row;
    row.seq = seqs_.Next(now);
    row.name = t.name;
    row.qid = qid;
    row.state = TaskState::kScheduled;
    row.due = t.due;
    row.priority = t.priority;
    row.max_attempts = t.max_attempts;
    row.payload = std::move(t.payload);
    if (t.backoff) {
      row.backoff_base = t.backoff->base;
      row.backoff_cap = t.backoff->cap;
    }
    row.target = std::move(t.target);
    row.sid = t.sid;
    row.key = t.key;
    const std::string prefix = batch ? "tasks[" + std::to_string(i) + "]." : "";
    // Counts the new task in its key's backlog, or refuses it. The count is
    // read from the store before anything is written.
    if (row.key && queue->settings.max_pending_per_key) {
      admitted.emplace_back(qid, *row.key);
      CHRONOQ_RETURN_IF_ERROR(CountPending(*queue, *row.key));
    }
    auto admit = [&]() -> Status {
      return row.key ? AdmitKeyed(*queue, *row.key, prefix + "key") : Status();
    };
    CHRONOQ_ASSIGN_OR_RETURN(bool inserted, store_.Insert(row));
    if (inserted) {
      if (Status s = admit(); !s.ok()) {
        // Writes nothing: the insert is undone.
        CHRONOQ_RETURN_IF_ERROR(store_.Delete(row.seq));
        return s;
      }
      effects.push_back({std::nullopt, std::nullopt, queue, row.seq, t.due, t.priority,
                         row.target.has_value(), row.key});
      out.push_back(ToTask(row));
      return {};
    }
    // The client-chosen id is taken.
    const std::string field = prefix + "id";
    CHRONOQ_ASSIGN_OR_RETURN(std::optional<TaskRow> existing, store_.FindByName(*t.name));
    if (!existing) return Status::Internal("id " + *t.name + " is taken but not found");
    if (Unfinished(existing->state)) {
      switch (t.on_conflict) {
        case OnConflict::kReject:
          return {StatusCode::kAlreadyExists,
                  "task " + *t.name + " already exists and is " +
                      std::string(TaskStateName(existing->state)),
                  field};
        case OnConflict::kIgnore:
          out.push_back(ToTask(*existing));
          out.back().existed = true;
          return {};
        case OnConflict::kReplace:
          if (existing->state == TaskState::kRunning) {
            return Status::FailedPrecondition("task " + *t.name + " is running; cannot replace",
                                              field);
          }
          // The replaced task keeps its seq (same task, new time and payload)
          // and its schedule, if it is an occurrence. It starts afresh: a
          // keyed one leaves its key's backlog (or place) and joins again.
          row.seq = existing->seq;
          if (!row.sid) row.sid = existing->sid;
          row.updated = now;
          // The same key's backlog is unchanged.
          if (!WaitsToStart(*existing) || existing->key != row.key || existing->qid != qid) {
            CHRONOQ_RETURN_IF_ERROR(admit());
            if (WaitsToStart(*existing)) NotePending(existing->qid, *existing->key, -1);
          }
          CHRONOQ_RETURN_IF_ERROR(store_.Overwrite(row));
          effects.push_back({existing, std::pair(existing->qid, existing->state), queue, row.seq,
                             t.due, t.priority, row.target.has_value(), row.key});
          out.push_back(ToTask(row));
          return {};
      }
    }
    // A finished task's id is free: the old row gives way to a new task.
    CHRONOQ_RETURN_IF_ERROR(admit());
    CHRONOQ_RETURN_IF_ERROR(store_.Delete(existing->seq));
    CHRONOQ_ASSIGN_OR_RETURN(inserted, store_.Insert(row));
    if (!inserted) return Status::Internal("id " + *t.name + " still taken after delete");
    effects.push_back({std::nullopt, std::pair(existing->qid, existing->state), queue, row.seq,
                       t.due, t.priority, row.target.has_value(), row.key});
    out.push_back(ToTask(row));
    return {};
  };

  for (size_t i = 0; i < tasks.size(); ++i) {
    Status s = one(i, tasks[i]);
    if (!s.ok()) {
      if (batch) {
        for (const KeyId& k : admitted) pending_.erase(k);
        store_.RollbackToSavepoint();
        for (const std::string& name : created) {
          auto it = qids_.find(name);
          if (it == qids_.end()) continue;
          queues_.erase(it->second);
          qids_.erase(it);
        }
      }
      return s;
    }
  }
  if (batch) CHRONOQ_RETURN_IF_ERROR(store_.ReleaseSavepoint());
  for (const Effect& e : effects) {
    if (e.target && !e.queue->webhooks) {
      // Durable, so chronoqd knows after a restart which queues it delivers.
      CHRONOQ_RETURN_IF_ERROR(store_.SaveQueueSettings(e.queue->qid, e.queue->settings,
                                                       e.queue->paused, /*webhooks=*/true));
      e.queue->webhooks = true;
    }
    if (e.unschedule) CHRONOQ_RETURN_IF_ERROR(Unschedule(*e.unschedule, /*finished=*/true));
    if (e.gone) Count(e.gone->first, e.gone->second, std::nullopt);
    Count(*e.queue, std::nullopt, TaskState::kScheduled);
    CHRONOQ_RETURN_IF_ERROR(
        Place(e.queue->qid, e.key, /*started=*/false, {e.due, e.priority, e.seq}));
  }
  cycle_stats_.enqueued += effects.size();
  return out;
}

// --- managing ---------------------------------------------------------------

bool ActionTakes(BulkAction action, TaskState state) {
  switch (action) {
    case BulkAction::kCancel:
    case BulkAction::kReschedule:
      return state == TaskState::kScheduled;
    case BulkAction::kRetry:
      return state == TaskState::kDead;
    case BulkAction::kDelete:
      return state != TaskState::kScheduled && state != TaskState::kRunning;
  }
  return false;
}

Result<Task> Core::Cancel(const std::string& id) {
  CHRONOQ_ASSIGN_OR_RETURN(TaskRow row, FindOrNotFound(id));
  if (!ActionTakes(BulkAction::kCancel, row.state)) return WrongState(id, row.state, "scheduled");
  CHRONOQ_RETURN_IF_ERROR(CancelRow(row, clock_.Now()));
  return ToTask(row);
}

Status Core::CancelRow(TaskRow& row, Timestamp now) {
  const Timestamp purge_at = PurgeAt(row.qid, now);
  CHRONOQ_RETURN_IF_ERROR(store_.Move({row.seq, TaskState::kCancelled, purge_at, {}, {}, now}));
  CHRONOQ_RETURN_IF_ERROR(Dropped(row));
  Count(row.qid, TaskState::kScheduled, TaskState::kCancelled);
  NotePurge(purge_at);
  row.run_at = row.due;
  row.state = TaskState::kCancelled;
  row.due = purge_at;
  row.updated = now;
  if (row.sid) {
    const std::string id = row.name.value_or(FormatGeneratedId(row.seq));
    CHRONOQ_RETURN_IF_ERROR(
        OccurrenceFinished(*row.sid, row.seq, id, TaskState::kCancelled, std::nullopt, now));
  }
  return {};
}

Result<Task> Core::Reschedule(const std::string& id, Timestamp run_at,
                              const std::optional<std::string>& payload) {
  CHRONOQ_ASSIGN_OR_RETURN(TaskRow row, FindOrNotFound(id));
  if (!ActionTakes(BulkAction::kReschedule, row.state)) {
    return WrongState(id, row.state, "scheduled");
  }
  CHRONOQ_RETURN_IF_ERROR(RescheduleRow(row, run_at, payload, clock_.Now()));
  return ToTask(row);
}

Status Core::RescheduleRow(TaskRow& row, Timestamp run_at,
                           const std::optional<std::string>& payload, Timestamp now) {
  CHRONOQ_RETURN_IF_ERROR(
      store_.Move({row.seq, TaskState::kScheduled, run_at, {}, {}, now, row.key.has_value()}));
  if (payload) CHRONOQ_RETURN_IF_ERROR(store_.SetPayload(row.seq, *payload));
  CHRONOQ_RETURN_IF_ERROR(Unschedule(row, /*finished=*/false));
  CHRONOQ_RETURN_IF_ERROR(
      Place(row.qid, row.key, row.attempt > 0, {run_at, row.priority, row.seq}));
  row.due = run_at;
  row.updated = now;
  if (payload) row.payload = *payload;
  return {};
}

Result<Task> Core::Retry(const std::string& id) {
  CHRONOQ_ASSIGN_OR_RETURN(TaskRow row, FindOrNotFound(id));
  if (!ActionTakes(BulkAction::kRetry, row.state)) return WrongState(id, row.state, "dead");
  CHRONOQ_RETURN_IF_ERROR(RetryRow(row, clock_.Now()));
  return ToTask(row);
}

Status Core::RetryRow(TaskRow& row, Timestamp now) {
  CHRONOQ_RETURN_IF_ERROR(
      store_.Move({row.seq, TaskState::kScheduled, now, {}, 0, now, row.key.has_value()}));
  // It starts afresh: a keyed task joins the back of its key's line (by its
  // new due) and is not refused by max_pending_per_key.
  CHRONOQ_RETURN_IF_ERROR(Place(row.qid, row.key, /*started=*/false, {now, row.priority, row.seq}));
  if (row.key) NotePending(row.qid, *row.key, 1);
  Count(row.qid, TaskState::kDead, TaskState::kScheduled);
  row.state = TaskState::kScheduled;
  row.due = now;
  row.run_at.reset();
  row.attempt = 0;
  row.updated = now;
  return {};
}

Result<Task> Core::Purge(const std::string& id) {
  CHRONOQ_ASSIGN_OR_RETURN(TaskRow row, FindOrNotFound(id));
  if (!ActionTakes(BulkAction::kDelete, row.state)) {
    return WrongState(id, row.state, "finished (succeeded, cancelled or dead)");
  }
  CHRONOQ_RETURN_IF_ERROR(PurgeRow(row));
  return ToTask(row);
}

Status Core::PurgeRow(const TaskRow& row) {
  // A finished task is in no window, key line or lease table; a schedule
  // whose newest occurrence it was finds it gone, as after its retention.
  CHRONOQ_RETURN_IF_ERROR(store_.Delete(row.seq));
  Count(row.qid, row.state, std::nullopt);
  return {};
}

// --- consuming --------------------------------------------------------------

Result<std::vector<Lease>> Core::Claim(const std::string& queue, int max, Duration lease,
                                       const std::string& worker, Timestamp at) {
  const Timestamp now = std::max(clock_.Now(), at);
  CHRONOQ_ASSIGN_OR_RETURN(QueueState * q, QueueOf(queue));
  const int64_t qid = q->qid;
  // A paused queue, or one at its concurrency, hands out nothing: the claim
  // behaves as if nothing were due (and waits, if it may).
  const int64_t room = std::min<int64_t>(max, Room(*q, now));
  std::vector<Window::Key> keys;
  std::vector<Keys::iterator> heads;  // of keys whose head this claim took
  std::vector<bool> took_head;        // per entry of `keys`
  // When a statement fails the rows are still scheduled; so must the tasks
  // in memory be, or nobody would claim them until the next restart. Keys'
  // heads go back through their keys.
  auto restore = [&](Status failed) -> Status {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!took_head[i]) window_.Add(qid, keys[i]);
    }
    CHRONOQ_RETURN_IF_ERROR(UntakeHeads(heads));
    return failed;
  };
  std::vector<Keys::iterator> read_later;  // full keys whose next head must be read
  while (static_cast<int64_t>(keys.size()) < room) {
    std::optional<Window::Key> key = window_.PopDue(qid, now);
    if (!key) break;
    Result<std::optional<Keys::iterator>> head = TakeHead(*key, now, &read_later);
    if (!head.ok()) return restore(head.status());  // TakeHead put its own entry back
    keys.push_back(*key);
    took_head.push_back(head->has_value());
    if (*head) heads.push_back(**head);
  }
  if (keys.empty()) return std::vector<Lease>();
  // Still before the claim's statement, as TakeHead's own reads.
  if (!read_later.empty()) {
    if (Status s = RefetchHeads(read_later, now); !s.ok()) return restore(s);
  }
  // One token for the whole claim: it still only grows, and each task's
  // current holder is told apart from any earlier one (see lease_table.h).
  const uint64_t token = next_token_++;
  const Timestamp until = now + lease;
  std::vector<int64_t> seqs;
  seqs.reserve(keys.size());
  for (const Window::Key& k : keys) seqs.push_back(k.seq);
  Result<std::vector<TaskRow>> claimed =
      store_.MarkRunningMany(seqs, until, token, now, worker, options_.node);
  if (!claimed.ok()) return restore(claimed.status());
  std::vector<TaskRow>& rows = *claimed;
  // The rows come back in seq order; leases go out in due order. The window
  // only holds scheduled rows, so a row missing here would be a bug; skipping
  // it is safe (the store is the truth).
  std::unordered_map<int64_t, TaskRow*> by_seq;
  for (TaskRow& row : rows) by_seq.emplace(row.seq, &row);
  std::vector<Lease> out;
  out.reserve(rows.size());
  for (const Window::Key& k : keys) {
    auto it = by_seq.find(k.seq);
    if (it == by_seq.end()) continue;
    TaskRow& row = *it->second;
    RunningTask running = RunningFromRow(row);
    running.claimed_at = now;  // the read-back leaves the attempt columns out
    running.node = options_.node;
    // A key's head sat in the window at its turn, not its due.
    const Timestamp run_at = row.run_at.value_or(k.due);
    out.push_back(Lease{running.id, queue, std::move(row.payload), run_at, row.attempt,
                        row.max_attempts, token, until});
    if (row.target) out.back().target = StoredTarget(*row.target);
    out.back().key = running.key;
    out.back().seq = running.seq;
    if (row.sid) {
      out.back().occurrence = OccurrenceInstant(running.id);
      if (out.back().occurrence) out.back().schedule = running.id.substr(0, running.id.rfind('@'));
    }
    leases_.Add(std::move(running));
    const double late = std::chrono::duration<double>(now - run_at).count();
    ++cycle_stats_.lateness[BucketOf(kLatenessBounds, late)];
    cycle_stats_.lateness_sum += late;
  }
  Count(*q, TaskState::kScheduled, TaskState::kRunning, static_cast<int64_t>(out.size()));
  if (q->settings.rate_limit) {
    q->claims.insert(q->claims.end(), out.size(), now);
    const auto keep = static_cast<size_t>(q->settings.rate_limit->count);
    if (q->claims.size() > keep) q->claims.erase(q->claims.begin(), q->claims.end() - keep);
  }
  for (const TaskRow& row : rows) {
    if (row.sid) CHRONOQ_RETURN_IF_ERROR(OccurrenceClaimed(*row.sid, row.seq, now));
  }
  return out;
}

Status Core::Ack(const std::string& id, uint64_t token) {
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<Status> one, AckMany({{id, token}}));
  return one.front();
}

Result<std::vector<Status>> Core::AckMany(const std::vector<AckRequest>& acks) {
  const Timestamp now = clock_.Now();
  std::vector<Status> out;
  out.reserve(acks.size());
  std::vector<int64_t> seqs;
  std::vector<int64_t> qids;
  // Acknowledged occurrences of schedules, which their schedules hear of.
  struct Occurrence {
    int64_t sid;
    int64_t seq;
    const std::string* id;
  };
  std::vector<Occurrence> occurrences;
  std::vector<KeyId> released;  // the keys of acknowledged keyed tasks
  // Retried tasks acknowledged without a response: their row may still hold
  // an earlier attempt's, which their last attempt (read from the row) must
  // not show.
  std::vector<int64_t> stale_responses;
  for (const AckRequest& a : acks) {
    const RunningTask* task = Leased(a.id, a.token);
    // A task acknowledged earlier in this batch is already in `seqs`.
    if (task == nullptr || std::find(seqs.begin(), seqs.end(), task->seq) != seqs.end()) {
      out.push_back(NotFoundOrStale(a.id, a.token));
      continue;
    }
    if (a.failure) {
      // Leased, so only the store can fail it (which fails the whole batch);
      // it gives up the lease, so a later entry for the task is stale.
      CHRONOQ_RETURN_IF_ERROR(Fail(a.id, a.token, *a.failure, a.response));
      out.emplace_back();
      continue;
    }
    seqs.push_back(task->seq);
    qids.push_back(task->qid);
    if (a.response.empty() && task->attempt > 1) stale_responses.push_back(task->seq);
    if (task->sid != 0) occurrences.push_back({task->sid, task->seq, &a.id});
    if (!task->key.empty()) released.emplace_back(task->qid, task->key);
    out.emplace_back();
  }
  if (seqs.empty()) return out;
  // Purge times follow each queue's retention: one batch of statements per
  // distinct purge time, and there is one when all tasks share a queue.
  std::vector<std::pair<Timestamp, std::vector<int64_t>>> by_purge;
  Timestamp purge_at;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (i == 0 || qids[i] != qids[i - 1]) purge_at = PurgeAt(qids[i], now);
    auto group = std::find_if(by_purge.begin(), by_purge.end(),
                              [&](const auto& g) { return g.first == purge_at; });
    if (group == by_purge.end()) {
      group = by_purge.emplace(by_purge.end(), purge_at, std::vector<int64_t>());
    }
    group->second.push_back(seqs[i]);
  }
  for (const auto& [at, group] : by_purge) {
    CHRONOQ_RETURN_IF_ERROR(store_.MarkSucceeded(group, at, now));
  }
  for (int64_t seq : stale_responses) {
    CHRONOQ_RETURN_IF_ERROR(store_.SetResponse(seq, std::nullopt));
  }
  for (size_t i = 0, k = 0; i < acks.size(); ++i) {
    if (!out[i].ok() || acks[i].failure) continue;
    if (!acks[i].response.empty()) {
      CHRONOQ_RETURN_IF_ERROR(
          store_.SetResponse(seqs[k], TruncateUtf8(acks[i].response, kMaxErrorBytes)));
    }
    ++k;
  }
  for (const Occurrence& o : occurrences) {
    CHRONOQ_RETURN_IF_ERROR(
        OccurrenceFinished(o.sid, o.seq, *o.id, TaskState::kSucceeded, std::nullopt, now));
  }
  for (int64_t seq : seqs) leases_.Remove(seq);
  for (const KeyId& k : released) CHRONOQ_RETURN_IF_ERROR(KeyReleased(k.first, k.second, now));
  // One count update per run of tasks of the same queue (usually one run).
  for (size_t i = 0, j = 0; i < qids.size(); i = j) {
    while (j < qids.size() && qids[j] == qids[i]) ++j;
    Count(qids[i], TaskState::kRunning, TaskState::kSucceeded, static_cast<int64_t>(j - i));
  }
  for (const auto& group : by_purge) NotePurge(group.first);
  cycle_stats_.acked += seqs.size();
  return out;
}

Result<std::string> Core::EndAttempt(const RunningTask& task, AttemptOutcome outcome,
                                     std::string_view error, std::string_view response,
                                     Timestamp now) {
  if (options_.attempt_history == 0) return std::string();
  TaskAttempt a;
  a.number = task.attempt;
  a.started_at = task.claimed_at;
  a.ended_at = now;
  a.node = task.node;  // empty: the claimer had no name (or claimed before schema 11)
  a.worker = task.worker;
  a.outcome = outcome;
  a.error = TruncateUtf8(error, kMaxAttemptExcerptBytes);
  a.response = TruncateUtf8(response, kMaxAttemptExcerptBytes);
  // The history so far is read only now, on this path of failures and lapses,
  // so that claims need not carry it.
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<TaskRow> row, store_.FindBySeq(task.seq));
  const std::string history = row && row->attempts ? *row->attempts : std::string();
  return AppendAttemptHistory(history, a, options_.attempt_history);
}

Status Core::RetryOrBury(const RunningTask& task, Timestamp due, const std::string& error,
                         AttemptOutcome outcome, std::string_view response, Timestamp now,
                         bool bury) {
  CHRONOQ_ASSIGN_OR_RETURN(std::string history, EndAttempt(task, outcome, error, response, now));
  if (bury || task.attempt >= task.max_attempts) {
    CHRONOQ_RETURN_IF_ERROR(store_.Move(
        {task.seq, TaskState::kDead, std::nullopt, error, {}, now, false, std::move(history)}));
    Count(task.qid, TaskState::kRunning, TaskState::kDead);
    ++cycle_stats_.dead;
    if (task.sid != 0) {
      CHRONOQ_RETURN_IF_ERROR(
          OccurrenceFinished(task.sid, task.seq, task.id, TaskState::kDead, error, now));
    }
    if (!task.key.empty()) CHRONOQ_RETURN_IF_ERROR(KeyReleased(task.qid, task.key, now));
  } else {
    // A retry keeps its key's place: it waits in the window like any task.
    CHRONOQ_RETURN_IF_ERROR(store_.Move(
        {task.seq, TaskState::kScheduled, due, error, {}, now, false, std::move(history)}));
    AddToWindow(task.qid, {due, task.priority, task.seq});
    Count(task.qid, TaskState::kRunning, TaskState::kScheduled);
  }
  ++cycle_stats_.failed;
  leases_.Remove(task.seq);
  return {};
}

Status Core::CancelRunning(const RunningTask& task, const std::string& error,
                           std::string_view response, Timestamp now) {
  const Timestamp purge_at = PurgeAt(task.qid, now);
  CHRONOQ_ASSIGN_OR_RETURN(std::string history,
                           EndAttempt(task, AttemptOutcome::kFailed, error, response, now));
  CHRONOQ_RETURN_IF_ERROR(store_.Move(
      {task.seq, TaskState::kCancelled, purge_at, error, {}, now, false, std::move(history)}));
  Count(task.qid, TaskState::kRunning, TaskState::kCancelled);
  NotePurge(purge_at);
  if (task.sid != 0) {
    CHRONOQ_RETURN_IF_ERROR(
        OccurrenceFinished(task.sid, task.seq, task.id, TaskState::kCancelled, error, now));
  }
  if (!task.key.empty()) CHRONOQ_RETURN_IF_ERROR(KeyReleased(task.qid, task.key, now));
  leases_.Remove(task.seq);
  return {};
}

Status Core::Fail(const std::string& id, uint64_t token, const std::string& error,
                  std::optional<Duration> retry_after, const std::string& response) {
  return Fail(id, token, AckFailure{.error = error, .retry_after = retry_after}, response);
}

Status Core::Fail(const std::string& id, uint64_t token, const AckFailure& failure,
                  const std::string& response) {
  const RunningTask* task = Leased(id, token);
  if (task == nullptr) return NotFoundOrStale(id, token);
  if (!response.empty()) {
    CHRONOQ_RETURN_IF_ERROR(store_.SetResponse(task->seq, TruncateUtf8(response, kMaxErrorBytes)));
  }
  const Timestamp now = clock_.Now();
  const RunningTask copy = *task;
  const std::string error = TruncateUtf8(failure.error, kMaxErrorBytes);
  if (failure.cancel) return CancelRunning(copy, error, response, now);
  bool bury = false;
  if (const QueueState* q = QueueById(copy.qid); q != nullptr && failure.http_status) {
    const std::optional<std::vector<int>>& final = q->settings.final_statuses;
    bury = final && std::binary_search(final->begin(), final->end(), *failure.http_status);
  }
  const Duration delay = failure.retry_after.value_or(
      BackoffDelay(copy.backoff.value_or(options_.default_backoff), copy.attempt, rng_));
  return RetryOrBury(copy, now + delay, error, AttemptOutcome::kFailed, response, now, bury);
}

Result<Timestamp> Core::Extend(const std::string& id, uint64_t token, Duration lease) {
  const RunningTask* task = Leased(id, token);
  if (task == nullptr) return NotFoundOrStale(id, token);
  const Timestamp now = clock_.Now();
  const Timestamp until = now + lease;
  CHRONOQ_RETURN_IF_ERROR(store_.SetDue(task->seq, until, now));
  leases_.Extend(task->seq, until);
  return until;
}

// --- queues -------------------------------------------------------------------

std::vector<QueueInfo> Core::ListQueues() const {
  const Timestamp now = clock_.Now();
  std::vector<QueueInfo> out;
  out.reserve(queues_.size());
  for (const auto& [qid, q] : queues_) out.push_back(Info(q, now));
  std::sort(out.begin(), out.end(),
            [](const QueueInfo& a, const QueueInfo& b) { return a.name < b.name; });
  return out;
}

Result<QueueInfo> Core::GetQueue(const std::string& name) const {
  auto it = qids_.find(name);
  if (it == qids_.end()) return Status::NotFound("queue " + name + " does not exist");
  return Info(queues_.at(it->second), clock_.Now());
}

Result<QueueInfo> Core::ConfigureQueue(const std::string& name, const QueueSettings& settings,
                                       const std::vector<QueueSetting>& reset) {
  CHRONOQ_ASSIGN_OR_RETURN(QueueState * q, QueueOf(name));
  QueueSettings merged = q->settings;
  for (QueueSetting field : reset) {
    WithQueueSetting(merged, field, [](auto& value) { value.reset(); });
  }
  if (settings.concurrency) merged.concurrency = settings.concurrency;
  if (settings.max_attempts) merged.max_attempts = settings.max_attempts;
  if (settings.backoff) merged.backoff = settings.backoff;
  if (settings.retention) merged.retention = settings.retention;
  if (settings.rate_limit) merged.rate_limit = settings.rate_limit;
  if (settings.max_in_flight_per_key) merged.max_in_flight_per_key = settings.max_in_flight_per_key;
  if (settings.max_pending_per_key) merged.max_pending_per_key = settings.max_pending_per_key;
  if (settings.final_statuses) {
    merged.final_statuses = settings.final_statuses;
    std::sort(merged.final_statuses->begin(), merged.final_statuses->end());
  }
  CHRONOQ_RETURN_IF_ERROR(store_.SaveQueueSettings(q->qid, merged, q->paused, q->webhooks));
  // Memory follows before the commit; if it fails, Reload() restores both.
  // Claims waiting on a queue whose limit went up are served by TimedWork,
  // which runs after the ops of the cycle.
  const bool per_key_changed = merged.max_in_flight_per_key != q->settings.max_in_flight_per_key;
  q->settings = merged;
  if (per_key_changed) ReofferKeys(q->qid, clock_.Now());
  return Info(*q, clock_.Now());
}

Result<QueueInfo> Core::PauseQueue(const std::string& name, bool paused) {
  CHRONOQ_ASSIGN_OR_RETURN(QueueState * q, QueueOf(name));
  if (q->paused != paused) {
    CHRONOQ_RETURN_IF_ERROR(store_.SaveQueueSettings(q->qid, q->settings, paused, q->webhooks));
    q->paused = paused;
  }
  return Info(*q, clock_.Now());
}

// --- parked claims ------------------------------------------------------------

void Core::Park(ClaimOp* op) {
  const auto queue = qids_.find(op->queue);
  CHRONOQ_CHECK(queue != qids_.end(), "a claim that parks has found its queue (Claim() succeeded)");
  op->qid_ = queue->second;
  auto& list = parked_[op->qid_];
  op->parked_at_ = list.insert(list.end(), op);
  parked_deadlines_.emplace(op->deadline, op);
}

void Core::ReleaseParked(const std::string& queue) {
  if (queue.empty()) locks_.AnswerAllWaiters(Status::Unavailable("the engine is stopping"));
  for (auto it = parked_deadlines_.begin(); it != parked_deadlines_.end();) {
    ClaimOp* op = it->second;
    if (!queue.empty() && op->queue != queue) {
      ++it;
      continue;
    }
    parked_[op->qid_].erase(op->parked_at_);
    it = parked_deadlines_.erase(it);
    released_.push_back(op);
  }
}

void Core::TakeWaitingClaims(std::vector<Op*>& out) {
  for (auto& [deadline, op] : parked_deadlines_) {
    parked_[op->qid_].erase(op->parked_at_);
    out.push_back(op);
  }
  parked_deadlines_.clear();
  out.insert(out.end(), released_.begin(), released_.end());
  released_.clear();
}

void Core::ServeParked(int64_t qid, std::vector<Op*>& finished) {
  auto it = parked_.find(qid);
  if (it == parked_.end()) return;
  std::list<ClaimOp*>& list = it->second;
  const Timestamp now = clock_.Now();
  while (!list.empty() && CanHandOut(qid, now)) {
    std::optional<Timestamp> due = window_.EarliestDue(qid);
    if (!due || *due > now + options_.claim_ahead) break;
    // Served ahead, a claim takes the tasks due at `at` and is answered then
    // (EngineImpl's AnswerTimer), but its commit is done now: a flush of the
    // disk that stalls for less than claim_ahead delays no task. The first
    // claim in line that still waits at `at` gets them.
    const Timestamp at = std::max(*due, now);
    auto op_at = list.begin();
    if (at > now) {
      op_at = std::find_if(list.begin(), list.end(),
                           [at](const ClaimOp* op) { return op->deadline >= at; });
      if (op_at == list.end()) break;
    }
    ClaimOp* op = *op_at;
    list.erase(op_at);
    parked_deadlines_.erase({op->deadline, op});
    op->result = Claim(op->queue, op->max, op->lease, op->worker, at);
    if (at > now) op->answer_at_ = at;
    finished.push_back(op);
  }
}

// --- time-driven work -----------------------------------------------------------

Status Core::TimedWork(std::vector<Op*>& finished) {
  const Timestamp now = clock_.Now();
  std::vector<LockWait*> answered;
  CHRONOQ_RETURN_IF_ERROR(locks_.TimedWork(now, answered));
  for (LockWait* wait : answered) finished.push_back(static_cast<LockOp*>(wait));
  finished.insert(finished.end(), released_.begin(), released_.end());
  released_.clear();

  // Lapsed leases: the worker vanished or is too slow. The attempt was counted
  // at claim time; the task is claimable again at once, or dead if that was
  // its last attempt.
  while (std::optional<int64_t> seq = leases_.FirstExpired(now)) {
    const RunningTask task = *leases_.Find(*seq);
    CHRONOQ_RETURN_IF_ERROR(
        RetryOrBury(task, now, "lease expired during attempt " + std::to_string(task.attempt),
                    AttemptOutcome::kLeaseExpired, {}, now));
  }

  if (window_full_ ? window_.size() < options_.max_window_tasks / 2
                   : (beyond_ && *beyond_ - options_.lookahead <= now)) {
    CHRONOQ_RETURN_IF_ERROR(Refill(now));
  }

  for (auto& [qid, list] : parked_) {
    if (!list.empty()) ServeParked(qid, finished);
  }
  // Claims whose wait ran out answer with no tasks.
  while (!parked_deadlines_.empty() && parked_deadlines_.begin()->first <= now) {
    ClaimOp* op = parked_deadlines_.begin()->second;
    parked_deadlines_.erase(parked_deadlines_.begin());
    parked_[op->qid_].erase(op->parked_at_);
    finished.push_back(op);
  }

  if (next_purge_ && *next_purge_ <= now) {
    CHRONOQ_ASSIGN_OR_RETURN(Purged purged, store_.PurgeFinished(now, options_.purge_chunk));
    for (const Purged::Count& c : purged.by_queue) Count(c.qid, c.state, std::nullopt, c.n);
    if (purged.rows == options_.purge_chunk) {
      next_purge_ = now;  // more to do: the next cycle continues
    } else {
      CHRONOQ_ASSIGN_OR_RETURN(next_purge_, store_.NextPurgeDue());
      if (next_purge_) next_purge_ = std::max(*next_purge_, now + kPurgeInterval);
    }
  }
  return {};
}

Status Core::Refill(Timestamp now) {
  // The horizon moves in whole buckets (see store.h): strictly past
  // now + lookahead, so the bucket holding that instant is in memory.
  const int64_t from = DueBucket(window_.horizon());
  const int64_t to = DueBucket(now + options_.lookahead) + 1;
  const size_t room =
      options_.max_window_tasks > window_.size() ? options_.max_window_tasks - window_.size() : 0;
  if (room == 0) {
    window_full_ = true;
    return {};
  }
  if (to <= from) return {};
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<DueEntry> entries,
                           store_.LoadScheduled(from, resume_seq_, to, static_cast<int>(room)));
  // The horizon moves first: placing a keyed row relies on it (KeyedArrived).
  const bool stopped = entries.size() == room;
  if (stopped) {
    // The load stopped inside a bucket: the horizon stops at its start, and
    // the next refill goes on after the last row read.
    const Timestamp last = BucketStart(DueBucket(entries.back().due));
    if (last > window_.horizon()) window_.set_horizon(last);
    resume_seq_ = entries.back().seq;
  } else {
    window_.set_horizon(BucketStart(to));
    resume_seq_ = 0;
  }
  for (const DueEntry& e : entries) {
    CHRONOQ_RETURN_IF_ERROR(Place(e.qid, e.key, e.started, {e.due, e.priority, e.seq}));
  }
  if (stopped) {
    // Full, or only short of full because keyed rows behind their heads
    // stay on disk: then the next cycle reads on.
    window_full_ = window_.size() >= options_.max_window_tasks;
    beyond_ = window_.horizon();
  } else {
    window_full_ = false;
    CHRONOQ_ASSIGN_OR_RETURN(std::optional<int64_t> next, store_.NextScheduledBucket(to));
    beyond_ = next ? std::optional<Timestamp>(BucketStart(*next)) : std::nullopt;
  }
  return {};
}

Status Core::BeforeCommit() {
  CHRONOQ_RETURN_IF_ERROR(FlushKeyCursors());
  for (int64_t qid : dirty_queues_) {
    QueueState* q = QueueById(qid);
    if (q == nullptr) continue;
    q->dirty = false;
    CHRONOQ_RETURN_IF_ERROR(store_.SaveQueueCounts(qid, q->counts));
  }
  dirty_queues_.clear();
  if (next_token_ <= token_ceiling_) return {};
  const uint64_t ceiling = next_token_ + kTokenBlock;
  CHRONOQ_RETURN_IF_ERROR(store_.SaveNextToken(ceiling));
  token_ceiling_ = ceiling;
  return {};
}

Timestamp Core::NextWake() const {
  Timestamp wake = kForever;
  const Timestamp now = clock_.Now();
  for (const auto& [qid, list] : parked_) {
    if (list.empty()) continue;
    auto due = window_.EarliestDue(qid);
    if (!due) continue;
    if (CanHandOut(qid, now)) {
      // Served ahead (ServeParked) by a claim that waits until the due
      // time; when none does, at the due time.
      const bool waits = std::any_of(list.begin(), list.end(),
                                     [&](const ClaimOp* op) { return op->deadline >= *due; });
      wake = std::min(wake, waits ? *due - options_.claim_ahead : *due);
      continue;
    }
    // A paused or full queue is woken by the op that resumes it or by a task
    // of it that finishes (an op, or a lease lapse: see below); a
    // rate-limited one when its oldest claim leaves the period.
    if (auto q = queues_.find(qid); q != queues_.end()) {
      if (auto at = RateRoomAt(q->second, now)) wake = std::min(wake, std::max(*at, *due));
    }
  }
  if (!parked_deadlines_.empty()) wake = std::min(wake, parked_deadlines_.begin()->first);
  if (auto expiry = leases_.EarliestExpiry()) wake = std::min(wake, *expiry);
  if (window_full_) {
    if (window_.size() < options_.max_window_tasks / 2) wake = Timestamp::min();
  } else if (beyond_) {
    wake = std::min(wake, *beyond_ - options_.lookahead);
  }
  if (next_purge_) wake = std::min(wake, *next_purge_);
  return std::min(wake, locks_.NextWake());
}

}  // namespace chronoq
