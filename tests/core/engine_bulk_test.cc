// Bulk jobs (chronoq/bulk.h) on the fake clock, on each store: the filter,
// the single-task state rules per task, the counts, chunking (a chunk of 3
// here, so that every job takes several), dry runs and validation.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/bulk.h"
#include "chronoq/engine.h"

#include "support/engine_fixture.h"
#include "support/eventually.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using Skips = std::map<std::string, int64_t>;

class EngineBulkTest : public test::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    EngineOptions o = Options();
    o.bulk_chunk = 3;
    engine_.reset();
    Open(o);
  }

  Task AddTo(const std::string& queue, const std::string& id, Duration delay = 1h,
             const std::string& key = "") {
    TaskSpec spec;
    spec.queue = queue;
    spec.id = id;
    spec.delay = delay;
    spec.key = key;
    spec.max_attempts = 1;
    Result<Task> t = engine_->Enqueue(spec);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : Task{};
  }
  // Claims the due task `id` of `queue` (the only one due there).
  uint64_t Start(const std::string& queue) {
    Result<std::vector<Lease>> l = engine_->Claim(queue, 1, 30s);
    EXPECT_TRUE(l.ok() && l->size() == 1);
    return l.ok() && l->size() == 1 ? l->front().token : 0;
  }
  // Runs a job to its end and returns it as it ended.
  BulkJob Run(const BulkRequest& request) {
    Result<BulkJob> started = engine_->StartBulk(request);
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (!started.ok()) return {};
    EXPECT_FALSE(started->id.empty());
    BulkJob job;
    EXPECT_TRUE(test::Eventually(
        [&] {
          Result<BulkJob> now = engine_->GetBulk(started->id);
          if (!now.ok()) return false;
          job = *now;
          return job.state != BulkJobState::kRunning;
        },
        "the bulk job to end"));
    return job;
  }
};

TEST_F(EngineBulkTest, CancelAppliesTheSingleTaskRuleToEachMatchingTask) {
  for (int i = 0; i < 8; ++i) AddTo("q", "t" + std::to_string(i));
  AddTo("q", "due-now", 0s);
  const uint64_t token = Start("q");  // due-now is running
  AddTo("other", "o1");
  BulkRequest r;
  r.filter.queue = "q";
  r.action = BulkAction::kCancel;
  const BulkJob job = Run(r);
  EXPECT_EQ(job.state, BulkJobState::kDone) << job.error;
  EXPECT_EQ(job.matched, 9);
  EXPECT_EQ(job.applied, 8);
  EXPECT_EQ(job.skipped, (Skips{{"running", 1}}));
  EXPECT_TRUE(job.finished.has_value());
  EXPECT_EQ(job.cursor, "due-now");  // the last task of the walk, in creation order
  for (int i = 0; i < 8; ++i) EXPECT_EQ(StateOf("t" + std::to_string(i)), TaskState::kCancelled);
  // The running task is left to its worker, as Cancel leaves it.
  EXPECT_EQ(StateOf("due-now"), TaskState::kRunning);
  EXPECT_TRUE(engine_->Ack("due-now", token).ok());
  EXPECT_EQ(StateOf("o1"), TaskState::kScheduled);
  Result<QueueInfo> q = engine_->GetQueue("q");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->counts[static_cast<size_t>(TaskState::kCancelled)], 8);
  EXPECT_EQ(q->counts[static_cast<size_t>(TaskState::kScheduled)], 0);
}

