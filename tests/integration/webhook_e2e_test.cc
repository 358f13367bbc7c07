// Webhooks end to end: the real chronoqd delivers to a receiver in the test
// process. A receiver that answers 500 then 200 (chronoqd retries by itself,
// after a 1 ms backoff), one that never answers (each attempt ends at the
// target's timeout, the last one kills the task), and the Host header a
// receiver sees. Waits are for events (requests arriving, task states), never
// sleeps; nothing here measures time.
#include <atomic>
#include <csignal>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/subprocess.h"
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

// --- final statuses: a queue setting, in the store --------------------------

TEST_F(WebhookE2eTest, AFinalStatusSetOnTheQueueMakesTheTaskDeadAtOnceAndIsKept) {
  TestHttpServer receiver([](const TestHttpServer::Request&) {
    return TestHttpServer::Response{.status = 404, .body = "no such share"};
  });
  Launch();
  // Bad input is refused naming the field, and changes nothing.
  cli::HttpResponse bad = Send("PUT", "/v1/queues/hooks", R"({"final_statuses":[404,200]})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("final_statuses[1]"));
  bad = Send("PUT", "/v1/queues/hooks", R"({"final_statuses":"404"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("final_statuses"));
  EXPECT_EQ(Send("GET", "/v1/queues/hooks").status, 404);

  const cli::HttpResponse set = Send("PUT", "/v1/queues/hooks", R"({"final_statuses":[422,404]})");
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(Json(set)["final_statuses"], json::parse("[404,422]")) << set.body;
  AddHook("gone", {{"url", receiver.url() + "/hook"}});
  ASSERT_TRUE(AwaitState("gone", "dead"));
  EXPECT_EQ(Task("gone")["attempt"], 1);
  EXPECT_EQ(Task("gone")["last_error"], "HTTP 404: no such share");

  // Kept by the store across a restart; null puts it back to none.
  ASSERT_THAT(server_->Stop(SIGTERM), test::IsOkAndHolds(0));
  client_.reset();
  Launch();
  EXPECT_EQ(Json(Send("GET", "/v1/queues/hooks"))["final_statuses"], json::parse("[404,422]"));
  const cli::HttpResponse reset = Send("PUT", "/v1/queues/hooks", R"({"final_statuses":null})");
  ASSERT_EQ(reset.status, 200) << reset.body;
  EXPECT_TRUE(Json(reset)["final_statuses"].is_null()) << reset.body;
}

// --- signatures a receiver verifies with the snippet of docs/OPERATIONS.md ------

constexpr std::string_view kSecretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr std::string_view kSecretB = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

// The Python verification snippet of docs/OPERATIONS.md: the code block after
// the line "<!-- verify.py: tested by webhook_e2e_test -->".
std::string PythonSnippet() {
  std::ifstream in(std::string(CHRONOQ_SOURCE_DIR) + "/docs/OPERATIONS.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t marker = doc.find("<!-- verify.py: tested by webhook_e2e_test -->");
  if (marker == std::string::npos) return "";
  const size_t start = doc.find("```python\n", marker);
  const size_t end = doc.find("```\n", start + 10);
  if (start == std::string::npos || end == std::string::npos) return "";
  return doc.substr(start + 10, end - start - 10);
}

// Runs the snippet's verify() on a delivery the receiver got, as a receiver
// holding `secrets` would: true when it accepts it.
::testing::AssertionResult PythonVerifies(const TestHttpServer::Request& request,
                                          const std::vector<std::string_view>& secrets) {
  const std::string snippet = PythonSnippet();
  if (snippet.empty()) return ::testing::AssertionFailure() << "no snippet in OPERATIONS.md";
  json headers = json::object();
  for (const auto& [name, value] : request.headers) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    headers[lower] = value;
  }
  const json input = {{"headers", headers},
                      {"body", request.body},
                      {"secrets", std::vector<std::string>(secrets.begin(), secrets.end())}};
  const std::string harness = snippet +
                              "\nimport json, sys\n"
                              "d = json.load(sys.stdin)\n"
                              "verify(d['secrets'], d['headers'], d['body'].encode())\n"
                              "print('verified')\n";
  Result<Subprocess::Completed> run = Subprocess::Run({.argv = {"/usr/bin/python3", "-c", harness}},
                                                      Deadline(test::kGiveUpAfter), input.dump());
  if (!run.ok()) return ::testing::AssertionFailure() << run.status().ToString();
  if (run->code != 0 || run->out != "verified\n") {
    return ::testing::AssertionFailure() << "exit " << run->code << ": " << run->err;
  }
  return ::testing::AssertionSuccess();
}

TEST_F(WebhookE2eTest, SignedDeliveriesVerifyWithTheDocsSnippetAcrossARotationBySighup) {
  TestHttpServer receiver;
  const std::string secrets = dir_.File("webhook-secrets");
  std::ofstream(secrets) << "hooks " << kSecretA << "\n";
  Launch({"--webhook-secrets", secrets});
  AddHook("before", {{"url", receiver.url() + "/hook"}});
  ASSERT_TRUE(AwaitState("before", "succeeded"));
  const TestHttpServer::Request before = receiver.requests().at(0);
  EXPECT_EQ(before.Header("chronoq-task-id"), "before");
  EXPECT_TRUE(PythonVerifies(before, {kSecretA}));
  EXPECT_FALSE(PythonVerifies(before, {kSecretB}));  // the snippet can say no

  // Rotation: the new secret joins the old one; both sign until the old goes.
  std::ofstream(secrets) << "hooks " << kSecretA << "\nhooks " << kSecretB << "\n";
  ASSERT_EQ(::kill(server_->pid(), SIGHUP), 0);
  // The reload is seen in what the receiver gets: deliveries until one
  // carries two signatures.
  int probes = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string id = "during-" + std::to_string(++probes);
        AddHook(id, {{"url", receiver.url() + "/hook"}});
        if (!AwaitState(id, "succeeded")) return true;  // fails below
        const auto signature = receiver.requests().back().Header("webhook-signature");
        return signature.value_or("").find(' ') != std::string::npos;
      },
      "a delivery signed with both secrets after SIGHUP"));
  const TestHttpServer::Request during = receiver.requests().back();
  EXPECT_EQ(during.Header("chronoq-task-id"), "during-" + std::to_string(probes));
  EXPECT_TRUE(PythonVerifies(during, {kSecretA}));  // receivers not yet told
  EXPECT_TRUE(PythonVerifies(during, {kSecretB}));  // receivers already told
}

}  // namespace
}  // namespace chronoq
