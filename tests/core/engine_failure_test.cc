// The engine when a commit fails: every request of that commit gets the error,
// nothing of it is visible afterwards (in the store or in memory), and the
// engine carries on.
#include <gtest/gtest.h>

#include "support/answer.h"
#include "support/engine_fixture.h"
#include "support/faulty_engine_fixture.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;

class EngineFailureTest : public test::FaultyEngineFixture {
 protected:
  TaskSpec Spec(std::string id) {
    TaskSpec s;
    s.queue = "q";
    s.id = std::move(id);
    return s;
  }
};

TEST_F(EngineFailureTest, AFailedCommitRejectsItsEnqueueAndLeavesNoTrace) {
  ASSERT_TRUE(engine_->Enqueue(Spec("a")).ok());
  store_->FailNextCommits(1);
  Status s = engine_->Enqueue(Spec("b")).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->failed_commits(), 1);
  EXPECT_EQ(engine_->Get("b").status().code(), StatusCode::kNotFound);

  // Memory forgot b as well: only a is claimable, and b's id is free.
  auto leases = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ(leases->front().id, "a");
  EXPECT_TRUE(engine_->Enqueue(Spec("b")).ok());
  EXPECT_EQ(engine_->Claim("q", 10, 30s)->size(), 1u);
}

TEST_F(EngineFailureTest, AFailedClaimLeavesTheTaskScheduled) {
  ASSERT_TRUE(engine_->Enqueue(Spec("a")).ok());
  store_->FailNextCommits(1);
  EXPECT_EQ(engine_->Claim("q", 10, 30s).status().code(), StatusCode::kUnavailable);
  auto task = engine_->Get("a");
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->state, TaskState::kScheduled);
  EXPECT_EQ(task->attempt, 0);
  // The claim that failed handed out nothing: the next one is attempt 1.
  auto leases = engine_->Claim("q", 10, 30s);
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ(leases->front().attempt, 1);
  EXPECT_TRUE(engine_->Ack("a", leases->front().token).ok());
}

TEST_F(EngineFailureTest, AFailedClaimStatementLeavesTheTaskClaimable) {
  ASSERT_TRUE(engine_->Enqueue(Spec("a")).ok());
  store_->FailNextClaims(1);
  EXPECT_EQ(engine_->Claim("q", 10, 30s).status().code(), StatusCode::kUnavailable);
  // The cycle committed; the task must still be in memory, not only on disk.
  auto leases = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ(leases->front().id, "a");
}

TEST_F(EngineFailureTest, AFailedAckKeepsTheLease) {
  ASSERT_TRUE(engine_->Enqueue(Spec("a")).ok());
  auto leases = engine_->Claim("q", 1, 30s);
  ASSERT_EQ(leases->size(), 1u);
  store_->FailNextCommits(1);
  EXPECT_EQ(engine_->Ack("a", leases->front().token).code(), StatusCode::kUnavailable);
  EXPECT_EQ(engine_->Get("a")->state, TaskState::kRunning);
  // The worker retries its acknowledgement with the same token.
  EXPECT_TRUE(engine_->Ack("a", leases->front().token).ok());
  EXPECT_EQ(engine_->Get("a")->state, TaskState::kSucceeded);
}

TEST_F(EngineFailureTest, AFailedBatchStoresNoneOfIt) {
  store_->FailNextCommits(1);
  EXPECT_EQ(engine_->EnqueueBatch({Spec("x"), Spec("y")}).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(engine_->Get("x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Get("y").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(engine_->Claim("q", 10, 30s)->empty());
  EXPECT_TRUE(engine_->EnqueueBatch({Spec("x"), Spec("y")}).ok());
}

// A store that stays down (a lost PostgreSQL connection, a full disk) with
// work due: the loop tries the due work again once a second, not in a loop
// that takes a core and floods the log.
// When the reload after a failed commit cannot even begin (the store is
// down), nothing of the failed cycle shows once the store is back: no call
// sees a task that was never stored, and the queue's counts stay true.
TEST_F(EngineFailureTest, AFailedReloadLeavesNoTraceOfTheFailedCycle) {
  ASSERT_TRUE(engine_->Enqueue(Spec("a")).ok());
  store_->FailNextCommits(1);  // the enqueue's commit
  store_->FailNextBegins(1);   // the reload's transaction
  EXPECT_EQ(engine_->Enqueue(Spec("ghost")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->failed_commits(), 1);
  EXPECT_FALSE(engine_->Stats().store_up);
  // The store is back: the next call's cycle reloads first.
  auto claimed = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ(claimed->front().id, "a");
  EXPECT_EQ(engine_->Get("ghost").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(engine_->Enqueue(Spec("real")).ok());
  EXPECT_TRUE(engine_->Stats().store_up);
  // The queue's counts (kept in memory, saved with each commit) count
  // "a" running and "real" scheduled, no ghost.
  auto queue = engine_->GetQueue("q");
  ASSERT_TRUE(queue.ok()) << queue.status().ToString();
  EXPECT_EQ(queue->counts[static_cast<int>(TaskState::kScheduled)], 1);
  EXPECT_EQ(queue->counts[static_cast<int>(TaskState::kRunning)], 1);
  claimed = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ(claimed->front().id, "real");
}

// While the store cannot be reached (or the engine was deposed in a
// cluster), a long poll cannot be served; it must not wait past its wait,
// or past a release (a node stepping down releases them and waits for
// them): the failed cycle answers it with no tasks.
TEST_F(EngineFailureTest, WaitingClaimsAnswerEmptyWhileTheStoreIsDown) {
  test::Answer<Result<std::vector<Lease>>> waiting;
  engine_->ClaimAsync("q", 1, 30s, 600s, waiting.Callback());
  engine_->Sync();
  EXPECT_FALSE(waiting.ready());
  store_->FailNextCommits(1'000'000);
  store_->FailNextBegins(1'000'000);
  EXPECT_EQ(engine_->Enqueue(Spec("a")).status().code(), StatusCode::kUnavailable);
  Result<std::vector<Lease>> answer = waiting.Get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE(answer->empty());
}

TEST_F(EngineFailureTest, DueWorkIsRetriedOnceASecondWhileCommitsFail) {
  ASSERT_TRUE(engine_->Enqueue(Spec("a")).ok());
  auto leases = engine_->Claim("q", 1, 30s);
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 1u);
  store_->FailNextCommits(1'000'000);
  clock_.Advance(31s);  // the lease lapses: due work, which cannot commit
  // The loop fails the cycle and the reload after it, then waits a second.
  clock_.AwaitWaiter(clock_.Now() + 1s);
  EXPECT_EQ(store_->failed_commits(), 2);
  // A second later: memory still holds the failed cycle's work, so the loop
  // rebuilds it from the store before anything else, and that fails again.
  clock_.Advance(1s);
  clock_.AwaitWaiter(clock_.Now() + 1s);
  EXPECT_EQ(store_->failed_commits(), 3);
  // Ops do not wait for the second: they fail at once.
  EXPECT_EQ(engine_->Enqueue(Spec("b")).status().code(), StatusCode::kUnavailable);
  // Once the store is back, the lapse commits and the task is claimable again.
  store_->FailNextCommits(0);
  clock_.Advance(1s);
  auto again = engine_->Claim("q", 1, 30s);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ(again->front().id, "a");
  EXPECT_EQ(again->front().attempt, 2);
}

}  // namespace
}  // namespace chronoq
