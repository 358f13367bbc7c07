// Queues through the Engine on a fake clock: live counts, settings, pause,
// concurrency limits, queue defaults and retention, webhook targets, engine
// statistics, and a database written by schema version 1.
#include <array>
#include <condition_variable>
#include <future>
#include <mutex>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "support/answer.h"
#include "support/engine_fixture.h"
#include "support/faulty_engine_fixture.h"
#include "support/raw_sql.h"
#include "support/schema_v1.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::EngineFixture;

// Tasks by state: scheduled, running, succeeded, cancelled, dead.
using Counts = std::array<int64_t, 5>;

using test::Answer;
using ClaimReply = Answer<Result<std::vector<Lease>>>;

class EngineQueueTest : public EngineFixture {
 protected:
  Counts CountsOf(const std::string& queue) {
    Result<QueueInfo> info = engine_->GetQueue(queue);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->counts : Counts{-1, -1, -1, -1, -1};
  }
  Task AddTo(const std::string& queue, std::string id = "", Duration delay = Duration::zero()) {
    TaskSpec spec;
    spec.queue = queue;
    spec.id = std::move(id);
    spec.delay = delay;
    Result<Task> t = engine_->Enqueue(spec);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : Task{};
  }
  void Configure(const std::string& queue, const QueueSettings& settings) {
    Result<QueueInfo> info = engine_->ConfigureQueue(queue, settings);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
  }
  void Reopen() {
    engine_.reset();
    Open();
  }
};

// --- counts -----------------------------------------------------------------------

TEST_F(EngineQueueTest, CountsFollowEveryTransition) {
  const Task a = Add();
  const Task b = Add();
  const Task c = Add();
  const Task d = Add(10s);
  TaskSpec once{.queue = "q", .id = "e", .max_attempts = 1};
  ASSERT_TRUE(engine_->Enqueue(once).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{5, 0, 0, 0, 0}));

  auto leases = engine_->Claim("q", 4, 30s);  // a, b, c, e
  ASSERT_EQ(leases->size(), 4u);
  EXPECT_EQ(CountsOf("q"), (Counts{1, 4, 0, 0, 0}));
  ASSERT_TRUE(engine_->Ack(a.id, (*leases)[0].token).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{1, 3, 1, 0, 0}));
  ASSERT_TRUE(engine_->Fail(b.id, (*leases)[1].token, "retry", 1s).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{2, 2, 1, 0, 0}));
  ASSERT_TRUE(engine_->Fail("e", (*leases)[3].token, "last attempt").ok());
  EXPECT_EQ(CountsOf("q"), (Counts{2, 1, 1, 0, 1}));
  ASSERT_TRUE(engine_->Cancel(d.id).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{1, 1, 1, 1, 1}));
  // c's lease lapses: back to scheduled.
  clock_.Advance(30s);
  engine_->Sync();
  EXPECT_EQ(StateOf(c.id), TaskState::kScheduled);
  EXPECT_EQ(CountsOf("q"), (Counts{2, 0, 1, 1, 1}));
  ASSERT_TRUE(engine_->Retry("e").ok());
  EXPECT_EQ(CountsOf("q"), (Counts{3, 0, 1, 1, 0}));
  // A replace that moves a scheduled task to another queue moves its count.
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "f"}).ok());
  ASSERT_TRUE(
      engine_->Enqueue({.queue = "other", .id = "f", .on_conflict = OnConflict::kReplace}).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{3, 0, 1, 1, 0}));
  EXPECT_EQ(CountsOf("other"), (Counts{1, 0, 0, 0, 0}));
  // Reusing a finished task's id replaces the finished row.
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "g"}).ok());
  ASSERT_TRUE(engine_->Cancel("g").ok());
  EXPECT_EQ(CountsOf("q"), (Counts{3, 0, 1, 2, 0}));
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "g"}).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{4, 0, 1, 1, 0}));
  // Ignored and rejected enqueues change nothing.
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "g", .on_conflict = OnConflict::kIgnore}).ok());
  EXPECT_FALSE(engine_->Enqueue({.queue = "q", .id = "g"}).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{4, 0, 1, 1, 0}));
  // A batch that fails stores none of its tasks, and counts none.
  EXPECT_FALSE(engine_->EnqueueBatch({{.queue = "q", .id = "h"}, {.queue = "q", .id = "g"}}).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{4, 0, 1, 1, 0}));
}

