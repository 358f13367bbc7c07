// Schedules on the fake clock: occurrences as tasks, overlap, misfire after
// downtime, fixed delay, pause/resume/replace/delete, and exactly one task per
// occurrence.
#include <gtest/gtest.h>

#include "chronoq/engine.h"
#include "chronoq/time.h"

#include "schedule/schedule_spec.h"
#include "support/engine_fixture.h"
#include "support/raw_sql.h"

namespace chronoq {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

class EngineScheduleTest : public test::EngineFixture {
 protected:
  const Timestamp t0_ = clock_.Now();

  static ScheduleSpec Every(Duration every, const std::string& name = "tick") {
    ScheduleSpec s;
    s.name = name;
    s.queue = "q";
    s.every = every;
    return s;
  }

  Schedule Create(const ScheduleSpec& spec) {
    Result<Schedule> s = engine_->CreateSchedule(spec);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : Schedule{};
  }

  Schedule Get(const std::string& name = "tick") {
    Result<Schedule> s = engine_->GetSchedule(name);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : Schedule{};
  }

  // Claims the one due task of "q"; fails the test when there is not exactly one.
  Lease ClaimOne(Duration lease = minutes(30)) {
    Result<std::vector<Lease>> got = engine_->Claim("q", 10, lease);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got.ok() ? got->size() : 0u, 1u);
    return got.ok() && got->size() == 1 ? got->front() : Lease{};
  }

  // Ids of the tasks of "q" in `state`.
  std::vector<std::string> Ids(TaskState state) {
    ListRequest r;
    r.queue = "q";
    r.state = state;
    std::vector<std::string> out;
    Result<TaskPage> page = engine_->List(r);
    EXPECT_TRUE(page.ok());
    for (const Task& t : page->tasks) out.push_back(t.id);
    return out;
  }

  std::string Id(Duration after_t0, const std::string& name = "tick") {
    return OccurrenceId(name, t0_ + after_t0);
  }

  // Closes the engine, lets `downtime` pass, and opens it again.
  void Restart(Duration downtime) {
    engine_.reset();
    clock_.Advance(downtime);
    Open();
  }
};

TEST_F(EngineScheduleTest, EveryCreatesItsFirstOccurrenceAtOnceWithScheduledForInThePayload) {
  ScheduleSpec spec = Every(minutes(1));
  spec.payload = R"({"table": "shares"})";
  Schedule s = Create(spec);
  EXPECT_EQ(s.next_task_id, Id(Duration::zero()));
  EXPECT_EQ(s.next_run, t0_);
  EXPECT_EQ(s.spec.start, t0_);  // anchored at creation

  Lease l = ClaimOne();
  EXPECT_EQ(l.id, Id(Duration::zero()));
  EXPECT_EQ(l.payload, R"({"scheduled_for":")" + FormatTime(t0_) + R"(","table":"shares"})");
  // Overlap skip (the default): the next occurrence waits for this one.
  EXPECT_FALSE(Get().next_task_id.has_value());
  EXPECT_EQ(Get().next_run, t0_ + minutes(1));

  clock_.Advance(seconds(5));
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  s = Get();
  EXPECT_EQ(s.next_task_id, Id(minutes(1)));
  EXPECT_EQ(s.runs, 1);
  EXPECT_EQ(s.skipped, 0);
  ASSERT_TRUE(s.last_run.has_value());
  EXPECT_EQ(s.last_run->task_id, Id(Duration::zero()));
  EXPECT_EQ(s.last_run->scheduled_for, t0_);
  EXPECT_EQ(s.last_run->state, TaskState::kSucceeded);
  EXPECT_EQ(s.last_run->finished_at, t0_ + seconds(5));
  // Nothing is due before its instant.
  Result<std::vector<Lease>> early = engine_->Claim("q", 10, minutes(1));
  ASSERT_TRUE(early.ok());
  EXPECT_TRUE(early->empty());
  clock_.Advance(seconds(55));
  EXPECT_EQ(ClaimOne().id, Id(minutes(1)));
}

