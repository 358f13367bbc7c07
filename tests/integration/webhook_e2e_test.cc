// Webhooks end to end: the real chronoqd delivers to a receiver in the test
// process. A receiver that answers 500 then 200 (chronoqd retries by itself,
// after a 1 ms backoff), one that never answers (each attempt ends at the
// target's timeout, the last one kills the task), and the Host header a
// receiver sees. Waits are for events (requests arriving, task states), never
// sleeps; nothing here measures time.
#include <atomic>
#include <future>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/chronoqd_fixture.h"
#include "support/eventually.h"
#include "support/test_http_server.h"

namespace chronoq {
namespace {

using nlohmann::json;
using test::Eventually;
using test::TestHttpServer;
using ::testing::HasSubstr;

class WebhookE2eTest : public test::ChronoqdFixture {
 protected:
  // Enqueues the task `id` on the webhook queue "hooks", due now, with
  // `target`; a retry is due 1 ms (at most) after a failed attempt.
  void AddHook(const std::string& id, const json& target, int max_attempts = 25) {
    const json task = {{"queue", "hooks"},
                       {"id", id},
                       {"payload", {{"n", 1}}},
                       {"max_attempts", max_attempts},
                       {"backoff", {{"base_ms", 1}, {"cap_ms", 1}}},
                       {"target", target}};
    const cli::HttpResponse r = Send("POST", "/v1/tasks", task.dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }
  json Task(const std::string& id) { return Json(Send("GET", "/v1/tasks/" + id)); }
  // Waits until task `id` is in `state`.
  ::testing::AssertionResult AwaitState(const std::string& id, const std::string& state) {
    return Eventually([&] { return Task(id)["state"] == state; }, "task " + id + " " + state);
  }
};

TEST_F(WebhookE2eTest, A500IsRetriedByChronoqdAndA200ThenCompletesTheTask) {
  std::atomic<int> deliveries{0};  // outlives the receiver, whose handler counts
  TestHttpServer receiver;
  // The second delivery waits in the receiver until the test has looked at
  // the task between the attempts. Declared after the receiver, the promise
  // goes first: if the test ends early, the wait ends (broken promise) and
  // the receiver's thread can be joined.
  std::promise<void> answer_second;
  receiver.SetHandler(
      [&deliveries, second = answer_second.get_future().share()](const TestHttpServer::Request&) {
        if (++deliveries == 1) {
          return TestHttpServer::Response{.status = 500, .body = "database down"};
        }
        // Bounded: a test that fails early breaks the promise, and a hung
        // one must not hold the receiver's thread forever.
        second.wait_for(test::kGiveUpAfter);
        return TestHttpServer::Response{.body = R"({"ok":true})"};
      });
  Launch();
  // A timeout far beyond the test's own pauses: the held answer must not
  // time out.
  AddHook("flaky", {{"url", receiver.url() + "/hook"}, {"timeout_ms", 300000}});

  // The retry came by itself: no PATCH, no clock to advance.
  ASSERT_TRUE(receiver.AwaitRequests(2, test::kGiveUpAfter));
  const json between = Task("flaky");
  EXPECT_EQ(between["state"], "running") << between.dump();
  EXPECT_EQ(between["attempt"], 2) << between.dump();
  EXPECT_EQ(between["last_error"], "HTTP 500: database down") << between.dump();
  EXPECT_EQ(between["last_response"], "HTTP 500: database down") << between.dump();

  answer_second.set_value();
  ASSERT_TRUE(AwaitState("flaky", "succeeded"));
  const json done = Task("flaky");
  EXPECT_EQ(done["attempt"], 2) << done.dump();
  EXPECT_EQ(done["last_response"], R"(HTTP 200: {"ok":true})") << done.dump();
  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "/hook");
  EXPECT_EQ(requests[1].body, R"({"n":1})");
}

TEST_F(WebhookE2eTest, AReceiverThatNeverAnswersTimesOutEveryAttemptUntilTheTaskIsDead) {
  // It accepts the connection and reads the request, then says nothing.
  TestHttpServer receiver(
      [](const TestHttpServer::Request&) { return TestHttpServer::Response{.silent = true}; });
  Launch();
  AddHook("mute", {{"url", receiver.url() + "/hook"}, {"timeout_ms", 200}}, /*max_attempts=*/2);

  ASSERT_TRUE(AwaitState("mute", "dead"));
  const json dead = Task("mute");
  EXPECT_EQ(dead["attempt"], 2) << dead.dump();
  // Sent, then no answer in time: a timeout, not a refused connection.
  EXPECT_THAT(dead["last_error"].get<std::string>(),
              HasSubstr("timed out after 200 ms reading the response"));
  EXPECT_FALSE(dead.contains("last_response")) << dead.dump();
  // Both attempts reached the receiver.
  EXPECT_EQ(receiver.requests().size(), 2u);
}

TEST_F(WebhookE2eTest, TheReceiverSeesItsPortInTheHostHeader) {
  TestHttpServer receiver;
  Launch();
  AddHook("host", {{"url", receiver.url() + "/hook"}});
  ASSERT_TRUE(receiver.AwaitRequests(1, test::kGiveUpAfter));
  EXPECT_EQ(receiver.requests()[0].Header("Host"), "127.0.0.1:" + std::to_string(receiver.port()));
  EXPECT_TRUE(AwaitState("host", "succeeded"));
}

}  // namespace
}  // namespace chronoq
