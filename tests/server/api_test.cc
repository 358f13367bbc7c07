// The HTTP/JSON API driven directly (no sockets) on a real engine and a fake
// clock: every endpoint, its status codes, and every class of bad input.
#include "server/api.h"

#include <future>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chronoq/time.h"

#include "server/api_fixture.h"
#include "support/faulty_engine_fixture.h"

namespace chronoq::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

using ApiTest = test::ApiFixture;

TEST_F(ApiTest, TaskLifeCycle) {
  ApiResponse created = Call("POST", "/v1/tasks",
                             R"({"queue":"emails","payload":{"to":"a@b.c"},"delay_ms":5000,
                                 "id":"share:42","priority":-2,"max_attempts":3})");
  ASSERT_EQ(created.status, 201) << created.body;
  json t = Json(created);
  EXPECT_EQ(t["id"], "share:42");
  EXPECT_EQ(t["queue"], "emails");
  EXPECT_EQ(t["state"], "scheduled");
  EXPECT_EQ(t["payload"], json({{"to", "a@b.c"}}));
  EXPECT_EQ(t["run_at"], FormatTime(clock_.Now() + 5s));
  EXPECT_EQ(t["attempt"], 0);
  EXPECT_EQ(t["max_attempts"], 3);
  EXPECT_EQ(t["priority"], -2);
  EXPECT_TRUE(t["last_error"].is_null());
  EXPECT_EQ(t["created_at"], FormatTime(clock_.Now()));

  // The id travels percent-encoded.
  ApiResponse got = Call("GET", "/v1/tasks/share%3A42");
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(Json(got)["payload"]["to"], "a@b.c");

  ApiResponse moved = Call("PATCH", "/v1/tasks/share:42", R"({"delay_ms":60000,"payload":[1]})");
  ASSERT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(Json(moved)["run_at"], FormatTime(clock_.Now() + 60s));
  EXPECT_EQ(Json(moved)["payload"], json::array({1}));

  ApiResponse cancelled = Call("DELETE", "/v1/tasks/share:42");
  ASSERT_EQ(cancelled.status, 200);
  EXPECT_EQ(Json(cancelled)["state"], "cancelled");
  ExpectError(Call("DELETE", "/v1/tasks/share:42"), 409, "failed_precondition");
  ExpectError(Call("DELETE", "/v1/tasks/nope"), 404, "not_found");
  ExpectError(Call("GET", "/v1/tasks/nope"), 404, "not_found");
}

TEST_F(ApiTest, ATargetIsStoredShownAndReported) {
  ApiResponse r = Call("POST", "/v1/tasks",
                       R"({"queue":"hooks","target":{"url":"https://h.example/x","method":"PUT",
                           "headers":{"Authorization":"Bearer t"},"timeout_ms":2500}})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Json(r)["target"], json({{"url", "https://h.example/x"},
                                     {"method", "PUT"},
                                     {"headers", {{"Authorization", "Bearer t"}}},
                                     {"timeout_ms", 2500}}));
  EXPECT_EQ(webhook_queues_, std::vector<std::string>{"hooks"});
  // A plain task reports nothing and shows no target.
  ApiResponse plain = Call("POST", "/v1/tasks", R"({"queue":"q"})");
  EXPECT_FALSE(Json(plain).contains("target"));
  EXPECT_EQ(webhook_queues_.size(), 1u);
  // Batches report their target queues too.
  Call("POST", "/v1/tasks/batch", R"({"tasks":[{"queue":"more","target":{"url":"http://h"}}]})");
  EXPECT_EQ(webhook_queues_.back(), "more");
  // The queues say whether chronoqd delivers their tasks.
  EXPECT_EQ(Json(Call("GET", "/v1/queues/hooks"))["webhooks"], true);
  EXPECT_EQ(Json(Call("GET", "/v1/queues/q"))["webhooks"], false);
  // The lease carries the target to a worker that claims it by hand.
  json lease = Json(Call("POST", "/v1/queues/hooks/claim", "{}"))["tasks"][0];
  EXPECT_EQ(lease["target"]["method"], "PUT");
}