TEST_F(EngineScheduleTest, EveryStaysAnchoredWhateverTheRunsTake) {
  Create(Every(seconds(30)));
  for (int i = 0; i < 5; ++i) {
    clock_.Set(t0_ + i * seconds(30) + seconds(7));  // each run starts 7 s late
    Lease l = ClaimOne();
    EXPECT_EQ(l.id, Id(i * seconds(30)));
    clock_.Advance(seconds(3));
    ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  }
  EXPECT_EQ(Get().next_task_id, Id(seconds(150)));
}

TEST_F(EngineScheduleTest, CronInAZoneGivesUtcInstants) {
  ScheduleSpec spec;
  spec.name = "purge";
  spec.queue = "q";
  spec.cron = "0 0 3 * * *";
  spec.tz = "Asia/Seoul";
  // t0 is 2026-11-22T00:00Z, 09:00 in Seoul: the next 03:00 there is
  // 2026-11-22T18:00Z.
  Schedule s = Create(spec);
  const Timestamp expected = *ParseTime("2026-11-22T18:00:00Z");
  EXPECT_EQ(s.next_run, expected);
  EXPECT_EQ(s.next_task_id, "purge@2026-11-22T18:00:00.000Z");
  Result<std::vector<Timestamp>> next = engine_->NextOccurrences("purge", 3);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, (std::vector<Timestamp>{expected, expected + std::chrono::hours(24),
                                           expected + std::chrono::hours(48)}));
}

// New York springs forward on 2026-03-08: 02:30 does not exist that day.
TEST_F(EngineScheduleTest, ACronScheduleFollowsItsDstGapRule) {
  clock_.Set(*ParseTime("2026-03-06T12:00:00Z"));
  ScheduleSpec spec;
  spec.name = "night";
  spec.queue = "q";
  spec.cron = "0 30 2 * * *";
  spec.tz = "America/New_York";
  Create(spec);
  Result<std::vector<Timestamp>> next = engine_->NextOccurrences("night", 3);
  ASSERT_TRUE(next.ok());
  // 02:30 EST on the 7th, then the gap day's run at 03:00 EDT (the first
  // instant after the gap), then 02:30 EDT on the 9th.
  EXPECT_EQ(*next, (std::vector<Timestamp>{*ParseTime("2026-03-07T07:30:00Z"),
                                           *ParseTime("2026-03-08T07:00:00Z"),
                                           *ParseTime("2026-03-09T06:30:00Z")}));
  spec.dst_gap = DstGap::kSkip;
  ASSERT_TRUE(engine_->PutSchedule(spec).ok());
  next = engine_->NextOccurrences("night", 2);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, (std::vector<Timestamp>{*ParseTime("2026-03-07T07:30:00Z"),
                                           *ParseTime("2026-03-09T06:30:00Z")}));
  // The occurrences themselves follow: run the 7th's, and the next task is the 9th's.
  clock_.Set(*ParseTime("2026-03-07T07:30:00Z"));
  Lease l = ClaimOne();
  EXPECT_EQ(l.id, "night@2026-03-07T07:30:00.000Z");
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  EXPECT_EQ(Get("night").next_task_id, "night@2026-03-09T06:30:00.000Z");
}

TEST_F(EngineScheduleTest, OverlapAllowCreatesTheNextOccurrenceAtClaimAndRunsThemTogether) {
  ScheduleSpec spec = Every(minutes(1));
  spec.overlap = Overlap::kAllow;
  Create(spec);
  Lease first = ClaimOne();
  EXPECT_EQ(Get().next_task_id, Id(minutes(1)));
  clock_.Advance(minutes(1));
  Lease second = ClaimOne();  // the first still runs
  EXPECT_EQ(second.id, Id(minutes(1)));
  EXPECT_EQ(Ids(TaskState::kRunning).size(), 2u);
  ASSERT_TRUE(engine_->Ack(first.id, first.token).ok());
  ASSERT_TRUE(engine_->Ack(second.id, second.token).ok());
  Schedule s = Get();
  EXPECT_EQ(s.runs, 2);
  EXPECT_EQ(s.next_task_id, Id(minutes(2)));
}

