// EngineFixture: an Engine on a FakeClock over a fresh, empty store, the one
// CHRONOQ_TEST_STORE names (support/test_store.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "chronoq/engine.h"
#include "chronoq/result.h"

#include "support/fake_clock.h"
#include "support/temp_dir.h"
#include "support/test_store.h"

namespace chronoq::test {

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
      Result<TestStore> store = FreshStore(dir_);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      store_.emplace(std::move(*store));
      store_url_ = store_->url();
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
  // The store every engine of the test opens: FreshStore's, unless the
  // fixture set a URL before SetUp (SqliteOnly). Declared before engine_,
  // so the engine closes before a PostgreSQL database is dropped.
  std::optional<TestStore> store_;
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