TEST_F(EngineQueueTest, AFailedBatchCreatesNoQueue) {
  AddTo("q", "taken");
  EXPECT_FALSE(engine_->EnqueueBatch({{.queue = "fresh"}, {.queue = "q", .id = "taken"}}).ok());
  EXPECT_EQ(engine_->GetQueue("fresh").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->ListQueues()->size(), 1u);
  // The queue is created, and counted, once a task of it is stored.
  AddTo("fresh");
  Reopen();
  EXPECT_EQ(CountsOf("fresh"), (Counts{1, 0, 0, 0, 0}));
  EXPECT_EQ(engine_->List({.queue = "fresh"})->tasks.size(), 1u);
}

TEST_F(EngineQueueTest, CountsSurviveARestartAndPurgesLeaveThem) {
  const Task a = Add();
  Add();
  const Task c = Add();
  auto leases = engine_->Claim("q", 2, 30s);
  ASSERT_TRUE(engine_->Ack(a.id, leases->front().token).ok());
  ASSERT_TRUE(engine_->Cancel(c.id).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{0, 1, 1, 1, 0}));

  Reopen();
  EXPECT_EQ(CountsOf("q"), (Counts{0, 1, 1, 1, 0}));
  // After the retention (24 h) the succeeded and cancelled tasks are purged;
  // the lapsed lease made the running one scheduled again.
  clock_.Advance(24h + 2s);
  engine_->Sync();
  EXPECT_EQ(engine_->Get(a.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(CountsOf("q"), (Counts{1, 0, 0, 0, 0}));
  Reopen();
  EXPECT_EQ(CountsOf("q"), (Counts{1, 0, 0, 0, 0}));
}

// An engine over a store whose commits fail on demand.
class EngineQueueFailureTest : public test::FaultyEngineFixture {
 protected:
  Counts CountsOf(const std::string& queue) {
    Result<QueueInfo> info = engine_->GetQueue(queue);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->counts : Counts{-1, -1, -1, -1, -1};
  }
};

TEST_F(EngineQueueFailureTest, AFailedCommitLeavesCountsSettingsAndStatsUnchanged) {
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "a"}).ok());
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "b"}).ok());
  store_->FailNextCommits(1);
  EXPECT_EQ(engine_->Enqueue({.queue = "q", .id = "c"}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(CountsOf("q"), (Counts{2, 0, 0, 0, 0}));
  // A queue created by a failed commit does not exist.
  store_->FailNextCommits(1);
  EXPECT_FALSE(engine_->Enqueue({.queue = "new", .id = "n"}).ok());
  EXPECT_EQ(engine_->GetQueue("new").status().code(), StatusCode::kNotFound);

  store_->FailNextCommits(1);
  EXPECT_FALSE(engine_->Claim("q", 10, 30s).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{2, 0, 0, 0, 0}));
  auto leases = engine_->Claim("q", 10, 30s);
  ASSERT_EQ(leases->size(), 2u);
  EXPECT_EQ(CountsOf("q"), (Counts{0, 2, 0, 0, 0}));
  store_->FailNextCommits(1);
  EXPECT_FALSE(engine_->Ack("a", (*leases)[0].token).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{0, 2, 0, 0, 0}));
  ASSERT_TRUE(engine_->Ack("a", (*leases)[0].token).ok());
  EXPECT_EQ(CountsOf("q"), (Counts{0, 1, 1, 0, 0}));

  store_->FailNextCommits(1);
  EXPECT_FALSE(engine_->ConfigureQueue("q", {.concurrency = 1}).ok());
  store_->FailNextCommits(1);
  EXPECT_FALSE(engine_->PauseQueue("q", true).ok());
  Result<QueueInfo> info = engine_->GetQueue("q");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->settings.concurrency.has_value());
  EXPECT_FALSE(info->paused);

  const EngineStats stats = engine_->Stats();
  EXPECT_EQ(stats.enqueued, 2u);  // a and b; c and n were not stored
  EXPECT_EQ(stats.acked, 1u);
  EXPECT_EQ(stats.dispatch_lateness_s.total, 2u);  // the failed claim handed out nothing

  // What was written survives a restart: memory and the table agree.
  Start();
  EXPECT_EQ(CountsOf("q"), (Counts{0, 1, 1, 0, 0}));
}

// --- concurrency and pause ------------------------------------------------------------

