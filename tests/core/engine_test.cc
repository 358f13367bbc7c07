// Engine behaviour on a fake clock: the task life cycle, claims and leases,
// conflicts, batches, the window, retention, recovery and bad input.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "chronoq/time.h"

#include "store/store.h"
#include "support/engine_fixture.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::EngineFixture;

class EngineTest : public EngineFixture {};

TEST_F(EngineTest, EnqueueReturnsTheStoredTask) {
  const Timestamp now = clock_.Now();
  TaskSpec spec;
  spec.queue = "emails";
  spec.payload = R"({"to":"a@example.com"})";
  spec.delay = 10s;
  spec.priority = 3;
  auto t = engine_->Enqueue(spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->id.size(), 17u);
  EXPECT_EQ(t->id[0], '_');
  EXPECT_EQ(t->queue, "emails");
  EXPECT_EQ(t->state, TaskState::kScheduled);
  EXPECT_EQ(t->payload, R"({"to":"a@example.com"})");
  EXPECT_EQ(t->run_at, now + 10s);
  EXPECT_EQ(t->attempt, 0);
  EXPECT_EQ(t->max_attempts, 25);
  EXPECT_EQ(t->priority, 3);
  EXPECT_EQ(t->created_at, now);

  auto got = engine_->Get(t->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->payload, t->payload);
  EXPECT_EQ(got->run_at, t->run_at);
  EXPECT_EQ(engine_->Get("nope").status().code(), StatusCode::kNotFound);
}

TEST_F(EngineTest, GeneratedIdsFollowEnqueueOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(Add().id);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
}

TEST_F(EngineTest, OnlyDueTasksAreClaimed) {
  const Task t = Add(10s);
  auto none = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  clock_.Advance(10s);
  auto got = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  const Lease& l = got->front();
  EXPECT_EQ(l.id, t.id);
  EXPECT_EQ(l.attempt, 1);
  EXPECT_EQ(l.run_at, t.run_at);
  EXPECT_EQ(l.lease_until, clock_.Now() + 30s);
  EXPECT_GT(l.token, 0u);
  EXPECT_EQ(StateOf(t.id), TaskState::kRunning);
  // Claimed tasks are not handed out twice.
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());
  // Other queues do not see it.
  clock_.Advance(1s);
  EXPECT_TRUE(engine_->Claim("other", 10, 30s)->empty());
}

TEST_F(EngineTest, DueOrderThenPriorityThenEnqueueOrder) {
  TaskSpec s;
  s.queue = "q";
  s.run_at = clock_.Now() + 5s;
  s.priority = 5;
  const std::string p5 = engine_->Enqueue(s)->id;
  s.priority = -1;
  const std::string pm1 = engine_->Enqueue(s)->id;
  s.priority = 0;
  const std::string p0a = engine_->Enqueue(s)->id;
  const std::string p0b = engine_->Enqueue(s)->id;
  s.run_at = clock_.Now() + 1s;
  s.priority = 100;
  const std::string early = engine_->Enqueue(s)->id;

  clock_.Advance(5s);
  auto got = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(got.ok());
  std::vector<std::string> order;
  for (const Lease& l : *got) order.push_back(l.id);
  EXPECT_EQ(order, (std::vector<std::string>{early, pm1, p0a, p0b, p5}));
}

TEST_F(EngineTest, AckCompletesAndTheTokenIsSpent) {
  const Task t = Add();
  auto l = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(l->size(), 1u);
  ASSERT_TRUE(engine_->Ack(t.id, l->front().token).ok());
  auto done = engine_->Get(t.id);
  EXPECT_EQ(done->state, TaskState::kSucceeded);
  EXPECT_EQ(done->attempt, 1);
  EXPECT_FALSE(done->lease_until.has_value());

  Status again = engine_->Ack(t.id, l->front().token);
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.field(), "token");
  EXPECT_EQ(engine_->Ack("missing", 1).code(), StatusCode::kNotFound);
}

