// CopyStore and chronoq-admin copy on real stores: a store built through the
// engine is copied SQLite -> PostgreSQL and PostgreSQL -> SQLite, then an
// engine on the copy (on the same fake clock) must behave as one on the
// original would have: the same tasks in the same states, the running lease
// lapsing at its time, the lock held under its token, the schedule's next
// occurrence fired once, and fencing tokens that only grow.
#include "admin/copy.h"

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "admin/admin.h"
#include "admin/progress.h"
#include "engine/store_url.h"
#include "support/eventually.h"
#include "support/fake_clock.h"
#include "support/faulty_store.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"
#include "support/temp_dir.h"

namespace chronoq::admin {
namespace {

using namespace std::chrono_literals;
using test::IsOk;
using test::StatusIs;
using ::testing::HasSubstr;

const std::vector<std::string> kIds = {"sched", "run", "done", "gone", "dead", "k1", "k2"};

// What the test remembers of the source to check the copy against.
struct Expected {
  std::vector<Task> tasks;  // kIds, in order
  uint64_t run_token = 0;
  Timestamp run_lease_until;
  uint64_t lock_token = 0;
  uint64_t max_token = 0;
  Schedule schedule;
};

class CopyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()); }

  std::string SqliteUrl() const { return "sqlite:" + dir_.File("data/chronoq.db"); }
  std::string PgUrl() const { return db_.Url(); }

  Result<std::unique_ptr<Engine>> OpenEngine(const std::string& url) {
    EngineOptions o;
    o.store = url;
    o.clock = &clock_;
    o.random_seed = 42;
    return Engine::Open(o);
  }

  // Fills the store at `url` through the engine: a task in every state, keyed
  // tasks whose key has a saved cursor, queue settings and a paused queue, a
  // schedule and a held lock.
  void Build(const std::string& url, Expected* want) {
    Result<std::unique_ptr<Engine>> opened = OpenEngine(url);
    ASSERT_THAT(opened, IsOk());
    Engine& e = **opened;
    QueueSettings settings;
    settings.concurrency = 7;
    settings.backoff = Backoff{1s, 10min};
    settings.max_pending_per_key = 50;
    settings.final_statuses = std::vector<int>{400, 422};
    ASSERT_THAT(e.ConfigureQueue("q", settings), IsOk());
    ASSERT_THAT(e.PauseQueue("held", true), IsOk());
    auto add = [&](const std::string& id, Duration delay, int max_attempts = 0,
                   const std::string& key = "") {
      TaskSpec spec;
      spec.queue = "q";
      spec.id = id;
      spec.delay = delay;
      spec.max_attempts = max_attempts;
      spec.key = key;
      spec.payload = R"({"id":")" + id + R"(","tab":"\t"})";
      ASSERT_THAT(e.Enqueue(spec), IsOk());
    };
    auto claim_one = [&](const std::string& id) -> Lease {
      Result<ClaimAnswer> got =
          e.Claim({.queue = "q", .max = 1, .lease = 30s, .worker = "copier-test:" + id});
      EXPECT_THAT(got, IsOk());
      if (!got.ok() || got->leases.size() != 1) {
        ADD_FAILURE() << "no claim for " << id;
        return {};
      }
      const Lease& lease = got->leases.front();
      EXPECT_EQ(lease.id, id);
      want->max_token = std::max(want->max_token, lease.token);
      return lease;
    };
    add("done", 0s);
    const Lease done = claim_one("done");
    ASSERT_THAT(e.Ack("done", done.token), IsOk());
    add("dead", 0s, /*max_attempts=*/1);
    const Lease dead = claim_one("dead");
    ASSERT_THAT(e.Fail("dead", dead.token, "smtp: 451\nbad \\ news"), IsOk());
    // k1 runs and finishes: its key's cursor moves past it. k2 waits a week.
    add("k1", 0s, 0, "customer:7");
    add("k2", 7 * 24h, 0, "customer:7");
    const Lease k1 = claim_one("k1");
    ASSERT_THAT(e.Ack("k1", k1.token), IsOk());
    add("run", 0s);
    const Lease run = claim_one("run");
    want->run_token = run.token;
    want->run_lease_until = run.lease_until;
    add("sched", 1h);
    add("gone", 2h);
    ASSERT_THAT(e.Cancel("gone"), IsOk());
    ScheduleSpec schedule;
    schedule.name = "every-10-min";
    schedule.queue = "ticks";
    schedule.every = 10min;
    ASSERT_THAT(e.CreateSchedule(schedule), IsOk());
    LockRequest request;
    request.lease = 1h;
    request.owner = "worker-3";
    Result<LockGrant> grant = e.AcquireLock("resource", request);
    ASSERT_THAT(grant, IsOk());
    want->lock_token = grant->token;
    want->max_token = std::max(want->max_token, grant->token);
    for (const std::string& id : kIds) {
      Result<Task> t = e.Get(id);
      ASSERT_THAT(t, IsOk());
      want->tasks.push_back(*t);
    }
    Result<Schedule> s = e.GetSchedule("every-10-min");
    ASSERT_THAT(s, IsOk());
    ASSERT_TRUE(s->next_task_id.has_value());
    want->schedule = *s;
  }

  // Copies `from` into `to` with CopyStore.
  Result<CopyReport> Copy(const std::string& from, const std::string& to, int batch = 3) {
    CHRONOQ_ASSIGN_OR_RETURN(std::unique_ptr<Store> source, OpenStoreUrl(from));
    CHRONOQ_ASSIGN_OR_RETURN(std::unique_ptr<Store> target, OpenStoreUrl(to));
    Progress progress(progress_, /*terminal=*/false, [this] { return steady_; });
    return CopyStore(*source, *target, {.batch_rows = batch}, progress);
  }

  // An engine on the copy behaves as one on the original would have.
  void ExpectSameBehaviour(const std::string& url, const Expected& want) {
    Result<std::unique_ptr<Engine>> opened = OpenEngine(url);
    ASSERT_THAT(opened, IsOk());
    Engine& e = **opened;
    for (const Task& w : want.tasks) {
      SCOPED_TRACE(w.id);
      Result<Task> got = e.Get(w.id);
      ASSERT_THAT(got, IsOk());
      EXPECT_EQ(got->state, w.state);
      EXPECT_EQ(got->queue, w.queue);
      EXPECT_EQ(got->payload, w.payload);
      EXPECT_EQ(got->run_at, w.run_at);
      EXPECT_EQ(got->attempt, w.attempt);
      EXPECT_EQ(got->max_attempts, w.max_attempts);
      EXPECT_EQ(got->last_error, w.last_error);
      EXPECT_EQ(got->lease_until, w.lease_until);
      EXPECT_EQ(got->created_at, w.created_at);
      EXPECT_EQ(got->updated_at, w.updated_at);
      EXPECT_EQ(got->key, w.key);
      EXPECT_EQ(got->worker, w.worker);
      EXPECT_EQ(got->attempts, w.attempts);
      // Every claimed task has one to carry; every finished attempt a record.
      if (w.attempt > 0) {
        EXPECT_EQ(w.worker, "copier-test:" + w.id);
      }
      if (w.state == TaskState::kSucceeded || w.state == TaskState::kDead) {
        EXPECT_EQ(w.attempts.size(), 1u);
      }
    }
    Result<QueueInfo> q = e.GetQueue("q");
    ASSERT_THAT(q, IsOk());
    EXPECT_EQ(q->settings.concurrency, 7);
    EXPECT_EQ(q->settings.max_pending_per_key, 50);
    EXPECT_EQ(q->settings.final_statuses, (std::vector<int>{400, 422}));
    Result<QueueInfo> held = e.GetQueue("held");
    ASSERT_THAT(held, IsOk());
    EXPECT_TRUE(held->paused);

    // The lock is held, under the same token.
    Result<LockInfo> lock = e.GetLock("resource");
    ASSERT_THAT(lock, IsOk());
    EXPECT_TRUE(lock->held);
    EXPECT_EQ(lock->owner, "worker-3");
    EXPECT_THAT(e.ExtendLock("resource", want.lock_token, 1h), IsOk());

    // The schedule: same next occurrence, fired once when due.
    Result<Schedule> s = e.GetSchedule("every-10-min");
    ASSERT_THAT(s, IsOk());
    EXPECT_EQ(s->next_task_id, want.schedule.next_task_id);
    EXPECT_EQ(s->next_run, want.schedule.next_run);

    // The running task's lease still lapses at its time: not a moment before.
    ASSERT_EQ(e.Get("run")->state, TaskState::kRunning);
    clock_.Set(want.run_lease_until - 1ms);
    EXPECT_EQ(e.Get("run")->state, TaskState::kRunning);
    clock_.Set(std::max(want.run_lease_until, *want.schedule.next_run) + 1ms);
    EXPECT_TRUE(test::Eventually([&] { return e.Get("run")->state == TaskState::kScheduled; },
                                 "the copied lease to lapse"));
    Result<std::vector<Lease>> ticks = e.Claim("ticks", 10, 30s);
    ASSERT_THAT(ticks, IsOk());
    ASSERT_EQ(ticks->size(), 1u);
    EXPECT_EQ(ticks->front().id, *want.schedule.next_task_id);
    EXPECT_TRUE(e.Claim("ticks", 10, 30s)->empty());

    // Tokens only grow across the move.
    EXPECT_GT(ticks->front().token, want.max_token);
    Result<std::vector<Lease>> again = e.Claim("q", 1, 30s);
    ASSERT_THAT(again, IsOk());
    ASSERT_EQ(again->size(), 1u);
    EXPECT_EQ(again->front().id, "run");
    EXPECT_GT(again->front().token, want.max_token);
    EXPECT_THAT(e.Ack("run", want.run_token), StatusIs(StatusCode::kFailedPrecondition));
  }

  void CopyAndCheck(const std::string& from, const std::string& to) {
    Expected want;
    ASSERT_NO_FATAL_FAILURE(Build(from, &want));
    Result<CopyReport> report = Copy(from, to);
    ASSERT_THAT(report, IsOk());
    EXPECT_TRUE(report->verified());
    EXPECT_EQ(report->source, report->target);
    EXPECT_EQ(report->source.total_tasks(), 8);  // kIds and the schedule's occurrence
    EXPECT_EQ(report->source.tasks[static_cast<size_t>(TaskState::kRunning)], 1);
    EXPECT_EQ(report->source.tasks[static_cast<size_t>(TaskState::kDead)], 1);
    EXPECT_EQ(report->source.schedules, 1);
    EXPECT_EQ(report->source.locks, 1);
    EXPECT_EQ(report->source.key_cursors, 1);
    EXPECT_EQ(report->source_meta, report->target_meta);
    ExpectSameBehaviour(to, want);
  }

  test::TempDir dir_;
  test::PgTestDatabase db_;
  test::FakeClock clock_;
  std::ostringstream progress_;
  std::chrono::steady_clock::time_point steady_;  // the copy's progress clock
};