TEST_F(EngineQueueTest, ConcurrencyLimitsWhatClaimsReturn) {
  Configure("q", {.concurrency = 2});
  for (int i = 0; i < 5; ++i) Add();
  auto first = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 2u);
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());
  ASSERT_TRUE(engine_->Ack((*first)[0].id, (*first)[0].token).ok());
  EXPECT_EQ(engine_->Claim("q", 10, 30s)->size(), 1u);
  // Other queues are not limited.
  AddTo("free");
  AddTo("free");
  EXPECT_EQ(engine_->Claim("free", 10, 30s)->size(), 2u);
  // Raising the limit makes room at once.
  Configure("q", {.concurrency = 4});
  EXPECT_EQ(engine_->Claim("q", 10, 30s)->size(), 2u);
  EXPECT_EQ(CountsOf("q"), (Counts{0, 4, 1, 0, 0}));
}

TEST_F(EngineQueueTest, AWaitingClaimIsServedWhenARunningTaskIsAcked) {
  Configure("q", {.concurrency = 1});
  Add();
  const Task second = Add();
  auto first = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(first->size(), 1u);
  ClaimReply waiting;
  engine_->ClaimAsync("q", 5, 30s, 60s, waiting.Callback());
  engine_->Sync();
  EXPECT_FALSE(waiting.ready()) << "a claim beyond the queue's concurrency was answered";
  // Meanwhile the loop sleeps: a due task of a full queue does not wake it,
  // so each Sync is one commit and nothing runs in between.
  const uint64_t commits = engine_->Stats().commits;
  for (int i = 0; i < 20; ++i) engine_->Sync();
  EXPECT_EQ(engine_->Stats().commits - commits, 20u);

  ASSERT_TRUE(engine_->Ack(first->front().id, first->front().token).ok());
  engine_->Sync();
  ASSERT_TRUE(waiting.ready());
  Result<std::vector<Lease>> got = waiting.Get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, second.id);
}

TEST_F(EngineQueueTest, AWaitingClaimIsServedWhenALeaseLapses) {
  Configure("q", {.concurrency = 1});
  const Task first = Add();
  const Task second = Add();
  ASSERT_EQ(engine_->Claim("q", 1, 10s)->size(), 1u);
  ClaimReply waiting;
  engine_->ClaimAsync("q", 1, 30s, 60s, waiting.Callback());
  engine_->Sync();
  EXPECT_FALSE(waiting.ready());

  clock_.Advance(10s);
  engine_->Sync();
  ASSERT_TRUE(waiting.ready());
  Result<std::vector<Lease>> got = waiting.Get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, second.id);  // due before the redelivered one
  EXPECT_EQ(StateOf(first.id), TaskState::kScheduled);
  EXPECT_EQ(CountsOf("q"), (Counts{1, 1, 0, 0, 0}));
}

TEST_F(EngineQueueTest, APausedQueueHandsOutNothingAndResumingServesWaitingClaims) {
  const Task t = Add();
  Result<QueueInfo> paused = engine_->PauseQueue("q", true);
  ASSERT_TRUE(paused.ok());
  EXPECT_TRUE(paused->paused);
  EXPECT_TRUE(engine_->Claim("q", 1, 30s)->empty());
  // Its tasks still become due, and late.
  clock_.Advance(5s);
  Result<QueueInfo> info = engine_->GetQueue("q");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->counts, (Counts{1, 0, 0, 0, 0}));
  EXPECT_EQ(info->oldest_due_lateness, 5s);

  ClaimReply waiting;
  engine_->ClaimAsync("q", 1, 30s, 60s, waiting.Callback());
  engine_->Sync();
  EXPECT_FALSE(waiting.ready());
  Result<QueueInfo> resumed = engine_->PauseQueue("q", false);
  ASSERT_TRUE(resumed.ok());
  EXPECT_FALSE(resumed->paused);
  engine_->Sync();
  ASSERT_TRUE(waiting.ready());
  Result<std::vector<Lease>> got = waiting.Get();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, t.id);
  EXPECT_EQ(engine_->GetQueue("q")->oldest_due_lateness, Duration::zero());
}

TEST_F(EngineQueueTest, PauseIsDurableAcrossRestarts) {
  Add();
  ASSERT_TRUE(engine_->PauseQueue("q", true).ok());
  ASSERT_TRUE(engine_->PauseQueue("idle", true).ok());  // creates the queue
  Reopen();
  EXPECT_TRUE(engine_->GetQueue("q")->paused);
  Result<QueueInfo> idle = engine_->GetQueue("idle");
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->paused);
  EXPECT_EQ(idle->counts, (Counts{}));
  EXPECT_TRUE(engine_->Claim("q", 1, 30s)->empty());

  ASSERT_TRUE(engine_->PauseQueue("q", false).ok());
  Reopen();
  EXPECT_FALSE(engine_->GetQueue("q")->paused);
  EXPECT_EQ(engine_->Claim("q", 1, 30s)->size(), 1u);
}

