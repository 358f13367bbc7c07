// The endpoints the dashboard reads beside the everyday ones: tasks by id
// prefix and creation time, purging a finished task, a queue's keys with the
// longest backlogs and its due count, the cron preview and the stats history.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chronoq/time.h"

#include "server/api_fixture.h"
#include "server/stats_history.h"
#include "support/eventually.h"

namespace chronoq::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ApiDashboardTest : public test::ApiFixture {
 protected:
  void Post(const json& task) {
    ApiResponse r = Call("POST", "/v1/tasks", task.dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }
  std::vector<std::string> Ids(const std::string& query) {
    ApiResponse r = Call("GET", "/v1/tasks?" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    const json page = Json(r);
    std::vector<std::string> out;
    for (const json& t : page["tasks"]) out.push_back(t["id"]);
    return out;
  }
};

TEST_F(ApiDashboardTest, TasksAreFoundByIdPrefixAndCreationTime) {
  const std::string t0 = FormatTime(clock_.Now());
  Post({{"queue", "q"}, {"id", "share:1"}});
  clock_.Advance(10s);
  const std::string t1 = FormatTime(clock_.Now());
  Post({{"queue", "q"}, {"id", "share:2"}});
  Post({{"queue", "q"}, {"id", "invoice:1"}});
  EXPECT_EQ(Ids("id_prefix=share%3A"), (std::vector<std::string>{"share:1", "share:2"}));
  EXPECT_EQ(Ids("created_after=" + t1), (std::vector<std::string>{"share:2", "invoice:1"}));
  EXPECT_EQ(Ids("created_after=" + t0 + "&created_before=" + t1),
            (std::vector<std::string>{"share:1"}));
  EXPECT_EQ(Ids("id_prefix=share&created_after=" + t1), (std::vector<std::string>{"share:2"}));
  ExpectError(Call("GET", "/v1/tasks?created_after=yesterday"), 400, "invalid_argument",
              "created_after");
  ExpectError(Call("GET", "/v1/tasks?id_prefix=_nothex"), 400, "invalid_argument", "id_prefix");
}

TEST_F(ApiDashboardTest, PurgeDeletesAFinishedTaskOnly) {
  Post({{"queue", "q"}, {"id", "a"}, {"delay_ms", 60000}});
  ExpectError(Call("POST", "/v1/tasks/a/purge"), 409, "failed_precondition", "id");
  ASSERT_EQ(Call("DELETE", "/v1/tasks/a").status, 200);
  ApiResponse r = Call("POST", "/v1/tasks/a/purge");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["state"], "cancelled");
  ExpectError(Call("GET", "/v1/tasks/a"), 404, "not_found");
  ExpectError(Call("POST", "/v1/tasks/a/purge"), 404, "not_found");
  ExpectError(Call("POST", "/v1/tasks/a/purge", R"({"now":true})"), 400, "invalid_argument", "now");
}

TEST_F(ApiDashboardTest, TasksShowTheirLeaseTokenAndSchedule) {
  ASSERT_EQ(Call("POST", "/v1/schedules", R"({"name":"tick","queue":"q","every_ms":60000})").status,
            201);
  ApiResponse claim = Call("POST", "/v1/queues/q/claim", R"({"max":1,"lease_ms":30000})");
  ASSERT_EQ(claim.status, 200) << claim.body;
  const json lease = Json(claim)["tasks"][0];
  const json task = Json(Call("GET", "/v1/tasks/" + std::string(lease["id"])));
  EXPECT_EQ(task["lease_token"], lease["token"]) << task.dump();
  EXPECT_EQ(task["schedule"], "tick") << task.dump();
  EXPECT_FALSE(task.contains("worker")) << "the claim named nobody: " << task.dump();
}

// A claim may name its worker: the task shows it as its lease holder, and
// keeps it after the lease ends (who ran it last).
TEST_F(ApiDashboardTest, TasksShowTheWorkerThatClaimedThemLast) {
  Post({{"queue", "q"}, {"id", "a"}, {"max_attempts", 1}});
  ApiResponse claim =
      Call("POST", "/v1/queues/q/claim", R"({"lease_ms":30000,"worker":"billing-7:4242"})");
  ASSERT_EQ(claim.status, 200) << claim.body;
  const json lease = Json(claim)["tasks"][0];
  json task = Json(Call("GET", "/v1/tasks/a"));
  EXPECT_EQ(task["state"], "running");
  EXPECT_EQ(task["worker"], "billing-7:4242") << task.dump();
  ApiResponse failed =
      Call("POST", "/v1/tasks/a/fail", json{{"token", lease["token"]}, {"error", "boom"}}.dump());
  ASSERT_EQ(failed.status, 200) << failed.body;
  task = Json(Call("GET", "/v1/tasks/a"));
  EXPECT_EQ(task["state"], "dead");
  EXPECT_EQ(task["worker"], "billing-7:4242") << task.dump();
  EXPECT_FALSE(task.contains("lease_token"));

  // A bad name refuses the claim before anything is claimed.
  Post({{"queue", "q"}, {"id", "b"}});
  ExpectError(Call("POST", "/v1/queues/q/claim", R"({"worker":"a\nb"})"), 400, "invalid_argument",
              "worker");
  ExpectError(Call("POST", "/v1/queues/q/claim", json{{"worker", std::string(201, 'w')}}.dump()),
              400, "invalid_argument", "worker");
  ExpectError(Call("POST", "/v1/queues/q/claim", R"({"worker":7})"), 400, "invalid_argument",
              "worker");
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/b"))["state"], "scheduled");
}

TEST_F(ApiDashboardTest, AQueueShowsItsDueTasksAndItsLongestKeys) {
  for (const char* key : {"a", "b", "b"}) Post({{"queue", "q"}, {"key", key}});
  Post({{"queue", "q"}, {"delay_ms", 60000}});
  engine_->Sync();
  EXPECT_EQ(Json(Call("GET", "/v1/queues/q"))["due"], 2);  // the heads of keys a and b
  const json keys = Json(Call("GET", "/v1/queues/q/keys?limit=1"));
  EXPECT_EQ(keys, json::parse(R"({"keys":[{"key":"b","backlog":2}]})"));
  EXPECT_EQ(Json(Call("GET", "/v1/queues/q/keys"))["keys"].size(), 2u);
  ExpectError(Call("GET", "/v1/queues/q/keys?limit=0"), 400, "invalid_argument", "limit");
  ExpectError(Call("GET", "/v1/queues/q/keys?order=asc"), 400, "invalid_argument", "order");
}

TEST_F(ApiDashboardTest, CronPreviewUsesTheSchedulesCalculator) {
  clock_.Set(*ParseTime("2026-03-07T12:00:00Z"));
  // 02:30 every day in New York: the spring-forward gap on 8 March runs it at 03:00.
  const json next =
      Json(Call("GET", "/v1/cron/next?cron=0+30+2+*+*+*&tz=America%2FNew_York&count=3"));
  EXPECT_EQ(next, json::parse(R"({"next":["2026-03-08T07:00:00.000Z",
      "2026-03-09T06:30:00.000Z","2026-03-10T06:30:00.000Z"]})"));
  EXPECT_EQ(Json(Call("GET", "/v1/cron/next?cron=*+*+*+*+*+*"))["next"].size(), 5u);
  ExpectError(Call("GET", "/v1/cron/next?cron=0+0+33+*+*+*"), 400, "invalid_argument", "cron");
  ExpectError(Call("GET", "/v1/cron/next"), 400, "invalid_argument", "cron");
  ExpectError(Call("GET", "/v1/cron/next?cron=*+*+*+*+*+*&tz=Mars%2FOlympus"), 400,
              "invalid_argument", "tz");
  ExpectError(Call("GET", "/v1/cron/next?cron=*+*+*+*+*+*&count=101"), 400, "invalid_argument",
              "count");
}