TEST_F(ApiTest, ConflictsRejectIgnoreReplace) {
  ASSERT_EQ(Call("POST", "/v1/tasks", R"({"queue":"q","id":"x","payload":1})").status, 201);
  ExpectError(Call("POST", "/v1/tasks", R"({"queue":"q","id":"x"})"), 409, "conflict");
  ApiResponse ignored =
      Call("POST", "/v1/tasks", R"({"queue":"q","id":"x","payload":2,"on_conflict":"ignore"})");
  EXPECT_EQ(ignored.status, 200);
  EXPECT_EQ(Json(ignored)["payload"], 1);
  ApiResponse replaced =
      Call("POST", "/v1/tasks", R"({"queue":"q","id":"x","payload":3,"on_conflict":"replace"})");
  EXPECT_EQ(replaced.status, 201);
  EXPECT_EQ(Json(replaced)["payload"], 3);
}

TEST_F(ApiTest, TimesAreRfc3339WithAnyOffsetOrEpochMillis) {
  clock_.Set(*ParseTime("2026-11-22T00:00:00Z"));
  ApiResponse a =
      Call("POST", "/v1/tasks", R"({"queue":"q","run_at":"2026-11-22T05:00:00.250+02:00"})");
  ASSERT_EQ(a.status, 201) << a.body;
  EXPECT_EQ(Json(a)["run_at"], "2026-11-22T03:00:00.250Z");
  ApiResponse b = Call("POST", "/v1/tasks", R"({"queue":"q","run_at":1795393200000})");
  ASSERT_EQ(b.status, 201) << b.body;
  EXPECT_EQ(Json(b)["run_at"], "2026-11-23T00:20:00.000Z");
  ExpectError(Call("POST", "/v1/tasks", R"({"queue":"q","run_at":"tomorrow"})"), 400,
              "invalid_argument", "run_at");
  ExpectError(Call("POST", "/v1/tasks", R"({"queue":"q","run_at":true})"), 400, "invalid_argument",
              "run_at");
}

TEST_F(ApiTest, BatchIsAllOrNothingAndErrorsNameTheIndex) {
  ApiResponse ok = Call("POST", "/v1/tasks/batch",
                        R"({"tasks":[{"queue":"q","id":"a"},{"queue":"q","id":"b"}]})");
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(Json(ok)["tasks"].size(), 2u);
  EXPECT_EQ(Json(ok)["tasks"][1]["id"], "b");

  ExpectError(Call("POST", "/v1/tasks/batch",
                   R"({"tasks":[{"queue":"q","id":"c"},{"queue":"q","delay_ms":-1}]})"),
              400, "invalid_argument", "tasks[1].delay_ms");
  ExpectError(Call("POST", "/v1/tasks/batch",
                   R"({"tasks":[{"queue":"q","id":"c"},{"queue":"q","id":"a"}]})"),
              409, "conflict", "tasks[1].id");
  // A batch of one is still a batch: its errors name the index too.
  ExpectError(Call("POST", "/v1/tasks/batch", R"({"tasks":[{"queue":"q","id":"a"}]})"), 409,
              "conflict", "tasks[0].id");
  ExpectError(Call("POST", "/v1/tasks/batch", R"({"tasks":[]})"), 400, "invalid_argument", "tasks");
  ExpectError(Call("POST", "/v1/tasks/batch", R"({"tasks":[7]})"), 400, "invalid_argument",
              "tasks[0]");
  EXPECT_EQ(StateOf("a"), TaskState::kScheduled);
  EXPECT_EQ(engine_->Get("c").status().code(), StatusCode::kNotFound);
}

// "return": "ids" answers the ids alone, in order, generated ones included;
// "tasks" is the default. A bad value changes nothing.
TEST_F(ApiTest, BatchAnswersIdsAloneWhenAsked) {
  ApiResponse ids = Call("POST", "/v1/tasks/batch",
                         R"({"tasks":[{"queue":"q","id":"a"},{"queue":"q"}],"return":"ids"})");
  ASSERT_EQ(ids.status, 201) << ids.body;
  const json got = Json(ids);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got["ids"].size(), 2u);
  EXPECT_EQ(got["ids"][0], "a");
  EXPECT_EQ(StateOf(got["ids"][1].get<std::string>()), TaskState::kScheduled);
  ApiResponse full =
      Call("POST", "/v1/tasks/batch", R"({"tasks":[{"queue":"q","id":"b"}],"return":"tasks"})");
  ASSERT_EQ(full.status, 201) << full.body;
  EXPECT_EQ(Json(full)["tasks"][0]["id"], "b");
  ExpectError(
      Call("POST", "/v1/tasks/batch", R"({"tasks":[{"queue":"q","id":"c"}],"return":"id"})"), 400,
      "invalid_argument", "return");
  ExpectError(Call("POST", "/v1/tasks/batch", R"({"tasks":[{"queue":"q","id":"c"}],"return":1})"),
              400, "invalid_argument", "return");
  EXPECT_EQ(engine_->Get("c").status().code(), StatusCode::kNotFound);
}

