// Store: the durable truth behind the engine.
//
// The engine keeps only the near future in memory; everything acknowledged is
// in the Store first. The interface is shaped by the engine's single-writer
// design: one thread (the engine loop) performs every write, inside one
// transaction per group commit, through the "writer" methods below. Reads for
// clients (ReadTask, ListTasks) use a separate connection and are thread-safe.
//
// Row layout (see docs/ARCHITECTURE.md): `due` is "the next time something
// happens to this row": run_at while scheduled, the lease end while running,
// the purge time once succeeded or cancelled, NULL (never) once dead.
//
// Rows are indexed by (state, due bucket), not by the exact due: a bucket is
// 2^28 µs (about 4.5 min). Because seqs only grow, a new row lands at the end of
// its bucket, so a commit of a thousand tasks due at random instants touches a
// few index pages instead of a thousand. Range queries below therefore work in
// whole buckets.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/queue.h"
#include "chronoq/result.h"
#include "chronoq/task.h"

namespace chronoq {

inline constexpr int kDueBucketShift = 28;
constexpr int64_t DueBucket(Timestamp t) { return t.time_since_epoch().count() >> kDueBucketShift; }
constexpr Timestamp BucketStart(int64_t bucket) {
  return Timestamp(Duration(bucket * (int64_t{1} << kDueBucketShift)));
}

// `seqs` sorted, without repeats, as runs of consecutive values, each
// {first, last}. Tasks enqueued together and due together are claimed and
// acknowledged together, so a batch's seqs are mostly a few runs, which a
// store can name by their ends (a walk along its table) instead of one by one.
inline std::vector<std::pair<int64_t, int64_t>> SeqRuns(std::vector<int64_t> seqs) {
  std::sort(seqs.begin(), seqs.end());
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t seq : seqs) {
    if (!runs.empty() && runs.back().second + 1 == seq) {
      runs.back().second = seq;
    } else {
      runs.emplace_back(seq, seq);
    }
  }
  return runs;
}

// A task row. `seq` is the primary key, time-ordered (see common/task_id.h).
struct TaskRow {
  int64_t seq = 0;
  std::optional<std::string> name;  // client-chosen id; unset for generated ids
  int64_t qid = 0;
  TaskState state = TaskState::kScheduled;
  std::optional<Timestamp> due;
  int priority = 0;
  int attempt = 0;
  int max_attempts = 0;
  std::string payload;
  std::optional<Timestamp> run_at;  // set once claimed (while scheduled, due is run_at)
  std::optional<uint64_t> token;
  std::optional<std::string> last_error;
  std::optional<Timestamp> updated;
  std::optional<Duration> backoff_base;
  std::optional<Duration> backoff_cap;
  std::optional<std::string> target;    // the webhook target as compact JSON (core/validate.h)
  std::optional<std::string> response;  // the last webhook response: status and body excerpt
  std::optional<int64_t> sid;           // the schedule this task is an occurrence of
  std::optional<std::string> key;       // per-key ordering (TaskSpec::key)
  // The worker that claimed it last, as it named itself (ClaimRequest::worker);
  // kept after the lease ends, for triage.
  std::optional<std::string> worker;
  // When it was claimed last, and by which engine (EngineOptions::node):
  // what a running task's attempt will record when it ends, and what a
  // succeeded task's last attempt is read from (core.h, TaskFromRow).
  std::optional<Timestamp> claimed;
  std::optional<std::string> node;
  // Its earlier finished attempts (Task::attempts) as a JSON array (codec
  // EncodeAttempts), oldest first: every attempt that ended by a failure or
  // a lapse. Only Move writes it; an acknowledgement adds nothing (the row's
  // own columns are its record), so that acknowledging does not grow rows.
  std::optional<std::string> attempts;
};

// A schedule as stored. Its definition is one JSON column (schedule_spec.h);
// the rest is where the schedule stands. `current_seq` is its newest
// occurrence task (scheduled or running, or finished while no successor
// exists yet) at instant `cursor`; `next_at` is set while that task is
// scheduled and not yet claimed (its due time), and indexed, so that opening
// the store finds the occurrences missed while chronoq was down.
struct ScheduleRow {
  int64_t sid = 0;
  std::string name;
  int64_t qid = 0;
  std::string spec;
  bool paused = false;
  std::optional<int64_t> current_seq;
  std::optional<Timestamp> cursor;
  std::optional<Timestamp> next_at;
  std::optional<Timestamp> claimed_at;  // when the current occurrence was claimed
  int64_t runs = 0;
  int64_t skipped = 0;
  // The latest finished occurrence.
  std::optional<std::string> last_task;
  std::optional<Timestamp> last_for;
  std::optional<TaskState> last_state;
  std::optional<Timestamp> last_finished;
  std::optional<std::string> last_error;
  Timestamp created;
  Timestamp updated;
};

