// The Engine's asynchronous forms: answers arrive through callbacks once
// committed; invalid input is answered at once on the caller's thread.
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "support/answer.h"
#include "support/engine_fixture.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::EngineFixture;

class EngineAsyncTest : public EngineFixture {};

using test::Answer;

TEST_F(EngineAsyncTest, EnqueueAnswersWithTheCommittedTask) {
  Answer<Result<Task>> answer;
  engine_->EnqueueAsync(TaskSpec{.queue = "q", .payload = "[1]", .id = "a"}, answer.Callback());
  Result<Task> t = answer.Get();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->id, "a");
  EXPECT_FALSE(t->existed);
  // Committed: a fresh read sees it.
  EXPECT_EQ(engine_->Get("a")->payload, "[1]");

  Answer<Result<Task>> again;
  engine_->EnqueueAsync(TaskSpec{.queue = "q", .id = "a", .on_conflict = OnConflict::kIgnore},
                        again.Callback());
  Result<Task> existing = again.Get();
  ASSERT_TRUE(existing.ok());
  EXPECT_TRUE(existing->existed);
  EXPECT_EQ(existing->payload, "[1]");
}

TEST_F(EngineAsyncTest, InvalidInputIsAnsweredOnTheCallersThread) {
  std::thread::id answered_on;
  Status status;
  engine_->EnqueueAsync(TaskSpec{.queue = "bad queue"}, [&](Result<Task> t) {
    answered_on = std::this_thread::get_id();
    status = t.status();
  });
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.field(), "queue");
}

TEST_F(EngineAsyncTest, BatchErrorsNameTheIndexEvenForOneTask) {
  Answer<Result<std::vector<Task>>> answer;
  engine_->EnqueueBatchAsync({TaskSpec{.queue = "q", .payload = "{"}}, answer.Callback());
  EXPECT_EQ(answer.Get().status().field(), "tasks[0].payload");
}

TEST_F(EngineAsyncTest, WaitingClaimIsAnsweredWhenATaskArrives) {
  Answer<Result<std::vector<Lease>>> claim;
  engine_->ClaimAsync("q", 5, 30s, 10s, claim.Callback());
  clock_.AwaitWaiter(clock_.Now() + 10s);  // parked, with its deadline armed
  EXPECT_EQ(claim.future.wait_for(0s), std::future_status::timeout);
  const Task t = Add();
  Result<std::vector<Lease>> leases = claim.Get();
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ((*leases)[0].id, t.id);
  EXPECT_EQ((*leases)[0].attempt, 1);
}

TEST_F(EngineAsyncTest, WaitingClaimReturnsEmptyAtItsDeadline) {
  Answer<Result<std::vector<Lease>>> claim;
  engine_->ClaimAsync("q", 1, 30s, 2s, claim.Callback());
  clock_.AwaitWaiter(clock_.Now() + 2s);
  clock_.Advance(2s);
  Result<std::vector<Lease>> leases = claim.Get();
  ASSERT_TRUE(leases.ok());
  EXPECT_TRUE(leases->empty());
}

TEST_F(EngineAsyncTest, ReleaseWaitingClaimsAnswersThemEmptyAtOnce) {
  Answer<Result<std::vector<Lease>>> a;
  Answer<Result<std::vector<Lease>>> b;
  engine_->ClaimAsync("q", 1, 30s, 1h, a.Callback());
  engine_->ClaimAsync("other", 1, 30s, 1h, b.Callback());
  engine_->Sync();
  engine_->ReleaseWaitingClaims();
  EXPECT_TRUE(a.Get()->empty());
  EXPECT_TRUE(b.Get()->empty());
  // Later claims wait again.
  Answer<Result<std::vector<Lease>>> c;
  engine_->ClaimAsync("q", 1, 30s, 1h, c.Callback());
  engine_->Sync();
  EXPECT_EQ(c.future.wait_for(0s), std::future_status::timeout);
  Add();
  EXPECT_EQ(c.Get()->size(), 1u);
}