TEST_F(ApiTest, ListPagesWithCursors) {
  for (int i = 0; i < 5; ++i) Add(std::chrono::seconds(i));
  std::vector<std::string> seen;
  std::string cursor;
  for (int page = 0; page < 10; ++page) {
    ApiResponse r = Call("GET", "/v1/tasks?queue=q&state=scheduled&limit=2" +
                                    (cursor.empty() ? "" : "&cursor=" + cursor));
    ASSERT_EQ(r.status, 200) << r.body;
    json j = Json(r);
    for (const auto& t : j["tasks"]) seen.push_back(t["id"]);
    if (j["next_cursor"].is_null()) break;
    cursor = j["next_cursor"];
  }
  EXPECT_EQ(seen.size(), 5u);
  ExpectError(Call("GET", "/v1/tasks?limit=0"), 400, "invalid_argument", "limit");
  ExpectError(Call("GET", "/v1/tasks?state=sleeping"), 400, "invalid_argument", "state");
  ExpectError(Call("GET", "/v1/tasks?colour=red"), 400, "invalid_argument", "colour");
}

TEST_F(ApiTest, ClaimAckFailExtendWithTokens) {
  const Task a = Add();
  const Task b = Add();
  ApiResponse claimed =
      Call("POST", "/v1/queues/q/claim", R"({"max":2,"lease_ms":30000,"wait_ms":0})");
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  json leases = Json(claimed)["tasks"];
  ASSERT_EQ(leases.size(), 2u);
  const uint64_t token = leases[0]["token"];
  EXPECT_EQ(leases[0]["attempt"], 1);
  EXPECT_EQ(leases[0]["state"], "running");
  EXPECT_EQ(leases[0]["lease_until"], FormatTime(clock_.Now() + 30s));

  ApiResponse extended = Call("POST", "/v1/tasks/" + a.id + "/extend",
                              json({{"token", token}, {"lease_ms", 60000}}).dump());
  ASSERT_EQ(extended.status, 200) << extended.body;
  EXPECT_EQ(Json(extended)["lease_until"], FormatTime(clock_.Now() + 60s));

  ExpectError(Call("POST", "/v1/tasks/" + a.id + "/ack", json({{"token", token + 7}}).dump()), 409,
              "stale_token", "token");
  EXPECT_EQ(Call("POST", "/v1/tasks/" + a.id + "/ack", json({{"token", token}}).dump()).status,
            200);
  EXPECT_EQ(StateOf(a.id), TaskState::kSucceeded);

  ApiResponse failed =
      Call("POST", "/v1/tasks/" + b.id + "/fail",
           json({{"token", token}, {"error", "smtp 451"}, {"retry_in_ms", 1000}}).dump());
  ASSERT_EQ(failed.status, 200) << failed.body;
  json after = Json(Call("GET", "/v1/tasks/" + b.id));
  EXPECT_EQ(after["state"], "scheduled");
  EXPECT_EQ(after["last_error"], "smtp 451");
  EXPECT_EQ(after["run_at"], FormatTime(clock_.Now() + 1s));
}

