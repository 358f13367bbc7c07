#include "timer/window.h"

#include <chrono>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace chronoq {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));
constexpr int64_t kQ1 = 1;
constexpr int64_t kQ2 = 2;

Window::Key K(Timestamp due, int priority, int64_t seq) { return Window::Key{due, priority, seq}; }

// Pops everything due at `now` from `qid`, returning the seqs in order.
std::vector<int64_t> DrainSeqs(Window& w, int64_t qid, Timestamp now) {
  std::vector<int64_t> out;
  while (std::optional<Window::Key> k = w.PopDue(qid, now)) out.push_back(k->seq);
  return out;
}

TEST(WindowTest, NewWindowIsEmptyAndCoversNothing) {
  Window w;
  EXPECT_EQ(w.size(), 0u);
  EXPECT_FALSE(w.Covers(kNow));
  EXPECT_FALSE(w.Covers(Timestamp()));
  EXPECT_FALSE(w.PopDue(kQ1, kForever).has_value());
  EXPECT_FALSE(w.EarliestDue(kQ1).has_value());
}

TEST(WindowTest, CoversIsStrictlyBeforeTheHorizon) {
  Window w;
  w.set_horizon(kNow + seconds(60));
  EXPECT_EQ(w.horizon(), kNow + seconds(60));
  EXPECT_TRUE(w.Covers(kNow));
  EXPECT_TRUE(w.Covers(kNow + seconds(60) - Duration(1)));
  EXPECT_FALSE(w.Covers(kNow + seconds(60)));
  EXPECT_FALSE(w.Covers(kNow + seconds(61)));
  EXPECT_TRUE(w.Covers(Timestamp()));
}

TEST(WindowTest, HorizonCanMove) {
  Window w;
  w.set_horizon(kNow);
  EXPECT_FALSE(w.Covers(kNow + seconds(1)));
  w.set_horizon(kNow + seconds(2));
  EXPECT_TRUE(w.Covers(kNow + seconds(1)));
}

TEST(WindowTest, AddAndRemove) {
  Window w;
  const Window::Key a = K(kNow, 0, 10);
  const Window::Key b = K(kNow + seconds(1), 0, 11);
  w.Add(kQ1, a);
  w.Add(kQ1, b);
  EXPECT_EQ(w.size(), 2u);

  EXPECT_TRUE(w.Remove(kQ1, a));
  EXPECT_EQ(w.size(), 1u);
  EXPECT_FALSE(w.Remove(kQ1, a));  // already gone
  EXPECT_EQ(w.size(), 1u);
  EXPECT_EQ(w.EarliestDue(kQ1), kNow + seconds(1));

  EXPECT_TRUE(w.Remove(kQ1, b));
  EXPECT_EQ(w.size(), 0u);
  EXPECT_FALSE(w.EarliestDue(kQ1).has_value());
}

TEST(WindowTest, RemoveNeedsTheExactKeyAndQueue) {
  Window w;
  w.Add(kQ1, K(kNow, 3, 10));
  EXPECT_FALSE(w.Remove(kQ2, K(kNow, 3, 10)));                // other queue
  EXPECT_FALSE(w.Remove(kQ1, K(kNow + Duration(1), 3, 10)));  // other due
  EXPECT_FALSE(w.Remove(kQ1, K(kNow, 4, 10)));                // other priority
  EXPECT_FALSE(w.Remove(kQ1, K(kNow, 3, 11)));                // other seq
  EXPECT_EQ(w.size(), 1u);
  EXPECT_TRUE(w.Remove(kQ1, K(kNow, 3, 10)));
  EXPECT_EQ(w.size(), 0u);
}

TEST(WindowTest, DuplicateAddIsCountedOnce) {
  Window w;
  w.Add(kQ1, K(kNow, 0, 10));
  w.Add(kQ1, K(kNow, 0, 10));
  EXPECT_EQ(w.size(), 1u);
  // The same key in another queue is another entry.
  w.Add(kQ2, K(kNow, 0, 10));
  EXPECT_EQ(w.size(), 2u);

  ASSERT_TRUE(w.PopDue(kQ1, kNow).has_value());
  EXPECT_FALSE(w.PopDue(kQ1, kNow).has_value());
  EXPECT_EQ(w.size(), 1u);
}

TEST(WindowTest, PopDueOrdersByDueThenPriorityThenSeq) {
  Window w;
  // Added out of order on purpose.
  w.Add(kQ1, K(kNow + seconds(2), -10, 1));
  w.Add(kQ1, K(kNow + seconds(1), 5, 2));
  w.Add(kQ1, K(kNow + seconds(1), 0, 9));
  w.Add(kQ1, K(kNow + seconds(1), 0, 3));
  w.Add(kQ1, K(kNow, 100, 8));
  w.Add(kQ1, K(kNow + seconds(1), -1, 7));
  EXPECT_EQ(DrainSeqs(w, kQ1, kNow + seconds(10)), (std::vector<int64_t>{8, 7, 3, 9, 2, 1}));
  EXPECT_EQ(w.size(), 0u);
}

