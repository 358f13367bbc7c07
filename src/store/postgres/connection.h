// chronoq's libpq toolkit, shared by the PostgreSQL store and the cluster's
// control connection: one Connection (prepared statements, write-behind COPY,
// lost-connection detection), text-form Params and Rows, and the mapping of
// PostgreSQL's errors to Status (PgError, StoreUnavailable).
//
//   pg::Connection conn;
//   CHRONOQ_RETURN_IF_ERROR(conn.Connect(conninfo, "chronoq control", "SET search_path TO
//   chronoq")); CHRONOQ_ASSIGN_OR_RETURN(pg::Rows r, conn.ExecOnce("SELECT epoch FROM leader", {},
//   "read the leader"));
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/result.h"
#include "chronoq/status.h"

#include <libpq-fe.h>

// A timestamptz expression as BIGINT microseconds since the epoch, chronoq's
// form of a time.
#define CHRONOQ_PG_MICROS(t) "(extract(epoch FROM " t ") * 1000000)::bigint"

namespace chronoq::pg {

inline int64_t Micros(Timestamp t) { return t.time_since_epoch().count(); }
inline Timestamp FromMicros(int64_t v) { return Timestamp(Duration(v)); }

// 64-bit FNV-1a: advisory lock keys from schema names. Stable across
// processes and versions (PostgreSQL's hashtext is neither promised).
int64_t LockKey(std::string_view purpose, std::string_view schema);

// One line: libpq's messages end in newlines and indent their hints.
std::string OneLine(std::string_view text);

// Unavailable with reason kStoreUnavailable: the server cannot be reached
// (chronoqd answers 503 store_unavailable).
Status StoreUnavailable(std::string message);

// Whether a failed call means the connection is gone: libpq says so, or the
// error is libpq's own (no SQLSTATE: "server closed the connection
// unexpectedly", which libpq reports before it marks the connection bad),
// or the server ended the session (class 08, 57P01-57P03: shutdown, crash).
bool ConnectionFailed(PGconn* conn, const PGresult* res);

// A status for a failed libpq call. Lost connections, shutdowns, full disks,
// conflicts and I/O errors are Unavailable (retry later), as SQLite's BUSY,
// FULL and IOERR are; missing privileges FailedPrecondition; corruption
// DataLoss; the rest are bugs.
Status PgError(PGconn* conn, const PGresult* res, std::string_view what);

// A quoted identifier (the schema name, already validated).
std::string Quoted(std::string_view name);

// Two lower-case hex digits per byte of `v`: BYTEA's hex input form, after
// its "\\x".
void AppendHex(std::string& out, std::string_view v);

// Server messages (NOTICEs are filtered out by client_min_messages) go to
// the log, not to libpq's default of stderr.
void OnNotice(void*, const char* message);

// The text-form parameters of one statement, $1 first.
class Params {
 public:
  Params& Int(int64_t v) {
    values_.emplace_back(std::to_string(v));
    return *this;
  }
  Params& Time(Timestamp t) { return Int(Micros(t)); }
  // A due bucket (CHRONOQ_PG_BUCKET is an integer): the engine's "from the
  // beginning" and "to the end" lie outside its range, and mean its ends.
  Params& Bucket(int64_t b) {
    return Int(std::clamp<int64_t>(b, std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max()));
  }
  Params& Bool(bool v) {
    values_.emplace_back(v ? "t" : "f");
    return *this;
  }
  Params& Text(std::string_view v) {
    values_.emplace_back(std::string(v));
    return *this;
  }
  // A BYTEA, in PostgreSQL's hex input form.
  Params& Bytes(std::string_view v) {
    std::string hex = "\\x";
    AppendHex(hex, v);
    values_.emplace_back(std::move(hex));
    return *this;
  }
  Params& Null() {
    values_.emplace_back(std::nullopt);
    return *this;
  }
  Params& OptInt(const std::optional<int64_t>& v) { return v ? Int(*v) : Null(); }
  Params& OptTime(const std::optional<Timestamp>& v) { return v ? Time(*v) : Null(); }
  Params& OptDuration(const std::optional<Duration>& v) {
    return v ? Int(static_cast<int64_t>(v->count())) : Null();
  }
  Params& OptToken(const std::optional<uint64_t>& v) {
    return v ? Int(static_cast<int64_t>(*v)) : Null();
  }
  Params& OptText(const std::optional<std::string>& v) { return v ? Text(*v) : Null(); }
  Params& OptBytes(const std::optional<std::string>& v) { return v ? Bytes(*v) : Null(); }
  // A bigint[] in array input form: {1,2,3}.
  Params& Ints(const std::vector<int64_t>& v) {
    std::string a = "{";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) a += ',';
      a += std::to_string(v[i]);
    }
    values_.emplace_back(a + "}");
    return *this;
  }
  // A text[]: every element quoted, with its quotes and backslashes escaped.
  Params& Texts(const std::vector<std::string>& v) {
    std::string a = "{";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) a += ',';
      a += '"';
      for (const char c : v[i]) {
        if (c == '"' || c == '\\') a += '\\';
        a += c;
      }
      a += '"';
    }
    values_.emplace_back(a + "}");
    return *this;
  }

  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> Pointers() const {
    std::vector<const char*> out;
    out.reserve(values_.size());
    for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
    return out;
  }

 private:
  std::vector<std::optional<std::string>> values_;
};

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// The rows of a successful statement, in text form.
class Rows {
 public:
  explicit Rows(PgResult r) : r_(std::move(r)) {}

