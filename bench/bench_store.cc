#include "bench_store.h"

#include <cctype>
#include <filesystem>
#include <memory>
#include <system_error>

#include <libpq-fe.h>

namespace chronoq::bench {
namespace {

namespace fs = std::filesystem;

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// One short-lived connection for the bench's own statements.
class PgSession {
 public:
  explicit PgSession(const std::string& url) : conn_(PQconnectdb(url.c_str()), &PQfinish) {
    if (PQstatus(conn_.get()) != CONNECTION_OK) {
      throw BenchError("--store: cannot connect: " + std::string(PQerrorMessage(conn_.get())));
    }
  }
  // Runs `sql` with text parameters; the first column of the first row, if any.
  std::string Query(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    std::unique_ptr<PGresult, void (*)(PGresult*)> r(
        PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                     values.data(), nullptr, nullptr, 0),
        &PQclear);
    const ExecStatusType status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      throw BenchError(sql + ": " + PQresultErrorMessage(r.get()));
    }
    if (status != PGRES_TUPLES_OK || PQntuples(r.get()) == 0) return "";
    return PQgetvalue(r.get(), 0, 0);
  }

 private:
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn_;
};

}  // namespace

BenchStore::BenchStore(const Options& o, const std::string& name) {
  if (o.store.empty()) {
    file_ = (fs::path(o.dir) / (name + ".db")).string();
    url_ = file_;
    return;
  }
  if (!StartsWith(o.store, "postgres://") && !StartsWith(o.store, "postgresql://")) {
    throw BenchError("--store: expected a postgres:// or postgresql:// URL, got " + o.store);
  }
  if (o.store.find("schema=") != std::string::npos) {
    throw BenchError(
        "--store: leave out the schema parameter: each workload run uses a schema "
        "of its own (bench_<workload>)");
  }
  pg_url_ = o.store;
  schema_ = "bench_";
  for (const char c : name) {
    schema_ += std::isalnum(static_cast<unsigned char>(c))
                   ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                   : '_';
  }
  url_ = pg_url_ + (pg_url_.find('?') == std::string::npos ? "?" : "&") + "schema=" + schema_;
}

std::string BenchStore::Describe() const {
  return postgres() ? "schema " + schema_ + " of " + pg_url_ : file_;
}

void BenchStore::Reset() const {
  if (postgres()) {
    PgSession session(pg_url_);
    session.Query("SET client_min_messages TO warning");
    session.Query("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
    return;
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    fs::remove(file_ + suffix, ec);
    if (ec) throw BenchError("cannot remove " + file_ + suffix + ": " + ec.message());
  }
}

uint64_t BenchStore::Bytes() const {
  if (postgres()) {
    const std::string bytes = PgSession(pg_url_).Query(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
        {schema_});
    return std::stoull(bytes);
  }
  uint64_t total = 0;
  for (const char* suffix : {"", "-wal"}) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(file_ + suffix, ec);
    if (!ec) total += size;
  }
  return total;
}

}  // namespace chronoq::bench
