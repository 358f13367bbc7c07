// The chronoq command-line client against a scripted HTTP server: the exact
// requests each command sends, how answers and errors are shown, and the
// exit codes.
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_fixture.h"
#include "cli/commands.h"
#include "cli/http_client.h"
#include "support/test_http_server.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace chronoq::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------
// enqueue

TEST_F(CliTest, EnqueueSendsEveryFlag) {
  AnswerAll(Answer(201, Task("share:42")));
  ASSERT_EQ(Run({"enqueue", "--queue", "expire-share", "--id", "share:42", "--delay", "7d",
                 "--payload", R"({"share":42})", "--on-conflict", "replace", "--max-attempts", "3",
                 "--priority", "-1"}),
            kExitOk)
      << err();

  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/tasks");
  EXPECT_THAT(r.Header("Content-Type"), Optional(std::string("application/json")));
  EXPECT_THAT(r.Header("Accept"), Optional(std::string("application/json")));
  EXPECT_EQ(r.Header("Authorization"), std::nullopt);
  EXPECT_EQ(BodyOf(r), json::parse(R"({
    "queue": "expire-share", "id": "share:42", "delay_ms": 604800000,
    "payload": {"share": 42}, "on_conflict": "replace", "max_attempts": 3, "priority": -1
  })"));
  EXPECT_EQ(out(), "enqueued share:42, due 2026-11-22T03:00:00.000Z\n");
  EXPECT_THAT(err(), IsEmpty());
}

TEST_F(CliTest, EnqueueSendsOnlyWhatWasGiven) {
  AnswerAll(Answer(201, Task("_0000000000000001")));
  ASSERT_EQ(Run({"enqueue", "-q", "emails"}), kExitOk) << err();
  EXPECT_EQ(BodyOf(OnlyRequest()), json::parse(R"({"queue": "emails"})"));
  EXPECT_EQ(out(), "enqueued _0000000000000001, due 2026-11-22T03:00:00.000Z\n");
}

TEST_F(CliTest, EnqueueRunAtIsSentAsWrittenOrAsEpochMillis) {
  AnswerAll(Answer(201, Task("a")));
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--run-at", "2026-11-22T12:00:00+09:00"}), kExitOk) << err();
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--run-at", "1795316400000"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(BodyOf(requests[0]),
            json::parse(R"({"queue":"q","run_at":"2026-11-22T12:00:00+09:00"})"));
  EXPECT_EQ(BodyOf(requests[1]), json::parse(R"({"queue":"q","run_at":1795316400000})"));
}

TEST_F(CliTest, EnqueueReadsThePayloadFromStdin) {
  AnswerAll(Answer(201, Task("a")));
  in_.str("{\"to\": [1, 2]}\n");
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--payload-file", "-"}), kExitOk) << err();
  EXPECT_EQ(BodyOf(OnlyRequest())["payload"], json::parse(R"({"to":[1,2]})"));
}

TEST_F(CliTest, EnqueueReadsThePayloadFromAFile) {
  const TempFile file(R"(["x", null])");
  AnswerAll(Answer(201, Task("a")));
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--payload-file", file.path()}), kExitOk) << err();
  EXPECT_EQ(BodyOf(OnlyRequest())["payload"], json::parse(R"(["x", null])"));
}

TEST_F(CliTest, EnqueueThatFoundTheTaskSaysSo) {
  AnswerAll(Answer(200, Task("share:42", "running")));
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--id", "share:42", "--on-conflict", "ignore"}), kExitOk);
  EXPECT_EQ(out(), "kept share:42 (already running), due 2026-11-22T03:00:00.000Z\n");
}

TEST_F(CliTest, EnqueueSendsTheKeyAndShowsIt) {
  json keyed = Task("a");
  keyed["key"] = "user:7";
  AnswerAll(Answer(201, keyed));
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--key", "user:7"}), kExitOk) << err();
  EXPECT_EQ(BodyOf(OnlyRequest()), json::parse(R"({"queue":"q","key":"user:7"})"));
  EXPECT_EQ(out(), "enqueued a, key user:7, due 2026-11-22T03:00:00.000Z\n");

  AnswerAll(Answer(200, keyed));
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--id", "a", "--key", "user:7", "--on-conflict", "ignore"}),
            kExitOk)
      << err();
  EXPECT_EQ(out(), "kept a (already scheduled), key user:7, due 2026-11-22T03:00:00.000Z\n");
  // A null key says nothing.
  json plain = Task("b");
  plain["key"] = nullptr;
  AnswerAll(Answer(201, plain));
  ASSERT_EQ(Run({"enqueue", "-q", "q"}), kExitOk) << err();
  EXPECT_EQ(out(), "enqueued b, due 2026-11-22T03:00:00.000Z\n");
}

TEST_F(CliTest, AFullKeyBacklogIsAServerErrorNamingTheKey) {
  AnswerAll(Error(429, "key_backlog_full",
                  "key user:7 of queue q already has 1 tasks waiting to start "
                  "(max_pending_per_key 1)",
                  "key"));
  EXPECT_EQ(Run({"enqueue", "-q", "q", "--key", "user:7"}), kExitServerError);
  EXPECT_THAT(out(), IsEmpty());
  EXPECT_EQ(err(),
            "error: key_backlog_full: key user:7 of queue q already has 1 tasks waiting to start "
            "(max_pending_per_key 1) (field key)\n");
}

TEST_F(CliTest, JsonPrintsTheServersAnswerAsIs) {
  const std::string raw = R"({"id":"a","run_at":"2026-11-22T03:00:00.000Z","extra":[1]})";
  AnswerAll({.status = 201, .body = raw});
  ASSERT_EQ(Run({"--json", "enqueue", "-q", "q"}), kExitOk);
  EXPECT_EQ(out(), raw + "\n");
}

// ---------------------------------------------------------------------------
// One task: get, cancel, reschedule, retry.

TEST_F(CliTest, GetShowsEveryField) {
  json task = Task("share:42", "running");
  task["attempt"] = 2;
  task["last_error"] = "timeout";
  task["lease_token"] = 17;
  task["lease_until"] = "2026-11-22T03:00:30.000Z";
  task["worker"] = "billing-7:4242";
  AnswerAll(Answer(200, task));
  ASSERT_EQ(Run({"get", "share:42"}), kExitOk) << err();

  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/v1/tasks/share%3A42");
  EXPECT_THAT(r.body, IsEmpty());
  EXPECT_EQ(r.Header("Content-Type"), std::nullopt);
  EXPECT_EQ(out(),
            "id:           share:42\n"
            "queue:        expire-share\n"
            "state:        running\n"
            "run_at:       2026-11-22T03:00:00.000Z\n"
            "attempt:      2/25\n"
            "priority:     0\n"
            "last_error:   timeout\n"
            "created_at:   2026-11-15T03:00:00.000Z\n"
            "updated_at:   2026-11-15T03:00:00.000Z\n"
            "lease_until:  2026-11-22T03:00:30.000Z\n"
            "lease_token:  17\n"
            "worker:       billing-7:4242\n"
            "payload:      {\"share\":42}\n");
}