TEST_F(EngineQueueTest, PoolsAreHeldToTheQueuesConcurrency) {
  Configure("q", {.concurrency = 1});
  Add();
  Add();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> batches;
  // One worker claiming two at a time: the limit lets it have one.
  ASSERT_TRUE(engine_
                  ->RegisterBatchHandler("q", {.concurrency = 1, .batch_size = 2},
                                         [&](std::span<const Lease> leases) {
                                           std::lock_guard lock(mu);
                                           batches.push_back(leases.size());
                                           cv.notify_all();
                                           return std::vector<Status>(leases.size());
                                         })
                  .ok());
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] {
      size_t n = 0;
      for (size_t b : batches) n += b;
      return n >= 2;
    });
    EXPECT_EQ(batches, (std::vector<size_t>{1, 1}));
  }
  engine_.reset();  // joins the pool before `batches` goes
}

// --- rate limits --------------------------------------------------------------------------

TEST_F(EngineQueueTest, ARateLimitHandsOutAtMostCountPerSlidingPeriod) {
  Configure("q", {.rate_limit = RateLimit{2, 10s}});
  for (int i = 0; i < 5; ++i) Add();
  EXPECT_EQ(engine_->Claim("q", 10, 30s)->size(), 2u);
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());  // over the limit: they wait
  EXPECT_EQ(CountsOf("q"), (Counts{3, 2, 0, 0, 0}));   // not failed, not re-queued
  clock_.Advance(4s);
  EXPECT_EQ(engine_->Claim("q", 10, 30s)->size(), 0u);
  clock_.Advance(6s);  // the first two leave the period
  EXPECT_EQ(engine_->Claim("q", 1, 30s)->size(), 1u);
  clock_.Advance(1s);
  EXPECT_EQ(engine_->Claim("q", 10, 30s)->size(), 1u);  // sliding: one left in this period
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());
  clock_.Advance(9s);
  EXPECT_EQ(engine_->Claim("q", 10, 30s)->size(), 1u);  // the last one
}

TEST_F(EngineQueueTest, AWaitingClaimIsServedWhenTheRateLimitFrees) {
  Configure("q", {.rate_limit = RateLimit{1, 5s}});
  Add();
  Add();
  ASSERT_EQ(engine_->Claim("q", 1, 30s)->size(), 1u);
  ClaimReply waiting;
  engine_->ClaimAsync("q", 1, 30s, 1h, waiting.Callback());
  engine_->Sync();
  EXPECT_FALSE(waiting.ready());
  clock_.Advance(4s);
  engine_->Sync();
  EXPECT_FALSE(waiting.ready());
  clock_.Advance(1s);  // the loop wakes by itself at the right time
  Result<std::vector<Lease>> got = waiting.Get();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u);
}

TEST_F(EngineQueueTest, ARateLimitIsDurableAndWorksWithConcurrency) {
  Configure("q", {.concurrency = 1, .rate_limit = RateLimit{3, 1min}});
  Reopen();
  Result<QueueInfo> info = engine_->GetQueue("q");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->settings.rate_limit, (RateLimit{3, 1min}));
  for (int i = 0; i < 4; ++i) Add();
  auto first = engine_->Claim("q", 10, 30s);
  ASSERT_EQ(first->size(), 1u);  // concurrency 1
  ASSERT_TRUE(engine_->Ack(first->front().id, first->front().token).ok());
  auto second = engine_->Claim("q", 10, 30s);
  ASSERT_EQ(second->size(), 1u);
  ASSERT_TRUE(engine_->Ack(second->front().id, second->front().token).ok());
  auto third = engine_->Claim("q", 10, 30s);
  ASSERT_EQ(third->size(), 1u);
  ASSERT_TRUE(engine_->Ack(third->front().id, third->front().token).ok());
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());  // the rate limit, now
}

// --- settings ---------------------------------------------------------------------------

