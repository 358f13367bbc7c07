#include "chronoq/time.h"

#include <chrono>
#include <string>

#include <date/date.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chronoq/clock.h"

namespace chronoq {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

// 2026-11-22T03:00:00Z.
constexpr Timestamp kThreeAm = Timestamp(seconds(1'795'316'400));

// Expects `text` to parse to `want`.
void ExpectParses(const std::string& text, Timestamp want) {
  SCOPED_TRACE(text);
  Result<Timestamp> r = ParseTime(text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, want);
}

// Expects `text` to be rejected as InvalidArgument naming `field`.
void ExpectTimeRejected(const std::string& text, const std::string& field = "run_at") {
  SCOPED_TRACE(text);
  Result<Timestamp> r = ParseTime(text, field);
  ASSERT_FALSE(r.ok()) << "parsed as " << r->time_since_epoch().count();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), field);
}

TEST(ParseTimeTest, AcceptsUtcWithZ) { ExpectParses("2026-11-22T03:00:00Z", kThreeAm); }

TEST(ParseTimeTest, AcceptsLowercaseZAndT) {
  ExpectParses("2026-11-22T03:00:00z", kThreeAm);
  ExpectParses("2026-11-22t03:00:00Z", kThreeAm);
}

TEST(ParseTimeTest, AcceptsPositiveOffset) { ExpectParses("2026-11-22T12:00:00+09:00", kThreeAm); }

TEST(ParseTimeTest, AcceptsNegativeOffsetWithMinutes) {
  ExpectParses("2026-11-21T21:30:00-05:30", kThreeAm);
}

TEST(ParseTimeTest, AcceptsZeroOffsets) {
  ExpectParses("2026-11-22T03:00:00+00:00", kThreeAm);
  ExpectParses("2026-11-22T03:00:00-00:00", kThreeAm);
}

TEST(ParseTimeTest, OffsetCrossesMidnightAndMonths) {
  // 2026-12-01T01:00:00+02:00 is 2026-11-30T23:00:00Z.
  ExpectParses("2026-12-01T01:00:00+02:00",
               Timestamp(seconds(1'795'305'600) + hours(24 * 8) + hours(23)));
}

TEST(ParseTimeTest, AcceptsTheEpoch) { ExpectParses("1970-01-01T00:00:00Z", Timestamp()); }

TEST(ParseTimeTest, AcceptsFebruary29InALeapYear) {
  ExpectParses("2024-02-29T00:00:00Z", Timestamp(seconds(1'709'164'800)));
}

TEST(ParseTimeTest, FractionalSecondsOfOneToSixDigits) {
  ExpectParses("2026-11-22T03:00:00.5Z", kThreeAm + milliseconds(500));
  ExpectParses("2026-11-22T03:00:00.25Z", kThreeAm + milliseconds(250));
  ExpectParses("2026-11-22T03:00:00.123Z", kThreeAm + milliseconds(123));
  ExpectParses("2026-11-22T03:00:00.0001Z", kThreeAm + microseconds(100));
  ExpectParses("2026-11-22T03:00:00.12345Z", kThreeAm + microseconds(123'450));
  ExpectParses("2026-11-22T03:00:00.123456Z", kThreeAm + microseconds(123'456));
}

TEST(ParseTimeTest, FractionalSecondsBeyondMicrosecondsAreTruncated) {
  ExpectParses("2026-11-22T03:00:00.1234567Z", kThreeAm + microseconds(123'456));
  ExpectParses("2026-11-22T03:00:00.123456999Z", kThreeAm + microseconds(123'456));
  ExpectParses("2026-11-22T03:00:00.999999999Z", kThreeAm + microseconds(999'999));
}

TEST(ParseTimeTest, FractionalSecondsWithOffset) {
  ExpectParses("2026-11-22T12:00:00.750+09:00", kThreeAm + milliseconds(750));
}

TEST(ParseTimeTest, LeapSecondIsTheLastInstantOfItsMinute) {
  // 2016-12-31T23:59:59Z = 1483228799.
  const Timestamp last_second = Timestamp(seconds(1'483'228'799));
  ExpectParses("2016-12-31T23:59:60Z", last_second + microseconds(999'999));
  Result<Timestamp> next = ParseTime("2017-01-01T00:00:00Z");
  ASSERT_TRUE(next.ok());
  EXPECT_LT(*ParseTime("2016-12-31T23:59:60Z"), *next);
}

TEST(ParseTimeTest, RejectsMissingOffset) {
  Result<Timestamp> r = ParseTime("2026-11-22T03:00:00", "run_at");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "run_at");
  EXPECT_THAT(r.status().message(), HasSubstr("offset"));
  ExpectTimeRejected("2026-11-22T03:00:00.123");
}

TEST(ParseTimeTest, RejectsInvalidCalendarDates) {
  ExpectTimeRejected("2026-02-30T00:00:00Z");
  ExpectTimeRejected("2026-02-29T00:00:00Z");  // 2026 is not a leap year
  ExpectTimeRejected("2026-13-01T00:00:00Z");
  ExpectTimeRejected("2026-00-10T00:00:00Z");
  ExpectTimeRejected("2026-04-31T00:00:00Z");
  ExpectTimeRejected("2026-11-00T00:00:00Z");
}

TEST(ParseTimeTest, RejectsInvalidTimesOfDay) {
  ExpectTimeRejected("2026-11-22T24:00:00Z");
  ExpectTimeRejected("2026-11-22T03:60:00Z");
  ExpectTimeRejected("2026-11-22T03:00:61Z");
}

TEST(ParseTimeTest, InvalidDateMessageNamesTheProblem) {
  Result<Timestamp> r = ParseTime("2026-02-30T00:00:00Z", "tasks[0].run_at");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "tasks[0].run_at");
  EXPECT_THAT(r.status().message(), HasSubstr("tasks[0].run_at: "));
}

TEST(ParseTimeTest, RejectsGarbage) {
  ExpectTimeRejected("");
  ExpectTimeRejected("tomorrow");
  ExpectTimeRejected("2026-11-22");
  ExpectTimeRejected("2026/11/22T03:00:00Z");
  ExpectTimeRejected("26-11-22T03:00:00Z");
  ExpectTimeRejected("2026-11-22X03:00:00Z");
  ExpectTimeRejected("2026-11-22T3:00:00Z");
  ExpectTimeRejected("2026-11-22T03:00Z");
  ExpectTimeRejected("2026-11-22T03:00:00.Z");
  ExpectTimeRejected("1795316400000");
}

TEST(ParseTimeTest, RejectsMalformedOffsets) {
  ExpectTimeRejected("2026-11-22T12:00:00+0900");
  ExpectTimeRejected("2026-11-22T12:00:00+09");
  ExpectTimeRejected("2026-11-22T12:00:00+24:00");
  ExpectTimeRejected("2026-11-22T12:00:00+09:60");
  ExpectTimeRejected("2026-11-22T12:00:00 09:00");
}

TEST(ParseTimeTest, RejectsTrailingCharacters) {
  ExpectTimeRejected("2026-11-22T03:00:00Zjunk");
  ExpectTimeRejected("2026-11-22T03:00:00Z ");
  ExpectTimeRejected("2026-11-22T12:00:00+09:00:00");
  ExpectTimeRejected("2026-11-22T03:00:00ZZ");
}

TEST(ParseTimeTest, DefaultFieldNameIsTime) {
  Result<Timestamp> r = ParseTime("nope");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "time");
}

TEST(FormatTimeTest, WritesUtcWithMilliseconds) {
  EXPECT_EQ(FormatTime(kThreeAm), "2026-11-22T03:00:00.000Z");
  EXPECT_EQ(FormatTime(Timestamp()), "1970-01-01T00:00:00.000Z");
}

TEST(FormatTimeTest, TruncatesToMilliseconds) {
  EXPECT_EQ(FormatTime(kThreeAm + microseconds(123'456)), "2026-11-22T03:00:00.123Z");
  EXPECT_EQ(FormatTime(kThreeAm + microseconds(999'999)), "2026-11-22T03:00:00.999Z");
  EXPECT_EQ(FormatTime(kThreeAm + microseconds(999)), "2026-11-22T03:00:00.000Z");
}

TEST(FormatTimeTest, BeforeTheEpochRoundsDown) {
  EXPECT_EQ(FormatTime(Timestamp(microseconds(-1))), "1969-12-31T23:59:59.999Z");
}

TEST(FormatTimeTest, AgreesWithTheDateLibraryEverywhere) {
  // Instants spread over 1900-2200, each at an odd millisecond of the day,
  // plus leap days and the ends of years.
  std::vector<Timestamp> times;
  for (int64_t s = -2'208'988'800; s < 7'258'118'400; s += 86'400 * 37 + 3'661) {
    times.push_back(Timestamp(seconds(s) + microseconds(123'456)));
  }
  for (const char* text : {"2024-02-29T23:59:59.999Z", "2000-02-29T00:00:00.000Z",
                           "1999-12-31T23:59:59.999Z", "2100-03-01T12:34:56.789Z"}) {
    times.push_back(*ParseTime(text));
  }
  for (Timestamp t : times) {
    EXPECT_EQ(FormatTime(t), date::format("%FT%TZ", std::chrono::floor<milliseconds>(t)));
  }
  // Years past 9999 still format, through the library.
  EXPECT_EQ(FormatTime(Timestamp(hours(24 * 365 * 9000))).substr(0, 6), "10964-");
}

TEST(TimeRoundTripTest, FormatThenParseKeepsMilliseconds) {
  const Timestamp times[] = {kThreeAm, kThreeAm + milliseconds(1), kThreeAm + milliseconds(999),
                             Timestamp(), Timestamp(seconds(1'483'228'799))};
  for (Timestamp t : times) {
    Result<Timestamp> back = ParseTime(FormatTime(t));
    ASSERT_TRUE(back.ok()) << FormatTime(t);
    EXPECT_EQ(*back, t) << FormatTime(t);
  }
}

TEST(TimeRoundTripTest, ParseThenFormatNormalisesToUtc) {
  Result<Timestamp> t = ParseTime("2026-11-22T12:00:00.042+09:00");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(FormatTime(*t), "2026-11-22T03:00:00.042Z");
}

TEST(TimeRoundTripTest, SubMillisecondsAreDroppedByFormat) {
  const Timestamp t = kThreeAm + microseconds(1'500);
  Result<Timestamp> back = ParseTime(FormatTime(t));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, kThreeAm + milliseconds(1));
}

// Expects `text` to parse to `want`.
void ExpectDuration(const std::string& text, Duration want) {
  SCOPED_TRACE(text);
  Result<Duration> r = ParseDuration(text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, want);
}

// Expects `text` to be rejected as InvalidArgument naming `field`; returns the message.
std::string ExpectDurationRejected(const std::string& text, const std::string& field = "lease") {
  SCOPED_TRACE(text);
  Result<Duration> r = ParseDuration(text, field);
  EXPECT_FALSE(r.ok()) << "parsed as " << r->count() << "us";
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), field);
  return r.status().message();
}

TEST(ParseDurationTest, SingleUnits) {
  ExpectDuration("250ms", milliseconds(250));
  ExpectDuration("10s", seconds(10));
  ExpectDuration("5m", minutes(5));
  ExpectDuration("2h", hours(2));
  ExpectDuration("7d", hours(24 * 7));
  ExpectDuration("0s", Duration::zero());
}

TEST(ParseDurationTest, Combinations) {
  ExpectDuration("1h30m", minutes(90));
  ExpectDuration("1d2h3m4s5ms", hours(24) + hours(2) + minutes(3) + seconds(4) + milliseconds(5));
  ExpectDuration("1m1ms", minutes(1) + milliseconds(1));
}

TEST(ParseDurationTest, BareIntegerIsMilliseconds) {
  ExpectDuration("1500", milliseconds(1500));
  ExpectDuration("0", Duration::zero());
  ExpectDuration("1", milliseconds(1));
}

TEST(ParseDurationTest, ExactlyOneHundredYearsIsAllowed) {
  ExpectDuration("36500d", hours(24 * 365 * 100));
  ExpectDuration("3153600000000", hours(24 * 365 * 100));
}

TEST(ParseDurationTest, RejectsEmpty) { ExpectDurationRejected(""); }

TEST(ParseDurationTest, RejectsNegative) {
  EXPECT_THAT(ExpectDurationRejected("-5"), HasSubstr("negative"));
  ExpectDurationRejected("-5s");
  ExpectDurationRejected("1h-5m");
}

TEST(ParseDurationTest, RejectsUnknownUnits) {
  EXPECT_THAT(ExpectDurationRejected("5x"), HasSubstr("unit"));
  ExpectDurationRejected("5w");
  ExpectDurationRejected("5 s");
  ExpectDurationRejected("5S");
  ExpectDurationRejected("1h30");
}

TEST(ParseDurationTest, RejectsGarbage) {
  ExpectDurationRejected("ms");
  ExpectDurationRejected("s5");
  ExpectDurationRejected("abc");
  ExpectDurationRejected(" 5s");
  ExpectDurationRejected("1.5s");
  ExpectDurationRejected("+5s");
}

TEST(ParseDurationTest, RejectsMoreThanOneHundredYears) {
  EXPECT_THAT(ExpectDurationRejected("36501d"), HasSubstr("too large"));
  EXPECT_THAT(ExpectDurationRejected("36500d1ms"), HasSubstr("too large"));
  EXPECT_THAT(ExpectDurationRejected("3153600000001"), HasSubstr("too large"));
  EXPECT_THAT(ExpectDurationRejected("9223372036854775807s"), HasSubstr("too large"));
  EXPECT_THAT(ExpectDurationRejected("876001h"), HasSubstr("too large"));
}

TEST(ParseDurationTest, RejectsNumbersThatOverflow) {
  ExpectDurationRejected("99999999999999999999");
  ExpectDurationRejected("99999999999999999999s");
}

TEST(ParseDurationTest, DefaultFieldNameIsDuration) {
  Result<Duration> r = ParseDuration("soon");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "duration");
}

}  // namespace
}  // namespace chronoq