TEST_F(EngineTest, LapsedLeaseIsRedeliveredAndTheOldTokenIsStale) {
  const Task t = Add();
  auto first = engine_->Claim("q", 1, 5s);
  ASSERT_EQ(first->size(), 1u);
  const uint64_t old_token = first->front().token;

  clock_.Advance(5s);
  engine_->Sync();
  auto lapsed = engine_->Get(t.id);
  EXPECT_EQ(lapsed->state, TaskState::kScheduled);
  EXPECT_EQ(lapsed->last_error, "lease expired during attempt 1");

  auto second = engine_->Claim("q", 1, 5s);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ(second->front().attempt, 2);
  EXPECT_GT(second->front().token, old_token);

  // The first worker comes back late: every call with its token is refused
  // and changes nothing.
  EXPECT_EQ(engine_->Ack(t.id, old_token).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->Fail(t.id, old_token, "late").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->Extend(t.id, old_token, 10s).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateOf(t.id), TaskState::kRunning);
  EXPECT_TRUE(engine_->Ack(t.id, second->front().token).ok());
}

TEST_F(EngineTest, OneClaimSharesATokenButLeasesStayPerTask) {
  const Task a = Add();
  const Task b = Add();
  auto first = engine_->Claim("q", 2, 5s);
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ(first->at(0).token, first->at(1).token);
  // b's lease lapses and b is claimed again; a keeps its lease.
  ASSERT_TRUE(engine_->Extend(a.id, first->at(0).token, 60s).ok());
  clock_.Advance(5s);
  auto second = engine_->Claim("q", 2, 5s);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ(second->front().id, b.id);
  EXPECT_GT(second->front().token, first->at(1).token);
  // The first claim's token still holds for a, no longer for b.
  EXPECT_EQ(engine_->Ack(b.id, first->at(1).token).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(engine_->Ack(a.id, first->at(0).token).ok());
  EXPECT_TRUE(engine_->Ack(b.id, second->front().token).ok());
}

TEST_F(EngineTest, ExtendKeepsTheLease) {
  const Task t = Add();
  auto l = engine_->Claim("q", 1, 10s);
  ASSERT_EQ(l->size(), 1u);
  clock_.Advance(8s);
  auto until = engine_->Extend(t.id, l->front().token, 10s);
  ASSERT_TRUE(until.ok());
  EXPECT_EQ(*until, clock_.Now() + 10s);
  clock_.Advance(8s);  // 16 s after the claim: past the first lease
  engine_->Sync();
  EXPECT_EQ(StateOf(t.id), TaskState::kRunning);
  EXPECT_EQ(engine_->Get(t.id)->lease_until, *until);
  EXPECT_TRUE(engine_->Ack(t.id, l->front().token).ok());
}

TEST_F(EngineTest, ExtendManyReportsPerLease) {
  const Task a = Add();
  const Task b = Add();
  auto l = engine_->Claim("q", 2, 10s);
  ASSERT_EQ(l->size(), 2u);
  clock_.Advance(8s);
  auto res = engine_->ExtendMany({{a.id, l->at(0).token}, {b.id, 12345}}, 10s);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE((*res)[0].ok());
  EXPECT_EQ((*res)[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->Get(a.id)->lease_until, clock_.Now() + 10s);
  EXPECT_EQ(engine_->Get(b.id)->lease_until, clock_.Now() + 2s);
  EXPECT_EQ(engine_->ExtendMany({}, 10s).status().field(), "leases");
  EXPECT_EQ(engine_->ExtendMany({{a.id, 1}}, 0s).status().field(), "lease_ms");
}

TEST_F(EngineTest, FailRetriesAfterBackoffAndKeepsTheError) {
  const Task t = Add();
  auto l = engine_->Claim("q", 1, 30s);
  const Timestamp failed_at = clock_.Now();
  ASSERT_TRUE(engine_->Fail(t.id, l->front().token, "smtp timeout").ok());
  auto after = engine_->Get(t.id);
  EXPECT_EQ(after->state, TaskState::kScheduled);
  EXPECT_EQ(after->last_error, "smtp timeout");
  // Default backoff: attempt 1 waits uniformly in [0, 1 s].
  EXPECT_GE(after->run_at, failed_at);
  EXPECT_LE(after->run_at, failed_at + 1s);

  clock_.Advance(1s);
  auto again = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ(again->front().attempt, 2);
  // An explicit retry_after wins over the backoff.
  ASSERT_TRUE(engine_->Fail(t.id, again->front().token, "later", 30s).ok());
  EXPECT_EQ(engine_->Get(t.id)->run_at, clock_.Now() + 30s);
}

TEST_F(EngineTest, TaskDiesAfterMaxAttemptsAndCanBeRetriedByHand) {
  TaskSpec s;
  s.queue = "q";
  s.max_attempts = 2;
  const std::string id = engine_->Enqueue(s)->id;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    clock_.Advance(1h);  // past any backoff
    auto l = engine_->Claim("q", 1, 30s);
    ASSERT_EQ(l->size(), 1u) << "attempt " << attempt;
    ASSERT_TRUE(engine_->Fail(id, l->front().token, "boom " + std::to_string(attempt)).ok());
  }
  auto dead = engine_->Get(id);
  EXPECT_EQ(dead->state, TaskState::kDead);
  EXPECT_EQ(dead->last_error, "boom 2");
  EXPECT_EQ(dead->attempt, 2);
  clock_.Advance(1h);
  EXPECT_TRUE(engine_->Claim("q", 1, 30s)->empty());

  auto revived = engine_->Retry(id);
  ASSERT_TRUE(revived.ok()) << revived.status().ToString();
  EXPECT_EQ(revived->state, TaskState::kScheduled);
  EXPECT_EQ(revived->attempt, 0);
  auto l = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ(l->front().attempt, 1);
  EXPECT_EQ(engine_->Retry(id).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, LeaseLapseOnTheLastAttemptBuriesTheTask) {
  TaskSpec s;
  s.queue = "q";
  s.max_attempts = 1;
  const std::string id = engine_->Enqueue(s)->id;
  ASSERT_EQ(engine_->Claim("q", 1, 5s)->size(), 1u);
  clock_.Advance(5s);
  engine_->Sync();
  auto dead = engine_->Get(id);
  EXPECT_EQ(dead->state, TaskState::kDead);
  EXPECT_EQ(dead->last_error, "lease expired during attempt 1");
}

TEST_F(EngineTest, ConflictRejectIgnoreReplace) {
  const Task first = Add(1h, "share:42");
  TaskSpec s;
  s.queue = "q";
  s.id = "share:42";
  s.delay = 2h;
  s.payload = R"({"v":2})";

  Status rejected = engine_->Enqueue(s).status();
  EXPECT_EQ(rejected.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(rejected.field(), "id");

  s.on_conflict = OnConflict::kIgnore;
  auto ignored = engine_->Enqueue(s);
  ASSERT_TRUE(ignored.ok());
  EXPECT_EQ(ignored->run_at, first.run_at);
  EXPECT_EQ(ignored->payload, "{}");

  s.on_conflict = OnConflict::kReplace;
  auto replaced = engine_->Enqueue(s);
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->run_at, clock_.Now() + 2h);
  EXPECT_EQ(engine_->Get("share:42")->payload, R"({"v":2})");
  // The old due time no longer fires.
  clock_.Advance(1h);
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());
  clock_.Advance(1h);
  auto l = engine_->Claim("q", 10, 30s);
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ(l->front().payload, R"({"v":2})");

  // Running: replace is refused.
  Status running = engine_->Enqueue(s).status();
  EXPECT_EQ(running.code(), StatusCode::kFailedPrecondition);
  // Finished: the id is free again.
  ASSERT_TRUE(engine_->Ack("share:42", l->front().token).ok());
  s.on_conflict = OnConflict::kReject;
  auto reused = engine_->Enqueue(s);
  ASSERT_TRUE(reused.ok()) << reused.status().ToString();
  EXPECT_EQ(reused->state, TaskState::kScheduled);
  EXPECT_EQ(reused->attempt, 0);
}

TEST_F(EngineTest, CancelStopsAScheduledTaskOnly) {
  const Task t = Add(10s, "share:43");
  auto cancelled = engine_->Cancel("share:43");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state, TaskState::kCancelled);
  EXPECT_EQ(cancelled->run_at, t.run_at);
  clock_.Advance(10s);
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());
  EXPECT_EQ(engine_->Cancel("share:43").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->Cancel("nope").status().code(), StatusCode::kNotFound);

  const Task r = Add();
  ASSERT_EQ(engine_->Claim("q", 1, 30s)->size(), 1u);
  Status s = engine_->Cancel(r.id).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateOf(r.id), TaskState::kRunning);
}