TEST_F(CliTest, GetAttemptsAsksForThemAndPrintsATable) {
  json task = Task("a", "scheduled");
  task["attempt"] = 2;
  task["attempts"] = json::array({json{{"attempt", 1},
                                       {"started_at", "2026-11-22T03:00:00.000Z"},
                                       {"ended_at", "2026-11-22T03:00:02.500Z"},
                                       {"duration_ms", 2500},
                                       {"node", "host-1:7070"},
                                       {"worker", "w-1"},
                                       {"outcome", "failed"},
                                       {"error", "smtp: 451\nretry later"},
                                       {"response", "HTTP 500"}},
                                  json{{"attempt", 2},
                                       {"started_at", "2026-11-22T03:01:00.000Z"},
                                       {"ended_at", "2026-11-22T03:01:30.000Z"},
                                       {"duration_ms", 30000},
                                       {"node", "host-2:7070"},
                                       {"worker", nullptr},
                                       {"outcome", "lease_expired"},
                                       {"error", "lease expired during attempt 2"},
                                       {"response", nullptr}}});
  AnswerAll(Answer(200, task));
  ASSERT_EQ(Run({"get", "a", "--attempts"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/v1/tasks/a?attempts=true");
  EXPECT_THAT(out(), HasSubstr("payload:     {\"share\":42}\n"
                               "attempts:\n"
                               "#  OUTCOME        STARTED_AT                DURATION  NODE         "
                               "WORKER  ERROR/RESPONSE\n"
                               "1  failed         2026-11-22T03:00:00.000Z  2.5s      host-1:7070  "
                               "w-1     smtp: 451\n"
                               "2  lease_expired  2026-11-22T03:01:00.000Z  30.0s     host-2:7070  "
                               "-       lease expired during attempt 2\n"));
  // --json prints the answer as is, attempts included.
  ASSERT_EQ(Run({"get", "a", "--attempts", "--json"}), kExitOk) << err();
  EXPECT_EQ(json::parse(out()), task);
  // None yet.
  AnswerAll(Answer(200, Task("b")));
  ASSERT_EQ(Run({"get", "b", "--attempts"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr("attempts: none\n"));
}

TEST_F(CliTest, GetShowsTheKeyAfterTheQueue) {
  json task = Task("a");
  task["key"] = "user:7";
  AnswerAll(Answer(200, task));
  ASSERT_EQ(Run({"get", "a"}), kExitOk) << err();
  EXPECT_EQ(out(),
            "id:          a\n"
            "queue:       expire-share\n"
            "key:         user:7\n"
            "state:       scheduled\n"
            "run_at:      2026-11-22T03:00:00.000Z\n"
            "attempt:     0/25\n"
            "priority:    0\n"
            "last_error:  -\n"
            "created_at:  2026-11-15T03:00:00.000Z\n"
            "updated_at:  2026-11-15T03:00:00.000Z\n"
            "payload:     {\"share\":42}\n");
}

TEST_F(CliTest, IdsArePercentEncoded) {
  AnswerAll(Answer(200, Task("share:42/x y")));
  ASSERT_EQ(Run({"get", "share:42/x y"}), kExitOk);
  ASSERT_EQ(Run({"cancel", "share:42/x y"}), kExitOk);
  ASSERT_EQ(Run({"retry", "caf\xc3\xa9?#%+~._-"}), kExitOk);

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].target, "/v1/tasks/share%3A42%2Fx%20y");
  EXPECT_EQ(requests[1].target, "/v1/tasks/share%3A42%2Fx%20y");
  EXPECT_EQ(requests[2].target, "/v1/tasks/caf%C3%A9%3F%23%25%2B~._-/retry");
}

TEST_F(CliTest, CancelSendsDelete) {
  AnswerAll(Answer(200, Task("a", "cancelled")));
  ASSERT_EQ(Run({"cancel", "a"}), kExitOk);
  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "DELETE");
  EXPECT_EQ(r.target, "/v1/tasks/a");
  EXPECT_THAT(r.body, IsEmpty());
  EXPECT_EQ(out(), "cancelled a\n");
}

TEST_F(CliTest, RescheduleSendsPatch) {
  json moved = Task("a");
  moved["run_at"] = "2026-12-01T00:00:00.000Z";
  AnswerAll(Answer(200, moved));
  ASSERT_EQ(Run({"reschedule", "a", "--run-at", "2026-12-01T00:00:00Z", "--payload", "[1]"}),
            kExitOk)
      << err();
  ASSERT_EQ(Run({"reschedule", "a", "--delay", "90s"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "PATCH");
  EXPECT_EQ(requests[0].target, "/v1/tasks/a");
  EXPECT_EQ(BodyOf(requests[0]), json::parse(R"({"run_at":"2026-12-01T00:00:00Z","payload":[1]})"));
  EXPECT_EQ(BodyOf(requests[1]), json::parse(R"({"delay_ms":90000})"));
  EXPECT_EQ(out(), "rescheduled a, due 2026-12-01T00:00:00.000Z\n");
}

TEST_F(CliTest, RescheduleNeedsATime) {
  ExpectUsageError({"reschedule", "a"}, "give --run-at or --delay");
}

TEST_F(CliTest, RetrySendsPost) {
  AnswerAll(Answer(200, Task("a")));
  ASSERT_EQ(Run({"retry", "a"}), kExitOk);
  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/tasks/a/retry");
  EXPECT_EQ(BodyOf(r), json::object());
  EXPECT_EQ(out(), "requeued a, due 2026-11-22T03:00:00.000Z\n");
}

// ---------------------------------------------------------------------------
// What people type: ls, --in, --at, --payload @FILE

TEST_F(CliTest, LsIsList) {
  AnswerAll(Answer(200, {{"tasks", json::array()}, {"next_cursor", nullptr}}));
  ASSERT_EQ(Run({"ls", "-q", "emails", "--state", "dead"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/v1/tasks?queue=emails&state=dead");
  EXPECT_EQ(out(), "no tasks\n");
}

TEST_F(CliTest, InAndAtAreDelayAndRunAt) {
  AnswerAll(Answer(201, Task("a")));
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--in", "90s"}), kExitOk) << err();
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--at", "2026-11-22T12:00:00+09:00"}), kExitOk) << err();
  ASSERT_EQ(Run({"reschedule", "a", "--in", "5m"}), kExitOk) << err();
  ASSERT_EQ(Run({"reschedule", "a", "--at", "1795316400000"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(BodyOf(requests[0]), json::parse(R"({"queue":"q","delay_ms":90000})"));
  EXPECT_EQ(BodyOf(requests[1]),
            json::parse(R"({"queue":"q","run_at":"2026-11-22T12:00:00+09:00"})"));
  EXPECT_EQ(BodyOf(requests[2]), json::parse(R"({"delay_ms":300000})"));
  EXPECT_EQ(BodyOf(requests[3]), json::parse(R"({"run_at":1795316400000})"));
}

TEST_F(CliTest, InAndAtAreCheckedLikeDelayAndRunAt) {
  ExpectUsageError({"enqueue", "-q", "q", "--in", "5x"}, "error: --delay: unknown unit");
  ExpectUsageError({"enqueue", "-q", "q", "--at", "tomorrow"},
                   "error: --run-at: not an RFC 3339 time");
  ExpectUsageError({"enqueue", "-q", "q", "--in", "1s", "--at", "2026-11-22T03:00:00Z"},
                   "excludes");
  ExpectUsageError({"enqueue", "-q", "q", "--in", "1s", "--delay", "2s"}, "--delay");
  ExpectUsageError({"reschedule", "a", "--at", "tomorrow"}, "error: --run-at:");
}

TEST_F(CliTest, PayloadAtFileReadsTheFile) {
  const TempFile file(R"({"share": 42})");
  AnswerAll(Answer(201, Task("a")));
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--payload", "@" + file.path()}), kExitOk) << err();
  ASSERT_EQ(Run({"reschedule", "a", "--in", "1s", "--payload", "@" + file.path()}), kExitOk)
      << err();
  AnswerAll(Answer(201, {{"name", "s"}, {"next_run", "2026-11-22T03:00:00.000Z"}}));
  ASSERT_EQ(
      Run({"schedule", "add", "s", "-q", "q", "--every", "1h", "--payload", "@" + file.path()}),
      kExitOk)
      << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const Request& r : requests) {
    EXPECT_EQ(BodyOf(r)["payload"], json::parse(R"({"share":42})")) << r.target;
  }
}

TEST_F(CliTest, PayloadAtDashReadsStdin) {
  AnswerAll(Answer(201, Task("a")));
  in_.str("[1, 2]\n");
  ASSERT_EQ(Run({"enqueue", "-q", "q", "--payload", "@-"}), kExitOk) << err();
  EXPECT_EQ(BodyOf(OnlyRequest())["payload"], json::parse("[1,2]"));
}

TEST_F(CliTest, PayloadAtFileErrorsNameTheFlagAndFile) {
  const TempFile bad("{x");
  ExpectUsageError({"enqueue", "-q", "q", "--payload", "@/nonexistent/chronoq-payload"},
                   "error: --payload: cannot read /nonexistent/chronoq-payload: ");
  ExpectUsageError({"enqueue", "-q", "q", "--payload", "@"}, "error: --payload: @ needs a file");
  ExpectUsageError({"enqueue", "-q", "q", "--payload", "@" + bad.path()},
                   "error: --payload: not valid JSON (at line 1, column 2)");
  ExpectUsageError(
      {"enqueue", "-q", "q", "--payload", "@" + bad.path(), "--payload-file", bad.path()},
      "excludes");
}

// ---------------------------------------------------------------------------
// list

TEST_F(CliTest, ListPrintsATable) {
  json dead = Task("share:7", "dead");
  dead["attempt"] = 25;
  AnswerAll(Answer(200, {{"tasks", {Task("share:42"), dead}}, {"next_cursor", nullptr}}));
  ASSERT_EQ(Run({"list", "--queue", "expire-share", "--state", "scheduled", "--limit", "2"}),
            kExitOk)
      << err();

  EXPECT_EQ(OnlyRequest().target, "/v1/tasks?queue=expire-share&state=scheduled&limit=2");
  EXPECT_EQ(out(),
            "ID        QUEUE         STATE      RUN_AT                    ATTEMPT\n"
            "share:42  expire-share  scheduled  2026-11-22T03:00:00.000Z  0/25\n"
            "share:7   expire-share  dead       2026-11-22T03:00:00.000Z  25/25\n");
  EXPECT_THAT(err(), IsEmpty());
}

TEST_F(CliTest, ListFiltersByKeyAndShowsAKeyColumn) {
  json a = Task("a");
  a["key"] = "user:7/a b";
  json b = Task("b");
  b["key"] = nullptr;
  AnswerAll(Answer(200, {{"tasks", {a, b}}, {"next_cursor", nullptr}}));
  ASSERT_EQ(Run({"list", "--queue", "q", "--key", "user:7/a b", "--state", "scheduled"}), kExitOk)
      << err();
  EXPECT_EQ(OnlyRequest().target, "/v1/tasks?queue=q&state=scheduled&key=user%3A7%2Fa%20b");
  EXPECT_EQ(out(),
            "ID  QUEUE         KEY         STATE      RUN_AT                    ATTEMPT\n"
            "a   expire-share  user:7/a b  scheduled  2026-11-22T03:00:00.000Z  0/25\n"
            "b   expire-share  -           scheduled  2026-11-22T03:00:00.000Z  0/25\n");
}

TEST_F(CliTest, ListSaysWhenThereIsMore) {
  AnswerAll(Answer(200, {{"tasks", json::array()}, {"next_cursor", "c/1"}}));
  ASSERT_EQ(Run({"list"}), kExitOk);
  EXPECT_EQ(OnlyRequest().target, "/v1/tasks");
  EXPECT_EQ(out(), "no tasks\n");
  EXPECT_EQ(err(), "more: --cursor c/1 (or --all)\n");

  ASSERT_EQ(Run({"list", "--cursor", "c/1"}), kExitOk);
  EXPECT_EQ(server_.requests().back().target, "/v1/tasks?cursor=c%2F1");
}

// Answers GET /v1/tasks in three pages: a, b | c | d.
Response ThreePages(const Request& r) {
  if (r.target.ends_with("cursor=p%2B2")) {
    return Answer(200, {{"tasks", {Task("c")}}, {"next_cursor", "p3"}});
  }
  if (r.target.ends_with("cursor=p3")) {
    return Answer(200, {{"tasks", {Task("d")}}, {"next_cursor", nullptr}});
  }
  return Answer(200, {{"tasks", {Task("a"), Task("b")}}, {"next_cursor", "p+2"}});
}

TEST_F(CliTest, ListAllFollowsTheCursorOverOneConnection) {
  server_.SetHandler(ThreePages);
  ASSERT_EQ(Run({"list", "--all", "--state", "dead"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].target, "/v1/tasks?state=dead");
  EXPECT_EQ(requests[1].target, "/v1/tasks?state=dead&cursor=p%2B2");
  EXPECT_EQ(requests[2].target, "/v1/tasks?state=dead&cursor=p3");
  EXPECT_EQ(requests[1].connection, requests[0].connection);
  EXPECT_EQ(requests[2].connection, requests[0].connection);
  EXPECT_EQ(out(),
            "ID  QUEUE         STATE      RUN_AT                    ATTEMPT\n"
            "a   expire-share  scheduled  2026-11-22T03:00:00.000Z  0/25\n"
            "b   expire-share  scheduled  2026-11-22T03:00:00.000Z  0/25\n"
            "c   expire-share  scheduled  2026-11-22T03:00:00.000Z  0/25\n"
            "d   expire-share  scheduled  2026-11-22T03:00:00.000Z  0/25\n");
}

TEST_F(CliTest, ListAllWithJsonMergesThePages) {
  server_.SetHandler(ThreePages);
  ASSERT_EQ(Run({"list", "--all", "--json"}), kExitOk) << err();
  const json merged = json::parse(out());
  EXPECT_EQ(merged, json({{"tasks", {Task("a"), Task("b"), Task("c"), Task("d")}},
                          {"next_cursor", nullptr}}));
}

TEST_F(CliTest, ListAllReconnectsWhenTheServerClosesTheConnection) {
  server_.SetHandler([](const Request& r) {
    Response response = ThreePages(r);
    response.close = true;
    return response;
  });
  ASSERT_EQ(Run({"list", "--all"}), kExitOk) << err();
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_NE(requests[1].connection, requests[0].connection);
  EXPECT_NE(requests[2].connection, requests[1].connection);
  EXPECT_THAT(out(), HasSubstr("\nd "));
}

TEST_F(CliTest, ListAllStopsOnARepeatedCursor) {
  AnswerAll(Answer(200, {{"tasks", {Task("a")}}, {"next_cursor", "same"}}));
  EXPECT_EQ(Run({"list", "--all"}), kExitServerError);
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(err(), "error: the server returned the same cursor twice\n");
}

// ---------------------------------------------------------------------------
// Workers: claim, ack, fail, extend.

TEST_F(CliTest, ClaimPrintsOneLinePerTask) {
  json a = Task("a", "running");
  a["attempt"] = 1;
  a["token"] = 7;
  a["payload"] = {{"to", "x@example.com"}};
  json b = Task("b c", "running");
  b["attempt"] = 3;
  b["token"] = 7;
  b["payload"] = "text";
  AnswerAll(Answer(200, {{"tasks", {a, b}}}));
  ASSERT_EQ(Run({"claim", "emails", "--max", "10", "--lease", "1m", "--wait", "5s"}), kExitOk)
      << err();

  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/queues/emails/claim");
  EXPECT_EQ(BodyOf(r), json::parse(R"({"max":10,"lease_ms":60000,"wait_ms":5000})"));
  EXPECT_EQ(out(),
            "a 7 1 {\"to\":\"x@example.com\"}\n"
            "b c 7 3 \"text\"\n");
}

TEST_F(CliTest, ClaimDefaults) {
  AnswerAll(Answer(200, {{"tasks", json::array()}}));
  ASSERT_EQ(Run({"claim", "emails"}), kExitOk) << err();
  EXPECT_EQ(BodyOf(OnlyRequest()), json::parse(R"({"max":1,"lease_ms":30000,"wait_ms":0})"));
  EXPECT_THAT(out(), IsEmpty());
  EXPECT_EQ(err(), "no tasks claimed\n");
}

TEST_F(CliTest, AckSendsTheToken) {
  AnswerAll(Answer(200, json::object()));
  ASSERT_EQ(Run({"ack", "a", "--token", "18446744073709551615"}), kExitOk) << err();
  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/tasks/a/ack");
  EXPECT_EQ(BodyOf(r), json::parse(R"({"token":18446744073709551615})"));
  EXPECT_EQ(out(), "acked a\n");
}

TEST_F(CliTest, StaleTokenIsAServerError) {
  AnswerAll(Error(409, "stale_token", "the lease on a is no longer yours", "token"));
  EXPECT_EQ(Run({"ack", "a", "--token", "7"}), kExitServerError);
  EXPECT_THAT(out(), IsEmpty());
  EXPECT_EQ(err(), "error: stale_token: the lease on a is no longer yours (field token)\n");
}

TEST_F(CliTest, FailSendsTheErrorAndRetryDelay) {
  json retried = Task("a");
  retried["run_at"] = "2026-11-22T03:01:30.000Z";
  AnswerAll(Answer(200, retried));
  ASSERT_EQ(Run({"fail", "a", "--token", "7", "--error", "smtp: 421", "--retry-in", "90s"}),
            kExitOk)
      << err();
  ASSERT_EQ(Run({"fail", "a", "--token", "8", "--error", "again"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "/v1/tasks/a/fail");
  EXPECT_EQ(BodyOf(requests[0]),
            json::parse(R"({"token":7,"error":"smtp: 421","retry_in_ms":90000})"));
  EXPECT_EQ(BodyOf(requests[1]), json::parse(R"({"token":8,"error":"again"})"));
  EXPECT_EQ(out(), "failed a: scheduled, due 2026-11-22T03:01:30.000Z\n");
}

TEST_F(CliTest, ExtendSendsTheLease) {
  AnswerAll(Answer(200, {{"lease_until", "2026-11-22T03:02:00.000Z"}}));
  ASSERT_EQ(Run({"extend", "a", "--token", "7", "--lease", "2m"}), kExitOk) << err();
  const Request r = OnlyRequest();
  EXPECT_EQ(r.target, "/v1/tasks/a/extend");
  EXPECT_EQ(BodyOf(r), json::parse(R"({"token":7,"lease_ms":120000})"));
  EXPECT_EQ(out(), "extended a, lease until 2026-11-22T03:02:00.000Z\n");
}

// ---------------------------------------------------------------------------
// Queues.

TEST_F(CliTest, QueuesPrintsATable) {
  AnswerAll(Answer(200, json::parse(R"({"queues": [
    {"name": "emails", "paused": false, "oldest_due_lateness_ms": 1500, "concurrency": 4,
     "counts": {"scheduled": 12, "running": 3, "succeeded": 100, "cancelled": 0, "dead": 1}},
    {"name": "expire-share", "paused": true, "oldest_due_lateness_ms": null,
     "counts": {"scheduled": 0, "running": 0, "succeeded": 7, "cancelled": 2, "dead": 0}}
  ]})")));
  ASSERT_EQ(Run({"queues"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/v1/queues");
  EXPECT_EQ(out(),
            "QUEUE         PAUSED  SCHEDULED  RUNNING  SUCCEEDED  CANCELLED  DEAD  LATE\n"
            "emails        no      12         3        100        0          1     1.5s\n"
            "expire-share  yes     0          0        7          2          0     -\n");
}

TEST_F(CliTest, QueueSetSendsOnlyTheGivenSettings) {
  AnswerAll(Answer(200, json::object()));
  ASSERT_EQ(
      Run({"queue", "set", "emails", "--concurrency", "8", "--max-attempts", "5", "--backoff-base",
           "2s", "--backoff-cap", "10m", "--retention", "7d", "--rate-limit", "100/1s"}),
      kExitOk)
      << err();
  ASSERT_EQ(Run({"queue", "set", "emails", "--backoff-base", "500ms"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].target, "/v1/queues/emails");
  EXPECT_EQ(BodyOf(requests[0]), json::parse(R"({"concurrency":8,"max_attempts":5,
    "backoff":{"base_ms":2000,"cap_ms":600000},"retention_ms":604800000,
    "rate_limit":{"count":100,"period_ms":1000}})"));
  EXPECT_EQ(BodyOf(requests[1]), json::parse(R"({"backoff":{"base_ms":500}})"));
  EXPECT_EQ(out(), "updated queue emails\n");
}

TEST_F(CliTest, QueueSetSendsThePerKeyLimitsAndMaxInFlight) {
  AnswerAll(Answer(200, json::object()));
  ASSERT_EQ(Run({"queue", "set", "emails", "--max-in-flight-per-key", "3", "--max-pending-per-key",
                 "1000000000", "--max-in-flight", "4"}),
            kExitOk)
      << err();
  ASSERT_EQ(Run({"queue", "set", "emails", "--max-pending-per-key", "5"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].target, "/v1/queues/emails");
  // --max-in-flight is --concurrency by another name.
  EXPECT_EQ(BodyOf(requests[0]), json::parse(R"({"concurrency":4,"max_in_flight_per_key":3,
    "max_pending_per_key":1000000000})"));
  EXPECT_EQ(BodyOf(requests[1]), json::parse(R"({"max_pending_per_key":5})"));
  EXPECT_EQ(out(), "updated queue emails\n");
}

TEST_F(CliTest, QueueSetResetsSettingsWithNull) {
  ExpectUsageError({"queue", "set", "q", "--reset", "colour"}, "--reset");
  ExpectUsageError({"queue", "set", "q", "--max-attempts", "4", "--reset", "max-attempts"},
                   "--reset");
  AnswerAll(Answer(200, json::object()));
  ASSERT_EQ(Run({"queue", "set", "emails", "--reset", "rate-limit", "--reset", "max-in-flight",
                 "--reset", "retention", "--max-attempts", "4"}),
            kExitOk)
      << err();
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(BodyOf(requests[0]), json::parse(R"({"rate_limit":null,"concurrency":null,
    "retention_ms":null,"max_attempts":4})"));
}

TEST_F(CliTest, QueueSetSendsFinalStatusesAsAList) {
  ExpectUsageError({"queue", "set", "q", "--final-statuses", "404,,422"}, "--final-statuses");
  ExpectUsageError({"queue", "set", "q", "--final-statuses", "not-found"}, "--final-statuses");
  ExpectUsageError({"queue", "set", "q", "--final-statuses", "404", "--reset", "final-statuses"},
                   "--reset");
  AnswerAll(Answer(200, json::object()));
  ASSERT_EQ(Run({"queue", "set", "hooks", "--final-statuses", "422,404"}), kExitOk) << err();
  ASSERT_EQ(Run({"queue", "set", "hooks", "--reset", "final-statuses"}), kExitOk) << err();
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(BodyOf(requests[0]), json::parse(R"({"final_statuses":[422,404]})"));
  EXPECT_EQ(BodyOf(requests[1]), json::parse(R"({"final_statuses":null})"));
}

TEST_F(CliTest, QueueSetTakesConcurrencyUnderOneNameOnly) {
  ExpectUsageError({"queue", "set", "q", "--concurrency", "4", "--max-in-flight", "5"}, "excludes");
  ExpectUsageError({"queue", "set", "q", "--max-in-flight", "4", "--concurrency", "4"}, "excludes");
  ExpectUsageError({"queue", "set", "q", "--max-in-flight", "many"}, "--max-in-flight");
  ExpectUsageError({"queue", "set", "q", "--max-in-flight-per-key", "x"},
                   "--max-in-flight-per-key");
  ExpectUsageError({"queue", "set", "q", "--max-pending-per-key", "lots"}, "--max-pending-per-key");
}

TEST_F(CliTest, QueueSetNeedsSomethingToChange) {
  ExpectUsageError({"queue", "set", "emails"}, "nothing to change");
  ExpectUsageError({"queue", "set", "emails", "--backoff-cap", "1h"},
                   "--backoff-cap requires --backoff-base");
  ExpectUsageError({"queue", "set", "emails", "--rate-limit", "100"}, "--rate-limit");
  ExpectUsageError({"queue", "set", "emails", "--rate-limit", "x/1s"}, "--rate-limit");
  ExpectUsageError({"queue", "set", "emails", "--rate-limit", "5/soon"}, "--rate-limit");
}

TEST_F(CliTest, PauseAndResume) {
  ASSERT_EQ(Run({"pause", "emails"}), kExitOk) << err();
  EXPECT_EQ(out(), "paused emails\n");
  ASSERT_EQ(Run({"resume", "emails"}), kExitOk) << err();
  EXPECT_EQ(out(), "resumed emails\n");

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/v1/queues/emails/pause");
  EXPECT_EQ(requests[1].target, "/v1/queues/emails/resume");
  EXPECT_EQ(BodyOf(requests[1]), json::object());
}

// ---------------------------------------------------------------------------
// Schedules.

// A schedule as the server shows it: every minute, on queue "cache".
json Schedule(const std::string& name) {
  return {
      {"name", name},
      {"queue", "cache"},
      {"every_ms", 60000},
      {"start", "2026-11-22T00:00:00.000Z"},
      {"payload", {{"k", 1}}},
      {"misfire", "run_once"},
      {"max_catchup", 100},
      {"overlap", "skip"},
      {"dst_gap", nullptr},
      {"dst_repeat", nullptr},
      {"priority", 0},
      {"max_attempts", nullptr},
      {"target", nullptr},
      {"paused", false},
      {"next_run", "2026-11-22T03:00:00.000Z"},
      {"next_task_id", name + "@2026-11-22T03:00:00.000Z"},
      {"last_run", nullptr},
      {"runs", 0},
      {"skipped", 0},
      {"created_at", "2026-11-15T03:00:00.000Z"},
      {"updated_at", "2026-11-15T03:00:00.000Z"},
  };
}

TEST_F(CliTest, ScheduleAddSendsEveryFlag) {
  AnswerAll(Answer(201, Schedule("purge")));
  ASSERT_EQ(Run({"schedule",
                 "add",
                 "purge",
                 "--queue",
                 "maintenance",
                 "--cron",
                 "0 0 3 * * *",
                 "--tz",
                 "Asia/Seoul",
                 "--dst-gap",
                 "skip",
                 "--dst-repeat",
                 "twice",
                 "--start",
                 "2026-12-01T00:00:00+09:00",
                 "--payload",
                 R"({"days":30})",
                 "--misfire",
                 "run_all",
                 "--max-catchup",
                 "5",
                 "--overlap",
                 "queue_one",
                 "--priority",
                 "-1",
                 "--max-attempts",
                 "3"}),
            kExitOk)
      << err();

  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/schedules");
  EXPECT_EQ(BodyOf(r), json::parse(R"({
    "name": "purge", "queue": "maintenance", "cron": "0 0 3 * * *", "tz": "Asia/Seoul",
    "dst_gap": "skip", "dst_repeat": "twice", "start": "2026-12-01T00:00:00+09:00",
    "payload": {"days": 30}, "misfire": "run_all", "max_catchup": 5, "overlap": "queue_one",
    "priority": -1, "max_attempts": 3
  })"));
  EXPECT_EQ(out(), "created schedule purge, next run 2026-11-22T03:00:00.000Z\n");
  EXPECT_THAT(err(), IsEmpty());
}

TEST_F(CliTest, ScheduleAddSendsDurationsInMillisecondsAndOnlyWhatWasGiven) {
  AnswerAll(Answer(201, Schedule("a")));
  ASSERT_EQ(Run({"schedule", "add", "a", "-q", "q", "--every", "30s"}), kExitOk) << err();
  ASSERT_EQ(Run({"schedule", "add", "a", "-q", "q", "--fixed-delay", "1h30m", "--start",
                 "1795316400000"}),
            kExitOk)
      << err();
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(BodyOf(requests[0]), json::parse(R"({"name":"a","queue":"q","every_ms":30000})"));
  EXPECT_EQ(BodyOf(requests[1]), json::parse(R"({"name":"a","queue":"q","fixed_delay_ms":5400000,
                                                 "start":1795316400000})"));
}

TEST_F(CliTest, ScheduleAddTakenNameIsAServerError) {
  AnswerAll(Error(409, "conflict", "schedule purge already exists", "name"));
  EXPECT_EQ(Run({"schedule", "add", "purge", "-q", "q", "--cron", "@daily"}), kExitServerError);
  EXPECT_THAT(out(), IsEmpty());
  EXPECT_EQ(err(), "error: conflict: schedule purge already exists (field name)\n");
}

TEST_F(CliTest, ScheduleListPrintsATable) {
  json cron = Schedule("purge");
  cron.erase("every_ms");
  cron["cron"] = "0 0 3 * * *";
  cron["tz"] = "Asia/Seoul";
  cron["paused"] = true;
  cron["next_task_id"] = nullptr;
  json delay = Schedule("retry-mail");
  delay.erase("every_ms");
  delay["fixed_delay_ms"] = 300000;
  delay["last_run"] = {{"task_id", "retry-mail@2026-11-22T02:55:00.000Z"},
                       {"scheduled_for", "2026-11-22T02:55:00.000Z"},
                       {"state", "dead"},
                       {"finished_at", "2026-11-22T02:55:01.000Z"},
                       {"error", "smtp 451"}};
  AnswerAll(
      Answer(200, {{"schedules", {cron, Schedule("refresh"), delay}}, {"next_cursor", nullptr}}));
  ASSERT_EQ(Run({"schedule", "ls", "--queue", "cache", "--limit", "3"}), kExitOk) << err();

  EXPECT_EQ(OnlyRequest().method, "GET");
  EXPECT_EQ(OnlyRequest().target, "/v1/schedules?queue=cache&limit=3");
  EXPECT_EQ(
      out(),
      "NAME        QUEUE  RULE                           NEXT_RUN                  LAST  PAUSED\n"
      "purge       cache  cron '0 0 3 * * *' Asia/Seoul  2026-11-22T03:00:00.000Z  -     yes\n"
      "refresh     cache  every 1m00s                    2026-11-22T03:00:00.000Z  -     no\n"
      "retry-mail  cache  fixed delay 5m00s              2026-11-22T03:00:00.000Z  dead  no\n");
  EXPECT_THAT(err(), IsEmpty());
}

TEST_F(CliTest, ScheduleListPagesLikeTaskList) {
  AnswerAll(Answer(200, {{"schedules", json::array()}, {"next_cursor", "c/1"}}));
  ASSERT_EQ(Run({"schedule", "list"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/v1/schedules");
  EXPECT_EQ(out(), "no schedules\n");
  EXPECT_EQ(err(), "more: --cursor c/1 (or --all)\n");

  server_.SetHandler([](const Request& r) {
    if (r.target.ends_with("cursor=p2")) {
      return Answer(200, {{"schedules", {Schedule("b")}}, {"next_cursor", nullptr}});
    }
    return Answer(200, {{"schedules", {Schedule("a")}}, {"next_cursor", "p2"}});
  });
  ASSERT_EQ(Run({"--json", "schedule", "ls", "--all", "-q", "cache"}), kExitOk) << err();
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[1].target, "/v1/schedules?queue=cache");
  EXPECT_EQ(requests[2].target, "/v1/schedules?queue=cache&cursor=p2");
  EXPECT_EQ(json::parse(out()),
            json({{"schedules", {Schedule("a"), Schedule("b")}}, {"next_cursor", nullptr}}));
}

TEST_F(CliTest, ScheduleGetShowsEveryField) {
  json s = Schedule("purge");
  s.erase("every_ms");
  s["cron"] = "0 0 3 * * *";
  s["tz"] = "Asia/Seoul";
  s["dst_gap"] = "skip";
  s["max_attempts"] = 3;
  s["target"] = {{"url", "https://h.example/x"},
                 {"method", "PUT"},
                 {"headers", json::object()},
                 {"timeout_ms", 10000}};
  s["last_run"] = {{"task_id", "purge@2026-11-21T18:00:00.000Z"},
                   {"scheduled_for", "2026-11-21T18:00:00.000Z"},
                   {"state", "dead"},
                   {"finished_at", "2026-11-21T18:00:02.000Z"},
                   {"error", "HTTP 500"}};
  s["runs"] = 7;
  s["skipped"] = 1;
  AnswerAll(Answer(200, s));
  ASSERT_EQ(Run({"schedule", "get", "purge:eu/1"}), kExitOk) << err();

  const Request r = OnlyRequest();
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/v1/schedules/purge%3Aeu%2F1");
  EXPECT_EQ(out(),
            "name:          purge\n"
            "queue:         cache\n"
            "rule:          cron '0 0 3 * * *' Asia/Seoul\n"
            "start:         2026-11-22T00:00:00.000Z\n"
            "paused:        no\n"
            "next_run:      2026-11-22T03:00:00.000Z\n"
            "next_task_id:  purge@2026-11-22T03:00:00.000Z\n"
            "last_run:      dead purge@2026-11-21T18:00:00.000Z, finished "
            "2026-11-21T18:00:02.000Z\n"
            "last_error:    HTTP 500\n"
            "runs:          7\n"
            "skipped:       1\n"
            "misfire:       run_once\n"
            "max_catchup:   100\n"
            "overlap:       skip\n"
            "dst_gap:       skip\n"
            "dst_repeat:    -\n"
            "priority:      0\n"
            "max_attempts:  3\n"
            "target:        PUT https://h.example/x\n"
            "created_at:    2026-11-15T03:00:00.000Z\n"
            "updated_at:    2026-11-15T03:00:00.000Z\n"
            "payload:       {\"k\":1}\n");
}

TEST_F(CliTest, ScheduleRmPauseAndResume) {
  server_.SetHandler([](const Request& r) -> Response {
    if (r.method == "DELETE") return {.status = 204, .body = "", .content_type = ""};
    json s = Schedule("a b");
    s["paused"] = r.target.ends_with("/pause");
    return Answer(200, s);
  });
  ASSERT_EQ(Run({"schedule", "rm", "a b"}), kExitOk) << err();
  EXPECT_EQ(out(), "deleted schedule a b\n");
  ASSERT_EQ(Run({"--json", "schedule", "rm", "a b"}), kExitOk) << err();
  EXPECT_THAT(out(), IsEmpty());  // 204 has no body to print
  ASSERT_EQ(Run({"schedule", "pause", "a b"}), kExitOk) << err();
  EXPECT_EQ(out(), "paused schedule a b\n");
  ASSERT_EQ(Run({"schedule", "resume", "a b"}), kExitOk) << err();
  EXPECT_EQ(out(), "resumed schedule a b, next run 2026-11-22T03:00:00.000Z\n");

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[0].method, "DELETE");
  EXPECT_EQ(requests[0].target, "/v1/schedules/a%20b");
  EXPECT_THAT(requests[0].body, IsEmpty());
  EXPECT_EQ(requests[2].method, "POST");
  EXPECT_EQ(requests[2].target, "/v1/schedules/a%20b/pause");
  EXPECT_EQ(requests[3].target, "/v1/schedules/a%20b/resume");
  EXPECT_EQ(BodyOf(requests[3]), json::object());
}

TEST_F(CliTest, ScheduleNextPrintsOneInstantPerLine) {
  AnswerAll(Answer(200, {{"next", {"2026-11-22T03:00:00.000Z", "2026-11-22T03:01:00.000Z"}}}));
  ASSERT_EQ(Run({"schedule", "next", "refresh", "--count", "2"}), kExitOk) << err();
  EXPECT_EQ(out(), "2026-11-22T03:00:00.000Z\n2026-11-22T03:01:00.000Z\n");
  ASSERT_EQ(Run({"schedule", "next", "refresh"}), kExitOk) << err();

  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].target, "/v1/schedules/refresh/next?count=2");
  EXPECT_EQ(requests[1].target, "/v1/schedules/refresh/next");  // the server's default, 10
}

TEST_F(CliTest, ScheduleNotFoundExitsOne) {
  AnswerAll(Error(404, "not_found", "schedule nope does not exist"));
  for (const std::string verb : {"get", "rm", "pause", "resume", "next"}) {
    SCOPED_TRACE(verb);
    EXPECT_EQ(Run({"schedule", verb, "nope"}), kExitServerError);
    EXPECT_EQ(err(), "error: not_found: schedule nope does not exist\n");
  }
}

TEST_F(CliTest, BadScheduleCommandLinesExitTwoAndSendNothing) {
  ExpectUsageError({"schedule"}, "A subcommand is required");
  ExpectUsageError({"schedule", "frob"}, "error: unknown command frob");
  ExpectUsageError({"schedule", "add", "-q", "q", "--every", "1s"}, "name is required");
  ExpectUsageError({"schedule", "add", "a", "--every", "1s"}, "--queue is required");
  ExpectUsageError({"schedule", "add", "a", "-q", "q"}, "give --cron, --every or --fixed-delay");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--cron", "@daily", "--every", "1s"},
                   "excludes");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--fixed-delay", "1s"},
                   "excludes");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--tz", "UTC"},
                   "--tz requires --cron");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--dst-gap", "skip"},
                   "--dst-gap requires --cron");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--cron", "@daily", "--dst-gap", "later"},
                   "--dst-gap");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--cron", "@daily", "--dst-repeat", "3"},
                   "--dst-repeat");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "5x"},
                   "error: --every: unknown unit");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--fixed-delay", "1500us"},
                   "error: --fixed-delay: use whole milliseconds");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--start", "soon"},
                   "error: --start: not an RFC 3339 time");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--payload", "{x"},
                   "error: --payload: not valid JSON");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--misfire", "often"},
                   "--misfire");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--overlap", "never"},
                   "--overlap");
  ExpectUsageError({"schedule", "add", "a", "-q", "q", "--every", "1s", "--max-catchup", "all"},
                   "--max-catchup");
  ExpectUsageError({"schedule", "ls", "--all", "--cursor", "c"}, "excludes");
  ExpectUsageError({"schedule", "get"}, "name is required");
  ExpectUsageError({"schedule", "rm", "a", "b"}, "b");
  ExpectUsageError({"schedule", "next", "a", "--count", "0"}, "error: --count: must be 1-1000");
  ExpectUsageError({"schedule", "next", "a", "--count", "1001"}, "error: --count: must be 1-1000");
}

// ---------------------------------------------------------------------------
// Server: health, version.

TEST_F(CliTest, Health) {
  AnswerAll(Answer(200, {{"status", "ok"}}));
  ASSERT_EQ(Run({"health"}), kExitOk);
  EXPECT_EQ(OnlyRequest().target, "/healthz");
  EXPECT_EQ(out(), "ok\n");
}

TEST_F(CliTest, VersionShowsClientAndServer) {
  AnswerAll(Answer(200, {{"version", "9.8.7"}}));
  ASSERT_EQ(Run({"version"}), kExitOk);
  EXPECT_EQ(OnlyRequest().target, "/v1/version");
  EXPECT_THAT(out(), StartsWith("client 0."));
  EXPECT_THAT(out(), HasSubstr("\nserver 9.8.7\n"));
}

// ---------------------------------------------------------------------------
// Global options: URL, token, placement.

TEST_F(CliTest, NoTokenSendsNoAuthorization) {
  ASSERT_EQ(Run({"health"}), kExitOk);
  EXPECT_EQ(OnlyRequest().Header("Authorization"), std::nullopt);
}

TEST_F(CliTest, TokenFromTheEnvironment) {
  env_["CHRONOQ_TOKEN"] = "s3cret";
  ASSERT_EQ(Run({"health"}), kExitOk);
  EXPECT_THAT(OnlyRequest().Header("Authorization"), Optional(std::string("Bearer s3cret")));
}

TEST_F(CliTest, TokenFileLosesItsNewlineAndWinsOverTheEnvironment) {
  const TempFile file("from-file\r\n");
  env_["CHRONOQ_TOKEN"] = "from-env";
  ASSERT_EQ(Run({"--token-file", file.path(), "health"}), kExitOk) << err();
  EXPECT_THAT(OnlyRequest().Header("Authorization"), Optional(std::string("Bearer from-file")));
}

TEST_F(CliTest, MissingTokenFileIsAUsageError) {
  ExpectUsageError({"--token-file", "/nonexistent/token", "health"},
                   "error: --token-file: cannot read /nonexistent/token");
}

TEST_F(CliTest, GlobalOptionsMayFollowTheSubcommand) {
  env_.erase("CHRONOQ_URL");
  AnswerAll(Answer(200, Task("a")));
  ASSERT_EQ(Run({"get", "a", "--json", "--url", server_.url()}), kExitOk) << err();
  EXPECT_EQ(json::parse(out()), Task("a"));
  ASSERT_EQ(Run({"queue", "set", "q", "--concurrency", "1", "--url", server_.url(), "--json"}),
            kExitOk)
      << err();
  EXPECT_EQ(server_.requests().size(), 2u);
}

TEST_F(CliTest, UrlFlagWinsOverTheEnvironment) {
  env_["CHRONOQ_URL"] = "http://127.0.0.1:1";
  ASSERT_EQ(Run({"--url", server_.url() + "/", "health"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/healthz");
}

TEST_F(CliTest, UrlPrefixIsPrependedToEveryPath) {
  ASSERT_EQ(Run({"--url", server_.url() + "/chronoq/", "health"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/chronoq/healthz");
}

// ---------------------------------------------------------------------------
// Errors and exit codes.

TEST_F(CliTest, ServerErrorExitsOneWithTheMessage) {
  AnswerAll(Error(404, "not_found", "task share:42 does not exist"));
  EXPECT_EQ(Run({"get", "share:42"}), kExitServerError);
  EXPECT_THAT(out(), IsEmpty());
  EXPECT_EQ(err(), "error: not_found: task share:42 does not exist\n");

  AnswerAll(Error(400, "invalid_argument", "run_at: not an RFC 3339 time", "run_at"));
  EXPECT_EQ(Run({"--json", "enqueue", "-q", "q"}), kExitServerError);
  EXPECT_THAT(out(), IsEmpty());
  EXPECT_EQ(err(), "error: invalid_argument: run_at: not an RFC 3339 time (field run_at)\n");
}

TEST_F(CliTest, ErrorThatIsNotChronoqsShapeShowsStatusAndBody) {
  AnswerAll({.status = 502, .body = "Bad Gateway\n<html>", .content_type = "text/html"});
  EXPECT_EQ(Run({"health"}), kExitServerError);
  EXPECT_EQ(err(), "error: HTTP 502: Bad Gateway\n");
}

TEST_F(CliTest, SuccessThatIsNotJsonIsAnError) {
  AnswerAll({.status = 200, .body = "<html>", .content_type = "text/html"});
  EXPECT_EQ(Run({"health"}), kExitServerError);
  EXPECT_EQ(err(), "error: the server's answer (HTTP 200) is not JSON\n");
}

TEST_F(CliTest, ConnectionRefusedExitsThree) {
  std::string url;
  {
    test::TestHttpServer gone;
    url = gone.url();
  }  // nothing listens there now
  env_["CHRONOQ_URL"] = url;
  EXPECT_EQ(Run({"health"}), kExitUnreachable);
  EXPECT_EQ(err(), "error: cannot connect to " + url.substr(std::string("http://").size()) +
                       ": connection refused\n");
}

TEST_F(CliTest, SlowServerTimesOutWithExitThree) {
  server_.HoldNextRequest();
  EXPECT_EQ(Run({"--timeout", "200ms", "health"}), kExitUnreachable);
  EXPECT_TRUE(server_.AwaitHeldRequest());
  EXPECT_EQ(err(), "error: no answer from 127.0.0.1:" + std::to_string(server_.port()) +
                       " within 200ms\n");
  server_.Release();
  // The next command gets a fresh connection and an answer.
  EXPECT_EQ(Run({"health"}), kExitOk) << err();
}

TEST_F(CliTest, ClaimWaitsLongerThanTheTimeout) {
  // The server may hold a claim for the whole --wait: the client allows for it.
  server_.HoldNextRequest();
  EXPECT_EQ(Run({"--timeout", "100ms", "claim", "q", "--wait", "200ms"}), kExitUnreachable);
  EXPECT_TRUE(server_.AwaitHeldRequest());
  EXPECT_THAT(err(), HasSubstr(" within 300ms\n"));
  server_.Release();
}

TEST_F(CliTest, BadCommandLinesExitTwoAndSendNothing) {
  ExpectUsageError({}, "A subcommand is required");
  ExpectUsageError({"frobnicate"}, "error: unknown command frobnicate");
  ExpectUsageError({"--bogus"}, "--bogus");
  ExpectUsageError({"--bogus", "health"}, "--bogus");
  ExpectUsageError({"enqueue"}, "--queue is required");
  ExpectUsageError({"enqueue", "-q", "q", "--bogus"}, "--bogus");
  ExpectUsageError({"enqueue", "-q", "q", "--delay", "5x"}, "error: --delay: unknown unit");
  ExpectUsageError({"enqueue", "-q", "q", "--delay", "1500us"},
                   "error: --delay: use whole milliseconds");
  ExpectUsageError({"enqueue", "-q", "q", "--run-at", "tomorrow"},
                   "error: --run-at: not an RFC 3339 time");
  ExpectUsageError({"enqueue", "-q", "q", "--run-at", "2026-11-22T03:00:00Z", "--delay", "1s"},
                   "excludes");
  ExpectUsageError({"enqueue", "-q", "q", "--on-conflict", "overwrite"}, "--on-conflict");
  ExpectUsageError({"enqueue", "-q", "q", "--payload", "{x"},
                   "error: --payload: not valid JSON (at line 1, column 2)");
  ExpectUsageError({"enqueue", "-q", "q", "--max-attempts", "many"}, "--max-attempts");
  ExpectUsageError({"list", "--state", "sleeping"}, "--state");
  ExpectUsageError({"claim", "q", "--lease", "soon"}, "error: --lease:");
  ExpectUsageError({"ack", "a", "--token", "x7"}, "error: --token: not a lease token");
  ExpectUsageError({"ack", "a"}, "--token is required");
  ExpectUsageError({"fail", "a", "--token", "7"}, "--error is required");
  ExpectUsageError({"queue", "set", "q", "--retention", "forever"}, "error: --retention:");
  ExpectUsageError({"queue"}, "A subcommand is required");
  ExpectUsageError({"--timeout", "0", "health"}, "error: --timeout: must be positive");
  ExpectUsageError({"--url", "ftp://example.com", "health"},
                   "error: --url: must start with http:// or https://");
  ExpectUsageError({"--ca-file", "/nonexistent/ca.pem", "health"},
                   "error: --ca-file: cannot read /nonexistent/ca.pem");
}

TEST_F(CliTest, BadUrlFromTheEnvironmentNamesTheVariable) {
  env_["CHRONOQ_URL"] = "ftp://example.com";
  ExpectUsageError({"health"}, "error: CHRONOQ_URL: must start with http://");
}

TEST_F(CliTest, HelpExitsZero) {
  EXPECT_EQ(Run({"--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("enqueue"));
  EXPECT_THAT(out(), HasSubstr("CHRONOQ_TOKEN"));
  EXPECT_EQ(Run({"claim", "--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("--lease"));
  EXPECT_THAT(server_.requests(), IsEmpty());
}

// ---------------------------------------------------------------------------
// The HTTP client's helpers.

TEST(ParseBaseUrlTest, AcceptsHostsPortsAndPrefixes) {
  Result<BaseUrl> u = ParseBaseUrl("http://127.0.0.1:7070");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "7070");
  EXPECT_EQ(u->prefix, "");

  u = ParseBaseUrl("HTTP://example.com/api/");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->Authority(), "example.com:80");
  EXPECT_EQ(u->prefix, "/api");

  u = ParseBaseUrl("[::1]:9000");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->Authority(), "[::1]:9000");
  EXPECT_FALSE(u->tls);

  u = ParseBaseUrl("https://chronoq.example/api");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->Authority(), "chronoq.example:443");
  EXPECT_EQ(u->prefix, "/api");
}

TEST(ParseBaseUrlTest, RejectsWhatItCannotUse) {
  for (const char* bad : {"https://", "ftp://a", "http://", "http://a:0", "http://a:65536",
                          "http://a:x", "http://u@a", "http://a/?q", "http://[::1"}) {
    SCOPED_TRACE(bad);
    Result<BaseUrl> u = ParseBaseUrl(bad, "--url");
    ASSERT_FALSE(u.ok());
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(u.status().field(), "--url");
  }
}

TEST(PercentEncodeTest, KeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(PercentEncode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(PercentEncode("a b/c:d?e#f%g+h&i=j"), "a%20b%2Fc%3Ad%3Fe%23f%25g%2Bh%26i%3Dj");
  EXPECT_EQ(PercentEncode("\xc3\xa9\x01"), "%C3%A9%01");
}

TEST(HttpClientTest, ReusesOneConnection) {
  test::TestHttpServer server;
  auto client = HttpClient::Create(server.url(), std::chrono::seconds(10));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  for (int i = 0; i < 3; ++i) {
    Result<HttpResponse> r = (*client)->Send("POST", "/x", "{\"i\":1}", {{"X-Test", "yes"}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{}");
    EXPECT_THAT(r->Header("content-type"), Optional(std::string("application/json")));
  }
  const std::vector<Request> requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].connection, requests[0].connection);
  EXPECT_THAT(requests[0].Header("x-test"), Optional(std::string("yes")));
  EXPECT_THAT(requests[0].Header("Host"), Optional("127.0.0.1:" + std::to_string(server.port())));
  EXPECT_EQ(requests[0].body, "{\"i\":1}");
}

TEST(HttpClientTest, ResendsOnceWhenAnIdleConnectionWasClosed) {
  test::TestHttpServer server;
  auto client = HttpClient::Create(server.url(), std::chrono::seconds(10));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Send("POST", "/one", "{}", {}).ok());
  server.CloseConnections();
  Result<HttpResponse> r = (*client)->Send("POST", "/two", "{}", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);

  const std::vector<Request> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);  // "/two" arrived once, on a new connection
  EXPECT_EQ(requests[1].target, "/two");
  EXPECT_NE(requests[1].connection, requests[0].connection);
}

TEST(HttpClientTest, TellsWhetherAFailedRequestWasSent) {
  std::string down;
  {
    test::TestHttpServer gone;
    down = gone.url();
  }
  auto refused = HttpClient::Create(down, std::chrono::seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  ASSERT_FALSE((*refused)->Send("POST", "/x", "{}", {}).ok());
  EXPECT_FALSE((*refused)->last_failure().sent);
  EXPECT_EQ((*refused)->last_failure().reason, "connection refused");

  test::TestHttpServer dropping([](const Request&) { return Response{.drop = true}; });
  auto cut = HttpClient::Create(dropping.url(), std::chrono::seconds(10));
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  ASSERT_FALSE((*cut)->Send("POST", "/x", "{}", {}).ok());
  EXPECT_TRUE((*cut)->last_failure().sent);
  EXPECT_THAT((*cut)->last_failure().reason, HasSubstr("while waiting for the answer"));
}

// ---------------------------------------------------------------------------
// Several nodes: MultiHttpClient's failover.

// The URL of a port nothing listens on any more.
std::string DownUrl() {
  test::TestHttpServer gone;
  return gone.url();
}

Response Unavailable(const std::string& message) {
  return Error(503, "store_unavailable", message);
}

std::unique_ptr<MultiHttpClient> MultiClient(const std::string& urls) {
  auto client = MultiHttpClient::Create(urls, std::chrono::seconds(10));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

TEST(MultiHttpClientTest, OneUrlIsOneNode) {
  test::TestHttpServer server;
  auto client = MultiClient(server.url());
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->urls(), std::vector<std::string>{server.url()});
  Result<HttpResponse> r = client->Send("GET", "/healthz", "", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(MultiHttpClientTest, OneNodeDownKeepsItsOwnError) {
  const std::string down = DownUrl();
  auto client = MultiClient(down);
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> r = client->Send("GET", "/healthz", "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.status().message(),
      "cannot connect to " + down.substr(std::string("http://").size()) + ": connection refused");
  EXPECT_FALSE(client->last_reached_node());
}

TEST(MultiHttpClientTest, MovesOnWhenTheFirstNodeIsDown) {
  const std::string down = DownUrl();
  test::TestHttpServer up;
  auto client = MultiClient(down + "," + up.url());
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> r = client->Send("POST", "/v1/tasks", R"({"queue":"q"})", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  const std::vector<Request> requests = up.requests();
  ASSERT_EQ(requests.size(), 1u);  // a refused connection is safe to move on from, even for a POST
  EXPECT_EQ(requests[0].target, "/v1/tasks");
  EXPECT_EQ(requests[0].body, R"({"queue":"q"})");
  EXPECT_EQ(client->current_url(), up.url());
}

TEST(MultiHttpClientTest, MovesOnWhenTheFirstNodeAnswers503) {
  test::TestHttpServer a([](const Request&) { return Unavailable("the store is down"); });
  test::TestHttpServer b([](const Request&) { return Answer(201, {{"id", "x"}}); });
  auto client = MultiClient(a.url() + ", " + b.url());  // spaces around entries are dropped
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> r = client->Send("POST", "/v1/tasks", "{}", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(b.requests().size(), 1u);
}

TEST(MultiHttpClientTest, AllNodesDownListsEveryNode) {
  const std::string first = DownUrl();
  const std::string second = DownUrl();
  auto client = MultiClient(first + "," + second);
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> r = client->Send("GET", "/healthz", "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "no node answered: " + first + ": connection refused; " + second +
                                      ": connection refused");
  EXPECT_FALSE(client->last_reached_node());
}

TEST(MultiHttpClientTest, NodesDownAndUnavailableAreListedTogether) {
  const std::string down = DownUrl();
  test::TestHttpServer busy([](const Request&) { return Unavailable("the store is down"); });
  auto client = MultiClient(down + "," + busy.url());
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> r = client->Send("GET", "/healthz", "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no node answered: " + down + ": connection refused; " +
                                      busy.url() + ": 503 store_unavailable: the store is down");
  EXPECT_TRUE(client->last_reached_node());
}

TEST(MultiHttpClientTest, AllNodesUnavailableReturnsTheLast503) {
  test::TestHttpServer a([](const Request&) { return Unavailable("a is stopping"); });
  test::TestHttpServer b([](const Request&) { return Unavailable("b is stopping"); });
  auto client = MultiClient(a.url() + "," + b.url());
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> r = client->Send("GET", "/healthz", "", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(r->body, HasSubstr("b is stopping"));
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(b.requests().size(), 1u);
}

TEST(MultiHttpClientTest, StaysWithTheNodeThatAnswered) {
  test::TestHttpServer a([](const Request&) { return Unavailable("the store is down"); });
  test::TestHttpServer b;
  auto client = MultiClient(a.url() + "," + b.url());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("GET", "/one", "", {}).ok());
  a.SetHandler({});  // a is fine again, but b is current now
  for (const char* target : {"/two", "/three"}) {
    Result<HttpResponse> r = client->Send("GET", target, "", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(a.requests().size(), 1u);
  const std::vector<Request> on_b = b.requests();
  ASSERT_EQ(on_b.size(), 3u);
  EXPECT_EQ(on_b[2].target, "/three");
  // Over one kept-alive connection.
  EXPECT_EQ(on_b[2].connection, on_b[0].connection);
  EXPECT_EQ(client->current_url(), b.url());
}

TEST(MultiHttpClientTest, StaysWithTheNodeThatAnsweredAfterOneWasDown) {
  const std::string down = DownUrl();
  test::TestHttpServer up;
  auto client = MultiClient(down + "," + up.url());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("GET", "/one", "", {}).ok());
  ASSERT_TRUE(client->Send("GET", "/two", "", {}).ok());
  const std::vector<Request> requests = up.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].connection, requests[0].connection);
}

TEST(MultiHttpClientTest, WrapsAroundTheListFromTheCurrentNode) {
  test::TestHttpServer a([](const Request&) { return Unavailable("a is down"); });
  test::TestHttpServer b([](const Request&) { return Unavailable("b is down"); });
  test::TestHttpServer c;
  auto client = MultiClient(a.url() + "," + b.url() + "," + c.url());
  ASSERT_NE(client, nullptr);
  // a and b are unavailable: c answers and becomes current.
  ASSERT_TRUE(client->Send("GET", "/one", "", {}).ok());
  EXPECT_EQ(client->current_url(), c.url());
  // c goes down: from c, the next is a (wrapping), and b is not needed.
  c.SetHandler([](const Request&) { return Unavailable("c is down"); });
  a.SetHandler({});
  Result<HttpResponse> r = client->Send("GET", "/two", "", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(client->current_url(), a.url());
  EXPECT_EQ(a.requests().size(), 2u);
  EXPECT_EQ(b.requests().size(), 1u);
  EXPECT_EQ(c.requests().size(), 2u);
}

TEST(MultiHttpClientTest, APostCutOffAfterSendingIsNotResent) {
  test::TestHttpServer a([](const Request&) { return Response{.drop = true}; });
  test::TestHttpServer b;
  auto client = MultiClient(a.url() + "," + b.url());
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> r = client->Send("POST", "/v1/tasks", "{}", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), StartsWith("no answer: " + a.url() + ": "));
  EXPECT_THAT(r.status().message(),
              HasSubstr("; POST not resent to another node: " + a.url() + " may have applied it"));
  EXPECT_TRUE(client->last_reached_node());
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_THAT(b.requests(), IsEmpty());
  // The node that answered last is still the current one.
  EXPECT_EQ(client->current_url(), a.url());
}

TEST(MultiHttpClientTest, APostMovesOnWhenItsNodeWentDownBetweenRequests) {
  // The kept-alive connection to a is found closed before the POST goes out,
  // so a never saw it: safe to send to b.
  auto a = std::make_unique<test::TestHttpServer>();
  test::TestHttpServer b;
  auto client = MultiClient(a->url() + "," + b.url());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("GET", "/one", "", {}).ok());
  ASSERT_EQ(a->requests().size(), 1u);
  a.reset();  // closes its connections, then its port
  Result<HttpResponse> r = client->Send("POST", "/v1/acks", "{}", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(b.requests().size(), 1u);
  EXPECT_EQ(b.requests()[0].target, "/v1/acks");
  EXPECT_EQ(client->current_url(), b.url());
}

TEST(MultiHttpClientTest, IdempotentRequestsCutOffAfterSendingGoToTheNextNode) {
  test::TestHttpServer a([](const Request&) { return Response{.drop = true}; });
  test::TestHttpServer b;
  for (const std::string method : {"GET", "PUT", "DELETE"}) {
    SCOPED_TRACE(method);
    auto client = MultiClient(a.url() + "," + b.url());  // a is current
    ASSERT_NE(client, nullptr);
    Result<HttpResponse> r = client->Send(method, "/v1/queues/q", "", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    ASSERT_FALSE(a.requests().empty());
    EXPECT_EQ(a.requests().back().method, method);
    ASSERT_FALSE(b.requests().empty());
    EXPECT_EQ(b.requests().back().method, method);
  }
  EXPECT_EQ(a.requests().size(), 3u);
  EXPECT_EQ(b.requests().size(), 3u);
}

TEST(MultiHttpClientTest, RefusesABadEntryNamingIt) {
  struct Case {
    std::string urls;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"http://a:1,ftp://b:2",
            "url: entry 2 (ftp://b:2): must start with http:// or https://"},
           {"ftp://a,http://b:2", "url: entry 1 (ftp://a): must start with http://"},
           {"http://a:1,,http://b:2", "url: entry 2 is empty (URLs are separated by commas)"},
           {"http://a:1,", "url: entry 2 is empty (URLs are separated by commas)"},
           {"http://a:1,http://b:0", "url: entry 2 (http://b:0): the port must be a number"},
           // One URL: ParseBaseUrl's message, as before lists.
           {"ftp://a", "url: must start with http:// or https://"},
       }) {
    SCOPED_TRACE(c.urls);
    auto client = MultiHttpClient::Create(c.urls, std::chrono::seconds(1));
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(client.status().field(), "url");
    EXPECT_THAT(client.status().message(), StartsWith(c.message));
  }
}

TEST_F(CliTest, SeveralUrlsFailOverToANodeThatIsUp) {
  const std::string down = DownUrl();
  env_.erase("CHRONOQ_URL");
  AnswerAll(Answer(200, Task("a")));
  ASSERT_EQ(Run({"--url", down + "," + server_.url(), "--json", "get", "a"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/v1/tasks/a");
  EXPECT_EQ(json::parse(out()), Task("a"));
  EXPECT_THAT(err(), IsEmpty());
}

TEST_F(CliTest, SeveralUrlsFromTheEnvironment) {
  env_["CHRONOQ_URL"] = DownUrl() + "," + server_.url();
  ASSERT_EQ(Run({"health"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().target, "/healthz");
}

TEST_F(CliTest, NoNodeUpExitsThreeListingEveryNode) {
  const std::string first = DownUrl();
  const std::string second = DownUrl();
  env_["CHRONOQ_URL"] = first + "," + second;
  EXPECT_EQ(Run({"health"}), kExitUnreachable);
  EXPECT_EQ(err(), "error: no node answered: " + first + ": connection refused; " + second +
                       ": connection refused\n");
}

TEST_F(CliTest, EveryNodeUnavailableShowsTheLastServerError) {
  test::TestHttpServer other([](const Request&) { return Unavailable("the other is stopping"); });
  AnswerAll(Unavailable("chronoqd is stopping"));
  EXPECT_EQ(Run({"--url", other.url() + "," + server_.url(), "health"}), kExitServerError);
  EXPECT_EQ(err(), "error: store_unavailable: chronoqd is stopping\n");
  EXPECT_EQ(other.requests().size(), 1u);
}

TEST_F(CliTest, ABadUrlInTheListIsAUsageError) {
  ExpectUsageError({"--url", server_.url() + ",http://b:0", "health"},
                   "error: --url: entry 2 (http://b:0): the port must be a number");
  env_["CHRONOQ_URL"] = server_.url() + ",ftp://b";
  ExpectUsageError({"health"}, "error: CHRONOQ_URL: entry 2 (ftp://b): must start with http://");
}

// ---------------------------------------------------------------------------
// cron next: the calculator, no server

TEST_F(CliTest, CronNextPrintsFireTimesWithoutAServer) {
  env_["CHRONOQ_URL"] = "http://127.0.0.1:1";  // nothing listens there
  EXPECT_EQ(Run({"cron", "next", "30 2 * * *", "--tz", "America/New_York", "--from",
                 "2026-03-07T12:00:00Z", "--count", "3"}),
            kExitOk)
      << err();
  // 8 March 2026 springs forward at 02:00: the fixed-time rule runs at 03:00 EDT.
  EXPECT_EQ(out(),
            "2026-03-08T07:00:00.000Z\n2026-03-09T06:30:00.000Z\n2026-03-10T06:30:00.000Z\n");
  EXPECT_THAT(server_.requests(), IsEmpty());
  // Epoch milliseconds work for --from too; UTC is the default zone.
  EXPECT_EQ(Run({"cron", "next", "@hourly", "--from", "0"}), kExitOk) << err();
  EXPECT_EQ(out(), "1970-01-01T01:00:00.000Z\n");
}

TEST_F(CliTest, CronNextRejectsBadExpressionsZonesAndCounts) {
  ExpectUsageError({"cron", "next", "0 0 32 * *"}, "day-of-month");
  ExpectUsageError({"cron", "next", "0 0 30 2 *"}, "never fires");
  ExpectUsageError({"cron", "next", "* * * * *", "--tz", "Mars/Olympus"}, "tz");
  ExpectUsageError({"cron", "next", "* * * * *", "--count", "0"}, "--count");
  ExpectUsageError({"cron", "next", "* * * * *", "--from", "soon"}, "--from");
}

// ---------------------------------------------------------------------------
// lock

// A scripted lock server: grants token 7 on "k", answers extends and
// releases, and records what the lock's command had done by each request.
class CliLockTest : public CliTest {
 protected:
  CliLockTest() {
    dir_ = std::filesystem::temp_directory_path() /
           ("chronoq-cli-lock-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    marker_ = (dir_ / "ran").string();
    fifo_ = (dir_ / "fifo").string();
    EXPECT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
    // A reader may close the FIFO between WakeReader()'s open and write.
    ::signal(SIGPIPE, SIG_IGN);
    server_.SetHandler([this](const Request& r) { return Handle(r); });
  }
  ~CliLockTest() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Writes a line to the FIFO if a reader has it open (never blocks).
  bool WakeReader() const {
    const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd < 0) return false;  // ENXIO: nobody reads yet, or any more
    const bool wrote = ::write(fd, "x\n", 2) == 2;
    ::close(fd);
    return wrote;
  }

  Response Handle(const Request& r) {
    std::lock_guard lock(mu_);
    seen_.push_back({r.target, std::filesystem::exists(marker_)});
    if (r.target.ends_with("/acquire")) return acquire_;
    if (r.target.ends_with("/extend")) {
      // The command waits on the FIFO until an extension came; with
      // stale_extend_ the extension that woke it is refused.
      const bool woke = WakeReader();
      if (woke && stale_extend_) return Error(409, "stale_token", "lease lapsed", "token");
      return Answer(200, {{"key", "k"}, {"token", 7}, {"expires_at", "2026-11-22T00:01:00.000Z"}});
    }
    return Answer(200, json::object());
  }

  // The targets requested so far and whether the command had run by then.
  std::vector<std::pair<std::string, bool>> Seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string marker_;  // the commands create it
  std::string fifo_;
  std::mutex mu_;
  Response acquire_ =
      Answer(200, {{"key", "k"}, {"token", 7}, {"expires_at", "2026-11-22T00:00:30.000Z"}});
  bool stale_extend_ = false;
  std::vector<std::pair<std::string, bool>> seen_;
};

TEST_F(CliLockTest, RunsTheCommandWhileHoldingTheLockAndExitsWithItsStatus) {
  ASSERT_EQ(
      Run({"lock", "k", "--owner", "me", "--", "sh", "-c",
           "touch " + marker_ +
               R"( && test "$CHRONOQ_LOCK_KEY" = k && test "$CHRONOQ_LOCK_TOKEN" = 7 && exit 3)"}),
      3)
      << err();
  EXPECT_THAT(err(), IsEmpty());
  EXPECT_THAT(out(), IsEmpty());
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/v1/locks/k/acquire");
  EXPECT_EQ(BodyOf(requests[0]), json({{"wait_ms", 5000}, {"lease_ms", 30000}, {"owner", "me"}}));
  EXPECT_EQ(requests[1].target, "/v1/locks/k/release");
  EXPECT_EQ(BodyOf(requests[1]), json({{"token", 7}}));
  // Acquired before the command ran; released after it ended.
  EXPECT_EQ(Seen(), (std::vector<std::pair<std::string, bool>>{{"/v1/locks/k/acquire", false},
                                                               {"/v1/locks/k/release", true}}));
}

TEST_F(CliLockTest, SendsWaitLeaseAndAnEncodedKey) {
  EXPECT_EQ(Run({"lock", "a b/c", "--wait", "0", "--lease", "2m", "--", "true"}), kExitOk) << err();
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "/v1/locks/a%20b%2Fc/acquire");
  EXPECT_EQ(BodyOf(requests[0]), json({{"wait_ms", 0}, {"lease_ms", 120000}}));
  EXPECT_EQ(requests[1].target, "/v1/locks/a%20b%2Fc/release");
}

TEST_F(CliLockTest, ACommandKilledByASignalExitsWith128PlusTheSignal) {
  EXPECT_EQ(Run({"lock", "k", "--", "sh", "-c", "kill -TERM $$"}), 128 + SIGTERM) << err();
  ASSERT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(server_.requests()[1].target, "/v1/locks/k/release");
}

TEST_F(CliLockTest, ABusyLockExits75WithoutRunningTheCommand) {
  acquire_ =
      Error(409, "lock_wait_timeout", "the lock is still held after waiting 0 ms", "wait_ms");
  EXPECT_EQ(Run({"lock", "k", "--wait", "0", "--", "touch", marker_}), kExitLockBusy);
  EXPECT_EQ(err(), "error: k is locked: not acquired within 0; touch not run\n");
  EXPECT_FALSE(std::filesystem::exists(marker_));
  EXPECT_EQ(OnlyRequest().target, "/v1/locks/k/acquire");
}

TEST_F(CliLockTest, OtherAcquireErrorsExitOneWithoutRunningTheCommand) {
  acquire_ = Error(400, "invalid_argument", "key: contains a control character", "key");
  EXPECT_EQ(Run({"lock", "k", "--", "touch", marker_}), kExitServerError);
  EXPECT_EQ(err(), "error: invalid_argument: key: contains a control character (field key)\n");
  EXPECT_FALSE(std::filesystem::exists(marker_));
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(CliLockTest, AnUnreachableServerExitsThree) {
  std::string url;
  {
    test::TestHttpServer gone;
    url = gone.url();
  }
  env_["CHRONOQ_URL"] = url;
  EXPECT_EQ(Run({"lock", "k", "--", "touch", marker_}), kExitUnreachable);
  EXPECT_THAT(err(), HasSubstr("connection refused"));
  EXPECT_FALSE(std::filesystem::exists(marker_));
}

TEST_F(CliLockTest, ExtendsTheLeaseWhileTheCommandRuns) {
  // The command ends only once an extension has reached the server (the
  // timeout only turns a missing extension into a failure instead of a hang).
  EXPECT_EQ(
      Run({"lock", "k", "--lease", "30ms", "--", "timeout", "60", "sh", "-c", "read x < " + fifo_}),
      kExitOk)
      << err();
  EXPECT_THAT(err(), IsEmpty());
  const std::vector<Request> requests = server_.requests();
  ASSERT_GE(requests.size(), 3u);
  EXPECT_EQ(requests.front().target, "/v1/locks/k/acquire");
  for (size_t i = 1; i + 1 < requests.size(); ++i) {
    EXPECT_EQ(requests[i].target, "/v1/locks/k/extend");
    EXPECT_EQ(BodyOf(requests[i]), json({{"token", 7}, {"lease_ms", 30}}));
  }
  EXPECT_EQ(requests.back().target, "/v1/locks/k/release");
}

TEST_F(CliLockTest, ALostLockIsReportedButTheCommandFinishes) {
  stale_extend_ = true;
  EXPECT_EQ(Run({"lock", "k", "--lease", "30ms", "--", "timeout", "60", "sh", "-c",
                 "read x < " + fifo_ + " && touch " + marker_ + " && exit 4"}),
            4);
  EXPECT_THAT(err(), HasSubstr("warning: lost the lock on k (stale_token: lease lapsed"));
  EXPECT_TRUE(std::filesystem::exists(marker_));
  // No release for a lock that is gone, and no more extensions.
  const std::vector<Request> requests = server_.requests();
  ASSERT_GE(requests.size(), 2u);
  EXPECT_EQ(requests.back().target, "/v1/locks/k/extend");
}

TEST_F(CliLockTest, ACommandThatCannotStartExits127AndReleases) {
  EXPECT_EQ(Run({"lock", "k", "--", "/nonexistent/chronoq-test-cmd"}), 127);
  EXPECT_THAT(err(), HasSubstr("error: cannot run /nonexistent/chronoq-test-cmd: "));
  ASSERT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(server_.requests()[1].target, "/v1/locks/k/release");
}

TEST_F(CliLockTest, BadLockCommandLinesExitTwoAndSendNothing) {
  ExpectUsageError({"lock"}, "key is required");
  ExpectUsageError({"lock", "k"}, "command is required");
  ExpectUsageError({"lock", "k", "--"}, "command is required");
  ExpectUsageError({"lock", "k", "--wait", "soon", "--", "true"}, "error: --wait:");
  ExpectUsageError({"lock", "k", "--wait", "2h", "--", "true"},
                   "error: --wait: must be between 0 and 1h");
  ExpectUsageError({"lock", "k", "--lease", "0", "--", "true"},
                   "error: --lease: must be between 1ms and 7d");
  ExpectUsageError({"lock", "k", "--lease", "8d", "--", "true"}, "error: --lease:");
  ExpectUsageError({"lock", "k", "--bogus", "--", "true"}, "--bogus");
  ExpectUsageError({"lock-info"}, "key is required");
}

TEST_F(CliTest, LockInfoShowsTheHolderAndWaiters) {
  AnswerAll(Answer(200, {{"key", "a/b"},
                         {"held", true},
                         {"owner", "worker-3"},
                         {"expires_at", "2026-11-22T00:00:30.000Z"},
                         {"waiters", 2}}));
  ASSERT_EQ(Run({"lock-info", "a/b"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().method, "GET");
  EXPECT_EQ(OnlyRequest().target, "/v1/locks/a%2Fb");
  EXPECT_EQ(out(),
            "key:         a/b\n"
            "held:        yes\n"
            "owner:       worker-3\n"
            "expires_at:  2026-11-22T00:00:30.000Z\n"
            "waiters:     2\n");

  AnswerAll(Answer(200, {{"key", "k"},
                         {"held", false},
                         {"owner", nullptr},
                         {"expires_at", nullptr},
                         {"waiters", 0}}));
  ASSERT_EQ(Run({"lock-info", "k"}), kExitOk) << err();
  EXPECT_EQ(out(), "key:      k\nheld:     no\nwaiters:  0\n");
  ASSERT_EQ(Run({"--json", "lock-info", "k"}), kExitOk) << err();
  EXPECT_EQ(json::parse(out())["held"], false);
}

}  // namespace
}  // namespace chronoq::cli
