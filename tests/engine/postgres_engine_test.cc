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
// A lost writer connection fails the calls of the cycle that found it lost
// (503 store_unavailable over HTTP); the engine connects again, rebuilds its
// memory from the store, and goes on with nothing acknowledged lost.
TEST_F(PostgresEngineTest, ALostConnectionFailsACycleAndTheEngineGoesOn) {
  Add("q", "before");
  Result<std::vector<Lease>> held = engine_->Claim("q", 1, 30s);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->size(), 1u);
  Add("q", "waiting");
  ASSERT_EQ(db_.Terminate("chronoq writer"), 1);
  TaskSpec spec;
  spec.queue = "q";
  spec.id = "lost";
  Result<Task> lost = engine_->Enqueue(spec);
  EXPECT_THAT(lost, StatusIs(StatusCode::kUnavailable));
  EXPECT_EQ(lost.status().reason(), StatusReason::kStoreUnavailable);
  // Calls work again at once: the failed cycle connected again and reloaded.
  spec.id = "after";
  EXPECT_THAT(engine_->Enqueue(spec), IsOk());
  EXPECT_TRUE(engine_->Stats().store_up);
  // The lease taken before the loss still holds, with its token.
  EXPECT_THAT(engine_->Ack("before", (*held)[0].token), IsOk());
  Result<std::vector<Lease>> next = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_EQ(next->size(), 2u);
  EXPECT_GT((*next)[0].token, (*held)[0].token);
  EXPECT_THAT(engine_->Get("lost"), StatusIs(StatusCode::kNotFound));
  // A new engine on the schema finds the same.
  Reopen();
  EXPECT_EQ(StateOf("before"), TaskState::kSucceeded);
  EXPECT_EQ(StateOf("waiting"), TaskState::kRunning);
  EXPECT_EQ(StateOf("after"), TaskState::kRunning);
}

// While the server refuses connections, calls fail at once with
// store_unavailable and Stats() says the store is down; reconnection
// attempts back off on the engine's clock; once the server takes
// connections again the engine goes on, and nothing acknowledged is lost.
TEST_F(PostgresEngineTest, WhileTheServerIsUnreachableCallsFailFastUntilItIsBack) {
  Add("q", "before");
  db_.AllowConnections(false);
  ASSERT_EQ(db_.Terminate("chronoq writer"), 1);
  TaskSpec spec;
  spec.queue = "q";
  for (const char* id : {"a", "b", "c"}) {
    spec.id = id;
    Result<Task> refused = engine_->Enqueue(spec);
    EXPECT_THAT(refused, StatusIs(StatusCode::kUnavailable)) << id;
    EXPECT_EQ(refused.status().reason(), StatusReason::kStoreUnavailable) << id;
  }
  const EngineStats down = engine_->Stats();
  EXPECT_FALSE(down.store_up);
  EXPECT_FALSE(down.store_error.empty());
  EXPECT_THAT(engine_->Claim("q", 1, 30s), StatusIs(StatusCode::kUnavailable));
  // Reads have a connection of their own, which was not lost.
  EXPECT_EQ(StateOf("before"), TaskState::kScheduled);
  db_.AllowConnections(true);
  // The next attempt comes when the backoff (at most 5 s) has passed.
  clock_.Advance(5s);
  spec.id = "after";
  EXPECT_THAT(engine_->Enqueue(spec), IsOk());
  EXPECT_TRUE(engine_->Stats().store_up);
  EXPECT_TRUE(engine_->Stats().store_error.empty());
  Result<std::vector<Lease>> claimed = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  EXPECT_EQ(claimed->size(), 2u);  // "before" and "after"
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_THAT(engine_->Get(id), StatusIs(StatusCode::kNotFound)) << id;
  }
}

}  // namespace
}  // namespace chronoq