TEST_F(EngineTest, RescheduleMovesTheDueTime) {
  const Task t = Add(1h);
  auto moved = engine_->Reschedule(t.id, clock_.Now() + 5s, std::string(R"({"moved":true})"));
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->run_at, clock_.Now() + 5s);
  clock_.Advance(5s);
  auto l = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ(l->front().payload, R"({"moved":true})");
  EXPECT_EQ(engine_->Reschedule(t.id, clock_.Now()).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, BatchIsAllOrNothing) {
  Add(0s, "taken");
  std::vector<TaskSpec> specs(4);
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].queue = "batch";
    specs[i].id = "b" + std::to_string(i);
  }
  specs[2].id = "taken";
  Status s = engine_->EnqueueBatch(specs).status();
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s.field(), "tasks[2].id");
  EXPECT_EQ(engine_->Get("b0").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Get("b1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(engine_->Claim("batch", 10, 30s)->empty());

  specs[2].id = "b2";
  specs[3].payload = "{not json";
  s = engine_->EnqueueBatch(specs).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "tasks[3].payload");

  specs[3].payload = "[1,2]";
  auto ok = engine_->EnqueueBatch(specs);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 4u);
  EXPECT_EQ(engine_->Claim("batch", 10, 30s)->size(), 4u);
}

TEST_F(EngineTest, BadInputIsRejectedByFieldAndChangesNothing) {
  TaskSpec s;
  s.queue = "q";
  s.payload = "nope";
  EXPECT_EQ(engine_->Enqueue(s).status().field(), "payload");
  s.payload = "{}";
  s.delay = -1s;
  EXPECT_EQ(engine_->Enqueue(s).status().field(), "delay_ms");
  s.delay.reset();
  s.id = std::string(201, 'x');
  EXPECT_EQ(engine_->Enqueue(s).status().field(), "id");
  s.id.clear();
  s.queue = "bad queue";
  EXPECT_EQ(engine_->Enqueue(s).status().field(), "queue");

  EXPECT_EQ(engine_->Claim("q", 1, 0s).status().field(), "lease_ms");
  EXPECT_EQ(engine_->Claim("q", 0, 1s).status().field(), "max");
  EXPECT_EQ(engine_->Claim("q", 1, 1s, -1s).status().field(), "wait_ms");
  EXPECT_EQ(engine_->Extend("x", 1, 0s).status().field(), "lease_ms");
  EXPECT_EQ(engine_->Fail("x", 1, "e", -1s).field(), "retry_in_ms");
  EXPECT_EQ(engine_->Reschedule("x", Timestamp(-1s)).status().field(), "run_at");
  EXPECT_EQ(engine_->List({.limit = 0}).status().field(), "limit");
  EXPECT_EQ(engine_->List({.cursor = "zz"}).status().field(), "cursor");
  EXPECT_EQ(engine_->RegisterHandler("q", {.concurrency = 0}, [](const Lease&) { return Status(); })
                .field(),
            "concurrency");

  auto page = engine_->List({});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->tasks.empty());
}

