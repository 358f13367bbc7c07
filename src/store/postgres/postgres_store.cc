// The PostgreSQL store: the SQLite store's schema, statements and rules
// (store/sqlite/sqlite_store.cc) on PostgreSQL, through libpq's C API.
//
// Shape, and why:
// - Same semantics as SQLite, byte for byte where the engine can tell:
//   times are BIGINT microseconds (no timestamptz rounding or zones), the due
//   bucket is spelled CHRONOQ_PG_BUCKET in the index and in every query, text
//   keys compare with COLLATE "C" (SQLite compares bytes: schedules list by
//   name in that order). What workers and webhook targets send back
//   (`last_error`, `response`) is BYTEA: PostgreSQL's text refuses NUL bytes
//   and invalid UTF-8, SQLite keeps them, and a refused write would fail the
//   whole group commit around it.
// - PostgreSQL aborts a transaction at its first failed statement, SQLite
//   does not. So nothing the engine expects to "fail" may raise: a taken
//   name is ON CONFLICT DO NOTHING (Insert returns false), and Commit checks
//   that PostgreSQL did commit (after an error it answers COMMIT with
//   ROLLBACK).
// - Indexes end with `seq` where SQLite's carry the rowid implicitly, so that
//   (state, bucket, seq) and (qid, key, korder, prio, seq) are walked in
//   order without a sort, and a search "after a position" is one range.
// - Every UPDATE that changes an indexed column writes a new entry in every
//   index whose predicate the new row meets (no HOT update), where SQLite
//   rewrites the row in place. So the key index holds only keyed tasks
//   waiting to start: a claim or an ack of a keyed task then writes nothing
//   there (W6 keyed: 30k -> 40k tasks/s), and a key's saved cursor is
//   dropped once no task *waiting to start* lies at or before it.
// - Bytes per task (W4): the bucket is an integer (enough until the year
//   9999), so a tasks_due entry is 24 bytes rather than 32, and qid (an
//   integer) sits among the other 4-byte columns, so a row of a 16-byte
//   payload takes 88 bytes rather than 96 (193 -> ~148 bytes per task).
// - Statements are prepared once per connection and sent with text
//   parameters; row batches are one statement with an array parameter
//   (`seq = ANY($n::bigint[])`), or a run's ends (`seq BETWEEN`), never a
//   round trip per task.
// - The writer connection takes a session advisory lock on the schema at
//   open. If the connection is lost, the statement that finds out fails with
//   Unavailable (reason kStoreUnavailable), and so does the engine's cycle;
//   the engine then rebuilds its memory from the store, and the Begin() of
//   that reload connects again and takes the lock again (EnsureWriter: at
//   once, then no more often than a backoff of 100 ms doubling to 5 s, on
//   the engine's clock; calls fail at once in between). Another engine that
//   took the schema meanwhile keeps it: this one stays unavailable. The
//   reader reconnects on its own: a read has no state to lose.
#include "store/postgres/postgres_store.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/mutex.h"
#include "store/postgres/connection.h"
#include "store/postgres/migrate.h"
#include <libpq-fe.h>

