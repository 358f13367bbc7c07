// The engine on PostgreSQL, opened from a postgresql:// URL as an embedding
// program or chronoqd opens it: tasks, retries, schedules, locks and keyed
// tasks, each surviving a restart, on a fake clock and a fresh database of
// the cluster ctest's `postgres` fixture starts.
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

TEST_F(PostgresEngineTest, EnqueueClaimAckFailAndRestart) {
  Add("q", "now");
  Add("q", "share:42", 10min);
  std::vector<Lease> first = Claim("q");
  ASSERT_EQ(Ids(first), std::vector<std::string>{"now"});
  EXPECT_EQ(first[0].attempt, 1);
  ASSERT_THAT(engine_->Ack("now", first[0].token), IsOk());
  EXPECT_EQ(StateOf("now"), TaskState::kSucceeded);
  // A stale token is refused.
  EXPECT_THAT(engine_->Ack("now", first[0].token), StatusIs(StatusCode::kFailedPrecondition));

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(StateOf("now"), TaskState::kSucceeded);
  EXPECT_EQ(StateOf("share:42"), TaskState::kScheduled);
  EXPECT_TRUE(Claim("q").empty());
  clock_.Advance(10min);
  std::vector<Lease> later = Claim("q");
  ASSERT_EQ(Ids(later), std::vector<std::string>{"share:42"});
  // Tokens go on growing across the restart.
  EXPECT_GT(later[0].token, first[0].token);
  ASSERT_THAT(engine_->Fail("share:42", later[0].token, "try again", 1min), IsOk());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<Task> failed = engine_->Get("share:42");
  ASSERT_THAT(failed, IsOk());
  EXPECT_EQ(failed->state, TaskState::kScheduled);
  EXPECT_EQ(failed->last_error, "try again");
  EXPECT_EQ(failed->attempt, 1);
  clock_.Advance(1min);
  std::vector<Lease> retry = Claim("q");
  ASSERT_EQ(Ids(retry), std::vector<std::string>{"share:42"});
  EXPECT_EQ(retry[0].attempt, 2);
  ASSERT_THAT(engine_->Ack("share:42", retry[0].token), IsOk());

  Result<QueueInfo> q = engine_->GetQueue("q");
  ASSERT_THAT(q, IsOk());
  Result<TaskPage> page = engine_->List({.queue = "q", .state = TaskState::kSucceeded});
  ASSERT_THAT(page, IsOk());
  EXPECT_EQ(page->tasks.size(), 2u);
}

TEST_F(PostgresEngineTest, ALapsedLeaseIsRedeliveredAfterARestart) {
  Add("q", "t");
  std::vector<Lease> first = Claim("q");
  ASSERT_EQ(first.size(), 1u);
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(StateOf("t"), TaskState::kRunning);
  clock_.Advance(31s);
  engine_->Sync();
  std::vector<Lease> again = Claim("q");
  ASSERT_EQ(Ids(again), std::vector<std::string>{"t"});
  EXPECT_GT(again[0].token, first[0].token);
  EXPECT_THAT(engine_->Ack("t", first[0].token), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(engine_->Ack("t", again[0].token), IsOk());
}

TEST_F(PostgresEngineTest, SchedulesMakeOneOccurrenceAtATimeAcrossRestarts) {
  ScheduleSpec spec;
  spec.name = "tick";
  spec.queue = "s";
  spec.every = 1min;
  ASSERT_THAT(engine_->CreateSchedule(spec), IsOk());
  EXPECT_THAT(engine_->CreateSchedule(spec), StatusIs(StatusCode::kAlreadyExists));
  std::vector<Lease> first = Claim("s");
  ASSERT_EQ(first.size(), 1u);
  ASSERT_THAT(engine_->Ack(first[0].id, first[0].token), IsOk());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<Schedule> s = engine_->GetSchedule("tick");
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->runs, 1);
  EXPECT_TRUE(Claim("s").empty());
  clock_.Advance(1min);
  std::vector<Lease> second = Claim("s");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].id, first[0].id);
  ASSERT_THAT(engine_->Ack(second[0].id, second[0].token), IsOk());
  ASSERT_THAT(engine_->DeleteSchedule("tick"), IsOk());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_THAT(engine_->GetSchedule("tick"), StatusIs(StatusCode::kNotFound));
}

TEST_F(PostgresEngineTest, HeldLocksSurviveARestartUntilTheirLeaseEnds) {
  Result<LockGrant> grant = engine_->AcquireLock("k", {Duration::zero(), 30s, "me"});
  ASSERT_THAT(grant, IsOk());
  EXPECT_THAT(engine_->AcquireLock("k", {}), StatusIs(StatusCode::kDeadlineExceeded));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<LockInfo> info = engine_->GetLock("k");
  ASSERT_THAT(info, IsOk());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, "me");
  EXPECT_THAT(engine_->AcquireLock("k", {}), StatusIs(StatusCode::kDeadlineExceeded));
  ASSERT_THAT(engine_->ReleaseLock("k", grant->token), IsOk());
  Result<LockGrant> next = engine_->AcquireLock("k", {});
  ASSERT_THAT(next, IsOk());
  EXPECT_GT(next->token, grant->token);
}

TEST_F(PostgresEngineTest, KeyedTasksRunOneAtATimeInOrderAcrossRestarts) {
  for (const char* id : {"c1", "c2", "c3"}) Add("k", id, 0s, "customer");
  Add("k", "o1", 0s, "other");
  // One per key, the first of each.
  std::vector<Lease> first = Claim("k");
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"c1", "o1"}));
  EXPECT_TRUE(Claim("k").empty());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  // Still in flight after the restart: nothing more of either key.
  EXPECT_TRUE(Claim("k").empty());
  for (const Lease& l : first) ASSERT_THAT(engine_->Ack(l.id, l.token), IsOk());
  std::vector<Lease> second = Claim("k");
  ASSERT_EQ(Ids(second), std::vector<std::string>{"c2"});
  ASSERT_THAT(engine_->Ack("c2", second[0].token), IsOk());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  std::vector<Lease> third = Claim("k");
  ASSERT_EQ(Ids(third), std::vector<std::string>{"c3"});
  ASSERT_THAT(engine_->Ack("c3", third[0].token), IsOk());
  EXPECT_TRUE(Claim("k").empty());
}

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
