// chronoq-pg-baseline: PostgreSQL's own limit for W1 on a given server, the
// yardstick for the PostgreSQL store (docs/BENCHMARKS.md).
//
//   chronoq-pg-baseline --store postgresql://USER@HOST:PORT/DB [-n 100000]
//                       [--per-txn 1000] [--runs R] [--mode copy|insert]
//
// Writes the rows W1 writes (N tasks due 1-600 s ahead, 16-byte JSON payload)
// into a plain table with a primary key and a due index, in the schema
// bench_baseline (dropped and made again for every run), --per-txn rows per
// transaction, durably (synchronous_commit on, as chronoq commits). Mode
// "copy": COPY FROM STDIN in text form; mode "insert": one literal multi-row
// INSERT per transaction. Prints one JSON line per run on stdout, e.g.
//   {"workload":"baseline","target":"postgres","mode":"copy","n":100000,"per_s":151234}
// Only the transactions are timed, not building the rows' text.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.h"
#include <libpq-fe.h>

namespace {

using chronoq::bench::BenchError;
using chronoq::bench::Emit;
using chronoq::bench::Line;
using chronoq::bench::Payload;
using chronoq::bench::Seconds;
using chronoq::bench::SteadyClock;

using Conn = std::unique_ptr<PGconn, void (*)(PGconn*)>;
using Res = std::unique_ptr<PGresult, void (*)(PGresult*)>;

void Exec(PGconn* conn, const std::string& sql) {
  Res r(PQexec(conn, sql.c_str()), &PQclear);
  const ExecStatusType s = PQresultStatus(r.get());
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    throw BenchError(sql.substr(0, 80) + ": " + PQresultErrorMessage(r.get()));
  }
}

void CopyIn(PGconn* conn, const std::string& rows) {
  Res r(
      PQexec(conn, "COPY bench_baseline.tasks(seq, qid, due, state, attempt, payload) FROM STDIN"),
      &PQclear);
  if (PQresultStatus(r.get()) != PGRES_COPY_IN) {
    throw BenchError(std::string("COPY: ") + PQresultErrorMessage(r.get()));
  }
  if (PQputCopyData(conn, rows.data(), static_cast<int>(rows.size())) != 1 ||
      PQputCopyEnd(conn, nullptr) != 1) {
    throw BenchError(std::string("COPY: ") + PQerrorMessage(conn));
  }
  Res end(PQgetResult(conn), &PQclear);
  if (PQresultStatus(end.get()) != PGRES_COMMAND_OK) {
    throw BenchError(std::string("COPY: ") + PQresultErrorMessage(end.get()));
  }
  while (PGresult* more = PQgetResult(conn)) PQclear(more);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("PostgreSQL's own limit for W1: the same rows, COPY or INSERT, durably");
  std::string store;
  int64_t n = 100'000;
  int per_txn = 1000;
  int runs = 1;
  std::string mode = "copy";
  app.add_option("--store", store, "postgresql://USER@HOST:PORT/DB")->required();
  app.add_option("-n", n, "rows")->capture_default_str()->check(CLI::Range(1, 100'000'000));
  app.add_option("--per-txn", per_txn, "rows per transaction")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--runs", runs, "repetitions")->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--mode", mode, "copy or insert")
      ->capture_default_str()
      ->check(CLI::IsMember({"copy", "insert"}));
  CLI11_PARSE(app, argc, argv);

  try {
    Conn conn(PQconnectdb(store.c_str()), &PQfinish);
    if (PQstatus(conn.get()) != CONNECTION_OK) {
      throw BenchError("--store: cannot connect: " + std::string(PQerrorMessage(conn.get())));
    }
    Exec(conn.get(), "SET synchronous_commit = on");
    Exec(conn.get(), "SET client_min_messages TO warning");
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<int64_t> delay_us(1'000'000, 600'000'000);
    for (int run = 0; run < runs; ++run) {
      Exec(conn.get(), "DROP SCHEMA IF EXISTS bench_baseline CASCADE");
      Exec(conn.get(), "CREATE SCHEMA bench_baseline");
      Exec(conn.get(),
           "CREATE TABLE bench_baseline.tasks(seq BIGINT PRIMARY KEY, qid BIGINT NOT NULL, "
           "due BIGINT, state INTEGER NOT NULL, attempt INTEGER NOT NULL, payload TEXT NOT NULL)");
      Exec(conn.get(), "CREATE INDEX ON bench_baseline.tasks(state, due)");
      // Every transaction's text, built before the clock starts.
      const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      std::vector<std::string> txns;
      for (int64_t seq = 1; seq <= n;) {
        std::string text;
        if (mode == "insert") {
          text = "INSERT INTO bench_baseline.tasks(seq, qid, due, state, attempt, payload) VALUES ";
        }
        for (int i = 0; i < per_txn && seq <= n; ++i, ++seq) {
          const std::string due = std::to_string(now_us + delay_us(rng));
          const std::string payload = Payload(rng);
          if (mode == "copy") {
            text += std::to_string(seq) + "\t1\t" + due + "\t0\t0\t" + payload + "\n";
          } else {
            if (i > 0) text += ',';
            text += "(" + std::to_string(seq) + ",1," + due + ",0,0,'" + payload + "')";
          }
        }
        txns.push_back(std::move(text));
      }
      const auto t0 = SteadyClock::now();
      for (const std::string& text : txns) {
        Exec(conn.get(), "BEGIN");
        if (mode == "copy") {
          CopyIn(conn.get(), text);
        } else {
          Exec(conn.get(), text);
        }
        Exec(conn.get(), "COMMIT");
      }
      const double s = Seconds(SteadyClock::now() - t0);
      auto j = Line("baseline", "postgres", mode, n);
      j["per_txn"] = per_txn;
      j["per_s"] = std::llround(static_cast<double>(n) / s);
      Emit(j);
    }
    Exec(conn.get(), "DROP SCHEMA IF EXISTS bench_baseline CASCADE");
  } catch (const std::exception& e) {
    std::cerr << "chronoq-pg-baseline: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
