// Schedule definitions: validation results, the stored form, occurrence ids
// and payloads.
#include "schedule/schedule_spec.h"

#include <gtest/gtest.h>

#include "chronoq/time.h"

namespace chronoq {
namespace {

const Timestamp kT0 = *ParseTime("2026-11-22T00:00:00Z");

TEST(ScheduleSpecTest, ValidationNormalises) {
  ScheduleSpec s;
  s.name = "nightly";
  s.queue = "q";
  s.cron = "0 3 * * *";
  s.payload = R"( { "b" : 1, "a" : [ 2 ] } )";
  Result<ScheduleSpec> v = ValidateScheduleSpec(s, kT0);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->tz, "UTC");
  EXPECT_EQ(v->payload, R"({"b":1,"a":[2]})");  // compact, order kept
  EXPECT_FALSE(v->start.has_value());

  ScheduleSpec every;
  every.name = "tick";
  every.queue = "q";
  every.every = std::chrono::seconds(30);
  v = ValidateScheduleSpec(every, kT0);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->start.has_value());  // the engine loop anchors it when saving
}

TEST(ScheduleSpecTest, TheStoredFormRoundTrips) {
  ScheduleSpec s;
  s.name = "purge";
  s.queue = "maintenance";
  s.cron = "0 0 3 * * *";
  s.tz = "Asia/Seoul";
  s.dst_gap = DstGap::kSkip;
  s.dst_repeat = DstRepeat::kTwice;
  s.start = kT0 + std::chrono::hours(1);
  s.payload = R"({"rows":1000})";
  s.misfire = Misfire::kRunAll;
  s.max_catchup = 7;
  s.overlap = Overlap::kQueueOne;
  s.priority = -2;
  s.max_attempts = 9;
  s.target =
      WebhookTarget{"https://example.com/x", "PUT", {{"X-Key", "v"}}, std::chrono::seconds(3)};
  Result<ScheduleSpec> back = DecodeScheduleSpec(EncodeScheduleSpec(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, s.name);
  EXPECT_EQ(back->queue, s.queue);
  EXPECT_EQ(back->cron, s.cron);
  EXPECT_EQ(back->tz, s.tz);
  EXPECT_EQ(back->dst_gap, s.dst_gap);
  EXPECT_EQ(back->dst_repeat, s.dst_repeat);
  EXPECT_EQ(back->start, s.start);
  EXPECT_EQ(back->payload, s.payload);
  EXPECT_EQ(back->misfire, s.misfire);
  EXPECT_EQ(back->max_catchup, s.max_catchup);
  EXPECT_EQ(back->overlap, s.overlap);
  EXPECT_EQ(back->priority, s.priority);
  EXPECT_EQ(back->max_attempts, s.max_attempts);
  EXPECT_EQ(back->target, s.target);

  ScheduleSpec d;
  d.name = "d";
  d.queue = "q";
  d.fixed_delay = std::chrono::milliseconds(1500);
  back = DecodeScheduleSpec(EncodeScheduleSpec(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->fixed_delay, d.fixed_delay);
  EXPECT_FALSE(back->every.has_value());
  EXPECT_FALSE(back->target.has_value());

  EXPECT_EQ(DecodeScheduleSpec("{\"name\":1}").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeScheduleSpec("not json").status().code(), StatusCode::kDataLoss);
}

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