TEST_F(EngineQueueTest, ConfigureMergesPersistsAndLists) {
  EXPECT_EQ(engine_->GetQueue("q").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(engine_->ListQueues()->empty());

  Configure("q", {.concurrency = 3, .retention = 1h});
  Result<QueueInfo> info = engine_->ConfigureQueue("q", {.max_attempts = 5});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->name, "q");
  EXPECT_EQ(info->settings.concurrency, 3);
  EXPECT_EQ(info->settings.max_attempts, 5);
  EXPECT_EQ(info->settings.retention, 1h);
  EXPECT_FALSE(info->settings.backoff.has_value());
  AddTo("b");

  Reopen();
  Result<std::vector<QueueInfo>> all = engine_->ListQueues();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "b");
  EXPECT_EQ((*all)[0].counts, (Counts{1, 0, 0, 0, 0}));
  EXPECT_EQ((*all)[1].name, "q");
  EXPECT_EQ((*all)[1].settings.concurrency, 3);
  EXPECT_EQ((*all)[1].settings.max_attempts, 5);
  EXPECT_EQ((*all)[1].settings.retention, 1h);
}

TEST_F(EngineQueueTest, ResetPutsSettingsBackToTheirDefaultsDurably) {
  Configure("q", {.concurrency = 3,
                  .max_attempts = 5,
                  .rate_limit = RateLimit{10, 1s},
                  .max_pending_per_key = 100});
  Result<QueueInfo> info = engine_->ConfigureQueue(
      "q", {.max_in_flight_per_key = 2},
      {QueueSetting::kRateLimit, QueueSetting::kPendingPerKey, QueueSetting::kConcurrency});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->settings.rate_limit.has_value());
  EXPECT_FALSE(info->settings.max_pending_per_key.has_value());
  EXPECT_FALSE(info->settings.concurrency.has_value());
  EXPECT_EQ(info->settings.max_attempts, 5);  // not named: kept
  EXPECT_EQ(info->settings.max_in_flight_per_key, 2);
  Reopen();
  Result<QueueInfo> again = engine_->GetQueue("q");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->settings.rate_limit.has_value());
  EXPECT_FALSE(again->settings.max_pending_per_key.has_value());
  EXPECT_EQ(again->settings.max_attempts, 5);
  // A field both given and reset is refused, naming it, and changes nothing.
  Result<QueueInfo> both =
      engine_->ConfigureQueue("q", {.max_attempts = 7}, {QueueSetting::kMaxAttempts});
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(both.status().field(), "max_attempts");
  EXPECT_EQ(engine_->GetQueue("q")->settings.max_attempts, 5);
}

TEST_F(EngineQueueTest, QueueDefaultsApplyAtEnqueue) {
  const Task before = Add();
  const Backoff week{24h * 7, 24h * 7};
  Configure("q", {.max_attempts = 3, .backoff = week});
  const Task t = Add();
  EXPECT_EQ(t.max_attempts, 3);
  EXPECT_EQ(before.max_attempts, 25);  // settings apply to tasks enqueued afterwards
  Result<Task> own = engine_->Enqueue({.queue = "q", .max_attempts = 7});
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->max_attempts, 7);
  EXPECT_EQ(AddTo("other").max_attempts, 25);

  // The queue's backoff: a retry after the first failure waits up to a week,
  // where the engine's default waits at most a second.
  auto leases = engine_->Claim("q", 3, 30s);
  ASSERT_EQ(leases->size(), 3u);
  for (const Lease& l : *leases) ASSERT_TRUE(engine_->Fail(l.id, l.token, "no").ok());
  const Timestamp now = clock_.Now();
  EXPECT_LE(engine_->Get(before.id)->run_at, now + 1s);
  EXPECT_GT(engine_->Get(t.id)->run_at, now + 1s);
  EXPECT_GT(engine_->Get(own->id)->run_at, now + 1s);
}

