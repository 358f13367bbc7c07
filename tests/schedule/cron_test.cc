#include "chronoq/cron.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <date/date.h>
#include <date/tz.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chronoq/clock.h"
#include "chronoq/status.h"
#include "chronoq/time.h"

namespace chronoq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Timestamp T(const std::string& text) {
  Result<Timestamp> t = ParseTime(text);
  EXPECT_TRUE(t.ok()) << text;
  return t.ok() ? *t : Timestamp{};
}

CronExpr MustParse(const std::string& text, const CronOptions& options = {}) {
  Result<CronExpr> c = CronExpr::Parse(text, options);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().ToString();
  if (!c.ok()) std::abort();
  return *c;
}

// The next `n` fires after `from`, formatted; "none" for an absent one.
std::vector<std::string> Fires(const std::string& expr, const std::string& from, int n = 1,
                               const CronOptions& options = {}) {
  const CronExpr c = MustParse(expr, options);
  std::vector<std::string> out;
  Timestamp t = T(from);
  for (int i = 0; i < n; ++i) {
    std::optional<Timestamp> next = c.Next(t);
    if (!next) {
      out.emplace_back("none");
      break;
    }
    out.push_back(FormatTime(*next));
    t = *next;
  }
  return out;
}

CronOptions Tz(std::string zone, std::optional<DstGap> gap = std::nullopt,
               std::optional<DstRepeat> repeat = std::nullopt) {
  CronOptions o;
  o.tz = std::move(zone);
  o.dst_gap = gap;
  o.dst_repeat = repeat;
  return o;
}

Status ParseError(const std::string& text, const CronOptions& options = {}) {
  Result<CronExpr> c = CronExpr::Parse(text, options);
  EXPECT_FALSE(c.ok()) << text << " parsed";
  return c.status();
}

// ---------------------------------------------------------------- field forms

TEST(CronParseTest, FiveFieldsFireAtSecondZero) {
  EXPECT_THAT(Fires("*/15 * * * *", "2026-01-01T00:00:00Z", 3),
              ElementsAre("2026-01-01T00:15:00.000Z", "2026-01-01T00:30:00.000Z",
                          "2026-01-01T00:45:00.000Z"));
}

TEST(CronParseTest, NextIsStrictlyAfterFrom) {
  EXPECT_THAT(Fires("0 * * * *", "2026-01-01T01:00:00Z"), ElementsAre("2026-01-01T02:00:00.000Z"));
  EXPECT_THAT(Fires("* * * * * *", "2026-01-01T00:00:00.500Z"),
              ElementsAre("2026-01-01T00:00:01.000Z"));
  EXPECT_THAT(Fires("* * * * * *", "2026-01-01T00:00:00.999999Z"),
              ElementsAre("2026-01-01T00:00:01.000Z"));
  EXPECT_THAT(Fires("0 * * * *", "2026-01-01T00:59:59.999Z"),
              ElementsAre("2026-01-01T01:00:00.000Z"));
}

TEST(CronParseTest, SecondsField) {
  EXPECT_THAT(Fires("*/20 * * * * *", "2026-01-01T00:00:00Z", 3),
              ElementsAre("2026-01-01T00:00:20.000Z", "2026-01-01T00:00:40.000Z",
                          "2026-01-01T00:01:00.000Z"));
  EXPECT_THAT(Fires("10/20 * * * * *", "2026-01-01T00:00:00Z", 4),
              ElementsAre("2026-01-01T00:00:10.000Z", "2026-01-01T00:00:30.000Z",
                          "2026-01-01T00:00:50.000Z", "2026-01-01T00:01:10.000Z"));
}

TEST(CronParseTest, RangesStepsAndLists) {
  EXPECT_THAT(Fires("5-59/15 * * * *", "2026-01-01T00:00:00Z", 5),
              ElementsAre("2026-01-01T00:05:00.000Z", "2026-01-01T00:20:00.000Z",
                          "2026-01-01T00:35:00.000Z", "2026-01-01T00:50:00.000Z",
                          "2026-01-01T01:05:00.000Z"));
  EXPECT_THAT(Fires("0 9-17/4 * * *", "2026-01-01T00:00:00Z", 4),
              ElementsAre("2026-01-01T09:00:00.000Z", "2026-01-01T13:00:00.000Z",
                          "2026-01-01T17:00:00.000Z", "2026-01-02T09:00:00.000Z"));
  EXPECT_THAT(Fires("0 1,5,3-4 * * *", "2026-01-01T00:00:00Z", 5),
              ElementsAre("2026-01-01T01:00:00.000Z", "2026-01-01T03:00:00.000Z",
                          "2026-01-01T04:00:00.000Z", "2026-01-01T05:00:00.000Z",
                          "2026-01-02T01:00:00.000Z"));
}

TEST(CronParseTest, StepRestartsInEachEnclosingUnit) {
  EXPECT_THAT(Fires("*/7 * * * *", "2026-01-01T00:50:00Z", 2),
              ElementsAre("2026-01-01T00:56:00.000Z", "2026-01-01T01:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 */10 * *", "2026-01-25T00:00:00Z", 2),
              ElementsAre("2026-01-31T00:00:00.000Z", "2026-02-01T00:00:00.000Z"));
}

TEST(CronParseTest, NamesInAnyCaseAlsoInRanges) {
  // 2026-01-01 is a Thursday.
  EXPECT_THAT(Fires("0 0 * * fri-SUN", "2026-01-01T00:00:00Z", 4),
              ElementsAre("2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z",
                          "2026-01-04T00:00:00.000Z", "2026-01-09T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 1 Mar-may,DEC *", "2026-01-01T00:00:00Z", 4),
              ElementsAre("2026-03-01T00:00:00.000Z", "2026-04-01T00:00:00.000Z",
                          "2026-05-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z"));
}

TEST(CronParseTest, SundayIsZeroAndSeven) {
  EXPECT_EQ(Fires("0 0 * * 7", "2026-01-01T00:00:00Z", 3),
            Fires("0 0 * * 0", "2026-01-01T00:00:00Z", 3));
  EXPECT_THAT(Fires("0 0 * * 7", "2026-01-01T00:00:00Z"), ElementsAre("2026-01-04T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 * * 5-7", "2026-01-01T00:00:00Z", 4),
              ElementsAre("2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z",
                          "2026-01-04T00:00:00.000Z", "2026-01-09T00:00:00.000Z"));
}

TEST(CronParseTest, QuestionMarkIsStar) {
  EXPECT_EQ(Fires("0 0 ? * 1", "2026-01-01T00:00:00Z", 3),
            Fires("0 0 * * 1", "2026-01-01T00:00:00Z", 3));
  EXPECT_EQ(Fires("? ? ? ? ? ?", "2026-01-01T00:00:00Z", 3),
            Fires("* * * * * *", "2026-01-01T00:00:00Z", 3));
}