// A queue as stored: its settings, paused flag and the number of its tasks in
// each state. The engine keeps the counts in memory and writes those of the
// queues a transaction touched before committing it, so they are exact after
// any restart.
struct QueueRow {
  int64_t qid = 0;
  std::string name;
  QueueSettings settings;
  bool paused = false;
  bool webhooks = false;            // has held tasks with a webhook target
  std::array<int64_t, 5> counts{};  // by TaskState
};

// A held keyed lock (chronoq/lock.h). Only held locks are stored; waiters
// live in memory and retry after a restart.
struct LockRow {
  std::string key;
  uint64_t token = 0;
  std::string owner;
  Timestamp expires;
};

// What PurgeFinished deleted: rows in all, and how many per (queue, state).
struct Purged {
  struct Count {
    int64_t qid = 0;
    TaskState state = TaskState::kSucceeded;
    int64_t n = 0;
  };
  int rows = 0;
  std::vector<Count> by_queue;
};

// A scheduled task as the in-memory window knows it.
struct DueEntry {
  int64_t seq = 0;
  int64_t qid = 0;
  Timestamp due;
  int priority = 0;
  std::optional<std::string> key;
  bool started = false;  // claimed before (attempt > 0): a retry
};

// A place in a key's line (per-key ordering): tasks of a key start in order of
// (at, priority, seq), `at` being the due they wait to start at.
struct KeyPosition {
  Timestamp at;
  int priority = 0;
  int64_t seq = 0;
  // The place just before task `seq`'s, after any other.
  static KeyPosition Before(Timestamp at, int priority, int64_t seq) {
    return {at, priority, seq - 1};
  }
  friend auto operator<=>(const KeyPosition&, const KeyPosition&) = default;
};

struct StoreMeta {
  int64_t max_seq = 0;  // the largest seq ever used
  uint64_t next_token =
      1;  // above every fencing token handed out: the next to hand out after a restart
};

class Store {
 public:
  virtual ~Store() = default;

  // --- writer (engine loop thread only) ---
  virtual Result<StoreMeta> LoadMeta() = 0;
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
  // Nested all-or-nothing scopes inside the transaction (batch enqueue).
  virtual Status Savepoint() = 0;
  virtual Status ReleaseSavepoint() = 0;
  virtual void RollbackToSavepoint() = 0;

  // The id of queue `name`, creating it (no settings, zero counts) when missing.
  virtual Result<int64_t> QueueId(const std::string& name) = 0;
  // All known queues, by qid.
  virtual Result<std::vector<QueueRow>> Queues() = 0;
  // Replaces a queue's settings and its paused and webhooks flags.
  virtual Status SaveQueueSettings(int64_t qid, const QueueSettings& settings, bool paused,
                                   bool webhooks) = 0;
  // QueueSettings::final_statuses as both stores keep it: "404,422" (empty
  // for an empty list; NULL, nullopt, when unset).
  static std::optional<std::string> EncodeStatuses(const std::optional<std::vector<int>>& v) {
    if (!v) return std::nullopt;
    std::string out;
    for (int status : *v) out += (out.empty() ? "" : ",") + std::to_string(status);
    return out;
  }
  static std::optional<std::vector<int>> DecodeStatuses(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    std::vector<int> out;
    for (size_t i = 0; i < text->size(); i = text->find(',', i) + 1) {
      out.push_back(std::atoi(text->c_str() + i));
      if (text->find(',', i) == std::string::npos) break;
    }
    return out;
  }
  // Replaces a queue's counts.
  virtual Status SaveQueueCounts(int64_t qid, const std::array<int64_t, 5>& counts) = 0;

