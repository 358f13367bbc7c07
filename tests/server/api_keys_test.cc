// Per-key ordering over HTTP, driven directly on a real engine and a fake
// clock: the task `key` in and out (enqueue, batch, get, list, claim), the
// ?key= filter, the per-key queue settings and the max_in_flight alias, the
// 429 key_backlog_full answer, and bad keys.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api.h"
#include "server/api_fixture.h"

namespace chronoq::server {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ApiKeysTest : public test::ApiFixture {
 protected:
  // Enqueues `body` (a JSON object); expects 201 and returns the task.
  json Enqueue(const json& body) {
    ApiResponse r = Call("POST", "/v1/tasks", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  // The ids of GET /v1/tasks?<query>, in the order given.
  std::vector<std::string> ListIds(const std::string& query) {
    ApiResponse r = Call("GET", "/v1/tasks?" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> ids;
    json j = json::parse(r.body, nullptr, false);
    if (!j.is_object()) return ids;
    for (const json& t : j.value("tasks", json::array())) ids.push_back(t.value("id", ""));
    return ids;
  }
  json Queue(const std::string& body) {
    ApiResponse r = Call("PUT", "/v1/queues/q", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
};

TEST_F(ApiKeysTest, TheKeyRoundTripsThroughEnqueueGetListAndClaim) {
  json created = Enqueue({{"queue", "q"}, {"id", "a"}, {"key", "user:7"}});
  EXPECT_EQ(created["key"], "user:7");

  ApiResponse got = Call("GET", "/v1/tasks/a");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json(got)["key"], "user:7");

  json listed = Json(Call("GET", "/v1/tasks?queue=q"));
  ASSERT_EQ(listed["tasks"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["tasks"][0]["key"], "user:7");

  ApiResponse claimed = Call("POST", "/v1/queues/q/claim", "{}");
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  json leases = Json(claimed)["tasks"];
  ASSERT_EQ(leases.size(), 1u) << claimed.body;
  EXPECT_EQ(leases[0]["id"], "a");
  EXPECT_EQ(leases[0]["key"], "user:7");
  // The running task still shows it.
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/a"))["key"], "user:7");
}

// A claim that acknowledges a key's running task gets the key's next task
// in the same answer: the acks run first.
TEST_F(ApiKeysTest, AClaimThatAcknowledgesAKeysTaskGetsItsNext) {
  Enqueue({{"queue", "q"}, {"id", "k1"}, {"key", "k"}});
  Enqueue({{"queue", "q"}, {"id", "k2"}, {"key", "k"}});
  json first = Json(Call("POST", "/v1/queues/q/claim", R"({"max":10})"))["tasks"];
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["id"], "k1");
  ApiResponse r =
      Call("POST", "/v1/queues/q/claim",
           json({{"max", 10}, {"acks", {{{"id", "k1"}, {"token", first[0]["token"]}}}}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = Json(r);
  ASSERT_EQ(answer["tasks"].size(), 1u) << r.body;
  EXPECT_EQ(answer["tasks"][0]["id"], "k2");
  EXPECT_EQ(answer["acks"][0]["ok"], true);
}

TEST_F(ApiKeysTest, ATaskWithoutAKeyShowsNull) {
  // Absent, and null (which reads as absent), are both "no key".
  for (const json& body : {json{{"queue", "q"}}, json{{"queue", "q"}, {"key", nullptr}}}) {
    json t = Enqueue(body);
    ASSERT_TRUE(t.contains("key")) << t.dump();
    EXPECT_TRUE(t["key"].is_null()) << t.dump();
    EXPECT_TRUE(Json(Call("GET", "/v1/tasks/" + t["id"].get<std::string>()))["key"].is_null());
  }
  json lease = Json(Call("POST", "/v1/queues/q/claim", "{}"))["tasks"][0];
  ASSERT_TRUE(lease.contains("key")) << lease.dump();
  EXPECT_TRUE(lease["key"].is_null()) << lease.dump();
}

TEST_F(ApiKeysTest, KeysAreUtf8AndTravelEscaped) {
  const std::string key = "caf\xc3\xa9 \"x\"/\\y";
  EXPECT_EQ(Enqueue({{"queue", "q"}, {"id", "a"}, {"key", key}})["key"], key);
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/a"))["key"], key);
  const std::string longest(kMaxKeyBytes, 'k');
  EXPECT_EQ(Enqueue({{"queue", "q"}, {"key", longest}})["key"], longest);
}

TEST_F(ApiKeysTest, ABatchCarriesAKeyPerTask) {
  ApiResponse r = Call("POST", "/v1/tasks/batch",
                       R"({"tasks":[{"queue":"q","id":"a","key":"k1"},{"queue":"q","id":"b"},
                                    {"queue":"q","id":"c","key":"k2"}]})");
  ASSERT_EQ(r.status, 201) << r.body;
  json tasks = Json(r)["tasks"];
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0]["key"], "k1");
  EXPECT_TRUE(tasks[1]["key"].is_null());
  EXPECT_EQ(tasks[2]["key"], "k2");
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/c"))["key"], "k2");
}

TEST_F(ApiKeysTest, ListFiltersByKey) {
  Enqueue({{"queue", "q"}, {"id", "a"}, {"key", "k1"}});
  Enqueue({{"queue", "q"}, {"id", "b"}, {"key", "k2"}});
  Enqueue({{"queue", "q"}, {"id", "c"}, {"key", "k1"}});
  Enqueue({{"queue", "q"}, {"id", "d"}});
  Enqueue({{"queue", "other"}, {"id", "e"}, {"key", "k1"}});
  Enqueue({{"queue", "q"}, {"id", "f"}, {"key", "user:7/a b"}});

  EXPECT_THAT(ListIds("key=k1"), ElementsAre("a", "c", "e"));
  EXPECT_THAT(ListIds("key=k1&queue=q"), ElementsAre("a", "c"));
  EXPECT_THAT(ListIds("queue=q&key=k2&state=scheduled"), ElementsAre("b"));
  EXPECT_THAT(ListIds("key=k2&state=running"), ElementsAre());
  EXPECT_THAT(ListIds("key=nobody"), ElementsAre());
  // The value is percent-decoded, '+' a space.
  EXPECT_THAT(ListIds("key=user%3A7%2Fa+b"), ElementsAre("f"));
  // Without a key, every task.
  EXPECT_EQ(ListIds("queue=q").size(), 5u);

  // Pages of one key follow the cursor.
  std::vector<std::string> seen;
  std::string cursor;
  for (int page = 0; page < 5; ++page) {
    json j =
        Json(Call("GET", "/v1/tasks?key=k1&limit=1" + (cursor.empty() ? "" : "&cursor=" + cursor)));
    for (const json& t : j["tasks"]) seen.push_back(t["id"]);
    if (j["next_cursor"].is_null()) break;
    cursor = j["next_cursor"];
  }
  EXPECT_THAT(seen, ElementsAre("a", "c", "e"));
}

TEST_F(ApiKeysTest, BadKeysAreRejectedByFieldAndChangeNothing) {
  const std::string too_long(kMaxKeyBytes + 1, 'k');
  const std::vector<ErrorCase> cases = {
      {"POST", "/v1/tasks", R"({"queue":"q","key":""})", 400, "invalid_argument", "key"},
      {"POST", "/v1/tasks", R"({"queue":"q","key":"a\u0001b"})", 400, "invalid_argument", "key"},
      {"POST", "/v1/tasks", R"({"queue":"q","key":"line\nbreak"})", 400, "invalid_argument", "key"},
      {"POST", "/v1/tasks", R"({"queue":"q","key":"\u007f"})", 400, "invalid_argument", "key"},
      {"POST", "/v1/tasks", R"({"queue":"q","key":7})", 400, "invalid_argument", "key"},
      {"POST", "/v1/tasks", R"({"queue":"q","key":["k"]})", 400, "invalid_argument", "key"},
      {"POST", "/v1/tasks", R"({"queue":"q","key":")" + too_long + R"("})", 400, "invalid_argument",
       "key"},
      {"POST", "/v1/tasks", "{\"queue\":\"q\",\"key\":\"\xff\"}", 400, "invalid_argument", "body"},
      {"POST", "/v1/tasks/batch", R"({"tasks":[{"queue":"q","key":"ok"},{"queue":"q","key":""}]})",
       400, "invalid_argument", "tasks[1].key"},
      {"POST", "/v1/tasks/batch",
       R"({"tasks":[{"queue":"q","key":"ok"},{"queue":"q","key":"a\tb"}]})", 400,
       "invalid_argument", "tasks[1].key"},
      {"GET", "/v1/tasks?key=", "", 400, "invalid_argument", "key"},
      {"GET", "/v1/tasks?key=a%01b", "", 400, "invalid_argument", "key"},
      {"GET", "/v1/tasks?key=" + too_long, "", 400, "invalid_argument", "key"},
      {"GET", "/v1/tasks?key=%zz", "", 400, "invalid_argument", "key"},
  };
  ExpectErrors(cases);
  EXPECT_EQ(Json(Call("GET", "/v1/tasks"))["tasks"].size(), 0u);
}

TEST_F(ApiKeysTest, QueueSettingsRoundTripThePerKeyLimits) {
  json q = Json(Call("PUT", "/v1/queues/q", R"({"max_attempts":3})"));
  // Unset: the defaults apply (1 in flight per key, no backlog limit).
  EXPECT_TRUE(q["max_in_flight_per_key"].is_null()) << q.dump();
  EXPECT_TRUE(q["max_pending_per_key"].is_null()) << q.dump();
  EXPECT_TRUE(q["max_in_flight"].is_null()) << q.dump();

  q = Queue(R"({"max_in_flight_per_key":3,"max_pending_per_key":1000000000})");
  EXPECT_EQ(q["max_in_flight_per_key"], 3);
  EXPECT_EQ(q["max_pending_per_key"], 1000000000);
  EXPECT_EQ(q["max_attempts"], 3);  // fields left out keep their value

  json got = Json(Call("GET", "/v1/queues/q"));
  EXPECT_EQ(got["max_in_flight_per_key"], 3);
  EXPECT_EQ(got["max_pending_per_key"], 1000000000);
  json all = Json(Call("GET", "/v1/queues"));
  ASSERT_EQ(all["queues"].size(), 1u);
  EXPECT_EQ(all["queues"][0]["max_in_flight_per_key"], 3);

  q = Queue(R"({"max_pending_per_key":5})");
  EXPECT_EQ(q["max_in_flight_per_key"], 3);
  EXPECT_EQ(q["max_pending_per_key"], 5);
  q = Queue(R"({"max_in_flight_per_key":100000})");
  EXPECT_EQ(q["max_in_flight_per_key"], 100000);

  // null puts a setting back to its default; left out keeps it.
  q = Queue(R"({"max_pending_per_key":null,"rate_limit":{"count":5,"period_ms":1000}})");
  EXPECT_TRUE(q["max_pending_per_key"].is_null()) << q.dump();
  EXPECT_EQ(q["max_in_flight_per_key"], 100000);
  q = Queue(R"({"rate_limit":null,"max_in_flight_per_key":null,"max_in_flight":7})");
  EXPECT_TRUE(q["rate_limit"].is_null()) << q.dump();
  EXPECT_TRUE(q["max_in_flight_per_key"].is_null()) << q.dump();
  EXPECT_EQ(q["concurrency"], 7);
  q = Queue(R"({"max_in_flight":null})");
  EXPECT_TRUE(q["concurrency"].is_null()) << q.dump();
  ExpectError(Call("PUT", "/v1/queues/q", R"({"concurrency":null,"max_in_flight":3})"), 400,
              "invalid_argument", "max_in_flight");
  EXPECT_TRUE(Json(Call("GET", "/v1/queues/q"))["concurrency"].is_null());
}

TEST_F(ApiKeysTest, MaxInFlightIsAnotherNameForConcurrency) {
  json q = Queue(R"({"max_in_flight":6})");
  EXPECT_EQ(q["concurrency"], 6);
  EXPECT_EQ(q["max_in_flight"], 6);
  q = Queue(R"({"concurrency":7})");
  EXPECT_EQ(q["concurrency"], 7);
  EXPECT_EQ(q["max_in_flight"], 7);
  // Both, when they agree.
  q = Queue(R"({"concurrency":8,"max_in_flight":8})");
  EXPECT_EQ(q["concurrency"], 8);
  EXPECT_EQ(q["max_in_flight"], 8);

  // Both, when they disagree: an error naming the alias; nothing changes.
  ApiResponse r = Call("PUT", "/v1/queues/q", R"({"concurrency":2,"max_in_flight":3})");
  ExpectError(r, 400, "invalid_argument", "max_in_flight");
  EXPECT_THAT(Json(r)["error"]["message"].get<std::string>(), HasSubstr("concurrency"));
  ExpectError(
      Call("PUT", "/v1/queues/q", R"({"max_in_flight":3,"concurrency":2,"max_attempts":1})"), 400,
      "invalid_argument", "max_in_flight");
  q = Json(Call("GET", "/v1/queues/q"));
  EXPECT_EQ(q["concurrency"], 8);
  EXPECT_TRUE(q["max_attempts"].is_null()) << q.dump();
}

TEST_F(ApiKeysTest, BadPerKeySettingsAreRejectedByField) {
  const std::vector<ErrorCase> cases = {
      {"PUT", "/v1/queues/q", R"({"max_in_flight_per_key":0})", 400, "invalid_argument",
       "max_in_flight_per_key"},
      {"PUT", "/v1/queues/q", R"({"max_in_flight_per_key":100001})", 400, "invalid_argument",
       "max_in_flight_per_key"},
      {"PUT", "/v1/queues/q", R"({"max_in_flight_per_key":"2"})", 400, "invalid_argument",
       "max_in_flight_per_key"},
      {"PUT", "/v1/queues/q", R"({"max_pending_per_key":0})", 400, "invalid_argument",
       "max_pending_per_key"},
      {"PUT", "/v1/queues/q", R"({"max_pending_per_key":1000000001})", 400, "invalid_argument",
       "max_pending_per_key"},
      {"PUT", "/v1/queues/q", R"({"max_pending_per_key":1.5})", 400, "invalid_argument",
       "max_pending_per_key"},
      {"PUT", "/v1/queues/q", R"({"max_in_flight":0})", 400, "invalid_argument", "max_in_flight"},
      {"PUT", "/v1/queues/q", R"({"max_in_flight":100001})", 400, "invalid_argument",
       "max_in_flight"},
      {"PUT", "/v1/queues/q", R"({"max_inflight_per_key":2})", 400, "invalid_argument",
       "max_inflight_per_key"},
  };
  ExpectErrors(cases);
  EXPECT_EQ(Call("GET", "/v1/queues/q").status, 404);  // nothing configured it
}

// REQUIRES the engine's max_pending_per_key (ResourceExhausted on "key").
TEST_F(ApiKeysTest, AFullKeyBacklogIs429KeyBacklogFullNamingTheKey) {
  Queue(R"({"max_pending_per_key":1})");
  Enqueue({{"queue", "q"}, {"id", "a"}, {"key", "user:7"}});

  ApiResponse full = Call("POST", "/v1/tasks", R"({"queue":"q","id":"b","key":"user:7"})");
  ExpectError(full, 429, "key_backlog_full", "key");
  EXPECT_THAT(Json(full)["error"]["message"].get<std::string>(), HasSubstr("user:7"));
  EXPECT_EQ(engine_->Get("b").status().code(), StatusCode::kNotFound);

  // Other keys, and tasks without one, are not limited by it.
  Enqueue({{"queue", "q"}, {"id", "c"}, {"key", "user:8"}});
  Enqueue({{"queue", "q"}, {"id", "d"}});

  // A batch names the index, and writes nothing.
  ApiResponse batch = Call(
      "POST", "/v1/tasks/batch",
      R"({"tasks":[{"queue":"q","id":"e","key":"user:9"},{"queue":"q","id":"f","key":"user:7"}]})");
  ExpectError(batch, 429, "key_backlog_full", "tasks[1].key");
  EXPECT_THAT(Json(batch)["error"]["message"].get<std::string>(), HasSubstr("user:7"));
  EXPECT_EQ(engine_->Get("e").status().code(), StatusCode::kNotFound);
  // Two of one new key in one batch overflow it too.
  ExpectError(
      Call(
          "POST", "/v1/tasks/batch",
          R"({"tasks":[{"queue":"q","id":"g","key":"user:10"},{"queue":"q","id":"h","key":"user:10"}]})"),
      429, "key_backlog_full", "tasks[1].key");
  EXPECT_EQ(engine_->Get("g").status().code(), StatusCode::kNotFound);

  // Once the waiting task has started, the key takes another.
  json leases = Json(Call("POST", "/v1/queues/q/claim", R"({"max":10})"))["tasks"];
  ASSERT_FALSE(leases.empty());
  EXPECT_EQ(StateOf("a"), TaskState::kRunning);
  Enqueue({{"queue", "q"}, {"id", "b"}, {"key", "user:7"}});
}

TEST(ApiKeysErrorsTest, AKeyBacklogErrorIsA429OfItsOwn) {
  for (const std::string field : {"key", "tasks[3].key"}) {
    const Status full(StatusCode::kResourceExhausted, "key k has 5 tasks waiting", field,
                      StatusReason::kKeyBacklogFull);
    EXPECT_EQ(HttpStatusOf(full), 429) << field;
    EXPECT_EQ(WireCodeOf(full), "key_backlog_full") << field;
    EXPECT_THAT(ErrorResponse(full).body, HasSubstr(R"("field":")" + field + "\"")) << field;
  }
  // Another limit is still resource_exhausted, and another error on a key
  // keeps its code.
  for (const std::string field : {"", "monkey", "key.x", "window"}) {
    const Status other(StatusCode::kResourceExhausted, "full", field);
    EXPECT_EQ(HttpStatusOf(other), 429) << field;
    EXPECT_EQ(WireCodeOf(other), "resource_exhausted") << field;
  }
  const Status bad = Status::InvalidArgument("key", "must not be empty");
  EXPECT_EQ(HttpStatusOf(bad), 400);
  EXPECT_EQ(WireCodeOf(bad), "invalid_argument");
}

}  // namespace
}  // namespace chronoq::server