TEST(CronParseTest, LastDayOfMonth) {
  EXPECT_THAT(Fires("0 0 L * *", "2026-01-01T00:00:00Z", 3),
              ElementsAre("2026-01-31T00:00:00.000Z", "2026-02-28T00:00:00.000Z",
                          "2026-03-31T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 L 2 *", "2027-03-01T00:00:00Z"), ElementsAre("2028-02-29T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 L-3 * *", "2026-02-01T00:00:00Z"),
              ElementsAre("2026-02-25T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 1,L * *", "2026-04-02T00:00:00Z", 3),
              ElementsAre("2026-04-30T00:00:00.000Z", "2026-05-01T00:00:00.000Z",
                          "2026-05-31T00:00:00.000Z"));
}

TEST(CronParseTest, NearestWeekday) {
  // 2026-08-15 is a Saturday: Friday the 14th.
  EXPECT_THAT(Fires("0 0 15W 8 *", "2026-01-01T00:00:00Z"),
              ElementsAre("2026-08-14T00:00:00.000Z"));
  // 2026-08-01 is a Saturday: 1W does not leave the month, so Monday the 3rd.
  EXPECT_THAT(Fires("0 0 1W 8 *", "2026-01-01T00:00:00Z"), ElementsAre("2026-08-03T00:00:00.000Z"));
  // 2026-05-31 is a Sunday: 31W becomes Friday the 29th.
  EXPECT_THAT(Fires("0 0 31W 5 *", "2026-01-01T00:00:00Z"),
              ElementsAre("2026-05-29T00:00:00.000Z"));
  // 2026-11-16 is a Monday.
  EXPECT_THAT(Fires("0 0 16W 11 *", "2026-01-01T00:00:00Z"),
              ElementsAre("2026-11-16T00:00:00.000Z"));
  // 31W never matches a 30-day month.
  EXPECT_THAT(Fires("0 0 31W 4,5 *", "2026-01-01T00:00:00Z"),
              ElementsAre("2026-05-29T00:00:00.000Z"));
}

TEST(CronParseTest, LastWeekday) {
  // May 2026 ends on a Sunday, July 2026 on a Friday, Jan 2026 on a Saturday.
  EXPECT_THAT(Fires("0 0 LW 1,5,7 *", "2026-01-01T00:00:00Z", 3),
              ElementsAre("2026-01-30T00:00:00.000Z", "2026-05-29T00:00:00.000Z",
                          "2026-07-31T00:00:00.000Z"));
}

TEST(CronParseTest, LastWeekdayOfMonthInDayOfWeek) {
  EXPECT_THAT(Fires("0 0 ? * 5L", "2026-11-01T00:00:00Z", 2),
              ElementsAre("2026-11-27T00:00:00.000Z", "2026-12-25T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 ? * friL", "2026-11-01T00:00:00Z"),
              ElementsAre("2026-11-27T00:00:00.000Z"));
}

TEST(CronParseTest, NthWeekday) {
  EXPECT_THAT(Fires("0 0 ? * 5#3", "2026-11-01T00:00:00Z", 2),
              ElementsAre("2026-11-20T00:00:00.000Z", "2026-12-18T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 ? * FRI#1", "2026-11-01T00:00:00Z"),
              ElementsAre("2026-11-06T00:00:00.000Z"));
  // Months without a fifth Monday are skipped: Jan and Feb 2026 have four.
  EXPECT_THAT(Fires("0 0 * * 1#5", "2026-01-01T00:00:00Z", 2),
              ElementsAre("2026-03-30T00:00:00.000Z", "2026-06-29T00:00:00.000Z"));
  // A February with five Mondays needs a leap year starting on a Monday.
  EXPECT_THAT(Fires("0 0 * 2 1#5", "2026-01-01T00:00:00Z", 2),
              ElementsAre("2044-02-29T00:00:00.000Z", "2072-02-29T00:00:00.000Z"));
}

TEST(CronParseTest, Macros) {
  const std::string from = "2026-05-15T10:30:00Z";
  EXPECT_THAT(Fires("@yearly", from), ElementsAre("2027-01-01T00:00:00.000Z"));
  EXPECT_THAT(Fires("@annually", from), ElementsAre("2027-01-01T00:00:00.000Z"));
  EXPECT_THAT(Fires("@monthly", from), ElementsAre("2026-06-01T00:00:00.000Z"));
  EXPECT_THAT(Fires("@weekly", from), ElementsAre("2026-05-17T00:00:00.000Z"));
  EXPECT_THAT(Fires("@daily", from), ElementsAre("2026-05-16T00:00:00.000Z"));
  EXPECT_THAT(Fires("@MIDNIGHT", from), ElementsAre("2026-05-16T00:00:00.000Z"));
  EXPECT_THAT(Fires("@hourly", from), ElementsAre("2026-05-15T11:00:00.000Z"));
}

TEST(CronParseTest, DayOfMonthOrDayOfWeekWhenBothRestricted) {
  // The 13th or any Friday (2026-11-06 and 2026-11-13 are Fridays).
  EXPECT_THAT(Fires("0 0 13 * 5", "2026-11-01T00:00:00Z", 3),
              ElementsAre("2026-11-06T00:00:00.000Z", "2026-11-13T00:00:00.000Z",
                          "2026-11-20T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 13 * *", "2026-11-01T00:00:00Z", 2),
              ElementsAre("2026-11-13T00:00:00.000Z", "2026-12-13T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 13 * ?", "2026-11-01T00:00:00Z"), ElementsAre("2026-11-13T00:00:00.000Z"));
  // `*/1` is restricted by its text, so the OR makes every day match.
  EXPECT_THAT(Fires("0 0 13 * */1", "2026-11-01T00:00:00Z"),
              ElementsAre("2026-11-02T00:00:00.000Z"));
}

TEST(CronParseTest, FixedTime) {
  EXPECT_TRUE(MustParse("0 30 2 * * *").fixed_time());
  EXPECT_TRUE(MustParse("30 2 * * *").fixed_time());
  EXPECT_TRUE(MustParse("0 0,30 1-3 * * *").fixed_time());
  EXPECT_TRUE(MustParse("@daily").fixed_time());
  EXPECT_FALSE(MustParse("@hourly").fixed_time());
  EXPECT_FALSE(MustParse("*/5 2 * * *").fixed_time());
  EXPECT_FALSE(MustParse("0 ? 2 * * *").fixed_time());
  EXPECT_FALSE(MustParse("0 0 1/2 * * *").fixed_time());
}

TEST(CronParseTest, ToleratesExtraWhitespace) {
  EXPECT_THAT(Fires("  0\t12  * *   *  ", "2026-01-01T00:00:00Z"),
              ElementsAre("2026-01-01T12:00:00.000Z"));
}

// ---------------------------------------------------------------- errors