TEST_F(CopyTest, SqliteToPostgresBehavesAsTheSourceWould) { CopyAndCheck(SqliteUrl(), PgUrl()); }

TEST_F(CopyTest, PostgresToSqliteBehavesAsTheSourceWould) { CopyAndCheck(PgUrl(), SqliteUrl()); }

TEST_F(CopyTest, ANonEmptyTargetIsRefusedSayingWhatItHoldsAndIsLeftUnchanged) {
  Expected want;
  ASSERT_NO_FATAL_FAILURE(Build(SqliteUrl(), &want));
  {
    Result<std::unique_ptr<Engine>> target = OpenEngine(PgUrl());
    ASSERT_THAT(target, IsOk());
    TaskSpec spec;
    spec.queue = "other";
    spec.id = "mine";
    ASSERT_THAT((*target)->Enqueue(spec), IsOk());
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunAdmin({"copy", "--from", SqliteUrl(), "--to", PgUrl()}, {out, err}), kExitFailed);
  EXPECT_THAT(err.str(), HasSubstr("the target is not empty: it holds 1 task (1 scheduled), "
                                   "1 queue, 0 schedules"));
  EXPECT_THAT(err.str(), HasSubstr("nothing was written"));
  EXPECT_THAT(err.str(), HasSubstr("DROP SCHEMA \"chronoq\" CASCADE"));
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.tasks"), "1");
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.queues"), "1");
}

