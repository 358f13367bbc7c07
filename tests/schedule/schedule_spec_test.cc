// Schedule definitions: the stored form, occurrence ids
// and payloads.
#include "schedule/schedule_spec.h"

#include <gtest/gtest.h>

#include "chronoq/time.h"

namespace chronoq {
namespace {

const Timestamp kT0 = *ParseTime("2026-11-22T00:00:00Z");

TEST(ScheduleSpecTest, OccurrencesCarryTheirInstant) {
  EXPECT_EQ(OccurrenceId("purge", kT0), "purge@2026-11-22T00:00:00.000Z");
  EXPECT_EQ(OccurrencePayload("{}", kT0), R"({"scheduled_for":"2026-11-22T00:00:00.000Z"})");
  EXPECT_EQ(OccurrencePayload(R"({"a":1})", kT0),
            R"({"scheduled_for":"2026-11-22T00:00:00.000Z","a":1})");
}

TEST(ScheduleSpecTest, PolicyNamesParseBack) {
  for (Misfire m : {Misfire::kSkip, Misfire::kRunOnce, Misfire::kRunAll}) {
    EXPECT_EQ(*ParseMisfire(MisfireName(m)), m);
  }
  for (Overlap o : {Overlap::kAllow, Overlap::kSkip, Overlap::kQueueOne}) {
    EXPECT_EQ(*ParseOverlap(OverlapName(o)), o);
  }
  EXPECT_EQ(*ParseDstGap("run_after"), DstGap::kRunAfter);
  EXPECT_EQ(*ParseDstRepeat("twice"), DstRepeat::kTwice);
  Result<Overlap> bad = ParseOverlap("sometimes");
  EXPECT_EQ(bad.status().field(), "overlap");
  EXPECT_EQ(bad.status().message(), "overlap: must be one of allow, skip, queue_one");
}

}  // namespace
}  // namespace chronoq