TEST(StatsHistoryTest, RatesAndLatenessPercentilesPerInterval) {
  StatsHistory history(10s, 2);
  EngineStats stats;
  stats.dispatch_lateness_s.bounds = {0.001, 0.01, 0.1};
  stats.dispatch_lateness_s.counts = {0, 0, 0, 0};
  const Timestamp t0 = *ParseTime("2026-11-26T00:00:00Z");
  history.Add(t0, stats);  // the baseline: no sample yet
  EXPECT_EQ(json::parse(history.Json()), json::parse(R"({"interval_s":10,"samples":[]})"));
  stats.enqueued = 100;
  stats.acked = 50;
  stats.failed = 10;
  // 100 claims: 50 within 1 ms, 49 more within 10 ms, one within 100 ms.
  stats.dispatch_lateness_s.counts = {50, 99, 100, 100};
  stats.dispatch_lateness_s.total = 100;
  history.Add(t0 + 10s, stats);
  json j = json::parse(history.Json());
  ASSERT_EQ(j["samples"].size(), 1u);
  const json& s = j["samples"][0];
  EXPECT_EQ(s["at"], "2026-11-26T00:00:10.000Z");
  EXPECT_DOUBLE_EQ(s["enqueued_per_s"], 10.0);
  EXPECT_DOUBLE_EQ(s["acked_per_s"], 5.0);
  EXPECT_DOUBLE_EQ(s["failed_per_s"], 1.0);
  EXPECT_DOUBLE_EQ(s["lateness_p50_s"], 0.001);
  EXPECT_NEAR(s["lateness_p99_s"].get<double>(), 0.01, 1e-9);
  // Nothing claimed in the next interval: no lateness; the oldest sample
  // goes once there are more than two.
  history.Add(t0 + 20s, stats);
  history.Add(t0 + 30s, stats);
  j = json::parse(history.Json());
  ASSERT_EQ(j["samples"].size(), 2u);
  EXPECT_EQ(j["samples"][0]["at"], "2026-11-26T00:00:20.000Z");
  EXPECT_TRUE(j["samples"][0]["lateness_p50_s"].is_null());
  EXPECT_DOUBLE_EQ(j["samples"][1]["enqueued_per_s"], 0.0);
}