TEST_F(CopyTest, ASourceOpenInAnEngineIsRefused) {
  Expected want;
  ASSERT_NO_FATAL_FAILURE(Build(SqliteUrl(), &want));
  Result<std::unique_ptr<Engine>> running = OpenEngine(SqliteUrl());
  ASSERT_THAT(running, IsOk());
  std::ostringstream out, err;
  EXPECT_EQ(RunAdmin({"copy", "--from", SqliteUrl(), "--to", PgUrl()}, {out, err}), kExitFailed);
  EXPECT_THAT(err.str(), HasSubstr("--from " + SqliteUrl() + " is in use"));
  EXPECT_THAT(err.str(), HasSubstr("Stop chronoqd"));
}

TEST_F(CopyTest, ASourceOpenInAnEngineOnPostgresIsRefused) {
  Result<std::unique_ptr<Engine>> running = OpenEngine(PgUrl());
  ASSERT_THAT(running, IsOk());
  std::ostringstream out, err;
  EXPECT_EQ(RunAdmin({"copy", "--from", PgUrl(), "--to", SqliteUrl()}, {out, err}), kExitFailed);
  EXPECT_THAT(err.str(), HasSubstr("is in use"));
  EXPECT_THAT(err.str(), HasSubstr("advisory lock"));
}