// GET /v1/tasks/{id}?attempts=true adds the attempt history; without the
// flag the answer is as before; a bad flag is a 400 naming it.
TEST_F(ApiTest, GetTaskWithAttemptsShowsTheHistory) {
  const Task a = Add();
  const Timestamp claimed = clock_.Now();
  json leases = Json(Call("POST", "/v1/queues/q/claim", R"({"worker":"w-1"})"))["tasks"];
  ASSERT_EQ(leases.size(), 1u);
  clock_.Advance(2s);
  ASSERT_EQ(
      Call("POST", "/v1/tasks/" + a.id + "/fail",
           json({{"token", leases[0]["token"]}, {"error", "smtp 451"}, {"retry_in_ms", 0}}).dump())
          .status,
      200);

  const json plain = Json(Call("GET", "/v1/tasks/" + a.id));
  EXPECT_FALSE(plain.contains("attempts"));
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/" + a.id + "?attempts=false")), plain);
  ApiResponse r = Call("GET", "/v1/tasks/" + a.id + "?attempts=true");
  ASSERT_EQ(r.status, 200) << r.body;
  json with = Json(r);
  ASSERT_EQ(with["attempts"].size(), 1u);
  EXPECT_EQ(with["attempts"][0], json({{"attempt", 1},
                                       {"started_at", FormatTime(claimed)},
                                       {"ended_at", FormatTime(claimed + 2s)},
                                       {"duration_ms", 2000},
                                       {"node", nullptr},  // EngineOptions::node: none
                                       {"worker", "w-1"},
                                       {"outcome", "failed"},
                                       {"error", "smtp 451"},
                                       {"response", nullptr}}));
  with.erase("attempts");
  EXPECT_EQ(with, plain);

  ExpectError(Call("GET", "/v1/tasks/" + a.id + "?attempts=yes"), 400, "invalid_argument",
              "attempts");
  ExpectError(Call("GET", "/v1/tasks/" + a.id + "?colour=red"), 400, "invalid_argument", "colour");
  ExpectError(Call("GET", "/v1/tasks/nope?attempts=true"), 404, "not_found");
}

