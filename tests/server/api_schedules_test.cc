// The schedule endpoints driven directly on a real engine and a fake clock:
// each endpoint's answer, the occurrence tasks they make, and every class of
// bad input.
#include <deque>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chronoq/time.h"

#include "server/api.h"
#include "server/api_fixture.h"

namespace chronoq::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ApiSchedulesTest : public test::ApiFixture {
 protected:
  // POSTs `body` and expects 201; returns the schedule.
  json Create(const json& body) {
    ApiResponse r = Call("POST", "/v1/schedules", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  json Every(const std::string& name, int64_t ms, const std::string& queue = "q") {
    return Create({{"name", name}, {"queue", queue}, {"every_ms", ms}});
  }
};

TEST_F(ApiSchedulesTest, EveryScheduleIsCreatedShownPausedResumedAndDeleted) {
  const Timestamp t = clock_.Now();
  ApiResponse created = Call("POST", "/v1/schedules",
                             R"({"name":"refresh","queue":"cache","every_ms":60000,
                                 "payload":{"k":1},"priority":-3,"max_attempts":4})");
  ASSERT_EQ(created.status, 201) << created.body;
  const json s = Json(created);
  EXPECT_EQ(s, json({{"name", "refresh"},
                     {"queue", "cache"},
                     {"every_ms", 60000},
                     {"start", FormatTime(t)},
                     {"payload", {{"k", 1}}},
                     {"misfire", "run_once"},
                     {"max_catchup", 100},
                     {"overlap", "skip"},
                     {"dst_gap", nullptr},
                     {"dst_repeat", nullptr},
                     {"priority", -3},
                     {"max_attempts", 4},
                     {"target", nullptr},
                     {"paused", false},
                     {"next_run", FormatTime(t)},
                     {"next_task_id", "refresh@" + FormatTime(t)},
                     {"last_run", nullptr},
                     {"runs", 0},
                     {"skipped", 0},
                     {"created_at", FormatTime(t)},
                     {"updated_at", FormatTime(t)}}));

  ApiResponse got = Call("GET", "/v1/schedules/refresh");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json(got), s);

  // The occurrence is an ordinary task with the schedule's payload and options.
  ApiResponse task = Call("GET", "/v1/tasks/" + s["next_task_id"].get<std::string>());
  ASSERT_EQ(task.status, 200) << task.body;
  EXPECT_EQ(Json(task)["queue"], "cache");
  EXPECT_EQ(Json(task)["run_at"], FormatTime(t));
  EXPECT_EQ(Json(task)["priority"], -3);
  EXPECT_EQ(Json(task)["max_attempts"], 4);
  EXPECT_EQ(Json(task)["payload"], json({{"k", 1}, {"scheduled_for", FormatTime(t)}}));

  ApiResponse paused = Call("POST", "/v1/schedules/refresh/pause");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(Json(paused)["paused"], true);
  EXPECT_TRUE(Json(paused)["next_task_id"].is_null()) << paused.body;

  ApiResponse resumed = Call("POST", "/v1/schedules/refresh/resume", "{}");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(Json(resumed)["paused"], false);
  EXPECT_TRUE(Json(resumed)["next_task_id"].is_string()) << resumed.body;

  ApiResponse deleted = Call("DELETE", "/v1/schedules/refresh");
  EXPECT_EQ(deleted.status, 204) << deleted.body;
  EXPECT_EQ(deleted.body, "");
  ExpectError(Call("GET", "/v1/schedules/refresh"), 404, "not_found");
  ExpectError(Call("DELETE", "/v1/schedules/refresh"), 404, "not_found");
}