TEST(CronErrorTest, WrongFieldCount) {
  Status s = ParseError("* * * *");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "cron");
  EXPECT_THAT(s.message(), HasSubstr("expected 5 or 6 fields, got 4"));
  EXPECT_THAT(ParseError("* * * * * * *").message(), HasSubstr("got 7"));
  EXPECT_THAT(ParseError("").message(), HasSubstr("empty"));
  EXPECT_THAT(ParseError("   ").message(), HasSubstr("empty"));
}

TEST(CronErrorTest, OutOfRangeNamesFieldAndText) {
  Status s = ParseError("0 0 32 * *");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "cron");
  EXPECT_EQ(s.message(), "cron: day-of-month: '32' is out of range 1-31");
  EXPECT_THAT(ParseError("60 * * * * *").message(), HasSubstr("second: '60' is out of range 0-59"));
  EXPECT_THAT(ParseError("60 * * * *").message(), HasSubstr("minute: '60' is out of range 0-59"));
  EXPECT_THAT(ParseError("0 24 * * *").message(), HasSubstr("hour: '24' is out of range 0-23"));
  EXPECT_THAT(ParseError("0 0 0 * *").message(), HasSubstr("day-of-month: '0' is out of range"));
  EXPECT_THAT(ParseError("0 0 * 13 *").message(), HasSubstr("month: '13' is out of range 1-12"));
  EXPECT_THAT(ParseError("0 0 * * 8").message(), HasSubstr("day-of-week: '8' is out of range 0-7"));
  EXPECT_THAT(ParseError("0 0-99999 * * *").message(), HasSubstr("hour: '99999' is out of range"));
  EXPECT_THAT(ParseError("0 0 L-31 * *").message(), HasSubstr("day-of-month: 'L-31'"));
  EXPECT_THAT(ParseError("0 0 32W * *").message(), HasSubstr("day-of-month: '32' is out of range"));
  EXPECT_THAT(ParseError("0 0 * * 5#6").message(), HasSubstr("day-of-week: '5#6'"));
  EXPECT_THAT(ParseError("0 0 * * 5#0").message(), HasSubstr("day-of-week: '5#0'"));
}

TEST(CronErrorTest, SyntaxErrorsNameFieldAndText) {
  EXPECT_THAT(ParseError("0 0 * FOO *").message(), HasSubstr("month: invalid 'FOO'"));
  EXPECT_THAT(ParseError("0 0 * * MONDAY").message(), HasSubstr("day-of-week: invalid 'MONDAY'"));
  EXPECT_THAT(ParseError("0 L * * *").message(), HasSubstr("hour: invalid 'L'"));
  EXPECT_THAT(ParseError("0 0 * * 5W").message(), HasSubstr("day-of-week: invalid '5W'"));
  EXPECT_THAT(ParseError("0 0 1#2 * *").message(), HasSubstr("day-of-month: invalid '1#2'"));
  EXPECT_THAT(ParseError("*/x * * * *").message(), HasSubstr("minute: invalid '*/x'"));
  EXPECT_THAT(ParseError("-5 * * * *").message(), HasSubstr("minute: invalid '-5'"));
  EXPECT_THAT(ParseError("1-2-3 * * * *").message(), HasSubstr("minute: invalid '2-3'"));
  EXPECT_THAT(ParseError("0 0 * JAN- *").message(), HasSubstr("month: invalid 'JAN-'"));
}

TEST(CronErrorTest, BadSteps) {
  EXPECT_THAT(ParseError("*/0 * * * *").message(),
              HasSubstr("minute: step must be at least 1 in '*/0'"));
  EXPECT_THAT(ParseError("*/ * * * *").message(), HasSubstr("minute: invalid '*/'"));
}

// Found by tests/fuzz/fuzz_cron: "L--3" read -3 and shifted a bit by it
// (undefined behaviour; on x86 it accepted the rule as L-29).
TEST(CronErrorTest, NoNegativeNumbers) {
  EXPECT_THAT(ParseError("0 0 L--3 * *").message(), HasSubstr("day-of-month: invalid 'L--3'"));
  EXPECT_THAT(ParseError("*/-5 * * * *").message(), HasSubstr("minute: invalid '*/-5'"));
  EXPECT_THAT(ParseError("0 0 * * 5#-1").message(), HasSubstr("day-of-week: invalid '5#-1'"));
}

TEST(CronErrorTest, ReversedRange) {
  EXPECT_THAT(ParseError("0 5-2 * * *").message(),
              HasSubstr("hour: '5-2': range start is after its end"));
  EXPECT_THAT(ParseError("0 0 * DEC-JAN *").message(), HasSubstr("month: 'DEC-JAN'"));
}

TEST(CronErrorTest, EmptyListItem) {
  EXPECT_THAT(ParseError("0 1,,2 * * *").message(), HasSubstr("hour: empty list item"));
  EXPECT_THAT(ParseError("0 1, * * *").message(), HasSubstr("hour: empty list item"));
}

TEST(CronErrorTest, UnknownMacro) {
  Status s = ParseError("@reboot");
  EXPECT_EQ(s.field(), "cron");
  EXPECT_THAT(s.message(), HasSubstr("unknown macro '@reboot'"));
}

