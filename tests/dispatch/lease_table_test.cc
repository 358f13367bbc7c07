#include "dispatch/lease_table.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace chronoq {
namespace {

using std::chrono::seconds;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));

RunningTask Running(int64_t seq, Timestamp lease_until, std::string id = "") {
  RunningTask t;
  t.seq = seq;
  t.qid = 7;
  t.id = id.empty() ? "task-" + std::to_string(seq) : std::move(id);
  t.lease_until = lease_until;
  t.attempt = 2;
  t.max_attempts = 5;
  t.priority = -1;
  return t;
}

TEST(LeaseTableTest, EmptyTable) {
  LeaseTable t;
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.Find(1), nullptr);
  EXPECT_FALSE(t.Remove(1).has_value());
  EXPECT_FALSE(t.FirstExpired(kForever).has_value());
  EXPECT_FALSE(t.EarliestExpiry().has_value());
}

TEST(LeaseTableTest, AddThenFind) {
  LeaseTable t;
  RunningTask task = Running(100, kNow + seconds(30), "share:42");
  task.backoff = Backoff{seconds(2), seconds(20)};
  t.Add(5, task);
  EXPECT_EQ(t.size(), 1u);

  const RunningTask* found = t.Find(5);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->seq, 100);
  EXPECT_EQ(found->qid, 7);
  EXPECT_EQ(found->id, "share:42");
  EXPECT_EQ(found->lease_until, kNow + seconds(30));
  EXPECT_EQ(found->attempt, 2);
  EXPECT_EQ(found->max_attempts, 5);
  EXPECT_EQ(found->priority, -1);
  ASSERT_TRUE(found->backoff.has_value());
  EXPECT_EQ(found->backoff->base, seconds(2));
  EXPECT_EQ(found->backoff->cap, seconds(20));

  EXPECT_EQ(t.Find(4), nullptr);
  EXPECT_EQ(t.Find(6), nullptr);
}

TEST(LeaseTableTest, RemoveReturnsTheTaskOnce) {
  LeaseTable t;
  t.Add(1, Running(10, kNow + seconds(5)));
  t.Add(2, Running(20, kNow + seconds(6)));
  std::optional<RunningTask> removed = t.Remove(1);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->seq, 10);
  EXPECT_EQ(removed->lease_until, kNow + seconds(5));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.Find(1), nullptr);
  EXPECT_FALSE(t.Remove(1).has_value());
  EXPECT_EQ(t.size(), 1u);
  // Its expiry entry is gone too.
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(6));
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(5)).has_value());
}

TEST(LeaseTableTest, FirstExpiredRespectsNow) {
  LeaseTable t;
  t.Add(1, Running(10, kNow + seconds(10)));
  EXPECT_FALSE(t.FirstExpired(kNow).has_value());
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(10) - Duration(1)).has_value());
  EXPECT_EQ(t.FirstExpired(kNow + seconds(10)), 1u);  // a lease ending now has ended
  EXPECT_EQ(t.FirstExpired(kNow + seconds(11)), 1u);
  // Looking does not remove.
  EXPECT_EQ(t.size(), 1u);
}

TEST(LeaseTableTest, FirstExpiredIsTheEarliestLease) {
  LeaseTable t;
  t.Add(1, Running(10, kNow + seconds(30)));
  t.Add(2, Running(20, kNow + seconds(10)));
  t.Add(3, Running(30, kNow + seconds(20)));
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(10));
  EXPECT_EQ(t.FirstExpired(kForever), 2u);
  ASSERT_TRUE(t.Remove(2).has_value());
  EXPECT_EQ(t.FirstExpired(kForever), 3u);
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(15)).has_value());
}

TEST(LeaseTableTest, SameExpiryOrdersByToken) {
  LeaseTable t;
  t.Add(9, Running(90, kNow));
  t.Add(4, Running(40, kNow));
  EXPECT_EQ(t.FirstExpired(kNow), 4u);
  ASSERT_TRUE(t.Remove(4).has_value());
  EXPECT_EQ(t.FirstExpired(kNow), 9u);
}

TEST(LeaseTableTest, ExtendMovesTheExpiry) {
  LeaseTable t;
  t.Add(1, Running(10, kNow + seconds(10)));
  t.Add(2, Running(20, kNow + seconds(20)));
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(10));

  t.Extend(1, kNow + seconds(60));
  EXPECT_EQ(t.size(), 2u);
  ASSERT_NE(t.Find(1), nullptr);
  EXPECT_EQ(t.Find(1)->lease_until, kNow + seconds(60));
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(20));
  EXPECT_EQ(t.FirstExpired(kNow + seconds(30)), 2u);
  // The old expiry no longer counts.
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(15)).has_value());

  ASSERT_TRUE(t.Remove(2).has_value());
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(60));
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(59)).has_value());
  EXPECT_EQ(t.FirstExpired(kNow + seconds(60)), 1u);
}

TEST(LeaseTableTest, ExtendCanShorten) {
  LeaseTable t;
  t.Add(1, Running(10, kNow + seconds(60)));
  t.Add(2, Running(20, kNow + seconds(20)));
  t.Extend(1, kNow + seconds(5));
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(5));
  EXPECT_EQ(t.FirstExpired(kNow + seconds(5)), 1u);
}

TEST(LeaseTableTest, RemoveAfterExtendLeavesNoStaleExpiry) {
  LeaseTable t;
  t.Add(1, Running(10, kNow + seconds(10)));
  t.Extend(1, kNow + seconds(20));
  std::optional<RunningTask> removed = t.Remove(1);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->lease_until, kNow + seconds(20));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.EarliestExpiry().has_value());
  EXPECT_FALSE(t.FirstExpired(kForever).has_value());
}

TEST(LeaseTableTest, ClearEmptiesBothIndexes) {
  LeaseTable t;
  t.Add(1, Running(10, kNow));
  t.Add(2, Running(20, kNow + seconds(1)));
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.Find(1), nullptr);
  EXPECT_FALSE(t.EarliestExpiry().has_value());
  EXPECT_FALSE(t.FirstExpired(kForever).has_value());
}

TEST(LeaseTableTest, SizeCountsDistinctTokens) {
  LeaseTable t;
  for (uint64_t token = 1; token <= 50; ++token) {
    t.Add(token, Running(static_cast<int64_t>(token), kNow + seconds(static_cast<int64_t>(token))));
  }
  EXPECT_EQ(t.size(), 50u);
  for (uint64_t token = 1; token <= 50; token += 5) ASSERT_TRUE(t.Remove(token).has_value());
  EXPECT_EQ(t.size(), 40u);
  // Expired leases come out in lease order, skipping removed tokens.
  std::vector<uint64_t> order;
  while (std::optional<uint64_t> tok = t.FirstExpired(kForever)) {
    order.push_back(*tok);
    ASSERT_TRUE(t.Remove(*tok).has_value());
  }
  ASSERT_EQ(order.size(), 40u);
  for (size_t i = 1; i < order.size(); ++i) EXPECT_LT(order[i - 1], order[i]);
  EXPECT_EQ(order.front(), 2u);
  EXPECT_EQ(order.back(), 50u);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace chronoq