TEST_F(EngineScheduleTest, OverlapSkipDropsWhatCameDueWhileTheRunRan) {
  Create(Every(minutes(1)));
  Lease l = ClaimOne();
  clock_.Advance(seconds(150));  // T+60 and T+120 come due meanwhile
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  Schedule s = Get();
  EXPECT_EQ(s.next_task_id, Id(minutes(3)));
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(Ids(TaskState::kScheduled), std::vector<std::string>{Id(minutes(3))});
}

TEST_F(EngineScheduleTest, OverlapQueueOneRunsTheLatestOverlappedOneAsSoonAsThePreviousEnds) {
  ScheduleSpec spec = Every(minutes(1));
  spec.overlap = Overlap::kQueueOne;
  Create(spec);
  Lease l = ClaimOne();
  clock_.Advance(seconds(150));
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  Schedule s = Get();
  EXPECT_EQ(s.next_task_id, Id(minutes(2)));
  EXPECT_EQ(s.skipped, 1);    // T+60
  Lease queued = ClaimOne();  // due already
  EXPECT_EQ(queued.id, Id(minutes(2)));
  clock_.Advance(seconds(10));
  ASSERT_TRUE(engine_->Ack(queued.id, queued.token).ok());
  EXPECT_EQ(Get().next_task_id, Id(minutes(3)));  // back on the rule
}

TEST_F(EngineScheduleTest, FixedDelayCountsFromTheEndOfTheRun) {
  ScheduleSpec spec;
  spec.name = "tick";
  spec.queue = "q";
  spec.fixed_delay = seconds(30);
  Create(spec);
  EXPECT_EQ(Get().next_run, t0_ + seconds(30));
  clock_.Advance(seconds(30));
  Lease l = ClaimOne();
  clock_.Advance(seconds(70));  // a slow run
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  Schedule s = Get();
  EXPECT_EQ(s.next_run, t0_ + seconds(130));
  EXPECT_EQ(s.next_task_id, Id(seconds(130)));
  Result<std::vector<Timestamp>> next = engine_->NextOccurrences("tick", 5);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, std::vector<Timestamp>{t0_ + seconds(130)});  // later ones are unknown
}

TEST_F(EngineScheduleTest, ADeadOccurrenceIsTheLastRunAndTheScheduleGoesOn) {
  ScheduleSpec spec = Every(minutes(1));
  spec.max_attempts = 1;
  Create(spec);
  Lease l = ClaimOne();
  ASSERT_TRUE(engine_->Fail(l.id, l.token, "disk full").ok());
  Schedule s = Get();
  ASSERT_TRUE(s.last_run.has_value());
  EXPECT_EQ(s.last_run->state, TaskState::kDead);
  EXPECT_EQ(s.last_run->error, "disk full");
  EXPECT_EQ(s.next_task_id, Id(minutes(1)));
  EXPECT_EQ(StateOf(l.id), TaskState::kDead);
}

TEST_F(EngineScheduleTest, ARetriedOccurrenceIsStillTheRunningOne) {
  ScheduleSpec spec = Every(minutes(1));
  spec.max_attempts = 3;
  Create(spec);
  Lease l = ClaimOne();
  ASSERT_TRUE(engine_->Fail(l.id, l.token, "busy", seconds(1)).ok());
  EXPECT_FALSE(Get().next_task_id.has_value());  // it will run again
  clock_.Advance(seconds(1));
  Lease again = ClaimOne();
  EXPECT_EQ(again.id, l.id);
  ASSERT_TRUE(engine_->Ack(again.id, again.token).ok());
  EXPECT_EQ(Get().next_task_id, Id(minutes(1)));
  EXPECT_EQ(Get().runs, 1);
}

TEST_F(EngineScheduleTest, CancellingTheNextOccurrenceSkipsIt) {
  Create(Every(minutes(1)));
  clock_.Advance(seconds(10));
  ASSERT_TRUE(engine_->Cancel(Id(Duration::zero())).ok());
  Schedule s = Get();
  EXPECT_EQ(s.next_task_id, Id(minutes(1)));
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.last_run->state, TaskState::kCancelled);
}