namespace chronoq {
namespace {

using namespace pg;  // NOLINT(google-build-using-namespace): the store is written in its terms

constexpr int64_t kSchemaVersion = 5;
// The oldest server the statements are written for (identity columns,
// ON CONFLICT, DROP DATABASE ... WITH (FORCE) in the tests).
constexpr int kMinServerVersion = 120000;
// How long an open waits for the schema's lock to be released before it
// refuses: a little more than a crashed engine's backend takes to exit.
constexpr std::chrono::seconds kLockPatience{2};

#define CHRONOQ_PG_BUCKET "((due >> 28)::integer)"
// A state test on rows found by seq (`seq = ANY($n)`), written so that it
// cannot use tasks_due (state, ...). A queue's states churn faster than
// PostgreSQL's statistics follow, and with them saying "few rows in state
// 0" the prepared statements' generic plans walked tasks_due over every
// task in that state, once per claim: W2's drain fell from 53k tasks/s at
// 50,000 tasks to 22k at 200,000, and perf showed the bitmap scans. With
// `+ 0` the only plan left is the primary key's.
#define CHRONOQ_PG_STATE_IS(column, state) "(" column " + 0) = " state
static_assert(kDueBucketShift == 28, "CHRONOQ_PG_BUCKET and the schema spell the shift out");

// Version 1 of the schema (store.h and docs/ARCHITECTURE.md describe the
// columns; they mean what SQLite's do). Fixed-width columns come first so
// that rows pack without padding. Runs with search_path set to the schema.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(k TEXT COLLATE "C" PRIMARY KEY, v BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS queues(
  qid INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT COLLATE "C" NOT NULL UNIQUE,
  paused BOOLEAN NOT NULL DEFAULT false,
  webhooks BOOLEAN NOT NULL DEFAULT false,
  concurrency INTEGER,
  max_attempts INTEGER,
  backoff_base BIGINT,
  backoff_cap BIGINT,
  retention BIGINT,
  n_scheduled BIGINT NOT NULL DEFAULT 0,
  n_running BIGINT NOT NULL DEFAULT 0,
  n_succeeded BIGINT NOT NULL DEFAULT 0,
  n_cancelled BIGINT NOT NULL DEFAULT 0,
  n_dead BIGINT NOT NULL DEFAULT 0,
  rate_count INTEGER,
  rate_period BIGINT,
  key_in_flight INTEGER,
  key_pending BIGINT,
  final_statuses TEXT);
CREATE TABLE IF NOT EXISTS tasks(
  seq BIGINT PRIMARY KEY,
  due BIGINT,
  run_at BIGINT,
  token BIGINT,
  updated BIGINT,
  backoff_base BIGINT,
  backoff_cap BIGINT,
  sid BIGINT,
  korder BIGINT,
  qid INTEGER NOT NULL,
  state INTEGER NOT NULL,
  prio INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  payload TEXT NOT NULL,
  name TEXT COLLATE "C",
  key TEXT COLLATE "C",
  target TEXT,
  last_error BYTEA,
  response BYTEA,
  worker TEXT,
  claimed BIGINT,
  node TEXT,
  attempts TEXT);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks(state, ((due >> 28)::integer), seq);
CREATE UNIQUE INDEX IF NOT EXISTS tasks_name ON tasks(name) WHERE name IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_korder ON tasks(qid, key, korder, prio, seq)
  WHERE key IS NOT NULL AND state = 0 AND attempt = 0;
CREATE INDEX IF NOT EXISTS tasks_key_retry ON tasks(qid)
  WHERE key IS NOT NULL AND state = 0 AND attempt > 0;
CREATE TABLE IF NOT EXISTS schedules(
  sid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  qid BIGINT NOT NULL,
  current_seq BIGINT,
  cursor BIGINT,
  next_at BIGINT,
  claimed_at BIGINT,
  runs BIGINT NOT NULL,
  skipped BIGINT NOT NULL,
  last_for BIGINT,
  last_finished BIGINT,
  created BIGINT NOT NULL,
  updated BIGINT NOT NULL,
  last_state INTEGER,
  paused BOOLEAN NOT NULL,
  name TEXT COLLATE "C" NOT NULL UNIQUE,
  spec TEXT NOT NULL,
  last_task TEXT COLLATE "C",
  last_error BYTEA);
CREATE INDEX IF NOT EXISTS schedules_next ON schedules(next_at) WHERE next_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS locks(
  key TEXT COLLATE "C" PRIMARY KEY,
  token BIGINT NOT NULL,
  expires BIGINT NOT NULL,
  owner TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS key_cursors(
  qid BIGINT NOT NULL,
  key TEXT COLLATE "C" NOT NULL,
  korder BIGINT NOT NULL,
  prio INTEGER NOT NULL,
  seq BIGINT NOT NULL,
  PRIMARY KEY(qid, key));
CREATE TABLE IF NOT EXISTS leader(
  one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
  epoch BIGINT NOT NULL,
  writer_pid INTEGER NOT NULL,
  writer_start BIGINT NOT NULL,
  since BIGINT NOT NULL,
  node_id TEXT COLLATE "C" NOT NULL,
  address TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes(
  node_id TEXT COLLATE "C" PRIMARY KEY,
  beats BIGINT NOT NULL,
  seen BIGINT NOT NULL,
  started BIGINT NOT NULL,
  epoch BIGINT,
  address TEXT NOT NULL,
  role TEXT NOT NULL,
  version TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims(
  id BIGINT PRIMARY KEY,
  token BIGINT NOT NULL,
  lease_until BIGINT NOT NULL,
  claimed BIGINT NOT NULL,
  lo BIGINT NOT NULL,
  hi BIGINT NOT NULL,
  worker TEXT,
  node TEXT,
  seqs BIGINT[] NOT NULL);
INSERT INTO meta(k, v) VALUES('schema', 5), ('next_token', 1) ON CONFLICT (k) DO NOTHING;
)sql";

// The task columns in TaskAt() order.
#define CHRONOQ_PG_TASK_COLS                                                              \
  "t.seq, t.qid, t.state, t.due, t.prio, t.attempt, t.max_attempts, t.payload, t.name, "  \
  "t.run_at, t.token, t.last_error, t.updated, t.backoff_base, t.backoff_cap, t.target, " \
  "t.response, t.sid, t.key, t.worker, t.claimed, t.node, t.attempts"
constexpr int kTaskColumns = 23;
// ... but the attempt columns, which a claim does not return
// (Store::MarkRunningMany).
#define CHRONOQ_PG_CLAIMED_COLS                                                           \
  "t.seq, t.qid, t.state, t.due, t.prio, t.attempt, t.max_attempts, t.payload, t.name, "  \
  "t.run_at, t.token, t.last_error, t.updated, t.backoff_base, t.backoff_cap, t.target, " \
  "t.response, t.sid, t.key, t.worker"

// The claim journal (schema 5). A claim writes one row of `claims` for the
// batch it claims (an id of the store's, its token, lease, claim time,
// worker, node and seqs) instead of rewriting each task's row; each task's
// row is written once, at
// its acknowledgement, straight from scheduled to succeeded. PostgreSQL has
// no update in place: every row written is a new version with new entries
// in the primary key and tasks_due, which made the backend W2's bottleneck
// (docs/BENCHMARKS.md, "A claim journal, measured before it is built": a
// third of the work). A task is *journaled* while its row says scheduled
// and a claims row holds its seq: it is running, with the claim's lease.
// Readers overlay the journal (CHRONOQ_PG_JOURNAL_JOIN); a write that
// changes one task otherwise first *settles* its claim (kSettle: the claim
// written into its tasks' rows as an UPDATE would have, the record
// deleted), which changes no meaning, and so does opening the store.
// `lo` and `hi` bound `seqs`, so that most records are passed over
// without searching their arrays.
#define CHRONOQ_PG_IN_CLAIM(c, seq) \
  seq " BETWEEN " c ".lo AND " c ".hi AND " seq " = ANY(" c ".seqs)"
// Joins `j`, the claim of a journaled task `t` (NULL columns for any other).
#define CHRONOQ_PG_JOURNAL_JOIN                                                    \
  " LEFT JOIN LATERAL (SELECT c.token, c.lease_until, c.claimed, c.worker, c.node" \
  " FROM claims c WHERE t.state = 0 AND " CHRONOQ_PG_IN_CLAIM("c", "t.seq") " LIMIT 1) j ON true"
#define CHRONOQ_PG_JOURNALED(expr, otherwise) \
  "CASE WHEN j.token IS NULL THEN " otherwise " ELSE " expr " END"
// CHRONOQ_PG_TASK_COLS as readers see them, with CHRONOQ_PG_JOURNAL_JOIN:
// a journaled task as its claim's UPDATE would have left it.
#define CHRONOQ_PG_TASK_COLS_NOW \
  "t.seq AS seq, t.qid, " CHRONOQ_PG_JOURNALED("1", "t.state") " AS state, "                  \
  CHRONOQ_PG_JOURNALED("j.lease_until", "t.due") " AS due, t.prio, "                           \
  CHRONOQ_PG_JOURNALED("t.attempt + 1", "t.attempt") " AS attempt, t.max_attempts, t.payload, " \
  "t.name, " CHRONOQ_PG_JOURNALED("t.due", "t.run_at") " AS run_at, "                          \
  "coalesce(j.token, t.token) AS token, t.last_error, coalesce(j.claimed, t.updated) AS updated, " \
  "t.backoff_base, t.backoff_cap, t.target, t.response, t.sid, t.key, "                        \
  CHRONOQ_PG_JOURNALED("j.worker", "t.worker") " AS worker, "                                  \
  CHRONOQ_PG_JOURNALED("j.claimed", "t.claimed") " AS claimed, "                               \
  CHRONOQ_PG_JOURNALED("j.node", "t.node") " AS node, t.attempts"
// Task `t` is not journaled.
#define CHRONOQ_PG_NOT_JOURNALED \
  "NOT EXISTS (SELECT 1 FROM claims cl WHERE " CHRONOQ_PG_IN_CLAIM("cl", "t.seq") ")"

// The schedule columns in ScheduleAt() order.
#define CHRONOQ_PG_SCHEDULE_COLS                                                           \
  "sid, name, qid, spec, paused, current_seq, cursor, next_at, claimed_at, runs, skipped," \
  " last_task, last_for, last_state, last_finished, last_error, created, updated"

// The CHRONOQ_PG_TASK_COLS columns, starting at column 0.
TaskRow TaskAt(const Rows& rows, int i) {
  TaskRow r;
  r.seq = rows.Int(i, 0);
  r.qid = rows.Int(i, 1);
  r.state = static_cast<TaskState>(rows.Int(i, 2));
  r.due = rows.OptTime(i, 3);
  r.priority = static_cast<int>(rows.Int(i, 4));
  r.attempt = static_cast<int>(rows.Int(i, 5));
  r.max_attempts = static_cast<int>(rows.Int(i, 6));
  r.payload = rows.Text(i, 7);
  r.name = rows.OptText(i, 8);
  r.run_at = rows.OptTime(i, 9);
  if (!rows.IsNull(i, 10)) r.token = static_cast<uint64_t>(rows.Int(i, 10));
  r.last_error = rows.OptBytes(i, 11);
  r.updated = rows.OptTime(i, 12);
  if (!rows.IsNull(i, 13)) r.backoff_base = Duration(rows.Int(i, 13));
  if (!rows.IsNull(i, 14)) r.backoff_cap = Duration(rows.Int(i, 14));
  r.target = rows.OptText(i, 15);
  r.response = rows.OptBytes(i, 16);
  r.sid = rows.OptInt(i, 17);
  r.key = rows.OptText(i, 18);
  r.worker = rows.OptText(i, 19);
  // A claim's RETURNING leaves them out (CHRONOQ_PG_CLAIMED_COLS).
  if (rows.columns() > 20) {
    r.claimed = rows.OptTime(i, 20);
    r.node = rows.OptText(i, 21);
    r.attempts = rows.OptText(i, 22);
  }
  return r;
}

// seq, qid, due, prio at columns 0-3.
DueEntry DueAt(const Rows& rows, int i) {
  return {rows.Int(i, 0), rows.Int(i, 1), FromMicros(rows.Int(i, 2)),
          static_cast<int>(rows.Int(i, 3))};
}

// The CHRONOQ_PG_SCHEDULE_COLS columns.
ScheduleRow ScheduleAt(const Rows& rows, int i) {
  ScheduleRow r;
  r.sid = rows.Int(i, 0);
  r.name = rows.Text(i, 1);
  r.qid = rows.Int(i, 2);
  r.spec = rows.Text(i, 3);
  r.paused = rows.Bool(i, 4);
  r.current_seq = rows.OptInt(i, 5);
  r.cursor = rows.OptTime(i, 6);
  r.next_at = rows.OptTime(i, 7);
  r.claimed_at = rows.OptTime(i, 8);
  r.runs = rows.Int(i, 9);
  r.skipped = rows.Int(i, 10);
  r.last_task = rows.OptText(i, 11);
  r.last_for = rows.OptTime(i, 12);
  if (!rows.IsNull(i, 13)) r.last_state = static_cast<TaskState>(rows.Int(i, 13));
  r.last_finished = rows.OptTime(i, 14);
  r.last_error = rows.OptBytes(i, 15);
  r.created = FromMicros(rows.Int(i, 16));
  r.updated = FromMicros(rows.Int(i, 17));
  return r;
}

// --- the statements ------------------------------------------------------------
// Parameters whose type PostgreSQL cannot tell from where they first appear
// (IS NULL, CASE conditions) carry a cast.

constexpr Sql kBegin{"begin", "BEGIN"};
constexpr Sql kQueueId{"queue_id", "SELECT qid FROM queues WHERE name = $1"};
constexpr Sql kQueueAdd{"queue_add", "INSERT INTO queues(name) VALUES($1) RETURNING qid"};
constexpr Sql kQueues{"queues",
                      "SELECT qid, name, paused, concurrency, max_attempts, backoff_base,"
                      " backoff_cap, retention, n_scheduled, n_running, n_succeeded, n_cancelled,"
                      " n_dead, webhooks, rate_count, rate_period, key_in_flight, key_pending,"
                      " final_statuses FROM queues ORDER BY qid"};
constexpr Sql kQueueSettings{
    "queue_settings",
    "UPDATE queues SET paused=$2, concurrency=$3, max_attempts=$4, backoff_base=$5,"
    " backoff_cap=$6, retention=$7, webhooks=$8, rate_count=$9, rate_period=$10,"
    " key_in_flight=$11, key_pending=$12, final_statuses=$13 WHERE qid=$1"};
constexpr Sql kQueueCounts{"queue_counts",
                           "UPDATE queues SET n_scheduled=$2, n_running=$3, n_succeeded=$4,"
                           " n_cancelled=$5, n_dead=$6 WHERE qid=$1"};

// A taken name is not an error (it would abort the transaction): the row is
// simply not inserted, and Insert sees no row affected.
#define CHRONOQ_PG_INSERT_TASK                                                                  \
  "INSERT INTO tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, name, run_at," \
  " token, last_error, updated, backoff_base, backoff_cap, target, sid, key, worker, korder)"   \
  " VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,"                 \
  " CASE WHEN $18::text IS NOT NULL THEN $4::bigint END)"                                       \
  " ON CONFLICT (name) WHERE name IS NOT NULL DO NOTHING"
constexpr Sql kInsert{"insert", CHRONOQ_PG_INSERT_TASK};
// A keyed row, and kKeyCursorLower for it, in one statement: the engine loop
// waits for each statement's round trip, and every keyed enqueue needs both.
// The count is 0 when the name was taken (nothing written).
constexpr Sql kInsertKeyed{
    "insert_keyed",
    "WITH t AS (" CHRONOQ_PG_INSERT_TASK
    " RETURNING qid, key, korder, prio, seq, state, attempt),"
    " lowered AS (UPDATE key_cursors AS c SET korder=t.korder, prio=t.prio, seq=t.seq - 1 FROM t"
    "   WHERE t.state=0 AND t.attempt=0 AND c.qid=t.qid AND c.key=t.key"
    "   AND (c.korder, c.prio, c.seq) >= (t.korder, t.prio, t.seq))"
    " SELECT count(*) FROM t"};
constexpr Sql kOverwrite{
    "overwrite",
    "UPDATE tasks SET qid=$2, state=$3, due=$4, prio=$5, attempt=$6, max_attempts=$7,"
    " payload=$8, name=$9, run_at=$10, token=$11, last_error=$12, updated=$13,"
    " backoff_base=$14, backoff_cap=$15, target=$16, sid=$17, key=$18, worker=$19,"
    " korder=CASE WHEN $18::text IS NULL THEN NULL"
    "             WHEN $3::integer=0 AND $6::integer=0 THEN $4::bigint ELSE korder END"
    " WHERE seq=$1"};
constexpr Sql kDelete{"delete", "DELETE FROM tasks WHERE seq=$1 RETURNING qid, key"};
constexpr Sql kBySeq{"by_seq", "SELECT " CHRONOQ_PG_TASK_COLS_NOW
                               " FROM tasks t" CHRONOQ_PG_JOURNAL_JOIN " WHERE t.seq=$1"};
constexpr Sql kByName{"by_name", "SELECT " CHRONOQ_PG_TASK_COLS_NOW
                                 " FROM tasks t" CHRONOQ_PG_JOURNAL_JOIN " WHERE t.name=$1"};
// SET expressions read the row as it was: run_at takes the old due.
//
// The state tests: CHRONOQ_PG_STATE_IS (rows found by seq go through the
// primary key only).
//
// A claim or acknowledgement of one run of consecutive seqs (store.h,
// SeqRuns: the usual batch) names the run by its ends ($4, $7 and $5, $6 in
// the *_run forms): an index range scan of the primary key instead of one
// search per element of the array.
//
// A batch of two to four runs (the *_ranges forms) names them by their
// ends, in two arrays of four (empty runs pad them): one range scan per run,
// OR-ed in a bitmap (a claim of 256 in two runs: ~0.5 ms of the backend's
// time instead of 1.2 ms with the array of seqs). A join with unnest() of
// the ends would say it shorter, but its generic plan scans the table.
// clang-format off
#define CHRONOQ_PG_RANGE(lo, hi, i) \
  "t.seq BETWEEN (" lo "::bigint[])[" i "] AND (" hi "::bigint[])[" i "]"
#define CHRONOQ_PG_RANGES(lo, hi)                                                \
  "(" CHRONOQ_PG_RANGE(lo, hi, "1") " OR " CHRONOQ_PG_RANGE(lo, hi, "2") " OR "  \
      CHRONOQ_PG_RANGE(lo, hi, "3") " OR " CHRONOQ_PG_RANGE(lo, hi, "4") ")"
// clang-format on
constexpr size_t kMaxRanges = 4;
//
// A claim, into the journal: the scheduled rows of the batch, read as they
// are, and one claims row for them (none when none was scheduled). $1 the
// lease's end, $2 the token, $3 the claim's time, $4 (and $7) the seqs, $5
// the worker, $6 the node, then the claim's id.
#define CHRONOQ_PG_JOURNAL_CLAIM(seqs, id) \
  "WITH r AS (SELECT " CHRONOQ_PG_CLAIMED_COLS " FROM tasks t WHERE " seqs                   \
  " AND " CHRONOQ_PG_STATE_IS("t.state", "0") "),"                                            \
  " j AS (INSERT INTO claims(id, token, lease_until, claimed, lo, hi, worker, node, seqs)"   \
  "  SELECT " id ", $2, $1, $3, min(seq), max(seq), $5, $6, array_agg(seq ORDER BY seq)"     \
  "  FROM r HAVING count(*) > 0)"                                                            \
  " SELECT * FROM r"
constexpr Sql kJournalClaim{"journal_claim",
                            CHRONOQ_PG_JOURNAL_CLAIM("t.seq = ANY($4::bigint[])", "$7::bigint")};
constexpr Sql kJournalClaimRun{"journal_claim_run",
                               CHRONOQ_PG_JOURNAL_CLAIM("t.seq BETWEEN $4 AND $7", "$8::bigint")};
constexpr Sql kJournalClaimRanges{
    "journal_claim_ranges", CHRONOQ_PG_JOURNAL_CLAIM(CHRONOQ_PG_RANGES("$4", "$7"), "$8::bigint")};
// Journaled tasks of claim id $3 acknowledged: scheduled -> succeeded with what
// the claim would have written, in one write of each row; with $4 the claim
// is done (no task of it runs any more) and its record goes. The claims row
// is read as the statement began, so the CTE's delete does not hide it.
#define CHRONOQ_PG_JOURNAL_ACK(seqs)                                                       \
  "WITH d AS (DELETE FROM claims WHERE id = $3 AND $4::boolean)"                           \
  " UPDATE tasks AS t SET state=2, run_at=t.due, due=$1, attempt=t.attempt+1, updated=$2," \
  " token=NULL, worker=c.worker, claimed=c.claimed, node=c.node FROM claims c"             \
  " WHERE c.id = $3 AND " seqs " AND " CHRONOQ_PG_STATE_IS("t.state", "0")
constexpr Sql kJournalAck{"journal_ack", CHRONOQ_PG_JOURNAL_ACK("t.seq = ANY($5::bigint[])")};
constexpr Sql kJournalAckRun{"journal_ack_run", CHRONOQ_PG_JOURNAL_ACK("t.seq BETWEEN $5 AND $6")};
constexpr Sql kJournalAckRanges{"journal_ack_ranges",
                                CHRONOQ_PG_JOURNAL_ACK(CHRONOQ_PG_RANGES("$5", "$6"))};
// Settling claims: their journaled tasks' rows get what a claim wrote into
// them before the journal (running, with the claim's lease, token, worker,
// node and time, the attempt counted), and their records go.
#define CHRONOQ_PG_SETTLE(records)                                                           \
  "WITH c AS (DELETE FROM claims" records                                                    \
  " RETURNING *)"                                                                            \
  " UPDATE tasks AS t SET state=1, run_at=t.due, due=c.lease_until, token=c.token,"          \
  " attempt=t.attempt+1, updated=c.claimed, worker=c.worker, claimed=c.claimed, node=c.node" \
  " FROM c WHERE " CHRONOQ_PG_IN_CLAIM("c", "t.seq") " AND " CHRONOQ_PG_STATE_IS("t.state", "0")
constexpr Sql kSettle{"settle", CHRONOQ_PG_SETTLE(" WHERE id = ANY($1::bigint[])")};
constexpr Sql kSettleAll{"settle_all", CHRONOQ_PG_SETTLE("")};
// The journal as memory keeps it (PostgresStore::journaled_): each
// journaled task and its claim's id. Records whose tasks all finished
// otherwise are dropped first (kJournalPrune).
constexpr Sql kJournalLoad{
    "journal_load",
    "SELECT c.id, t.seq, c.lo, c.hi FROM claims c JOIN tasks t ON " CHRONOQ_PG_IN_CLAIM(
        "c", "t.seq") " AND " CHRONOQ_PG_STATE_IS("t.state", "0")};
constexpr Sql kJournalPrune{
    "journal_prune",
    "DELETE FROM claims c WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE " CHRONOQ_PG_IN_CLAIM(
        "c", "t.seq") " AND " CHRONOQ_PG_STATE_IS("t.state", "0") ")"};
constexpr Sql kJournalLastId{"journal_last_id", "SELECT coalesce(max(id), 0) FROM claims"};
// Leaving `scheduled` keeps the instant it was due in run_at; entering it
// clears run_at, since due is the run time again.
constexpr Sql kMove{
    "move",
    "UPDATE tasks SET state=$2,"
    " run_at=CASE WHEN $2::integer=0 THEN NULL WHEN state=0 THEN due ELSE run_at END,"
    " due=$3, last_error=coalesce($4::bytea, last_error), attempt=coalesce($5::integer, attempt),"
    " token=CASE WHEN $2::integer=1 THEN token ELSE NULL END, updated=$6,"
    " korder=CASE WHEN key IS NOT NULL AND $2::integer=0 AND coalesce($5::integer, attempt)=0"
    "             THEN $3::bigint ELSE korder END,"
    " attempts=CASE WHEN $7::text IS NULL THEN attempts ELSE nullif($7::text, '') END"
    " WHERE seq=$1"};
#define CHRONOQ_PG_MARK_SUCCEEDED(seqs)                                  \
  "UPDATE tasks SET state=2, due=$1, token=NULL, updated=$2 WHERE " seqs \
  " AND " CHRONOQ_PG_STATE_IS("state", "1")
constexpr Sql kMarkSucceeded{"mark_succeeded",
                             CHRONOQ_PG_MARK_SUCCEEDED("seq = ANY($3::bigint[])")};
constexpr Sql kMarkSucceededRun{"mark_succeeded_run",
                                CHRONOQ_PG_MARK_SUCCEEDED("seq BETWEEN $3 AND $4")};
constexpr Sql kSetDue{"set_due", "UPDATE tasks SET due=$2, updated=$3 WHERE seq=$1"};
constexpr Sql kSetPayload{"set_payload", "UPDATE tasks SET payload=$2 WHERE seq=$1"};
constexpr Sql kSetResponse{"set_response", "UPDATE tasks SET response=$2 WHERE seq=$1"};
constexpr Sql kSaveToken{"save_token", "UPDATE meta SET v=$1 WHERE k='next_token'"};
constexpr Sql kLoadMeta{"load_meta",
                        "SELECT (SELECT v FROM meta WHERE k='schema'),"
                        " (SELECT v FROM meta WHERE k='next_token'), (SELECT max(seq) FROM tasks)"};

// (bucket, seq) > (from, after) is "a later bucket, or the same one after
// the rows already read", and one range of tasks_due.
constexpr Sql kLoadScheduled{"load_scheduled",
                             "SELECT seq, qid, due, prio, key, attempt FROM tasks WHERE state=0"
                             " AND (" CHRONOQ_PG_BUCKET ", seq) > ($1, $2) AND " CHRONOQ_PG_BUCKET
                             " < $3"
                             " ORDER BY " CHRONOQ_PG_BUCKET ", seq LIMIT $4"};
constexpr Sql kNextScheduled{"next_scheduled", "SELECT " CHRONOQ_PG_BUCKET
                                               " FROM tasks WHERE state=0 AND " CHRONOQ_PG_BUCKET
                                               " >= $1 ORDER BY " CHRONOQ_PG_BUCKET " LIMIT 1"};
constexpr Sql kLoadRunning{"load_running",
                           "SELECT " CHRONOQ_PG_TASK_COLS " FROM tasks t WHERE t.state=1"};
constexpr Sql kPurge{"purge",
                     "DELETE FROM tasks WHERE seq IN (SELECT seq FROM tasks WHERE state IN (2,3)"
                     " AND " CHRONOQ_PG_BUCKET
                     " <= $3 AND due <= $1 LIMIT $2)"
                     " RETURNING qid, state, key"};
// The earliest bucket of each finished state: two probes of tasks_due.
constexpr Sql kNextPurge{"next_purge", "SELECT least((SELECT " CHRONOQ_PG_BUCKET
                                       " FROM tasks WHERE state=2 AND " CHRONOQ_PG_BUCKET
                                       " IS NOT NULL ORDER BY " CHRONOQ_PG_BUCKET
                                       " LIMIT 1), (SELECT " CHRONOQ_PG_BUCKET
                                       " FROM tasks WHERE state=3 AND " CHRONOQ_PG_BUCKET
                                       " IS NOT NULL ORDER BY " CHRONOQ_PG_BUCKET " LIMIT 1))"};

// A keyed task waits to start when scheduled with attempt 0; then korder =
// due. tasks_korder ends with seq, so "after (korder, prio, seq)" is one
// range (SQLite needs two searches, seq being its rowid).
//
// Journaled tasks (running, their rows still scheduled) are left out by
// KeyHeads from memory (journaled_), not here: a NOT EXISTS over `claims`
// per row read walked that table's pages, which a drain fills with the
// dead versions of its claims' records, so a read of 129 rows took ~0.4 ms
// of the server's time instead of ~0.2 ms (W6 keyed: 600 reads, 235 ms of
// a 1.1 s drain).
constexpr Sql kKeyHeads{"key_heads",
                        "SELECT seq, qid, due, prio, korder FROM tasks t WHERE qid=$1 AND key=$2"
                        " AND (korder, prio, seq) > ($3, $4, $5) AND state=0 AND attempt=0"
                        " ORDER BY korder, prio, seq LIMIT $6"};
// kKeyHeads for several keys in one statement (KeyHeadsOf): the reads as
// arrays ($1-$6: qid, key, korder, prio, seq, limit), each one index range
// of tasks_korder, the rows tagged with their read's number. KeyHeadsOf
// puts each read's rows in order: an ORDER BY here was a quarter of the
// statement's time (100 reads of 129 rows: 10.8 ms against 8.3 ms).
constexpr Sql kKeyHeadsOf{
    "key_heads_of",
    "SELECT r.i, t.seq, t.qid, t.due, t.prio, t.korder"
    " FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::integer[], $5::bigint[],"
    "  $6::integer[]) WITH ORDINALITY AS r(qid, key, korder, prio, seq, lim, i)"
    " CROSS JOIN LATERAL (SELECT seq, qid, due, prio, korder FROM tasks"
    "  WHERE qid=r.qid AND key=r.key COLLATE \"C\""
    "  AND (korder, prio, seq) > (r.korder, r.prio, r.seq) AND state=0 AND attempt=0"
    "  ORDER BY korder, prio, seq LIMIT r.lim) t"};
constexpr Sql kKeyPending{"key_pending",
                          "SELECT count(*) FROM tasks t WHERE qid=$1 AND key=$2"
                          " AND (korder, prio, seq) > ($3, $4, $5) AND state=0 AND attempt=0 "
                          "AND " CHRONOQ_PG_NOT_JOURNALED};
constexpr Sql kKeyCursor{"key_cursor",
                         "SELECT korder, prio, seq FROM key_cursors WHERE qid=$1 AND key=$2"};
// Never backwards: an existing cursor moves only to a later place.
constexpr Sql kKeyCursorSave{
    "key_cursor_save",
    "INSERT INTO key_cursors AS c(qid, key, korder, prio, seq) VALUES($1, $2, $3, $4, $5)"
    " ON CONFLICT (qid, key) DO UPDATE SET korder=excluded.korder, prio=excluded.prio,"
    " seq=excluded.seq WHERE (c.korder, c.prio, c.seq) < (excluded.korder, excluded.prio,"
    " excluded.seq)"};
// Task $1 waits to start: the cursor of its key moves back to just before
// it, unless it is before it already.
// Takes the rows' seqs as an array; a key with several of them moves back
// to the first of its tasks in line.
constexpr Sql kKeyCursorLower{
    "key_cursor_lower",
    "UPDATE key_cursors AS c SET korder=t.korder, prio=t.prio, seq=t.seq - 1"
    " FROM (SELECT DISTINCT ON (qid, key) qid, key, korder, prio, seq FROM tasks"
    "       WHERE seq = ANY($1::bigint[]) AND key IS NOT NULL AND "
    CHRONOQ_PG_STATE_IS("state", "0") " AND attempt=0"
    "       ORDER BY qid, key, korder, prio, seq) AS t"
    " WHERE c.qid=t.qid AND c.key=t.key"
    " AND (c.korder, c.prio, c.seq) >= (t.korder, t.prio, t.seq)"};
// A cursor with no task of its key waiting to start at or before it says
// nothing (the key index holds no other tasks). Takes the
// keys as two arrays (qids, keys), so a purge drops its keys' cursors in one
// statement.
constexpr Sql kKeyCursorDrop{
    "key_cursor_drop",
    "DELETE FROM key_cursors AS c USING unnest($1::bigint[], $2::text[]) AS k(qid, key)"
    " WHERE c.qid=k.qid AND c.key=k.key AND NOT EXISTS("
    "  SELECT 1 FROM tasks t WHERE t.qid=c.qid AND t.key=c.key AND t.state=0 AND t.attempt=0"
    " AND " CHRONOQ_PG_NOT_JOURNALED
    "  AND (t.korder, t.prio, t.seq) <= (c.korder, c.prio, c.seq))"};
constexpr Sql kKeyRetries{
    "key_retries",
    "SELECT qid, key FROM tasks t"
    " WHERE key IS NOT NULL AND state=0 AND attempt>0 AND " CHRONOQ_PG_NOT_JOURNALED};

constexpr Sql kScheduleInsert{
    "schedule_insert",
    "INSERT INTO schedules(name, qid, spec, paused, current_seq, cursor, next_at, claimed_at,"
    " runs, skipped, last_task, last_for, last_state, last_finished, last_error, created,"
    " updated) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)"
    " ON CONFLICT (name) DO NOTHING RETURNING sid"};
constexpr Sql kScheduleSave{
    "schedule_save",
    "UPDATE schedules SET name=$2, qid=$3, spec=$4, paused=$5, current_seq=$6, cursor=$7,"
    " next_at=$8, claimed_at=$9, runs=$10, skipped=$11, last_task=$12, last_for=$13,"
    " last_state=$14, last_finished=$15, last_error=$16, created=$17, updated=$18"
    " WHERE sid=$1"};
constexpr Sql kScheduleDelete{"schedule_delete", "DELETE FROM schedules WHERE sid=$1"};
constexpr Sql kScheduleBySid{"schedule_by_sid",
                             "SELECT " CHRONOQ_PG_SCHEDULE_COLS " FROM schedules WHERE sid=$1"};
constexpr Sql kScheduleByName{"schedule_by_name",
                              "SELECT " CHRONOQ_PG_SCHEDULE_COLS " FROM schedules WHERE name=$1"};
constexpr Sql kSchedulesDue{"schedules_due",
                            "SELECT " CHRONOQ_PG_SCHEDULE_COLS
                            " FROM schedules"
                            " WHERE next_at < $1 AND sid > $2 ORDER BY sid LIMIT $3"};
constexpr Sql kSchedulesList{"schedules_list",
                             "SELECT " CHRONOQ_PG_SCHEDULE_COLS
                             " FROM schedules"
                             " WHERE name > $1 AND ($2::bigint IS NULL OR qid = $2::bigint)"
                             " ORDER BY name LIMIT $3"};

constexpr Sql kLockSave{"lock_save",
                        "INSERT INTO locks(key, token, owner, expires) VALUES($1, $2, $3, $4)"
                        " ON CONFLICT (key) DO UPDATE SET token=excluded.token,"
                        " owner=excluded.owner, expires=excluded.expires"};
constexpr Sql kLockDelete{"lock_delete", "DELETE FROM locks WHERE key=$1"};
constexpr Sql kLocks{"locks", "SELECT key, token, owner, expires FROM locks"};

// clang-format off
constexpr const Sql* kWriterStatements[] = {
    &kQueueId,          &kQueueAdd,         &kQueues,           &kQueueSettings,    &kQueueCounts,
    &kInsert,           &kOverwrite,        &kDelete,           &kBySeq,            &kByName,
    &kMove,             &kMarkSucceeded,    &kSetDue,           &kSetPayload,       &kSetResponse,
    &kSaveToken,        &kLoadMeta,         &kLoadScheduled,    &kNextScheduled,    &kLoadRunning,
    &kPurge,            &kNextPurge,        &kKeyHeads,         &kKeyPending,       &kKeyCursor,
    &kKeyCursorSave,    &kKeyCursorLower,   &kKeyCursorDrop,    &kKeyRetries,       &kScheduleInsert,
    &kScheduleSave,     &kScheduleDelete,   &kScheduleBySid,    &kScheduleByName,   &kSchedulesDue,
    &kSchedulesList,    &kLockSave,         &kLockDelete,       &kLocks,            &kInsertKeyed,
    &kMarkSucceededRun, &kJournalClaim,     &kJournalClaimRun,  &kJournalAck,       &kJournalAckRun,
    &kSettle,           &kSettleAll,        &kJournalLoad,      &kJournalPrune,     &kJournalLastId,
    &kJournalClaimRanges, &kJournalAckRanges, &kBegin, &kKeyHeadsOf,
};
// clang-format on

// A task with its queue's name and its schedule's (empty if none), for readers.
#define CHRONOQ_PG_READ_FROM(tasks)                                                                \
  "SELECT " CHRONOQ_PG_TASK_COLS_NOW ", q.name, coalesce(s.name, '') FROM " tasks                  \
  " JOIN queues q ON q.qid = t.qid LEFT JOIN schedules s ON s.sid = t.sid" CHRONOQ_PG_JOURNAL_JOIN \
  " WHERE "
#define CHRONOQ_PG_READ_COLS CHRONOQ_PG_READ_FROM("tasks t")
constexpr Sql kReadBySeq{"read_by_seq", CHRONOQ_PG_READ_COLS "t.seq = $1"};
constexpr Sql kReadByName{"read_by_name", CHRONOQ_PG_READ_COLS "t.name = $1"};

// The task columns of a row, in kInsert's order ($1-$19).
void AppendTask(Params& p, const TaskRow& r) {
  p.Int(r.seq).Int(r.qid).Int(static_cast<int64_t>(r.state)).OptTime(r.due);
  p.Int(r.priority).Int(r.attempt).Int(r.max_attempts).Text(r.payload).OptText(r.name);
  p.OptTime(r.run_at).OptToken(r.token).OptBytes(r.last_error).OptTime(r.updated);
  p.OptDuration(r.backoff_base).OptDuration(r.backoff_cap).OptText(r.target).OptInt(r.sid);
  p.OptText(r.key).OptText(r.worker);
}

// Text in COPY's text form: backslash escapes for the backslash and the
// characters that end fields and lines.
void AppendCopyText(std::string& out, std::string_view v) {
  for (const char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
}

// COPY's text form of the same columns (kCopyTasks), one line: values
// separated by tabs, \N for null, backslash escapes in text.
constexpr char kCopyTasks[] =
    "COPY tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, name, run_at,"
    " token, last_error, updated, backoff_base, backoff_cap, target, sid, key, worker, korder)"
    " FROM STDIN";
void AppendCopyRow(std::string& out, const TaskRow& r) {
  auto text = [&](std::string_view v) { AppendCopyText(out, v); };
  auto field = [&](std::string_view v) {
    out += v;
    out += '\t';
  };
  auto num = [&](int64_t v) {
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    field(std::string_view(buf, static_cast<size_t>(end - buf)));
  };
  auto opt_num = [&](const auto& v, auto to_int) { v ? num(to_int(*v)) : field("\\N"); };
  auto opt_text = [&](const std::optional<std::string>& v) {
    if (v) {
      text(*v);
      out += '\t';
    } else {
      field("\\N");
    }
  };
  const auto micros = [](Timestamp t) { return Micros(t); };
  const auto count = [](Duration d) { return static_cast<int64_t>(d.count()); };
  num(r.seq);
  num(r.qid);
  num(static_cast<int64_t>(r.state));
  opt_num(r.due, micros);
  num(r.priority);
  num(r.attempt);
  num(r.max_attempts);
  text(r.payload);
  out += '\t';
  opt_text(r.name);
  opt_num(r.run_at, micros);
  opt_num(r.token, [](uint64_t t) { return static_cast<int64_t>(t); });
  if (r.last_error) {
    // BYTEA's hex input form, its backslash escaped for COPY.
    out += "\\\\x";
    AppendHex(out, *r.last_error);
    out += '\t';
  } else {
    field("\\N");
  }
  opt_num(r.updated, micros);
  opt_num(r.backoff_base, count);
  opt_num(r.backoff_cap, count);
  opt_text(r.target);
  opt_num(r.sid, [](int64_t v) { return v; });
  opt_text(r.key);
  opt_text(r.worker);
  // korder: the due a keyed task waits to start at (as kInsert).
  if (r.key && r.due) {
    num(Micros(*r.due));
  } else {
    field("\\N");
  }
  out.back() = '\n';
}

// The schedule columns but sid, in kScheduleInsert's order.
void AppendSchedule(Params& p, const ScheduleRow& r) {
  p.Text(r.name).Int(r.qid).Text(r.spec).Bool(r.paused).OptInt(r.current_seq).OptTime(r.cursor);
  p.OptTime(r.next_at).OptTime(r.claimed_at).Int(r.runs).Int(r.skipped).OptText(r.last_task);
  p.OptTime(r.last_for);
  if (r.last_state) {
    p.Int(static_cast<int64_t>(*r.last_state));
  } else {
    p.Null();
  }
  p.OptTime(r.last_finished).OptBytes(r.last_error).Time(r.created).Time(r.updated);
}

// --- copying a whole store (store.h: ImportTasks and the rest) ---
// Imports go through COPY (Connection::CopyRow), which loads a million
// tasks several times faster than multi-row INSERTs; exports are plain
// pages by key. Statements are not prepared: a copy runs each once per
// batch of thousands of rows, and an engine never.

// One line of COPY's text form, built field by field: values separated by
// tabs, \N for null, backslash escapes in text, BYTEA in hex.
class CopyLine {
 public:
  CopyLine& Int(int64_t v) {
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    out_.append(buf, static_cast<size_t>(end - buf));
    out_ += '\t';
    return *this;
  }
  CopyLine& Null() {
    out_ += "\\N\t";
    return *this;
  }
  CopyLine& Bool(bool v) {
    out_ += v ? "t\t" : "f\t";
    return *this;
  }
  CopyLine& Time(Timestamp t) { return Int(Micros(t)); }
  CopyLine& Text(std::string_view v) {
    AppendCopyText(out_, v);
    out_ += '\t';
    return *this;
  }
  CopyLine& Bytes(std::string_view v) {
    out_ += "\\\\x";  // the hex input form's backslash, escaped for COPY
    AppendHex(out_, v);
    out_ += '\t';
    return *this;
  }
  CopyLine& OptInt(const std::optional<int64_t>& v) { return v ? Int(*v) : Null(); }
  CopyLine& OptTime(const std::optional<Timestamp>& v) { return v ? Time(*v) : Null(); }
  CopyLine& OptDuration(const std::optional<Duration>& v) {
    return v ? Int(static_cast<int64_t>(v->count())) : Null();
  }
  CopyLine& OptText(const std::optional<std::string>& v) { return v ? Text(*v) : Null(); }
  CopyLine& OptBytes(const std::optional<std::string>& v) { return v ? Bytes(*v) : Null(); }
  // The line, its last tab turned into the line's end; Start() begins the next.
  std::string_view End() {
    out_.back() = '\n';
    return out_;
  }
  CopyLine& Start() {
    out_.clear();
    return *this;
  }

 private:
  std::string out_;
};

constexpr char kImportTasks[] =
    "COPY tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, name, run_at, token,"
    " last_error, updated, backoff_base, backoff_cap, target, response, sid, key, worker, korder,"
    " claimed, node, attempts) FROM STDIN";
constexpr char kImportQueues[] =
    "COPY queues(qid, name, paused, webhooks, concurrency, max_attempts, backoff_base,"
    " backoff_cap, retention, n_scheduled, n_running, n_succeeded, n_cancelled, n_dead,"
    " rate_count, rate_period, key_in_flight, key_pending, final_statuses) FROM STDIN";
constexpr char kImportSchedules[] = "COPY schedules(" CHRONOQ_PG_SCHEDULE_COLS ") FROM STDIN";
constexpr char kImportKeyCursors[] = "COPY key_cursors(qid, key, korder, prio, seq) FROM STDIN";
// Identity sequences hand out ids above the imported ones: raised to `max`
// ($1), never lowered. setval(s, n) makes n + 1 the next id.
constexpr char kRaiseQueueIds[] =
    "SELECT setval(x.s, $1::bigint) FROM (SELECT pg_get_serial_sequence('queues', 'qid')::regclass"
    " AS s) x WHERE $1::bigint > coalesce(pg_sequence_last_value(x.s), 0)";
constexpr char kRaiseScheduleIds[] =
    "SELECT setval(x.s, $1::bigint) FROM (SELECT pg_get_serial_sequence('schedules', 'sid')::"
    "regclass AS s) x WHERE $1::bigint > coalesce(pg_sequence_last_value(x.s), 0)";

// Creates the schema and its tables, or brings them up to kSchemaVersion,
// in one transaction on `conn` (idle). Opens of other schemas and other
// engines wait on the transaction's advisory lock, so two never create the
// same objects at once.
Status MigrateInTransaction(Connection& conn, const std::string& schema) {
  CHRONOQ_RETURN_IF_ERROR(conn.ExecOnce("SELECT pg_advisory_xact_lock($1::bigint)",
                                        Params().Int(LockKey("migrate", schema)),
                                        "lock the schema for migration")
                              .status());
  // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the
  // schema exists: ask first, so that a schema made for chronoq by an
  // administrator is enough.
  CHRONOQ_ASSIGN_OR_RETURN(Rows exists,
                           conn.ExecOnce("SELECT 1 FROM pg_namespace WHERE nspname = $1",
                                         Params().Text(schema), "look for the schema"));
  if (exists.empty()) {
    CHRONOQ_RETURN_IF_ERROR(conn.Run("CREATE SCHEMA " + Quoted(schema), "create schema " + schema));
  }
  CHRONOQ_RETURN_IF_ERROR(conn.Run(kSchema, "create the tables of schema " + schema));
  CHRONOQ_ASSIGN_OR_RETURN(
      Rows version, conn.RunRows("SELECT v FROM meta WHERE k='schema'", "read schema version"));
  if (version.empty()) return Status::Internal("schema " + schema + " has no version");
  const int64_t v = version.Int(0, 0);
  if (v < 1) {
    return Status::Internal("schema " + schema + " has unknown version " + std::to_string(v));
  }
  if (v < kSchemaVersion) {
    spdlog::info("migrating schema {} from version {} to {}", schema, v, kSchemaVersion);
  }
  // Version 1 -> 2: the worker that claimed each task last. ADD COLUMN
  // without a default rewrites no row.
  if (v == 1) {
    CHRONOQ_RETURN_IF_ERROR(
        conn.Run("ALTER TABLE tasks ADD COLUMN IF NOT EXISTS worker TEXT; UPDATE meta SET v=2 "
                 "WHERE k='schema'",
                 "migrate schema " + schema + " to version 2"));
  }
  // Version 2 -> 3: the HTTP statuses that fail a webhook queue's tasks for
  // good (QueueSettings::final_statuses).
  if (v <= 2) {
    CHRONOQ_RETURN_IF_ERROR(
        conn.Run("ALTER TABLE queues ADD COLUMN IF NOT EXISTS final_statuses TEXT; UPDATE meta "
                 "SET v=3 WHERE k='schema'",
                 "migrate schema " + schema + " to version 3"));
  }
  // Version 3 -> 4: the claim of each task's last attempt (its time and the
  // engine that granted it) and its earlier finished attempts
  // (Task::attempts). Rewrites no row either.
  if (v <= 3) {
    CHRONOQ_RETURN_IF_ERROR(
        conn.Run("ALTER TABLE tasks ADD COLUMN IF NOT EXISTS claimed BIGINT, ADD COLUMN IF NOT "
                 "EXISTS node TEXT, ADD COLUMN IF NOT EXISTS attempts TEXT; UPDATE meta SET v=4 "
                 "WHERE k='schema'",
                 "migrate schema " + schema + " to version 4"));
  }
  // Version 4 -> 5: the claim journal (kSchema made the table).
  if (v <= 4) {
    CHRONOQ_RETURN_IF_ERROR(conn.Run("UPDATE meta SET v=5 WHERE k='schema'",
                                     "migrate schema " + schema + " to version 5"));
  }
  return {};  // a newer version is left alone: LoadMeta refuses it
}

}  // namespace

std::string pg::SessionSetup(const std::string& schema) {
  return "SET search_path TO " + Quoted(schema) +
         "; SET bytea_output TO hex; SET client_encoding TO 'UTF8';"
         " SET client_min_messages TO warning;"
         " SET default_transaction_isolation TO 'read committed';";
}

Status pg::MigrateSchema(Connection& conn, const std::string& schema) {
  CHRONOQ_RETURN_IF_ERROR(conn.Run("BEGIN", "begin"));
  Status s = MigrateInTransaction(conn, schema);
  if (s.ok()) {
    Result<Rows> r = conn.RunRows("COMMIT", "commit");
    s = r.status();
    if (s.ok() && r->command() != "COMMIT") s = Status::Internal("migrate: rolled back");
  }
  if (!s.ok() && conn.transaction_status() != PQTRANS_IDLE && !conn.lost()) {
    conn.Run("ROLLBACK", "rollback").IgnoreError();
  }
  return s;
}

namespace {

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string schema, Clock& clock, std::optional<PostgresLeadership> leadership)
      : schema_(std::move(schema)), clock_(clock), leadership_(std::move(leadership)) {}
  ~PostgresStore() override {
    // The server drops a session's locks only once its backend has exited,
    // a little after the connection closes: an engine opened right after
    // this one closed would find the schema still locked.
    if (locked_ && !writer_.lost()) {
      writer_
          .ExecOnce("SELECT pg_advisory_unlock($1::bigint)",
                    Params().Int(LockKey("engine", schema_)), "unlock the schema")
          .status()
          .IgnoreError();
    }
  }

  Status Open(const std::string& conninfo) {
    const std::string session = SessionSetup(schema_);
    // Durability: a commit returns once its WAL is flushed on the server,
    // whatever the server's or the database's default.
    CHRONOQ_RETURN_IF_ERROR(
        writer_.Connect(conninfo, "chronoq writer", session + " SET synchronous_commit TO on;"));
    CHRONOQ_RETURN_IF_ERROR(CheckServer());
    // The writer idles between commits and must not be ended for it: with
    // it would go the schema's lock, and the engine.
    CHRONOQ_RETURN_IF_ERROR(KeepWriterSession());
    CHRONOQ_RETURN_IF_ERROR(LockSchema(leadership_ ? leadership_->lock_patience : kLockPatience));
    CHRONOQ_RETURN_IF_ERROR(Migrate());
    if (leadership_) CHRONOQ_RETURN_IF_ERROR(TakeLeadership());
    for (const Sql* sql : kWriterStatements) CHRONOQ_RETURN_IF_ERROR(writer_.Prepare(*sql));
    writer_.SetBeforeStatement([this] { return !keyed_inserts_.empty(); },
                               [this] { return LowerPendingKeyCursors(); });
    // Nothing reads yet while the store opens; the lock only keeps the rule simple.
    MutexLock lock(reader_mu_);
    CHRONOQ_RETURN_IF_ERROR(reader_.Connect(conninfo, "chronoq reader",
                                            session + " SET default_transaction_read_only TO on;"));
    CHRONOQ_RETURN_IF_ERROR(reader_.Prepare(kReadBySeq));
    return reader_.Prepare(kReadByName);
  }

  Result<StoreMeta> LoadMeta() override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kLoadMeta, "load meta"));
    if (r.empty()) return Status::Internal("load meta: no row");
    if (r.Int(0, 0) != kSchemaVersion) {
      return Status::FailedPrecondition(
          "schema " + schema_ + " has version " + std::to_string(r.Int(0, 0)) +
          ", which is not supported (expected " + std::to_string(kSchemaVersion) + ")");
    }
    StoreMeta meta;
    meta.next_token = static_cast<uint64_t>(r.Int(0, 1));
    meta.max_seq = r.Int(0, 2);
    return meta;
  }

  Status Begin() override {
    CHRONOQ_RETURN_IF_ERROR(EnsureWriter());
    // Sent, not waited for: its answer comes back with the transaction's
    // first statement that is read (a cycle's claim, or its COMMIT), one
    // round trip fewer per cycle (W6 keyed: 500 cycles in a row, each
    // waiting for the one before).
    if (!leadership_) return writer_.Send(kBegin, Params(), "begin");
    // The fence, in the same round trip as BEGIN: the epoch read under a
    // share lock, so a takeover's epoch bump waits for this transaction to
    // end, and any later transaction of ours sees the new epoch.
    Result<Rows> r = writer_.RunRows("BEGIN; SELECT epoch FROM leader FOR SHARE", "begin");
    if (r.ok() && !r->empty() && r->Int(0, 0) == epoch_) return {};
    Rollback();
    if (!r.ok() && !writer_.lost()) return r.status();
    return Deposed(!r.ok() ? r.status().message()
                           : "the leader epoch is " +
                                 (r->empty() ? std::string("gone") : std::to_string(r->Int(0, 0))) +
                                 ", not this node's " + std::to_string(epoch_) +
                                 ": another node took over");
  }
  Status Commit() override {
    // In the pipeline of the writes sent before it (Write), if any.
    Result<Rows> committed = writer_.ExecOnce("COMMIT", Params(), "commit");
    if (!committed.ok()) {
      journal_stale_ = true;
      return committed.status();
    }
    const Rows& r = *committed;
    // After a failed statement PostgreSQL ends the transaction on COMMIT
    // with a rollback, and says so only in the command tag.
    if (r.command() != "COMMIT") {
      journal_stale_ = true;
      return Status(StatusCode::kAborted, "commit: PostgreSQL rolled the transaction back (" +
                                              std::string(r.command()) +
                                              ") after a statement in it failed");
    }
    return {};
  }
  void Rollback() override {
    writer_.AbortCopy();
    writer_.Sync().IgnoreError();  // a failure there is why we roll back
    keyed_inserts_.clear();
    journal_stale_ = true;
    const PGTransactionStatusType st = writer_.transaction_status();
    if (st == PQTRANS_INTRANS || st == PQTRANS_INERROR) {
      writer_.Run("ROLLBACK", "rollback").IgnoreError();
    }
  }
  Status Savepoint() override { return writer_.Run("SAVEPOINT batch", "savepoint"); }
  Status ReleaseSavepoint() override { return writer_.Run("RELEASE batch", "release"); }
  void RollbackToSavepoint() override {
    journal_stale_ = true;
    writer_.Sync().IgnoreError();
    writer_.Run("ROLLBACK TO batch", "rollback to").IgnoreError();
    writer_.Run("RELEASE batch", "release").IgnoreError();
  }

  Result<int64_t> QueueId(const std::string& name) override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows found, writer_.Exec(kQueueId, Params().Text(name), "queue id"));
    if (!found.empty()) return found.Int(0, 0);
    CHRONOQ_ASSIGN_OR_RETURN(Rows added, writer_.Exec(kQueueAdd, Params().Text(name), "add queue"));
    if (added.empty()) return Status::Internal("add queue: no qid returned");
    return added.Int(0, 0);
  }

  Result<std::vector<QueueRow>> Queues() override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kQueues, "list queues"));
    std::vector<QueueRow> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      QueueRow q;
      q.qid = r.Int(i, 0);
      q.name = r.Text(i, 1);
      q.paused = r.Bool(i, 2);
      if (!r.IsNull(i, 3)) q.settings.concurrency = static_cast<int>(r.Int(i, 3));
      if (!r.IsNull(i, 4)) q.settings.max_attempts = static_cast<int>(r.Int(i, 4));
      if (!r.IsNull(i, 5) && !r.IsNull(i, 6)) {
        q.settings.backoff = Backoff{Duration(r.Int(i, 5)), Duration(r.Int(i, 6))};
      }
      if (!r.IsNull(i, 7)) q.settings.retention = Duration(r.Int(i, 7));
      for (int k = 0; k < 5; ++k) q.counts[static_cast<size_t>(k)] = r.Int(i, 8 + k);
      q.webhooks = r.Bool(i, 13);
      if (!r.IsNull(i, 14) && !r.IsNull(i, 15)) {
        q.settings.rate_limit = RateLimit{static_cast<int>(r.Int(i, 14)), Duration(r.Int(i, 15))};
      }
      if (!r.IsNull(i, 16)) q.settings.max_in_flight_per_key = static_cast<int>(r.Int(i, 16));
      q.settings.max_pending_per_key = r.OptInt(i, 17);
      q.settings.final_statuses = DecodeStatuses(r.OptText(i, 18));
      out.push_back(std::move(q));
    }
    return out;
  }

  Status SaveQueueSettings(int64_t qid, const QueueSettings& q, bool paused,
                           bool webhooks) override {
    Params p;
    p.Int(qid).Bool(paused);
    p.OptInt(q.concurrency ? std::optional<int64_t>(*q.concurrency) : std::nullopt);
    p.OptInt(q.max_attempts ? std::optional<int64_t>(*q.max_attempts) : std::nullopt);
    if (q.backoff) {
      p.Int(static_cast<int64_t>(q.backoff->base.count()));
      p.Int(static_cast<int64_t>(q.backoff->cap.count()));
    } else {
      p.Null().Null();
    }
    p.OptDuration(q.retention).Bool(webhooks);
    if (q.rate_limit) {
      p.Int(q.rate_limit->count).Int(static_cast<int64_t>(q.rate_limit->period.count()));
    } else {
      p.Null().Null();
    }
    p.OptInt(q.max_in_flight_per_key ? std::optional<int64_t>(*q.max_in_flight_per_key)
                                     : std::nullopt);
    p.OptInt(q.max_pending_per_key);
    p.OptText(EncodeStatuses(q.final_statuses));
    return writer_.Exec(kQueueSettings, p, "save queue settings").status();
  }

  Status SaveQueueCounts(int64_t qid, const std::array<int64_t, 5>& counts) override {
    Params p;
    p.Int(qid);
    for (const int64_t n : counts) p.Int(n);
    return Write(kQueueCounts, p, "save queue counts");
  }

  Result<bool> Insert(const TaskRow& r) override {
    if (!r.name && writer_.in_transaction()) {
      // No name, no conflict: the row joins the writer's COPY (write-behind;
      // see Connection::CopyRow), and its key's cursor is moved back before
      // the next statement (LowerPendingKeyCursors). Outside a transaction
      // the row is written at once, as it would commit at once.
      copy_line_.clear();
      AppendCopyRow(copy_line_, r);
      CHRONOQ_RETURN_IF_ERROR(writer_.CopyRow(kCopyTasks, copy_line_));
      if (r.key) keyed_inserts_.push_back(r.seq);
      return true;
    }
    Params p;
    AppendTask(p, r);
    if (r.key) {
      CHRONOQ_ASSIGN_OR_RETURN(Rows done, writer_.Exec(kInsertKeyed, p, "insert task"));
      return done.Int(0, 0) > 0;  // 0: the name is taken
    }
    CHRONOQ_ASSIGN_OR_RETURN(Rows done, writer_.Exec(kInsert, p, "insert task"));
    return done.affected() > 0;  // 0: the name is taken
  }

  Status Overwrite(const TaskRow& r) override {
    CHRONOQ_RETURN_IF_ERROR(Settle(r.seq));
    Params p;
    AppendTask(p, r);
    CHRONOQ_RETURN_IF_ERROR(writer_.Exec(kOverwrite, p, "overwrite task").status());
    return r.key ? LowerKeyCursors({r.seq}) : Status();
  }

  Status Delete(int64_t seq) override {
    CHRONOQ_RETURN_IF_ERROR(Settle(seq));
    CHRONOQ_ASSIGN_OR_RETURN(Rows gone, writer_.Exec(kDelete, Params().Int(seq), "delete task"));
    if (gone.empty() || gone.IsNull(0, 1)) return {};
    return DropKeyCursors({gone.Int(0, 0)}, {gone.Text(0, 1)});
  }

  Result<std::optional<TaskRow>> FindBySeq(int64_t seq) override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kBySeq, Params().Int(seq), "find task"));
    return r.empty() ? std::optional<TaskRow>() : std::optional<TaskRow>(TaskAt(r, 0));
  }
  Result<std::optional<TaskRow>> FindByName(const std::string& name) override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kByName, Params().Text(name), "find task"));
    return r.empty() ? std::optional<TaskRow>() : std::optional<TaskRow>(TaskAt(r, 0));
  }

  Result<std::vector<TaskRow>> MarkRunningMany(const std::vector<int64_t>& seqs,
                                               Timestamp lease_until, uint64_t token, Timestamp now,
                                               const std::string& worker,
                                               const std::string& node) override {
    std::vector<TaskRow> out;
    CHRONOQ_RETURN_IF_ERROR(LoadJournal());
    // A journaled task runs although its row says scheduled.
    std::vector<int64_t> scheduled;
    scheduled.reserve(seqs.size());
    for (int64_t seq : seqs) {
      if (!journaled_.contains(seq)) scheduled.push_back(seq);
    }
    if (scheduled.empty()) return out;
    const SeqsAs as = SeqsAs::Of(scheduled);
    const int64_t id = last_claim_id_ + 1;
    Params p;
    p.Time(lease_until).Int(static_cast<int64_t>(token)).Time(now);
    as.AddFirst(p);
    p.OptText(worker.empty() ? std::nullopt : std::optional<std::string>(worker));
    p.OptText(node.empty() ? std::nullopt : std::optional<std::string>(node));
    as.AddSecond(p);
    p.Int(id);
    Result<Rows> r = writer_.Exec(as.Pick(kJournalClaim, kJournalClaimRun, kJournalClaimRanges), p,
                                  "claim tasks");
    if (!r.ok()) return JournalLost(r.status());
    out.reserve(static_cast<size_t>(r->size()));
    for (int i = 0; i < r->size(); ++i) {
      // As a settled claim leaves the row (kSettle).
      TaskRow& row = out.emplace_back(TaskAt(*r, i));
      row.state = TaskState::kRunning;
      row.run_at = row.due;
      row.due = lease_until;
      row.token = token;
      ++row.attempt;
      row.updated = now;
      row.worker = worker.empty() ? std::nullopt : std::optional<std::string>(worker);
      journaled_.emplace(row.seq, id);
    }
    if (!out.empty()) {
      last_claim_id_ = id;
      Claim& claim = claims_[id];
      claim.running = static_cast<int64_t>(out.size());
      claim.lo = claim.hi = out.front().seq;
      for (const TaskRow& row : out) {
        claim.lo = std::min(claim.lo, row.seq);
        claim.hi = std::max(claim.hi, row.seq);
      }
    }
    return out;
  }

  Status Move(const Transition& t) override {
    CHRONOQ_RETURN_IF_ERROR(Settle(t.seq));
    Params p;
    p.Int(t.seq).Int(static_cast<int64_t>(t.state)).OptTime(t.due).OptBytes(t.last_error);
    p.OptInt(t.attempt ? std::optional<int64_t>(*t.attempt) : std::nullopt).Time(t.now);
    p.OptText(t.attempts);
    CHRONOQ_RETURN_IF_ERROR(writer_.Exec(kMove, p, "update task").status());
    return t.keyed && t.state == TaskState::kScheduled ? LowerKeyCursors({t.seq}) : Status();
  }

  Status MarkSucceeded(const std::vector<int64_t>& seqs, Timestamp purge_at,
                       Timestamp now) override {
    if (seqs.empty()) return {};
    CHRONOQ_RETURN_IF_ERROR(LoadJournal());
    // Journaled tasks by claim (usually all of one), and the others.
    std::vector<std::pair<int64_t, std::vector<int64_t>>> by_claim;
    std::vector<int64_t> settled;
    for (int64_t seq : seqs) {
      auto it = journaled_.find(seq);
      if (it == journaled_.end()) {
        settled.push_back(seq);
        continue;
      }
      const int64_t id = it->second;
      journaled_.erase(it);
      auto group = std::find_if(by_claim.begin(), by_claim.end(),
                                [id](const auto& g) { return g.first == id; });
      if (group == by_claim.end()) group = by_claim.insert(by_claim.end(), {id, {}});
      group->second.push_back(seq);
    }
    for (const auto& [id, group] : by_claim) {
      auto claim = claims_.find(id);
      claim->second.running -= static_cast<int64_t>(group.size());
      const bool done = claim->second.running <= 0;
      Params p;
      p.Time(purge_at).Time(now).Int(id).Bool(done);
      const SeqsAs as = SeqsAs::Of(group);
      as.AddFirst(p);
      as.AddSecond(p);
      Status s =
          Write(as.Pick(kJournalAck, kJournalAckRun, kJournalAckRanges), p, "acknowledge tasks");
      if (!s.ok()) return JournalLost(s);
      if (done) claims_.erase(claim);
    }
    if (settled.empty()) return {};
    Params p;
    p.Time(purge_at).Time(now);
    const SeqsAs as = SeqsAs::Of(settled, SeqsAs::kRun);
    as.AddFirst(p);
    as.AddSecond(p);
    return Write(as.Pick(kMarkSucceeded, kMarkSucceededRun, kMarkSucceeded), p,
                 "acknowledge tasks");
  }

  // How a statement names a batch's seqs: the list (`seq = ANY($a)`), one
  // run by its ends (`seq BETWEEN $a AND $b`), or up to kMaxRanges runs by
  // their ends' arrays (CHRONOQ_PG_RANGES) when they average 8 seqs or
  // more. The parameters
  // $a and $b go where the statement says (AddFirst, AddSecond: nothing
  // for the list's $b).
  struct SeqsAs {
    enum Form { kList, kRun, kRanges } form = kList;
    const std::vector<int64_t>* seqs = nullptr;
    std::vector<int64_t> lo, hi;

    // `richest`: the last form the statement has (kRun: no ranges form).
    static SeqsAs Of(const std::vector<int64_t>& seqs, Form richest = kRanges) {
      SeqsAs as;
      as.seqs = &seqs;
      const std::vector<std::pair<int64_t, int64_t>> runs = SeqRuns(seqs);
      if (seqs.size() >= 2 && runs.size() == 1) {
        as.form = kRun;
      } else if (richest == kRanges && runs.size() > 1 && runs.size() <= kMaxRanges &&
                 runs.size() * 8 <= seqs.size()) {
        as.form = kRanges;
      }
      if (as.form == kList) return as;
      for (const auto& [first, last] : runs) {
        as.lo.push_back(first);
        as.hi.push_back(last);
      }
      if (as.form == kRanges) {
        as.lo.resize(kMaxRanges, 1);  // empty runs: 1 to 0
        as.hi.resize(kMaxRanges, 0);
      }
      return as;
    }
    void AddFirst(Params& p) const {
      if (form == kList) {
        p.Ints(*seqs);
      } else if (form == kRun) {
        p.Int(lo.front());
      } else {
        p.Ints(lo);
      }
    }
    void AddSecond(Params& p) const {
      if (form == kRun) p.Int(hi.front());
      if (form == kRanges) p.Ints(hi);
    }
    const Sql& Pick(const Sql& list, const Sql& run, const Sql& ranges) const {
      return form == kList ? list : form == kRun ? run : ranges;
    }
  };

  Status SetDue(int64_t seq, Timestamp due, Timestamp now) override {
    CHRONOQ_RETURN_IF_ERROR(Settle(seq));
    return writer_.Exec(kSetDue, Params().Int(seq).Time(due).Time(now), "extend lease").status();
  }
  Status SetResponse(int64_t seq, const std::optional<std::string>& response) override {
    CHRONOQ_RETURN_IF_ERROR(Settle(seq));
    return writer_.Exec(kSetResponse, Params().Int(seq).OptBytes(response), "set response")
        .status();
  }
  Status SetPayload(int64_t seq, const std::string& payload) override {
    CHRONOQ_RETURN_IF_ERROR(Settle(seq));
    return writer_.Exec(kSetPayload, Params().Int(seq).Text(payload), "set payload").status();
  }
  Status SaveNextToken(uint64_t next_token) override {
    return Write(kSaveToken, Params().Int(static_cast<int64_t>(next_token)), "save token");
  }

  Result<std::vector<DueEntry>> LoadScheduled(int64_t from_bucket, int64_t after_seq,
                                              int64_t to_bucket, int limit) override {
    // Claimed tasks were due, so they lie before the window's horizon; but
    // a journaled one must never be read as waiting, so refills (rare
    // under load: the window holds up to a million tasks) settle them.
    if (!journaled_.empty() || journal_stale_) CHRONOQ_RETURN_IF_ERROR(SettleAll());
    Params p;
    p.Bucket(from_bucket).Int(after_seq).Bucket(to_bucket).Int(limit);
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kLoadScheduled, p, "load window"));
    std::vector<DueEntry> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      out.push_back(DueAt(r, i));
      out.back().key = r.OptText(i, 4);
      out.back().started = r.Int(i, 5) > 0;
    }
    return out;
  }

  Result<std::optional<int64_t>> NextScheduledBucket(int64_t from_bucket) override {
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows r, writer_.Exec(kNextScheduled, Params().Bucket(from_bucket), "next due"));
    return r.empty() ? std::optional<int64_t>() : std::optional<int64_t>(r.Int(0, 0));
  }

  Result<std::vector<DueEntry>> KeyHeads(int64_t qid, const std::string& key,
                                         const std::optional<KeyPosition>& after,
                                         int limit) override {
    CHRONOQ_RETURN_IF_ERROR(LoadJournal());
    CHRONOQ_ASSIGN_OR_RETURN(KeyPosition from, KeySearchStart(qid, key, after));
    std::vector<DueEntry> out;
    CHRONOQ_RETURN_IF_ERROR(ReadKeyHeads(qid, key, from, limit, out));
    return out;
  }
  Result<std::vector<std::vector<DueEntry>>> KeyHeadsOf(
      const std::vector<KeyRead>& reads) override {
    CHRONOQ_RETURN_IF_ERROR(LoadJournal());
    std::vector<std::vector<DueEntry>> out(reads.size());
    // Reads from a place go in one statement; a read from the saved cursor
    // (none in memory) reads it first, alone.
    std::vector<size_t> batch;
    std::vector<int64_t> qids, korders, prios, seqs, limits;
    std::vector<std::string> keys;
    for (size_t i = 0; i < reads.size(); ++i) {
      const KeyRead& r = reads[i];
      if (!r.after) {
        CHRONOQ_ASSIGN_OR_RETURN(out[i], KeyHeads(r.qid, *r.key, std::nullopt, r.limit));
        continue;
      }
      batch.push_back(i);
      qids.push_back(r.qid);
      keys.push_back(*r.key);
      korders.push_back(Micros(r.after->at));
      prios.push_back(r.after->priority);
      seqs.push_back(r.after->seq);
      limits.push_back(r.limit);
    }
    if (batch.empty()) return out;
    Params p;
    p.Ints(qids).Texts(keys).Ints(korders).Ints(prios).Ints(seqs).Ints(limits);
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kKeyHeadsOf, p, "key heads"));
    // Each read's rows as (korder, prio, seq, row), put in order here.
    using Met = std::tuple<int64_t, int64_t, int64_t, int>;
    std::vector<std::vector<Met>> met(batch.size());
    for (int row = 0; row < r.size(); ++row) {
      met[static_cast<size_t>(r.Int(row, 0) - 1)].emplace_back(r.Int(row, 5), r.Int(row, 4),
                                                               r.Int(row, 1), row);
    }
    for (size_t b = 0; b < batch.size(); ++b) {
      const KeyRead& read = reads[batch[b]];
      std::vector<DueEntry>& rows = out[batch[b]];
      std::sort(met[b].begin(), met[b].end());
      for (const auto& [korder, prio, seq, row] : met[b]) {
        if (journaled_.contains(seq)) continue;
        rows.push_back(
            DueEntry{seq, r.Int(row, 2), FromMicros(r.Int(row, 3)), static_cast<int>(prio)});
      }
      // A read that journaled rows shortened goes on alone after its last row.
      if (static_cast<int>(met[b].size()) < read.limit ||
          static_cast<int>(rows.size()) >= read.limit) {
        continue;
      }
      const auto& [korder, prio, seq, row] = met[b].back();
      CHRONOQ_RETURN_IF_ERROR(ReadKeyHeads(
          read.qid, *read.key, KeyPosition{FromMicros(korder), static_cast<int>(prio), seq},
          read.limit, rows));
    }
    return out;
  }
  Result<int64_t> CountKeyPending(int64_t qid, const std::string& key,
                                  const std::optional<KeyPosition>& after) override {
    CHRONOQ_ASSIGN_OR_RETURN(const KeyPosition from, KeySearchStart(qid, key, after));
    Params p;
    AppendKeySearch(p, qid, key, from);
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kKeyPending, p, "count key backlog"));
    return r.empty() ? 0 : r.Int(0, 0);
  }
  Status SaveKeyCursor(int64_t qid, const std::string& key, const KeyPosition& at) override {
    Params p;
    AppendKeySearch(p, qid, key, at);
    return Write(kKeyCursorSave, p, "save key cursor");
  }
  Result<std::vector<std::pair<int64_t, std::string>>> LoadKeyRetries() override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kKeyRetries, "load keyed retries"));
    std::vector<std::pair<int64_t, std::string>> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) out.emplace_back(r.Int(i, 0), r.Text(i, 1));
    return out;
  }

  Result<std::vector<TaskRow>> LoadRunning() override {
    // Opening settles every claim, also those of an engine that crashed or
    // of another node that led before.
    CHRONOQ_RETURN_IF_ERROR(SettleAll());
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kLoadRunning, "load running"));
    std::vector<TaskRow> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) out.push_back(TaskAt(r, i));
    return out;
  }

  Result<Purged> PurgeFinished(Timestamp before, int limit) override {
    Params p;
    p.Time(before).Int(limit).Bucket(DueBucket(before));
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kPurge, p, "purge"));
    Purged out;
    std::set<std::pair<int64_t, std::string>> keys;
    for (int i = 0; i < r.size(); ++i) {
      ++out.rows;
      const int64_t qid = r.Int(i, 0);
      const auto state = static_cast<TaskState>(r.Int(i, 1));
      if (!r.IsNull(i, 2)) keys.emplace(qid, r.Text(i, 2));
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
    if (!keys.empty()) {
      std::vector<int64_t> qids;
      std::vector<std::string> names;
      for (const auto& [qid, key] : keys) {
        qids.push_back(qid);
        names.push_back(key);
      }
      CHRONOQ_RETURN_IF_ERROR(DropKeyCursors(qids, names));
    }
    return out;
  }

  Result<std::optional<Timestamp>> NextPurgeDue() override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kNextPurge, "next purge"));
    if (r.empty() || r.IsNull(0, 0)) return std::optional<Timestamp>();
    return std::optional<Timestamp>(BucketStart(r.Int(0, 0)));
  }

  Result<std::optional<int64_t>> InsertSchedule(const ScheduleRow& row) override {
    Params p;
    AppendSchedule(p, row);
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kScheduleInsert, p, "insert schedule"));
    // No row: the name is taken.
    return r.empty() ? std::optional<int64_t>() : std::optional<int64_t>(r.Int(0, 0));
  }
  Status SaveSchedule(const ScheduleRow& row) override {
    Params p;
    p.Int(row.sid);
    AppendSchedule(p, row);
    return writer_.Exec(kScheduleSave, p, "save schedule").status();
  }
  Status DeleteSchedule(int64_t sid) override {
    return writer_.Exec(kScheduleDelete, Params().Int(sid), "delete schedule").status();
  }
  Result<std::optional<ScheduleRow>> FindSchedule(int64_t sid) override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r,
                             writer_.Exec(kScheduleBySid, Params().Int(sid), "find schedule"));
    return r.empty() ? std::optional<ScheduleRow>() : std::optional<ScheduleRow>(ScheduleAt(r, 0));
  }
  Result<std::optional<ScheduleRow>> FindScheduleByName(const std::string& name) override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r,
                             writer_.Exec(kScheduleByName, Params().Text(name), "find schedule"));
    return r.empty() ? std::optional<ScheduleRow>() : std::optional<ScheduleRow>(ScheduleAt(r, 0));
  }
  Result<std::vector<ScheduleRow>> SchedulesDueBefore(Timestamp before, int64_t after_sid,
                                                      int limit) override {
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows r, writer_.Exec(kSchedulesDue, Params().Time(before).Int(after_sid).Int(limit),
                             "schedules due"));
    return Schedules(r);
  }
  Result<std::vector<ScheduleRow>> ListSchedules(std::optional<int64_t> qid,
                                                 const std::string& after_name,
                                                 int limit) override {
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows r, writer_.Exec(kSchedulesList, Params().Text(after_name).OptInt(qid).Int(limit),
                             "list schedules"));
    return Schedules(r);
  }

  Status SaveLock(const LockRow& row) override {
    Params p;
    p.Text(row.key).Int(static_cast<int64_t>(row.token)).Text(row.owner).Time(row.expires);
    return writer_.Exec(kLockSave, p, "save lock").status();
  }
  Status DeleteLock(const std::string& key) override {
    return writer_.Exec(kLockDelete, Params().Text(key), "delete lock").status();
  }
  Result<std::vector<LockRow>> LoadLocks() override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kLocks, "load locks"));
    std::vector<LockRow> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      out.push_back({r.Text(i, 0), static_cast<uint64_t>(r.Int(i, 1)), r.Text(i, 2),
                     FromMicros(r.Int(i, 3))});
    }
    return out;
  }

  // --- readers ---
  Result<std::optional<ReadRow>> ReadBySeq(int64_t seq) override {
    MutexLock lock(reader_mu_);
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, Read(kReadBySeq, Params().Int(seq), "read task"));
    return r.empty() ? std::optional<ReadRow>() : std::optional<ReadRow>(ReadRowOf(r, 0));
  }
  Result<std::optional<ReadRow>> ReadByName(const std::string& name) override {
    MutexLock lock(reader_mu_);
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, Read(kReadByName, Params().Text(name), "read task"));
    return r.empty() ? std::optional<ReadRow>() : std::optional<ReadRow>(ReadRowOf(r, 0));
  }

  Result<std::vector<ReadRow>> List(const ListQuery& q) override {
    // Parameters are numbered as the conditions that use them come: a
    // parameter no condition names has no type and fails the statement.
    Params p;
    auto next = [&p] { return "$" + std::to_string(p.size()); };
    const bool by_due = !q.by_seq && q.state.has_value() && *q.state != TaskState::kDead;
    // Journaled tasks (CHRONOQ_PG_JOURNAL_JOIN) run while their rows say
    // scheduled: a list of scheduled tasks leaves them out, and one of
    // running tasks adds them, found from the journal and placed by their
    // claim's lease. `conditions` holds every condition but the state's,
    // with DUE for the due to page by.
    std::string conditions;
    if (by_due) {
      p.Bucket(q.after_bucket);
      const std::string bucket = next();
      p.Int(q.after_seq);
      conditions += "(((DUE >> 28)::integer), t.seq) > (" + bucket + ", " + next() + ")";
    } else {
      p.Int(q.after_seq);
      conditions += "t.seq > " + next();
    }
    if (q.queue.has_value()) {
      p.Text(*q.queue);
      conditions += " AND q.name = " + next();
    }
    if (q.key.has_value()) {
      p.Text(*q.key);
      conditions += " AND t.key = " + next();
    }
    if (q.min_seq > 0) {
      p.Int(q.min_seq);
      conditions += " AND t.seq >= " + next();
    }
    if (q.max_seq < INT64_MAX) {
      p.Int(q.max_seq);
      conditions += " AND t.seq <= " + next();
    }
    if (q.generated_only) conditions += " AND t.name IS NULL";
    if (q.name_prefix.has_value()) {
      p.Text(*q.name_prefix);
      conditions += " AND t.name >= " + next();
      if (std::optional<std::string> end = PrefixEnd(*q.name_prefix)) {
        p.Text(*end);
        conditions += " AND t.name < " + next();
      }
    }
    auto with_due = [&](const char* due) {
      std::string c = conditions;
      for (size_t at; (at = c.find("DUE")) != std::string::npos;) c.replace(at, 3, due);
      return c;
    };
    std::string sql;
    if (!q.state.has_value()) {
      sql = CHRONOQ_PG_READ_COLS + conditions;
    } else {
      p.Int(static_cast<int64_t>(*q.state));
      const std::string state = next();
      // By seq, "+ 0" keeps the planner on the primary key (as in the claim
      // statements): from tasks_due it would sort every matching row per page.
      sql = CHRONOQ_PG_READ_COLS + std::string(q.by_seq ? "(t.state + 0) = " : "t.state = ") +
            state + " AND " + with_due("t.due");
      if (*q.state == TaskState::kScheduled) sql += " AND j.token IS NULL";
      if (*q.state == TaskState::kRunning) {
        sql = "SELECT * FROM (" + sql + " UNION ALL " +
              CHRONOQ_PG_READ_FROM(
                  "(SELECT unnest(seqs) AS seq FROM claims) u"
                  " JOIN tasks t ON t.seq = u.seq") +
              "j.token IS NOT NULL AND " + with_due("j.lease_until") + ") t";
      }
    }
    sql += by_due ? " ORDER BY ((t.due >> 28)::integer), t.seq" : " ORDER BY t.seq";
    p.Int(q.limit);
    sql += " LIMIT " + next();

    CHRONOQ_ASSIGN_OR_RETURN(Rows r, ReadAdHoc(sql, p, "list tasks"));
    std::vector<ReadRow> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) out.push_back(ReadRowOf(r, i));
    return out;
  }

  Result<std::vector<KeyBacklog>> KeyBacklogs(const std::string& queue, int limit) override {
    const std::string sql =
        "SELECT t.key, count(*) FROM tasks t JOIN queues q ON q.qid = t.qid"
        " WHERE q.name = $1 AND t.key IS NOT NULL AND t.state = 0 AND " CHRONOQ_PG_NOT_JOURNALED
        " GROUP BY t.key ORDER BY count(*) DESC, t.key LIMIT $2";
    CHRONOQ_ASSIGN_OR_RETURN(Rows r,
                             ReadAdHoc(sql, Params().Text(queue).Int(limit), "count key backlogs"));
    std::vector<KeyBacklog> out;
    for (int i = 0; i < r.size(); ++i) out.push_back({r.Text(i, 0), r.Int(i, 1)});
    return out;
  }

  // Runs a statement made for one call on the reader connection, connecting
  // again once if the connection was lost.
  Result<Rows> ReadAdHoc(const std::string& sql, const Params& p, const char* what) {
    MutexLock lock(reader_mu_);
    Result<Rows> r = reader_.ExecOnce(sql, p, what);
    if (!r.ok() && reader_.lost()) {
      CHRONOQ_RETURN_IF_ERROR(reader_.ConnectAgain());
      r = reader_.ExecOnce(sql, p, what);
    }
    return r;
  }

  // --- copying a whole store (store.h) ---
  Result<RowCounts> CountRows() override {
    RowCounts counts;
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows by_state,
        writer_.RunRows("SELECT " CHRONOQ_PG_JOURNALED(
                            "1", "t.state") ", count(*) FROM tasks t" CHRONOQ_PG_JOURNAL_JOIN
                                            " GROUP BY 1",
                        "count tasks"));
    for (int i = 0; i < by_state.size(); ++i) {
      const int64_t state = by_state.Int(i, 0);
      if (state < 0 || state >= static_cast<int64_t>(counts.tasks.size())) {
        return Status(StatusCode::kDataLoss, "a task has unknown state " + std::to_string(state));
      }
      counts.tasks[static_cast<size_t>(state)] = by_state.Int(i, 1);
    }
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows tables,
        writer_.RunRows("SELECT (SELECT count(*) FROM queues), (SELECT count(*) FROM schedules),"
                        " (SELECT count(*) FROM locks), (SELECT count(*) FROM key_cursors)",
                        "count rows"));
    counts.queues = tables.Int(0, 0);
    counts.schedules = tables.Int(0, 1);
    counts.locks = tables.Int(0, 2);
    counts.key_cursors = tables.Int(0, 3);
    return counts;
  }

  // The last sid is the identity sequence's last value: it covers deleted
  // schedules, and inserts that lost a name race (ON CONFLICT) too.
  Result<CopyMeta> ExportMeta() override {
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows r, writer_.RunRows("SELECT (SELECT v FROM meta WHERE k='next_token'),"
                                " coalesce(pg_sequence_last_value("
                                "pg_get_serial_sequence('schedules', 'sid')::regclass), 0)",
                                "export meta"));
    if (r.empty()) return Status::Internal("export meta: no row");
    return CopyMeta{static_cast<uint64_t>(r.Int(0, 0)), r.Int(0, 1)};
  }
  Status ImportMeta(const CopyMeta& meta) override {
    CHRONOQ_RETURN_IF_ERROR(
        writer_
            .ExecOnce("UPDATE meta SET v=greatest(v, $1::bigint) WHERE k='next_token'",
                      Params().Int(static_cast<int64_t>(meta.next_token)), "import next token")
            .status());
    return writer_.ExecOnce(kRaiseScheduleIds, Params().Int(meta.last_sid), "import last sid")
        .status();
  }

  Result<std::vector<StoredTask>> ExportTasks(int64_t after_seq, int limit) override {
    CHRONOQ_ASSIGN_OR_RETURN(Rows r,
                             writer_.ExecOnce("SELECT " CHRONOQ_PG_TASK_COLS_NOW
                                              ", t.korder FROM tasks t" CHRONOQ_PG_JOURNAL_JOIN
                                              " WHERE t.seq > $1 ORDER BY t.seq LIMIT $2",
                                              Params().Int(after_seq).Int(limit), "export tasks"));
    std::vector<StoredTask> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) out.push_back({TaskAt(r, i), r.OptTime(i, kTaskColumns)});
    return out;
  }
  Status ImportTasks(const std::vector<StoredTask>& rows) override {
    CopyLine line;
    for (const StoredTask& t : rows) {
      const TaskRow& r = t.row;
      line.Start().Int(r.seq).Int(r.qid).Int(static_cast<int64_t>(r.state)).OptTime(r.due);
      line.Int(r.priority).Int(r.attempt).Int(r.max_attempts).Text(r.payload).OptText(r.name);
      line.OptTime(r.run_at);
      line.OptInt(r.token ? std::optional<int64_t>(static_cast<int64_t>(*r.token)) : std::nullopt);
      line.OptBytes(r.last_error).OptTime(r.updated).OptDuration(r.backoff_base);
      line.OptDuration(r.backoff_cap).OptText(r.target).OptBytes(r.response).OptInt(r.sid);
      line.OptText(r.key).OptText(r.worker).OptTime(t.korder).OptTime(r.claimed);
      line.OptText(r.node).OptText(r.attempts);
      CHRONOQ_RETURN_IF_ERROR(writer_.CopyRow(kImportTasks, line.End()));
    }
    return writer_.Flush();
  }
  Status ImportQueues(const std::vector<QueueRow>& queues) override {
    CopyLine line;
    int64_t max_qid = 0;
    for (const QueueRow& q : queues) {
      const QueueSettings& s = q.settings;
      auto opt = [](const std::optional<int>& v) {
        return v ? std::optional<int64_t>(*v) : std::nullopt;
      };
      line.Start().Int(q.qid).Text(q.name).Bool(q.paused).Bool(q.webhooks);
      line.OptInt(opt(s.concurrency)).OptInt(opt(s.max_attempts));
      if (s.backoff) {
        line.Int(static_cast<int64_t>(s.backoff->base.count()));
        line.Int(static_cast<int64_t>(s.backoff->cap.count()));
      } else {
        line.Null().Null();
      }
      line.OptDuration(s.retention);
      for (const int64_t n : q.counts) line.Int(n);
      if (s.rate_limit) {
        line.Int(s.rate_limit->count).Int(static_cast<int64_t>(s.rate_limit->period.count()));
      } else {
        line.Null().Null();
      }
      line.OptInt(opt(s.max_in_flight_per_key)).OptInt(s.max_pending_per_key);
      line.OptText(EncodeStatuses(s.final_statuses));
      CHRONOQ_RETURN_IF_ERROR(writer_.CopyRow(kImportQueues, line.End()));
      max_qid = std::max(max_qid, q.qid);
    }
    CHRONOQ_RETURN_IF_ERROR(writer_.Flush());
    return writer_.ExecOnce(kRaiseQueueIds, Params().Int(max_qid), "raise queue ids").status();
  }
  Status ImportSchedules(const std::vector<ScheduleRow>& rows) override {
    CopyLine line;
    int64_t max_sid = 0;
    for (const ScheduleRow& r : rows) {
      line.Start().Int(r.sid).Text(r.name).Int(r.qid).Text(r.spec).Bool(r.paused);
      line.OptInt(r.current_seq).OptTime(r.cursor).OptTime(r.next_at).OptTime(r.claimed_at);
      line.Int(r.runs).Int(r.skipped).OptText(r.last_task).OptTime(r.last_for);
      line.OptInt(r.last_state ? std::optional<int64_t>(static_cast<int64_t>(*r.last_state))
                               : std::nullopt);
      line.OptTime(r.last_finished).OptBytes(r.last_error).Time(r.created).Time(r.updated);
      CHRONOQ_RETURN_IF_ERROR(writer_.CopyRow(kImportSchedules, line.End()));
      max_sid = std::max(max_sid, r.sid);
    }
    CHRONOQ_RETURN_IF_ERROR(writer_.Flush());
    return writer_.ExecOnce(kRaiseScheduleIds, Params().Int(max_sid), "raise schedule ids")
        .status();
  }
  Result<std::vector<KeyCursorRow>> ExportKeyCursors(int64_t after_qid,
                                                     const std::string& after_key,
                                                     int limit) override {
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows r,
        writer_.ExecOnce("SELECT qid, key, korder, prio, seq FROM key_cursors"
                         " WHERE (qid, key) > ($1, $2) ORDER BY qid, key LIMIT $3",
                         Params().Int(after_qid).Text(after_key).Int(limit), "export key cursors"));
    std::vector<KeyCursorRow> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      out.push_back(
          {r.Int(i, 0), r.Text(i, 1),
           KeyPosition{FromMicros(r.Int(i, 2)), static_cast<int>(r.Int(i, 3)), r.Int(i, 4)}});
    }
    return out;
  }
  Status ImportKeyCursors(const std::vector<KeyCursorRow>& rows) override {
    CopyLine line;
    for (const KeyCursorRow& c : rows) {
      line.Start().Int(c.qid).Text(c.key).Time(c.at.at).Int(c.at.priority).Int(c.at.seq);
      CHRONOQ_RETURN_IF_ERROR(writer_.CopyRow(kImportKeyCursors, line.End()));
    }
    return writer_.Flush();
  }

 private:
  // --- the claim journal (CHRONOQ_PG_JOURNAL_JOIN) ---

  // Reads the journal into memory when a rollback has left what memory
  // holds unknown (and at the first use).
  Status LoadJournal() {
    if (!journal_stale_) return {};
    CHRONOQ_RETURN_IF_ERROR(writer_.Exec(kJournalPrune, "prune claims").status());
    CHRONOQ_ASSIGN_OR_RETURN(Rows last, writer_.Exec(kJournalLastId, "load claims"));
    CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kJournalLoad, "load claims"));
    journaled_.clear();
    claims_.clear();
    for (int i = 0; i < r.size(); ++i) {
      journaled_[r.Int(i, 1)] = r.Int(i, 0);
      Claim& c = claims_[r.Int(i, 0)];
      ++c.running;
      c.lo = r.Int(i, 2);
      c.hi = r.Int(i, 3);
    }
    last_claim_id_ = std::max(last_claim_id_, last.Int(0, 0));
    journal_stale_ = false;
    return {};
  }
  // A statement that wrote to the journal failed: the transaction will be
  // rolled back, and memory is read again after.
  Status JournalLost(Status failed) {
    journal_stale_ = true;
    return failed;
  }
  // Before a write to task `seq`: settles the claims whose seqs may hold
  // it. Its own if it is journaled, and any other: a task acknowledged from
  // the journal stays in its claim's record until the claim's last task is,
  // and must not be taken for journaled should it be scheduled again
  // (replaced by a create with on_conflict replace).
  // Settles every claim whose bounds hold `seq`, not only the one that
  // journals it now: a task acknowledged through the journal stays in its
  // claim's seqs, and once replaced or retried by hand (state 0 again, same
  // seq) a later settle of that claim would take it for one of its own. A
  // scan of claims_ (the claims in flight: a few per worker) is cheap.
  Status Settle(int64_t seq) {
    CHRONOQ_RETURN_IF_ERROR(LoadJournal());
    std::vector<int64_t> ids;
    for (const auto& [id, claim] : claims_) {
      if (claim.lo <= seq && seq <= claim.hi) ids.push_back(id);
    }
    if (ids.empty()) return {};
    Status s = writer_.Exec(kSettle, Params().Ints(ids), "settle claim").status();
    if (!s.ok()) return JournalLost(s);
    for (int64_t id : ids) claims_.erase(id);
    std::erase_if(journaled_, [this](const auto& e) { return !claims_.contains(e.second); });
    return {};
  }
  // A write whose answer nothing reads: in a transaction it costs no round
  // trip of its own (Connection::Send); a failure comes with the next
  // statement or the commit, and the transaction is rolled back.
  Status Write(const Sql& sql, const Params& p, std::string_view what) {
    if (writer_.in_transaction()) return writer_.Send(sql, p, what);
    return writer_.Exec(sql, p, what).status();
  }
  // Settles every claim of the journal.
  Status SettleAll() {
    Status s = writer_.Exec(kSettleAll, "settle claims").status();
    if (!s.ok()) return JournalLost(s);
    journaled_.clear();
    claims_.clear();
    journal_stale_ = false;
    return {};
  }

  static ReadRow ReadRowOf(const Rows& r, int i) {
    return ReadRow{TaskAt(r, i), r.Text(i, kTaskColumns), r.Text(i, kTaskColumns + 1)};
  }

  static std::vector<ScheduleRow> Schedules(const Rows& r) {
    std::vector<ScheduleRow> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) out.push_back(ScheduleAt(r, i));
    return out;
  }

  // A read on the reader connection. A read has no state to lose, so a lost
  // connection is made again and the read retried once: a server restart
  // costs readers nothing.
  Result<Rows> Read(const Sql& sql, const Params& p, std::string_view what)
      CHRONOQ_REQUIRES(reader_mu_) {
    Result<Rows> r = reader_.Exec(sql, p, what);
    if (r.ok() || !reader_.lost()) return r;
    CHRONOQ_RETURN_IF_ERROR(reader_.ConnectAgain());
    return reader_.Exec(sql, p, what);
  }

  // --- opening ---
  Status CheckServer() {
    const int version = PQserverVersion(writer_.raw());
    if (version < kMinServerVersion) {
      return Status::FailedPrecondition("the PostgreSQL server is version " +
                                        std::to_string(version) + "; chronoq needs 12 or later");
    }
    const char* encoding = PQparameterStatus(writer_.raw(), "server_encoding");
    if (encoding == nullptr || std::string_view(encoding) != "UTF8") {
      return Status::FailedPrecondition(
          std::string("the database's encoding is ") + (encoding ? encoding : "unknown") +
          "; chronoq needs a UTF8 database (CREATE DATABASE ... ENCODING 'UTF8')");
    }
    return {};
  }

  // One engine per schema: the engine keeps the near future, the counts and
  // the sequence in memory and assumes it is the only writer. The lock is the
  // writer session's: PostgreSQL drops it when the session ends, so a crash
  // never leaves it stale.
  //
  // An engine that just died (a crash, kill -9) leaves its lock for the few
  // milliseconds its backend takes to notice and exit, so a restart tries
  // for a while before it concludes that another engine is running.
  // The writer idles between commits and must not be ended for it: with it
  // would go the schema's lock, and the engine.
  Status KeepWriterSession() {
    if (PQserverVersion(writer_.raw()) < 140000) return {};
    return writer_.Run("SET idle_session_timeout TO 0", "set up the session");
  }

  // The writer's connection and the schema's lock, made again if lost (see
  // OpenPostgresStore): at once after a loss, then at most once per backoff
  // (100 ms, doubling to 5 s), failing at once in between.
  Status EnsureWriter() {
    if (locked_ && !writer_.lost()) return {};
    // A leader never reconnects: its lock may be another node's by now.
    if (leadership_) return Deposed("lost the writer's session, which held the leadership");
    const Timestamp now = clock_.Now();
    if (!reconnect_error_.empty() && now < next_reconnect_) {
      return StoreUnavailable(
          reconnect_error_ + " (next attempt in " +
          std::to_string(
              std::chrono::ceil<std::chrono::milliseconds>(next_reconnect_ - now).count()) +
          " ms)");
    }
    Status s = Reconnect();
    if (s.ok()) {
      if (!reconnect_error_.empty()) spdlog::info("postgres: the writer is connected again");
      reconnect_error_.clear();
      reconnect_backoff_ = kFirstReconnectBackoff;
      return {};
    }
    if (reconnect_error_.empty()) spdlog::error("postgres: writer lost: {}", s.message());
    reconnect_error_ = "lost the connection to PostgreSQL; reconnecting failed: " + s.message();
    next_reconnect_ = now + reconnect_backoff_;
    reconnect_backoff_ = std::min(2 * reconnect_backoff_, kLastReconnectBackoff);
    return StoreUnavailable(reconnect_error_);
  }
  Status Reconnect() {
    locked_ = false;
    keyed_inserts_.clear();
    CHRONOQ_RETURN_IF_ERROR(writer_.ConnectAgain());
    CHRONOQ_RETURN_IF_ERROR(KeepWriterSession());
    // Our old session may not have ended yet on the server: then the lock is
    // still its, and the next attempt takes it.
    Status locked = LockSchema(Duration::zero());
    if (locked.code() == StatusCode::kFailedPrecondition) return StoreUnavailable(locked.message());
    return locked;
  }

  // Cluster mode: records this node as the schema's leader under a new
  // epoch, with the writer session's identity (pid and start, so a standby
  // that finds this node silent ends exactly this session and no other).
  // The engine lock is held: no other node can be doing the same.
  Status TakeLeadership() {
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows r,
        writer_.ExecOnce(
            "INSERT INTO leader(one, epoch, writer_pid, writer_start, since, node_id,"
            " address) SELECT true, 1, pid, " CHRONOQ_PG_MICROS(
                "backend_start") ", " CHRONOQ_PG_MICROS("clock_timestamp()") ", $1, $2"
                                                                             " FROM "
                                                                             "pg_stat_activity "
                                                                             "WHERE pid = "
                                                                             "pg_backend_pid()"
                                                                             " ON CONFLICT (one) "
                                                                             "DO UPDATE SET epoch "
                                                                             "= leader.epoch + 1,"
                                                                             " writer_pid = "
                                                                             "EXCLUDED.writer_pid, "
                                                                             "writer_start = "
                                                                             "EXCLUDED.writer_"
                                                                             "start,"
                                                                             " since = "
                                                                             "EXCLUDED.since, "
                                                                             "node_id = "
                                                                             "EXCLUDED.node_id,"
                                                                             " address = "
                                                                             "EXCLUDED.address "
                                                                             "RETURNING epoch",
            Params().Text(leadership_->node_id).Text(leadership_->address), "take the leadership"));
    if (r.empty()) return Status::Internal("take the leadership: no epoch returned");
    epoch_ = r.Int(0, 0);
    spdlog::info("postgres: node {} leads schema {} with epoch {}", leadership_->node_id, schema_,
                 epoch_);
    return {};
  }

  // Cluster mode: this node no longer leads (or cannot know that it does).
  // Tells on_deposed once; every later call fails the same way.
  Status Deposed(const std::string& why) {
    if (deposed_.empty()) {
      deposed_ =
          "this node no longer leads the cluster (epoch " + std::to_string(epoch_) + "): " + why;
      spdlog::warn("postgres: {}", deposed_);
      if (leadership_->on_deposed) {
        leadership_->on_deposed(Status(StatusCode::kUnavailable, deposed_));
      }
    }
    return {StatusCode::kUnavailable, deposed_, {}, StatusReason::kNotLeader};
  }

  // Takes the schema's engine lock, trying for up to `patience` (real time:
  // opening waits for a crashed engine's session to end).
  Status LockSchema(Duration patience) {
    const auto give_up = std::chrono::steady_clock::now() + patience;
    for (;;) {
      CHRONOQ_ASSIGN_OR_RETURN(
          Rows r, writer_.ExecOnce("SELECT pg_try_advisory_lock($1::bigint)",
                                   Params().Int(LockKey("engine", schema_)), "lock the schema"));
      if (!r.empty() && r.Bool(0, 0)) {
        locked_ = true;
        return {};
      }
      if (std::chrono::steady_clock::now() >= give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const char* db = PQdb(writer_.raw());
    return Status::FailedPrecondition(
        "schema " + schema_ + " of PostgreSQL database " + (db ? db : "?") +
        " is open in another chronoq engine (its advisory lock is held by another session); "
        "one engine writes a schema at a time");
  }

  Status Migrate() { return MigrateSchema(writer_, schema_); }

  // --- key cursors (store.h) ---
  // Where a key's tasks waiting to start are searched from: after `after`,
  // else after the saved cursor, else from the start.
  Result<KeyPosition> KeySearchStart(int64_t qid, const std::string& key,
                                     std::optional<KeyPosition> after) {
    if (!after) {
      CHRONOQ_ASSIGN_OR_RETURN(
          Rows r, writer_.Exec(kKeyCursor, Params().Int(qid).Text(key), "read key cursor"));
      if (!r.empty()) {
        after = KeyPosition{FromMicros(r.Int(0, 0)), static_cast<int>(r.Int(0, 1)), r.Int(0, 2)};
      }
    }
    return after.value_or(KeyPosition{Timestamp::min(), std::numeric_limits<int>::min(), 0});
  }
  // Adds to `out` the tasks of the key waiting to start after `from`, up to
  // `limit` in all. Journaled rows are skipped; a read they shortened goes
  // on after its last row. (A key's journaled tasks lie at or before its
  // cursor, as a rule, so this reads once.)
  Status ReadKeyHeads(int64_t qid, const std::string& key, KeyPosition from, int limit,
                      std::vector<DueEntry>& out) {
    while (static_cast<int>(out.size()) < limit) {
      const int asked = limit - static_cast<int>(out.size());
      Params p;
      AppendKeySearch(p, qid, key, from);
      CHRONOQ_ASSIGN_OR_RETURN(Rows r, writer_.Exec(kKeyHeads, p.Int(asked), "key heads"));
      for (int i = 0; i < r.size(); ++i) {
        if (!journaled_.contains(r.Int(i, 0))) out.push_back(DueAt(r, i));
      }
      if (r.size() < asked) break;
      const int last = r.size() - 1;
      from =
          KeyPosition{FromMicros(r.Int(last, 4)), static_cast<int>(r.Int(last, 3)), r.Int(last, 0)};
    }
    return {};
  }
  // $1-$5: qid, key, and the position's korder, prio and seq.
  static void AppendKeySearch(Params& p, int64_t qid, const std::string& key,
                              const KeyPosition& at) {
    p.Int(qid).Text(key).Time(at.at).Int(at.priority).Int(at.seq);
  }
  Status LowerKeyCursors(const std::vector<int64_t>& seqs) {
    return writer_.Exec(kKeyCursorLower, Params().Ints(seqs), "move key cursors back").status();
  }
  // The before-statement hook of the writer (Connection::SetBeforeStatement).
  Status LowerPendingKeyCursors() {
    std::vector<int64_t> seqs;
    seqs.swap(keyed_inserts_);
    return LowerKeyCursors(seqs);
  }
  Status DropKeyCursors(const std::vector<int64_t>& qids, const std::vector<std::string>& keys) {
    return writer_.Exec(kKeyCursorDrop, Params().Ints(qids).Texts(keys), "drop key cursors")
        .status();
  }

  static constexpr Duration kFirstReconnectBackoff = std::chrono::milliseconds(100);
  static constexpr Duration kLastReconnectBackoff = std::chrono::seconds(5);

  const std::string schema_;
  Clock& clock_;
  // While the writer cannot be made again: why, and when to try next.
  std::string reconnect_error_;
  Timestamp next_reconnect_;
  Duration reconnect_backoff_ = kFirstReconnectBackoff;
  Connection writer_;                   // engine loop thread only
  std::string copy_line_;               // Insert's scratch line
  std::vector<int64_t> keyed_inserts_;  // copied keyed rows whose cursors wait to move back
  // The claim journal as this transaction sees it: the claim id of each
  // journaled task, and each claim's count of them and bounds. Read
  // again (LoadJournal) after a rollback, which leaves it stale.
  struct Claim {
    int64_t running = 0;  // its journaled tasks
    int64_t lo = 0;       // its first and last seq
    int64_t hi = 0;
  };
  std::unordered_map<int64_t, int64_t> journaled_;
  std::unordered_map<int64_t, Claim> claims_;  // by id
  int64_t last_claim_id_ = 0;
  bool journal_stale_ = true;
  bool locked_ = false;  // writer_ holds the schema's advisory lock
  const std::optional<PostgresLeadership> leadership_;
  int64_t epoch_ = 0;    // the leader epoch this store took (cluster mode)
  std::string deposed_;  // why it no longer leads, once it found out
  Mutex reader_mu_;
  Connection reader_ CHRONOQ_GUARDED_BY(reader_mu_);
};

}  // namespace