TEST_F(EngineTest, ListPagesThroughEveryTaskOnce) {
  for (int i = 0; i < 25; ++i) Add(Duration(std::chrono::seconds(25 - i)));
  for (std::optional<TaskState> state :
       {std::optional<TaskState>(), std::optional(TaskState::kScheduled)}) {
    std::vector<Task> seen;
    ListRequest req{.state = state, .limit = 10};
    for (int pages = 0; pages < 10; ++pages) {
      auto page = engine_->List(req);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      seen.insert(seen.end(), page->tasks.begin(), page->tasks.end());
      if (page->next_cursor.empty()) break;
      req.cursor = page->next_cursor;
    }
    ASSERT_EQ(seen.size(), 25u);
    std::set<std::string> ids;
    for (const Task& t : seen) ids.insert(t.id);
    EXPECT_EQ(ids.size(), 25u);
    if (state) {
      // Due order to the bucket (about a minute), then creation order.
      EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end(), [](const Task& a, const Task& b) {
        return std::pair(DueBucket(a.run_at), a.id) < std::pair(DueBucket(b.run_at), b.id);
      }));
    }
  }
  EXPECT_EQ(engine_->List({.queue = "other"})->tasks.size(), 0u);
  EXPECT_EQ(engine_->List({.state = TaskState::kDead})->tasks.size(), 0u);
}

