// The lock table on its own: grants, FIFO waiters, lease lapses, waits that
// run out, stale tokens, and what survives Forget() + Load() (a failed
// commit). Times are plain values: the table never reads a clock.
#include "locks/lock_table.h"

#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite/sqlite_store.h"
#include "support/engine_fixture.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using std::chrono::seconds;
using test::IsOk;
using test::StatusIs;
using ::testing::ElementsAre;

const Timestamp kT0 = Timestamp(seconds(1'800'000'000));

class LockTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = OpenSqliteStore({.path = dir_.File("locks.db")});
    ASSERT_THAT(store, IsOk());
    store_ = std::move(*store);
    table_ = std::make_unique<LockTable>(*store_, [this] { return tokens_++; });
    ASSERT_THAT(store_->Begin(), IsOk());
  }
  void TearDown() override { EXPECT_THAT(store_->Commit(), IsOk()); }

  std::unique_ptr<LockWait> Wait(const std::string& key, Duration wait,
                                 Duration lease = seconds(30)) {
    return std::make_unique<LockWait>(key, LockRequest{wait, lease, ""}, kT0 + wait);
  }
  // TimedWork at `now`; the waits it answered.
  std::vector<LockWait*> Tick(Timestamp now) {
    std::vector<LockWait*> answered;
    EXPECT_THAT(table_->TimedWork(now, answered), IsOk());
    return answered;
  }

  test::TempDir dir_;
  std::unique_ptr<Store> store_;
  uint64_t tokens_ = 100;
  std::unique_ptr<LockTable> table_;
};

TEST_F(LockTableTest, AFreeKeyIsGrantedAtOnceWithAGrowingToken) {
  auto a = Wait("a", Duration::zero());
  auto b = Wait("b", Duration::zero());
  EXPECT_TRUE(table_->Acquire(a.get(), kT0));
  EXPECT_TRUE(table_->Acquire(b.get(), kT0));
  ASSERT_THAT(a->result, IsOk());
  ASSERT_THAT(b->result, IsOk());
  EXPECT_EQ(a->result->token, 100u);
  EXPECT_EQ(b->result->token, 101u);
  EXPECT_EQ(a->result->expires_at, kT0 + seconds(30));
  EXPECT_EQ(table_->keys(), 2u);
  EXPECT_EQ(table_->held(), 2u);
}

TEST_F(LockTableTest, WaitersAreServedInOrderWhenTheHolderReleases) {
  auto holder = Wait("k", Duration::zero());
  auto first = Wait("k", seconds(60));
  auto second = Wait("k", seconds(60));
  ASSERT_TRUE(table_->Acquire(holder.get(), kT0));
  EXPECT_FALSE(table_->Acquire(first.get(), kT0));
  EXPECT_FALSE(table_->Acquire(second.get(), kT0));
  EXPECT_EQ(table_->Get("k").waiters, 2);
  EXPECT_THAT(table_->Release("k", holder->result->token, kT0 + seconds(1)), IsOk());
  EXPECT_THAT(Tick(kT0 + seconds(1)), ElementsAre(first.get()));
  ASSERT_THAT(first->result, IsOk());
  EXPECT_EQ(first->result->expires_at, kT0 + seconds(31));
  EXPECT_EQ(table_->Get("k").waiters, 1);
}

TEST_F(LockTableTest, ALapsedLeaseGoesToTheNextWaiterAndAWaitRunsOut) {
  auto holder = Wait("k", Duration::zero(), seconds(10));
  auto patient = Wait("k", seconds(60));
  auto hasty = Wait("j", seconds(5));
  auto j_holder = Wait("j", Duration::zero(), seconds(60));
  ASSERT_TRUE(table_->Acquire(holder.get(), kT0));
  ASSERT_TRUE(table_->Acquire(j_holder.get(), kT0));
  EXPECT_FALSE(table_->Acquire(patient.get(), kT0));
  EXPECT_FALSE(table_->Acquire(hasty.get(), kT0));
  EXPECT_EQ(table_->NextWake(), kT0 + seconds(5));
  EXPECT_THAT(Tick(kT0 + seconds(5)), ElementsAre(hasty.get()));
  EXPECT_THAT(hasty->result, StatusIs(StatusCode::kDeadlineExceeded));
  EXPECT_EQ(table_->NextWake(), kT0 + seconds(10));
  EXPECT_THAT(Tick(kT0 + seconds(10)), ElementsAre(patient.get()));
  EXPECT_THAT(patient->result, IsOk());
  // The lapsed grant's token no longer holds the key.
  EXPECT_EQ(table_->Release("k", holder->result->token, kT0 + seconds(11)).field(), "token");
}

