#include "store/sqlite/sqlite_store.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include "common/mutex.h"
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>

namespace chronoq {
namespace {

// The schema. `due` is the one time column the engine indexes, by bucket (see
// store.h). Generated-id tasks pay for one index (state, due bucket) while
// they are not running, and for tasks_running (a key of the state alone) while
// they are: a claim and its acknowledgement move a task out of tasks_due and
// back, instead of from one place in it to another, which made W2's claim and
// acknowledgement statements about a fifth cheaper (schema 12). The unique
// index on client-chosen names is partial, so it costs them nothing.
// Queries must spell the bucket exactly as the index does (CHRONOQ_BUCKET) and
// say CHRONOQ_NOT_RUNNING to read tasks_due: SQLite uses a partial index only
// for a query whose WHERE has its condition as a term ("state=0" alone is not
// taken to imply it).
//
// `queues` holds each queue's settings (NULL: the engine default), its paused
// flag and the number of its tasks in each state (n_<state>), which the engine
// keeps in memory and writes for the queues each transaction touched. `target`
// (a webhook, as compact JSON) is NULL for most tasks and then costs one
// record-header byte.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS queues(
  qid INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  paused INTEGER NOT NULL DEFAULT 0,
  webhooks INTEGER NOT NULL DEFAULT 0,
  concurrency INTEGER,
  max_attempts INTEGER,
  backoff_base INTEGER,
  backoff_cap INTEGER,
  retention INTEGER,
  n_scheduled INTEGER NOT NULL DEFAULT 0,
  n_running INTEGER NOT NULL DEFAULT 0,
  n_succeeded INTEGER NOT NULL DEFAULT 0,
  n_cancelled INTEGER NOT NULL DEFAULT 0,
  n_dead INTEGER NOT NULL DEFAULT 0,
  rate_count INTEGER,
  rate_period INTEGER,
  key_in_flight INTEGER,
  key_pending INTEGER,
  final_statuses TEXT);
CREATE TABLE IF NOT EXISTS tasks(
  seq INTEGER PRIMARY KEY,
  qid INTEGER NOT NULL,
  state INTEGER NOT NULL,
  due INTEGER,
  prio INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  payload TEXT NOT NULL,
  name TEXT,
  run_at INTEGER,
  token INTEGER,
  last_error TEXT,
  updated INTEGER,
  backoff_base INTEGER,
  backoff_cap INTEGER,
  target TEXT,
  response TEXT,
  sid INTEGER,
  key TEXT,
  korder INTEGER,
  worker TEXT,
  claimed INTEGER,
  node TEXT,
  attempts TEXT);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks(state, (due >> 28)) WHERE state <> 1;
CREATE INDEX IF NOT EXISTS tasks_running ON tasks(state) WHERE state = 1;
CREATE UNIQUE INDEX IF NOT EXISTS tasks_name ON tasks(name) WHERE name IS NOT NULL;
CREATE TABLE IF NOT EXISTS schedules(
  sid INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  qid INTEGER NOT NULL,
  spec TEXT NOT NULL,
  paused INTEGER NOT NULL,
  current_seq INTEGER,
  cursor INTEGER,
  next_at INTEGER,
  claimed_at INTEGER,
  runs INTEGER NOT NULL,
  skipped INTEGER NOT NULL,
  last_task TEXT,
  last_for INTEGER,
  last_state INTEGER,
  last_finished INTEGER,
  last_error TEXT,
  created INTEGER NOT NULL,
  updated INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS schedules_next ON schedules(next_at) WHERE next_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS locks(
  key TEXT PRIMARY KEY,
  token INTEGER NOT NULL,
  owner TEXT NOT NULL,
  expires INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS key_cursors(
  qid INTEGER NOT NULL,
  key TEXT NOT NULL,
  korder INTEGER NOT NULL,
  prio INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY(qid, key)) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(k, v) VALUES('schema', 12), ('next_token', 1);
)sql";

// The indexes of keyed tasks (store.h), created after any migration added
// their columns. Both are partial: an unkeyed task never touches them.
// tasks_korder holds a keyed task from enqueue to purge, by its key order
// (`korder`: the due it waits to start at), which claims and acknowledgements
// never change: so they never write to it. A commit that claims the heads of
// a hundred keys would otherwise rewrite a hundred index leaves, one per key.
constexpr const char* kKeyIndexes = R"sql(
CREATE INDEX IF NOT EXISTS tasks_korder ON tasks(qid, key, korder, prio)
  WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_key_retry ON tasks(qid)
  WHERE key IS NOT NULL AND state = 0 AND attempt > 0;
)sql";

constexpr int kSchemaVersion = 12;

// Schema 1 -> 2: queue settings, paused flag and counts; task targets. The
// columns are added in the order kSchema declares them, so a migrated database
// is laid out like a new one. The counts are computed once, by one scan of
// the table (SQLite rewrites nothing for ADD COLUMN: old rows read the
// defaults). UPDATE ... FROM needs SQLite 3.33.
constexpr const char* kMigrateFrom1 = R"sql(
ALTER TABLE queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN webhooks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN concurrency INTEGER;
ALTER TABLE queues ADD COLUMN max_attempts INTEGER;
ALTER TABLE queues ADD COLUMN backoff_base INTEGER;
ALTER TABLE queues ADD COLUMN backoff_cap INTEGER;
ALTER TABLE queues ADD COLUMN retention INTEGER;
ALTER TABLE queues ADD COLUMN n_scheduled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN n_running INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN n_succeeded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN n_cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN n_dead INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN target TEXT;
UPDATE queues SET n_scheduled=c.n0, n_running=c.n1, n_succeeded=c.n2, n_cancelled=c.n3, n_dead=c.n4
  FROM (SELECT qid, sum(state=0) AS n0, sum(state=1) AS n1, sum(state=2) AS n2,
               sum(state=3) AS n3, sum(state=4) AS n4
        FROM tasks GROUP BY qid) AS c
  WHERE c.qid = queues.qid;
UPDATE meta SET v=2 WHERE k='schema';
)sql";

// Schema 2 -> 3: the due bucket grew from 2^26 to 2^28 µs (67 s to 4.5 min):
// a commit of tasks due at random over ten minutes now dirties ~3 index
// leaves instead of ~9, which lifted one-task-per-call enqueues by ~20%
// (docs/BENCHMARKS.md). The index is rebuilt once, at open. Tasks also gain
// `response`: the last webhook response, status and body excerpt.
constexpr const char* kMigrateFrom2 = R"sql(
DROP INDEX tasks_due;
CREATE INDEX tasks_due ON tasks(state, (due >> 28));
ALTER TABLE tasks ADD COLUMN response TEXT;
UPDATE meta SET v=3 WHERE k='schema';
)sql";

// Schema 3 -> 4: schedules (their table comes with kSchema, which runs first)
// and the schedule of each occurrence task. ADD COLUMN rewrites no row.
constexpr const char* kMigrateFrom3 = R"sql(
ALTER TABLE tasks ADD COLUMN sid INTEGER;
UPDATE meta SET v=4 WHERE k='schema';
)sql";

// Schema 4 -> 5: per-queue rate limits.
constexpr const char* kMigrateFrom4 = R"sql(
ALTER TABLE queues ADD COLUMN rate_count INTEGER;
ALTER TABLE queues ADD COLUMN rate_period INTEGER;
UPDATE meta SET v=5 WHERE k='schema';
)sql";

// Schema 5 -> 6: per-key ordering (the task's key; the queue's per-key
// limits). The indexes follow as kKeyIndexes.
constexpr const char* kMigrateFrom5 = R"sql(
ALTER TABLE queues ADD COLUMN key_in_flight INTEGER;
ALTER TABLE queues ADD COLUMN key_pending INTEGER;
ALTER TABLE tasks ADD COLUMN key TEXT;
UPDATE meta SET v=6 WHERE k='schema';
)sql";

// Schema 6 -> 7: the key order column, its index (replacing tasks_key, which
// held only tasks waiting to start, so every claim wrote to it) and the key
// cursors (kSchema creates the table). A started task's korder only has to be
// set; the order among them does not matter.
constexpr const char* kMigrateFrom6 = R"sql(
ALTER TABLE tasks ADD COLUMN korder INTEGER;
DROP INDEX IF EXISTS tasks_key;
UPDATE tasks SET korder = CASE WHEN state = 0 AND attempt = 0 THEN due
                               ELSE coalesce(run_at, due, 0) END
  WHERE key IS NOT NULL;
UPDATE meta SET v=7 WHERE k='schema';
)sql";

// Schema 7 -> 8: webhook targets and schedule definitions are kept in their
// API form (codec/json_codec.h: one JSON form per type) instead of a form of
// their own: milliseconds instead of microseconds, headers as an object,
// every field written out. The old target form was
// {"url","method"?,"headers"?:[[name,value],...],"timeout_us"?}. Converting
// the targets scans the table once (there is no index on target). The new
// form always has timeout_ms, the old one never did.
std::string MigrateFrom7() {
  // The new form of the old target `t` (an SQL expression).
  const auto target = [](std::string_view t) {
    std::string sql = R"sql(json_object(
      'url', json_extract({t}, '$.url'),
      'method', coalesce(json_extract({t}, '$.method'), 'POST'),
      'headers', json((SELECT coalesce(json_group_object(json_extract(h.value, '$[0]'),
                                                         json_extract(h.value, '$[1]')), '{}')
                       FROM json_each({t}, '$.headers') AS h)),
      'timeout_ms', max(1, coalesce(json_extract({t}, '$.timeout_us'), 10000000) / 1000)))sql";
    for (size_t at = sql.find("{t}"); at != std::string::npos; at = sql.find("{t}", at)) {
      sql.replace(at, 3, t);
    }
    return sql;
  };
  return "UPDATE tasks SET target = " + target("target") +
         " WHERE target IS NOT NULL AND json_type(target, '$.timeout_ms') IS NULL;" +
         R"sql(
UPDATE schedules SET spec = json_remove(json_set(spec,
    '$.every_ms', max(1, json_extract(spec, '$.every_us') / 1000),
    '$.fixed_delay_ms', max(1, json_extract(spec, '$.fixed_delay_us') / 1000),
    '$.start', json_extract(spec, '$.start_us') / 1000),
  '$.every_us', '$.fixed_delay_us', '$.start_us');
UPDATE schedules SET spec = json_set(spec, '$.target', json()sql" +
         target("json_extract(spec, '$.target')") + R"sql())
  WHERE json_type(spec, '$.target.timeout_us') IS NOT NULL
     OR json_type(spec, '$.target.headers') = 'array';
UPDATE meta SET v=8 WHERE k='schema';
)sql";
}

// Schema 8 -> 9: the worker that claimed each task last (its lease holder
// while it runs). ADD COLUMN rewrites no row.
constexpr const char* kMigrateFrom8 = R"sql(
ALTER TABLE tasks ADD COLUMN worker TEXT;
UPDATE meta SET v=9 WHERE k='schema';
)sql";

