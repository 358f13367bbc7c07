// chronoq stats: reading chronoqd's /metrics (as server/metrics.cc writes
// it), the percentile math, the screen and the JSON, and the command against
// a scripted server.
#include "cli/stats.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_fixture.h"
#include "server/metrics.h"
#include "support/test_http_server.h"

namespace chronoq::cli {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::StartsWith;

constexpr double kInf = std::numeric_limits<double>::infinity();

// /metrics as chronoqd renders it.
std::string Rendered(uint64_t enqueued, uint64_t acked, std::vector<uint64_t> lateness_buckets) {
  EngineStats stats;
  stats.enqueued = enqueued;
  stats.acked = acked;
  stats.failed = 2;
  stats.dead = 1;
  stats.dispatch_lateness_s.bounds = {0.001, 0.01, 0.1};
  uint64_t total = 0;
  for (const uint64_t n : lateness_buckets) {
    total += n;
    stats.dispatch_lateness_s.counts.push_back(total);
  }
  stats.dispatch_lateness_s.total = total;
  QueueInfo q;
  q.name = "emails";
  server::ApiCounters http;
  return server::RenderMetrics(stats, {q}, http);
}

TEST(ParseMetricsTest, ReadsWhatChronoqdWrites) {
  Result<MetricsSample> m = ParseMetrics(Rendered(1234, 1200, {5, 3, 1, 1}));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_THAT(m->enqueued, Optional(1234.0));
  EXPECT_THAT(m->acked, Optional(1200.0));
  EXPECT_THAT(m->failed, Optional(2.0));
  EXPECT_THAT(m->dead, Optional(1.0));
  EXPECT_THAT(m->lateness.bounds, ElementsAre(0.001, 0.01, 0.1, kInf));
  EXPECT_THAT(m->lateness.counts, ElementsAre(5, 8, 9, 10));
}

TEST(ParseMetricsTest, LeavesOutWhatIsNotThereAndRefusesWhatItCannotRead) {
  Result<MetricsSample> m = ParseMetrics("# HELP x y\nother_metric{a=\"b\"} 3 1700000000\n\n");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->enqueued, std::nullopt);
  EXPECT_TRUE(m->lateness.counts.empty());
  EXPECT_EQ(ParseMetrics("chronoq_tasks_acked_total many\n").status().message(),
            "line 1: no value");
  EXPECT_EQ(ParseMetrics("ok 1\nchronoq_dispatch_lateness_seconds_bucket{x=\"1\"} 3\n")
                .status()
                .message(),
            "line 2: a bucket without le");
}

TEST(HistogramQuantileTest, InterpolatesWithinTheBucketAsPrometheusDoes) {
  // 10 observations <= 0.1, 50 in (0.1, 0.5], 30 in (0.5, 1], 10 above 1.
  const CumulativeHistogram h{{0.1, 0.5, 1, kInf}, {10, 60, 90, 100}};
  EXPECT_THAT(HistogramQuantile(0.05, h), Optional(DoubleNear(0.05, 1e-12)));  // 0 + 0.1 * 5/10
  EXPECT_THAT(HistogramQuantile(0.5, h), Optional(DoubleNear(0.42, 1e-12)));   // 0.1 + 0.4 * 40/50
  EXPECT_THAT(HistogramQuantile(0.9, h), Optional(DoubleNear(1.0, 1e-12)));    // the bucket's top
  EXPECT_THAT(HistogramQuantile(0.6, h), Optional(DoubleNear(0.5, 1e-12)));
  // A rank in the +Inf bucket: the highest finite bound, not a guess beyond it.
  EXPECT_THAT(HistogramQuantile(0.99, h), Optional(1.0));
  EXPECT_THAT(HistogramQuantile(0, h), Optional(0.0));
}

TEST(HistogramQuantileTest, NothingObservedHasNoQuantile) {
  EXPECT_EQ(HistogramQuantile(0.5, {{0.1, kInf}, {0, 0}}), std::nullopt);
  EXPECT_EQ(HistogramQuantile(0.5, {}), std::nullopt);
}

TEST(HistogramDeltaTest, SubtractsBucketByBucketAndTreatsAResetAsNew) {
  const CumulativeHistogram before{{0.1, kInf}, {4, 5}};
  const CumulativeHistogram after{{0.1, kInf}, {10, 12}};
  EXPECT_THAT(HistogramDelta(before, after).counts, ElementsAre(6, 7));
  EXPECT_THAT(HistogramDelta(after, before).counts, ElementsAre(4, 5));
}

