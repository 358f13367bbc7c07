// Keyed locks on the fake clock: one holder, FIFO waiters, lease lapse
// hand-over, wait timeouts, stale tokens, fencing tokens and restarts.
#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/engine.h"
#include "chronoq/lock.h"

#include "support/answer.h"
#include "support/engine_fixture.h"
#include "support/faulty_engine_fixture.h"

namespace chronoq {
namespace {

using std::chrono::seconds;
using Waiter = test::Answer<Result<LockGrant>>;

class EngineLockTest : public test::EngineFixture {
 protected:
  LockGrant Acquire(const std::string& key, Duration lease = seconds(30),
                    const std::string& owner = "") {
    Result<LockGrant> g = engine_->AcquireLock(key, {Duration::zero(), lease, owner});
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? *g : LockGrant{};
  }

  // Queues an acquisition that waits up to `wait`.
  Waiter Wait(const std::string& key, Duration wait, Duration lease = seconds(30)) {
    Waiter w;
    engine_->AcquireLockAsync(key, {wait, lease, ""}, w.Callback());
    engine_->Sync();
    return w;
  }

  LockInfo Info(const std::string& key) {
    Result<LockInfo> i = engine_->GetLock(key);
    EXPECT_TRUE(i.ok()) << i.status().ToString();
    return i.ok() ? *i : LockInfo{};
  }
};

TEST_F(EngineLockTest, AcquireShowsTheHolderAndReleaseFreesTheKey) {
  const LockGrant g = Acquire("invoice:42", seconds(30), "worker-3");
  EXPECT_GT(g.token, 0u);
  EXPECT_EQ(g.expires_at, clock_.Now() + seconds(30));
  LockInfo info = Info("invoice:42");
  EXPECT_TRUE(info.held);
  EXPECT_EQ(info.owner, "worker-3");
  EXPECT_EQ(info.expires_at, g.expires_at);
  EXPECT_EQ(info.waiters, 0);
  ASSERT_TRUE(engine_->ReleaseLock("invoice:42", g.token).ok());
  info = Info("invoice:42");
  EXPECT_FALSE(info.held);
  EXPECT_FALSE(info.expires_at.has_value());
  // Free again.
  EXPECT_GT(Acquire("invoice:42").token, g.token);
}

TEST_F(EngineLockTest, ListLocksShowsHoldersAndWaitersInKeyOrderByPages) {
  const LockGrant b = Acquire("b", seconds(30), "worker-b");
  const LockGrant a = Acquire("a", seconds(60), "worker-a");
  Acquire("c");
  Waiter w = Wait("b", seconds(60));
  Result<std::vector<LockInfo>> all = engine_->ListLocks("", 10);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].key, "a");
  EXPECT_EQ((*all)[0].owner, "worker-a");
  EXPECT_EQ((*all)[0].token, a.token);
  EXPECT_EQ((*all)[0].expires_at, a.expires_at);
  EXPECT_EQ((*all)[0].waiters, 0);
  EXPECT_EQ((*all)[1].key, "b");
  EXPECT_EQ((*all)[1].token, b.token);
  EXPECT_EQ((*all)[1].waiters, 1);
  EXPECT_EQ((*all)[2].key, "c");
  // Pages: after "a", one at a time.
  Result<std::vector<LockInfo>> page = engine_->ListLocks("a", 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].key, "b");
  EXPECT_TRUE(engine_->ListLocks("c", 10)->empty());
  EXPECT_EQ(engine_->ListLocks("", 0).status().field(), "limit");
  // A released key with no waiter is gone from the list.
  ASSERT_TRUE(engine_->ReleaseLock("a", a.token).ok());
  EXPECT_EQ(engine_->ListLocks("", 10)->front().key, "b");
}

