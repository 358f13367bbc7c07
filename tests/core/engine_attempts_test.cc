// Attempt history (Task::attempts), on the fake clock and on each store:
// every way an attempt ends is recorded with its times, node, worker, error
// or response; only the last EngineOptions::attempt_history are kept, within
// kMaxAttemptHistoryBytes; a retry by hand keeps the history; a purge takes
// it with the task.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/engine.h"
#include "chronoq/limits.h"

#include "codec/json_codec.h"
#include "support/engine_fixture.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;

class EngineAttemptsTest : public test::EngineFixture {
 protected:
  // Enqueues `id` on "q" with `max_attempts`, due now.
  void AddTask(const std::string& id, int max_attempts) {
    TaskSpec spec;
    spec.queue = "q";
    spec.id = id;
    spec.max_attempts = max_attempts;
    ASSERT_TRUE(engine_->Enqueue(spec).ok());
  }
  // Claims the one due task of "q" as `worker`; its token (0 on failure).
  uint64_t ClaimOne(const std::string& worker, Duration lease = 30s) {
    Result<ClaimAnswer> got =
        engine_->Claim({.queue = "q", .max = 1, .lease = lease, .worker = worker});
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || got->leases.size() != 1) {
      ADD_FAILURE() << "nothing claimed";
      return 0;
    }
    return got->leases.front().token;
  }
  std::vector<TaskAttempt> AttemptsOf(const std::string& id) {
    Result<Task> t = engine_->Get(id);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->attempts : std::vector<TaskAttempt>();
  }
};

TEST_F(EngineAttemptsTest, AnAcknowledgedAttemptIsRecordedWithItsResponse) {
  AddTask("a", 3);
  EXPECT_TRUE(AttemptsOf("a").empty());
  const Timestamp claimed = clock_.Now();
  const uint64_t token = ClaimOne("host-1:7");
  EXPECT_TRUE(AttemptsOf("a").empty());  // nothing while it runs
  clock_.Advance(1500ms);
  Result<std::vector<Status>> acked = engine_->AckMany({{"a", token, "HTTP 204"}});
  ASSERT_TRUE(acked.ok() && acked->front().ok());

  const std::vector<TaskAttempt> attempts = AttemptsOf("a");
  ASSERT_EQ(attempts.size(), 1u);
  const TaskAttempt& a = attempts.front();
  EXPECT_EQ(a.number, 1);
  EXPECT_EQ(a.started_at, claimed);
  EXPECT_EQ(a.ended_at, claimed + 1500ms);
  EXPECT_EQ(a.duration(), 1500ms);
  EXPECT_EQ(a.node, "");  // EngineOptions::node's default: none
  EXPECT_EQ(a.worker, "host-1:7");
  EXPECT_EQ(a.outcome, AttemptOutcome::kSucceeded);
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.response, "HTTP 204");
  // Listing shows it too.
  Result<TaskPage> page = engine_->List({.queue = "q"});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->tasks.size(), 1u);
  EXPECT_EQ(page->tasks.front().attempts, attempts);
}

TEST_F(EngineAttemptsTest, FailuresLapsesAndTheLastAttemptAreRecordedInOrder) {
  AddTask("a", 3);
  const Timestamp first = clock_.Now();
  uint64_t token = ClaimOne("w1");
  clock_.Advance(2s);
  ASSERT_TRUE(engine_->Fail("a", token, "smtp: 451", Duration::zero()).ok());

  const Timestamp second = clock_.Now();
  ClaimOne("w2", 5s);
  clock_.Advance(5s);
  engine_->Sync();  // the lease lapses: the task is scheduled again, due now
  EXPECT_EQ(StateOf("a"), TaskState::kScheduled);

  const Timestamp third = clock_.Now();
  token = ClaimOne("");
  clock_.Advance(1s);
  ASSERT_TRUE(engine_->Fail("a", token, "smtp: 550").ok());
  EXPECT_EQ(StateOf("a"), TaskState::kDead);

  const std::vector<TaskAttempt> attempts = AttemptsOf("a");
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].number, 1);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::kFailed);
  EXPECT_EQ(attempts[0].error, "smtp: 451");
  EXPECT_EQ(attempts[0].worker, "w1");
  EXPECT_EQ(attempts[0].started_at, first);
  EXPECT_EQ(attempts[0].duration(), 2s);
  EXPECT_EQ(attempts[1].number, 2);
  EXPECT_EQ(attempts[1].outcome, AttemptOutcome::kLeaseExpired);
  EXPECT_EQ(attempts[1].error, "lease expired during attempt 2");
  EXPECT_EQ(attempts[1].worker, "w2");
  EXPECT_EQ(attempts[1].started_at, second);
  EXPECT_EQ(attempts[1].duration(), 5s);
  EXPECT_EQ(attempts[2].number, 3);
  EXPECT_EQ(attempts[2].outcome, AttemptOutcome::kFailed);
  EXPECT_EQ(attempts[2].error, "smtp: 550");
  EXPECT_EQ(attempts[2].worker, "");
  EXPECT_EQ(attempts[2].started_at, third);

  // A retry by hand keeps the history; its attempts are numbered afresh.
  ASSERT_TRUE(engine_->Retry("a").ok());
  ASSERT_TRUE(engine_->Ack("a", ClaimOne("w4")).ok());
  const std::vector<TaskAttempt> after = AttemptsOf("a");
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(std::vector<TaskAttempt>(after.begin(), after.begin() + 3), attempts);
  EXPECT_EQ(after[3].number, 1);
  EXPECT_EQ(after[3].outcome, AttemptOutcome::kSucceeded);
  EXPECT_EQ(after[3].worker, "w4");
}