// Two scrapes 2 s apart: 10 enqueued, 6 acked, and 4 claims, all within 1-10 ms.
StatsView TwoScrapes() {
  StatsView v;
  v.queues = json::parse(R"([{"name":"emails","paused":false,"oldest_due_lateness_ms":850,
      "counts":{"scheduled":12,"running":3,"succeeded":1204,"cancelled":0,"dead":1}}])");
  v.before = MetricsSample{.enqueued = 100,
                           .acked = 90,
                           .failed = 2,
                           .dead = 1,
                           .lateness = {{0.001, 0.01, kInf}, {50, 60, 60}}};
  v.now = MetricsSample{.enqueued = 110,
                        .acked = 96,
                        .failed = 2,
                        .dead = 1,
                        .lateness = {{0.001, 0.01, kInf}, {50, 64, 64}}};
  v.interval_s = 2.0;
  return v;
}

TEST(PrintStatsTest, ShowsQueuesTotalsRatesAndLatenessOverTheInterval) {
  std::ostringstream out;
  PrintStats(out, TwoScrapes());
  EXPECT_EQ(out.str(),
            "QUEUE   PAUSED  SCHEDULED  RUNNING  SUCCEEDED  CANCELLED  DEAD  LATE\n"
            "emails  no      12         3        1204       0          1     850ms\n"
            "\n"
            "SERVER    TOTAL  PER_S\n"
            "enqueued  110    5.0\n"
            "acked     96     3.0\n"
            "failed    2      0.0\n"
            "dead      1      0.0\n"
            // The 4 claims of the interval fall in (1 ms, 10 ms]: p50 at rank 2 of 4.
            "dispatch lateness (run_at to claim): p50 5.50ms, p99 9.91ms over 4 claims in the "
            "last 2.00s\n"
            "(chronoqd counts these for the whole server, not per queue; rates over 2.00s)\n");
}

TEST(PrintStatsTest, OneScrapeShowsTotalsAndLatenessSinceTheStart) {
  StatsView v = TwoScrapes();
  v.before.reset();
  v.interval_s = 0;
  std::ostringstream out;
  PrintStats(out, v);
  EXPECT_THAT(out.str(), HasSubstr("SERVER    TOTAL\nenqueued  110\n"));
  EXPECT_THAT(out.str(), HasSubstr("over 64 claims since chronoqd started\n"));
  EXPECT_THAT(out.str(),
              HasSubstr("(chronoqd counts these for the whole server, not per queue)\n"));
}

TEST(PrintStatsTest, NoClaimsInTheIntervalFallsBackToSinceTheStart) {
  StatsView v = TwoScrapes();
  v.before->lateness = v.now.lateness;
  std::ostringstream out;
  PrintStats(out, v);
  EXPECT_THAT(out.str(), HasSubstr("over 64 claims since chronoqd started\n"));

  v.now.lateness = {{0.001, kInf}, {0, 0}};
  v.before->lateness = v.now.lateness;
  out.str("");
  PrintStats(out, v);
  EXPECT_THAT(out.str(), HasSubstr("dispatch lateness (run_at to claim): no claims yet\n"));
}

TEST(StatsJsonTest, HasTotalsRatesAndLateness) {
  const json j = StatsJson(TwoScrapes());
  EXPECT_EQ(j["queues"][0]["name"], "emails");
  EXPECT_EQ(j["totals"], json::parse(R"({"enqueued":110,"acked":96,"failed":2,"dead":1})"));
  EXPECT_EQ(j["interval_s"], 2.0);
  EXPECT_EQ(j["per_s"], json::parse(R"({"enqueued":5.0,"acked":3.0,"failed":0.0,"dead":0.0})"));
  EXPECT_EQ(j["dispatch_lateness_s"]["claims"], 4);
  EXPECT_EQ(j["dispatch_lateness_s"]["over"], "interval");
  EXPECT_NEAR(j["dispatch_lateness_s"]["p50"].get<double>(), 0.0055, 1e-12);

  StatsView one = TwoScrapes();
  one.before.reset();
  const json single = StatsJson(one);
  EXPECT_TRUE(single["per_s"].is_null());
  EXPECT_TRUE(single["interval_s"].is_null());
  EXPECT_EQ(single["dispatch_lateness_s"]["over"], "since_start");
}