TEST(CronErrorTest, NeverFires) {
  for (const char* text : {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 L-30 2 *", "0 0 31W 2 *"}) {
    Status s = ParseError(text);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(s.field(), "cron") << text;
    EXPECT_THAT(s.message(), HasSubstr("never fires")) << text;
  }
  // Rare is not never.
  EXPECT_TRUE(CronExpr::Parse("0 0 29 2 *").ok());
  EXPECT_TRUE(CronExpr::Parse("0 0 * 2 1#5").ok());
  // With a restricted day-of-week the OR rescues an impossible day-of-month.
  EXPECT_TRUE(CronExpr::Parse("0 0 30 2 1").ok());
}

TEST(CronErrorTest, UnknownZone) {
  Status s = ParseError("* * * * *", Tz("Mars/Olympus_Mons"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "tz");
  EXPECT_THAT(s.message(), HasSubstr("Mars/Olympus_Mons"));
  EXPECT_EQ(ParseError("* * * * *", Tz("")).field(), "tz");
}

// ---------------------------------------------------------------- calendar

TEST(CronCalendarTest, LeapYears) {
  // 2100 is not a leap year, 2000 is.
  EXPECT_THAT(Fires("0 0 29 2 *", "2097-01-01T00:00:00Z"), ElementsAre("2104-02-29T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 29 2 *", "1999-01-01T00:00:00Z"), ElementsAre("2000-02-29T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 L 2 *", "2100-01-01T00:00:00Z"), ElementsAre("2100-02-28T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 L 2 *", "2000-01-01T00:00:00Z"), ElementsAre("2000-02-29T00:00:00.000Z"));
  // 2100-03-01 is a Monday; 2100-02-28 a Sunday.
  EXPECT_THAT(Fires("0 0 ? 2 0L", "2100-01-01T00:00:00Z"), ElementsAre("2100-02-28T00:00:00.000Z"));
}

TEST(CronCalendarTest, YearRollover) {
  EXPECT_THAT(Fires("0 0 1 1 *", "2026-12-31T23:59:59Z"), ElementsAre("2027-01-01T00:00:00.000Z"));
  EXPECT_THAT(Fires("* * * * * *", "2026-12-31T23:59:59Z"),
              ElementsAre("2027-01-01T00:00:00.000Z"));
  EXPECT_THAT(Fires("59 23 31 12 *", "2026-12-31T23:59:00Z"),
              ElementsAre("2027-12-31T23:59:00.000Z"));
  // Tokyo's new year is 15:00 UTC the day before.
  EXPECT_THAT(Fires("@yearly", "2026-06-01T00:00:00Z", 1, Tz("Asia/Tokyo")),
              ElementsAre("2026-12-31T15:00:00.000Z"));
}

TEST(CronCalendarTest, FarFuture) {
  EXPECT_THAT(Fires("0 0 1 1 *", "9000-06-01T00:00:00Z"), ElementsAre("9001-01-01T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 29 2 *", "9996-03-01T00:00:00Z"), ElementsAre("none"));
  EXPECT_THAT(Fires("* * * * *", "9999-12-31T23:58:30Z", 2),
              ElementsAre("9999-12-31T23:59:00.000Z", "none"));
  const CronExpr c = MustParse("* * * * *");
  EXPECT_EQ(c.Next(kForever), std::nullopt);
  EXPECT_EQ(c.Next(Timestamp::min()), T("0001-01-01T00:00:00Z"));
  EXPECT_THAT(Fires("0 0 1 1 *", "2199-06-01T00:00:00Z", 1, Tz("Europe/Paris")),
              ElementsAre("2199-12-31T23:00:00.000Z"));
}

TEST(CronCalendarTest, BeforeTheEpoch) {
  EXPECT_THAT(Fires("0 0 1 * *", "1969-12-15T00:00:00Z", 2),
              ElementsAre("1970-01-01T00:00:00.000Z", "1970-02-01T00:00:00.000Z"));
  EXPECT_THAT(Fires("0 0 * * 4", "1969-12-30T00:00:00Z"), ElementsAre("1970-01-01T00:00:00.000Z"));
}

// ---------------------------------------------------------------- DST

// America/New_York 2026: 02:00 EST -> 03:00 EDT on Mar 8 (07:00Z);
// 02:00 EDT -> 01:00 EST on Nov 1 (06:00Z).
TEST(CronDstTest, NewYorkSpringForward) {
  const CronOptions ny = Tz("America/New_York");
  // Fixed-time in the gap: once, at the first instant after it (03:00 EDT).
  EXPECT_THAT(Fires("30 2 * * *", "2026-03-07T12:00:00Z", 2, ny),
              ElementsAre("2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"));
  EXPECT_THAT(Fires("0 15,30,45 2 * * *", "2026-03-07T12:00:00Z", 2, ny),
              ElementsAre("2026-03-08T07:00:00.000Z", "2026-03-09T06:15:00.000Z"));
  EXPECT_THAT(Fires("30 2 * * *", "2026-03-07T12:00:00Z", 1, Tz("America/New_York", DstGap::kSkip)),
              ElementsAre("2026-03-09T06:30:00.000Z"));
  // Interval rules skip the missing local times.
  EXPECT_THAT(Fires("0 * * * *", "2026-03-08T05:30:00Z", 3, ny),
              ElementsAre("2026-03-08T06:00:00.000Z", "2026-03-08T07:00:00.000Z",
                          "2026-03-08T08:00:00.000Z"));
  EXPECT_THAT(Fires("*/20 2 * * *", "2026-03-08T05:00:00Z", 1, ny),
              ElementsAre("2026-03-09T06:00:00.000Z"));
  // A fixed-time rule outside the gap is unaffected.
  EXPECT_THAT(Fires("0 3 * * *", "2026-03-08T05:00:00Z", 2, ny),
              ElementsAre("2026-03-08T07:00:00.000Z", "2026-03-09T07:00:00.000Z"));
}

// Found by tests/fuzz/fuzz_cron: asked from the last second before the gap,
// Next skipped the fire at its end, so a schedule created (or starting) just
// then lost that day's run.
TEST(CronDstTest, RunAfterFireFoundFromJustBeforeTheGap) {
  const CronOptions ny = Tz("America/New_York");
  for (const char* from : {"2026-03-08T06:59:59Z", "2026-03-08T06:59:59.999999Z"}) {
    EXPECT_THAT(Fires("30 2 * * *", from, 2, ny),
                ElementsAre("2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"))
        << from;
  }
  // London, after the zone file's last transition too (the POSIX rule).
  EXPECT_THAT(Fires("0 1 29 3 *", "2015-03-29T00:59:59Z", 1, Tz("Europe/London")),
              ElementsAre("2015-03-29T01:00:00.000Z"));
  EXPECT_THAT(Fires("0 1 30 3 *", "2042-03-30T00:59:59Z", 1, Tz("Europe/London")),
              ElementsAre("2042-03-30T01:00:00.000Z"));
  // The fire itself is not repeated.
  EXPECT_THAT(Fires("30 2 * * *", "2026-03-08T07:00:00Z", 1, ny),
              ElementsAre("2026-03-09T06:30:00.000Z"));
}

TEST(CronDstTest, NewYorkFallBack) {
  const CronOptions ny = Tz("America/New_York");
  // Fixed-time in the repeated hour: first pass (01:30 EDT) only.
  EXPECT_THAT(Fires("30 1 * * *", "2026-10-31T12:00:00Z", 2, ny),
              ElementsAre("2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"));
  // ... even when asked from inside the second pass.
  EXPECT_THAT(Fires("30 1 * * *", "2026-11-01T05:40:00Z", 1, ny),
              ElementsAre("2026-11-02T06:30:00.000Z"));
  EXPECT_THAT(Fires("30 1 * * *", "2026-10-31T12:00:00Z", 3,
                    Tz("America/New_York", std::nullopt, DstRepeat::kTwice)),
              ElementsAre("2026-11-01T05:30:00.000Z", "2026-11-01T06:30:00.000Z",
                          "2026-11-02T06:30:00.000Z"));
  // Interval rules fire on both passes.
  EXPECT_THAT(Fires("0,30 * * * *", "2026-11-01T04:45:00Z", 5, ny),
              ElementsAre("2026-11-01T05:00:00.000Z", "2026-11-01T05:30:00.000Z",
                          "2026-11-01T06:00:00.000Z", "2026-11-01T06:30:00.000Z",
                          "2026-11-01T07:00:00.000Z"));
  EXPECT_THAT(Fires("*/30 1 * * *", "2026-11-01T06:10:00Z", 2, ny),
              ElementsAre("2026-11-01T06:30:00.000Z", "2026-11-02T06:00:00.000Z"));
  // From the first pass, the earliest fire may be an earlier local time.
  EXPECT_THAT(Fires("0 * * * *", "2026-11-01T05:50:00Z", 1, ny),
              ElementsAre("2026-11-01T06:00:00.000Z"));
}

// Europe/London 2026: 01:00 GMT -> 02:00 BST on Mar 29 (01:00Z);
// 02:00 BST -> 01:00 GMT on Oct 25 (01:00Z).
TEST(CronDstTest, London) {
  const CronOptions london = Tz("Europe/London");
  EXPECT_THAT(Fires("30 1 * * *", "2026-03-28T12:00:00Z", 2, london),
              ElementsAre("2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z"));
  EXPECT_THAT(Fires("*/30 * * * *", "2026-03-29T00:45:00Z", 2, london),
              ElementsAre("2026-03-29T01:00:00.000Z", "2026-03-29T01:30:00.000Z"));
  EXPECT_THAT(Fires("30 1 * * *", "2026-10-24T12:00:00Z", 2, london),
              ElementsAre("2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"));
  EXPECT_THAT(Fires("30 1 * * *", "2026-10-24T12:00:00Z", 2,
                    Tz("Europe/London", std::nullopt, DstRepeat::kTwice)),
              ElementsAre("2026-10-25T00:30:00.000Z", "2026-10-25T01:30:00.000Z"));
  EXPECT_THAT(Fires("@hourly", "2026-10-24T23:30:00Z", 3, london),
              ElementsAre("2026-10-25T00:00:00.000Z", "2026-10-25T01:00:00.000Z",
                          "2026-10-25T02:00:00.000Z"));
}

// Australia/Lord_Howe 2026 (30-minute DST): 02:00 +11 -> 01:30 +10:30 on
// Apr 5 (Apr 4 15:00Z); 02:00 +10:30 -> 02:30 +11 on Oct 4 (Oct 3 15:30Z).
TEST(CronDstTest, LordHoweHalfHourShift) {
  const CronOptions lh = Tz("Australia/Lord_Howe");
  EXPECT_THAT(Fires("15 2 * * *", "2026-10-03T00:00:00Z", 2, lh),
              ElementsAre("2026-10-03T15:30:00.000Z", "2026-10-04T15:15:00.000Z"));
  EXPECT_THAT(
      Fires("15 2 * * *", "2026-10-03T00:00:00Z", 1, Tz("Australia/Lord_Howe", DstGap::kSkip)),
      ElementsAre("2026-10-04T15:15:00.000Z"));
  EXPECT_THAT(Fires("*/15 * * * *", "2026-10-03T15:20:00Z", 2, lh),
              ElementsAre("2026-10-03T15:30:00.000Z", "2026-10-03T15:45:00.000Z"));
  EXPECT_THAT(Fires("45 1 * * *", "2026-04-04T00:00:00Z", 2, lh),
              ElementsAre("2026-04-04T14:45:00.000Z", "2026-04-05T15:15:00.000Z"));
  EXPECT_THAT(Fires("45 1 * * *", "2026-04-04T00:00:00Z", 2,
                    Tz("Australia/Lord_Howe", std::nullopt, DstRepeat::kTwice)),
              ElementsAre("2026-04-04T14:45:00.000Z", "2026-04-04T15:15:00.000Z"));
  EXPECT_THAT(Fires("*/15 * * * *", "2026-04-04T14:40:00Z", 4, lh),
              ElementsAre("2026-04-04T14:45:00.000Z", "2026-04-04T15:00:00.000Z",
                          "2026-04-04T15:15:00.000Z", "2026-04-04T15:30:00.000Z"));
}

// Pacific/Chatham 2026 (+12:45/+13:45): 03:45 +13:45 -> 02:45 +12:45 on Apr 5
// (Apr 4 14:00Z); 02:45 +12:45 -> 03:45 +13:45 on Sep 27 (Sep 26 14:00Z).
TEST(CronDstTest, Chatham) {
  const CronOptions ch = Tz("Pacific/Chatham");
  EXPECT_THAT(Fires("0 9 * * *", "2026-06-30T00:00:00Z", 1, ch),
              ElementsAre("2026-06-30T20:15:00.000Z"));
  EXPECT_THAT(Fires("0 3 * * *", "2026-09-26T00:00:00Z", 2, ch),
              ElementsAre("2026-09-26T14:00:00.000Z", "2026-09-27T13:15:00.000Z"));
  EXPECT_THAT(Fires("0 3 * * *", "2026-04-04T00:00:00Z", 2, ch),
              ElementsAre("2026-04-04T13:15:00.000Z", "2026-04-05T14:15:00.000Z"));
  EXPECT_THAT(Fires("0 3 * * *", "2026-04-04T00:00:00Z", 2,
                    Tz("Pacific/Chatham", std::nullopt, DstRepeat::kTwice)),
              ElementsAre("2026-04-04T13:15:00.000Z", "2026-04-04T14:15:00.000Z"));
  EXPECT_THAT(Fires("0 */1 * * *", "2026-09-26T13:30:00Z", 2, ch),
              ElementsAre("2026-09-26T14:15:00.000Z", "2026-09-26T15:15:00.000Z"));
}

// America/Sao_Paulo has had no DST since 2019 (tzdata 2025b). In 2018 it
// sprang forward at midnight: 00:00 -03 -> 01:00 -02 on Nov 4 (03:00Z), and
// fell back 00:00 -02 -> 23:00 -03 on Feb 17 2019 (02:00Z).
TEST(CronDstTest, SaoPauloMidnightTransitions) {
  const CronOptions sp = Tz("America/Sao_Paulo");
  EXPECT_THAT(Fires("@daily", "2018-11-03T12:00:00Z", 2, sp),
              ElementsAre("2018-11-04T03:00:00.000Z", "2018-11-05T02:00:00.000Z"));
  EXPECT_THAT(Fires("@daily", "2018-11-03T12:00:00Z", 1, Tz("America/Sao_Paulo", DstGap::kSkip)),
              ElementsAre("2018-11-05T02:00:00.000Z"));
  EXPECT_THAT(Fires("0 * * * *", "2018-11-04T02:30:00Z", 2, sp),
              ElementsAre("2018-11-04T03:00:00.000Z", "2018-11-04T04:00:00.000Z"));
  EXPECT_THAT(Fires("0 23 * * *", "2019-02-16T12:00:00Z", 2, sp),
              ElementsAre("2019-02-17T01:00:00.000Z", "2019-02-18T02:00:00.000Z"));
  EXPECT_THAT(Fires("0 23 * * *", "2019-02-16T12:00:00Z", 2,
                    Tz("America/Sao_Paulo", std::nullopt, DstRepeat::kTwice)),
              ElementsAre("2019-02-17T01:00:00.000Z", "2019-02-17T02:00:00.000Z"));
  EXPECT_THAT(Fires("@daily", "2019-02-16T12:00:00Z", 1, sp),
              ElementsAre("2019-02-17T03:00:00.000Z"));
  // Today: a plain -03:00 all year.
  EXPECT_THAT(Fires("@daily", "2026-11-03T12:00:00Z", 2, sp),
              ElementsAre("2026-11-04T03:00:00.000Z", "2026-11-05T03:00:00.000Z"));
}

TEST(CronDstTest, OverridesOnlyAffectFixedTimeRules) {
  const CronOptions twice_skip = Tz("America/New_York", DstGap::kSkip, DstRepeat::kTwice);
  const CronOptions defaults = Tz("America/New_York");
  for (const char* from : {"2026-03-08T05:30:00Z", "2026-11-01T04:30:00Z"}) {
    EXPECT_EQ(Fires("*/30 * * * *", from, 6, twice_skip), Fires("*/30 * * * *", from, 6, defaults))
        << from;
  }
}

TEST(CronDstTest, CopiesKeepZoneAndRules) {
  const CronExpr original =
      MustParse("30 1 * * *", Tz("America/New_York", std::nullopt, DstRepeat::kTwice));
  const CronExpr copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.tz(), "America/New_York");
  EXPECT_EQ(copy.Next(T("2026-11-01T05:30:00Z")), T("2026-11-01T06:30:00Z"));
}

// Zone files list transitions only up to 2037 and date/tz 3.0.1 ignores the
// POSIX rule at their end (HowardHinnant/date#760); CronExpr applies that rule
// itself after the last listed transition.
TEST(CronDstTest, RulesContinueAfter2037) {
  const CronOptions ny = Tz("America/New_York");
  EXPECT_THAT(Fires("0 12 * * *", "2050-07-01T00:00:00Z", 1, ny),
              ElementsAre("2050-07-01T16:00:00.000Z"));
  EXPECT_THAT(Fires("0 12 * * *", "2050-01-01T00:00:00Z", 1, ny),
              ElementsAre("2050-01-01T17:00:00.000Z"));
  // 2038-03-14 and 2050-03-13 are second Sundays of March; 2050-11-06 the
  // first Sunday of November.
  EXPECT_THAT(Fires("0 12 * * *", "2038-03-13T00:00:00Z", 2, ny),
              ElementsAre("2038-03-13T17:00:00.000Z", "2038-03-14T16:00:00.000Z"));
  EXPECT_THAT(Fires("30 2 * * *", "2050-03-12T12:00:00Z", 2, ny),
              ElementsAre("2050-03-13T07:00:00.000Z", "2050-03-14T06:30:00.000Z"));
  EXPECT_THAT(Fires("30 1 * * *", "2050-11-05T12:00:00Z", 3,
                    Tz("America/New_York", std::nullopt, DstRepeat::kTwice)),
              ElementsAre("2050-11-06T05:30:00.000Z", "2050-11-06T06:30:00.000Z",
                          "2050-11-07T06:30:00.000Z"));
  // Southern hemisphere, half-hour DST, +13:45, negative DST (Dublin).
  EXPECT_THAT(Fires("0 12 15 1,7 *", "2050-01-01T00:00:00Z", 2, Tz("Australia/Lord_Howe")),
              ElementsAre("2050-01-15T01:00:00.000Z", "2050-07-15T01:30:00.000Z"));
  EXPECT_THAT(Fires("0 12 15 1,7 *", "2050-01-01T00:00:00Z", 2, Tz("Pacific/Chatham")),
              ElementsAre("2050-01-14T22:15:00.000Z", "2050-07-14T23:15:00.000Z"));
  EXPECT_THAT(Fires("0 12 15 1,7 *", "2050-01-01T00:00:00Z", 2, Tz("Europe/Dublin")),
              ElementsAre("2050-01-15T12:00:00.000Z", "2050-07-15T11:00:00.000Z"));
  EXPECT_THAT(Fires("0 12 15 1,7 *", "2050-01-01T00:00:00Z", 2, Tz("America/Sao_Paulo")),
              ElementsAre("2050-01-15T15:00:00.000Z", "2050-07-15T15:00:00.000Z"));
  EXPECT_THAT(Fires("0 12 15 1,7 *", "2399-01-01T00:00:00Z", 2, Tz("Europe/London")),
              ElementsAre("2399-01-15T12:00:00.000Z", "2399-07-15T11:00:00.000Z"));
}

// For every zone in the database, noon on Jan 15 and Jul 15 has the same UTC
// offset in 2050 as in 2036, when the listed transitions still apply.
TEST(CronDstTest, EveryZoneKeepsItsRulesAfter2037) {
  int zones = 0;
  std::vector<std::string> differ;
  for (const date::time_zone& zone : date::get_tzdb().zones) {
    const CronExpr c = MustParse("0 12 15 1,7 *", Tz(std::string(zone.name())));
    for (const char* month : {"01", "07"}) {
      const std::optional<Timestamp> then =
          c.Next(T(std::string("2036-") + month + "-01T00:00:00Z"));
      const std::optional<Timestamp> later =
          c.Next(T(std::string("2050-") + month + "-01T00:00:00Z"));
      ASSERT_TRUE(then && later) << zone.name();
      const auto offset_then = *then - T(std::string("2036-") + month + "-15T12:00:00Z");
      const auto offset_later = *later - T(std::string("2050-") + month + "-15T12:00:00Z");
      if (offset_then != offset_later) differ.push_back(std::string(zone.name()) + " " + month);
    }
    ++zones;
  }
  EXPECT_GT(zones, 300);
  EXPECT_THAT(differ, ElementsAre());
}

// ---------------------------------------------------------------- property

// A random expression together with the sets it denotes, built independently
// of the parser so the brute-force scan below can check Next().
struct RandomCron {
  std::string text;
  bool six = false;
  bool fixed = false;
  std::array<std::vector<bool>, 6> values;  // per field, indexed by value
  bool dom_restricted = false;
  bool dow_restricted = false;
  std::vector<int> dom_last;  // L-n offsets
  std::vector<int> dom_weekday;
  bool dom_last_weekday = false;
  std::vector<int> dow_last;
  std::vector<std::pair<int, int>> dow_nth;  // (weekday, k)
};

constexpr std::array<int, 6> kLo = {0, 0, 0, 1, 1, 0};
constexpr std::array<int, 6> kHi = {59, 59, 23, 31, 12, 7};

// `specials` raises the share of L, W, nL and n#k items in the day fields.
std::string RandomField(std::mt19937& rng, int f, RandomCron& rc, bool specials = false) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<bool>& set = rc.values[f];
  set.assign(static_cast<size_t>(kHi[f]) + 1, false);
  auto mark = [&](int lo, int hi, int step) {
    for (int v = lo; v <= hi; v += step) set[static_cast<size_t>(f == 5 ? v % 7 : v)] = true;
  };
  const int form = pick(0, 9);
  if (form <= 2) {  // everything
    mark(kLo[f], kHi[f], 1);
    return (f == 3 || f == 5) && pick(0, 1) == 1 ? "?" : "*";
  }
  if (form == 3) {
    const int step = pick(1, std::max(1, (kHi[f] - kLo[f]) / 2));
    mark(kLo[f], kHi[f], step);
    return "*/" + std::to_string(step);
  }
  std::string text;
  const int items = pick(1, 3);
  for (int i = 0; i < items; ++i) {
    if (!text.empty()) text += ",";
    const int kind = std::min(pick(0, specials ? 8 : 5), 5);
    if (f == 3 && kind == 5) {  // day-of-month specials
      switch (pick(0, 3)) {
        case 0:
          rc.dom_last.push_back(0);
          text += "L";
          break;
        case 1: {
          const int n = pick(1, 5);
          rc.dom_last.push_back(n);
          text += "L-" + std::to_string(n);
          break;
        }
        case 2: {
          const int d = pick(1, 31);
          rc.dom_weekday.push_back(d);
          text += std::to_string(d) + "W";
          break;
        }
        default:
          rc.dom_last_weekday = true;
          text += "LW";
      }
      continue;
    }
    if (f == 5 && kind == 5) {  // day-of-week specials
      const int w = pick(0, 7);
      if (pick(0, 1) == 0) {
        rc.dow_last.push_back(w % 7);
        text += std::to_string(w) + "L";
      } else {
        const int k = pick(1, 5);
        rc.dow_nth.emplace_back(w % 7, k);
        text += std::to_string(w) + "#" + std::to_string(k);
      }
      continue;
    }
    const int a = pick(kLo[f], kHi[f]);
    if (kind <= 1) {
      mark(a, a, 1);
      text += std::to_string(a);
    } else if (kind <= 3) {
      const int b = pick(a, kHi[f]);
      mark(a, b, 1);
      text += std::to_string(a) + "-" + std::to_string(b);
    } else {
      const int b = pick(a, kHi[f]);
      const int step = pick(1, 10);
      mark(a, b, step);
      text += std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(step);
    }
  }
  return text;
}

