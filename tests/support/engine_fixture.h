// EngineFixture: an Engine on a FakeClock over a fresh, empty store, the one
// FreshStoreUrl picks.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "chronoq/engine.h"
#include "chronoq/result.h"

#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace chronoq::test {

// The file of a SQLite store in `dir`.
inline std::string SqliteFile(const TempDir& dir) { return dir.File("chronoq.db"); }

// The store URL (EngineOptions::store) of a fresh, empty store for one test in
// `dir`: the one place that decides which store the engine tests run on. The
// environment variable CHRONOQ_TEST_STORE names it: unset or "sqlite", a
// SQLite file in `dir`. No other store is supported yet.
inline Result<std::string> FreshStoreUrl(const TempDir& dir) {
  const char* env = std::getenv("CHRONOQ_TEST_STORE");
  const std::string_view store = env != nullptr ? env : "";
  if (store.empty() || store == "sqlite") return SqliteFile(dir);
  return Status::InvalidArgument(
      "CHRONOQ_TEST_STORE", "\"" + std::string(store) + "\" is not supported yet (known: sqlite)");
}

class EngineFixture : public ::testing::Test {
 protected:
  EngineOptions Options() {
    EngineOptions o;
    o.store = store_url_;
    o.clock = &clock_;
    o.random_seed = 42;
    return o;
  }
  void Open(EngineOptions o) {
    auto e = Engine::Open(std::move(o));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
  }
  void Open() { Open(Options()); }
  void SetUp() override {
    if (store_url_.empty()) {
      Result<std::string> url = FreshStoreUrl(dir_);
      ASSERT_TRUE(url.ok()) << url.status().ToString();
      store_url_ = *url;
    }
    Open();
  }

  // Enqueues a task on "q" due after `delay`; fails the test on error.
  Task Add(Duration delay = Duration::zero(), std::string id = "") {
    TaskSpec spec;
    spec.queue = "q";
    spec.delay = delay;
    spec.id = std::move(id);
    auto t = engine_->Enqueue(spec);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : Task{};
  }
  TaskState StateOf(const std::string& id) {
    auto t = engine_->Get(id);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->state : TaskState::kScheduled;
  }

  TempDir dir_;
  // The store every engine of the test opens: FreshStoreUrl's, unless the
  // fixture set one before SetUp (SqliteOnly).
  std::string store_url_;
  FakeClock clock_;
  std::unique_ptr<Engine> engine_;
};

// For engine tests that read or write the SQLite file behind the engine with
// raw SQL (SQLite's tables, databases of older schema versions): they run on
// SQLite whatever CHRONOQ_TEST_STORE says, and the fixture's name says so:
//
//   using EngineQueueSqliteTest = test::SqliteOnly<EngineQueueTest>;
template <typename Fixture>
class SqliteOnly : public Fixture {
 protected:
  SqliteOnly() { this->store_url_ = SqlitePath(); }
  // The SQLite file of the test's engines.
  std::string SqlitePath() const { return SqliteFile(this->dir_); }
};

}  // namespace chronoq::test