TEST_F(EngineScheduleTest, MisfireRunOnceRunsTheLatestMissedOccurrenceAfterDowntime) {
  Create(Every(minutes(1)));
  Restart(seconds(630));  // T .. T+600 (11 occurrences) pass while down
  Schedule s = Get();
  EXPECT_EQ(s.next_task_id, Id(minutes(10)));
  EXPECT_EQ(s.skipped, 10);
  EXPECT_EQ(engine_->Get(Id(Duration::zero())).status().code(), StatusCode::kNotFound);
  Lease l = ClaimOne();
  EXPECT_EQ(l.id, Id(minutes(10)));
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  EXPECT_EQ(Get().next_task_id, Id(minutes(11)));
}

TEST_F(EngineScheduleTest, MisfireSkipRunsNoneOfTheMissed) {
  ScheduleSpec spec = Every(minutes(1));
  spec.misfire = Misfire::kSkip;
  Create(spec);
  Restart(seconds(630));
  Schedule s = Get();
  EXPECT_EQ(s.next_task_id, Id(minutes(11)));
  EXPECT_EQ(s.skipped, 11);
  // The dropped occurrence left the queue's counts with it, durably.
  Restart(Duration::zero());
  Result<QueueInfo> q = engine_->GetQueue("q");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->counts[static_cast<size_t>(TaskState::kScheduled)], 1);
  Result<std::vector<Lease>> none = engine_->Claim("q", 10, minutes(1));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(EngineScheduleTest, MisfireRunAllCatchesUpAtMostMaxCatchupOldestFirst) {
  ScheduleSpec spec = Every(minutes(1));
  spec.misfire = Misfire::kRunAll;
  spec.max_catchup = 3;
  Create(spec);
  Restart(seconds(630));
  EXPECT_EQ(Get().skipped, 8);
  // The three most recent missed ones run one after another (overlap skip
  // does not drop them: they were missed before the run began), then the
  // schedule is back on time.
  for (Duration at : {minutes(8), minutes(9), minutes(10)}) {
    Lease l = ClaimOne();
    EXPECT_EQ(l.id, Id(at));
    ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  }
  EXPECT_EQ(Get().next_task_id, Id(minutes(11)));
  EXPECT_EQ(Get().runs, 3);
}

TEST_F(EngineScheduleTest, AnOccurrenceDueWhileDownButOnTimeIsNotMissed) {
  Create(Every(minutes(10)));
  Lease l = ClaimOne();
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  Restart(seconds(30));  // the next one (T+10min) is still ahead
  EXPECT_EQ(Get().next_task_id, Id(minutes(10)));
  EXPECT_EQ(Get().skipped, 0);
}

TEST_F(EngineScheduleTest, ARestartNeverCreatesAnOccurrenceTwice) {
  Create(Every(minutes(1)));
  Lease l = ClaimOne();
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  for (int i = 0; i < 3; ++i) Restart(Duration::zero());
  EXPECT_EQ(Ids(TaskState::kScheduled), std::vector<std::string>{Id(minutes(1))});
  EXPECT_EQ(Ids(TaskState::kSucceeded), std::vector<std::string>{Id(Duration::zero())});
  EXPECT_EQ(Get().runs, 1);
}

TEST_F(EngineScheduleTest, AnOccurrenceAnotherWriterCreatedFirstIsAdoptedNotDuplicated) {
  Create(Every(minutes(1)));
  // Another node got to T+60 first and created its task.
  TaskSpec theirs;
  theirs.queue = "q";
  theirs.id = Id(minutes(1));
  theirs.run_at = t0_ + minutes(1);
  theirs.payload = R"({"by":"node-2"})";
  ASSERT_TRUE(engine_->Enqueue(theirs).ok());
  Lease l = ClaimOne();
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  EXPECT_EQ(Get().next_task_id, Id(minutes(1)));
  EXPECT_EQ(Ids(TaskState::kScheduled), std::vector<std::string>{Id(minutes(1))});
  EXPECT_EQ(engine_->Get(Id(minutes(1)))->payload, R"({"by":"node-2"})");
}