enum class Focus {
  kGeneral,  // any fields
  kDst,      // every day, dense times: fixed-time and interval rules meet transitions
  kDays,     // midnight UTC, day fields heavy in specials: checked over years
};

RandomCron MakeRandomCron(std::mt19937& rng, Focus focus) {
  auto coin = [&] { return std::uniform_int_distribution<int>(0, 1)(rng) == 1; };
  RandomCron rc;
  rc.six = focus != Focus::kDays && std::uniform_int_distribution<int>(0, 3)(rng) == 0;
  std::array<std::string, 6> fields;
  auto set_all = [&](int f, std::string text) {
    rc.values[f].assign(static_cast<size_t>(kHi[f]) + 1, true);
    fields[f] = std::move(text);
  };
  for (int f = 0; f < 6; ++f) {
    const bool zero = (f == 0 && !rc.six) || (focus == Focus::kDays && f < 3);
    if (zero) {
      rc.values[f].assign(static_cast<size_t>(kHi[f]) + 1, false);
      rc.values[f][0] = true;
      fields[f] = "0";
      continue;
    }
    fields[f] = RandomField(rng, f, rc, focus == Focus::kDays);
  }
  if (focus == Focus::kDst) {
    for (int f = 3; f < 6; ++f) set_all(f, "*");
    if (coin()) set_all(2, "0-23");  // fixed-time, every hour
  }
  if (rc.six) {
    // Keep second-by-second scans short: dense minutes, fixed or not.
    set_all(1, coin() ? "*" : "0-59");
    if (focus != Focus::kDst && coin()) set_all(2, "*");
  }
  rc.dom_restricted = fields[3] != "*" && fields[3] != "?";
  rc.dow_restricted = fields[5] != "*" && fields[5] != "?";
  rc.fixed = true;
  for (int f = 0; f < 3; ++f) {
    if (fields[f].find_first_of("*?/") != std::string::npos) rc.fixed = false;
  }
  for (int f = rc.six ? 0 : 1; f < 6; ++f) {
    if (!rc.text.empty()) rc.text += " ";
    rc.text += fields[f];
  }
  return rc;
}