TEST_F(ApiSchedulesTest, CronScheduleRunsAtTheNextWholeMinute) {
  clock_.Advance(12500ms);  // T = 00:00:12.500
  const json s = Create({{"name", "tick"}, {"queue", "q"}, {"cron", "0 * * * * *"}});
  const std::string minute = FormatTime(test::FakeClock::kStart + 1min);
  EXPECT_EQ(s["cron"], "0 * * * * *");
  EXPECT_EQ(s["tz"], "UTC");
  EXPECT_FALSE(s.contains("every_ms"));
  EXPECT_FALSE(s.contains("fixed_delay_ms"));
  EXPECT_TRUE(s["start"].is_null());
  EXPECT_EQ(s["next_run"], minute);
  EXPECT_EQ(s["next_task_id"], "tick@" + minute);
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/tick@" + minute))["run_at"], minute);

  // Zone and DST overrides are echoed.
  const json seoul = Create({{"name", "purge"},
                             {"queue", "q"},
                             {"cron", "0 0 3 * * *"},
                             {"tz", "Asia/Seoul"},
                             {"dst_gap", "skip"},
                             {"dst_repeat", "twice"},
                             {"misfire", "run_all"},
                             {"max_catchup", 5},
                             {"overlap", "queue_one"}});
  EXPECT_EQ(seoul["tz"], "Asia/Seoul");
  EXPECT_EQ(seoul["dst_gap"], "skip");
  EXPECT_EQ(seoul["dst_repeat"], "twice");
  EXPECT_EQ(seoul["misfire"], "run_all");
  EXPECT_EQ(seoul["max_catchup"], 5);
  EXPECT_EQ(seoul["overlap"], "queue_one");
  // 03:00 in Seoul is 18:00Z the day before: 2026-11-22T18:00Z is the next.
  EXPECT_EQ(seoul["next_run"], "2026-11-22T18:00:00.000Z");
}

TEST_F(ApiSchedulesTest, FixedDelayAndStartTimes) {
  const Timestamp t = clock_.Now();
  const json delay = Create({{"name", "d"}, {"queue", "q"}, {"fixed_delay_ms", 30000}});
  EXPECT_EQ(delay["fixed_delay_ms"], 30000);
  EXPECT_FALSE(delay.contains("every_ms"));
  EXPECT_EQ(delay["next_run"], FormatTime(t + 30s));
  // A fixed_delay schedule knows only its next run.
  EXPECT_EQ(Json(Call("GET", "/v1/schedules/d/next?count=5"))["next"],
            json::array({FormatTime(t + 30s)}));

  // start as RFC 3339 with an offset, and as epoch milliseconds.
  const json later = Create(
      {{"name", "e"}, {"queue", "q"}, {"every_ms", 1000}, {"start", "2026-11-22T10:00:00+09:00"}});
  EXPECT_EQ(later["start"], FormatTime(t + 1h));
  EXPECT_EQ(later["next_run"], FormatTime(t + 1h));
  const json epoch = Create({{"name", "f"},
                             {"queue", "q"},
                             {"every_ms", 1000},
                             {"start", (t + 2h).time_since_epoch() / 1ms}});
  EXPECT_EQ(epoch["start"], FormatTime(t + 2h));
}

