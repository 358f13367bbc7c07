// PgTestDatabase: a fresh PostgreSQL database for one test, on the throwaway
// cluster that ctest's `postgres` fixture started (scripts/pg-cluster.sh).
// CHRONOQ_TEST_PG names the file holding that cluster's conninfo; tests
// registered with chronoq_add_test(... POSTGRES) get it. Without it the test
// fails: a PostgreSQL test never skips.
//
//   test::PgTestDatabase db;
//   ASSERT_TRUE(db.ok());
//   auto store = OpenPostgresStore({.conninfo = db.conninfo()});
//   EXPECT_EQ(db.QueryText("SELECT count(*) FROM chronoq.tasks"), "0");
#pragma once

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <libpq-fe.h>
#include <unistd.h>

namespace chronoq::test {

class PgTestDatabase {
 public:
  PgTestDatabase() {
    const char* file = std::getenv("CHRONOQ_TEST_PG");
    if (file == nullptr || *file == '\0') {
      ADD_FAILURE() << "CHRONOQ_TEST_PG is not set: run this test through ctest, whose "
                       "`postgres` fixture starts a cluster (scripts/pg-cluster.sh)";
      return;
    }
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    admin_ = text.str();
    while (!admin_.empty() && (admin_.back() == '\n' || admin_.back() == ' ')) admin_.pop_back();
    if (admin_.empty()) {
      ADD_FAILURE() << "cannot read the cluster's conninfo from " << file
                    << " (did pg_cluster_start fail?)";
      return;
    }
    static std::atomic<int> counter{0};
    name_ = "chronoq_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    // template0 and an explicit encoding: a database exactly as an operator
    // would create one for chronoq, whatever template1 holds.
    if (!AdminExec("CREATE DATABASE " + name_ + " TEMPLATE template0 ENCODING 'UTF8'")) return;
    conninfo_ = admin_ + " dbname=" + name_;  // the later dbname wins
    ok_ = true;
  }
  ~PgTestDatabase() {
    // FORCE ends the sessions a failed test left open.
    if (ok_) AdminExec("DROP DATABASE " + name_ + " WITH (FORCE)");
  }
  PgTestDatabase(const PgTestDatabase&) = delete;
  PgTestDatabase& operator=(const PgTestDatabase&) = delete;

  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  // libpq key=value form.
  const std::string& conninfo() const { return conninfo_; }
  // The same as a postgresql:// URL (what EngineOptions::store takes).
  std::string Url() const {
    std::string host, port, user;
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(conninfo_.c_str(), &error);
    if (options == nullptr) {
      ADD_FAILURE() << "cannot parse " << conninfo_ << ": " << (error ? error : "?");
      PQfreemem(error);
      return "";
    }
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val == nullptr) continue;
      if (std::string(o->keyword) == "host") host = o->val;
      if (std::string(o->keyword) == "port") port = o->val;
      if (std::string(o->keyword) == "user") user = o->val;
    }
    PQconninfoFree(options);
    // libpq splits a URL's parameters at & and = and decodes %: a cluster
    // in a directory with those in its name needs a conninfo, not a URL.
    if (host.find_first_of("%&=#?") != std::string::npos) {
      ADD_FAILURE() << "the test cluster's directory " << host << " cannot go in a URL as it is";
    }
    std::string url = "postgresql://" + user + "@/" + name_ + "?host=" + host;
    if (!port.empty()) url += "&port=" + port;
    return url;
  }

  // Runs `sql` on the test database, on a connection of its own.
  void Exec(const std::string& sql) const { Open().Exec(sql); }
  // The first column of the first row `sql` returns; empty when there is no
  // row or it is NULL.
  std::string QueryText(const std::string& sql) const {
    Connection c(conninfo_);
    if (c.conn == nullptr) return "";
    PGresult* r = PQexec(c.conn, sql.c_str());
    std::string out;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      ADD_FAILURE() << sql << ": " << PQresultErrorMessage(r);
    } else if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
      out = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return out;
  }

  // Refuses (false) or allows again new connections to the test database,
  // as a server that cannot be reached would; open connections stay.
  void AllowConnections(bool allow) const {
    AdminExec("ALTER DATABASE " + name_ + " ALLOW_CONNECTIONS " + (allow ? "true" : "false"));
  }
  // Ends the test database's sessions named `application_name` (as chronoq
  // names its own: "chronoq writer", "chronoq reader") and waits for them to
  // exit; how many there were.
  int Terminate(const std::string& application_name) const {
    Connection c(admin_);
    if (c.conn == nullptr) return 0;
    const char* values[] = {name_.c_str(), application_name.c_str()};
    PGresult* r = PQexecParams(c.conn,
                               "SELECT count(pg_terminate_backend(pid, 10000)) FROM "
                               "pg_stat_activity WHERE datname = $1 AND application_name = $2",
                               2, nullptr, values, nullptr, nullptr, 0);
    int n = 0;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      n = std::atoi(PQgetvalue(r, 0, 0));
    } else {
      ADD_FAILURE() << "pg_terminate_backend: " << PQresultErrorMessage(r);
    }
    PQclear(r);
    return n;
  }

 private:
  struct Connection {
    explicit Connection(const std::string& conninfo) : conn(PQconnectdb(conninfo.c_str())) {
      if (PQstatus(conn) != CONNECTION_OK) {
        ADD_FAILURE() << "cannot connect to " << conninfo << ": " << PQerrorMessage(conn);
        PQfinish(conn);
        conn = nullptr;
        return;
      }
      // Notices ("drop cascades to ...") are not the test's output.
      PQsetNoticeProcessor(
          conn, [](void*, const char*) {}, nullptr);
    }
    ~Connection() {
      if (conn != nullptr) PQfinish(conn);
    }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    PGconn* conn;
  };

 public:
  // A connection to the test database kept open, e.g. to hold a
  // transaction (and its locks) while chronoqd runs.
  class Session {
   public:
    explicit Session(const std::string& conninfo) : c_(conninfo) {}
    void Exec(const std::string& sql) const {
      if (c_.conn == nullptr) return;
      PGresult* r = PQexec(c_.conn, sql.c_str());
      const ExecStatusType st = PQresultStatus(r);
      EXPECT_TRUE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
          << sql << ": " << PQresultErrorMessage(r);
      PQclear(r);
    }

   private:
    Connection c_;
  };
  Session Open() const { return Session(conninfo_); }

 private:
  bool AdminExec(const std::string& sql) const {
    Connection c(admin_);
    if (c.conn == nullptr) return false;
    PGresult* r = PQexec(c.conn, sql.c_str());
    const bool done = PQresultStatus(r) == PGRES_COMMAND_OK;
    EXPECT_TRUE(done) << sql << ": " << PQresultErrorMessage(r);
    PQclear(r);
    return done;
  }

  std::string admin_;
  std::string name_;
  std::string conninfo_;
  bool ok_ = false;
};

}  // namespace chronoq::test