// Two engines cannot race on one embedded store: the second is refused, so
// occurrences can only be raced for by writers that go through the id check
// above (a restart, or several nodes on a shared store).
TEST_F(EngineScheduleTest, ASecondEngineOnTheSameStoreIsRefused) {
  Create(Every(minutes(1)));
  Result<std::unique_ptr<Engine>> second = Engine::Open(Options());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Ids(TaskState::kScheduled), std::vector<std::string>{Id(Duration::zero())});
}

TEST_F(EngineScheduleTest, AnOccurrenceThatAlreadyRanIsNeverRunAgain) {
  Create(Every(minutes(1)));
  ASSERT_TRUE(engine_->DeleteSchedule("tick").ok());
  // The schedule ran T+0 before; a new one under the same name, anchored at
  // the same instant, must not run T+0 again.
  TaskSpec ran;
  ran.queue = "q";
  ran.id = Id(Duration::zero());
  ASSERT_TRUE(engine_->Enqueue(ran).ok());
  Lease l = ClaimOne();
  ASSERT_TRUE(engine_->Ack(l.id, l.token).ok());
  ScheduleSpec again = Every(minutes(1));
  again.start = t0_;
  Schedule s = Create(again);
  EXPECT_EQ(s.next_task_id, Id(minutes(1)));
}

TEST_F(EngineScheduleTest, PauseDropsTheNextOccurrenceAndResumeStartsFromNow) {
  Create(Every(minutes(1)));
  Result<Schedule> paused = engine_->PauseSchedule("tick", true);
  ASSERT_TRUE(paused.ok());
  EXPECT_TRUE(paused->paused);
  EXPECT_FALSE(paused->next_task_id.has_value());
  EXPECT_EQ(engine_->Get(Id(Duration::zero())).status().code(), StatusCode::kNotFound);
  clock_.Advance(seconds(150));
  Restart(Duration::zero());  // still paused after a restart
  EXPECT_TRUE(Get().paused);
  EXPECT_TRUE(Ids(TaskState::kScheduled).empty());
  Result<Schedule> resumed = engine_->PauseSchedule("tick", false);
  ASSERT_TRUE(resumed.ok());
  EXPECT_FALSE(resumed->paused);
  EXPECT_EQ(resumed->next_task_id, Id(minutes(3)));
  EXPECT_EQ(resumed->skipped, 0);  // not missed: unwanted
}

TEST_F(EngineScheduleTest, PutReplacesTheDefinitionAndItsNextOccurrence) {
  Create(Every(minutes(1)));
  clock_.Advance(seconds(10));
  ScheduleSpec hourly = Every(std::chrono::hours(1));
  hourly.start = t0_;
  Result<Schedule> s = engine_->PutSchedule(hourly);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->spec.every, std::chrono::hours(1));
  EXPECT_EQ(s->next_task_id, Id(std::chrono::hours(1)));
  EXPECT_EQ(Ids(TaskState::kScheduled), std::vector<std::string>{Id(std::chrono::hours(1))});
  // Put also creates.
  ASSERT_TRUE(engine_->PutSchedule(Every(minutes(5), "other")).ok());
  EXPECT_TRUE(engine_->GetSchedule("other").ok());
}

TEST_F(EngineScheduleTest, DeleteRemovesTheScheduleAndItsNextOccurrenceButNotARunningOne) {
  ScheduleSpec spec = Every(minutes(1));
  spec.overlap = Overlap::kAllow;
  Create(spec);
  Lease running = ClaimOne();
  ASSERT_TRUE(engine_->DeleteSchedule("tick").ok());
  EXPECT_EQ(engine_->GetSchedule("tick").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Get(Id(minutes(1))).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(engine_->Ack(running.id, running.token).ok());
  EXPECT_EQ(engine_->DeleteSchedule("tick").code(), StatusCode::kNotFound);
  Restart(Duration::zero());
  EXPECT_EQ(engine_->GetSchedule("tick").status().code(), StatusCode::kNotFound);
}

TEST_F(EngineScheduleTest, ListPagesByNameAndFiltersByQueue) {
  for (const char* name : {"c", "a", "b"}) Create(Every(minutes(1), name));
  ScheduleSpec elsewhere = Every(minutes(1), "d");
  elsewhere.queue = "other";
  Create(elsewhere);
  ListSchedulesRequest r;
  r.limit = 2;
  Result<SchedulePage> page = engine_->ListSchedules(r);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->schedules.size(), 2u);
  EXPECT_EQ(page->schedules[0].spec.name, "a");
  EXPECT_EQ(page->schedules[1].spec.name, "b");
  r.cursor = page->next_cursor;
  page = engine_->ListSchedules(r);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->schedules.size(), 2u);
  EXPECT_EQ(page->schedules[1].spec.name, "d");
  EXPECT_TRUE(page->next_cursor.empty());
  r = ListSchedulesRequest();
  r.queue = "other";
  page = engine_->ListSchedules(r);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->schedules.size(), 1u);
  EXPECT_EQ(page->schedules[0].spec.name, "d");
}