TEST_F(EngineTest, SucceededTasksArePurgedAfterRetention) {
  const Task t = Add();
  auto l = engine_->Claim("q", 1, 30s);
  ASSERT_TRUE(engine_->Ack(t.id, l->front().token).ok());
  clock_.Advance(23h);
  engine_->Sync();
  EXPECT_EQ(StateOf(t.id), TaskState::kSucceeded);
  clock_.Advance(1h + 1s);
  engine_->Sync();
  EXPECT_EQ(engine_->Get(t.id).status().code(), StatusCode::kNotFound);
}

TEST_F(EngineTest, PurgeRunsInBoundedChunks) {
  engine_.reset();
  EngineOptions o = Options();
  o.purge_chunk = 7;
  o.retention = 1s;
  Open(o);
  std::vector<TaskSpec> specs(50, TaskSpec{.queue = "q"});
  ASSERT_TRUE(engine_->EnqueueBatch(specs).ok());
  auto leases = engine_->Claim("q", 50, 30s);
  std::vector<AckRequest> acks;
  for (const Lease& l : *leases) acks.push_back({l.id, l.token});
  ASSERT_TRUE(engine_->AckMany(acks).ok());
  clock_.Advance(2s);
  engine_->Sync();  // one chunk per commit; the loop keeps going until done
  engine_->Sync();
  for (int i = 0; i < 10 && !engine_->List({})->tasks.empty(); ++i) engine_->Sync();
  EXPECT_TRUE(engine_->List({})->tasks.empty());
}

TEST_F(EngineTest, WindowRefillsFromTheStore) {
  engine_.reset();
  EngineOptions o = Options();
  o.lookahead = 10s;
  o.max_window_tasks = 4;
  Open(o);
  // Far-future tasks stay on disk; the loop plans its next wake-up for when
  // the first of them enters the look-ahead window, and nothing earlier.
  for (int i = 0; i < 3; ++i) Add(1h + std::chrono::seconds(i));
  clock_.AwaitWaiter(clock_.Now() + 1h - 10s);
  for (Timestamp d : clock_.Deadlines()) EXPECT_GE(d, clock_.Now() + 1h - 10s);

  // More due tasks than the window holds are all claimed eventually.
  for (int i = 0; i < 10; ++i) Add();
  clock_.Advance(1h + 5s);
  engine_->Sync();
  int claimed = 0;
  for (int round = 0; round < 20 && claimed < 13; ++round) {
    clock_.Advance(1s);
    engine_->Sync();
    claimed += static_cast<int>(engine_->Claim("q", 3, 1h)->size());
  }
  EXPECT_EQ(claimed, 13);
}

TEST_F(EngineTest, IdleEngineSleepsWithoutDeadline) {
  Add(0s);
  engine_->Sync();
  clock_.AwaitWaiter(kForever);
  const std::vector<Timestamp> deadlines = clock_.Deadlines();
  ASSERT_EQ(deadlines.size(), 1u);  // the engine loop, asleep until something arrives
  EXPECT_EQ(deadlines[0], kForever);
}

// A claim waiting for a task takes it claim_ahead before it is due, so that
// the commit of its lease is done by then, and is answered at the due time.
TEST_F(EngineTest, WaitingClaimTakesTheTaskAheadAndIsAnsweredWhenItIsDue) {
  const Duration ahead = Options().claim_ahead;
  ASSERT_EQ(ahead, 10ms);
  const Task t = Add(5s);
  const Timestamp due = t.run_at;
  std::atomic<bool> answered{false};
  Result<std::vector<Lease>> got = std::vector<Lease>();
  std::thread waiter([&] {
    got = engine_->Claim("q", 10, 30s, 60s);
    answered = true;
  });
  clock_.AwaitWaiter(due - ahead);  // the loop sleeps until then
  clock_.Advance(5s - ahead);
  clock_.AwaitWaiter(due);  // the answer waits for the due time
  // Committed: the task runs, claimed at its due time, and is the claim's.
  auto running = engine_->Get(t.id);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->state, TaskState::kRunning);
  ASSERT_EQ(running->attempts.size(), 0u);
  EXPECT_EQ(engine_->Cancel(t.id).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(answered);  // but not handed out before it is due
  clock_.Advance(ahead - 1us);
  engine_->Sync();
  EXPECT_FALSE(answered);
  clock_.Advance(1us);
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, t.id);
  EXPECT_EQ(got->front().lease_until, due + 30s);  // from the due time
  EXPECT_EQ(clock_.Now(), due);
}