TEST_F(EngineLockTest, ATryLockOnAHeldKeyAnswersAtOnce) {
  Acquire("k");
  Result<LockGrant> second = engine_->AcquireLock("k", {Duration::zero(), seconds(30), ""});
  EXPECT_EQ(second.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(second.status().field(), "wait_ms");
  EXPECT_TRUE(engine_->AcquireLock("other", {}).ok());  // keys are independent
}

TEST_F(EngineLockTest, WaitersAreServedFirstComeFirstServed) {
  const LockGrant first = Acquire("k");
  Waiter a = Wait("k", seconds(60));
  Waiter b = Wait("k", seconds(60));
  EXPECT_EQ(Info("k").waiters, 2);
  EXPECT_FALSE(a.ready());
  ASSERT_TRUE(engine_->ReleaseLock("k", first.token).ok());
  Result<LockGrant> ga = a.Get();
  ASSERT_TRUE(ga.ok()) << ga.status().ToString();
  EXPECT_GT(ga->token, first.token);
  EXPECT_FALSE(b.ready());
  EXPECT_EQ(Info("k").waiters, 1);
  ASSERT_TRUE(engine_->ReleaseLock("k", ga->token).ok());
  Result<LockGrant> gb = b.Get();
  ASSERT_TRUE(gb.ok());
  EXPECT_GT(gb->token, ga->token);
}

TEST_F(EngineLockTest, ALapsedLeaseHandsTheLockToTheNextWaiterAtOnce) {
  const LockGrant holder = Acquire("k", seconds(5));
  Waiter w = Wait("k", seconds(60));
  clock_.Advance(seconds(4));
  engine_->Sync();
  EXPECT_FALSE(w.ready());
  clock_.Advance(seconds(1));
  engine_->Sync();
  Result<LockGrant> g = w.Get();
  ASSERT_TRUE(g.ok());
  EXPECT_GT(g->token, holder.token);
  // The old holder's token is stale now: a resource can refuse it.
  EXPECT_EQ(engine_->ReleaseLock("k", holder.token).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->ExtendLock("k", holder.token, seconds(5)).status().field(), "token");
}

TEST_F(EngineLockTest, AWaitThatRunsOutAnswersDeadlineExceeded) {
  Acquire("k");
  Waiter w = Wait("k", seconds(2));
  clock_.Advance(seconds(2));
  engine_->Sync();
  EXPECT_EQ(w.Get().status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Info("k").waiters, 0);
  EXPECT_TRUE(Info("k").held);
}

TEST_F(EngineLockTest, ExtendMovesTheLeaseEnd) {
  const LockGrant g = Acquire("k", seconds(5));
  clock_.Advance(seconds(4));
  Result<LockGrant> e = engine_->ExtendLock("k", g.token, seconds(10));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->token, g.token);
  EXPECT_EQ(e->expires_at, clock_.Now() + seconds(10));
  clock_.Advance(seconds(9));
  engine_->Sync();
  EXPECT_TRUE(Info("k").held);
  clock_.Advance(seconds(1));
  engine_->Sync();
  EXPECT_FALSE(Info("k").held);
}