TEST(StatsHistoryTest, QuantileOfGrowthInterpolatesInsideItsBucket) {
  EngineStats::Histogram before{{1, 2, 4}, {0, 0, 0, 0}, 0, 0};
  EngineStats::Histogram after{{1, 2, 4}, {0, 10, 10, 10}, 0, 10};
  EXPECT_DOUBLE_EQ(*QuantileOfGrowth(before, after, 0.5), 1.5);
  EXPECT_FALSE(QuantileOfGrowth(after, after, 0.5).has_value());
  // Above the last bound: reported as the last bound.
  EngineStats::Histogram slow{{1, 2, 4}, {0, 0, 0, 10}, 0, 10};
  EXPECT_DOUBLE_EQ(*QuantileOfGrowth(before, slow, 0.99), 4);
}

// The sampler samples every interval while the engine works, and sleeps
// (no deadline of its own) once an interval counted nothing and no activity
// was noted: an idle chronoqd does not wake up. A poke fills the intervals it
// slept through with empty samples, and sampling goes on from there; the
// engine's own timed work ends the sleep too.
class StatsSamplerTest : public test::EngineFixture {
 protected:
  // How many threads wait on the clock until `deadline` now.
  size_t WaitingUntil(Timestamp deadline) {
    const std::vector<Timestamp> d = clock_.Deadlines();
    return static_cast<size_t>(std::count(d.begin(), d.end(), deadline));
  }
  // Waits (in real time, bounded) until `n` threads wait until `deadline`.
  void AwaitWaiters(Timestamp deadline, size_t n) {
    ASSERT_TRUE(test::Eventually([&] { return WaitingUntil(deadline) == n; },
                                 std::to_string(n) + " waits until " + FormatTime(deadline)));
  }
  // The engine's next timed work, once its loop sleeps until it (Sync
  // returns after the commit, before the loop goes back to sleep).
  Timestamp EngineSleepsUntil() {
    engine_->Sync();
    Timestamp wake = kForever;
    EXPECT_TRUE(test::Eventually(
        [&] {
          const std::optional<Timestamp> w = engine_->Stats().next_wake;
          if (!w || WaitingUntil(*w) == 0) return false;
          wake = *w;
          return true;
        },
        "the engine loop to sleep until its next timed work"));
    return wake;
  }
  static std::vector<std::pair<std::string, double>> Samples(const StatsHistory& h) {
    std::vector<std::pair<std::string, double>> out;
    const json parsed = json::parse(h.Json());
    for (const json& s : parsed["samples"]) {
      out.emplace_back(s["at"].get<std::string>(), s["enqueued_per_s"].get<double>());
    }
    return out;
  }
};