Status ValidatePostgresSchema(std::string_view schema) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("store",
                                   "schema \"" + std::string(schema) + "\" " + std::string(why));
  };
  if (schema.empty() || schema.size() > 63) return bad("must be 1-63 characters long");
  if (schema.front() >= '0' && schema.front() <= '9') return bad("must not start with a digit");
  if (schema.starts_with("pg_")) return bad("must not start with pg_ (reserved by PostgreSQL)");
  for (const char c : schema) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return bad("may hold only lower-case ASCII letters, digits and underscores");
    }
  }
  return {};
}

Result<std::unique_ptr<Store>> OpenPostgresStore(const PostgresOptions& options) {
  CHRONOQ_RETURN_IF_ERROR(ValidatePostgresSchema(options.schema));
  if (options.conninfo.empty()) {
    return Status::InvalidArgument("store", "the PostgreSQL connection string is empty");
  }
  // A malformed string is the caller's mistake, not an unreachable server.
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(options.conninfo.c_str(), &error);
  if (parsed == nullptr) {
    std::string why = error != nullptr ? OneLine(error) : "out of memory";
    PQfreemem(error);
    return Status::InvalidArgument("store", "not a PostgreSQL connection string: " + why);
  }
  PQconninfoFree(parsed);
  auto store = std::make_unique<PostgresStore>(
      options.schema, options.clock != nullptr ? *options.clock : SystemClock(),
      options.leadership);
  CHRONOQ_RETURN_IF_ERROR(store->Open(options.conninfo));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace chronoq