TEST_F(EngineScheduleTest, BadInputNamesTheFieldAndChangesNothing) {
  struct Case {
    std::function<void(ScheduleSpec&)> change;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](ScheduleSpec& s) { s.every.reset(); }, "cron"},
      {[](ScheduleSpec& s) { s.cron = "* * * * *"; }, "cron"},
      {[](ScheduleSpec& s) { s.name = "a@b"; }, "name"},
      {[](ScheduleSpec& s) { s.name = ""; }, "name"},
      {[](ScheduleSpec& s) { s.queue = "bad queue"; }, "queue"},
      {[](ScheduleSpec& s) { s.every = Duration::zero(); }, "every_ms"},
      {[](ScheduleSpec& s) { s.tz = "Europe/Paris"; }, "tz"},
      {[](ScheduleSpec& s) { s.payload = "[1]"; }, "payload"},
      {[](ScheduleSpec& s) { s.payload = R"({"scheduled_for":1})"; }, "payload"},
      {[](ScheduleSpec& s) { s.max_catchup = 0; }, "max_catchup"},
      {[](ScheduleSpec& s) { s.max_attempts = 1001; }, "max_attempts"},
      {[](ScheduleSpec& s) {
         s.every.reset();
         s.cron = "0 0 30 2 *";
       },
       "cron"},
      {[](ScheduleSpec& s) {
         s.every.reset();
         s.cron = "0 * * * *";
         s.tz = "Mars/Olympus";
       },
       "tz"},
      {[](ScheduleSpec& s) {
         s.every.reset();
         s.fixed_delay = std::chrono::hours(24 * 366 * 11);
       },
       "fixed_delay_ms"},
  };
  for (const Case& c : cases) {
    ScheduleSpec spec = Every(minutes(1));
    c.change(spec);
    Result<Schedule> s = engine_->CreateSchedule(spec);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(s.status().field(), c.field) << s.status().ToString();
  }
  Create(Every(minutes(1)));
  EXPECT_EQ(engine_->CreateSchedule(Every(minutes(2))).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Get().spec.every, minutes(1));
  EXPECT_EQ(engine_->NextOccurrences("tick", 0).status().field(), "count");
  EXPECT_EQ(engine_->NextOccurrences("nope", 1).status().code(), StatusCode::kNotFound);
  Result<SchedulePage> all = engine_->ListSchedules({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->schedules.size(), 1u);
  EXPECT_EQ(Ids(TaskState::kScheduled).size(), 1u);
}

TEST_F(EngineScheduleTest, ASchedulesWebhookTargetAndTaskOptionsReachEachOccurrence) {
  ScheduleSpec spec = Every(minutes(1));
  spec.target = WebhookTarget{"https://example.com/hook", "POST", {}, seconds(5)};
  spec.priority = -3;
  spec.max_attempts = 7;
  Create(spec);
  Lease l = ClaimOne();
  ASSERT_TRUE(l.target.has_value());
  EXPECT_EQ(l.target->url, "https://example.com/hook");
  EXPECT_EQ(l.max_attempts, 7);
  EXPECT_EQ(engine_->Get(l.id)->priority, -3);
}

// Schema 7 kept targets and definitions in a JSON form of their own
// (microseconds, headers as pairs, defaults left out); opening such a store
// converts them to their API form, and nothing about them changes. The
// schema-7 forms are written with raw SQL: SQLite only.
using EngineScheduleSqliteTest = test::SqliteOnly<EngineScheduleTest>;