// Only the tasks due at the first due time go: a later one would wait with
// it and be late, or go early.
TEST_F(EngineTest, ClaimServedAheadTakesOnlyTheFirstDueTime) {
  const Task first = Add(5s);
  const Task second = Add(5s + 5ms);
  Result<std::vector<Lease>> got = std::vector<Lease>();
  std::thread waiter([&] { got = engine_->Claim("q", 10, 30s, 60s); });
  clock_.AwaitWaiter(first.run_at - 10ms);
  clock_.Advance(5s - 10ms);
  clock_.AwaitWaiter(first.run_at);
  clock_.Advance(10ms);
  waiter.join();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, first.id);
  EXPECT_EQ(StateOf(second.id), TaskState::kScheduled);
}

TEST_F(EngineTest, WaitingClaimWithoutClaimAheadWakesWhenATaskBecomesDue) {
  EngineOptions o = Options();
  o.claim_ahead = Duration::zero();
  engine_.reset();
  Open(o);
  const Task t = Add(5s);
  Result<std::vector<Lease>> got = std::vector<Lease>();
  std::thread waiter([&] { got = engine_->Claim("q", 1, 30s, 60s); });
  clock_.AwaitWaiter(clock_.Now() + 5s);  // the loop sleeps until the task is due
  EXPECT_EQ(StateOf(t.id), TaskState::kScheduled);
  clock_.Advance(5s);
  waiter.join();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, t.id);
}

// A claim whose wait ends before the task is due does not take it: it answers
// with nothing at its deadline, and the task waits for the next claim.
TEST_F(EngineTest, ClaimThatStopsWaitingBeforeTheDueTimeIsNotServedAhead) {
  const Task t = Add(5s);
  Result<std::vector<Lease>> got = Status::Internal("not run");
  std::thread waiter([&] { got = engine_->Claim("q", 1, 30s, 5s - 5ms); });
  clock_.AwaitWaiter(t.run_at - 5ms);  // the loop: the claim's deadline, not before
  clock_.Advance(5s - 10ms);
  engine_->Sync();
  EXPECT_EQ(StateOf(t.id), TaskState::kScheduled);
  clock_.Advance(5ms);
  waiter.join();
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_EQ(StateOf(t.id), TaskState::kScheduled);
}

TEST(EngineClaimAheadTest, OutOfRangeIsRefusedNamingTheField) {
  test::TempDir dir;
  EngineOptions o;
  o.store = dir.File("never.db");
  o.claim_ahead = -1us;
  EXPECT_EQ(Engine::Open(o).status().field(), "claim_ahead");
  o.claim_ahead = 1s + 1us;
  EXPECT_EQ(Engine::Open(o).status().field(), "claim_ahead");
  EXPECT_FALSE(std::filesystem::exists(dir.File("never.db")));
}

// An engine stopped while an answer waits for its due time still gives it,
// then (on the fake clock, which does not move) after that much real time.
TEST_F(EngineTest, StoppingEngineStillAnswersAClaimServedAhead) {
  const Task t = Add(5s);
  Result<std::vector<Lease>> got = std::vector<Lease>();
  std::thread waiter([&] { got = engine_->Claim("q", 1, 30s, 60s); });
  clock_.AwaitWaiter(t.run_at - 10ms);
  clock_.Advance(5s - 10ms);
  clock_.AwaitWaiter(t.run_at);
  engine_.reset();
  waiter.join();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, t.id);
}

