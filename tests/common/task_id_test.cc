#include "common/task_id.h"

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/task.h"

namespace chronoq {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));
constexpr int64_t kNowMs = 1'795'305'600'000;

TEST(GeneratedIdTest, FormatIsUnderscoreAndSixteenLowercaseHexDigits) {
  EXPECT_EQ(FormatGeneratedId(0), "_0000000000000000");
  EXPECT_EQ(FormatGeneratedId(1), "_0000000000000001");
  EXPECT_EQ(FormatGeneratedId(0xabcdef), "_0000000000abcdef");
  EXPECT_EQ(FormatGeneratedId(0x0123456789abcdef), "_0123456789abcdef");
  EXPECT_EQ(FormatGeneratedId(std::numeric_limits<int64_t>::max()), "_7fffffffffffffff");
}

TEST(GeneratedIdTest, RoundTrips) {
  const int64_t seqs[] = {0,
                          1,
                          15,
                          16,
                          0xdeadbeef,
                          kNowMs << kSeqCounterBits,
                          (kNowMs << kSeqCounterBits) | 0xffff,
                          std::numeric_limits<int64_t>::max()};
  for (int64_t seq : seqs) {
    const std::string id = FormatGeneratedId(seq);
    ASSERT_EQ(id.size(), 17u) << id;
    std::optional<int64_t> back = ParseGeneratedId(id);
    ASSERT_TRUE(back.has_value()) << id;
    EXPECT_EQ(*back, seq) << id;
  }
}

TEST(GeneratedIdTest, RejectsWrongLength) {
  EXPECT_FALSE(ParseGeneratedId("").has_value());
  EXPECT_FALSE(ParseGeneratedId("_").has_value());
  EXPECT_FALSE(ParseGeneratedId("_000000000000001").has_value());    // 15 digits
  EXPECT_FALSE(ParseGeneratedId("_00000000000000001").has_value());  // 17 digits
  EXPECT_FALSE(ParseGeneratedId("_0000000000000001 ").has_value());  // trailing space
}

TEST(GeneratedIdTest, RejectsUppercaseHex) {
  EXPECT_TRUE(ParseGeneratedId("_0000000000abcdef").has_value());
  EXPECT_FALSE(ParseGeneratedId("_0000000000ABCDEF").has_value());
  EXPECT_FALSE(ParseGeneratedId("_0000000000abcdeF").has_value());
}

TEST(GeneratedIdTest, RejectsMissingUnderscore) {
  EXPECT_FALSE(ParseGeneratedId("00000000000000001").has_value());  // 17 chars, no '_'
  EXPECT_FALSE(ParseGeneratedId("x0000000000000001").has_value());
  EXPECT_FALSE(ParseGeneratedId("0000000000000001_").has_value());
}

TEST(GeneratedIdTest, RejectsNonHexDigits) {
  EXPECT_FALSE(ParseGeneratedId("_000000000000000g").has_value());
  EXPECT_FALSE(ParseGeneratedId("_00000000000000-1").has_value());
  EXPECT_FALSE(ParseGeneratedId("__000000000000001").has_value());
}

TEST(GeneratedIdTest, RejectsValuesAboveInt64Max) {
  EXPECT_FALSE(ParseGeneratedId("_8000000000000000").has_value());
  EXPECT_FALSE(ParseGeneratedId("_ffffffffffffffff").has_value());
}

TEST(GeneratedIdTest, IdsSortLikeSeqs) {
  const std::vector<int64_t> seqs = {0,
                                     9,
                                     10,
                                     15,
                                     16,
                                     255,
                                     256,
                                     kNowMs << kSeqCounterBits,
                                     (kNowMs << kSeqCounterBits) + 1,
                                     (kNowMs + 1) << kSeqCounterBits,
                                     std::numeric_limits<int64_t>::max()};
  for (size_t i = 0; i + 1 < seqs.size(); ++i) {
    for (size_t j = i + 1; j < seqs.size(); ++j) {
      EXPECT_LT(FormatGeneratedId(seqs[i]), FormatGeneratedId(seqs[j]))
          << seqs[i] << " vs " << seqs[j];
    }
  }
}

TEST(SeqGeneratorTest, FreshMillisecondGivesMsShiftedLeft) {
  SeqGenerator gen(0);
  EXPECT_EQ(gen.Next(kNow), kNowMs << 16);
}

TEST(SeqGeneratorTest, SubMillisecondPartIsIgnored) {
  SeqGenerator gen(0);
  EXPECT_EQ(gen.Next(kNow + std::chrono::microseconds(999)), kNowMs << 16);
}

TEST(SeqGeneratorTest, SameMillisecondCountsUp) {
  SeqGenerator gen(0);
  const int64_t first = gen.Next(kNow);
  EXPECT_EQ(gen.Next(kNow), first + 1);
  EXPECT_EQ(gen.Next(kNow), first + 2);
}

TEST(SeqGeneratorTest, NewMillisecondJumpsToItsBase) {
  SeqGenerator gen(0);
  gen.Next(kNow);
  gen.Next(kNow);
  EXPECT_EQ(gen.Next(kNow + milliseconds(1)), (kNowMs + 1) << 16);
  EXPECT_EQ(gen.Next(kNow + milliseconds(50)), (kNowMs + 50) << 16);
}