TEST_F(StatsSamplerTest, SleepsWhileNothingHappensAndFillsWhatItSleptThrough) {
  Add(2h, "later");  // the engine's own timed work: this task entering its window
  const std::optional<Timestamp> wake = EngineSleepsUntil();
  ASSERT_NE(*wake, kForever);
  const Timestamp t0 = clock_.Now();
  ASSERT_GT(*wake, t0 + 1h);
  StatsHistory history(10s, 360);
  StatsSampler sampler(*engine_, clock_, history);
  AwaitWaiters(t0 + 10s, 1);
  // Working: each interval is sampled.
  sampler.Poke();
  Add(0s, "a");
  clock_.Advance(10s);
  AwaitWaiters(t0 + 20s, 1);
  EXPECT_EQ(Samples(history),
            (std::vector<std::pair<std::string, double>>{{FormatTime(t0 + 10s), 0.1}}));
  // An interval with nothing: sampled, then the sampler sleeps until the
  // engine's timed work (which the engine loop waits for too).
  clock_.Advance(10s);
  AwaitWaiters(*wake, 2);
  EXPECT_EQ(Samples(history).size(), 2u);
  EXPECT_EQ(WaitingUntil(t0 + 30s), 0u);
  // No sample. (Moving the test clock wakes every waiter to look again;
  // both go back to waiting until the engine's timed work.)
  clock_.Advance(30min);
  AwaitWaiters(*wake, 2);
  EXPECT_EQ(Samples(history).size(), 2u);

  // A request: the half hour slept through is filled with empty samples,
  // then sampling goes on, and counts what the request did where it did it.
  clock_.Advance(5s);
  sampler.Poke();
  Add(0s, "b");
  std::vector<std::pair<std::string, double>> samples = Samples(history);
  ASSERT_EQ(samples.size(), 2u + 180u);
  EXPECT_EQ(samples.back(), std::make_pair(FormatTime(t0 + 20s + 30min), 0.0));
  AwaitWaiters(t0 + 30s + 30min, 1);
  clock_.Advance(5s);
  AwaitWaiters(t0 + 40s + 30min, 1);
  samples = Samples(history);
  ASSERT_EQ(samples.size(), 2u + 181u);
  EXPECT_EQ(samples.back(), std::make_pair(FormatTime(t0 + 30s + 30min), 0.1));

  // Idle again, until the engine's timed work as it is now; when that is
  // due, the sleep ends, and the intervals before it are empty.
  const std::optional<Timestamp> wake2 = EngineSleepsUntil();
  ASSERT_NE(*wake2, kForever);
  ASSERT_GT(*wake2, t0 + 50s + 30min);
  clock_.Advance(10s);
  AwaitWaiters(*wake2, 2);
  EXPECT_EQ(Samples(history).size(), 2u + 182u);
  clock_.Set(*wake2);
  ASSERT_TRUE(test::Eventually(
      [&] { return history.NextAt() > *wake2 && WaitingUntil(history.NextAt()) == 1; },
      "the sampler to sample on after the engine's timed work"));
  samples = Samples(history);
  EXPECT_EQ(samples.back().second, 0.0);
  EXPECT_LE(Timestamp(ParseTime(samples.back().first).value()), *wake2);
}

TEST_F(ApiDashboardTest, StatsHistoryAnswersEvenWhenEmpty) {
  ApiResponse r = Call("GET", "/v1/stats/history");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["interval_s"], 10);  // kDefaultStatsInterval
  EXPECT_TRUE(Json(r)["samples"].is_array());
}

}  // namespace
}  // namespace chronoq::server