// Schema 9 -> 10: the HTTP statuses that fail a webhook queue's tasks for
// good (QueueSettings::final_statuses). ADD COLUMN rewrites no row.
constexpr const char* kMigrateFrom9 = R"sql(
ALTER TABLE queues ADD COLUMN final_statuses TEXT;
UPDATE meta SET v=10 WHERE k='schema';
)sql";

// Schema 10 -> 11: the claim of each task's last attempt (its time and the
// engine that granted it) and its earlier finished attempts (Task::attempts).
// ADD COLUMN rewrites no row.
constexpr const char* kMigrateFrom10 = R"sql(
ALTER TABLE tasks ADD COLUMN claimed INTEGER;
ALTER TABLE tasks ADD COLUMN node TEXT;
ALTER TABLE tasks ADD COLUMN attempts TEXT;
UPDATE meta SET v=11 WHERE k='schema';
)sql";

// Schema 11 -> 12: running tasks leave tasks_due for tasks_running (kSchema
// creates it, from the state column every schema has). Rebuilding tasks_due
// reads the whole table once.
constexpr const char* kMigrateFrom11 = R"sql(
DROP INDEX tasks_due;
CREATE INDEX tasks_due ON tasks(state, (due >> 28)) WHERE state <> 1;
UPDATE meta SET v=12 WHERE k='schema';
)sql";

// Rows per batched claim or acknowledgement statement ("seq IN (...)"); unused
// slots are bound to NULL, which matches nothing. Fewer statements per task
// was worth about a third of the claim/ack path's time.
constexpr int kRowBatch = 64;
// Consecutive seqs that a batched claim or acknowledgement names as a range
// (SqliteStore::ForEachSeqSet) rather than in a list.
constexpr int64_t kMinSeqRun = 8;
// Rows to one statement of the inserts written behind (SqliteStore::Insert),
// and the parameters of each row.
constexpr size_t kRowsPerInsert = 8;
constexpr int kInsertParams = 19;
#define CHRONOQ_BUCKET "(due >> 28)"
#define CHRONOQ_NOT_RUNNING "state <> 1"
static_assert(kDueBucketShift == 28, "CHRONOQ_BUCKET and the schema spell the shift out");

// The WAL is checkpointed into the database by a background thread once it
// holds SqliteTuning::checkpoint_pages, so the writer does not wait for a
// checkpoint's fsyncs: SQLite's automatic checkpoint runs them on the writer,
// inside a commit. If the checkpointer falls behind, the writer checkpoints
// itself past SqliteTuning::wal_limit_pages.
// After a checkpoint resets it, a WAL file larger than this is truncated.
constexpr const char* kJournalSizeLimit = "PRAGMA journal_size_limit=67108864";

// The task columns in Stmt::Row() order.
#define CHRONOQ_TASK_COLS                                                                 \
  "t.seq, t.qid, t.state, t.due, t.prio, t.attempt, t.max_attempts, t.payload, t.name, "  \
  "t.run_at, t.token, t.last_error, t.updated, t.backoff_base, t.backoff_cap, t.target, " \
  "t.response, t.sid, t.key, t.worker, t.claimed, t.node, t.attempts"
// A task with its queue's name and its schedule's (empty if none), for readers.
#define CHRONOQ_READ_COLS                       \
  "SELECT " CHRONOQ_TASK_COLS                   \
  ", q.name, coalesce(s.name, '') FROM tasks t" \
  " JOIN queues q ON q.qid = t.qid LEFT JOIN schedules s ON s.sid = t.sid WHERE "

int64_t Micros(Timestamp t) { return t.time_since_epoch().count(); }
Timestamp FromMicros(int64_t v) { return Timestamp(Duration(v)); }

Status SqlError(sqlite3* db, std::string_view what) {
  const int code = sqlite3_errcode(db);
  std::string msg = std::string(what) + ": " + sqlite3_errmsg(db);
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) return {StatusCode::kDataLoss, msg};
  // The disk failed or filled up, or another process holds the file: the
  // store cannot take writes now and may again later (chronoqd: 503
  // store_unavailable, as for a PostgreSQL server that cannot be reached).
  if (code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_BUSY || code == SQLITE_LOCKED) {
    return {StatusCode::kUnavailable, std::move(msg), {}, StatusReason::kStoreUnavailable};
  }
  return Status::Internal(msg);
}

// The writer's transaction, between Store::Begin() and Commit() or
// Rollback(). After some errors inside a transaction (an I/O error, a full
// disk: SQLITE_IOERR, SQLITE_FULL, SQLITE_NOMEM) SQLite rolls the whole
// transaction back by itself and returns to autocommit. The engine does not
// know that: it goes on with the rest of its cycle, and each statement after
// the error would commit on its own, so that some operations of a cycle that
// answers "failed" would be durable, and the final COMMIT would fail with
// "no transaction is active", an Internal error (a 500). So once SQLite has
// rolled back, every later writer statement of the transaction is refused
// with the error that ended it, and so is the COMMIT: the whole cycle fails,
// as it does on PostgreSQL, where an aborted transaction ignores everything
// until its end.
//
// Rows SqliteStore::Insert writes behind wait for the next statement of the
// transaction: Stmt::Step writes them first (`flush`), so statements still
// run in the order they were asked for. A failure to write them fails the
// transaction as a rollback does.
struct Txn {
  bool open = false;
  Status lost;           // the error after which SQLite rolled the transaction back
  bool pending = false;  // rows written behind are waiting
  bool flushing = false;
  std::function<Status()> flush;  // writes them

  void Restart(bool now_open) {
    open = now_open;
    lost = Status();
    pending = false;
  }
  void Flush() {
    pending = false;
    flushing = true;
    Status s = flush();
    flushing = false;
    if (!s.ok() && lost.ok()) lost = std::move(s);
  }
};

// The nullable reads of a row's values, for anything with IsNull, Int and
// Text by column: a statement's result (Stmt) or a SQL function's arguments
// (FunctionArgs).
template <typename Values>
class NullableReads {
 public:
  std::optional<int64_t> OptInt(int c) const {
    return self().IsNull(c) ? std::nullopt : std::optional<int64_t>(self().Int(c));
  }
  std::optional<Timestamp> OptTime(int c) const {
    return self().IsNull(c) ? std::nullopt : std::optional<Timestamp>(FromMicros(self().Int(c)));
  }
  std::optional<std::string> OptText(int c) const {
    return self().IsNull(c) ? std::nullopt : std::optional<std::string>(self().Text(c));
  }

 private:
  const Values& self() const { return static_cast<const Values&>(*this); }
};

// A prepared statement that is reset (not finalized) between uses.
class Stmt : public NullableReads<Stmt> {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : db_(o.db_), txn_(o.txn_), s_(std::exchange(o.s_, nullptr)) {}
  ~Stmt() { sqlite3_finalize(s_); }

  // `txn`: the writer's transaction, for a statement that runs inside it
  // (see Txn); nullptr for readers and for BEGIN, COMMIT and ROLLBACK.
  Status Prepare(sqlite3* db, const std::string& sql, Txn* txn = nullptr) {
    db_ = db;
    txn_ = txn;
    if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) !=
        SQLITE_OK) {
      return SqlError(db, "prepare " + sql.substr(0, 60));
    }
    return {};
  }
  // Clears the previous use; call before binding.
  Stmt& Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, Timestamp t) { return Bind(i, Micros(t)); }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  template <typename T>
  Stmt& Bind(int i, const std::optional<T>& v) {
    if (v.has_value()) return Bind(i, *v);
    sqlite3_bind_null(s_, i);
    return *this;
  }
  Stmt& Bind(int i, const std::optional<Duration>& v) {
    if (v.has_value()) return Bind(i, static_cast<int64_t>(v->count()));
    sqlite3_bind_null(s_, i);
    return *this;
  }
  Stmt& Bind(int i, const std::optional<uint64_t>& v) {
    if (v.has_value()) return Bind(i, static_cast<int64_t>(*v));
    sqlite3_bind_null(s_, i);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE, or an error code (Error() says which).
  int Step() {
    if (txn_ != nullptr && txn_->pending && !txn_->flushing) txn_->Flush();
    if (txn_ != nullptr && !txn_->lost.ok()) return SQLITE_ABORT;  // not run: see Txn
    const int rc = sqlite3_step(s_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && txn_ != nullptr && txn_->open &&
        sqlite3_get_autocommit(db_)) {
      txn_->lost = SqlError(db_, "the transaction was rolled back");
    }
    return rc;
  }
  // The error of the last Step().
  Status Error(std::string_view what) const {
    if (txn_ != nullptr && !txn_->lost.ok()) return TxnError(*txn_, what);
    return SqlError(db_, what);
  }
  // The error of a statement of `txn` after SQLite rolled it back.
  static Status TxnError(const Txn& txn, std::string_view what) {
    return {txn.lost.code(), std::string(what) + ": " + txn.lost.message(), {}, txn.lost.reason()};
  }
  // Runs a statement that returns no rows.
  Status Run(std::string_view what) {
    const int rc = Step();
    sqlite3_reset(s_);
    if (rc != SQLITE_DONE) return Error(what);
    return {};
  }

  bool IsNull(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  int64_t Int(int c) const { return sqlite3_column_int64(s_, c); }
  std::string Text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string();
  }

  // Reads the CHRONOQ_TASK_COLS columns starting at column 0.
  TaskRow Row() const {
    TaskRow r;
    r.seq = Int(0);
    r.qid = Int(1);
    r.state = static_cast<TaskState>(Int(2));
    r.due = OptTime(3);
    r.priority = static_cast<int>(Int(4));
    r.attempt = static_cast<int>(Int(5));
    r.max_attempts = static_cast<int>(Int(6));
    r.payload = Text(7);
    r.name = OptText(8);
    r.run_at = OptTime(9);
    if (!IsNull(10)) r.token = static_cast<uint64_t>(Int(10));
    r.last_error = OptText(11);
    r.updated = OptTime(12);
    if (!IsNull(13)) r.backoff_base = Duration(Int(13));
    if (!IsNull(14)) r.backoff_cap = Duration(Int(14));
    r.target = OptText(15);
    r.response = OptText(16);
    r.sid = OptInt(17);
    r.key = OptText(18);
    r.worker = OptText(19);
    r.claimed = OptTime(20);
    r.node = OptText(21);
    r.attempts = OptText(22);
    return r;
  }

 private:
  sqlite3* db_ = nullptr;
  Txn* txn_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
};

// A SQL function's arguments, read as a statement's columns are.
class FunctionArgs : public NullableReads<FunctionArgs> {
 public:
  explicit FunctionArgs(sqlite3_value** argv) : argv_(argv) {}
  bool IsNull(int c) const { return sqlite3_value_type(argv_[c]) == SQLITE_NULL; }
  int64_t Int(int c) const { return sqlite3_value_int64(argv_[c]); }
  std::string Text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(argv_[c]));
    return p ? std::string(p, static_cast<size_t>(sqlite3_value_bytes(argv_[c]))) : std::string();
  }

 private:
  sqlite3_value** argv_;
};