TEST_F(EngineAsyncTest, AckFailAndExtendPresentTheToken) {
  const Task one = Add();
  const Task two = Add();
  auto leases = engine_->Claim("q", 2, 30s);
  ASSERT_EQ(leases->size(), 2u);
  const uint64_t token = (*leases)[0].token;

  Answer<Result<Timestamp>> extended;
  engine_->ExtendAsync(one.id, token, 60s, extended.Callback());
  EXPECT_EQ(*extended.Get(), clock_.Now() + 60s);

  Answer<Status> stale;
  engine_->FailAsync(two.id, token + 1, "boom", std::nullopt, "", stale.Callback());
  EXPECT_EQ(stale.Get().code(), StatusCode::kFailedPrecondition);

  Answer<Status> failed;
  engine_->FailAsync(two.id, token, "boom", 5s, "HTTP 503: later", failed.Callback());
  EXPECT_TRUE(failed.Get().ok());
  EXPECT_EQ(engine_->Get(two.id)->state, TaskState::kScheduled);
  EXPECT_EQ(engine_->Get(two.id)->last_error, "boom");
  EXPECT_EQ(engine_->Get(two.id)->last_response, "HTTP 503: later");

  Answer<Result<std::vector<Status>>> acked;
  engine_->AckManyAsync({{one.id, token, "HTTP 204"}, {two.id, token, "HTTP 200: ignored"}},
                        acked.Callback());
  Result<std::vector<Status>> statuses = acked.Get();
  ASSERT_TRUE(statuses.ok());
  EXPECT_TRUE((*statuses)[0].ok());
  EXPECT_EQ((*statuses)[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->Get(one.id)->state, TaskState::kSucceeded);
  EXPECT_EQ(engine_->Get(one.id)->last_response, "HTTP 204");
  // A refused ack keeps nothing: two still has its failure's response.
  EXPECT_EQ(engine_->Get(two.id)->last_response, "HTTP 503: later");
}

TEST_F(EngineAsyncTest, CancelRescheduleAndRetry) {
  Add(10s, "x");
  Answer<Result<Task>> moved;
  engine_->RescheduleAsync("x", clock_.Now() + 20s, "[2]", moved.Callback());
  EXPECT_EQ(moved.Get()->run_at, clock_.Now() + 20s);
  EXPECT_EQ(engine_->Get("x")->payload, "[2]");

  Answer<Result<Task>> cancelled;
  engine_->CancelAsync("x", cancelled.Callback());
  EXPECT_EQ(cancelled.Get()->state, TaskState::kCancelled);

  Answer<Result<Task>> retried;
  engine_->RetryAsync("x", retried.Callback());
  EXPECT_EQ(retried.Get().status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineAsyncTest, AClaimWaitingWhenTheEngineStopsIsAnsweredEmpty) {
  Answer<Result<std::vector<Lease>>> parked;
  engine_->ClaimAsync("q", 1, 30s, 1h, parked.Callback());
  engine_->Sync();
  engine_.reset();
  EXPECT_TRUE(parked.Get()->empty());
}

TEST_F(EngineAsyncTest, AClaimCarriesThePreviousClaimsAcknowledgements) {
  Task a = Add(), b = Add();
  Result<std::vector<Lease>> first = engine_->Claim("q", 1, 30s);
  ASSERT_TRUE(first.ok() && first->size() == 1u);
  const Lease& l = first->front();

  // A bad acknowledgement refuses the whole request: nothing is acknowledged
  // and nothing claimed.
  Answer<Result<ClaimAnswer>> refused;
  engine_->ClaimAsync(ClaimRequest{.queue = "q", .acks = {{l.id, l.token}, {"", 1}}},
                      refused.Callback());
  EXPECT_EQ(refused.Get().status().field(), "acks[1].id");
  EXPECT_EQ(StateOf(l.id), TaskState::kRunning);

  Answer<Result<ClaimAnswer>> answer;
  engine_->ClaimAsync(ClaimRequest{.queue = "q", .max = 5, .acks = {{l.id, l.token}, {l.id, 99}}},
                      answer.Callback());
  Result<ClaimAnswer> got = answer.Get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->acks.size(), 2u);
  EXPECT_TRUE(got->acks[0].ok());
  EXPECT_EQ(got->acks[1].reason(), StatusReason::kStaleToken);
  ASSERT_EQ(got->leases.size(), 1u);
  EXPECT_EQ(got->leases[0].id, l.id == a.id ? b.id : a.id);
  EXPECT_EQ(StateOf(l.id), TaskState::kSucceeded);

  // Without acknowledgements it is a plain claim.
  Answer<Result<ClaimAnswer>> empty;
  engine_->ClaimAsync(ClaimRequest{.queue = "q"}, empty.Callback());
  Result<ClaimAnswer> none = empty.Get();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->leases.empty());
  EXPECT_TRUE(none->acks.empty());
}

}  // namespace
}  // namespace chronoq