// A claim may acknowledge the tasks of the previous one: one request per
// batch instead of two.
TEST_F(ApiTest, AClaimAcknowledgesThePreviousClaimsTasks) {
  const Task a = Add();
  const Task b = Add();
  const Task c = Add();
  json leases = Json(Call("POST", "/v1/queues/q/claim", R"({"max":2})"))["tasks"];
  ASSERT_EQ(leases.size(), 2u);
  const uint64_t token = leases[0]["token"];
  ApiResponse r = Call(
      "POST", "/v1/queues/q/claim",
      json({{"max", 5},
            {"acks", {{{"id", a.id}, {"token", token}}, {{"id", b.id}, {"token", token + 1}}}}})
          .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = Json(r);
  ASSERT_EQ(answer["tasks"].size(), 1u);
  EXPECT_EQ(answer["tasks"][0]["id"], c.id);
  ASSERT_EQ(answer["acks"].size(), 2u);
  EXPECT_EQ(answer["acks"][0], json({{"id", a.id}, {"ok", true}}));
  EXPECT_EQ(answer["acks"][1]["ok"], false);
  EXPECT_EQ(answer["acks"][1]["error"]["code"], "stale_token");
  EXPECT_EQ(StateOf(a.id), TaskState::kSucceeded);
  EXPECT_EQ(StateOf(b.id), TaskState::kRunning);

  // Nothing left: the acks still go through, and the answer has no tasks.
  const uint64_t c_token = answer["tasks"][0]["token"];
  r = Call("POST", "/v1/queues/q/claim",
           json({{"acks", {{{"id", c.id}, {"token", c_token}}}}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["tasks"].size(), 0u);
  EXPECT_EQ(Json(r)["acks"][0]["ok"], true);
  EXPECT_EQ(StateOf(c.id), TaskState::kSucceeded);

  // Bad acks refuse the whole request: nothing is acknowledged or claimed.
  const Task d = Add();
  const std::vector<ErrorCase> cases = {
      {"POST", "/v1/queues/q/claim", R"({"acks":[]})", 400, "invalid_argument", "acks"},
      {"POST", "/v1/queues/q/claim", R"({"acks":{}})", 400, "invalid_argument", "acks"},
      {"POST", "/v1/queues/q/claim", R"({"acks":[1]})", 400, "invalid_argument", "acks[0]"},
      {"POST", "/v1/queues/q/claim", R"({"acks":[{"token":1}]})", 400, "invalid_argument",
       "acks[0].id"},
      {"POST", "/v1/queues/q/claim", R"({"acks":[{"id":"","token":1}]})", 400, "invalid_argument",
       "acks[0].id"},
      {"POST", "/v1/queues/q/claim", json({{"acks", {{{"id", b.id}}}}}).dump(), 400,
       "invalid_argument", "acks[0].token"},
      {"POST", "/v1/queues/bad%20name/claim",
       json({{"acks", {{{"id", b.id}, {"token", token}}}}}).dump(), 400, "invalid_argument",
       "queue"},
  };
  ExpectErrors(cases);
  EXPECT_EQ(StateOf(b.id), TaskState::kRunning);
  EXPECT_EQ(StateOf(d.id), TaskState::kScheduled);
}

TEST_F(ApiTest, AcksReportsPerTask) {
  const Task a = Add();
  const Task b = Add();
  json leases = Json(Call("POST", "/v1/queues/q/claim", R"({"max":2})"))["tasks"];
  const uint64_t token = leases[0]["token"];
  ApiResponse r = Call("POST", "/v1/acks",
                       json({{"acks",
                              {{{"id", a.id}, {"token", token}},
                               {{"id", b.id}, {"token", token + 1}},
                               {{"id", "nope"}, {"token", token}}}}})
                           .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json results = Json(r)["results"];
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0], json({{"id", a.id}, {"ok", true}}));
  EXPECT_EQ(results[1]["ok"], false);
  EXPECT_EQ(results[1]["error"]["code"], "stale_token");
  EXPECT_EQ(results[2]["error"]["code"], "not_found");
  ExpectError(Call("POST", "/v1/acks", R"({"acks":[{"id":"x"}]})"), 400, "invalid_argument",
              "acks[0].token");
}

// Failures ride beside successes: {id, token, error, retry_in_ms?}.
TEST_F(ApiTest, AcksCarryFailures) {
  const Task a = Add();
  const Task b = Add();
  const Task c = Add();
  json leases = Json(Call("POST", "/v1/queues/q/claim", R"({"max":3})"))["tasks"];
  ASSERT_EQ(leases.size(), 3u);
  const uint64_t token = leases[0]["token"];
  ApiResponse r =
      Call("POST", "/v1/acks",
           json({{"acks",
                  {{{"id", a.id}, {"token", token}},
                   {{"id", b.id}, {"token", token}, {"error", "disk full"}},
                   {{"id", c.id}, {"token", token}, {"error", "later"}, {"retry_in_ms", 60000}}}}})
               .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["results"],
            json::parse(R"([{"id":")" + a.id + R"(","ok":true},{"id":")" + b.id +
                        R"(","ok":true},{"id":")" + c.id + R"(","ok":true}])"));
  EXPECT_EQ(StateOf(a.id), TaskState::kSucceeded);
  EXPECT_EQ(StateOf(b.id), TaskState::kScheduled);
  json failed = Json(Call("GET", "/v1/tasks/" + c.id));
  EXPECT_EQ(failed["last_error"], "later");
  EXPECT_EQ(failed["attempt"], 1);

  // On a claim too; the failed task is not handed out again before its delay.
  clock_.Advance(1h);
  json claim = Json(Call("POST", "/v1/queues/q/claim", R"({"max":5})"));
  ASSERT_EQ(claim["tasks"].size(), 2u);
  const json& first = claim["tasks"][0];
  json second = Json(
      Call("POST", "/v1/queues/q/claim",
           json({{"max", 5},
                 {"acks", {{{"id", first["id"]}, {"token", first["token"]}, {"error", "again"}}}}})
               .dump()));
  EXPECT_EQ(second["acks"], json::parse(R"([{"id":)" + first["id"].dump() + R"(,"ok":true}])"));
  EXPECT_EQ(Json(Call("GET", "/v1/tasks/" + first["id"].get<std::string>()))["last_error"],
            "again");

  const Task d = Add();
  const uint64_t d_token = Json(Call("POST", "/v1/queues/q/claim", "{}"))["tasks"][0]["token"];
  const std::vector<ErrorCase> cases = {
      {"POST", "/v1/acks",
       json({{"acks", {{{"id", d.id}, {"token", d_token}, {"error", 5}}}}}).dump(), 400,
       "invalid_argument", "acks[0].error"},
      {"POST", "/v1/acks",
       json({{"acks", {{{"id", d.id}, {"token", d_token}, {"retry_in_ms", 5}}}}}).dump(), 400,
       "invalid_argument", "acks[0].retry_in_ms"},
      {"POST", "/v1/acks",
       json({{"acks", {{{"id", d.id}, {"token", d_token}, {"error", "x"}, {"retry_in_ms", -1}}}}})
           .dump(),
       400, "invalid_argument", "acks[0].retry_in_ms"},
  };
  ExpectErrors(cases);
  EXPECT_EQ(StateOf(d.id), TaskState::kRunning);
}