TEST_F(EngineQueueTest, PerQueueRetentionOverridesTheEngines) {
  Configure("short", {.retention = 10s});
  const Task x = AddTo("short");
  const Task z = AddTo("short", "", 1h);
  const Task y = AddTo("q");
  auto s = engine_->Claim("short", 1, 30s);
  ASSERT_TRUE(engine_->Ack(x.id, s->front().token).ok());
  auto q = engine_->Claim("q", 1, 30s);
  ASSERT_TRUE(engine_->Ack(y.id, q->front().token).ok());
  ASSERT_TRUE(engine_->Cancel(z.id).ok());
  EXPECT_EQ(CountsOf("short"), (Counts{0, 0, 1, 1, 0}));

  clock_.Advance(11s);
  engine_->Sync();
  EXPECT_EQ(engine_->Get(x.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Get(z.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(StateOf(y.id), TaskState::kSucceeded);  // the engine's 24 h
  EXPECT_EQ(CountsOf("short"), (Counts{}));
  EXPECT_EQ(CountsOf("q"), (Counts{0, 0, 1, 0, 0}));
}

TEST_F(EngineQueueTest, BadSettingsAreRejectedByField) {
  struct Case {
    QueueSettings settings;
    const char* field;
  };
  const Case cases[] = {
      {{.concurrency = 0}, "concurrency"},
      {{.concurrency = 100'001}, "concurrency"},
      {{.max_attempts = 0}, "max_attempts"},
      {{.max_attempts = 1001}, "max_attempts"},
      {{.backoff = Backoff{999us, 1s}}, "backoff.base_ms"},
      {{.backoff = Backoff{2s, 1s}}, "backoff.cap_ms"},
      {{.backoff = Backoff{1s, 24h * 7 + 1us}}, "backoff.cap_ms"},
      {{.retention = -1us}, "retention_ms"},
      {{.retention = 24h * 3650 + 1us}, "retention_ms"},
      {{.rate_limit = RateLimit{0, 1s}}, "rate_limit.count"},
      {{.rate_limit = RateLimit{1'000'001, 1s}}, "rate_limit.count"},
      {{.rate_limit = RateLimit{1, 999us}}, "rate_limit.period_ms"},
      {{.rate_limit = RateLimit{1, 24h + 1us}}, "rate_limit.period_ms"},
  };
  for (const Case& c : cases) {
    Result<QueueInfo> r = engine_->ConfigureQueue("q", c.settings);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field) << r.status().ToString();
  }
  EXPECT_EQ(engine_->ConfigureQueue("bad queue", {}).status().field(), "queue");
  EXPECT_EQ(engine_->PauseQueue("", true).status().field(), "queue");
  EXPECT_EQ(engine_->GetQueue("a/b").status().field(), "queue");
  EXPECT_TRUE(engine_->ListQueues()->empty());  // nothing was created

  // The limits themselves are fine.
  EXPECT_TRUE(engine_
                  ->ConfigureQueue("q", {.concurrency = 100'000,
                                         .max_attempts = 1000,
                                         .backoff = Backoff{1ms, 24h * 7},
                                         .retention = 24h * 3650})
                  .ok());
  EXPECT_TRUE(engine_->ConfigureQueue("q", {.concurrency = 1, .retention = 0s}).ok());
}

// --- webhook targets ---------------------------------------------------------------

TEST_F(EngineQueueTest, AQueueThatGetsATargetIsMarkedForWebhooksDurably) {
  Add();
  EXPECT_FALSE(engine_->GetQueue("q")->webhooks);
  // A batch that fails half-way marks nothing.
  Add(Duration::zero(), "taken");
  EXPECT_FALSE(engine_
                   ->EnqueueBatch({{.queue = "q", .target = WebhookTarget{.url = "http://h"}},
                                   {.queue = "q", .id = "taken"}})
                   .ok());
  EXPECT_FALSE(engine_->GetQueue("q")->webhooks);
  ASSERT_TRUE(
      engine_->Enqueue({.queue = "hooks", .target = WebhookTarget{.url = "http://h"}}).ok());
  EXPECT_TRUE(engine_->GetQueue("hooks")->webhooks);
  engine_.reset();
  Open();
  EXPECT_TRUE(engine_->GetQueue("hooks")->webhooks);
  EXPECT_FALSE(engine_->GetQueue("q")->webhooks);
}

TEST_F(EngineQueueTest, TargetsRoundTripThroughEnqueueGetListAndClaim) {
  const WebhookTarget target{.url = "https://hooks.example.com/a?b=c",
                             .method = "PUT",
                             .headers = {{"Authorization", "Bearer x"}, {"X-Trace", "1\t2 é"}},
                             .timeout = 1500ms};
  Result<Task> t = engine_->Enqueue({.queue = "q", .id = "hook", .target = target});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->target, target);
  const Task plain = Add();
  EXPECT_FALSE(plain.target.has_value());
  // Defaults survive being left out of the stored form.
  const WebhookTarget minimal{.url = "http://h"};
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "min", .target = minimal}).ok());

  EXPECT_EQ(engine_->Get("hook")->target, target);
  EXPECT_EQ(engine_->Get("min")->target, minimal);
  EXPECT_FALSE(engine_->Get(plain.id)->target.has_value());
  Result<TaskPage> page = engine_->List({});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->tasks.size(), 3u);
  EXPECT_EQ(page->tasks[0].target, target);
  EXPECT_FALSE(page->tasks[1].target.has_value());

  auto leases = engine_->Claim("q", 3, 30s);
  ASSERT_EQ(leases->size(), 3u);
  EXPECT_EQ((*leases)[0].target, target);
  EXPECT_FALSE((*leases)[1].target.has_value());
  EXPECT_EQ((*leases)[2].target, minimal);

  // Replacing a scheduled task replaces its target too.
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "r", .target = target}).ok());
  ASSERT_TRUE(
      engine_->Enqueue({.queue = "q", .id = "r", .on_conflict = OnConflict::kReplace}).ok());
  EXPECT_FALSE(engine_->Get("r")->target.has_value());

  Reopen();
  EXPECT_EQ(engine_->Get("hook")->target, target);
}

