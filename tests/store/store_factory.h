// StoreFactory: the stores the store conformance suite runs on
// (store_conformance_test.cc). One factory per Store implementation, all in
// this file; the suite itself knows only the Store contract (store/store.h).
//
// A test asks its factory for a ScratchStore: a place of its own, empty at
// first, that it opens (and, to simulate a restart, closes and opens again)
// as often as it likes, and that is removed when the test ends.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "chronoq/result.h"

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "support/pg_test_db.h"
#include "support/temp_dir.h"

namespace chronoq::test {

// One test's store. Open() opens it; after the store it returned is closed
// (destroyed), Open() again sees exactly what that store committed. At most
// one store from Open() is open at a time. Removing the place (the
// destructor) requires every store from Open() to be closed.
class ScratchStore {
 public:
  virtual ~ScratchStore() = default;
  virtual Result<std::unique_ptr<Store>> Open() = 0;
};

struct StoreFactory {
  // Names the instantiation and each test's parameter: "Sqlite", "Postgres".
  std::string name;
  // A fresh, empty store for one test.
  std::function<Result<std::unique_ptr<ScratchStore>>()> fresh;
};

// gtest prints the parameter of a failed test by its name, and names each
// test after it ("Sqlite/StoreConformanceTest.Insert/Sqlite") when
// INSTANTIATE_TEST_SUITE_P is given this.
inline void PrintTo(const StoreFactory& factory, std::ostream* os) { *os << factory.name; }
inline std::string StoreFactoryName(const ::testing::TestParamInfo<StoreFactory>& param) {
  return param.param.name;
}

// SQLite: a file in a directory of its own (the directory the store is given
// does not exist yet: opening creates it).
class SqliteScratchStore final : public ScratchStore {
 public:
  Result<std::unique_ptr<Store>> Open() override { return OpenSqliteStore({.path = path_}); }

 private:
  TempDir dir_;
  const std::string path_ = dir_.File("db/chronoq.db");
};

inline StoreFactory SqliteStoreFactory() {
  return {"Sqlite", []() -> Result<std::unique_ptr<ScratchStore>> {
            return std::unique_ptr<ScratchStore>(std::make_unique<SqliteScratchStore>());
          }};
}

// PostgreSQL: a database of its own on the test cluster ctest's `postgres`
// fixture starts (support/pg_test_db.h), the store in its default schema.
class PostgresScratchStore final : public ScratchStore {
 public:
  Result<std::unique_ptr<Store>> Open() override {
    return OpenPostgresStore({.conninfo = database_.conninfo()});
  }
  bool ok() const { return database_.ok(); }

 private:
  PgTestDatabase database_;
};

inline StoreFactory PostgresStoreFactory() {
  return {"Postgres", []() -> Result<std::unique_ptr<ScratchStore>> {
            auto scratch = std::make_unique<PostgresScratchStore>();
            if (!scratch->ok()) {
              return Status::Unavailable("cannot make a database on the test cluster (see above)");
            }
            return std::unique_ptr<ScratchStore>(std::move(scratch));
          }};
}

}  // namespace chronoq::test