  int size() const { return PQntuples(r_.get()); }
  int columns() const { return PQnfields(r_.get()); }
  bool empty() const { return size() == 0; }
  // The command tag ("COMMIT", "ROLLBACK", "UPDATE 3", ...).
  std::string_view command() const { return PQcmdStatus(r_.get()); }
  // Rows an INSERT, UPDATE or DELETE touched.
  int64_t affected() const {
    const char* n = PQcmdTuples(r_.get());
    int64_t v = 0;
    std::from_chars(n, n + std::strlen(n), v);
    return v;
  }

  bool IsNull(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  // NULL reads as 0, as in SQLite.
  int64_t Int(int row, int col) const {
    const char* p = PQgetvalue(r_.get(), row, col);
    int64_t v = 0;
    std::from_chars(p, p + PQgetlength(r_.get(), row, col), v);
    return v;
  }
  bool Bool(int row, int col) const { return PQgetvalue(r_.get(), row, col)[0] == 't'; }
  std::string Text(int row, int col) const {
    return std::string(PQgetvalue(r_.get(), row, col),
                       static_cast<size_t>(PQgetlength(r_.get(), row, col)));
  }
  // A BYTEA in hex output form ("\x6869"; the session sets bytea_output).
  std::string Bytes(int row, int col) const {
    const std::string_view hex(PQgetvalue(r_.get(), row, col),
                               static_cast<size_t>(PQgetlength(r_.get(), row, col)));
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return 0;
    };
    std::string out;
    if (hex.size() < 2) return out;
    out.reserve((hex.size() - 2) / 2);
    for (size_t i = 2; i + 1 < hex.size(); i += 2) {
      out += static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
    }
    return out;
  }
  std::optional<int64_t> OptInt(int row, int col) const {
    return IsNull(row, col) ? std::nullopt : std::optional<int64_t>(Int(row, col));
  }
  std::optional<Timestamp> OptTime(int row, int col) const {
    return IsNull(row, col) ? std::nullopt : std::optional<Timestamp>(FromMicros(Int(row, col)));
  }
  std::optional<std::string> OptText(int row, int col) const {
    return IsNull(row, col) ? std::nullopt : std::optional<std::string>(Text(row, col));
  }
  std::optional<std::string> OptBytes(int row, int col) const {
    return IsNull(row, col) ? std::nullopt : std::optional<std::string>(Bytes(row, col));
  }

 private:
  PgResult r_;
};

// A statement prepared on a connection under `name`.
struct Sql {
  const char* name;
  const char* text;
};

