#include "dispatch/lease_table.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "common/task_id.h"

namespace chronoq {
namespace {

using std::chrono::seconds;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));

// A running task; without an explicit id it gets its generated one.
RunningTask Running(int64_t seq, Timestamp lease_until, uint64_t token = 1, std::string id = "") {
  RunningTask t;
  t.seq = seq;
  t.qid = 7;
  t.id = id.empty() ? FormatGeneratedId(seq) : std::move(id);
  t.token = token;
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
  EXPECT_EQ(t.FindById("share:42"), nullptr);
  EXPECT_FALSE(t.Remove(1).has_value());
  EXPECT_FALSE(t.FirstExpired(kForever).has_value());
  EXPECT_FALSE(t.EarliestExpiry().has_value());
}

TEST(LeaseTableTest, AddThenFindBySeqAndById) {
  LeaseTable t;
  RunningTask task = Running(100, kNow + seconds(30), 5, "share:42");
  task.backoff = Backoff{seconds(2), seconds(20)};
  t.Add(task);
  t.Add(Running(101, kNow + seconds(30), 5));  // same claim, generated id
  EXPECT_EQ(t.size(), 2u);

  const RunningTask* found = t.Find(100);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->id, "share:42");
  EXPECT_EQ(found->token, 5u);
  EXPECT_EQ(found->qid, 7);
  EXPECT_EQ(found->lease_until, kNow + seconds(30));
  EXPECT_EQ(found->attempt, 2);
  EXPECT_EQ(found->max_attempts, 5);
  EXPECT_EQ(found->priority, -1);
  ASSERT_TRUE(found->backoff.has_value());
  EXPECT_EQ(found->backoff->cap, seconds(20));

  EXPECT_EQ(t.FindById("share:42"), found);
  ASSERT_NE(t.FindById(FormatGeneratedId(101)), nullptr);
  EXPECT_EQ(t.FindById(FormatGeneratedId(101))->seq, 101);
  EXPECT_EQ(t.FindById("share:43"), nullptr);
  EXPECT_EQ(t.FindById(FormatGeneratedId(102)), nullptr);
}

TEST(LeaseTableTest, AddReplacesTheLeaseOfTheSameTask) {
  LeaseTable t;
  t.Add(Running(1, kNow + seconds(10), 3, "a"));
  t.Add(Running(1, kNow + seconds(50), 9, "a"));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.Find(1)->token, 9u);
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(50));
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(10)).has_value());
}

TEST(LeaseTableTest, RemoveReturnsTheTaskOnceAndForgetsItsId) {
  LeaseTable t;
  t.Add(Running(1, kNow + seconds(10), 3, "named"));
  std::optional<RunningTask> removed = t.Remove(1);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->id, "named");
  EXPECT_FALSE(t.Remove(1).has_value());
  EXPECT_EQ(t.FindById("named"), nullptr);
  EXPECT_FALSE(t.EarliestExpiry().has_value());
  EXPECT_EQ(t.size(), 0u);
}

TEST(LeaseTableTest, FirstExpiredRespectsNow) {
  LeaseTable t;
  t.Add(Running(1, kNow + seconds(10)));
  EXPECT_FALSE(t.FirstExpired(kNow).has_value());
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(10) - Duration(1)).has_value());
  EXPECT_EQ(t.FirstExpired(kNow + seconds(10)), 1);  // a lease ends at its instant
}

TEST(LeaseTableTest, FirstExpiredIsTheEarliestLease) {
  LeaseTable t;
  t.Add(Running(1, kNow + seconds(30)));
  t.Add(Running(2, kNow + seconds(10)));
  t.Add(Running(3, kNow + seconds(20)));
  EXPECT_EQ(t.FirstExpired(kForever), 2);
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(10));
  t.Remove(2);
  EXPECT_EQ(t.FirstExpired(kForever), 3);
}

TEST(LeaseTableTest, ExtendMovesTheExpiry) {
  LeaseTable t;
  t.Add(Running(1, kNow + seconds(10)));
  t.Add(Running(2, kNow + seconds(20)));
  t.Extend(1, kNow + seconds(60));
  EXPECT_EQ(t.Find(1)->lease_until, kNow + seconds(60));
  EXPECT_EQ(t.FirstExpired(kNow + seconds(30)), 2);
  t.Remove(2);
  EXPECT_FALSE(t.FirstExpired(kNow + seconds(30)).has_value());
  EXPECT_EQ(t.EarliestExpiry(), kNow + seconds(60));
}

TEST(LeaseTableTest, ClearEmptiesEveryIndex) {
  LeaseTable t;
  t.Add(Running(1, kNow, 1, "x"));
  t.Add(Running(2, kNow));
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.FindById("x"), nullptr);
  EXPECT_FALSE(t.FirstExpired(kForever).has_value());
}

}  // namespace
}  // namespace chronoq