TEST_F(EngineScheduleSqliteTest, TargetsAndDefinitionsOfASchema7StoreReadBackUnchanged) {
  ScheduleSpec spec;
  spec.name = "purge";
  spec.queue = "q";
  spec.cron = "0 0 3 * * *";
  spec.tz = "Asia/Seoul";
  spec.start = t0_ + minutes(1);
  spec.payload = R"({"rows":1000})";
  spec.max_catchup = 7;
  spec.target = WebhookTarget{"https://example.com/x", "PUT", {{"X-Key", "v"}}, seconds(3)};
  Create(spec);
  ScheduleSpec fixed = Every(minutes(1), "fixed");
  fixed.every.reset();
  fixed.fixed_delay = std::chrono::milliseconds(1500);
  Create(fixed);
  TaskSpec hook;
  hook.queue = "hooks";
  hook.id = "hook";
  hook.target = WebhookTarget{"http://127.0.0.1:9/h", "POST", {{"A", "1"}, {"B", "2"}}, seconds(2)};
  ASSERT_TRUE(engine_->Enqueue(hook).ok());
  const Schedule purge_before = Get("purge");
  const Schedule fixed_before = Get("fixed");
  const std::string db = SqlitePath();
  engine_.reset();

  // What schema 7 wrote for the same three (and the purge occurrence).
  const std::string start_us = std::to_string(spec.start->time_since_epoch().count());
  test::ExecRaw(db, R"sql(
    UPDATE tasks SET target = '{"url":"http://127.0.0.1:9/h","headers":[["A","1"],["B","2"]],"timeout_us":2000000}'
      WHERE name = 'hook';
    UPDATE tasks SET target = '{"url":"https://example.com/x","method":"PUT","headers":[["X-Key","v"]],"timeout_us":3000000}'
      WHERE name LIKE 'purge@%';
    UPDATE schedules SET spec = '{"name":"purge","queue":"q","cron":"0 0 3 * * *","tz":"Asia/Seoul",'
      || '"start_us":)sql" +
                        start_us + R"sql(,'
      || '"payload":{"rows":1000},"misfire":"run_once","max_catchup":7,"overlap":"skip",'
      || '"target":{"url":"https://example.com/x","method":"PUT","headers":[["X-Key","v"]],"timeout_us":3000000}}'
      WHERE name = 'purge';
    UPDATE schedules SET spec = '{"name":"fixed","queue":"q","fixed_delay_us":1500000,'
      || '"payload":{},"misfire":"run_once","max_catchup":1,"overlap":"skip"}'
      WHERE name = 'fixed';
    ALTER TABLE tasks DROP COLUMN worker;
    ALTER TABLE queues DROP COLUMN final_statuses;
    ALTER TABLE tasks DROP COLUMN claimed; ALTER TABLE tasks DROP COLUMN node;
    ALTER TABLE tasks DROP COLUMN attempts;
    UPDATE meta SET v = 7 WHERE k = 'schema';
  )sql");
  Open();
  EXPECT_EQ(test::QueryText(db, "SELECT v FROM meta WHERE k='schema'"), "12");
  const Schedule purge = Get("purge");
  EXPECT_EQ(purge.spec.cron, spec.cron);
  EXPECT_EQ(purge.spec.tz, spec.tz);
  EXPECT_EQ(purge.spec.start, spec.start);
  EXPECT_EQ(purge.spec.payload, spec.payload);
  EXPECT_EQ(purge.spec.max_catchup, 7);
  EXPECT_EQ(purge.spec.target, spec.target);
  EXPECT_EQ(purge.next_run, purge_before.next_run);
  const Schedule fixed_after = Get("fixed");
  EXPECT_EQ(fixed_after.spec.fixed_delay, fixed.fixed_delay);
  EXPECT_EQ(fixed_after.spec.misfire, fixed_before.spec.misfire);
  EXPECT_EQ(engine_->Get("hook")->target, hook.target);
  EXPECT_EQ(engine_->Get(*purge.next_task_id)->target, spec.target);
}

}  // namespace
}  // namespace chronoq