// One libpq connection with its prepared statements. Not thread-safe.
class Connection {
 public:
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (conn_ != nullptr) PQfinish(conn_);
  }

  // Connects with chronoq's defaults, which `conninfo` may override (libpq
  // reads its keywords in order, and the conninfo comes last), and runs
  // `session_sql` (SET ...). `app_name` names the connection in
  // pg_stat_activity unless the conninfo names it.
  Status Connect(const std::string& conninfo, const char* app_name, std::string session_sql) {
    conninfo_ = conninfo;
    app_name_ = app_name;
    session_sql_ = std::move(session_sql);
    return ConnectAgain();
  }

  // Connects again after the connection was lost, with the same settings
  // and statements.
  Status ConnectAgain() {
    if (conn_ != nullptr) PQfinish(conn_);
    // Whatever the old connection was in the middle of is gone with it.
    broken_ = false;
    copy_sql_ = nullptr;
    copy_buf_.clear();
    pipelined_ = false;
    sent_.clear();
    // A server that does not answer must not hold the engine up for long:
    // connecting gives up after 5 s, and a statement sent to a server that
    // vanished (a dead host: no reset ever comes) fails once its data has
    // gone unacknowledged for 10 s (tcp_user_timeout), or, on an idle
    // connection, after about a minute of unanswered keepalives.
    const char* keys[] = {
        "connect_timeout",  "fallback_application_name", "keepalives_idle", "keepalives_interval",
        "keepalives_count", "tcp_user_timeout",          "dbname",          nullptr};
    const char* values[] = {"5",     app_name_.c_str(), "30",   "10", "3",
                            "10000", conninfo_.c_str(), nullptr};
    conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
    if (conn_ == nullptr) return StoreUnavailable("cannot connect to PostgreSQL: out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = OneLine(PQerrorMessage(conn_));
      PQfinish(conn_);
      conn_ = nullptr;
      return StoreUnavailable("cannot connect to PostgreSQL: " + msg);
    }
    PQsetNoticeProcessor(conn_, &OnNotice, nullptr);
    CHRONOQ_RETURN_IF_ERROR(Run(session_sql_, "set up the session"));
    for (const Sql* sql : prepared_) CHRONOQ_RETURN_IF_ERROR(PrepareOnServer(*sql));
    return {};
  }

  // Prepares `sql` now and after every reconnection.
  Status Prepare(const Sql& sql) {
    CHRONOQ_RETURN_IF_ERROR(PrepareOnServer(sql));
    prepared_.push_back(&sql);
    return {};
  }

  // Runs a prepared statement.
  Result<Rows> Exec(const Sql& sql, const Params& params, std::string_view what) {
    CHRONOQ_RETURN_IF_ERROR(Flush());
    if (lost()) return Lost(what);
    const std::vector<const char*> values = params.Pointers();
    if (pipelined_) {
      return EndPipeline(what, PQsendQueryPrepared(conn_, sql.name, params.size(), values.data(),
                                                   nullptr, nullptr, 0));
    }
    return Check(PQexecPrepared(conn_, sql.name, params.size(), values.data(), nullptr, nullptr, 0),
                 what);
  }
  Result<Rows> Exec(const Sql& sql, std::string_view what) { return Exec(sql, Params(), what); }

  // Sends a prepared statement whose answer nobody reads (a write whose
  // effect is all that matters) without waiting for it: it goes out in a
  // libpq pipeline at once, and the server runs it while the caller goes on.
  // The next statement that is run (Exec, ExecOnce: a COMMIT too) joins the
  // pipeline and its answer comes back with theirs, in one round trip. A
  // failure of a statement sent so is that next statement's failure (it
  // then does not run), so a transaction never commits past one. In a
  // transaction only.
  Status Send(const Sql& sql, const Params& params, std::string_view what) {
    CHRONOQ_RETURN_IF_ERROR(Flush());
    if (lost()) return Lost(what);
    if (!pipelined_) {
      if (PQenterPipelineMode(conn_) != 1) return PgError(conn_, nullptr, what);
      pipelined_ = true;
    }
    const std::vector<const char*> values = params.Pointers();
    if (PQsendQueryPrepared(conn_, sql.name, params.size(), values.data(), nullptr, nullptr, 0) !=
            1 ||
        PQflush(conn_) != 0) {
      broken_ = true;  // what the server has of the pipeline is unknown
      return PgError(conn_, nullptr, what);
    }
    sent_.emplace_back(what);
    return {};
  }

  // Waits for the answers of the statements Send sent, if any; the first
  // failure among them. Statements of the simple protocol (RunRows) and
  // COPYs run after it, outside the pipeline.
  Status Sync() {
    if (!pipelined_) return {};
    return EndPipeline(std::nullopt).status();
  }

  // Runs a statement that is not prepared (one statement, parameters $1...).
  Result<Rows> ExecOnce(const std::string& sql, const Params& params, std::string_view what) {
    CHRONOQ_RETURN_IF_ERROR(Flush());
    if (lost()) return Lost(what);
    const std::vector<const char*> values = params.Pointers();
    if (pipelined_) {
      return EndPipeline(what, PQsendQueryParams(conn_, sql.c_str(), params.size(), nullptr,
                                                 values.data(), nullptr, nullptr, 0));
    }
    return Check(PQexecParams(conn_, sql.c_str(), params.size(), nullptr, values.data(), nullptr,
                              nullptr, 0),
                 what);
  }

  // Runs SQL without parameters: any number of statements (simple protocol).
  Result<Rows> RunRows(const std::string& sql, std::string_view what) {
    CHRONOQ_RETURN_IF_ERROR(Flush());
    CHRONOQ_RETURN_IF_ERROR(Sync());
    if (lost()) return Lost(what);
    return Check(PQexec(conn_, sql.c_str()), what);
  }
  Status Run(const std::string& sql, std::string_view what) { return RunRows(sql, what).status(); }

  // Write-behind rows: CopyRow adds one line of COPY text (AppendCopyRow) to
  // the COPY `copy_sql` (... FROM STDIN), which it starts if none is open.
  // Lines go to the server in blocks while the caller goes on, and the COPY
  // ends before the next statement of any kind (Flush), so statements still
  // run in the order they were asked for: a COPY is only a faster INSERT.
  // Its errors (none are expected: the rows' keys are the engine's own) come
  // from the statement that ends it, or from Commit.
  Status CopyRow(const char* copy_sql, std::string_view line) {
    if (copy_sql_ != copy_sql) {
      CHRONOQ_RETURN_IF_ERROR(Flush());
      CHRONOQ_RETURN_IF_ERROR(Sync());  // no COPY in a pipeline
      if (lost()) return Lost("start a COPY");
      PgResult r(PQexec(conn_, copy_sql));
      if (r == nullptr || PQresultStatus(r.get()) != PGRES_COPY_IN) {
        if (ConnectionFailed(conn_, r.get())) broken_ = true;
        return PgError(conn_, r.get(), "start a COPY");
      }
      copy_sql_ = copy_sql;
    }
    copy_buf_.append(line);
    if (copy_buf_.size() >= kCopyBlock) return PutCopyData();
    return {};
  }
  // Runs `hook` before every statement while something is pending (a COPY
  // open, or `pending()` true): the store's write-behind work that must
  // precede whatever comes next. Statements the hook runs do not run it.
  void SetBeforeStatement(std::function<bool()> pending, std::function<Status()> hook) {
    pending_ = std::move(pending);
    before_statement_ = std::move(hook);
  }
  // Ends an open COPY and runs the before-statement hook.
  Status Flush() {
    if (in_flush_) return {};
    in_flush_ = true;
    Status s = EndCopy();
    if (s.ok() && pending_ && pending_()) s = before_statement_();
    in_flush_ = false;
    return s;
  }
  // Drops an open COPY with its rows (before a rollback).
  void AbortCopy() {
    if (copy_sql_ == nullptr) return;
    copy_sql_ = nullptr;
    copy_buf_.clear();
    if (lost()) return;
    if (PQputCopyEnd(conn_, "rolled back") == 1) {
      while (PGresult* r = PQgetResult(conn_)) PQclear(r);
    }
  }

  bool lost() const { return broken_ || conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK; }
  // In a transaction block (BEGIN), possibly inside one of our COPYs or
  // pipelines (Send is only used in one).
  bool in_transaction() const {
    return copy_sql_ != nullptr || pipelined_ || transaction_status() == PQTRANS_INTRANS;
  }
  PGTransactionStatusType transaction_status() const {
    return conn_ == nullptr ? PQTRANS_UNKNOWN : PQtransactionStatus(conn_);
  }
  PGconn* raw() const { return conn_; }

 private:
  Status PrepareOnServer(const Sql& sql) {
    PgResult r(PQprepare(conn_, sql.name, sql.text, 0, nullptr));
    if (r == nullptr || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      return PgError(conn_, r.get(), std::string("prepare ") + sql.name);
    }
    return {};
  }

  // About the size of a socket write: big enough that libpq's calls cost
  // nothing per row, small enough that the server starts early.
  static constexpr size_t kCopyBlock = 64 * 1024;

  Status PutCopyData() {
    const int sent = PQputCopyData(conn_, copy_buf_.data(), static_cast<int>(copy_buf_.size()));
    copy_buf_.clear();
    if (sent != 1) {
      broken_ = true;
      return PgError(conn_, nullptr, "COPY rows");
    }
    return {};
  }
  Status EndCopy() {
    if (copy_sql_ == nullptr) return {};
    copy_sql_ = nullptr;
    Status s = copy_buf_.empty() ? Status() : PutCopyData();
    if (s.ok() && PQputCopyEnd(conn_, nullptr) != 1) {
      broken_ = true;
      s = PgError(conn_, nullptr, "end the COPY");
    }
    PgResult r(PQgetResult(conn_));
    if (s.ok() && (r == nullptr || PQresultStatus(r.get()) != PGRES_COMMAND_OK)) {
      if (ConnectionFailed(conn_, r.get())) broken_ = true;
      s = PgError(conn_, r.get(), "COPY rows");
    }
    while (PGresult* more = PQgetResult(conn_)) PQclear(more);
    return s;
  }

  // A call after the connection was lost: libpq still holds why.
  Status Lost(std::string_view what) const {
    return StoreUnavailable(std::string(what) + ": the connection to PostgreSQL is lost" +
                            (conn_ != nullptr ? " (" + OneLine(PQerrorMessage(conn_)) + ")" : ""));
  }

  // Ends the pipeline: syncs, reads the answers of the statements Send
  // sent and then that of the `last` statement, if one was sent after them
  // (its sending returned `sent`), and leaves pipeline mode. The first
  // failure wins; statements after a failed one are not run
  // (PGRES_PIPELINE_ABORTED). Returns the last statement's rows.
  Result<Rows> EndPipeline(std::optional<std::string_view> last, int sent = 1) {
    if (sent != 1 || PQpipelineSync(conn_) != 1) {
      broken_ = true;
      pipelined_ = false;
      sent_.clear();
      return PgError(conn_, nullptr, last.value_or("end a pipeline"));
    }
    Status first;
    std::optional<Rows> rows;
    const size_t answers = sent_.size() + (last ? 1 : 0);
    for (size_t i = 0; i < answers; ++i) {
      const std::string_view name = i < sent_.size() ? std::string_view(sent_[i]) : *last;
      PgResult r(PQgetResult(conn_));
      const bool answered = r != nullptr;
      const ExecStatusType st = answered ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (i == sent_.size()) rows.emplace(std::move(r));
      } else if (first.ok()) {
        if (st != PGRES_PIPELINE_ABORTED && ConnectionFailed(conn_, r.get())) broken_ = true;
        first = st == PGRES_PIPELINE_ABORTED
                    ? Status(StatusCode::kAborted, std::string(name) + ": not run")
                    : PgError(conn_, r.get(), name);
      }
      // Each statement's answer ends with a null result.
      if (answered) {
        while (PGresult* more = PQgetResult(conn_)) PQclear(more);
      }
    }
    PgResult sync(PQgetResult(conn_));
    if (sync == nullptr || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC ||
        PQexitPipelineMode(conn_) != 1) {
      broken_ = true;  // out of step with the server: start again
      if (first.ok()) first = PgError(conn_, sync.get(), "end a pipeline");
    }
    pipelined_ = false;
    sent_.clear();
    if (!first.ok()) return first;
    if (!last) return Rows(nullptr);
    return std::move(*rows);
  }

  Result<Rows> Check(PGresult* raw, std::string_view what) {
    PgResult r(raw);
    const ExecStatusType st = r != nullptr ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      if (ConnectionFailed(conn_, r.get())) broken_ = true;
      return PgError(conn_, r.get(), what);
    }
    return Rows(std::move(r));
  }

  PGconn* conn_ = nullptr;
  bool broken_ = false;             // a call found the connection gone (ConnectionFailed)
  const char* copy_sql_ = nullptr;  // the open COPY, if any
  std::string copy_buf_;            // its lines not yet given to libpq
  std::function<bool()> pending_;
  std::function<Status()> before_statement_;
  bool in_flush_ = false;
  bool pipelined_ = false;         // in pipeline mode, with the statements of sent_ unanswered
  std::vector<std::string> sent_;  // what each statement Send sent does, for errors
  std::string conninfo_;
  std::string app_name_;
  std::string session_sql_;
  std::vector<const Sql*> prepared_;
};

}  // namespace chronoq::pg