// A claim's rows as its UPDATE writes them. The UPDATE sets its worker column
// through chronoq_claimed(worker, <the old row's CHRONOQ_CLAIMING_ARGS>),
// which returns the worker and appends the row as claimed to the capture in
// effect: reading the claimed rows back with a SELECT walked them a second
// time (a sixth of W2's engine loop), while the UPDATE reads every column of
// each row anyway.
#define CHRONOQ_CLAIMING_ARGS                                                             \
  "seq, qid, prio, attempt, max_attempts, payload, name, due, last_error, backoff_base, " \
  "backoff_cap, target, response, sid, key"
struct ClaimCapture {
  std::vector<TaskRow>* rows = nullptr;  // nullptr: no claim is running
  Timestamp lease_until;
  uint64_t token = 0;
  Timestamp now;
  const std::string* worker = nullptr;
};
constexpr int kClaimingArgs = 16;  // the worker and CHRONOQ_CLAIMING_ARGS

void ClaimedFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* capture = static_cast<ClaimCapture*>(sqlite3_user_data(ctx));
  if (capture->rows == nullptr || argc != kClaimingArgs) {
    sqlite3_result_error(ctx, "chronoq_claimed() runs only in a claim's UPDATE", -1);
    return;
  }
  const FunctionArgs a(argv + 1);
  try {
    TaskRow& r = capture->rows->emplace_back();
    r.seq = a.Int(0);
    r.qid = a.Int(1);
    r.state = TaskState::kRunning;
    r.due = capture->lease_until;
    r.priority = static_cast<int>(a.Int(2));
    r.attempt = static_cast<int>(a.Int(3)) + 1;
    r.max_attempts = static_cast<int>(a.Int(4));
    r.payload = a.Text(5);
    r.name = a.OptText(6);
    r.run_at = a.OptTime(7);
    r.token = capture->token;
    r.last_error = a.OptText(8);
    r.updated = capture->now;
    if (!a.IsNull(9)) r.backoff_base = Duration(a.Int(9));
    if (!a.IsNull(10)) r.backoff_cap = Duration(a.Int(10));
    r.target = a.OptText(11);
    r.response = a.OptText(12);
    r.sid = a.OptInt(13);
    r.key = a.OptText(14);
    if (!capture->worker->empty()) r.worker = *capture->worker;
  } catch (const std::bad_alloc&) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_value(ctx, argv[0]);
}

// Runs `stmt` expecting at most one row; `read` converts it.
template <typename T, typename F>
Result<std::optional<T>> QueryOne(Stmt& stmt, std::string_view what, F read) {
  const int rc = stmt.Step();
  if (rc == SQLITE_DONE) {
    stmt.Reset();
    return std::optional<T>();
  }
  if (rc != SQLITE_ROW) {
    Status s = stmt.Error(what);
    stmt.Reset();
    return s;
  }
  std::optional<T> out = read(stmt);
  stmt.Reset();
  return out;
}

// Runs `sql` (any number of statements). Its error is classified as
// SqlError does: a disk that fails while the store opens (EIO, ENOSPC) is
// Unavailable, as it is for any later statement, not Internal.
Status Exec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(db, std::string(sql).substr(0, 60));
  }
  return {};
}