TEST_F(EngineQueueTest, BadTargetsAreRejectedByField) {
  TaskSpec spec{.queue = "q", .target = WebhookTarget{.url = "ftp://example.com"}};
  Status s = engine_->Enqueue(spec).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "target.url");

  TaskSpec bad_header{.queue = "q",
                      .target = WebhookTarget{.url = "https://example.com",
                                              .headers = {{"Ok", "1"}, {"Bad Name", "2"}}}};
  s = engine_->EnqueueBatch({{.queue = "q"}, bad_header}).status();
  EXPECT_EQ(s.field(), "tasks[1].target.headers[1].name");
  bad_header.target->headers[1] = {"X-Evil", "a\r\nInjected: 1"};
  s = engine_->Enqueue(bad_header).status();
  EXPECT_EQ(s.field(), "target.headers[1].value");
  EXPECT_TRUE(engine_->List({})->tasks.empty());
}

// --- statistics ----------------------------------------------------------------------

TEST_F(EngineQueueTest, StatsCountAndMeasure) {
  EngineStats s = engine_->Stats();
  EXPECT_EQ(s.enqueued + s.acked + s.failed + s.dead + s.commits, 0u);
  ASSERT_EQ(s.commit_ops.bounds.size(), 13u);
  EXPECT_EQ(s.commit_ops.bounds.front(), 1);
  EXPECT_EQ(s.commit_ops.bounds.back(), 4096);
  ASSERT_EQ(s.commit_ops.counts.size(), 14u);
  ASSERT_EQ(s.dispatch_lateness_s.bounds.size(), 12u);
  EXPECT_EQ(s.dispatch_lateness_s.bounds[3], 0.005);
  ASSERT_EQ(s.dispatch_lateness_s.counts.size(), 13u);

  int ops = 0;  // every call below is one operation of the loop
  ASSERT_TRUE(engine_->EnqueueBatch({{.queue = "q", .id = "a"}, {.queue = "q", .id = "b"}}).ok());
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "c", .max_attempts = 1}).ok());
  ASSERT_TRUE(engine_->Enqueue({.queue = "q", .id = "a", .on_conflict = OnConflict::kIgnore}).ok());
  ops += 3;
  clock_.Advance(3ms);
  auto leases = engine_->Claim("q", 3, 30s);  // each 3 ms late
  ASSERT_EQ(leases->size(), 3u);
  ASSERT_TRUE(engine_->Ack("a", (*leases)[0].token).ok());
  ASSERT_TRUE(engine_->Fail("b", (*leases)[1].token, "again", 0s).ok());
  ASSERT_TRUE(engine_->Fail("c", (*leases)[2].token, "dead").ok());
  ops += 4;
  // b is claimed again at once (0 late), and its lease lapses: a failed
  // attempt too.
  auto again = engine_->Claim("q", 1, 5s);
  ASSERT_EQ(again->size(), 1u);
  ops += 1;
  clock_.Advance(5s);
  engine_->Sync();
  ops += 1;

  s = engine_->Stats();
  EXPECT_EQ(s.enqueued, 3u);
  EXPECT_EQ(s.acked, 1u);
  EXPECT_EQ(s.failed, 3u);
  EXPECT_EQ(s.dead, 1u);
  EXPECT_GE(s.commits, static_cast<uint64_t>(ops));

  const EngineStats::Histogram& late = s.dispatch_lateness_s;
  EXPECT_EQ(late.total, 4u);
  EXPECT_EQ(late.counts[0], 1u);  // <= 0.5 ms: b's second claim
  EXPECT_EQ(late.counts[2], 1u);  // <= 2 ms
  EXPECT_EQ(late.counts[3], 4u);  // <= 5 ms: the three 3 ms late ones too
  EXPECT_EQ(late.counts.back(), 4u);
  EXPECT_NEAR(late.sum, 0.009, 1e-9);

  const EngineStats::Histogram& per_commit = s.commit_ops;
  EXPECT_EQ(per_commit.total, s.commits);
  EXPECT_EQ(per_commit.counts.back(), s.commits);
  EXPECT_EQ(per_commit.counts[0], s.commits);  // one caller: never more than one op per commit
  EXPECT_EQ(per_commit.sum, ops);
  for (size_t i = 1; i < per_commit.counts.size(); ++i) {
    EXPECT_LE(per_commit.counts[i - 1], per_commit.counts[i]);
  }
}