TEST(WindowTest, PopDueReturnsTheWholeKey) {
  Window w;
  w.Add(kQ1, K(kNow + milliseconds(5), -3, 42));
  std::optional<Window::Key> k = w.PopDue(kQ1, kNow + seconds(1));
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->due, kNow + milliseconds(5));
  EXPECT_EQ(k->priority, -3);
  EXPECT_EQ(k->seq, 42);
}

TEST(WindowTest, NothingIsPoppedBeforeItIsDue) {
  Window w;
  w.Add(kQ1, K(kNow + seconds(1), 0, 1));
  EXPECT_FALSE(w.PopDue(kQ1, kNow).has_value());
  EXPECT_FALSE(w.PopDue(kQ1, kNow + seconds(1) - Duration(1)).has_value());
  EXPECT_EQ(w.size(), 1u);
  // Due exactly now counts.
  std::optional<Window::Key> k = w.PopDue(kQ1, kNow + seconds(1));
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->seq, 1);
  EXPECT_EQ(w.size(), 0u);
}

TEST(WindowTest, PopDueStopsAtTheFirstFutureEntry) {
  Window w;
  w.Add(kQ1, K(kNow - seconds(1), 0, 1));
  w.Add(kQ1, K(kNow, 0, 2));
  w.Add(kQ1, K(kNow + seconds(1), -100, 3));  // a better priority does not make it due
  EXPECT_EQ(DrainSeqs(w, kQ1, kNow), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(w.size(), 1u);
  EXPECT_EQ(w.EarliestDue(kQ1), kNow + seconds(1));
}

TEST(WindowTest, QueuesAreSeparate) {
  Window w;
  w.Add(kQ1, K(kNow, 0, 1));
  w.Add(kQ2, K(kNow - seconds(5), 0, 2));
  w.Add(kQ2, K(kNow + seconds(5), 0, 3));
  EXPECT_EQ(w.size(), 3u);

  EXPECT_EQ(w.EarliestDue(kQ1), kNow);
  EXPECT_EQ(w.EarliestDue(kQ2), kNow - seconds(5));
  EXPECT_FALSE(w.EarliestDue(3).has_value());
  EXPECT_FALSE(w.PopDue(3, kForever).has_value());

  EXPECT_EQ(DrainSeqs(w, kQ1, kNow), (std::vector<int64_t>{1}));
  EXPECT_EQ(w.size(), 2u);
  EXPECT_FALSE(w.PopDue(kQ1, kForever).has_value());  // q2's entries are not q1's
  EXPECT_EQ(DrainSeqs(w, kQ2, kNow), (std::vector<int64_t>{2}));
  EXPECT_EQ(DrainSeqs(w, kQ2, kForever), (std::vector<int64_t>{3}));
  EXPECT_EQ(w.size(), 0u);
}

TEST(WindowTest, EarliestDueIgnoresPriority) {
  Window w;
  w.Add(kQ1, K(kNow + seconds(3), -50, 1));
  w.Add(kQ1, K(kNow + seconds(2), 50, 2));
  EXPECT_EQ(w.EarliestDue(kQ1), kNow + seconds(2));
  ASSERT_TRUE(w.Remove(kQ1, K(kNow + seconds(2), 50, 2)));
  EXPECT_EQ(w.EarliestDue(kQ1), kNow + seconds(3));
}

TEST(WindowTest, ClearEmptiesEverythingAndResetsTheHorizon) {
  Window w;
  w.set_horizon(kNow + seconds(60));
  w.Add(kQ1, K(kNow, 0, 1));
  w.Add(kQ2, K(kNow, 0, 2));
  w.Clear();
  EXPECT_EQ(w.size(), 0u);
  EXPECT_FALSE(w.EarliestDue(kQ1).has_value());
  EXPECT_FALSE(w.EarliestDue(kQ2).has_value());
  EXPECT_FALSE(w.PopDue(kQ1, kForever).has_value());
  EXPECT_FALSE(w.Covers(kNow));
  EXPECT_EQ(w.horizon(), Timestamp::min());

  // Usable again afterwards.
  w.Add(kQ1, K(kNow, 0, 3));
  EXPECT_EQ(w.size(), 1u);
  EXPECT_EQ(DrainSeqs(w, kQ1, kNow), (std::vector<int64_t>{3}));
}

TEST(WindowTest, SizeTracksManyOperations) {
  Window w;
  for (int64_t seq = 1; seq <= 100; ++seq) {
    w.Add(seq % 3, K(kNow + milliseconds(seq % 10), static_cast<int>(seq % 4), seq));
  }
  EXPECT_EQ(w.size(), 100u);
  for (int64_t seq = 1; seq <= 100; seq += 2) {
    ASSERT_TRUE(
        w.Remove(seq % 3, K(kNow + milliseconds(seq % 10), static_cast<int>(seq % 4), seq)));
  }
  EXPECT_EQ(w.size(), 50u);
  size_t popped = 0;
  for (int64_t q = 0; q < 3; ++q) popped += DrainSeqs(w, q, kForever).size();
  EXPECT_EQ(popped, 50u);
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
}  // namespace chronoq