TEST_F(LockTableTest, ATryLockOnAHeldKeyAnswersAtOnce) {
  auto holder = Wait("k", Duration::zero());
  auto other = Wait("k", Duration::zero());
  ASSERT_TRUE(table_->Acquire(holder.get(), kT0));
  EXPECT_TRUE(table_->Acquire(other.get(), kT0));
  EXPECT_THAT(other->result, StatusIs(StatusCode::kDeadlineExceeded));
}

TEST_F(LockTableTest, ExtendMovesTheLeaseAndStaleTokensAreRefused) {
  auto holder = Wait("k", Duration::zero());
  ASSERT_TRUE(table_->Acquire(holder.get(), kT0));
  const uint64_t token = holder->result->token;
  Result<LockGrant> extended = table_->Extend("k", token, kT0 + seconds(90));
  ASSERT_THAT(extended, IsOk());
  EXPECT_EQ(table_->Get("k").expires_at, kT0 + seconds(90));
  EXPECT_EQ(table_->NextWake(), kT0 + seconds(90));
  EXPECT_EQ(table_->Extend("k", token + 1, kT0).status().field(), "token");
  EXPECT_EQ(table_->Release("nope", token, kT0).field(), "token");
  EXPECT_THAT(table_->Release("k", token, kT0), IsOk());
  EXPECT_EQ(table_->keys(), 0u);  // idle keys are forgotten
}

TEST_F(LockTableTest, ForgetKeepsWaitersAndLoadBringsBackWhatIsStored) {
  auto holder = Wait("k", Duration::zero());
  auto waiter = Wait("k", seconds(60));
  ASSERT_TRUE(table_->Acquire(holder.get(), kT0));
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_THAT(store_->Begin(), IsOk());
  EXPECT_FALSE(table_->Acquire(waiter.get(), kT0));
  table_->Forget();
  ASSERT_THAT(table_->Load(), IsOk());
  // The committed grant holds again; the waiter still waits for it.
  EXPECT_TRUE(table_->Get("k").held);
  EXPECT_EQ(Tick(kT0 + seconds(1)).size(), 0u);
  EXPECT_EQ(table_->Get("k").waiters, 1);
  EXPECT_THAT(table_->Release("k", holder->result->token, kT0 + seconds(2)), IsOk());
  EXPECT_THAT(Tick(kT0 + seconds(2)), ElementsAre(waiter.get()));
}

TEST_F(LockTableTest, AnsweringAllWaitersHandsThemBackOnce) {
  auto holder = Wait("k", Duration::zero());
  auto w1 = Wait("k", seconds(60));
  auto w2 = Wait("other", seconds(60));
  auto other_holder = Wait("other", Duration::zero());
  ASSERT_TRUE(table_->Acquire(holder.get(), kT0));
  ASSERT_TRUE(table_->Acquire(other_holder.get(), kT0));
  EXPECT_FALSE(table_->Acquire(w1.get(), kT0));
  EXPECT_FALSE(table_->Acquire(w2.get(), kT0));
  table_->AnswerAllWaiters(Status::Unavailable("stopping"));
  EXPECT_EQ(table_->NextWake(), Timestamp::min());
  std::vector<LockWait*> answered = Tick(kT0);
  EXPECT_EQ(answered.size(), 2u);
  EXPECT_THAT(w1->result, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(w2->result, StatusIs(StatusCode::kUnavailable));
  EXPECT_EQ(table_->waiters(), 0u);
  EXPECT_TRUE(Tick(kT0).empty());
}

}  // namespace
}  // namespace chronoq