TEST_F(ApiTest, LongPollClaimIsAnsweredWhenATaskArrives) {
  auto pending = Start("POST", "/v1/queues/q/claim", R"({"wait_ms":20000})");
  clock_.AwaitWaiter(clock_.Now() + 20s);
  EXPECT_EQ(pending.wait_for(0s), std::future_status::timeout);
  const Task t = Add();
  ApiResponse r = test::GetWithin(pending, "the long poll's answer");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json(r)["tasks"][0]["id"], t.id);

  auto empty = Start("POST", "/v1/queues/q/claim", R"({"wait_ms":1000})");
  clock_.AwaitWaiter(clock_.Now() + 1s);
  clock_.Advance(1s);
  EXPECT_EQ(Json(empty.get())["tasks"].size(), 0u);
}

TEST_F(ApiTest, RetryRevivesADeadTask) {
  ASSERT_EQ(Call("POST", "/v1/tasks", R"({"queue":"q","id":"d","max_attempts":1})").status, 201);
  json lease = Json(Call("POST", "/v1/queues/q/claim", "{}"))["tasks"][0];
  Call("POST", "/v1/tasks/d/fail", json({{"token", lease["token"]}, {"error", "x"}}).dump());
  EXPECT_EQ(StateOf("d"), TaskState::kDead);
  ApiResponse r = Call("POST", "/v1/tasks/d/retry");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["state"], "scheduled");
  ExpectError(Call("POST", "/v1/tasks/d/retry"), 409, "failed_precondition");
}

TEST_F(ApiTest, BadInputIsRejectedByFieldAndChangesNothing) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const std::vector<ErrorCase> cases = {
      {"POST", "/v1/tasks", "{", 400, "invalid_argument", "body"},
      {"POST", "/v1/tasks", "[]", 400, "invalid_argument", "body"},
      {"POST", "/v1/tasks", R"({"payload":1})", 400, "invalid_argument", "queue"},
      {"POST", "/v1/tasks", R"({"queue":7})", 400, "invalid_argument", "queue"},
      {"POST", "/v1/tasks", R"({"queue":"bad queue"})", 400, "invalid_argument", "queue"},
      {"POST", "/v1/tasks", R"({"queue":"q","delay":5})", 400, "invalid_argument", "delay"},
      {"POST", "/v1/tasks", R"({"queue":"q","delay_ms":"5"})", 400, "invalid_argument", "delay_ms"},
      {"POST", "/v1/tasks", R"({"queue":"q","delay_ms":1,"run_at":1})", 400, "invalid_argument",
       "delay_ms"},
      {"POST", "/v1/tasks", R"({"queue":"q","max_attempts":0})", 400, "invalid_argument",
       "max_attempts"},
      {"POST", "/v1/tasks", R"({"queue":"q","max_attempts":1e3})", 400, "invalid_argument",
       "max_attempts"},
      {"POST", "/v1/tasks", R"({"queue":"q","priority":99999999999})", 400, "invalid_argument",
       "priority"},
      {"POST", "/v1/tasks", R"({"queue":"q","on_conflict":"merge"})", 400, "invalid_argument",
       "on_conflict"},
      {"POST", "/v1/tasks", R"({"queue":"q","id":""})", 400, "invalid_argument", "id"},
      {"POST", "/v1/tasks", R"({"queue":"q","id":"_x"})", 400, "invalid_argument", "id"},
      {"POST", "/v1/tasks", R"({"queue":"q","payload":)" + deep + "}", 400, "invalid_argument",
       "body"},
      {"POST", "/v1/tasks", R"({"queue":"q","payload":")" + std::string(300 * 1024, 'x') + "\"}",
       400, "invalid_argument", "payload"},
      {"POST", "/v1/tasks", R"({"queue":"q","backoff":{"base_ms":0}})", 400, "invalid_argument",
       "backoff.base_ms"},
      {"POST", "/v1/tasks", R"({"queue":"q","target":"http://h"})", 400, "invalid_argument",
       "target"},
      {"POST", "/v1/tasks", R"({"queue":"q","target":{}})", 400, "invalid_argument", "target.url"},
      {"POST", "/v1/tasks", R"({"queue":"q","target":{"url":"ftp://h"}})", 400, "invalid_argument",
       "target.url"},
      {"POST", "/v1/tasks", R"({"queue":"q","target":{"url":"http://h","headers":{"A":1}}})", 400,
       "invalid_argument", "target.headers.A"},
      {"POST", "/v1/tasks", R"({"queue":"q","target":{"url":"http://h","timeout_ms":0}})", 400,
       "invalid_argument", "target.timeout_ms"},
      {"POST", "/v1/tasks", R"({"queue":"q","target":{"url":"http://h","verb":"PUT"}})", 400,
       "invalid_argument", "target.verb"},
      {"PATCH", "/v1/tasks/x", R"({})", 400, "invalid_argument", "run_at"},
      {"GET", "/v1/tasks/bad%zz", "", 400, "invalid_argument", "id"},
      {"POST", "/v1/queues/q/claim", R"({"max":0})", 400, "invalid_argument", "max"},
      {"POST", "/v1/queues/q/claim", R"({"lease_ms":0})", 400, "invalid_argument", "lease_ms"},
      {"POST", "/v1/queues/q/claim", R"({"wait_ms":3600001})", 400, "invalid_argument", "wait_ms"},
      {"POST", "/v1/queues/q/claim", R"({"mx":1})", 400, "invalid_argument", "mx"},
      {"POST", "/v1/tasks/x/ack", R"({"token":-1})", 400, "invalid_argument", "token"},
      {"POST", "/v1/tasks/x/ack", R"({"token":"1"})", 400, "invalid_argument", "token"},
      {"POST", "/v1/tasks/x/extend", R"({"token":1})", 400, "invalid_argument", "lease_ms"},
      {"POST", "/v1/tasks/x/retry", R"({"now":true})", 400, "invalid_argument", "now"},
      {"GET", "/v1/nothing", "", 404, "not_found", ""},
      {"PUT", "/v1/tasks", "", 405, "method_not_allowed", ""},
  };
  ExpectErrors(cases);
  ApiResponse listed = Call("GET", "/v1/tasks");
  EXPECT_EQ(Json(listed)["tasks"].size(), 0u) << listed.body;
}

