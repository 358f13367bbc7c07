// The store the engine, crash and end-to-end tests run on, chosen in one
// place: the environment variable CHRONOQ_TEST_STORE.
//
//   unset or "sqlite"  a SQLite file in the test's temporary directory
//   "postgres"         a fresh database on the test cluster ctest's
//                      `postgres` fixture starts (support/pg_test_db.h),
//                      dropped when the test's TestStore goes
//
// ctest runs those suites once per store (tests/CMakeLists.txt); a test that
// reads or writes a store's files or tables itself says which store in its
// name (`EngineKeySqliteTest`) and runs on that one only.
//
//   test::TempDir dir;
//   Result<test::TestStore> store = test::FreshStore(dir);
//   ASSERT_THAT(store, IsOk());
//   EngineOptions o;
//   o.store = store->url();
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/result.h"

#include "support/eventually.h"
#include "support/pg_test_db.h"
#include "support/temp_dir.h"

namespace chronoq::test {

// The file of a SQLite store in `dir`.
inline std::string SqliteFile(const TempDir& dir) { return dir.File("chronoq.db"); }

enum class TestStoreKind { kSqlite, kPostgres };

// What CHRONOQ_TEST_STORE names; InvalidArgument for a store it does not know.
inline Result<TestStoreKind> TestStoreKindFromEnv() {
  const char* env = std::getenv("CHRONOQ_TEST_STORE");
  const std::string_view store = env != nullptr ? env : "";
  if (store.empty() || store == "sqlite") return TestStoreKind::kSqlite;
  if (store == "postgres") return TestStoreKind::kPostgres;
  return Status::InvalidArgument(
      "CHRONOQ_TEST_STORE",
      "\"" + std::string(store) + "\" is not a store (known: sqlite, postgres)");
}

// One test's store: its URL (EngineOptions::store, chronoqd --store), and,
// on PostgreSQL, the database behind it, dropped with *this. Every engine on
// it must be closed first. Movable, not copyable.
class TestStore {
 public:
  TestStore(TestStoreKind kind, std::string url, std::unique_ptr<PgTestDatabase> database)
      : kind_(kind), url_(std::move(url)), database_(std::move(database)) {}

  TestStoreKind kind() const { return kind_; }
  const std::string& url() const { return url_; }
  // The flags that put chronoqd on this store: none on SQLite (the file
  // goes in chronoqd's --data directory), --store URL on PostgreSQL.
  std::vector<std::string> ChronoqdArgs() const {
    if (kind_ == TestStoreKind::kSqlite) return {};
    return {"--store", url_};
  }
  // Waits until nothing but the test itself is connected to the store. A
  // killed engine's PostgreSQL sessions end, and free its schema's lock,
  // only when the server notices the process is gone (a moment after
  // SIGKILL), so a test waits for that before it opens the store again. On
  // SQLite, the lock goes with the process: nothing to wait for.
  ::testing::AssertionResult AwaitNoSessions() const {
    if (database_ == nullptr) return ::testing::AssertionSuccess();
    return Eventually(
        [&] {
          return database_->QueryText(
                     "SELECT count(*) FROM pg_stat_activity"
                     " WHERE datname = current_database() AND pid <> pg_backend_pid()") == "0";
        },
        "the killed engine's PostgreSQL sessions to end");
  }

 private:
  TestStoreKind kind_;
  std::string url_;
  std::unique_ptr<PgTestDatabase> database_;  // PostgreSQL's
};

// A fresh, empty store for one test, the one CHRONOQ_TEST_STORE names; on
// SQLite, in `dir`. Unavailable when the test cluster's database could not be
// made (the test has failed already, saying why).
inline Result<TestStore> FreshStore(const TempDir& dir) {
  CHRONOQ_ASSIGN_OR_RETURN(TestStoreKind kind, TestStoreKindFromEnv());
  if (kind == TestStoreKind::kSqlite) return TestStore(kind, SqliteFile(dir), nullptr);
  auto database = std::make_unique<PgTestDatabase>();
  if (!database->ok()) {
    return Status::Unavailable("cannot make a database on the test cluster (see above)");
  }
  std::string url = database->Url();
  return TestStore(kind, std::move(url), std::move(database));
}

}  // namespace chronoq::test
