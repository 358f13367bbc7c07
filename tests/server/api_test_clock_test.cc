// GET and POST /v1/test/clock (server/api_test_clock.cc): a test moves the
// server's time and the engine has acted on it when the answer comes; a
// server on real time has no such endpoint.
#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "codec/json_codec.h"
#include "server/api_fixture.h"

namespace chronoq::test {
namespace {

using nlohmann::json;
using server::ApiResponse;
using namespace std::chrono_literals;

std::string TimeText(Timestamp t) {
  std::string out;
  AppendTime(out, t);
  return json::parse(out).get<std::string>();
}

class ApiTestClockTest : public ApiFixture {
 protected:
  json Clock() {
    ApiResponse r = Call("GET", "/v1/test/clock");
    EXPECT_EQ(r.status, 200) << r.body;
    return Json(r);
  }
  json Advance(int64_t ms) {
    ApiResponse r = Call("POST", "/v1/test/clock", json{{"advance_ms", ms}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json(r);
  }
  // Polls GET /v1/test/clock until one of its waits ends at `deadline`, as a
  // client's test does before it moves time.
  void AwaitWait(Timestamp deadline) {
    const std::string text = TimeText(deadline);
    ASSERT_TRUE(Eventually(
        [&] {
          const json clock = Clock();  // kept: the loop must not outlive it
          for (const json& w : clock["waits"]) {
            if (w == text) return true;
          }
          return false;
        },
        "a wait until " + text + " in GET /v1/test/clock"));
  }
};

TEST_F(ApiTestClockTest, SaysTheTimeAndMovesItForward) {
  const Timestamp start = clock_.Now();
  EXPECT_EQ(Clock()["now"], TimeText(start));
  EXPECT_EQ(Advance(1500)["now"], TimeText(start + 1500ms));
  EXPECT_EQ(clock_.Now(), start + 1500ms);
  const Timestamp later = start + 24h;
  ApiResponse set = Call("POST", "/v1/test/clock", json{{"now", TimeText(later)}}.dump());
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(Json(set)["now"], TimeText(later));
  EXPECT_EQ(clock_.Now(), later);
}

TEST_F(ApiTestClockTest, ALeaseLapsesWhenTheClockPassesIt) {
  ASSERT_EQ(Call("POST", "/v1/tasks",
                 R"({"queue":"q","id":"t1","backoff":{"base_ms":5000,"cap_ms":5000}})")
                .status,
            201);
  ApiResponse claimed = Call("POST", "/v1/queues/q/claim", R"({"lease_ms":10000,"wait_ms":0})");
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  ASSERT_EQ(Json(claimed)["tasks"].size(), 1u);
  Advance(9999);
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/t1"))["state"], "running");
  Advance(1);  // the answer comes once the engine has taken the task back
  EXPECT_NE(Json(Call("GET", "/v1/tasks/t1"))["state"], "running");
  Advance(5000);  // the retry's backoff, at most base_ms
  json again = Json(Call("POST", "/v1/queues/q/claim", R"({"wait_ms":0})"));
  ASSERT_EQ(again["tasks"].size(), 1u);
  EXPECT_EQ(again["tasks"][0]["attempt"], 2);
}

TEST_F(ApiTestClockTest, ALockWaitRunsOutWhenTheClockPassesItsDeadline) {
  ASSERT_EQ(Call("POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":60000})").status, 200);
  const Timestamp deadline = clock_.Now() + 200ms;
  auto waiting = Start("POST", "/v1/locks/k/acquire", R"({"wait_ms":200,"lease_ms":60000})");
  AwaitWait(deadline);
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout);
  Advance(200);
  ExpectError(GetWithin(waiting, "the lock wait's answer"), 409, "lock_wait_timeout", "wait_ms");
}

TEST_F(ApiTestClockTest, BadMovesChangeNothingAndNameTheField) {
  const Timestamp start = clock_.Now();
  ExpectErrors({
      {"POST", "/v1/test/clock", R"({"advance_ms":-1})", 400, "invalid_argument", "advance_ms"},
      {"POST", "/v1/test/clock", "{}", 400, "invalid_argument", "advance_ms"},
      {"POST", "/v1/test/clock", R"({"advance_ms":1,"now":")" + TimeText(start + 1h) + "\"}", 400,
       "invalid_argument", "advance_ms"},
      {"POST", "/v1/test/clock", R"({"now":")" + TimeText(start - 1ms) + "\"}", 400,
       "invalid_argument", "now"},
      {"POST", "/v1/test/clock", R"({"now":"yesterday"})", 400, "invalid_argument", "now"},
      {"POST", "/v1/test/clock", R"({"advance_ms":"1"})", 400, "invalid_argument", "advance_ms"},
      {"POST", "/v1/test/clock", R"({"advance_ms":1,"speed":2})", 400, "invalid_argument", "speed"},
      {"POST", "/v1/test/clock", "[", 400, "invalid_argument", ""},
  });
  EXPECT_EQ(clock_.Now(), start);
}

TEST_F(ApiTestClockTest, AServerOnRealTimeHasNoTestClock) {
  server::Api api(*engine_, SystemClock(), [](std::function<void()> fn) { fn(); });
  for (const char* method : {"GET", "POST"}) {
    std::promise<ApiResponse> answer;
    api.Handle({method, "/v1/test/clock", R"({"advance_ms":1000})"},
               [&](ApiResponse r) { answer.set_value(std::move(r)); });
    ApiResponse r = GetWithin(answer.get_future(), "the answer");
    r.Render();
    ExpectError(r, 404, "not_found");
    EXPECT_NE(r.body.find("--test-clock"), std::string::npos) << r.body;
  }
}

}  // namespace
}  // namespace chronoq::test