TEST_F(EngineBulkTest, DryRunCountsWhatTheJobWouldDoAndChangesNothing) {
  for (int i = 0; i < 5; ++i) AddTo("q", "t" + std::to_string(i));
  AddTo("q", "due-now", 0s);
  Start("q");
  BulkRequest r;
  r.filter.queue = "q";
  r.action = BulkAction::kCancel;
  r.dry_run = true;
  Result<BulkJob> dry = engine_->StartBulk(r);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_TRUE(dry->id.empty());
  EXPECT_EQ(dry->state, BulkJobState::kDone);
  EXPECT_EQ(dry->matched, 6);
  EXPECT_EQ(dry->applied, 5);
  EXPECT_EQ(dry->skipped, (Skips{{"running", 1}}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(StateOf("t" + std::to_string(i)), TaskState::kScheduled);
  EXPECT_TRUE(engine_->ListBulk().empty());  // a dry run is no job
}

TEST_F(EngineBulkTest, RescheduleByShiftMovesEachTaskOnce) {
  // Shifted later, a task moves ahead of the cursor by due; the walk is by
  // creation, so each one moves exactly once.
  std::vector<Task> tasks;
  for (int i = 0; i < 10; ++i) tasks.push_back(AddTo("q", "s" + std::to_string(i), 1h * (i + 1)));
  BulkRequest r;
  r.filter.queue = "q";
  r.filter.state = TaskState::kScheduled;
  r.action = BulkAction::kReschedule;
  r.shift = 24h;
  const BulkJob job = Run(r);
  EXPECT_EQ(job.state, BulkJobState::kDone) << job.error;
  EXPECT_EQ(job.applied, 10);
  for (const Task& t : tasks) {
    Result<Task> now = engine_->Get(t.id);
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->run_at, t.run_at + 24h) << t.id;
  }
  // The moved tasks fire at their new time, not the old one.
  clock_.Advance(1h + 1s);
  engine_->Sync();
  Result<std::vector<Lease>> none = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  clock_.Advance(24h);
  engine_->Sync();
  Result<std::vector<Lease>> one = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().id, "s0");
}

TEST_F(EngineBulkTest, RescheduleToAnInstantAndAShiftPastTheLimitIsSkipped) {
  AddTo("q", "a", 1h);
  AddTo("q", "b", 2h);
  BulkRequest r;
  r.filter.id_prefix = "a";
  r.action = BulkAction::kReschedule;
  r.run_at = clock_.Now() + 5h;
  EXPECT_EQ(Run(r).applied, 1);
  EXPECT_EQ(engine_->Get("a")->run_at, clock_.Now() + 5h);
  EXPECT_EQ(engine_->Get("b")->run_at, clock_.Now() + 2h);
  // Back by 100 years lands before 1970 for every task: skipped, unchanged.
  r = {};
  r.filter.queue = "q";
  r.action = BulkAction::kReschedule;
  r.shift = -kMaxDelay;
  const BulkJob job = Run(r);
  EXPECT_EQ(job.applied, 0);
  EXPECT_EQ(job.skipped, (Skips{{"run_at_out_of_range", 2}}));
  EXPECT_EQ(engine_->Get("b")->run_at, clock_.Now() + 2h);
}

TEST_F(EngineBulkTest, RetryTakesDeadTasksOnly) {
  for (int i = 0; i < 4; ++i) {
    AddTo("q", "d" + std::to_string(i), 0s);
    const uint64_t token = Start("q");
    ASSERT_TRUE(engine_->Fail("d" + std::to_string(i), token, "boom").ok());
  }
  AddTo("q", "later");
  BulkRequest r;
  r.filter.queue = "q";
  r.action = BulkAction::kRetry;
  const BulkJob job = Run(r);
  EXPECT_EQ(job.applied, 4);
  EXPECT_EQ(job.skipped, (Skips{{"scheduled", 1}}));
  for (int i = 0; i < 4; ++i) {
    Result<Task> t = engine_->Get("d" + std::to_string(i));
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->state, TaskState::kScheduled);
    EXPECT_EQ(t->attempt, 0);
  }
  // Due now: all four can be claimed at once.
  Result<std::vector<Lease>> l = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), 4u);
}