bool DayMatches(const RandomCron& rc, date::year_month_day ymd) {
  const auto y = static_cast<int>(ymd.year());
  const auto m = static_cast<unsigned>(ymd.month());
  const auto d = static_cast<int>(static_cast<unsigned>(ymd.day()));
  const int dim = static_cast<int>(static_cast<unsigned>(
      date::year_month_day_last(ymd.year(), date::month_day_last(ymd.month())).day()));
  auto weekday_of = [&](int day) {
    return static_cast<int>(date::weekday(date::sys_days(date::year(y) / date::month(m) /
                                                         date::day(static_cast<unsigned>(day))))
                                .c_encoding());
  };
  const int wd = weekday_of(d);

  bool dom = rc.values[3][static_cast<size_t>(d)];
  for (int n : rc.dom_last) dom = dom || d == dim - n;
  for (int n : rc.dom_weekday) {
    if (n > dim) continue;
    int target = n;
    if (weekday_of(n) == 6) target = n == 1 ? 3 : n - 1;
    if (weekday_of(n) == 0) target = n == dim ? n - 2 : n + 1;
    dom = dom || d == target;
  }
  if (rc.dom_last_weekday) {
    int last = dim;
    while (weekday_of(last) == 0 || weekday_of(last) == 6) --last;
    dom = dom || d == last;
  }
  bool dow = rc.values[5][static_cast<size_t>(wd)];
  for (int w : rc.dow_last) dow = dow || (wd == w && d + 7 > dim);
  for (auto [w, k] : rc.dow_nth) dow = dow || (wd == w && (d - 1) / 7 + 1 == k);

  if (rc.dom_restricted && rc.dow_restricted) return dom || dow;
  return dom && dow;
}