TEST_F(EngineAttemptsTest, OnlyTheLastNAttemptsAreKept) {
  engine_.reset();
  EngineOptions o = Options();
  o.attempt_history = 3;
  o.node = "node-a";
  Open(o);
  AddTask("a", 10);
  for (int i = 1; i <= 6; ++i) {
    ASSERT_TRUE(
        engine_->Fail("a", ClaimOne("w"), "failure " + std::to_string(i), Duration::zero()).ok());
  }
  ASSERT_TRUE(engine_->Ack("a", ClaimOne("w")).ok());
  const std::vector<TaskAttempt> attempts = AttemptsOf("a");
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].number, 5);
  EXPECT_EQ(attempts[0].error, "failure 5");
  EXPECT_EQ(attempts[1].number, 6);
  EXPECT_EQ(attempts[2].number, 7);
  EXPECT_EQ(attempts[2].outcome, AttemptOutcome::kSucceeded);
  EXPECT_EQ(attempts[2].node, "node-a");

  // 0 keeps none: none is shown, and an attempt that fails then clears what
  // was kept.
  AddTask("b", 3);
  ASSERT_TRUE(engine_->Fail("b", ClaimOne("w"), "boom", Duration::zero()).ok());
  ASSERT_EQ(AttemptsOf("b").size(), 1u);
  engine_.reset();
  o.attempt_history = 0;
  Open(o);
  ASSERT_TRUE(engine_->Fail("b", ClaimOne("w"), "boom again", Duration::zero()).ok());
  EXPECT_TRUE(AttemptsOf("b").empty());
  EXPECT_TRUE(AttemptsOf("a").empty());
  // A lower setting applies at once to what is shown: the newest ones.
  engine_.reset();
  o.attempt_history = 2;
  Open(o);
  EXPECT_TRUE(AttemptsOf("b").empty());  // cleared by the failure above
  const std::vector<TaskAttempt> two = AttemptsOf("a");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].number, 6);
  EXPECT_EQ(two[1].number, 7);
}

TEST_F(EngineAttemptsTest, TheHistoryIsBoundedInBytesDroppingTheOldest) {
  engine_.reset();
  EngineOptions o = Options();
  o.attempt_history = kMaxAttemptHistory;
  Open(o);
  AddTask("a", 50);
  const std::string error(3000, 'e');     // cut to kMaxAttemptExcerptBytes
  const std::string response(3000, 'r');  // likewise
  for (int i = 1; i <= 20; ++i) {
    Result<std::vector<Status>> failed =
        engine_->AckMany({{"a", ClaimOne("w"), response, AckFailure{error, Duration::zero()}}});
    ASSERT_TRUE(failed.ok() && failed->front().ok());
  }
  const std::vector<TaskAttempt> attempts = AttemptsOf("a");
  // About 2 KiB each: 16 KiB holds seven.
  ASSERT_GE(attempts.size(), 5u);
  ASSERT_LT(attempts.size(), 10u);
  EXPECT_LE(EncodeAttempts(attempts).size(), kMaxAttemptHistoryBytes);
  EXPECT_EQ(attempts.back().number, 20);
  EXPECT_EQ(attempts.front().number, 20 - static_cast<int>(attempts.size()) + 1);
  for (const TaskAttempt& a : attempts) {
    EXPECT_EQ(a.error, error.substr(0, kMaxAttemptExcerptBytes));
    EXPECT_EQ(a.response, response.substr(0, kMaxAttemptExcerptBytes));
  }
  // The task's own last_error keeps its longer limit.
  EXPECT_EQ(engine_->Get("a")->last_error, error);
}

TEST_F(EngineAttemptsTest, ARunningAttemptSurvivesARestartAndAPurgeTakesTheHistory) {
  AddTask("a", 3);
  const Timestamp claimed = clock_.Now();
  const uint64_t token = ClaimOne("w");
  engine_.reset();
  Open();
  clock_.Advance(3s);
  ASSERT_TRUE(engine_->Ack("a", token).ok());
  const std::vector<TaskAttempt> attempts = AttemptsOf("a");
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].started_at, claimed);
  EXPECT_EQ(attempts[0].duration(), 3s);
  EXPECT_EQ(attempts[0].worker, "w");

  // Purged, the history goes with the task.
  AddTask("b", 1);
  ASSERT_TRUE(engine_->Fail("b", ClaimOne("w"), "boom").ok());
  ASSERT_EQ(AttemptsOf("b").size(), 1u);
  // A succeeded task after its retention; a dead one by hand.
  clock_.Advance(24h + 1s);
  engine_->Sync();
  EXPECT_EQ(engine_->Get("a").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(engine_->Purge("b").ok());
  EXPECT_EQ(engine_->Get("b").status().code(), StatusCode::kNotFound);
  // A new task with the same id starts without a history.
  AddTask("a", 3);
  EXPECT_TRUE(AttemptsOf("a").empty());
}