TEST_F(EngineBulkTest, DeleteTakesFinishedTasksAndNeedsAConditionOrAll) {
  AddTo("q", "keep");
  AddTo("q", "gone", 0s);
  ASSERT_TRUE(engine_->Cancel("gone").ok());
  AddTo("other", "gone-too");
  ASSERT_TRUE(engine_->Cancel("gone-too").ok());
  BulkRequest r;
  r.action = BulkAction::kDelete;
  Result<BulkJob> refused = engine_->StartBulk(r);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().field(), "filter");
  EXPECT_EQ(StateOf("gone"), TaskState::kCancelled);
  r.filter.all = true;
  const BulkJob job = Run(r);
  EXPECT_EQ(job.matched, 3);
  EXPECT_EQ(job.applied, 2);
  EXPECT_EQ(job.skipped, (Skips{{"scheduled", 1}}));
  EXPECT_EQ(engine_->Get("gone").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Get("gone-too").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(StateOf("keep"), TaskState::kScheduled);
  Result<QueueInfo> q = engine_->GetQueue("q");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->counts[static_cast<size_t>(TaskState::kCancelled)], 0);
  EXPECT_EQ(q->counts[static_cast<size_t>(TaskState::kScheduled)], 1);
}

TEST_F(EngineBulkTest, FilterByKeyIdPrefixRunAtRangeAndState) {
  AddTo("q", "user:1:a", 1h, "user:1");
  AddTo("q", "user:1:b", 3h, "user:1");
  AddTo("q", "user:2:a", 1h, "user:2");
  const Task generated = Add(1h);  // on "q", a generated id
  BulkRequest r;
  r.action = BulkAction::kCancel;
  r.dry_run = true;
  auto matched = [&](const BulkRequest& req) {
    Result<BulkJob> j = engine_->StartBulk(req);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? j->matched : -1;
  };
  r.filter.key = "user:1";
  EXPECT_EQ(matched(r), 2);
  r.filter = {.id_prefix = "user:"};
  EXPECT_EQ(matched(r), 3);
  r.filter = {.id_prefix = generated.id};
  EXPECT_EQ(matched(r), 1);
  r.filter = {.id_prefix = "_"};
  EXPECT_EQ(matched(r), 1);
  // run_at in [from, to).
  r.filter = {.run_at_from = clock_.Now() + 1h, .run_at_to = clock_.Now() + 3h};
  EXPECT_EQ(matched(r), 3);
  r.filter = {.run_at_from = clock_.Now() + 2h};
  EXPECT_EQ(matched(r), 1);
  r.filter = {.state = TaskState::kDead};
  EXPECT_EQ(matched(r), 0);
  // The real thing, on the narrowest filter.
  r.dry_run = false;
  r.filter = {.key = "user:1", .run_at_to = clock_.Now() + 2h};
  EXPECT_EQ(Run(r).applied, 1);
  EXPECT_EQ(StateOf("user:1:a"), TaskState::kCancelled);
  EXPECT_EQ(StateOf("user:1:b"), TaskState::kScheduled);
  // The key's next task is its head now: claimable when due.
  clock_.Advance(3h);
  engine_->Sync();
  Result<std::vector<Lease>> l = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), 3u);  // user:1:b, user:2:a, the generated one
}

