#include "core/backoff.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/task.h"

namespace chronoq {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// min(cap, base * 2^(attempt-1)), computed without overflow.
Duration Ceiling(const Backoff& b, int attempt) {
  Duration c = b.base;
  for (int i = 1; i < attempt; ++i) {
    if (c >= b.cap) break;
    c *= 2;
  }
  return std::min(c, b.cap);
}

TEST(BackoffDelayTest, StaysWithinTheCeilingForEveryAttempt) {
  const Backoff b{seconds(1), hours(1)};
  std::mt19937_64 rng(12345);
  for (int attempt = 1; attempt <= 40; ++attempt) {
    const Duration ceiling = Ceiling(b, attempt);
    for (int i = 0; i < 200; ++i) {
      const Duration d = BackoffDelay(b, attempt, rng);
      ASSERT_GE(d, Duration::zero()) << "attempt " << attempt;
      ASSERT_LE(d, ceiling) << "attempt " << attempt;
    }
  }
}

TEST(BackoffDelayTest, CeilingDoublesPerAttempt) {
  // With base 100ms the ceilings are 100, 200, 400, 800ms: over many samples
  // attempt n exceeds attempt n-1's ceiling, so the doubling is real.
  const Backoff b{milliseconds(100), hours(1)};
  std::mt19937_64 rng(7);
  for (int attempt = 2; attempt <= 5; ++attempt) {
    const Duration previous_ceiling = Ceiling(b, attempt - 1);
    Duration max_seen{0};
    for (int i = 0; i < 500; ++i) max_seen = std::max(max_seen, BackoffDelay(b, attempt, rng));
    EXPECT_GT(max_seen, previous_ceiling) << "attempt " << attempt;
    EXPECT_LE(max_seen, Ceiling(b, attempt)) << "attempt " << attempt;
  }
}

TEST(BackoffDelayTest, FirstAttemptIsBoundedByBase) {
  const Backoff b{milliseconds(250), hours(1)};
  std::mt19937_64 rng(99);
  for (int i = 0; i < 1000; ++i) ASSERT_LE(BackoffDelay(b, 1, rng), milliseconds(250));
}

TEST(BackoffDelayTest, NeverExceedsTheCapEvenForHugeAttempts) {
  const Backoff b{seconds(1), seconds(30)};
  std::mt19937_64 rng(42);
  for (int attempt : {6, 7, 63, 64, 65, 100, 1000, 100'000}) {
    for (int i = 0; i < 200; ++i) {
      const Duration d = BackoffDelay(b, attempt, rng);
      ASSERT_GE(d, Duration::zero()) << "attempt " << attempt;
      ASSERT_LE(d, seconds(30)) << "attempt " << attempt;
    }
  }
}

TEST(BackoffDelayTest, LargestAllowedCapDoesNotOverflow) {
  const Backoff b{Duration(1), kMaxDelay};
  std::mt19937_64 rng(5);
  for (int attempt : {1, 2, 60, 64, 1000}) {
    const Duration ceiling = Ceiling(b, attempt);
    for (int i = 0; i < 100; ++i) {
      const Duration d = BackoffDelay(b, attempt, rng);
      ASSERT_GE(d, Duration::zero()) << "attempt " << attempt;
      ASSERT_LE(d, ceiling) << "attempt " << attempt;
    }
  }
  // At attempt 1000 the ceiling is the cap, and values near it do occur.
  Duration max_seen{0};
  for (int i = 0; i < 200; ++i) max_seen = std::max(max_seen, BackoffDelay(b, 1000, rng));
  EXPECT_GT(max_seen, kMaxDelay / 2);
}

TEST(BackoffDelayTest, JitterReachesTheUpperHalfAndTheLowerHalf) {
  const Backoff b{seconds(1), seconds(60)};
  std::mt19937_64 rng(2026);
  const Duration ceiling = seconds(60);
  int upper = 0;
  int lower = 0;
  const int kSamples = 2000;
  for (int i = 0; i < kSamples; ++i) {
    const Duration d = BackoffDelay(b, 1000, rng);
    if (d > ceiling / 2) ++upper;
    if (d < ceiling / 2) ++lower;
  }
  // Uniform: about half each. Far from both "always the ceiling" and "always 0".
  EXPECT_GT(upper, kSamples / 4);
  EXPECT_GT(lower, kSamples / 4);
}

TEST(BackoffDelayTest, JitterProducesManyDistinctValues) {
  const Backoff b{seconds(1), hours(1)};
  std::mt19937_64 rng(3);
  std::vector<Duration> seen;
  for (int i = 0; i < 100; ++i) seen.push_back(BackoffDelay(b, 5, rng));
  std::sort(seen.begin(), seen.end());
  const auto distinct = std::unique(seen.begin(), seen.end()) - seen.begin();
  EXPECT_GT(distinct, 90);
}

TEST(BackoffDelayTest, DeterministicForAGivenSeed) {
  const Backoff b{milliseconds(500), seconds(120)};
  std::mt19937_64 a(777);
  std::mt19937_64 c(777);
  std::vector<Duration> first;
  std::vector<Duration> second;
  for (int attempt = 1; attempt <= 50; ++attempt) {
    first.push_back(BackoffDelay(b, attempt, a));
    second.push_back(BackoffDelay(b, attempt, c));
  }
  EXPECT_EQ(first, second);

  // A different seed gives a different sequence.
  std::mt19937_64 other(778);
  std::vector<Duration> third;
  for (int attempt = 1; attempt <= 50; ++attempt) third.push_back(BackoffDelay(b, attempt, other));
  EXPECT_NE(first, third);
}

TEST(BackoffDelayTest, BaseEqualToCapIsFlat) {
  const Backoff b{seconds(5), seconds(5)};
  std::mt19937_64 rng(1);
  for (int attempt : {1, 2, 10}) {
    for (int i = 0; i < 100; ++i) ASSERT_LE(BackoffDelay(b, attempt, rng), seconds(5));
  }
}

TEST(BackoffDelayTest, NonPositiveBaseGivesZero) {
  std::mt19937_64 rng(1);
  EXPECT_EQ(BackoffDelay(Backoff{Duration::zero(), seconds(10)}, 3, rng), Duration::zero());
  EXPECT_EQ(BackoffDelay(Backoff{Duration(-5), seconds(10)}, 3, rng), Duration::zero());
}

}  // namespace
}  // namespace chronoq