bool LocalMatches(const RandomCron& rc, date::local_seconds local) {
  const auto day = date::floor<date::days>(local);
  const auto sod = static_cast<size_t>((local - day).count());
  // Time of day first: it rejects most instants without calendar arithmetic.
  if (!rc.values[0][sod % 60] || !rc.values[1][sod / 60 % 60] || !rc.values[2][sod / 3600]) {
    return false;
  }
  const date::year_month_day ymd(day);
  return rc.values[4][static_cast<unsigned>(ymd.month())] && DayMatches(rc, ymd);
}

// The first fire in (from, from + window], scanning UTC instants one step at a
// time and applying the issue's DST rules through date's local_info, or nullopt.
std::optional<date::sys_seconds> BruteForceNext(const RandomCron& rc, const date::time_zone* zone,
                                                DstGap gap, DstRepeat repeat,
                                                date::sys_seconds from, std::chrono::seconds window,
                                                std::chrono::seconds step) {
  using std::chrono::seconds;
  date::sys_seconds u =
      from - seconds(((from.time_since_epoch() % step).count() + step.count()) % step.count());
  while (u <= from) u += step;
  date::sys_info info = zone->get_info(u);
  for (; u <= from + window; u += step) {
    if (u >= info.end) info = zone->get_info(u);
    const date::local_seconds local{u.time_since_epoch() + info.offset};
    if (LocalMatches(rc, local)) {
      bool second_pass = false;
      if (rc.fixed && repeat == DstRepeat::kOnce) {
        const date::local_info li = zone->get_info(local);
        // li.first is the earlier pass; u is the second when it is li.second's instant.
        second_pass = li.result == date::local_info::ambiguous &&
                      u == date::sys_seconds(local.time_since_epoch() - li.second.offset);
      }
      if (!second_pass) return u;
    }
    if (rc.fixed && gap == DstGap::kRunAfter && u == info.begin) {
      const date::sys_info prev = zone->get_info(u - seconds(1));
      if (prev.offset < info.offset) {
        for (date::local_seconds l{u.time_since_epoch() + prev.offset};
             l < date::local_seconds{u.time_since_epoch() + info.offset}; l += step) {
          if (LocalMatches(rc, l)) return u;
        }
      }
    }
  }
  return std::nullopt;
}