TEST_F(EngineTest, WaitingClaimWakesOnEnqueue) {
  Result<std::vector<Lease>> got = std::vector<Lease>();
  const Timestamp deadline = clock_.Now() + 60s;
  std::thread waiter([&] { got = engine_->Claim("q", 1, 30s, 60s); });
  clock_.AwaitWaiter(deadline);
  const Task t = Add();
  waiter.join();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, t.id);
}

TEST_F(EngineTest, WaitingClaimReturnsEmptyAtItsDeadline) {
  Result<std::vector<Lease>> got = Status::Internal("not run");
  const Timestamp deadline = clock_.Now() + 20s;
  std::thread waiter([&] { got = engine_->Claim("q", 1, 30s, 20s); });
  clock_.AwaitWaiter(deadline);
  clock_.Advance(20s);
  waiter.join();
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

TEST_F(EngineTest, RestartKeepsTasksLeasesAndTokenOrder) {
  const Task later = Add(1h);
  const Task now_task = Add();
  auto l = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(l->size(), 1u);
  const uint64_t token = l->front().token;
  engine_.reset();

  Open();
  EXPECT_EQ(StateOf(later.id), TaskState::kScheduled);
  EXPECT_EQ(StateOf(now_task.id), TaskState::kRunning);
  // The lease outlives the restart: its holder can still acknowledge...
  EXPECT_TRUE(engine_->Extend(now_task.id, token, 30s).ok());
  // ...and once it lapses the task is redelivered with a larger token.
  clock_.Advance(31s);
  engine_->Sync();
  auto again = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ(again->front().id, now_task.id);
  EXPECT_EQ(again->front().attempt, 2);
  EXPECT_GT(again->front().token, token);
  EXPECT_EQ(engine_->Ack(now_task.id, token).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(engine_->Ack(now_task.id, again->front().token).ok());
  clock_.Advance(1h);
  auto due = engine_->Claim("q", 5, 30s);
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ(due->front().id, later.id);
}

// What a task's end wrote stays after a restart: an acknowledged task is
// succeeded, a failed one waits to retry with its error and attempt, and is
// retried on time.
TEST_F(EngineTest, AcknowledgedAndFailedTasksStaySoAfterARestart) {
  const Task done = Add();
  const Task failed = Add();
  auto first = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(first->size(), 1u);
  ASSERT_EQ(first->front().id, done.id);
  ASSERT_TRUE(engine_->Ack(done.id, first->front().token).ok());
  auto second = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(second->size(), 1u);
  ASSERT_EQ(second->front().id, failed.id);
  ASSERT_TRUE(engine_->Fail(failed.id, second->front().token, "try again", 1min).ok());
  engine_.reset();

  Open();
  EXPECT_EQ(StateOf(done.id), TaskState::kSucceeded);
  auto t = engine_->Get(failed.id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->state, TaskState::kScheduled);
  EXPECT_EQ(t->last_error, "try again");
  EXPECT_EQ(t->attempt, 1);
  EXPECT_TRUE(engine_->Claim("q", 5, 30s)->empty());
  clock_.Advance(1min);
  auto retry = engine_->Claim("q", 5, 30s);
  ASSERT_EQ(retry->size(), 1u);
  EXPECT_EQ(retry->front().id, failed.id);
  EXPECT_EQ(retry->front().attempt, 2);
  EXPECT_GT(retry->front().token, second->front().token);
}

TEST_F(EngineTest, AckManyReportsPerTask) {
  const Task a = Add();
  const Task b = Add();
  auto l = engine_->Claim("q", 2, 30s);
  ASSERT_EQ(l->size(), 2u);
  auto res = engine_->AckMany({{l->at(0).id, l->at(0).token}, {l->at(1).id, 999999}});
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE((*res)[0].ok());
  EXPECT_EQ((*res)[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateOf(l->at(0).id), TaskState::kSucceeded);
  EXPECT_EQ(StateOf(l->at(1).id), TaskState::kRunning);

  // The same token twice in one call: the second is stale.
  const Lease& b_lease = l->at(1);
  auto twice = engine_->AckMany({{b_lease.id, b_lease.token}, {b_lease.id, b_lease.token}});
  ASSERT_TRUE(twice.ok());
  EXPECT_TRUE((*twice)[0].ok());
  EXPECT_EQ((*twice)[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateOf(b_lease.id), TaskState::kSucceeded);
  EXPECT_EQ(engine_->AckMany({{"missing", 1}})->at(0).code(), StatusCode::kNotFound);
  (void)a;
  (void)b;
}

// A batch's outcomes in one call: successes and failures side by side, each
// failure retrying (after its retry_after, or the backoff) or going dead.
TEST_F(EngineTest, AckManyFailsTheTasksThatCarryAFailure) {
  TaskSpec last;
  last.queue = "q";
  last.id = "last-attempt";
  last.max_attempts = 1;
  ASSERT_TRUE(engine_->Enqueue(last).ok());
  const Task ok = Add(Duration::zero(), "ok");
  const Task retried = Add(Duration::zero(), "retried");
  auto l = engine_->Claim("q", 3, 30s);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 3u);
  std::map<std::string, uint64_t> token;
  for (const Lease& lease : *l) token[lease.id] = lease.token;

  auto res = engine_->AckMany({
      {ok.id, token[ok.id]},
      {retried.id, token[retried.id], "", AckFailure{"S3 said 503", 5s}},
      {"last-attempt", token["last-attempt"], "", AckFailure{"gone", std::nullopt}},
      // The same task again after its failure: its lease is gone.
      {retried.id, token[retried.id]},
  });
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->size(), 4u);
  EXPECT_TRUE((*res)[0].ok());
  EXPECT_TRUE((*res)[1].ok());
  EXPECT_TRUE((*res)[2].ok());
  EXPECT_EQ((*res)[3].code(), StatusCode::kFailedPrecondition);

  EXPECT_EQ(StateOf(ok.id), TaskState::kSucceeded);
  auto r = engine_->Get(retried.id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, TaskState::kScheduled);
  EXPECT_EQ(r->last_error, "S3 said 503");
  EXPECT_EQ(r->run_at, clock_.Now() + 5s);
  auto dead = engine_->Get("last-attempt");
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->state, TaskState::kDead);
  EXPECT_EQ(dead->last_error, "gone");

  // A bad retry delay refuses the whole call, naming the entry.
  Status bad = engine_->AckMany({{ok.id, 1}, {retried.id, 1, "", AckFailure{"x", -1s}}}).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.field(), "acks[1].retry_in_ms");
  clock_.Advance(5s);
  auto again = engine_->Claim("q", 5, 30s);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ(again->front().id, retried.id);
  EXPECT_EQ(again->front().attempt, 2);
}