TEST_F(ApiTest, MethodNotAllowedNamesTheAllowedMethods) {
  ApiResponse r = Call("DELETE", "/v1/queues/q/claim");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "POST");
}

TEST_F(ApiTest, HealthVersionAndCounters) {
  EXPECT_EQ(Json(Call("GET", "/healthz"))["status"], "ok");
  EXPECT_EQ(Json(Call("GET", "/v1/version"))["version"], CHRONOQ_VERSION);
  Call("GET", "/v1/nothing");
  EXPECT_EQ(api_->counters().requests.load(), 3u);
  EXPECT_EQ(api_->counters().client_errors.load(), 1u);
}

// /healthz while commits fail: "degraded" while reads are still served (a
// full disk under SQLite), "down" when they fail too (PostgreSQL out of
// reach), "up" again after the next commit.
class ApiHealthTest : public test::FaultyEngineFixture {
 protected:
  void SetUp() override {
    FaultyEngineFixture::SetUp();
    api_ = std::make_unique<server::Api>(*engine_, clock_, [](std::function<void()> fn) { fn(); });
  }
  void TearDown() override { api_.reset(); }
  server::ApiResponse Call(std::string method, std::string target, std::string body = "") {
    auto promise = std::make_shared<std::promise<server::ApiResponse>>();
    std::future<server::ApiResponse> answer = promise->get_future();
    api_->Handle({method, target, std::move(body)}, [promise](server::ApiResponse r) {
      r.Render();
      promise->set_value(std::move(r));
    });
    return test::GetWithin(std::move(answer), "the answer to " + method + " " + target);
  }

  std::unique_ptr<server::Api> api_;
};

TEST_F(ApiHealthTest, DegradedWhileOnlyWritesFailDownWhileReadsFailToo) {
  const std::string task = R"({"queue":"q"})";
  store_->FailNextCommits(1);
  server::ApiResponse enqueue = Call("POST", "/v1/tasks", task);
  EXPECT_EQ(enqueue.status, 503) << enqueue.body;
  server::ApiResponse health = Call("GET", "/healthz");
  EXPECT_EQ(health.status, 503) << health.body;
  json j = json::parse(health.body);
  EXPECT_EQ(j["status"], "degraded") << health.body;
  EXPECT_EQ(j["store"], "degraded") << health.body;
  EXPECT_EQ(j["error"]["code"], "store_unavailable") << health.body;
  EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr("injected commit failure"));

  store_->FailReads(true);
  j = json::parse(Call("GET", "/healthz").body);
  EXPECT_EQ(j["store"], "down") << j.dump();
  EXPECT_EQ(j["status"], "unavailable") << j.dump();

  store_->FailReads(false);
  EXPECT_EQ(Call("POST", "/v1/tasks", task).status, 201);
  health = Call("GET", "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(json::parse(health.body)["store"], "up") << health.body;
}