TEST(SeqGeneratorTest, StrictlyIncreasingOverManyCalls) {
  SeqGenerator gen(0);
  int64_t prev = gen.Next(kNow);
  for (int i = 0; i < 200'000; ++i) {
    // Stays within a few milliseconds, so many calls share one.
    const int64_t seq = gen.Next(kNow + milliseconds(i / 100'000));
    ASSERT_GT(seq, prev) << "call " << i;
    prev = seq;
  }
}

TEST(SeqGeneratorTest, MoreThanCounterCapacityInOneMillisecondStillIncreases) {
  SeqGenerator gen(0);
  int64_t prev = 0;
  for (int i = 0; i < (1 << kSeqCounterBits) + 10; ++i) {
    const int64_t seq = gen.Next(kNow);
    ASSERT_GT(seq, prev);
    prev = seq;
  }
  // The counter spilled into the next millisecond; a later clock reading
  // still yields a larger seq.
  EXPECT_GT(gen.Next(kNow + milliseconds(1)), prev);
}

TEST(SeqGeneratorTest, ClockGoingBackwardsStaysIncreasing) {
  SeqGenerator gen(0);
  const int64_t a = gen.Next(kNow);
  const int64_t b = gen.Next(kNow - seconds(10));
  const int64_t c = gen.Next(kNow - seconds(20));
  EXPECT_EQ(b, a + 1);
  EXPECT_EQ(c, a + 2);
}

TEST(SeqGeneratorTest, ContinuesAfterTheLastPersistedSeq) {
  const int64_t last = ((kNowMs + 5000) << 16) | 7;  // written by a clock that was ahead
  SeqGenerator gen(last);
  EXPECT_EQ(gen.Next(kNow), last + 1);
}

TEST(SeqGeneratorTest, PreEpochClockStillIncreases) {
  SeqGenerator gen(0);
  EXPECT_EQ(gen.Next(Timestamp(seconds(-5))), 1);
  EXPECT_EQ(gen.Next(Timestamp(seconds(-5))), 2);
}

TEST(SeqCreatedAtTest, RecoversTheMillisecond) {
  SeqGenerator gen(0);
  const Timestamp t = kNow + milliseconds(123) + std::chrono::microseconds(456);
  const int64_t first = gen.Next(t);
  const int64_t second = gen.Next(t);
  EXPECT_EQ(SeqCreatedAt(first), kNow + milliseconds(123));
  EXPECT_EQ(SeqCreatedAt(second), kNow + milliseconds(123));
  EXPECT_EQ(SeqCreatedAt((kNowMs << 16) | 0xffff), kNow);
  EXPECT_EQ(SeqCreatedAt(0), Timestamp());
}

TEST(TaskStateTest, Names) {
  EXPECT_EQ(TaskStateName(TaskState::kScheduled), "scheduled");
  EXPECT_EQ(TaskStateName(TaskState::kRunning), "running");
  EXPECT_EQ(TaskStateName(TaskState::kSucceeded), "succeeded");
  EXPECT_EQ(TaskStateName(TaskState::kCancelled), "cancelled");
  EXPECT_EQ(TaskStateName(TaskState::kDead), "dead");
}

TEST(TaskStateTest, ParseIsTheInverseOfName) {
  for (TaskState s : {TaskState::kScheduled, TaskState::kRunning, TaskState::kSucceeded,
                      TaskState::kCancelled, TaskState::kDead}) {
    Result<TaskState> r = ParseTaskState(TaskStateName(s));
    ASSERT_TRUE(r.ok()) << TaskStateName(s);
    EXPECT_EQ(*r, s);
  }
}

TEST(TaskStateTest, ParseRejectsUnknownNames) {
  for (const char* text : {"", "Scheduled", "SCHEDULED", "canceled", "done", "scheduled "}) {
    Result<TaskState> r = ParseTaskState(text, "filter.state");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), "filter.state");
  }
}

TEST(TaskStateTest, ParseErrorListsTheChoicesAndDefaultField) {
  Result<TaskState> r = ParseTaskState("bogus");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "state");
  EXPECT_EQ(r.status().message(),
            "state: must be one of scheduled, running, succeeded, cancelled, dead");
}

TEST(OnConflictTest, ParsesEveryValue) {
  Result<OnConflict> reject = ParseOnConflict("reject");
  Result<OnConflict> ignore = ParseOnConflict("ignore");
  Result<OnConflict> replace = ParseOnConflict("replace");
  ASSERT_TRUE(reject.ok());
  ASSERT_TRUE(ignore.ok());
  ASSERT_TRUE(replace.ok());
  EXPECT_EQ(*reject, OnConflict::kReject);
  EXPECT_EQ(*ignore, OnConflict::kIgnore);
  EXPECT_EQ(*replace, OnConflict::kReplace);
}

TEST(OnConflictTest, RejectsUnknownValues) {
  Result<OnConflict> r = ParseOnConflict("overwrite");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "on_conflict");
  EXPECT_EQ(r.status().message(), "on_conflict: must be one of reject, ignore, replace");

  Result<OnConflict> upper = ParseOnConflict("REPLACE", "tasks[2].on_conflict");
  ASSERT_FALSE(upper.ok());
  EXPECT_EQ(upper.status().field(), "tasks[2].on_conflict");
}

}  // namespace
}  // namespace chronoq