TEST_F(EngineLockTest, AWrongTokenChangesNothing) {
  const LockGrant g = Acquire("k");
  EXPECT_EQ(engine_->ReleaseLock("k", g.token + 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->ReleaseLock("nobody", g.token).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Info("k").held);
  EXPECT_TRUE(engine_->ReleaseLock("k", g.token).ok());
  EXPECT_EQ(engine_->ReleaseLock("k", g.token).code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineLockTest, AHeldLockSurvivesARestartUntilItsLeaseEnds) {
  const LockGrant g = Acquire("k", seconds(30), "worker-1");
  engine_.reset();
  Open();
  LockInfo info = Info("k");
  EXPECT_TRUE(info.held);
  EXPECT_EQ(info.owner, "worker-1");
  EXPECT_EQ(engine_->AcquireLock("k", {}).status().code(), StatusCode::kDeadlineExceeded);
  // Tokens keep growing across the restart, here and on other keys.
  const LockGrant other = Acquire("other");
  EXPECT_GT(other.token, g.token);
  // The lease still ends on time.
  clock_.Advance(seconds(30));
  engine_->Sync();
  EXPECT_FALSE(Info("k").held);
  EXPECT_GT(Acquire("k").token, other.token);
}

// The store keeps a ceiling above the tokens handed out, raised a block at a
// time (core.h): past several blocks, and across a restart, they still only
// grow.
// 9,000 grants: past two blocks of tokens (Core::kTokenBlock). Asked for
// 1,000 keys at a time, so that the loop commits each wave in a few commits
// (one at a time they were 18,000 commits: 8 s on PostgreSQL).
TEST_F(EngineLockTest, TokensGrowPastManyBlocksAndARestart) {
  uint64_t last = 0;
  for (int wave = 0; wave < 9; ++wave) {
    std::vector<Waiter> grants(1000);
    for (size_t i = 0; i < grants.size(); ++i) {
      engine_->AcquireLockAsync("k" + std::to_string(i), {Duration::zero(), seconds(30), ""},
                                grants[i].Callback());
    }
    std::vector<test::Answer<Status>> released(grants.size());
    uint64_t wave_max = 0;
    std::set<uint64_t> tokens;
    for (size_t i = 0; i < grants.size(); ++i) {
      Result<LockGrant> g = grants[i].Get();
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ASSERT_GT(g->token, last);  // above every earlier wave's
      tokens.insert(g->token);
      wave_max = std::max(wave_max, g->token);
      engine_->ReleaseLockAsync("k" + std::to_string(i), g->token, released[i].Callback());
    }
    ASSERT_EQ(tokens.size(), grants.size());  // no token given twice
    for (test::Answer<Status>& r : released) ASSERT_TRUE(r.Get().ok());
    last = wave_max;
  }
  engine_.reset();
  Open();
  EXPECT_GT(Acquire("k").token, last);
}

TEST_F(EngineLockTest, ALeaseThatEndedWhileDownIsFreeAfterRestart) {
  Acquire("k", seconds(5));
  engine_.reset();
  clock_.Advance(seconds(6));
  Open();
  engine_->Sync();
  EXPECT_FALSE(Info("k").held);
  EXPECT_TRUE(engine_->AcquireLock("k", {}).ok());
}

// No sweeper: a key nobody holds or waits for is forgotten at once.
TEST_F(EngineLockTest, KeysNobodyHoldsLeaveNothingBehind) {
  for (int i = 0; i < 2000; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(engine_->ReleaseLock(key, Acquire(key, seconds(i % 2 == 0 ? 30 : 1)).token).ok());
  }
  Acquire("held", seconds(5));
  Acquire("lapses", seconds(1));
  Waiter w = Wait("held", seconds(2));
  engine_->Sync();
  EngineStats s = engine_->Stats();
  EXPECT_EQ(s.lock_keys, 2u);
  EXPECT_EQ(s.locks_held, 2u);
  EXPECT_EQ(s.lock_waiters, 1u);
  clock_.Advance(seconds(2));  // "lapses" lapses, the wait runs out
  engine_->Sync();
  EXPECT_EQ(w.Get().status().code(), StatusCode::kDeadlineExceeded);
  s = engine_->Stats();
  EXPECT_EQ(s.lock_keys, 1u);
  EXPECT_EQ(s.locks_held, 1u);
  EXPECT_EQ(s.lock_waiters, 0u);
}

TEST_F(EngineLockTest, ReleasingWaitingCallsAnswersLockWaitersUnavailable) {
  Acquire("k");
  Waiter w = Wait("k", seconds(600));
  engine_->ReleaseWaitingClaims();
  EXPECT_EQ(w.Get().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Info("k").waiters, 0);
}

TEST_F(EngineLockTest, LockTokensAreFencingTokensSharedWithLeases) {
  const LockGrant a = Acquire("a");
  Add();
  Result<std::vector<Lease>> claimed = engine_->Claim("q", 1, seconds(30));
  ASSERT_TRUE(claimed.ok());
  ASSERT_EQ(claimed->size(), 1u);
  const LockGrant b = Acquire("b");
  EXPECT_GT(claimed->front().token, a.token);
  EXPECT_GT(b.token, claimed->front().token);
}

TEST_F(EngineLockTest, BadInputNamesTheField) {
  struct Case {
    std::string key;
    LockRequest request;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"", {}, "key"},
      {std::string(201, 'k'), {}, "key"},
      {"a\nb", {}, "key"},
      {"k", {seconds(-1), seconds(30), ""}, "wait_ms"},
      {"k", {std::chrono::hours(2), seconds(30), ""}, "wait_ms"},
      {"k", {Duration::zero(), Duration::zero(), ""}, "lease_ms"},
      {"k", {Duration::zero(), std::chrono::hours(24 * 8), ""}, "lease_ms"},
      {"k", {Duration::zero(), seconds(30), std::string(201, 'o')}, "owner"},
  };
  for (const Case& c : cases) {
    Result<LockGrant> g = engine_->AcquireLock(c.key, c.request);
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(g.status().field(), c.field) << g.status().ToString();
    Waiter w;
    engine_->AcquireLockAsync(c.key, c.request, w.Callback());
    EXPECT_EQ(w.Get().status().field(), c.field);
  }
  EXPECT_FALSE(Info("k").held);
  EXPECT_EQ(engine_->ExtendLock("k", 1, Duration::zero()).status().field(), "lease_ms");
}

TEST_F(EngineLockTest, TheGuardReleasesOnScopeExit) {
  uint64_t token = 0;
  {
    Result<LockGuard> guard = LockGuard::Acquire(*engine_, "k", {});
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    token = guard->token();
    EXPECT_TRUE(Info("k").held);
    ASSERT_TRUE(guard->Extend(seconds(60)).ok());
    EXPECT_EQ(guard->expires_at(), clock_.Now() + seconds(60));
    LockGuard moved = std::move(*guard);
    EXPECT_EQ(moved.token(), token);
  }
  EXPECT_FALSE(Info("k").held);
  Result<LockGuard> again = LockGuard::Acquire(*engine_, "k", {});
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->token(), token);
  ASSERT_TRUE(again->Release().ok());
  EXPECT_FALSE(Info("k").held);
}