// The claim records its own time and engine: an extension and a restart
// under another name change neither, so the acknowledged attempt (read from
// the row) and a lapsed one (recorded when it ends) both say where and when
// the attempt began.
TEST_F(EngineAttemptsTest, AnAttemptKeepsItsClaimsTimeAndNodeThroughAnExtensionAndARestart) {
  engine_.reset();
  EngineOptions o = Options();
  o.node = "node-a";
  Open(o);
  AddTask("a", 3);
  AddTask("b", 3);
  const Timestamp claimed = clock_.Now();
  const uint64_t a = ClaimOne("w");
  ClaimOne("w", 60s);
  clock_.Advance(10s);
  ASSERT_TRUE(engine_->Extend("a", a, 30s).ok());
  engine_.reset();
  o.node = "node-b";
  Open(o);
  clock_.Advance(5s);
  ASSERT_TRUE(engine_->Ack("a", a).ok());
  const std::vector<TaskAttempt> acked = AttemptsOf("a");
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_EQ(acked[0].started_at, claimed);
  EXPECT_EQ(acked[0].duration(), 15s);
  EXPECT_EQ(acked[0].node, "node-a");
  clock_.Advance(60s);
  engine_->Sync();  // b's lease lapses under node-b
  const std::vector<TaskAttempt> lapsed = AttemptsOf("b");
  ASSERT_EQ(lapsed.size(), 1u);
  EXPECT_EQ(lapsed[0].outcome, AttemptOutcome::kLeaseExpired);
  EXPECT_EQ(lapsed[0].started_at, claimed);
  EXPECT_EQ(lapsed[0].node, "node-a");
  // Its next claim is node-b's.
  ASSERT_TRUE(engine_->Ack("b", ClaimOne("w")).ok());
  EXPECT_EQ(AttemptsOf("b").back().node, "node-b");
}

// A retried task acknowledged without a response does not show the
// response of the attempt that failed before it, as its own or as the
// task's last_response.
TEST_F(EngineAttemptsTest, ASuccessWithoutAResponseDoesNotShowAnEarlierAttemptsResponse) {
  AddTask("a", 3);
  Result<std::vector<Status>> failed = engine_->AckMany(
      {{"a", ClaimOne("w"), "HTTP 503: busy", AckFailure{"HTTP 503", Duration::zero()}}});
  ASSERT_TRUE(failed.ok() && failed->front().ok());
  EXPECT_EQ(engine_->Get("a")->last_response, "HTTP 503: busy");
  ASSERT_TRUE(engine_->Ack("a", ClaimOne("w")).ok());
  const std::vector<TaskAttempt> attempts = AttemptsOf("a");
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].response, "HTTP 503: busy");
  EXPECT_EQ(attempts[1].outcome, AttemptOutcome::kSucceeded);
  EXPECT_EQ(attempts[1].response, "");
  EXPECT_EQ(engine_->Get("a")->last_response, std::nullopt);
}

// A 410 Gone (AckFailure::cancel) ends the attempt as failed and the task
// as cancelled.
TEST_F(EngineAttemptsTest, AnAttemptThatCancelsItsTaskIsRecordedAsFailed) {
  AddTask("a", 3);
  Result<std::vector<Status>> gone = engine_->AckMany(
      {{"a", ClaimOne("w"), "HTTP 410", AckFailure{.error = "HTTP 410", .cancel = true}}});
  ASSERT_TRUE(gone.ok() && gone->front().ok());
  EXPECT_EQ(StateOf("a"), TaskState::kCancelled);
  const std::vector<TaskAttempt> attempts = AttemptsOf("a");
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::kFailed);
  EXPECT_EQ(attempts[0].error, "HTTP 410");
  EXPECT_EQ(attempts[0].response, "HTTP 410");
}

// Checked before a store is opened.
TEST(EngineAttemptsOptionsTest, BadOptionsNameTheField) {
  test::TempDir dir;
  EngineOptions o;
  o.store = dir.File("never.db");
  o.attempt_history = kMaxAttemptHistory + 1;
  EXPECT_EQ(Engine::Open(o).status().field(), "attempt_history");
  o.attempt_history = -1;
  EXPECT_EQ(Engine::Open(o).status().field(), "attempt_history");
  o.attempt_history = kDefaultAttemptHistory;
  o.node = std::string(kMaxNodeNameBytes + 1, 'n');
  EXPECT_EQ(Engine::Open(o).status().field(), "node");
  o.node = "bad\nname";
  EXPECT_EQ(Engine::Open(o).status().field(), "node");
  EXPECT_FALSE(std::filesystem::exists(dir.File("never.db")));
}

}  // namespace
}  // namespace chronoq