TEST_F(ApiSchedulesTest, NextListsTheComingOccurrences) {
  const Timestamp t = clock_.Now();
  Every("m", 60000);
  ApiResponse r = Call("GET", "/v1/schedules/m/next?count=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r), json({{"next", {FormatTime(t), FormatTime(t + 60s), FormatTime(t + 120s)}}}));
  EXPECT_EQ(Json(Call("GET", "/v1/schedules/m/next"))["next"].size(), 10u);
  EXPECT_EQ(Json(Call("GET", "/v1/schedules/m/next?count=1000"))["next"].size(), 1000u);
  for (const std::string bad : {"0", "1001", "-1", "x", "", "3.5"}) {
    SCOPED_TRACE(bad);
    ExpectError(Call("GET", "/v1/schedules/m/next?count=" + bad), 400, "invalid_argument", "count");
  }
  ExpectError(Call("GET", "/v1/schedules/m/next?cnt=3"), 400, "invalid_argument", "cnt");
  ExpectError(Call("GET", "/v1/schedules/none/next"), 404, "not_found");
}

TEST_F(ApiSchedulesTest, PutCreatesOrReplaces) {
  ApiResponse made = Call("PUT", "/v1/schedules/p", R"({"queue":"q","every_ms":1000})");
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(Json(made)["name"], "p");
  EXPECT_EQ(Json(made)["every_ms"], 1000);

  ApiResponse replaced =
      Call("PUT", "/v1/schedules/p", R"({"name":"p","queue":"q","cron":"@hourly"})");
  ASSERT_EQ(replaced.status, 200) << replaced.body;
  EXPECT_EQ(Json(replaced)["cron"], "@hourly");
  EXPECT_FALSE(Json(replaced).contains("every_ms"));
  EXPECT_EQ(Json(Call("GET", "/v1/schedules/p"))["cron"], "@hourly");

  ExpectError(Call("PUT", "/v1/schedules/p", R"({"name":"q","queue":"q","every_ms":1})"), 400,
              "invalid_argument", "name");
  // The path name is percent-decoded before it is compared.
  ApiResponse encoded =
      Call("PUT", "/v1/schedules/a%3Ab", R"({"name":"a:b","queue":"q","every_ms":1000})");
  ASSERT_EQ(encoded.status, 200) << encoded.body;
  EXPECT_EQ(Json(encoded)["name"], "a:b");
}

TEST_F(ApiSchedulesTest, ListPagesByNameAndFiltersByQueue) {
  Every("c", 1000, "one");
  Every("a", 1000, "one");
  Every("b", 1000, "two");
  ApiResponse all = Call("GET", "/v1/schedules");
  ASSERT_EQ(all.status, 200) << all.body;
  const json page = Json(all);
  std::vector<std::string> names;
  for (const json& s : page["schedules"]) names.push_back(s["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(page["next_cursor"].is_null());

  json one = Json(Call("GET", "/v1/schedules?queue=one"));
  ASSERT_EQ(one["schedules"].size(), 2u) << one.dump();
  EXPECT_EQ(one["schedules"][1]["name"], "c");

  json first = Json(Call("GET", "/v1/schedules?limit=2"));
  ASSERT_EQ(first["schedules"].size(), 2u) << first.dump();
  ASSERT_TRUE(first["next_cursor"].is_string()) << first.dump();
  json second =
      Json(Call("GET", "/v1/schedules?limit=2&cursor=" + first["next_cursor"].get<std::string>()));
  ASSERT_EQ(second["schedules"].size(), 1u) << second.dump();
  EXPECT_EQ(second["schedules"][0]["name"], "c");
  EXPECT_TRUE(second["next_cursor"].is_null());

  ExpectError(Call("GET", "/v1/schedules?limit=x"), 400, "invalid_argument", "limit");
  ExpectError(Call("GET", "/v1/schedules?limit=0"), 400, "invalid_argument", "limit");
  ExpectError(Call("GET", "/v1/schedules?state=paused"), 400, "invalid_argument", "state");
}

TEST_F(ApiSchedulesTest, ATakenNameIsAConflict) {
  Every("x", 1000);
  ExpectError(Call("POST", "/v1/schedules", R"({"name":"x","queue":"q","every_ms":5000})"), 409,
              "conflict");
  EXPECT_EQ(Json(Call("GET", "/v1/schedules/x"))["every_ms"], 1000);
}

TEST_F(ApiSchedulesTest, MissingSchedulesAreNotFound) {
  ExpectError(Call("GET", "/v1/schedules/none"), 404, "not_found");
  ExpectError(Call("DELETE", "/v1/schedules/none"), 404, "not_found");
  ExpectError(Call("POST", "/v1/schedules/none/pause"), 404, "not_found");
  ExpectError(Call("POST", "/v1/schedules/none/resume"), 404, "not_found");
  ExpectError(Call("GET", "/v1/schedules/none/next"), 404, "not_found");
}

TEST_F(ApiSchedulesTest, ATargetIsShownLikeATasksAndItsQueueIsReported) {
  const json target = {{"url", "https://h.example/x"},
                       {"method", "PUT"},
                       {"headers", {{"Authorization", "Bearer t"}}},
                       {"timeout_ms", 2500}};
  const json s =
      Create({{"name", "hook"}, {"queue", "hooks"}, {"every_ms", 60000}, {"target", target}});
  EXPECT_EQ(s["target"], target);
  EXPECT_EQ(webhook_queues_, std::vector<std::string>{"hooks"});
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/" + s["next_task_id"].get<std::string>()))["target"],
            target);
  // A schedule without a target reports nothing.
  Every("plain", 60000);
  EXPECT_EQ(webhook_queues_.size(), 1u);
}

TEST_F(ApiSchedulesTest, EngineCallsRunOnTheBlockingPool) {
  std::deque<std::function<void()>> pool;
  MakeApi([&](std::function<void()> fn) { pool.push_back(std::move(fn)); });
  struct Request {
    std::string method, target, body;
  };
  const std::vector<Request> requests = {
      {"POST", "/v1/schedules", R"({"name":"b","queue":"q","every_ms":1000})"},
      {"GET", "/v1/schedules", ""},
      {"GET", "/v1/schedules/b", ""},
      {"PUT", "/v1/schedules/b", R"({"queue":"q","every_ms":2000})"},
      {"POST", "/v1/schedules/b/pause", ""},
      {"GET", "/v1/schedules/b/next", ""},
      {"DELETE", "/v1/schedules/b", ""},
  };
  for (const auto& [method, target, body] : requests) {
    SCOPED_TRACE(method + " " + target);
    auto answer = Start(method, target, body);
    ASSERT_EQ(pool.size(), 1u);
    EXPECT_EQ(answer.wait_for(0s), std::future_status::timeout);
    pool.front()();
    pool.pop_front();
    ApiResponse r = test::GetWithin(answer, "the answer from the pool");
    EXPECT_LT(r.status, 300) << r.body;
  }
  // A malformed request is answered at once, without the pool; the engine
  // checks what is well formed (there, on the pool).
  ExpectError(Call("GET", "/v1/schedules/b/next?count=x"), 400, "invalid_argument", "count");
  EXPECT_TRUE(pool.empty());
  auto answer = Start("GET", "/v1/schedules/b/next?count=0");
  ASSERT_EQ(pool.size(), 1u);
  pool.front()();
  pool.pop_front();
  ExpectError(test::GetWithin(answer, "the answer from the pool"), 400, "invalid_argument",
              "count");
}

TEST_F(ApiSchedulesTest, BadInputIsRejectedByFieldAndChangesNothing) {
  const std::vector<ErrorCase> cases = {
      {"POST", "/v1/schedules", "{", 400, "invalid_argument", "body"},
      {"POST", "/v1/schedules", "[]", 400, "invalid_argument", "body"},
      {"POST", "/v1/schedules", R"({"queue":"q","every_ms":1000})", 400, "invalid_argument",
       "name"},
      {"POST", "/v1/schedules", R"({"name":"a","every_ms":1000})", 400, "invalid_argument",
       "queue"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1000,"colour":1})", 400,
       "invalid_argument", "colour"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every":1000})", 400, "invalid_argument",
       "every"},
      {"POST", "/v1/schedules", R"({"name":7,"queue":"q","every_ms":1000})", 400,
       "invalid_argument", "name"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":"1000"})", 400,
       "invalid_argument", "every_ms"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1.5})", 400,
       "invalid_argument", "every_ms"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","cron":5})", 400, "invalid_argument",
       "cron"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1000,"paused":true})", 400,
       "invalid_argument", "paused"},
      // Exactly one of cron, every_ms and fixed_delay_ms.
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q"})", 400, "invalid_argument", "cron"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","cron":"@daily","every_ms":1000})", 400,
       "invalid_argument", "cron"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"fixed_delay_ms":1})", 400,
       "invalid_argument", "cron"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","cron":"0 0 32 * *"})", 400,
       "invalid_argument", "cron"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","cron":"@daily","tz":"Mars/Olympus"})",
       400, "invalid_argument", "tz"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1000,"tz":"UTC"})", 400,
       "invalid_argument", "tz"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":0})", 400, "invalid_argument",
       "every_ms"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":316224000001})", 400,
       "invalid_argument", "every_ms"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","fixed_delay_ms":-1})", 400,
       "invalid_argument", "fixed_delay_ms"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"misfire":"sometimes"})",
       400, "invalid_argument", "misfire"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"misfire":1})", 400,
       "invalid_argument", "misfire"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"overlap":"never"})", 400,
       "invalid_argument", "overlap"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","cron":"@daily","dst_gap":"later"})",
       400, "invalid_argument", "dst_gap"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","cron":"@daily","dst_repeat":"3"})", 400,
       "invalid_argument", "dst_repeat"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"max_catchup":0})", 400,
       "invalid_argument", "max_catchup"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"max_catchup":10001})", 400,
       "invalid_argument", "max_catchup"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"priority":3000000000})",
       400, "invalid_argument", "priority"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"max_attempts":0})", 400,
       "invalid_argument", "max_attempts"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"start":"tomorrow"})", 400,
       "invalid_argument", "start"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"start":true})", 400,
       "invalid_argument", "start"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"payload":[1]})", 400,
       "invalid_argument", "payload"},
      {"POST", "/v1/schedules",
       R"({"name":"a","queue":"q","every_ms":1,"payload":{"scheduled_for":1}})", 400,
       "invalid_argument", "payload"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"target":"http://h"})", 400,
       "invalid_argument", "target"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"q","every_ms":1,"target":{}})", 400,
       "invalid_argument", "target.url"},
      {"POST", "/v1/schedules",
       R"({"name":"a","queue":"q","every_ms":1,"target":{"url":"ftp://h"}})", 400,
       "invalid_argument", "target.url"},
      {"POST", "/v1/schedules", R"({"name":"a@b","queue":"q","every_ms":1})", 400,
       "invalid_argument", "name"},
      {"POST", "/v1/schedules", R"({"name":"_a","queue":"q","every_ms":1})", 400,
       "invalid_argument", "name"},
      {"POST", "/v1/schedules", R"({"name":"a","queue":"bad queue","every_ms":1})", 400,
       "invalid_argument", "queue"},
      {"PUT", "/v1/schedules/a", R"({"name":"b","queue":"q","every_ms":1})", 400,
       "invalid_argument", "name"},
      {"PUT", "/v1/schedules/a", R"({"queue":"q","every_ms":1,"misfire":"x"})", 400,
       "invalid_argument", "misfire"},
      {"PUT", "/v1/schedules/a", R"({"every_ms":1})", 400, "invalid_argument", "queue"},
      {"PUT", "/v1/schedules/a%zz", R"({"queue":"q","every_ms":1})", 400, "invalid_argument",
       "name"},
      {"POST", "/v1/schedules/a/pause", R"({"now":true})", 400, "invalid_argument", "now"},
      {"POST", "/v1/schedules/a/resume", "[", 400, "invalid_argument", "body"},
      {"DELETE", "/v1/schedules/a", R"({"force":true})", 400, "invalid_argument", "force"},
      {"GET", "/v1/schedules?limit=1&colour=red", "", 400, "invalid_argument", "colour"},
      {"GET", "/v1/schedules/a/next?count=1001", "", 400, "invalid_argument", "count"},
      {"PATCH", "/v1/schedules/a", "{}", 405, "method_not_allowed", ""},
      {"DELETE", "/v1/schedules", "", 405, "method_not_allowed", ""},
      {"GET", "/v1/schedules/a/pause", "", 405, "method_not_allowed", ""},
      {"POST", "/v1/schedules/a/next", "", 405, "method_not_allowed", ""},
      {"GET", "/v1/schedules/a/b/c", "", 404, "not_found", ""},
  };
  ExpectErrors(cases);
  ApiResponse schedules = Call("GET", "/v1/schedules");
  ASSERT_EQ(schedules.status, 200) << schedules.body;
  EXPECT_EQ(Json(schedules)["schedules"].size(), 0u) << schedules.body;
  EXPECT_EQ(Json(Call("GET", "/v1/tasks"))["tasks"].size(), 0u);
}

TEST_F(ApiSchedulesTest, MethodNotAllowedNamesTheAllowedMethods) {
  EXPECT_EQ(Call("PATCH", "/v1/schedules/a").allow, "GET, PUT, DELETE");
  EXPECT_EQ(Call("PUT", "/v1/schedules").allow, "GET, POST");
  EXPECT_EQ(Call("DELETE", "/v1/schedules/a/pause").allow, "POST");
  EXPECT_EQ(Call("POST", "/v1/schedules/a/next").allow, "GET");
}

}  // namespace
}  // namespace chronoq::server