// `vfs`: SqliteOptions::vfs (empty: the default).
Result<sqlite3*> OpenConnection(const std::string& path, bool writer, const std::string& vfs) {
  sqlite3* db = nullptr;
  const int flags = writer ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) : SQLITE_OPEN_READWRITE;
  if (sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX,
                      vfs.empty() ? nullptr : vfs.c_str()) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::Unavailable("cannot open " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(SqliteTuning tuning) : tuning_(tuning) {}
  ~SqliteStore() override {
    {
      MutexLock lock(checkpoint_mu_);
      stop_checkpointer_ = true;
    }
    checkpoint_cv_.notify_one();
    if (checkpointer_.joinable()) checkpointer_.join();
    sqlite3_close(checkpoint_db_);
    // close_v2 lets the connections linger until the statement members are
    // finalized, which happens right after this body.
    sqlite3_close_v2(writer_);
    sqlite3_close_v2(reader_);
    if (lock_fd_ >= 0) close(lock_fd_);  // releases the lock
  }

  Status Open(const std::string& path, Durability durability, const std::string& vfs) {
    std::error_code ec;
    const auto dir = std::filesystem::path(path).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) return Status::Unavailable("cannot create " + dir.string() + ": " + ec.message());

    CHRONOQ_RETURN_IF_ERROR(LockExclusively(path));
    CHRONOQ_ASSIGN_OR_RETURN(writer_, OpenConnection(path, /*writer=*/true, vfs));
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, "PRAGMA journal_mode=WAL"));
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, durability == Durability::kFull
                                              ? "PRAGMA synchronous=FULL"
                                              : "PRAGMA synchronous=NORMAL"));
    // 64 MiB of page cache keeps the hot part of the due index in memory.
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, "PRAGMA cache_size=-65536; PRAGMA temp_store=MEMORY"));
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, kJournalSizeLimit));
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, kSchema));
    CHRONOQ_RETURN_IF_ERROR(Migrate());
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, kKeyIndexes));
    CHRONOQ_ASSIGN_OR_RETURN(reader_, OpenConnection(path, /*writer=*/false, vfs));
    CHRONOQ_RETURN_IF_ERROR(Exec(reader_, "PRAGMA query_only=1"));
    CHRONOQ_ASSIGN_OR_RETURN(checkpoint_db_, OpenConnection(path, /*writer=*/false, vfs));
    CHRONOQ_RETURN_IF_ERROR(Exec(checkpoint_db_, kJournalSizeLimit));
    // Direct only: no trigger or view can call it.
    if (sqlite3_create_function_v2(writer_, "chronoq_claimed", kClaimingArgs,
                                   SQLITE_UTF8 | SQLITE_DIRECTONLY, &claim_capture_,
                                   &ClaimedFunction, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqlError(writer_, "create chronoq_claimed()");
    }
    // Replaces SQLite's automatic checkpoint on the writer.
    sqlite3_wal_hook(writer_, &SqliteStore::OnWalCommit, this);
    checkpointer_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "chronoq-ckpt");
      Checkpointer();
    });
    return Prepare();
  }

  // The engine keeps the near future, the counts and the sequence in memory
  // and assumes it is the store's only writer: a second engine (another
  // chronoqd on the same --data, or a second Engine::Open in one process)
  // would silently break both. "<path>.lock" is held with flock() for the
  // store's life; the kernel drops it when the process dies, so a crash
  // never leaves it stale. (Not the database file itself: closing any other
  // descriptor of it would drop SQLite's own POSIX locks.)
  Status LockExclusively(const std::string& path) {
    const std::string lock_path = path + ".lock";
    lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) {
      return Status::Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
    }
    if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(lock_fd_);
      lock_fd_ = -1;
      if (err == EWOULDBLOCK) {
        return Status::FailedPrecondition(path + " is open in another chronoq engine (" +
                                          lock_path +
                                          " is locked); the embedded store has one writer process");
      }
      return Status::Unavailable("cannot lock " + lock_path + ": " + std::strerror(err));
    }
    return {};
  }

  // Brings an older database up to kSchemaVersion, all or nothing. A newer
  // one is left alone (LoadMeta refuses it).
  Status Migrate() {
    // Rebuilding an index sorts every row: with temp_store=MEMORY that sort
    // held ~670 MiB for 10 million tasks; on disk it holds a few MiB.
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, "PRAGMA temp_store=FILE"));
    Status s = MigrateInTransaction();
    Status restore = Exec(writer_, "PRAGMA temp_store=MEMORY");
    return s.ok() ? restore : s;
  }

  Status MigrateInTransaction() {
    CHRONOQ_RETURN_IF_ERROR(Exec(writer_, "BEGIN IMMEDIATE"));
    Stmt q;
    Status s = q.Prepare(writer_, "SELECT v FROM meta WHERE k='schema'");
    int64_t version = kSchemaVersion;
    if (s.ok()) {
      if (q.Step() == SQLITE_ROW) {
        version = q.Int(0);
      } else {
        s = WriterError("read schema version");
      }
      q.Reset();
    }
    if (s.ok() && version >= 1 && version < kSchemaVersion) {
      spdlog::info("migrating the database from schema {} to {}", version, kSchemaVersion);
    }
    // Step i takes a schema-(i + 1) database to schema i + 2.
    const std::string from7 = MigrateFrom7();
    const char* const steps[] = {kMigrateFrom1, kMigrateFrom2,  kMigrateFrom3, kMigrateFrom4,
                                 kMigrateFrom5, kMigrateFrom6,  from7.c_str(), kMigrateFrom8,
                                 kMigrateFrom9, kMigrateFrom10, kMigrateFrom11};
    static_assert(std::size(steps) == kSchemaVersion - 1, "one step per older schema");
    for (; s.ok() && version >= 1 && version < kSchemaVersion; ++version) {
      s = Exec(writer_, steps[version - 1]);
    }
    if (s.ok()) s = Exec(writer_, "COMMIT");
    if (!s.ok()) Exec(writer_, "ROLLBACK").IgnoreError();
    return s;
  }

  Result<StoreMeta> LoadMeta() override {
    StoreMeta meta;
    Stmt q;
    CHRONOQ_RETURN_IF_ERROR(q.Prepare(writer_,
                                      "SELECT (SELECT v FROM meta WHERE k='schema'),"
                                      " (SELECT v FROM meta WHERE k='next_token'),"
                                      " (SELECT max(seq) FROM tasks)"));
    if (q.Step() != SQLITE_ROW) return WriterError("load meta");
    if (q.Int(0) != kSchemaVersion) {
      return Status(StatusCode::kFailedPrecondition,
                    "database schema version " + std::to_string(q.Int(0)) +
                        " is not supported (expected " + std::to_string(kSchemaVersion) + ")");
    }
    meta.next_token = static_cast<uint64_t>(q.Int(1));
    meta.max_seq = q.Int(2);
    return meta;
  }

  Status Begin() override {
    CHRONOQ_RETURN_IF_ERROR(w_.begin.Reset().Run("begin"));
    txn_.Restart(true);
    return {};
  }
  Status Commit() override {
    if (txn_.pending) txn_.Flush();
    // SQLite rolled the transaction back: nothing of it may be reported
    // committed (the engine rolls back and rebuilds its memory).
    if (!txn_.lost.ok()) return Stmt::TxnError(txn_, "commit");
    CHRONOQ_RETURN_IF_ERROR(w_.commit.Reset().Run("commit"));
    txn_.Restart(false);
    return {};
  }
  void Rollback() override {
    behind_.clear();
    txn_.pending = false;
    if (!sqlite3_get_autocommit(writer_)) w_.rollback.Reset().Run("rollback").IgnoreError();
    txn_.Restart(false);
  }
  Status Savepoint() override { return w_.savepoint.Reset().Run("savepoint"); }
  Status ReleaseSavepoint() override { return w_.release.Reset().Run("release"); }
  void RollbackToSavepoint() override {
    w_.rollback_to.Reset().Run("rollback to").IgnoreError();
    w_.release.Reset().Run("release").IgnoreError();
  }

  Result<int64_t> QueueId(const std::string& name) override {
    CHRONOQ_ASSIGN_OR_RETURN(std::optional<int64_t> qid,
                             (QueryOne<int64_t>(w_.queue_id.Reset().Bind(1, name), "queue id",
                                                [](const Stmt& s) { return s.Int(0); })));
    if (qid.has_value()) return *qid;
    CHRONOQ_RETURN_IF_ERROR(w_.queue_add.Reset().Bind(1, name).Run("add queue"));
    return static_cast<int64_t>(sqlite3_last_insert_rowid(writer_));
  }

  Result<std::vector<QueueRow>> Queues() override {
    std::vector<QueueRow> out;
    Stmt& s = w_.queues.Reset();
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      QueueRow q;
      q.qid = s.Int(0);
      q.name = s.Text(1);
      q.paused = s.Int(2) != 0;
      if (!s.IsNull(3)) q.settings.concurrency = static_cast<int>(s.Int(3));
      if (!s.IsNull(4)) q.settings.max_attempts = static_cast<int>(s.Int(4));
      if (!s.IsNull(5) && !s.IsNull(6)) {
        q.settings.backoff = Backoff{Duration(s.Int(5)), Duration(s.Int(6))};
      }
      if (!s.IsNull(7)) q.settings.retention = Duration(s.Int(7));
      for (int i = 0; i < 5; ++i) q.counts[static_cast<size_t>(i)] = s.Int(8 + i);
      q.webhooks = s.Int(13) != 0;
      if (!s.IsNull(14) && !s.IsNull(15)) {
        q.settings.rate_limit = RateLimit{static_cast<int>(s.Int(14)), Duration(s.Int(15))};
      }
      if (!s.IsNull(16)) q.settings.max_in_flight_per_key = static_cast<int>(s.Int(16));
      q.settings.max_pending_per_key = s.OptInt(17);
      q.settings.final_statuses = DecodeStatuses(s.OptText(18));
      out.push_back(std::move(q));
    }
    s.Reset();
    if (rc != SQLITE_DONE) return WriterError("list queues");
    return out;
  }

  Status SaveQueueSettings(int64_t qid, const QueueSettings& q, bool paused,
                           bool webhooks) override {
    Stmt& s = w_.queue_settings.Reset();
    s.Bind(1, qid).Bind(2, int64_t{paused ? 1 : 0}).Bind(8, int64_t{webhooks ? 1 : 0});
    if (q.concurrency) s.Bind(3, static_cast<int64_t>(*q.concurrency));
    if (q.max_attempts) s.Bind(4, static_cast<int64_t>(*q.max_attempts));
    if (q.backoff) {
      s.Bind(5, static_cast<int64_t>(q.backoff->base.count()));
      s.Bind(6, static_cast<int64_t>(q.backoff->cap.count()));
    }
    if (q.retention) s.Bind(7, static_cast<int64_t>(q.retention->count()));
    if (q.rate_limit) {
      s.Bind(9, static_cast<int64_t>(q.rate_limit->count));
      s.Bind(10, static_cast<int64_t>(q.rate_limit->period.count()));
    }
    if (q.max_in_flight_per_key) s.Bind(11, static_cast<int64_t>(*q.max_in_flight_per_key));
    s.Bind(12, q.max_pending_per_key);
    const std::optional<std::string> statuses = EncodeStatuses(q.final_statuses);
    s.Bind(13, statuses);
    return s.Run("save queue settings");
  }

  Status SaveQueueCounts(int64_t qid, const std::array<int64_t, 5>& counts) override {
    Stmt& s = w_.queue_counts.Reset().Bind(1, qid);
    for (int i = 0; i < 5; ++i) s.Bind(2 + i, counts[static_cast<size_t>(i)]);
    return s.Run("save queue counts");
  }

  Result<bool> Insert(const TaskRow& r) override {
    // A row without a client-chosen id cannot be refused, and one without a
    // key moves no key cursor: inside a transaction it is written behind,
    // kRowsPerInsert rows to a statement (docs/BENCHMARKS.md, "Inserts
    // written behind").
    if (txn_.open && !r.name && !r.key) {
      behind_.push_back(r);
      txn_.pending = true;
      if (behind_.size() >= kRowsPerInsert) {
        txn_.Flush();
        if (!txn_.lost.ok()) return Stmt::TxnError(txn_, "insert tasks");
      }
      return true;
    }
    Stmt& s = w_.insert.Reset();
    BindAll(s, r);
    const int rc = s.Step();
    s.Reset();
    if (rc == SQLITE_DONE) {
      if (r.key) CHRONOQ_RETURN_IF_ERROR(LowerKeyCursor(r.seq));
      return true;
    }
    if (sqlite3_extended_errcode(writer_) == SQLITE_CONSTRAINT_UNIQUE) return false;
    return WriterError("insert task");
  }

  // Txn::flush: the rows Insert wrote behind, kRowsPerInsert to a statement,
  // then one by one. Its statements are its own: it runs inside another
  // statement's Step, which may be Insert's.
  Status WriteBehind() {
    Status s;
    size_t i = 0;
    for (; s.ok() && behind_.size() - i >= kRowsPerInsert; i += kRowsPerInsert) {
      Stmt& insert = w_.insert_many.Reset();
      for (size_t k = 0; k < kRowsPerInsert; ++k) {
        BindAll(insert, behind_[i + k], static_cast<int>(k) * kInsertParams);
      }
      s = insert.Run("insert tasks");
    }
    for (; s.ok() && i < behind_.size(); ++i) {
      Stmt& insert = w_.insert_behind.Reset();
      BindAll(insert, behind_[i]);
      s = insert.Run("insert task");
    }
    behind_.clear();
    return s;
  }

  Status Overwrite(const TaskRow& r) override {
    Stmt& s = w_.overwrite.Reset();
    BindAll(s, r);
    CHRONOQ_RETURN_IF_ERROR(s.Run("overwrite task"));
    return r.key ? LowerKeyCursor(r.seq) : Status();
  }

  Status Delete(int64_t seq) override {
    using Gone = std::pair<int64_t, std::optional<std::string>>;
    CHRONOQ_ASSIGN_OR_RETURN(
        std::optional<Gone> gone,
        (QueryOne<Gone>(w_.remove.Reset().Bind(1, seq), "delete task",
                        [](const Stmt& st) { return Gone(st.Int(0), st.OptText(1)); })));
    if (gone && gone->second) return DropKeyCursor(gone->first, *gone->second);
    return {};
  }

  Result<std::optional<TaskRow>> FindBySeq(int64_t seq) override {
    return QueryOne<TaskRow>(w_.by_seq.Reset().Bind(1, seq), "find task",
                             [](const Stmt& s) { return s.Row(); });
  }
  Result<std::optional<TaskRow>> FindByName(const std::string& name) override {
    return QueryOne<TaskRow>(w_.by_name.Reset().Bind(1, name), "find task",
                             [](const Stmt& s) { return s.Row(); });
  }

  Result<std::vector<TaskRow>> MarkRunningMany(const std::vector<int64_t>& seqs,
                                               Timestamp lease_until, uint64_t token, Timestamp now,
                                               const std::string& worker,
                                               const std::string& node) override {
    std::vector<TaskRow> out;
    out.reserve(seqs.size());
    // The UPDATE hands over each row it claims (ClaimedFunction).
    claim_capture_ = {&out, lease_until, token, now, &worker};
    Status status = ForEachSeqSet(seqs, [&](SeqSet set, const auto& bind) -> Status {
      Stmt& update = w_.mark_running[set].Reset();
      update.Bind(1, lease_until).Bind(2, static_cast<int64_t>(token)).Bind(3, now);
      if (!worker.empty()) update.Bind(4, worker);  // else NULL
      if (!node.empty()) update.Bind(5, node);
      bind(update, 6);
      return update.Run("claim tasks");
    });
    claim_capture_ = {};
    if (!status.ok()) return status;
    return out;
  }

  Status Move(const Transition& t) override {
    Stmt& s = w_.move.Reset();
    s.Bind(1, t.seq).Bind(2, static_cast<int64_t>(t.state)).Bind(3, t.due).Bind(4, t.last_error);
    if (t.attempt.has_value()) s.Bind(5, static_cast<int64_t>(*t.attempt));
    s.Bind(6, t.now).Bind(7, t.attempts);
    CHRONOQ_RETURN_IF_ERROR(s.Run("update task"));
    return t.keyed && t.state == TaskState::kScheduled ? LowerKeyCursor(t.seq) : Status();
  }

  Status MarkSucceeded(const std::vector<int64_t>& seqs, Timestamp purge_at,
                       Timestamp now) override {
    return ForEachSeqSet(seqs, [&](SeqSet set, const auto& bind) {
      Stmt& s = w_.mark_succeeded[set].Reset().Bind(1, purge_at).Bind(2, now);
      bind(s, 3);
      return s.Run("acknowledge tasks");
    });
  }

  Status SetDue(int64_t seq, Timestamp due, Timestamp now) override {
    return w_.set_due.Reset().Bind(1, seq).Bind(2, due).Bind(3, now).Run("extend lease");
  }
  Status SetResponse(int64_t seq, const std::optional<std::string>& response) override {
    return w_.set_response.Reset().Bind(1, seq).Bind(2, response).Run("set response");
  }
  Status SetPayload(int64_t seq, const std::string& payload) override {
    return w_.set_payload.Reset().Bind(1, seq).Bind(2, payload).Run("set payload");
  }
  Status SaveNextToken(uint64_t next_token) override {
    return w_.save_token.Reset().Bind(1, static_cast<int64_t>(next_token)).Run("save token");
  }

  Result<std::vector<DueEntry>> LoadScheduled(int64_t from_bucket, int64_t after_seq,
                                              int64_t to_bucket, int limit) override {
    std::vector<DueEntry> out;
    Stmt& s = w_.load_scheduled.Reset().Bind(1, from_bucket).Bind(2, to_bucket);
    s.Bind(3, static_cast<int64_t>(limit)).Bind(4, after_seq);
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      out.push_back(DueEntryOf(s));
      out.back().key = s.OptText(4);
      out.back().started = s.Int(5) > 0;
    }
    s.Reset();
    if (rc != SQLITE_DONE) return WriterError("load window");
    return out;
  }

  Result<std::optional<int64_t>> NextScheduledBucket(int64_t from_bucket) override {
    return QueryOne<int64_t>(w_.next_scheduled.Reset().Bind(1, from_bucket), "next due",
                             [](const Stmt& s) { return s.Int(0); });
  }

  Result<std::vector<DueEntry>> KeyHeads(int64_t qid, const std::string& key,
                                         const std::optional<KeyPosition>& after,
                                         int limit) override {
    CHRONOQ_ASSIGN_OR_RETURN(const KeyPosition from, KeySearchStart(qid, key, after));
    std::vector<DueEntry> out;
    for (Stmt* s : {&w_.key_head_same, &w_.key_head_next}) {
      if (static_cast<int>(out.size()) >= limit) break;
      BindKeySearch(s->Reset(), qid, key, from);
      s->Bind(6, static_cast<int64_t>(limit) - static_cast<int64_t>(out.size()));
      int rc;
      while ((rc = s->Step()) == SQLITE_ROW) out.push_back(DueEntryOf(*s));
      s->Reset();
      if (rc != SQLITE_DONE) return WriterError("key heads");
    }
    return out;
  }
  Result<int64_t> CountKeyPending(int64_t qid, const std::string& key,
                                  const std::optional<KeyPosition>& after) override {
    CHRONOQ_ASSIGN_OR_RETURN(const KeyPosition from, KeySearchStart(qid, key, after));
    int64_t total = 0;
    for (Stmt* s : {&w_.key_pending_same, &w_.key_pending_next}) {
      BindKeySearch(s->Reset(), qid, key, from);
      CHRONOQ_ASSIGN_OR_RETURN(
          std::optional<int64_t> n,
          (QueryOne<int64_t>(*s, "count key backlog", [](const Stmt& st) { return st.Int(0); })));
      total += n.value_or(0);
    }
    return total;
  }
  Status SaveKeyCursor(int64_t qid, const std::string& key, const KeyPosition& at) override {
    CHRONOQ_ASSIGN_OR_RETURN(std::optional<KeyPosition> saved, SavedKeyCursor(qid, key));
    if (saved && !(*saved < at)) return {};  // never backwards
    return w_.key_cursor_save.Reset()
        .Bind(1, qid)
        .Bind(2, key)
        .Bind(3, at.at)
        .Bind(4, static_cast<int64_t>(at.priority))
        .Bind(5, at.seq)
        .Run("save key cursor");
  }
  Result<std::vector<std::pair<int64_t, std::string>>> LoadKeyRetries() override {
    std::vector<std::pair<int64_t, std::string>> out;
    Stmt& s = w_.key_retries.Reset();
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.emplace_back(s.Int(0), s.Text(1));
    s.Reset();
    if (rc != SQLITE_DONE) return WriterError("load keyed retries");
    return out;
  }

  Result<std::vector<TaskRow>> LoadRunning() override {
    std::vector<TaskRow> out;
    Stmt& s = w_.load_running.Reset();
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(s.Row());
    s.Reset();
    if (rc != SQLITE_DONE) return WriterError("load running");
    return out;
  }

  Result<Purged> PurgeFinished(Timestamp before, int limit) override {
    Purged out;
    std::set<std::pair<int64_t, std::string>> keys;
    Stmt& s = w_.purge.Reset().Bind(1, before).Bind(2, limit).Bind(3, DueBucket(before));
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      ++out.rows;
      const int64_t qid = s.Int(0);
      const auto state = static_cast<TaskState>(s.Int(1));
      if (std::optional<std::string> key = s.OptText(2)) keys.emplace(qid, std::move(*key));
      // A chunk is usually of one or two queues: a linear search is enough.
      auto it = std::find_if(out.by_queue.begin(), out.by_queue.end(), [&](const Purged::Count& c) {
        return c.qid == qid && c.state == state;
      });
      if (it == out.by_queue.end()) {
        out.by_queue.push_back({qid, state, 1});
      } else {
        ++it->n;
      }
    }
    s.Reset();
    if (rc != SQLITE_DONE) return WriterError("purge");
    for (const auto& [qid, key] : keys) CHRONOQ_RETURN_IF_ERROR(DropKeyCursor(qid, key));
    return out;
  }

  // --- key cursors (store.h) ---
  // Where a key's tasks waiting to start are searched from: after `after`,
  // else after the saved cursor, else from the start.
  Result<KeyPosition> KeySearchStart(int64_t qid, const std::string& key,
                                     std::optional<KeyPosition> after) {
    if (!after) {
      CHRONOQ_ASSIGN_OR_RETURN(after, SavedKeyCursor(qid, key));
    }
    return after.value_or(KeyPosition{Timestamp::min(), std::numeric_limits<int>::min(), 0});
  }
  static void BindKeySearch(Stmt& s, int64_t qid, const std::string& key,
                            const KeyPosition& after) {
    s.Bind(1, qid).Bind(2, key).Bind(3, after.at);
    s.Bind(4, static_cast<int64_t>(after.priority)).Bind(5, after.seq);
  }
  Result<std::optional<KeyPosition>> SavedKeyCursor(int64_t qid, const std::string& key) {
    return QueryOne<KeyPosition>(w_.key_cursor.Reset().Bind(1, qid).Bind(2, key), "read key cursor",
                                 [](const Stmt& st) {
                                   return KeyPosition{Timestamp(Duration(st.Int(0))),
                                                      static_cast<int>(st.Int(1)), st.Int(2)};
                                 });
  }
  Status LowerKeyCursor(int64_t seq) {
    return w_.key_cursor_lower.Reset().Bind(1, seq).Run("move key cursor back");
  }
  Status DropKeyCursor(int64_t qid, const std::string& key) {
    return w_.key_cursor_drop.Reset().Bind(1, qid).Bind(2, key).Run("drop key cursor");
  }

  Result<std::optional<Timestamp>> NextPurgeDue() override {
    std::optional<Timestamp> best;
    for (TaskState st : {TaskState::kSucceeded, TaskState::kCancelled}) {
      CHRONOQ_ASSIGN_OR_RETURN(
          std::optional<Timestamp> t,
          (QueryOne<Timestamp>(w_.next_purge.Reset().Bind(1, static_cast<int64_t>(st)),
                               "next purge", [](const Stmt& s) { return BucketStart(s.Int(0)); })));
      if (t && (!best || *t < *best)) best = t;
    }
    return best;
  }

  Result<std::optional<int64_t>> InsertSchedule(const ScheduleRow& r) override {
    Stmt& s = w_.schedule_insert.Reset();
    BindSchedule(s, r);
    const int rc = s.Step();
    s.Reset();
    if (rc == SQLITE_DONE) return std::optional<int64_t>(sqlite3_last_insert_rowid(writer_));
    if (sqlite3_extended_errcode(writer_) == SQLITE_CONSTRAINT_UNIQUE) {
      return std::optional<int64_t>();
    }
    return WriterError("insert schedule");
  }
  Status SaveSchedule(const ScheduleRow& r) override {
    Stmt& s = w_.schedule_save.Reset().Bind(1, r.sid);
    BindSchedule(s, r);
    return s.Run("save schedule");
  }
  Status DeleteSchedule(int64_t sid) override {
    return w_.schedule_delete.Reset().Bind(1, sid).Run("delete schedule");
  }
  Result<std::optional<ScheduleRow>> FindSchedule(int64_t sid) override {
    return QueryOne<ScheduleRow>(w_.schedule_by_sid.Reset().Bind(1, sid), "find schedule",
                                 ScheduleRowOf);
  }
  Result<std::optional<ScheduleRow>> FindScheduleByName(const std::string& name) override {
    return QueryOne<ScheduleRow>(w_.schedule_by_name.Reset().Bind(1, name), "find schedule",
                                 ScheduleRowOf);
  }
  Result<std::vector<ScheduleRow>> SchedulesDueBefore(Timestamp before, int64_t after_sid,
                                                      int limit) override {
    Stmt& s = w_.schedules_due.Reset().Bind(1, before).Bind(2, after_sid);
    return ScheduleRows(s.Bind(3, static_cast<int64_t>(limit)), "schedules due");
  }
  Result<std::vector<ScheduleRow>> ListSchedules(std::optional<int64_t> qid,
                                                 const std::string& after_name,
                                                 int limit) override {
    Stmt& s = w_.schedules_list.Reset().Bind(1, after_name).Bind(2, qid);
    return ScheduleRows(s.Bind(3, static_cast<int64_t>(limit)), "list schedules");
  }

  Status SaveLock(const LockRow& r) override {
    Stmt& s = w_.lock_save.Reset().Bind(1, r.key).Bind(2, static_cast<int64_t>(r.token));
    return s.Bind(3, r.owner).Bind(4, r.expires).Run("save lock");
  }
  Status DeleteLock(const std::string& key) override {
    return w_.lock_delete.Reset().Bind(1, key).Run("delete lock");
  }
  Result<std::vector<LockRow>> LoadLocks() override {
    std::vector<LockRow> out;
    Stmt& s = w_.locks.Reset();
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      out.push_back({s.Text(0), static_cast<uint64_t>(s.Int(1)), s.Text(2), FromMicros(s.Int(3))});
    }
    s.Reset();
    if (rc != SQLITE_DONE) return WriterError("load locks");
    return out;
  }

  Result<std::optional<ReadRow>> ReadBySeq(int64_t seq) override {
    MutexLock lock(reader_mu_);
    return QueryOne<ReadRow>(r_.by_seq.Reset().Bind(1, seq), "read task", ReadRowOf);
  }
  Result<std::optional<ReadRow>> ReadByName(const std::string& name) override {
    MutexLock lock(reader_mu_);
    return QueryOne<ReadRow>(r_.by_name.Reset().Bind(1, name), "read task", ReadRowOf);
  }

  Result<std::vector<ReadRow>> List(const ListQuery& q) override {
    std::string sql = CHRONOQ_READ_COLS;
    const bool by_due = !q.by_seq && q.state.has_value() && *q.state != TaskState::kDead;
    // By seq, the unary + keeps the planner off the state, key and name
    // indexes: from one of them it would sort every matching row per page.
    const char* plus = q.by_seq ? "+" : "";
    if (q.state.has_value()) {
      sql += std::string(plus) + "t.state = ?1 AND ";
      // The term that lets the planner read the state's partial index.
      if (!q.by_seq) {
        const bool running = *q.state == TaskState::kRunning;
        sql += running ? "t.state = 1 AND " : "t." CHRONOQ_NOT_RUNNING " AND ";
      }
    }
    if (by_due) {
      sql += "(" CHRONOQ_BUCKET " > ?2 OR (" CHRONOQ_BUCKET " = ?2 AND t.seq > ?3))";
    } else {
      sql += "t.seq > ?3";
    }
    if (q.queue.has_value()) sql += " AND q.name = ?4";
    if (q.key.has_value()) sql += std::string(" AND ") + plus + "t.key = ?6";
    if (q.min_seq > 0) sql += " AND t.seq >= ?7";
    if (q.max_seq < INT64_MAX) sql += " AND t.seq <= ?8";
    if (q.generated_only) sql += " AND t.name IS NULL";
    std::optional<std::string> name_end;
    if (q.name_prefix.has_value()) {
      sql += std::string(" AND ") + plus + "t.name >= ?9";
      name_end = PrefixEnd(*q.name_prefix);
      if (name_end) sql += std::string(" AND ") + plus + "t.name < ?10";
    }
    sql += by_due ? " ORDER BY " CHRONOQ_BUCKET ", t.seq" : " ORDER BY t.seq";
    sql += " LIMIT ?5";

    MutexLock lock(reader_mu_);
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(s.Prepare(reader_, sql));
    if (q.state.has_value()) s.Bind(1, static_cast<int64_t>(*q.state));
    s.Bind(2, q.after_bucket).Bind(3, q.after_seq).Bind(5, static_cast<int64_t>(q.limit));
    if (q.queue.has_value()) s.Bind(4, *q.queue);
    if (q.key.has_value()) s.Bind(6, *q.key);
    if (q.min_seq > 0) s.Bind(7, q.min_seq);
    if (q.max_seq < INT64_MAX) s.Bind(8, q.max_seq);
    if (q.name_prefix.has_value()) s.Bind(9, *q.name_prefix);
    if (name_end) s.Bind(10, *name_end);
    std::vector<ReadRow> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(*ReadRowOf(s));
    if (rc != SQLITE_DONE) return SqlError(reader_, "list tasks");
    return out;
  }

  Result<std::vector<KeyBacklog>> KeyBacklogs(const std::string& queue, int limit) override {
    MutexLock lock(reader_mu_);
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(
        s.Prepare(reader_,
                  "SELECT t.key, count(*) FROM tasks t JOIN queues q ON q.qid = t.qid"
                  " WHERE q.name = ?1 AND t.key IS NOT NULL AND t.state = 0"
                  " GROUP BY t.key ORDER BY count(*) DESC, t.key LIMIT ?2"));
    s.Bind(1, queue).Bind(2, static_cast<int64_t>(limit));
    std::vector<KeyBacklog> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), s.Int(1)});
    if (rc != SQLITE_DONE) return SqlError(reader_, "count key backlogs");
    return out;
  }

  // --- copying a whole store (store.h) ---
  // Statements are prepared per call: a copy makes one call per batch of
  // thousands of rows, and an engine never makes any.
  Result<RowCounts> CountRows() override {
    RowCounts counts;
    Stmt by_state;
    CHRONOQ_RETURN_IF_ERROR(
        by_state.Prepare(writer_, "SELECT state, count(*) FROM tasks GROUP BY state"));
    int rc;
    while ((rc = by_state.Step()) == SQLITE_ROW) {
      const int64_t state = by_state.Int(0);
      if (state < 0 || state >= static_cast<int64_t>(counts.tasks.size())) {
        return Status(StatusCode::kDataLoss, "a task has unknown state " + std::to_string(state));
      }
      counts.tasks[static_cast<size_t>(state)] = by_state.Int(1);
    }
    if (rc != SQLITE_DONE) return WriterError("count tasks");
    Stmt tables;
    CHRONOQ_RETURN_IF_ERROR(
        tables.Prepare(writer_,
                       "SELECT (SELECT count(*) FROM queues), (SELECT count(*) FROM schedules),"
                       " (SELECT count(*) FROM locks), (SELECT count(*) FROM key_cursors)"));
    if (tables.Step() != SQLITE_ROW) return WriterError("count rows");
    counts.queues = tables.Int(0);
    counts.schedules = tables.Int(1);
    counts.locks = tables.Int(2);
    counts.key_cursors = tables.Int(3);
    return counts;
  }

  // The last sid is AUTOINCREMENT's: sqlite_sequence keeps the largest sid
  // ever inserted, so a deleted schedule's id is never handed out again.
  Result<CopyMeta> ExportMeta() override {
    Stmt q;
    CHRONOQ_RETURN_IF_ERROR(
        q.Prepare(writer_,
                  "SELECT (SELECT v FROM meta WHERE k='next_token'),"
                  " coalesce((SELECT seq FROM sqlite_sequence WHERE name='schedules'), 0)"));
    if (q.Step() != SQLITE_ROW) return WriterError("export meta");
    return CopyMeta{static_cast<uint64_t>(q.Int(0)), q.Int(1)};
  }
  Status ImportMeta(const CopyMeta& meta) override {
    Stmt token;
    CHRONOQ_RETURN_IF_ERROR(
        token.Prepare(writer_, "UPDATE meta SET v=max(v, ?1) WHERE k='next_token'"));
    CHRONOQ_RETURN_IF_ERROR(
        token.Bind(1, static_cast<int64_t>(meta.next_token)).Run("import next token"));
    Stmt add_sid, raise_sid;
    CHRONOQ_RETURN_IF_ERROR(
        add_sid.Prepare(writer_,
                        "INSERT INTO sqlite_sequence(name, seq) SELECT 'schedules', ?1"
                        " WHERE NOT EXISTS(SELECT 1 FROM sqlite_sequence WHERE name='schedules')"));
    CHRONOQ_RETURN_IF_ERROR(add_sid.Bind(1, meta.last_sid).Run("import last schedule id"));
    CHRONOQ_RETURN_IF_ERROR(raise_sid.Prepare(
        writer_, "UPDATE sqlite_sequence SET seq=max(seq, ?1) WHERE name='schedules'"));
    return raise_sid.Bind(1, meta.last_sid).Run("import last schedule id");
  }

  Result<std::vector<StoredTask>> ExportTasks(int64_t after_seq, int limit) override {
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(s.Prepare(writer_, "SELECT " CHRONOQ_TASK_COLS
                                               ", t.korder FROM tasks t WHERE t.seq > ?1"
                                               " ORDER BY t.seq LIMIT ?2"));
    s.Bind(1, after_seq).Bind(2, static_cast<int64_t>(limit));
    std::vector<StoredTask> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Row(), s.OptTime(23)});
    if (rc != SQLITE_DONE) return WriterError("export tasks");
    return out;
  }
  Status ImportTasks(const std::vector<StoredTask>& rows) override {
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(s.Prepare(
        writer_,
        "INSERT INTO tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, name,"
        " run_at, token, last_error, updated, backoff_base, backoff_cap, target, sid, key,"
        " worker, response, korder, claimed, node, attempts) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,"
        "?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24)"));
    for (const StoredTask& t : rows) {
      BindAll(s.Reset(), t.row);
      s.Bind(20, t.row.response).Bind(21, t.korder).Bind(22, t.row.claimed);
      s.Bind(23, t.row.node).Bind(24, t.row.attempts);
      CHRONOQ_RETURN_IF_ERROR(ImportStep(s, "import task " + std::to_string(t.row.seq)));
    }
    return {};
  }
  Status ImportQueues(const std::vector<QueueRow>& queues) override {
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(s.Prepare(
        writer_,
        "INSERT INTO queues(qid, name, n_scheduled, n_running, n_succeeded, n_cancelled, n_dead)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7)"));
    for (const QueueRow& q : queues) {
      s.Reset().Bind(1, q.qid).Bind(2, q.name);
      for (int i = 0; i < 5; ++i) s.Bind(3 + i, q.counts[static_cast<size_t>(i)]);
      CHRONOQ_RETURN_IF_ERROR(ImportStep(s, "import queue " + q.name));
      // The settings the way the engine writes them, so that they read back
      // the same.
      CHRONOQ_RETURN_IF_ERROR(SaveQueueSettings(q.qid, q.settings, q.paused, q.webhooks));
    }
    return {};
  }
  Status ImportSchedules(const std::vector<ScheduleRow>& rows) override {
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(s.Prepare(
        writer_, std::string("INSERT INTO schedules(") + kScheduleCols +
                     ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)"));
    for (const ScheduleRow& r : rows) {
      BindSchedule(s.Reset().Bind(1, r.sid), r);
      CHRONOQ_RETURN_IF_ERROR(ImportStep(s, "import schedule " + r.name));
    }
    return {};
  }
  Result<std::vector<KeyCursorRow>> ExportKeyCursors(int64_t after_qid,
                                                     const std::string& after_key,
                                                     int limit) override {
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(
        s.Prepare(writer_,
                  "SELECT qid, key, korder, prio, seq FROM key_cursors WHERE (qid, key) > (?1, ?2)"
                  " ORDER BY qid, key LIMIT ?3"));
    s.Bind(1, after_qid).Bind(2, after_key).Bind(3, static_cast<int64_t>(limit));
    std::vector<KeyCursorRow> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      out.push_back({s.Int(0), s.Text(1),
                     KeyPosition{FromMicros(s.Int(2)), static_cast<int>(s.Int(3)), s.Int(4)}});
    }
    if (rc != SQLITE_DONE) return WriterError("export key cursors");
    return out;
  }
  Status ImportKeyCursors(const std::vector<KeyCursorRow>& rows) override {
    Stmt s;
    CHRONOQ_RETURN_IF_ERROR(s.Prepare(
        writer_, "INSERT INTO key_cursors(qid, key, korder, prio, seq) VALUES(?1,?2,?3,?4,?5)"));
    for (const KeyCursorRow& c : rows) {
      s.Reset().Bind(1, c.qid).Bind(2, c.key).Bind(3, c.at.at);
      s.Bind(4, static_cast<int64_t>(c.at.priority)).Bind(5, c.at.seq);
      CHRONOQ_RETURN_IF_ERROR(ImportStep(s, "import key cursor " + c.key));
    }
    return {};
  }

 private:
  static std::optional<ReadRow> ReadRowOf(const Stmt& s) {
    return ReadRow{s.Row(), s.Text(23), s.Text(24)};
  }
  // seq, qid, due, prio at columns 0-3.
  static DueEntry DueEntryOf(const Stmt& s) {
    return {s.Int(0), s.Int(1), FromMicros(s.Int(2)), static_cast<int>(s.Int(3))};
  }

  // Called by SQLite on the writer thread after each commit with the number
  // of pages in the WAL.
  static int OnWalCommit(void* self, sqlite3* db, const char*, int pages) {
    auto* store = static_cast<SqliteStore*>(self);
    if (pages >= store->tuning_.wal_limit_pages) {
      // The checkpointer is not keeping up: checkpoint here, before the next
      // commit, so the WAL (and recovery time) stays bounded. This slows the
      // writer down, which is the point.
      int log = 0, done = 0;
      sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
      return SQLITE_OK;
    }
    // Once per checkpoint_pages of new WAL: while the writer keeps appending,
    // the WAL rarely restarts, and signalling on its total size would keep
    // the checkpointer (and its fsyncs) busy without pause.
    if (pages < store->signalled_at_pages_) store->signalled_at_pages_ = 0;  // it restarted
    if (pages - store->signalled_at_pages_ >= store->tuning_.checkpoint_pages) {
      store->signalled_at_pages_ = pages;
      {
        MutexLock lock(store->checkpoint_mu_);
        store->checkpoint_wanted_ = true;
      }
      store->checkpoint_cv_.notify_one();
    }
    return SQLITE_OK;
  }

  // Copies committed WAL pages into the database file whenever asked. A
  // PASSIVE checkpoint never blocks the writer; its fsyncs happen here.
  void Checkpointer() {
    for (;;) {
      {
        MutexLock lock(checkpoint_mu_);
        while (!checkpoint_wanted_ && !stop_checkpointer_) checkpoint_cv_.wait(lock.std_lock());
        if (stop_checkpointer_) return;
        checkpoint_wanted_ = false;
      }
      // A connection learns that the database is in WAL mode only by reading
      // it; without this read the checkpoint silently does nothing.
      Exec(checkpoint_db_, "SELECT 1 FROM meta LIMIT 1").IgnoreError();
      int log = 0, done = 0;
      const int rc = sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                               &log, &done);
      if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
        spdlog::warn("checkpoint failed: {}", sqlite3_errmsg(checkpoint_db_));
      }
    }
  }

  // The error of the writer's last statement (see Txn).
  Status WriterError(std::string_view what) const {
    if (!txn_.lost.ok()) return Stmt::TxnError(txn_, what);
    return SqlError(writer_, what);
  }

  // Runs an import's INSERT: AlreadyExists when the row's id or name is taken.
  Status ImportStep(Stmt& s, std::string_view what) {
    const int rc = s.Step();
    s.Reset();
    if (rc == SQLITE_DONE) return {};
    if ((sqlite3_extended_errcode(writer_) & 0xff) == SQLITE_CONSTRAINT) {
      return Status::AlreadyExists(std::string(what) + ": " + sqlite3_errmsg(writer_));
    }
    return WriterError(what);
  }

  // Binds ?at+1 .. ?at+kInsertParams (InsertValues).
  static void BindAll(Stmt& s, const TaskRow& r, int at = 0) {
    s.Bind(at + 1, r.seq).Bind(at + 2, r.qid).Bind(at + 3, static_cast<int64_t>(r.state));
    s.Bind(at + 4, r.due).Bind(at + 5, static_cast<int64_t>(r.priority));
    s.Bind(at + 6, static_cast<int64_t>(r.attempt))
        .Bind(at + 7, static_cast<int64_t>(r.max_attempts));
    s.Bind(at + 8, r.payload).Bind(at + 9, r.name).Bind(at + 10, r.run_at).Bind(at + 11, r.token);
    s.Bind(at + 12, r.last_error).Bind(at + 13, r.updated).Bind(at + 14, r.backoff_base);
    s.Bind(at + 15, r.backoff_cap).Bind(at + 16, r.target).Bind(at + 17, r.sid);
    s.Bind(at + 18, r.key).Bind(at + 19, r.worker);
  }
  // The columns Insert writes, and one row of their values bound from
  // ?at+1 on (BindAll); korder is the due of a keyed task.
  static constexpr const char* kInsertColumns =
      "INSERT INTO tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, name,"
      " run_at, token, last_error, updated, backoff_base, backoff_cap, target, sid, key, worker,"
      " korder) VALUES";
  static std::string InsertValues(int at) {
    std::string values = "(";
    for (int i = 1; i <= kInsertParams; ++i) values += "?" + std::to_string(at + i) + ",";
    return values + "CASE WHEN ?" + std::to_string(at + 18) + " IS NOT NULL THEN ?" +
           std::to_string(at + 4) + " END)";
  }

  // The schedule columns in ScheduleRowOf() order, bound as ?1..?18 by
  // BindSchedule.
  static constexpr const char* kScheduleCols =
      "sid, name, qid, spec, paused, current_seq, cursor, next_at, claimed_at, runs, skipped,"
      " last_task, last_for, last_state, last_finished, last_error, created, updated";

  static ScheduleRow ScheduleRowOf(const Stmt& s) {
    ScheduleRow r;
    r.sid = s.Int(0);
    r.name = s.Text(1);
    r.qid = s.Int(2);
    r.spec = s.Text(3);
    r.paused = s.Int(4) != 0;
    r.current_seq = s.OptInt(5);
    r.cursor = s.OptTime(6);
    r.next_at = s.OptTime(7);
    r.claimed_at = s.OptTime(8);
    r.runs = s.Int(9);
    r.skipped = s.Int(10);
    r.last_task = s.OptText(11);
    r.last_for = s.OptTime(12);
    if (!s.IsNull(13)) r.last_state = static_cast<TaskState>(s.Int(13));
    r.last_finished = s.OptTime(14);
    r.last_error = s.OptText(15);
    r.created = FromMicros(s.Int(16));
    r.updated = FromMicros(s.Int(17));
    return r;
  }

  static void BindSchedule(Stmt& s, const ScheduleRow& r) {
    s.Bind(2, r.name).Bind(3, r.qid).Bind(4, r.spec).Bind(5, int64_t{r.paused ? 1 : 0});
    s.Bind(6, r.current_seq).Bind(7, r.cursor).Bind(8, r.next_at).Bind(9, r.claimed_at);
    s.Bind(10, r.runs).Bind(11, r.skipped).Bind(12, r.last_task).Bind(13, r.last_for);
    if (r.last_state) s.Bind(14, static_cast<int64_t>(*r.last_state));
    s.Bind(15, r.last_finished).Bind(16, r.last_error).Bind(17, r.created).Bind(18, r.updated);
  }

  Result<std::vector<ScheduleRow>> ScheduleRows(Stmt& s, std::string_view what) {
    std::vector<ScheduleRow> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ScheduleRowOf(s));
    s.Reset();
    if (rc != SQLITE_DONE) return WriterError(what);
    return out;
  }

  // The rows a batched claim or acknowledgement statement names: a run of
  // consecutive seqs ("seq BETWEEN ?first AND ?first+1") or up to kRowBatch
  // seqs ("seq IN (?first,?first+1,...)"; unused slots are NULL, which
  // matches nothing).
  enum SeqSet { kSeqRun = 0, kSeqList = 1 };
  static std::string SeqSetSql(SeqSet set, int first) {
    if (set == kSeqRun) {
      return "BETWEEN ?" + std::to_string(first) + " AND ?" + std::to_string(first + 1);
    }
    std::string list = "IN (";
    for (int i = 0; i < kRowBatch; ++i) list += (i ? ",?" : "?") + std::to_string(first + i);
    return list + ")";
  }
  // Calls `run(set, bind)` once per statement that `seqs` take (each run of
  // at least kMinSeqRun consecutive seqs as one range, the rest kRowBatch at
  // a time), where `bind(stmt, first)` binds the statement's seqs from its
  // parameter `first` on. A range costs SQLite a walk along the table where a
  // list is first built into a sorted temporary index and then searched row
  // by row (docs/BENCHMARKS.md, "The store's claim and acknowledgement").
  template <typename Run>
  static Status ForEachSeqSet(const std::vector<int64_t>& seqs, const Run& run) {
    std::vector<int64_t> rest;
    for (const std::pair<int64_t, int64_t>& range : SeqRuns(seqs)) {
      if (range.second - range.first + 1 >= kMinSeqRun) {
        CHRONOQ_RETURN_IF_ERROR(run(
            kSeqRun, [&](Stmt& s, int p) { s.Bind(p, range.first).Bind(p + 1, range.second); }));
      } else {
        for (int64_t seq = range.first; seq <= range.second; ++seq) rest.push_back(seq);
      }
    }
    for (size_t i = 0; i < rest.size(); i += kRowBatch) {
      const size_t n = std::min(rest.size() - i, static_cast<size_t>(kRowBatch));
      CHRONOQ_RETURN_IF_ERROR(run(kSeqList, [&](Stmt& s, int p) {
        for (size_t k = 0; k < n; ++k) s.Bind(p + static_cast<int>(k), rest[i + k]);
      }));
    }
    return {};
  }

  Status Prepare() {
    txn_.flush = [this] { return WriteBehind(); };
    // "+state" keeps the planner on rowid lookups (or a rowid range) instead
    // of scanning the state's index. Each comes in both forms of SeqSet.
    const std::string insert_sql = kInsertColumns + InsertValues(0);
    std::string insert_many_sql = kInsertColumns;
    for (size_t k = 0; k < kRowsPerInsert; ++k) {
      insert_many_sql += (k ? "," : "") + InsertValues(static_cast<int>(k) * kInsertParams);
    }
    std::string mark_succeeded_sql[2], mark_running_sql[2];
    for (SeqSet set : {kSeqRun, kSeqList}) {
      mark_succeeded_sql[set] =
          "UPDATE tasks SET state=2, due=?1, token=NULL, updated=?2 WHERE +state=1 AND seq " +
          SeqSetSql(set, 3);
      // The claim records itself (claimed, node) for the attempt history.
      mark_running_sql[set] =
          "UPDATE tasks SET state=1, run_at=due, due=?1, token=?2, attempt=attempt+1, updated=?3,"
          " worker=chronoq_claimed(?4, " CHRONOQ_CLAIMING_ARGS
          "), claimed=?3, node=?5"
          " WHERE +state=0 AND seq " +
          SeqSetSql(set, 6);
    }
    const std::string select_schedule = std::string("SELECT ") + kScheduleCols + " FROM schedules";
    const std::string schedule_by_sid_sql = select_schedule + " WHERE sid=?1";
    const std::string schedule_by_name_sql = select_schedule + " WHERE name=?1";
    // Without INDEXED BY the planner walks the whole table in sid order: at
    // 100,000 schedules that read 30 MiB at every start (W-schedule).
    const std::string schedules_due_sql =
        select_schedule +
        " INDEXED BY schedules_next WHERE next_at < ?1 AND sid > ?2 ORDER BY sid LIMIT ?3";
    const std::string schedules_list_sql =
        select_schedule + " WHERE name > ?1 AND (?2 IS NULL OR qid = ?2) ORDER BY name LIMIT ?3";
    const std::pair<Stmt*, const char*> writer[] = {
        {&w_.begin, "BEGIN"},
        {&w_.commit, "COMMIT"},
        {&w_.rollback, "ROLLBACK"},
        {&w_.savepoint, "SAVEPOINT batch"},
        {&w_.release, "RELEASE batch"},
        {&w_.rollback_to, "ROLLBACK TO batch"},
        {&w_.queue_id, "SELECT qid FROM queues WHERE name = ?1"},
        {&w_.queue_add, "INSERT INTO queues(name) VALUES(?1)"},
        {&w_.queues,
         "SELECT qid, name, paused, concurrency, max_attempts, backoff_base, backoff_cap,"
         " retention, n_scheduled, n_running, n_succeeded, n_cancelled, n_dead, webhooks,"
         " rate_count, rate_period, key_in_flight, key_pending, final_statuses FROM queues"
         " ORDER BY qid"},
        {&w_.queue_settings,
         "UPDATE queues SET paused=?2, concurrency=?3, max_attempts=?4, backoff_base=?5,"
         " backoff_cap=?6, retention=?7, webhooks=?8, rate_count=?9, rate_period=?10,"
         " key_in_flight=?11, key_pending=?12, final_statuses=?13 WHERE qid=?1"},
        {&w_.queue_counts,
         "UPDATE queues SET n_scheduled=?2, n_running=?3, n_succeeded=?4, n_cancelled=?5,"
         " n_dead=?6 WHERE qid=?1"},
        {&w_.insert, insert_sql.c_str()},
        {&w_.insert_many, insert_many_sql.c_str()},
        {&w_.insert_behind, insert_sql.c_str()},
        {&w_.overwrite,
         "UPDATE tasks SET qid=?2, state=?3, due=?4, prio=?5, attempt=?6, max_attempts=?7,"
         " payload=?8, name=?9, run_at=?10, token=?11, last_error=?12, updated=?13,"
         " backoff_base=?14, backoff_cap=?15, target=?16, sid=?17, key=?18, worker=?19,"
         " korder=CASE WHEN ?18 IS NULL THEN NULL WHEN ?3=0 AND ?6=0 THEN ?4 ELSE korder END"
         " WHERE seq=?1"},
        {&w_.remove, "DELETE FROM tasks WHERE seq = ?1 RETURNING qid, key"},
        {&w_.by_seq, "SELECT " CHRONOQ_TASK_COLS " FROM tasks t WHERE t.seq = ?1"},
        {&w_.by_name, "SELECT " CHRONOQ_TASK_COLS " FROM tasks t WHERE t.name = ?1"},
        {&w_.mark_running[kSeqRun], mark_running_sql[kSeqRun].c_str()},
        {&w_.mark_running[kSeqList], mark_running_sql[kSeqList].c_str()},
        // Leaving `scheduled` keeps the instant it was due in run_at; entering
        // it clears run_at, since due is the run time again.
        {&w_.move,
         "UPDATE tasks SET state=?2,"
         " run_at=CASE WHEN ?2=0 THEN NULL WHEN state=0 THEN due ELSE run_at END,"
         " due=?3, last_error=coalesce(?4, last_error), attempt=coalesce(?5, attempt),"
         " token=CASE WHEN ?2=1 THEN token ELSE NULL END, updated=?6,"
         " korder=CASE WHEN key IS NOT NULL AND ?2=0 AND coalesce(?5, attempt)=0 THEN ?3"
         " ELSE korder END, attempts=CASE WHEN ?7 IS NULL THEN attempts ELSE nullif(?7, '') END"
         " WHERE seq=?1"},
        {&w_.set_due, "UPDATE tasks SET due=?2, updated=?3 WHERE seq=?1"},
        {&w_.mark_succeeded[kSeqRun], mark_succeeded_sql[kSeqRun].c_str()},
        {&w_.mark_succeeded[kSeqList], mark_succeeded_sql[kSeqList].c_str()},
        {&w_.set_payload, "UPDATE tasks SET payload=?2 WHERE seq=?1"},
        {&w_.set_response, "UPDATE tasks SET response=?2 WHERE seq=?1"},
        {&w_.save_token, "UPDATE meta SET v=?1 WHERE k='next_token'"},
        {&w_.load_scheduled,
         "SELECT seq, qid, due, prio, key, attempt FROM tasks WHERE state=0 "
         "AND " CHRONOQ_NOT_RUNNING " AND " CHRONOQ_BUCKET " >= ?1 AND " CHRONOQ_BUCKET
         " < ?2 AND (" CHRONOQ_BUCKET " > ?1 OR seq > ?4)"
         " ORDER BY " CHRONOQ_BUCKET ", seq LIMIT ?3"},
        // A keyed task waits to start when scheduled with attempt 0; then
        // korder = due. Searches after a position (korder, prio, seq) go in
        // two steps, the same (korder, prio) with a greater seq, then a
        // greater (korder, prio): SQLite seeks on each, but a row value over
        // all three only seeks on (korder, prio) (seq is the rowid) and
        // would step over every task of the key sharing them.
        {&w_.key_head_same,
         "SELECT seq, qid, due, prio FROM tasks INDEXED BY tasks_korder WHERE qid=?1 AND key=?2"
         " AND korder=?3 AND prio=?4 AND seq>?5 AND state=0 AND attempt=0 ORDER BY seq LIMIT ?6"},
        {&w_.key_head_next,
         "SELECT seq, qid, due, prio FROM tasks INDEXED BY tasks_korder WHERE qid=?1 AND key=?2"
         " AND (korder, prio) > (?3, ?4) AND state=0 AND attempt=0"
         " ORDER BY korder, prio, seq LIMIT ?6"},
        {&w_.key_pending_same,
         "SELECT count(*) FROM tasks INDEXED BY tasks_korder WHERE qid=?1 AND key=?2"
         " AND korder=?3 AND prio=?4 AND seq>?5 AND state=0 AND attempt=0"},
        {&w_.key_pending_next,
         "SELECT count(*) FROM tasks INDEXED BY tasks_korder WHERE qid=?1 AND key=?2"
         " AND (korder, prio) > (?3, ?4) AND state=0 AND attempt=0"},
        {&w_.key_cursor, "SELECT korder, prio, seq FROM key_cursors WHERE qid=?1 AND key=?2"},
        {&w_.key_cursor_save,
         "INSERT INTO key_cursors(qid, key, korder, prio, seq) VALUES(?1,?2,?3,?4,?5)"
         " ON CONFLICT(qid, key) DO UPDATE SET korder=excluded.korder, prio=excluded.prio,"
         " seq=excluded.seq"},
        // Task ?1 waits to start: the cursor of its key moves back to just
        // before it, unless it is before it already.
        {&w_.key_cursor_lower,
         "UPDATE key_cursors SET korder=t.korder, prio=t.prio, seq=t.seq - 1"
         " FROM (SELECT qid, key, korder, prio, seq FROM tasks"
         "       WHERE seq=?1 AND key IS NOT NULL AND state=0 AND attempt=0) AS t"
         " WHERE key_cursors.qid=t.qid AND key_cursors.key=t.key"
         " AND (key_cursors.korder, key_cursors.prio, key_cursors.seq) >= (t.korder, t.prio, "
         "t.seq)"},
        // A cursor with no task of its key at or before it says nothing.
        {&w_.key_cursor_drop,
         "DELETE FROM key_cursors WHERE qid=?1 AND key=?2 AND NOT EXISTS("
         " SELECT 1 FROM tasks INDEXED BY tasks_korder WHERE tasks.qid=?1 AND tasks.key=?2"
         " AND (tasks.korder, tasks.prio, tasks.seq)"
         " <= (key_cursors.korder, key_cursors.prio, key_cursors.seq))"},
        {&w_.key_retries,
         "SELECT qid, key FROM tasks INDEXED BY tasks_key_retry"
         " WHERE key IS NOT NULL AND state=0 AND attempt>0"},
        {&w_.next_scheduled,
         "SELECT " CHRONOQ_BUCKET " FROM tasks WHERE state=0 AND " CHRONOQ_NOT_RUNNING
         " AND " CHRONOQ_BUCKET " >= ?1 ORDER BY " CHRONOQ_BUCKET " LIMIT 1"},
        {&w_.load_running, "SELECT " CHRONOQ_TASK_COLS " FROM tasks t WHERE t.state=1"},
        {&w_.purge,
         "DELETE FROM tasks WHERE seq IN (SELECT seq FROM tasks WHERE state IN (2,3) "
         "AND " CHRONOQ_NOT_RUNNING " "
         "AND " CHRONOQ_BUCKET " <= ?3 AND due <= ?1 LIMIT ?2) RETURNING qid, state, key"},
        {&w_.schedule_insert,
         "INSERT INTO schedules(name, qid, spec, paused, current_seq, cursor, next_at, claimed_at,"
         " runs, skipped, last_task, last_for, last_state, last_finished, last_error, created,"
         " updated) VALUES(?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)"},
        {&w_.schedule_save,
         "UPDATE schedules SET name=?2, qid=?3, spec=?4, paused=?5, current_seq=?6, cursor=?7,"
         " next_at=?8, claimed_at=?9, runs=?10, skipped=?11, last_task=?12, last_for=?13,"
         " last_state=?14, last_finished=?15, last_error=?16, created=?17, updated=?18"
         " WHERE sid=?1"},
        {&w_.schedule_delete, "DELETE FROM schedules WHERE sid=?1"},
        {&w_.schedule_by_sid, schedule_by_sid_sql.c_str()},
        {&w_.schedule_by_name, schedule_by_name_sql.c_str()},
        {&w_.schedules_due, schedules_due_sql.c_str()},
        {&w_.schedules_list, schedules_list_sql.c_str()},
        {&w_.lock_save,
         "INSERT OR REPLACE INTO locks(key, token, owner, expires) VALUES(?1,?2,?3,?4)"},
        {&w_.lock_delete, "DELETE FROM locks WHERE key=?1"},
        {&w_.locks, "SELECT key, token, owner, expires FROM locks"},
        {&w_.next_purge,
         "SELECT " CHRONOQ_BUCKET " FROM tasks WHERE state=?1 AND " CHRONOQ_NOT_RUNNING
         " ORDER BY " CHRONOQ_BUCKET " LIMIT 1"},
    };
    for (const auto& [stmt, sql] : writer) {
      const bool ends_txn = stmt == &w_.begin || stmt == &w_.commit || stmt == &w_.rollback;
      CHRONOQ_RETURN_IF_ERROR(stmt->Prepare(writer_, sql, ends_txn ? nullptr : &txn_));
    }
    const char* read_cols = CHRONOQ_READ_COLS;
    // Nothing reads yet while the store opens; the lock only keeps the rule simple.
    MutexLock lock(reader_mu_);
    CHRONOQ_RETURN_IF_ERROR(r_.by_seq.Prepare(reader_, std::string(read_cols) + "t.seq = ?1"));
    CHRONOQ_RETURN_IF_ERROR(r_.by_name.Prepare(reader_, std::string(read_cols) + "t.name = ?1"));
    return {};
  }

  const SqliteTuning tuning_;
  int lock_fd_ = -1;            // "<path>.lock", held with flock() while open
  int signalled_at_pages_ = 0;  // writer thread only: WAL size at the last signal
  sqlite3* writer_ = nullptr;
  sqlite3* reader_ = nullptr;
  Txn txn_;                      // engine loop thread only
  ClaimCapture claim_capture_;   // engine loop thread only
  std::vector<TaskRow> behind_;  // rows Insert writes behind; engine loop thread only
  struct WriterStatements {
    Stmt begin, commit, rollback, savepoint, release, rollback_to;
    Stmt queue_id, queue_add, queues, queue_settings, queue_counts;
    Stmt insert, insert_many, insert_behind, overwrite, remove, by_seq, by_name, move, set_due,
        set_payload, set_response, save_token;
    Stmt mark_running[2], mark_succeeded[2];  // by SeqSet
    Stmt load_scheduled, next_scheduled, load_running, purge, next_purge;
    Stmt key_head_same, key_head_next, key_pending_same, key_pending_next, key_retries, key_cursor,
        key_cursor_save, key_cursor_lower, key_cursor_drop;
    Stmt schedule_insert, schedule_save, schedule_delete, schedule_by_sid, schedule_by_name,
        schedules_due, schedules_list;
    Stmt lock_save, lock_delete, locks;
  } w_;  // engine loop thread only
  Mutex reader_mu_;
  struct ReaderStatements {
    Stmt by_seq, by_name;
  } r_ CHRONOQ_GUARDED_BY(reader_mu_);

  sqlite3* checkpoint_db_ = nullptr;  // checkpointer_ thread only
  std::thread checkpointer_;
  Mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_wanted_ CHRONOQ_GUARDED_BY(checkpoint_mu_) = false;
  bool stop_checkpointer_ CHRONOQ_GUARDED_BY(checkpoint_mu_) = false;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options) {
  if (options.path.empty()) return Status::InvalidArgument("store", "the SQLite path is empty");
  // SQLite's memory statistics take a global mutex on every allocation (about
  // 10% of the claim/ack path when profiled). This only works before SQLite
  // is first used in the process; if the host program got there first, the
  // call fails harmlessly.
  static std::once_flag config_once;
  std::call_once(config_once, [] { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  auto store = std::make_unique<SqliteStore>(options.tuning);
  CHRONOQ_RETURN_IF_ERROR(store->Open(options.path, options.durability, options.vfs));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace chronoq