// Eight threads take turns on one key through a resource that checks fencing
// tokens: it never sees two holders at once, nor a token that went backwards.
TEST_F(EngineLockTest, UnderContentionThereIsNeverASecondHolder) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 150;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<uint64_t> last_token{0};  // the resource's high-water mark
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        // The fake clock never moves, so waits never run out.
        Result<LockGrant> g =
            engine_->AcquireLock("shared", {std::chrono::hours(1), seconds(30), ""});
        if (!g.ok()) {
          ADD_FAILURE() << g.status().ToString();
          return;
        }
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        uint64_t seen = last_token.load();
        while (seen < g->token && !last_token.compare_exchange_weak(seen, g->token)) {
        }
        if (seen >= g->token) refused.fetch_add(1);
        inside.fetch_sub(1);
        ASSERT_TRUE(engine_->ReleaseLock("shared", g->token).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(refused.load(), 0);
  EXPECT_FALSE(Info("shared").held);
  EXPECT_EQ(Info("shared").waiters, 0);
}

class EngineLockFailureTest : public test::FaultyEngineFixture {};

// A failed commit forgets what memory learnt in it and keeps the waiters.
TEST_F(EngineLockFailureTest, AFailedCommitKeepsTheHolderAndTheQueue) {
  Result<LockGrant> holder = engine_->AcquireLock("k", {});
  ASSERT_TRUE(holder.ok());
  test::Answer<Result<LockGrant>> waiter;
  engine_->AcquireLockAsync("k", {std::chrono::hours(1), seconds(30), ""}, waiter.Callback());
  engine_->Sync();
  store_->FailNextCommits(1);
  EXPECT_EQ(engine_->ReleaseLock("k", holder->token).code(), StatusCode::kUnavailable);
  // The waiter that the failed release had granted the lock to got the error.
  EXPECT_EQ(waiter.Get().status().code(), StatusCode::kUnavailable);
  Result<LockInfo> info = engine_->GetLock("k");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);  // the release never happened
  test::Answer<Result<LockGrant>> next;
  engine_->AcquireLockAsync("k", {std::chrono::hours(1), seconds(30), ""}, next.Callback());
  engine_->Sync();
  ASSERT_TRUE(engine_->ReleaseLock("k", holder->token).ok());
  ASSERT_TRUE(next.Get().ok());

  // A grant whose commit failed was never given.
  store_->FailNextCommits(1);
  EXPECT_EQ(engine_->AcquireLock("fresh", {}).status().code(), StatusCode::kUnavailable);
  info = engine_->GetLock("fresh");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->held);
}

}  // namespace
}  // namespace chronoq