  // --- schedules (writer) ---
  // Inserts a new schedule and returns its sid; nullopt (nothing written)
  // when row.name is taken.
  virtual Result<std::optional<int64_t>> InsertSchedule(const ScheduleRow& row) = 0;
  // Overwrites every column of the schedule with row.sid.
  virtual Status SaveSchedule(const ScheduleRow& row) = 0;
  virtual Status DeleteSchedule(int64_t sid) = 0;
  virtual Result<std::optional<ScheduleRow>> FindSchedule(int64_t sid) = 0;
  virtual Result<std::optional<ScheduleRow>> FindScheduleByName(const std::string& name) = 0;
  // Schedules whose unclaimed occurrence is due before `before`, by sid after
  // `after_sid`, at most `limit` (the misfire pass when the engine starts).
  virtual Result<std::vector<ScheduleRow>> SchedulesDueBefore(Timestamp before, int64_t after_sid,
                                                              int limit) = 0;
  // Schedules by name after `after_name` (of queue `qid` when set), at most `limit`.
  virtual Result<std::vector<ScheduleRow>> ListSchedules(std::optional<int64_t> qid,
                                                         const std::string& after_name,
                                                         int limit) = 0;

  // --- keyed tasks (writer) ---
  // A keyed task waits to start while scheduled with attempt 0. Keyed tasks
  // are indexed from enqueue to purge by (queue, key, position), the position
  // being the due they waited to start at: claims and acknowledgements leave
  // the index alone, so the tasks that started or finished stay in it.
  // Searches therefore start from a place known to be before every task of
  // the key that waits to start: `after` when given, else the key's saved
  // cursor. A task that comes to wait to start at or before the saved cursor
  // (enqueued, rescheduled, replaced, retried by hand) moves it back in the
  // same write, and it is dropped once no task of its key lies at or before
  // it (purge, delete); SaveKeyCursor must never be given a place past a
  // task that waits to start.
  //
  // The first `limit` tasks of `key` in queue `qid` waiting to start after
  // `after` (else after the saved cursor), in order.
  virtual Result<std::vector<DueEntry>> KeyHeads(int64_t qid, const std::string& key,
                                                 const std::optional<KeyPosition>& after,
                                                 int limit) = 0;
  // One key's read for KeyHeadsOf: as KeyHeads(qid, *key, after, limit).
  struct KeyRead {
    int64_t qid = 0;
    const std::string* key = nullptr;
    std::optional<KeyPosition> after;
    int limit = 0;
  };
  // KeyHeads for several keys at once: one answer per read, in their order.
  // The engine asks so when many keys need their next tasks in one claim (a
  // drain of keys in step). A store whose reads are round trips does them
  // in one; the default reads them one by one.
  virtual Result<std::vector<std::vector<DueEntry>>> KeyHeadsOf(const std::vector<KeyRead>& reads) {
    std::vector<std::vector<DueEntry>> out;
    out.reserve(reads.size());
    for (const KeyRead& r : reads) {
      CHRONOQ_ASSIGN_OR_RETURN(std::vector<DueEntry> rows,
                               KeyHeads(r.qid, *r.key, r.after, r.limit));
      out.push_back(std::move(rows));
    }
    return out;
  }
  // How many tasks of `key` in queue `qid` wait to start after `after` (else
  // after the saved cursor).
  virtual Result<int64_t> CountKeyPending(int64_t qid, const std::string& key,
                                          const std::optional<KeyPosition>& after) = 0;
  // Moves the key's saved cursor forward to `at` (never backwards), which
  // must lie before every task of the key waiting to start. The engine saves
  // where its claims got to now and then, so that a search without `after`
  // (after a restart) skips the tasks that started before.
  virtual Status SaveKeyCursor(int64_t qid, const std::string& key, const KeyPosition& at) = 0;
  // The queue and key of each keyed task waiting to retry (scheduled,
  // attempt > 0), one pair per task (few: they are failures in backoff).
  virtual Result<std::vector<std::pair<int64_t, std::string>>> LoadKeyRetries() = 0;

  // --- keyed locks (writer) ---
  // Inserts or replaces the lock row of row.key.
  virtual Status SaveLock(const LockRow& row) = 0;
  virtual Status DeleteLock(const std::string& key) = 0;
  // Every held lock (as many as are held: few).
  virtual Result<std::vector<LockRow>> LoadLocks() = 0;

  // Inserts a new row (every column but `response`, `claimed`, `node` and
  // `attempts`). Returns false (and writes nothing) when row.name is already
  // taken.
  virtual Result<bool> Insert(const TaskRow& row) = 0;
  // Overwrites every column of the row with row.seq but `response`,
  // `claimed`, `node` and `attempts`.
  virtual Status Overwrite(const TaskRow& row) = 0;
  virtual Status Delete(int64_t seq) = 0;
  virtual Result<std::optional<TaskRow>> FindBySeq(int64_t seq) = 0;
  virtual Result<std::optional<TaskRow>> FindByName(const std::string& name) = 0;