TEST_F(EngineBulkTest, BadRequestsNameTheFieldAndChangeNothing) {
  AddTo("q", "t");
  auto field = [&](const BulkRequest& r) {
    Result<BulkJob> j = engine_->StartBulk(r);
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument) << j.status().ToString();
    return j.status().field();
  };
  BulkRequest r;
  r.filter.queue = "q";
  r.action = BulkAction::kReschedule;
  EXPECT_EQ(field(r), "run_at");  // neither instant nor shift
  r.run_at = clock_.Now() + 1h;
  r.shift = 1h;
  EXPECT_EQ(field(r), "shift_ms");  // both
  r.run_at.reset();
  r.shift = kMaxDelay + 1h;
  EXPECT_EQ(field(r), "shift_ms");
  r.shift = 0s;
  EXPECT_EQ(field(r), "shift_ms");
  r.shift.reset();
  r.run_at = Timestamp() - 1s;
  EXPECT_EQ(field(r), "run_at");
  r = {.filter = {.queue = "q"}, .action = BulkAction::kCancel, .shift = 1h};
  EXPECT_EQ(field(r), "shift_ms");  // only for a reschedule
  r = {.filter = {.run_at_from = clock_.Now() + 2h, .run_at_to = clock_.Now() + 1h}};
  EXPECT_EQ(field(r), "filter.run_at_to");
  r = {.filter = {}};  // no condition, for any action
  EXPECT_EQ(field(r), "filter");
  r = {.filter = {.queue = "q", .all = true}};
  EXPECT_EQ(field(r), "filter.all");
  r = {.filter = {.queue = ""}};
  EXPECT_EQ(field(r), "filter.queue");
  r = {.filter = {.key = ""}};
  EXPECT_EQ(field(r), "filter.key");
  r = {.filter = {.id_prefix = "_xyz"}};
  EXPECT_EQ(field(r), "filter.id_prefix");
  EXPECT_EQ(StateOf("t"), TaskState::kScheduled);
  EXPECT_TRUE(engine_->ListBulk().empty());
}

TEST_F(EngineBulkTest, JobsAreListedNewestFirstAndCancelled) {
  for (int i = 0; i < 30; ++i) AddTo("q", "t" + std::to_string(i));
  BulkRequest r;
  r.filter.id_prefix = "t1";
  r.action = BulkAction::kCancel;
  const BulkJob first = Run(r);
  EXPECT_EQ(first.applied, 11);  // t1, t10-t19
  // Cancelled at once, the job stops after at most the chunk it is in; what
  // it counted is exactly what it did.
  r.filter.id_prefix = "t";
  Result<BulkJob> second = engine_->StartBulk(r);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(engine_->CancelBulk(second->id).ok());
  BulkJob ended;
  ASSERT_TRUE(test::Eventually(
      [&] {
        ended = *engine_->GetBulk(second->id);
        return ended.state != BulkJobState::kRunning;
      },
      "the cancelled job to end"));
  int cancelled = 0;
  for (int i = 0; i < 30; ++i)
    cancelled += StateOf("t" + std::to_string(i)) == TaskState::kCancelled;
  if (ended.state == BulkJobState::kCancelled) {
    EXPECT_EQ(cancelled, 11 + ended.applied);
  } else {
    EXPECT_EQ(ended.state, BulkJobState::kDone);  // it finished before the cancel came
    EXPECT_EQ(cancelled, 30);
  }
  const std::vector<BulkJob> jobs = engine_->ListBulk();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id, second->id);
  EXPECT_EQ(jobs[1].id, first.id);
  // A finished job is returned as it is; an unknown one is not found.
  Result<BulkJob> again = engine_->CancelBulk(first.id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state, BulkJobState::kDone);
  EXPECT_EQ(engine_->GetBulk("bulk-0-0").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->CancelBulk("bulk-0-0").status().field(), "id");
}

TEST_F(EngineBulkTest, CancellingAScheduleOccurrenceMakesTheNextOne) {
  ScheduleSpec spec;
  spec.name = "nightly";
  spec.queue = "q";
  spec.every = 1h;
  ASSERT_TRUE(engine_->CreateSchedule(spec).ok());
  Result<Schedule> before = engine_->GetSchedule("nightly");
  ASSERT_TRUE(before.ok());
  BulkRequest r;
  r.filter.queue = "q";
  r.action = BulkAction::kCancel;
  EXPECT_EQ(Run(r).applied, 1);
  // As after a single cancel: the schedule went on to its next occurrence.
  Result<Schedule> after = engine_->GetSchedule("nightly");
  ASSERT_TRUE(after.ok());
  ASSERT_TRUE(before->next_task_id.has_value());
  ASSERT_TRUE(after->next_task_id.has_value());
  EXPECT_NE(*after->next_task_id, *before->next_task_id);
  EXPECT_EQ(StateOf(*before->next_task_id), TaskState::kCancelled);
}

}  // namespace
}  // namespace chronoq