TEST_F(CopyTest, AMissingSqliteSourceIsRefusedAndNotCreated) {
  std::ostringstream out, err;
  const std::string missing = dir_.File("typo.db");
  EXPECT_EQ(RunAdmin({"copy", "--from", missing, "--to", PgUrl()}, {out, err}), kExitFailed);
  EXPECT_THAT(err.str(), HasSubstr("--from: " + missing + " does not exist"));
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(CopyTest, AnEmptySourceIsRefused) {
  ASSERT_THAT(OpenEngine(SqliteUrl()), IsOk());  // creates the file, empty
  std::ostringstream out, err;
  EXPECT_EQ(RunAdmin({"copy", "--from", SqliteUrl(), "--to", PgUrl()}, {out, err}), kExitFailed);
  EXPECT_THAT(err.str(), HasSubstr("the source holds nothing to copy"));
}

TEST_F(CopyTest, BadUrlsNameTheirFlag) {
  std::ostringstream out, err;
  EXPECT_EQ(RunAdmin({"copy", "--from", "mysql://db/x", "--to", PgUrl()}, {out, err}), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--from"));
  EXPECT_THAT(err.str(), HasSubstr("unknown store scheme \"mysql\""));
  err.str("");
  EXPECT_EQ(
      RunAdmin({"copy", "--from", SqliteUrl(), "--to", "postgresql://h/db?schema=Bad"}, {out, err}),
      kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--to"));
  EXPECT_THAT(err.str(), HasSubstr("schema \"Bad\""));
  err.str("");
  EXPECT_EQ(
      RunAdmin({"copy", "--from", "sqlite:x.db?durability=maybe", "--to", PgUrl()}, {out, err}),
      kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--from"));
  err.str("");
  EXPECT_EQ(RunAdmin({"copy", "--from", SqliteUrl(), "--to", SqliteUrl()}, {out, err}), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--to"));
  err.str("");
  EXPECT_EQ(RunAdmin({"copy", "--from", SqliteUrl()}, {out, err}), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--to"));
}

// A failed batch: the error says how far the copy got, that the target holds
// part of it, and how to empty it for the next attempt.
TEST_F(CopyTest, AFailedBatchSaysTheTargetIsPartialAndHowToRetry) {
  Expected want;
  ASSERT_NO_FATAL_FAILURE(Build(SqliteUrl(), &want));
  Result<std::unique_ptr<Store>> source = OpenStoreUrl(SqliteUrl());
  ASSERT_THAT(source, IsOk());
  Result<std::unique_ptr<Store>> inner = OpenStoreUrl(PgUrl());
  ASSERT_THAT(inner, IsOk());
  test::FaultyStore target(std::move(*inner));
  // The first transaction (queues, locks, meta) commits; once the progress
  // shows it, the next commit fails.
  Progress* watched = nullptr;
  bool armed = false;
  Progress progress(progress_, /*terminal=*/true, [&] {
    if (!armed && watched != nullptr && watched->done() > 0) {
      armed = true;
      target.FailNextCommits(1);
    }
    return steady_;
  });
  watched = &progress;
  Result<CopyReport> report =
      CopyStore(**source, target, {.batch_rows = 2, .empty_target_hint = "drop it"}, progress);
  EXPECT_THAT(report, StatusIs(StatusCode::kUnavailable));
  const std::string message(report.status().message());
  EXPECT_THAT(message, HasSubstr("the copy stopped after 4 rows: injected commit failure"));
  EXPECT_THAT(message, HasSubstr("The target now holds part of the copy: do not start chronoqd"));
  EXPECT_THAT(message, HasSubstr("Empty it, then run the same command again (to empty it: "
                                 "drop it)"));
  Result<Store::RowCounts> left = target.CountRows();
  ASSERT_THAT(left, IsOk());
  EXPECT_EQ(left->queues, 3);
  EXPECT_EQ(left->schedules, 0);
}

TEST(ProgressTest, WritesALinePerTenthWhenNotATerminal) {
  std::ostringstream out;
  auto now = std::chrono::steady_clock::time_point();
  Progress p(out, /*terminal=*/false, [&] { return now; });
  p.Start(1000);
  for (int i = 0; i < 100; ++i) {
    now += 10ms;
    p.Advance(10);
  }
  p.Finish();
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10);
  EXPECT_THAT(text, HasSubstr("copied 10% 100/1,000 rows, 1,000 rows/s, ETA 0:01\n"));
  EXPECT_THAT(text, HasSubstr("copied 100% 1,000/1,000 rows, 1,000 rows/s, 0:01\n"));
}

TEST(ProgressTest, RedrawsOneLineOnATerminal) {
  std::ostringstream out;
  auto now = std::chrono::steady_clock::time_point();
  Progress p(out, /*terminal=*/true, [&] { return now; });
  p.Start(2'000'000);
  now += 1s;
  p.Advance(500'000);
  p.Advance(1);  // within 100 ms of the last drawing: not drawn
  p.Finish();
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  EXPECT_THAT(text, HasSubstr("\r[#######.......................] 25% 500,000/2,000,000 rows, "
                              "500,000 rows/s, ETA 0:03"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 3);
}

TEST(ProgressTest, FormatsNumbersAndTimes) {
  EXPECT_EQ(WithCommas(0), "0");
  EXPECT_EQ(WithCommas(999), "999");
  EXPECT_EQ(WithCommas(1234567), "1,234,567");
  EXPECT_EQ(Clock(7), "0:07");
  EXPECT_EQ(Clock(754), "12:34");
  EXPECT_EQ(Clock(3723), "1:02:03");
}

}  // namespace
}  // namespace chronoq::admin