  // scheduled → running, for every row of `seqs` that is scheduled: sets
  // due=lease_until, run_at=old due, the token, attempt+1, the worker
  // (NULL when empty), claimed=now and the node (the claiming engine's
  // name; NULL when empty). Returns the rows as updated but for `claimed`,
  // `node` and `attempts` (left unset: the caller knows the first two, and
  // an attempt that fails reads the history then), in no particular order;
  // rows that were not scheduled are left out.
  // (One statement per 64 rows.)
  virtual Result<std::vector<TaskRow>> MarkRunningMany(const std::vector<int64_t>& seqs,
                                                       Timestamp lease_until, uint64_t token,
                                                       Timestamp now, const std::string& worker,
                                                       const std::string& node) = 0;
  // MarkRunningMany for one row.
  Result<std::optional<TaskRow>> MarkRunning(int64_t seq, Timestamp lease_until, uint64_t token,
                                             Timestamp now, const std::string& worker = {},
                                             const std::string& node = {}) {
    CHRONOQ_ASSIGN_OR_RETURN(std::vector<TaskRow> rows,
                             MarkRunningMany({seq}, lease_until, token, now, worker, node));
    if (rows.empty()) return std::optional<TaskRow>();
    return std::optional<TaskRow>(std::move(rows.front()));
  }
  // Sets state, due, last_error (when given) and attempt (when given); clears
  // the token unless the new state is running.
  struct Transition {
    int64_t seq = 0;
    TaskState state = TaskState::kScheduled;
    std::optional<Timestamp> due;
    std::optional<std::string> last_error;  // unset: keep
    std::optional<int> attempt;             // unset: keep
    Timestamp now;
    // The row has a key. Say so when it may come to wait to start (scheduled,
    // attempt 0): its key's saved cursor may have to move back.
    bool keyed = false;
    // The attempt history; unset: keep; empty: none (NULL).
    std::optional<std::string> attempts;
  };
  virtual Status Move(const Transition& t) = 0;
  // Moves many running rows to succeeded with one purge time: the batched
  // form of Move for acknowledgements (one statement per 64 rows).
  virtual Status MarkSucceeded(const std::vector<int64_t>& seqs, Timestamp purge_at,
                               Timestamp now) = 0;
  // Sets due (a running task's lease end) without touching anything else.
  virtual Status SetDue(int64_t seq, Timestamp due, Timestamp now) = 0;
  virtual Status SetPayload(int64_t seq, const std::string& payload) = 0;
  // nullopt clears it.
  virtual Status SetResponse(int64_t seq, const std::optional<std::string>& response) = 0;
  virtual Status SaveNextToken(uint64_t next_token) = 0;

  // Scheduled rows whose due bucket is in [from_bucket, to_bucket), in bucket
  // then seq order, at most `limit`, skipping the rows of from_bucket with
  // seq <= after_seq (the part of it already read).
  virtual Result<std::vector<DueEntry>> LoadScheduled(int64_t from_bucket, int64_t after_seq,
                                                      int64_t to_bucket, int limit) = 0;
  // The first bucket >= from_bucket that holds a scheduled row.
  virtual Result<std::optional<int64_t>> NextScheduledBucket(int64_t from_bucket) = 0;
  // Every running row (there are as many as leases held: few).
  virtual Result<std::vector<TaskRow>> LoadRunning() = 0;
  // Deletes up to `limit` succeeded/cancelled rows with due <= before;
  // returns how many, per queue and state.
  virtual Result<Purged> PurgeFinished(Timestamp before, int limit) = 0;
  // A lower bound (its bucket's start) of the earliest purge time of a
  // succeeded/cancelled row.
  virtual Result<std::optional<Timestamp>> NextPurgeDue() = 0;