TEST_F(ApiTest, QueueSettingsPauseAndResume) {
  Add();
  ApiResponse set =
      Call("PUT", "/v1/queues/q",
           R"({"concurrency":4,"max_attempts":7,"backoff":{"base_ms":500,"cap_ms":60000},
                             "retention_ms":3600000,"rate_limit":{"count":100,"period_ms":1000}})");
  ASSERT_EQ(set.status, 200) << set.body;
  json q = Json(set);
  EXPECT_EQ(q["name"], "q");
  EXPECT_EQ(q["concurrency"], 4);
  EXPECT_EQ(q["max_attempts"], 7);
  EXPECT_EQ(q["backoff"], json({{"base_ms", 500}, {"cap_ms", 60000}}));
  EXPECT_EQ(q["retention_ms"], 3600000);
  EXPECT_EQ(q["rate_limit"], json({{"count", 100}, {"period_ms", 1000}}));
  EXPECT_EQ(q["counts"]["scheduled"], 1);

  ExpectError(Call("PUT", "/v1/queues/q", R"({"concurrency":0})"), 400, "invalid_argument",
              "concurrency");
  ExpectError(Call("PUT", "/v1/queues/q", R"({"paralel":2})"), 400, "invalid_argument", "paralel");
  ExpectError(Call("PUT", "/v1/queues/q", R"({"rate_limit":{"count":0,"period_ms":1000}})"), 400,
              "invalid_argument", "rate_limit.count");
  ExpectError(Call("PUT", "/v1/queues/q", R"({"rate_limit":{"count":5}})"), 400, "invalid_argument",
              "rate_limit.period_ms");
  ExpectError(Call("PUT", "/v1/queues/q", R"({"rate_limit":{"count":5,"period_ms":0}})"), 400,
              "invalid_argument", "rate_limit.period_ms");

  EXPECT_EQ(Json(Call("POST", "/v1/queues/q/pause"))["paused"], true);
  EXPECT_EQ(Json(Call("POST", "/v1/queues/q/claim", "{}"))["tasks"].size(), 0u);
  EXPECT_EQ(Json(Call("POST", "/v1/queues/q/resume"))["paused"], false);
  EXPECT_EQ(Json(Call("POST", "/v1/queues/q/claim", "{}"))["tasks"].size(), 1u);

  json all = Json(Call("GET", "/v1/queues"));
  ASSERT_EQ(all["queues"].size(), 1u);
  EXPECT_EQ(all["queues"][0]["counts"]["running"], 1);
  ExpectError(Call("GET", "/v1/queues/none"), 404, "not_found");
}

TEST_F(ApiTest, MetricsAreInPrometheusTextFormat) {
  Add();
  Call("POST", "/v1/queues/q/claim", "{}");
  ASSERT_TRUE(engine_->AcquireLock("k", {}).ok());
  engine_->Sync();  // the gauges are those of the last commit
  ApiResponse r = Call("GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.content_type, HasSubstr("text/plain; version=0.0.4"));
  EXPECT_THAT(r.body, HasSubstr("# TYPE chronoq_tasks gauge\n"));
  EXPECT_THAT(r.body, HasSubstr("chronoq_tasks{queue=\"q\",state=\"running\"} 1\n"));
  EXPECT_THAT(r.body, HasSubstr("chronoq_tasks_enqueued_total 1\n"));
  EXPECT_THAT(r.body, HasSubstr("chronoq_dispatch_lateness_seconds_count 1\n"));
  EXPECT_THAT(r.body, HasSubstr("chronoq_commit_ops_bucket{le=\"+Inf\"}"));
  EXPECT_THAT(r.body, HasSubstr("# TYPE chronoq_locks_held gauge\nchronoq_locks_held 1\n"));
  EXPECT_THAT(r.body, HasSubstr("chronoq_lock_keys 1\n"));
  EXPECT_THAT(r.body, HasSubstr("chronoq_lock_waiters 0\n"));
  // The claim and this request.
  EXPECT_THAT(r.body, HasSubstr("chronoq_http_requests_total 2\n"));
}

}  // namespace
}  // namespace chronoq::server
