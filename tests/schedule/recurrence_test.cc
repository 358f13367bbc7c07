// Recurrence: occurrence instants and the misfire policies, checked against
// plain enumeration.
#include "schedule/recurrence.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/time.h"

namespace chronoq {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const Timestamp kT0 = *ParseTime("2026-11-22T00:00:00Z");

Recurrence Every(Duration every, Timestamp start = kT0) {
  ScheduleSpec s;
  s.every = every;
  s.start = start;
  return *Recurrence::For(s);
}

Recurrence Cron(const std::string& expr, const std::string& tz = "UTC") {
  ScheduleSpec s;
  s.cron = expr;
  s.tz = tz;
  Result<Recurrence> r = Recurrence::For(s);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

TEST(RecurrenceTest, EveryIsAnchoredAtItsStart) {
  const Recurrence r = Every(seconds(30));
  EXPECT_EQ(r.Next(kT0 - minutes(5)), kT0);  // nothing before the start
  EXPECT_EQ(r.Next(kT0 - Duration(1)), kT0);
  EXPECT_EQ(r.Next(kT0), kT0 + seconds(30));
  EXPECT_EQ(r.Next(kT0 + seconds(29)), kT0 + seconds(30));
  EXPECT_EQ(r.Next(kT0 + seconds(30)), kT0 + seconds(60));
  EXPECT_EQ(r.AtOrAfter(kT0 + seconds(60)), kT0 + seconds(60));
  EXPECT_EQ(r.AtOrAfter(kT0 + seconds(61)), kT0 + seconds(90));
}

TEST(RecurrenceTest, CronRespectsItsStart) {
  ScheduleSpec s;
  s.cron = "0 * * * *";
  s.start = kT0 + std::chrono::hours(5) + minutes(1);
  const Recurrence r = *Recurrence::For(s);
  EXPECT_EQ(r.Next(kT0), kT0 + std::chrono::hours(6));
  EXPECT_EQ(r.Next(kT0 + std::chrono::hours(7)), kT0 + std::chrono::hours(8));
}

TEST(RecurrenceTest, OnTimeIsNotMissed) {
  const Recurrence r = Every(minutes(1));
  const Recurrence::Step s = r.Advance(kT0, kT0 + seconds(59), Misfire::kSkip, 100);
  EXPECT_EQ(s.at, kT0 + minutes(1));
  EXPECT_EQ(s.skipped, 0);
  // Due exactly now is on time too.
  EXPECT_EQ(r.Advance(kT0, kT0 + minutes(1), Misfire::kSkip, 100).at, kT0 + minutes(1));
}

TEST(RecurrenceTest, MisfirePoliciesChooseAmongTheMissed) {
  const Recurrence r = Every(minutes(1));
  const Timestamp now = kT0 + seconds(630);  // T+60 .. T+600 missed: 10
  Recurrence::Step s = r.Advance(kT0, now, Misfire::kSkip, 100);
  EXPECT_EQ(s.at, kT0 + minutes(11));
  EXPECT_EQ(s.skipped, 10);
  s = r.Advance(kT0, now, Misfire::kRunOnce, 100);
  EXPECT_EQ(s.at, kT0 + minutes(10));
  EXPECT_EQ(s.skipped, 9);
  s = r.Advance(kT0, now, Misfire::kRunAll, 100);
  EXPECT_EQ(s.at, kT0 + minutes(1));
  EXPECT_EQ(s.skipped, 0);
  s = r.Advance(kT0, now, Misfire::kRunAll, 4);
  EXPECT_EQ(s.at, kT0 + minutes(7));  // 7, 8, 9, 10
  EXPECT_EQ(s.skipped, 6);
}

TEST(RecurrenceTest, AYearOfMissedSecondsIsCheapToSkip) {
  const Recurrence r = Cron("* * * * * *");
  const Timestamp now = kT0 + std::chrono::hours(24 * 365) + Duration(500'000);
  Recurrence::Step s = r.Advance(kT0, now, Misfire::kRunOnce, 100);
  EXPECT_EQ(s.at, kT0 + std::chrono::hours(24 * 365));
  EXPECT_EQ(s.skipped, Recurrence::kMaxScan - 1);  // counted up to the cap
  s = r.Advance(kT0, now, Misfire::kRunAll, 100);
  EXPECT_EQ(s.at, kT0 + std::chrono::hours(24 * 365) - seconds(99));
}

// Every policy agrees with listing the missed occurrences one by one.
TEST(RecurrenceTest, AdvanceMatchesEnumerationForRandomRulesAndWindows) {
  const std::vector<std::string> exprs = {
      "*/7 * * * * *", "0 */5 * * * *",  "0 0 9-17 * * MON-FRI", "0 30 2 * * *", "0 0 0 L * *",
      "15 10 * * 5L",  "0 0 12 ? * 2#3", "0 0/20 1-3 * * *",     "@hourly",      "0 0 0 1 1 *",
  };
  const std::vector<std::string> zones = {"UTC", "America/New_York", "Australia/Lord_Howe",
                                          "Pacific/Chatham"};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> offset(0, int64_t{3} * 365 * 24 * 3600);
  std::uniform_int_distribution<int64_t> span(1, 30 * 24 * 3600);
  std::uniform_int_distribution<int> catchup(1, 40);
  int checked = 0;
  for (int i = 0; i < 400; ++i) {
    const bool cron = i % 4 != 0;
    const Recurrence r = cron ? Cron(exprs[static_cast<size_t>(i) % exprs.size()],
                                     zones[static_cast<size_t>(i / 3) % zones.size()])
                              : Every(seconds(1 + offset(rng) % 5000), kT0 + seconds(offset(rng)));
    const Timestamp after = kT0 + seconds(offset(rng));
    const Timestamp now = after + seconds(span(rng));
    std::vector<Timestamp> missed;
    for (auto t = r.Next(after); t && *t < now && missed.size() < 200'000; t = r.Next(*t)) {
      missed.push_back(*t);
    }
    if (missed.size() >= 200'000) continue;
    const int k = catchup(rng);
    const auto n = static_cast<int64_t>(missed.size());
    const Recurrence::Step skip = r.Advance(after, now, Misfire::kSkip, k);
    const Recurrence::Step once = r.Advance(after, now, Misfire::kRunOnce, k);
    const Recurrence::Step all = r.Advance(after, now, Misfire::kRunAll, k);
    if (missed.empty()) {
      EXPECT_EQ(skip.at, r.Next(after));
      EXPECT_EQ(once.at, r.Next(after));
      EXPECT_EQ(all.at, r.Next(after));
      continue;
    }
    ++checked;
    EXPECT_EQ(skip.at, r.AtOrAfter(now)) << i;
    EXPECT_EQ(skip.skipped, n) << i;
    EXPECT_EQ(once.at, missed.back()) << i;
    EXPECT_EQ(once.skipped, n - 1) << i;
    EXPECT_EQ(all.at, n <= k ? missed.front() : missed[static_cast<size_t>(n - k)]) << i;
    EXPECT_EQ(all.skipped, n <= k ? 0 : n - k) << i;
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace chronoq