  // --- readers (any thread) ---
  struct ReadRow {
    TaskRow row;
    std::string queue;
    std::string schedule;  // the name of the schedule row.sid names, if it exists
  };
  virtual Result<std::optional<ReadRow>> ReadBySeq(int64_t seq) = 0;
  virtual Result<std::optional<ReadRow>> ReadByName(const std::string& name) = 0;
  // A page after the cursor position (after_bucket, after_seq): ordered by
  // (due bucket, seq) when `state` is set and not dead (dead rows have no
  // due), else by seq.
  struct ListQuery {
    std::optional<std::string> queue;
    std::optional<TaskState> state;
    std::optional<std::string> key;
    // Only rows with min_seq <= seq <= max_seq; with generated_only, only
    // those without a name; with name_prefix, only names starting with it.
    int64_t min_seq = 0;
    int64_t max_seq = INT64_MAX;
    bool generated_only = false;
    std::optional<std::string> name_prefix;
    int limit = 100;
    int64_t after_bucket = INT64_MIN;
    int64_t after_seq = 0;
    // By seq whatever the state (after_bucket unused), walking the table in
    // creation order rather than an index of the filter: for a bulk job,
    // whose moves would otherwise carry rows past its cursor and back into
    // its path.
    bool by_seq = false;
  };
  virtual Result<std::vector<ReadRow>> List(const ListQuery& q) = 0;
  // The smallest string larger than every string starting with `prefix`
  // (byte order), or nothing when there is none (prefix all 0xff bytes):
  // `name >= prefix AND name < end` is a prefix match on an index.
  static std::optional<std::string> PrefixEnd(std::string prefix) {
    while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
    if (prefix.empty()) return std::nullopt;
    prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
    return prefix;
  }
  // The keys of the queue named `queue` with the most scheduled rows, most
  // first, then by key; at most `limit`.
  virtual Result<std::vector<KeyBacklog>> KeyBacklogs(const std::string& queue, int limit) = 0;

  // --- copying a whole store (writer; chronoq-admin copy, no engine open) ---
  // A copy carries every row of every table with its ids (seq, qid, sid) and
  // what the meta table holds, so that an engine on the copy behaves exactly
  // as one on the original would have. The import methods write into an
  // empty store (CountRows all zero), inside the caller's transaction; they
  // fail (the transaction must be rolled back) when a row's id or name is
  // taken. A column or meta field added to the schema must be added here
  // too: tests/admin/copy_schema_test.cc fails until it is.

  // A task row with every column it has, including those the engine writes
  // but never reads back.
  struct StoredTask {
    TaskRow row;                      // response and attempts included
    std::optional<Timestamp> korder;  // a keyed task's place in its key's line
  };
  // A key's saved cursor (SaveKeyCursor).
  struct KeyCursorRow {
    int64_t qid = 0;
    std::string key;
    KeyPosition at;
  };
  // What the store keeps besides its rows.
  struct CopyMeta {
    uint64_t next_token = 1;  // StoreMeta::next_token: the fencing-token ceiling
    int64_t last_sid = 0;     // the largest schedule id ever handed out, deleted ones too
    friend bool operator==(const CopyMeta&, const CopyMeta&) = default;
  };
  // How many rows each table holds.
  struct RowCounts {
    std::array<int64_t, 5> tasks{};  // by TaskState
    int64_t queues = 0;
    int64_t schedules = 0;
    int64_t locks = 0;
    int64_t key_cursors = 0;
    int64_t total_tasks() const { return tasks[0] + tasks[1] + tasks[2] + tasks[3] + tasks[4]; }
    bool empty() const { return *this == RowCounts{}; }
    friend bool operator==(const RowCounts&, const RowCounts&) = default;
  };
  virtual Result<RowCounts> CountRows() = 0;
  virtual Result<CopyMeta> ExportMeta() = 0;
  // Raises the store's meta to `meta`, field by field; never lowers one.
  virtual Status ImportMeta(const CopyMeta& meta) = 0;
  // Up to `limit` task rows with seq > after_seq, by seq.
  virtual Result<std::vector<StoredTask>> ExportTasks(int64_t after_seq, int limit) = 0;
  // Inserts the rows as they are (every column, korder included), leaving
  // the key cursors alone.
  virtual Status ImportTasks(const std::vector<StoredTask>& rows) = 0;
  // Inserts queues as they are (qid, name, settings, flags, counts); a queue
  // created later (QueueId) gets a qid above every imported one. Export:
  // Queues().
  virtual Status ImportQueues(const std::vector<QueueRow>& queues) = 0;
  // Inserts schedules with their sids; InsertSchedule later hands out sids
  // above them. Export: ListSchedules(nullopt, "", limit), by name.
  virtual Status ImportSchedules(const std::vector<ScheduleRow>& rows) = 0;
  // Up to `limit` saved key cursors after (after_qid, after_key), by (qid,
  // key), keys compared byte by byte.
  virtual Result<std::vector<KeyCursorRow>> ExportKeyCursors(int64_t after_qid,
                                                             const std::string& after_key,
                                                             int limit) = 0;
  // Inserts saved key cursors as they are. (Locks need nothing new:
  // LoadLocks and SaveLock carry every column.)
  virtual Status ImportKeyCursors(const std::vector<KeyCursorRow>& rows) = 0;
};

}  // namespace chronoq