// The errors a caller must tell from others of their code carry a reason
// (chronoqd sends its name as the error code).
TEST_F(EngineTest, ErrorsCallersMustTellApartCarryAReason) {
  Task t = Add();
  auto leases = engine_->Claim("q", 1, 10s);
  ASSERT_TRUE(leases.ok() && leases->size() == 1u);
  Status stale = engine_->Ack(t.id, leases->front().token + 1);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(stale.reason(), StatusReason::kStaleToken);
  EXPECT_EQ(stale.field(), "token");

  auto held = engine_->AcquireLock("k", {0s, 10s, ""});
  ASSERT_TRUE(held.ok());
  auto busy = engine_->AcquireLock("k", {0s, 10s, ""});
  EXPECT_EQ(busy.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(busy.status().reason(), StatusReason::kLockWaitTimeout);
  EXPECT_EQ(busy.status().field(), "wait_ms");
  EXPECT_EQ(engine_->ReleaseLock("k", held->token + 1).reason(), StatusReason::kStaleToken);

  ASSERT_TRUE(engine_->ConfigureQueue("keyed", {.max_pending_per_key = 1}).ok());
  TaskSpec keyed;
  keyed.queue = "keyed";
  keyed.key = "customer:7";
  ASSERT_TRUE(engine_->Enqueue(keyed).ok());
  auto full = engine_->Enqueue(keyed);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().reason(), StatusReason::kKeyBacklogFull);
  EXPECT_EQ(full.status().field(), "key");

  // Other errors of those codes have none.
  EXPECT_EQ(engine_->Cancel(t.id).status().reason(), StatusReason::kNone);
}

}  // namespace
}  // namespace chronoq
