// What the engine does on PostgreSQL alone, opened from a postgresql:// URL
// as an embedding program or chronoqd opens it, on a fake clock and a fresh
// database of the cluster ctest's `postgres` fixture starts: one engine per
// schema, and a lost connection. Everything else the engine does, it does on
// every store: ctest runs the engine suites on PostgreSQL too
// (support/test_store.h).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "support/fake_clock.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::IsOk;
using test::StatusIs;

class PostgresEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok());
    Open();
  }

  EngineOptions Options(const std::string& params = "") {
    EngineOptions o;
    o.store = db_.Url() + params;
    o.clock = &clock_;
    o.random_seed = 42;
    return o;
  }
  void Open() {
    Result<std::unique_ptr<Engine>> e = Engine::Open(Options());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
  }
  void Reopen() {
    engine_.reset();
    Open();
  }

  Task Add(const std::string& queue, const std::string& id, Duration delay = 0s,
           const std::string& key = "") {
    TaskSpec spec;
    spec.queue = queue;
    spec.id = id;
    spec.delay = delay;
    spec.key = key;
    Result<Task> t = engine_->Enqueue(spec);
    EXPECT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    return t.ok() ? *t : Task{};
  }
  std::vector<Lease> Claim(const std::string& queue, int max = 10) {
    Result<std::vector<Lease>> got = engine_->Claim(queue, max, 30s);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : std::vector<Lease>();
  }
  static std::vector<std::string> Ids(const std::vector<Lease>& leases) {
    std::vector<std::string> ids;
    for (const Lease& l : leases) ids.push_back(l.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  TaskState StateOf(const std::string& id) {
    Result<Task> t = engine_->Get(id);
    EXPECT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    return t.ok() ? t->state : TaskState::kScheduled;
  }

  // Declared first, destroyed last: the engine closes its connections
  // before the database is dropped.
  test::PgTestDatabase db_;
  test::FakeClock clock_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(PostgresEngineTest, OneEngineAtATimePerSchema) {
  Result<std::unique_ptr<Engine>> second = Engine::Open(Options());
  ASSERT_THAT(second, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_NE(second.status().message().find("another chronoq engine"), std::string::npos)
      << second.status().ToString();
  // Another schema is another engine's.
  Result<std::unique_ptr<Engine>> other = Engine::Open(Options("&schema=other_engine"));
  ASSERT_THAT(other, IsOk());
  TaskSpec spec;
  spec.queue = "q";
  spec.id = "mine";
  ASSERT_THAT((*other)->Enqueue(spec), IsOk());
  EXPECT_THAT(engine_->Get("mine"), StatusIs(StatusCode::kNotFound));
}

// PostgreSQL going away under a running engine: calls fail with Unavailable
// (they are not acknowledged), nothing crashes, and the engine closes.
TEST_F(PostgresEngineTest, ALostConnectionMakesCallsUnavailable) {
  Add("q", "before");
  const std::string pid = db_.QueryText(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
      " AND application_name = 'chronoq writer'");
  ASSERT_FALSE(pid.empty());
  ASSERT_EQ(db_.QueryText("SELECT pg_terminate_backend(" + pid + ", 10000)"), "t");
  TaskSpec spec;
  spec.queue = "q";
  spec.id = "after";
  EXPECT_THAT(engine_->Enqueue(spec), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(engine_->Claim("q", 1, 30s), StatusIs(StatusCode::kUnavailable));
  // Reads use their own connection.
  EXPECT_EQ(StateOf("before"), TaskState::kScheduled);
  // A new engine takes over the schema and finds what was acknowledged only.
  engine_.reset();
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_EQ(StateOf("before"), TaskState::kScheduled);
  EXPECT_THAT(engine_->Get("after"), StatusIs(StatusCode::kNotFound));
}

}  // namespace
}  // namespace chronoq