struct PropertyStats {
  int compared = 0;
  int found = 0;  // the brute force found a fire within its window
};

// Compares Next() with BruteForceNext() for `iterations` random expressions.
void CheckAgainstBruteForce(uint32_t seed, int iterations, Focus focus,
                            const std::vector<std::string>& zones, PropertyStats& stats) {
  using std::chrono::seconds;
  std::mt19937 rng(seed);
  for (int iter = 0; iter < iterations; ++iter) {
    const RandomCron rc = MakeRandomCron(rng, focus);
    const std::string& zone_name =
        zones[std::uniform_int_distribution<size_t>(0, zones.size() - 1)(rng)];
    CronOptions options;
    options.tz = zone_name;
    const int opt = std::uniform_int_distribution<int>(0, 3)(rng);
    if ((opt & 1) != 0) options.dst_gap = DstGap::kSkip;
    if ((opt & 2) != 0) options.dst_repeat = DstRepeat::kTwice;
    Result<CronExpr> c = CronExpr::Parse(rc.text, options);
    if (!c.ok()) {
      // Only "never fires" is acceptable for a generated expression.
      ASSERT_THAT(c.status().message(), HasSubstr("never fires")) << rc.text;
      continue;
    }
    const date::time_zone* zone = date::locate_zone(zone_name);

    // 1970-2037 (date/tz knows no transitions after 2037). Transition-focused
    // runs, and half the others, start within a day before a transition.
    const int64_t hi = 2'114'380'800;
    date::sys_seconds from{seconds(std::uniform_int_distribution<int64_t>(0, hi)(rng))};
    if (focus == Focus::kDst || std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
      const date::sys_info info = zone->get_info(from);
      if (info.end < date::sys_seconds{seconds(hi)}) {
        const int before = focus == Focus::kDst ? 2 * 3600 : 86'400;
        from = info.end - seconds(std::uniform_int_distribution<int>(0, before)(rng));
      }
    }
    Timestamp from_ts =
        Timestamp(from.time_since_epoch()) +
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 999'999)(rng));
    seconds window = rc.six ? seconds(6 * 3600) : seconds(8 * 86'400);
    seconds step = rc.six ? seconds(1) : seconds(60);
    if (focus == Focus::kDays) {
      window = seconds(800 * 86'400);
      step = seconds(86'400);
    }

    // Transition-focused runs follow a chain of fires through the transition.
    const date::sys_seconds chain_end = from + seconds(4 * 3600);
    for (int link = 0; link < (focus == Focus::kDst ? 300 : 1); ++link) {
      const std::optional<date::sys_seconds> want =
          BruteForceNext(rc, zone, options.dst_gap.value_or(DstGap::kRunAfter),
                         options.dst_repeat.value_or(DstRepeat::kOnce), from, window, step);
      const std::optional<Timestamp> got = c->Next(from_ts);
      SCOPED_TRACE(rc.text + " tz=" + zone_name + " from=" + FormatTime(from_ts) +
                   " gap=" + std::to_string(opt & 1) + " repeat=" + std::to_string(opt >> 1));
      ++stats.compared;
      if (!want) {
        if (got) {
          ASSERT_GT(*got, Timestamp(from.time_since_epoch() + window));
        }
        break;
      }
      ++stats.found;
      ASSERT_TRUE(got.has_value());
      ASSERT_EQ(FormatTime(*got), FormatTime(Timestamp(want->time_since_epoch())));
      from = *want;
      from_ts = Timestamp(from.time_since_epoch());
      if (from > chain_end) break;
    }
  }
}

const std::vector<std::string>& PropertyZones() {
  static const std::vector<std::string> zones = {"UTC",
                                                 "America/New_York",
                                                 "Europe/London",
                                                 "Australia/Lord_Howe",
                                                 "Pacific/Chatham",
                                                 "America/Sao_Paulo",
                                                 "Asia/Kolkata",
                                                 "America/St_Johns",
                                                 "Europe/Dublin",
                                                 "Asia/Tehran",
                                                 "Australia/Sydney"};
  return zones;
}

TEST(CronPropertyTest, AnyExpressionMatchesBruteForceScan) {
  PropertyStats stats;
  CheckAgainstBruteForce(20261122, 800, Focus::kGeneral, PropertyZones(), stats);
  std::printf("general: compared %d, found %d\n", stats.compared, stats.found);
  // The generator must exercise both outcomes.
  EXPECT_GT(stats.compared, 700);
  EXPECT_GT(stats.found, stats.compared / 4);
  EXPECT_LT(stats.found, stats.compared);
}

TEST(CronPropertyTest, TransitionsMatchBruteForceScan) {
  PropertyStats stats;
  const std::vector<std::string> zones(PropertyZones().begin() + 1, PropertyZones().end());
  CheckAgainstBruteForce(4, 800, Focus::kDst, zones, stats);
  std::printf("transitions: compared %d, found %d\n", stats.compared, stats.found);
  EXPECT_GT(stats.compared, 5000);
  EXPECT_GT(stats.found, stats.compared / 2);
}

TEST(CronPropertyTest, DayFieldsMatchDayByDayScan) {
  PropertyStats stats;
  CheckAgainstBruteForce(1, 2000, Focus::kDays, {"UTC"}, stats);
  std::printf("days: compared %d, found %d\n", stats.compared, stats.found);
  EXPECT_GT(stats.compared, 1500);
  EXPECT_GT(stats.found, stats.compared / 2);
}

}  // namespace
}  // namespace chronoq