// The command against a scripted chronoqd: /metrics as text, /v1/queues as JSON.
class StatsCommandTest : public CliTest {
 protected:
  StatsCommandTest() {
    server_.SetHandler([this](const Request& r) -> Response {
      if (r.target == "/metrics") {
        ++scrapes_;
        return {.body = Rendered(100 + 10 * scrapes_, 90, {1, 1, 0, 0}),
                .content_type = "text/plain; version=0.0.4"};
      }
      return Answer(200, {{"queues", json::parse(R"([{"name":"emails","paused":false,
          "counts":{"scheduled":1,"running":0,"succeeded":0,"cancelled":0,"dead":0},
          "oldest_due_lateness_ms":0}])")}});
    });
  }
  std::vector<std::string> Targets() const {
    std::vector<std::string> targets;
    for (const Request& r : server_.requests()) targets.push_back(r.method + " " + r.target);
    return targets;
  }
  std::atomic<int> scrapes_{0};
};

TEST_F(StatsCommandTest, OneSampleWithIntervalZero) {
  ASSERT_EQ(Run({"stats", "--interval", "0"}), kExitOk) << err();
  EXPECT_THAT(Targets(), ElementsAre("GET /metrics", "GET /v1/queues"));
  EXPECT_THAT(out(), StartsWith("QUEUE   PAUSED"));
  EXPECT_THAT(out(), HasSubstr("SERVER    TOTAL\nenqueued  110\nacked     90\n"));
}

TEST_F(StatsCommandTest, TwoSamplesGiveRates) {
  ASSERT_EQ(Run({"stats", "--interval", "1ms"}), kExitOk) << err();
  EXPECT_THAT(Targets(), ElementsAre("GET /metrics", "GET /metrics", "GET /v1/queues"));
  EXPECT_THAT(out(), HasSubstr("SERVER    TOTAL  PER_S\nenqueued  120    "));
  ASSERT_EQ(Run({"--json", "stats", "--interval", "1ms"}), kExitOk) << err();
  const json j = json::parse(out());
  EXPECT_GT(j["per_s"]["enqueued"].get<double>(), 0);
  EXPECT_EQ(j["per_s"]["acked"], 0.0);
}

TEST_F(StatsCommandTest, WatchRefreshesAndClearsATerminal) {
  out_is_terminal_ = true;
  ASSERT_EQ(Run({"stats", "--watch", "--count", "2", "--interval", "1ms"}), kExitOk) << err();
  // Each screen reuses the previous screen's later sample.
  EXPECT_THAT(Targets(), ElementsAre("GET /metrics", "GET /metrics", "GET /v1/queues",
                                     "GET /metrics", "GET /v1/queues"));
  const std::string shown = out();
  EXPECT_THAT(shown, StartsWith("\x1b[H\x1b[2JQUEUE"));
  EXPECT_EQ(shown.find("\x1b[H\x1b[2J", 1) != std::string::npos, true);

  out_is_terminal_ = false;
  ASSERT_EQ(Run({"--json", "stats", "--watch", "--count", "2", "--interval", "1ms"}), kExitOk);
  // One object per line, no escapes.
  std::istringstream lines(out());
  int objects = 0;
  for (std::string line; std::getline(lines, line); ++objects) {
    EXPECT_TRUE(json::accept(line)) << line;
  }
  EXPECT_EQ(objects, 2);
}

TEST_F(StatsCommandTest, AnErrorAnswerExitsOne) {
  AnswerAll(Error(401, "unauthorized", "missing or wrong bearer token"));
  EXPECT_EQ(Run({"stats", "--interval", "0"}), kExitServerError);
  EXPECT_EQ(err(), "error: unauthorized: missing or wrong bearer token\n");
}

TEST_F(StatsCommandTest, BadCommandLinesExitTwoAndSendNothing) {
  ExpectUsageError({"stats", "--interval", "soon"}, "error: --interval:");
  ExpectUsageError({"stats", "--watch", "--interval", "0"}, "--watch needs an interval above 0");
  ExpectUsageError({"stats", "--count", "2"}, "error: --count: needs --watch");
  ExpectUsageError({"stats", "--watch", "--count", "0"}, "error: --count: must be 1 or more");
}

}  // namespace
}  // namespace chronoq::cli