TEST_F(EngineQueueTest, StatsCountOperationsSharingACommit) {
  // Three claims wait on an empty queue; one enqueue serves them all in the
  // same commit.
  ClaimReply w1, w2, w3;
  engine_->ClaimAsync("q", 1, 30s, 60s, w1.Callback());
  engine_->ClaimAsync("q", 1, 30s, 60s, w2.Callback());
  engine_->ClaimAsync("q", 1, 30s, 60s, w3.Callback());
  engine_->Sync();
  const EngineStats before = engine_->Stats();
  ASSERT_TRUE(engine_->EnqueueBatch({{.queue = "q"}, {.queue = "q"}, {.queue = "q"}}).ok());
  engine_->Sync();
  ASSERT_TRUE(w1.ready() && w2.ready() && w3.ready());
  const EngineStats after = engine_->Stats();
  // The enqueue's commit answered 4 operations (<= 4), the Sync's one.
  std::vector<uint64_t> added;
  for (size_t i = 0; i < after.commit_ops.counts.size(); ++i) {
    added.push_back(after.commit_ops.counts[i] - before.commit_ops.counts[i]);
  }
  EXPECT_EQ(added[0], 1u);  // <= 1
  EXPECT_EQ(added[1], 1u);  // <= 2
  EXPECT_EQ(added[2], 2u);  // <= 4
  EXPECT_EQ(after.commit_ops.sum - before.commit_ops.sum, 5);
}

// --- a database of schema version 1 ---------------------------------------------------

// Written with raw SQL: SQLite only.
using EngineQueueSqliteTest = test::SqliteOnly<EngineQueueTest>;

TEST_F(EngineQueueSqliteTest, ASchema1DatabaseOpensWithItsCounts) {
  engine_.reset();
  EngineOptions o = Options();
  o.store = dir_.File("v1.db");
  const int64_t now = clock_.Now().time_since_epoch().count();
  const int64_t seq = (now / 1000) << 16;  // a plausible generated seq
  std::string sql = std::string(test::kSchemaV1) +
                    "INSERT INTO queues(qid, name) VALUES(1, 'mail');"
                    "INSERT INTO tasks(seq, qid, state, due, prio, attempt, max_attempts, payload,"
                    " name, token) VALUES" +
                    "(" + std::to_string(seq + 1) + ", 1, 0, " + std::to_string(now - 1000) +
                    ", 0, 0, 25, '{}', 'x', NULL)," + "(" + std::to_string(seq + 2) + ", 1, 0, " +
                    std::to_string(now) + ", 0, 0, 25, '{}', 'y', NULL)," + "(" +
                    std::to_string(seq + 3) + ", 1, 1, " + std::to_string(now + 10'000'000) +
                    ", 0, 1, 25, '{}', 'z', 41)," + "(" + std::to_string(seq + 4) +
                    ", 1, 4, NULL, 0, 25, 25, '{}', 'w', NULL);";
  test::ExecRaw(o.store, sql);

  Open(o);
  EXPECT_EQ(CountsOf("mail"), (Counts{2, 1, 0, 0, 1}));
  // The migrated counts are the engine's: they move with the tasks.
  auto leases = engine_->Claim("mail", 10, 30s);
  ASSERT_EQ(leases->size(), 2u);
  EXPECT_GT(leases->front().token, 41u);
  EXPECT_EQ(CountsOf("mail"), (Counts{0, 3, 0, 0, 1}));
  clock_.Advance(10s);  // z's lease lapses
  engine_->Sync();
  EXPECT_EQ(CountsOf("mail"), (Counts{1, 2, 0, 0, 1}));
  EXPECT_FALSE(engine_->Get("x")->target.has_value());
}

}  // namespace
}  // namespace chronoq
