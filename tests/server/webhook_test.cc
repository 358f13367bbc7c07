// Webhook delivery against a scripted HTTP server in the test: a 2xx
// acknowledges, a 500 or a timeout or a refused connection fails into the
// retry policy with what happened in last_error; the signed headers a
// receiver verifies; 410, final statuses and Retry-After; connections kept
// alive and the per-host limit. The engine runs on the fake clock; only the
// HTTP exchange takes real (short) time.
#include "server/webhook.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chronoq/time.h"

#include "server/webhook_signing.h"
#include "support/engine_fixture.h"
#include "support/eventually.h"
#include "support/test_http_server.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

namespace chronoq::server {
namespace {

using namespace std::chrono_literals;
using test::Eventually;
using test::TestHttpServer;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TargetUrlTest, SplitsSchemeHostPortAndTarget) {
  auto a = ParseTargetUrl("https://hooks.example.com/a/b?c=d#frag");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->host, "hooks.example.com");
  EXPECT_EQ(a->port, "443");
  EXPECT_EQ(a->target, "/a/b?c=d");
  auto b = ParseTargetUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->tls);
  EXPECT_EQ(b->port, "8080");
  EXPECT_EQ(b->target, "/");
  auto c = ParseTargetUrl("http://[::1]:9/x");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, "9");
  EXPECT_EQ(ParseTargetUrl("http://h?q")->target, "/?q");
  EXPECT_FALSE(ParseTargetUrl("ftp://h/").ok());
  EXPECT_FALSE(ParseTargetUrl("http://user:pw@h/").ok());
  EXPECT_FALSE(ParseTargetUrl("http:///x").ok());
}

TEST(TargetUrlTest, HostHeaderHasThePortUnlessItIsTheSchemesDefault) {
  auto host = [](std::string_view url) {
    Result<TargetUrl> parsed = ParseTargetUrl(url);
    EXPECT_TRUE(parsed.ok()) << url;
    return parsed.ok() ? HostHeader(*parsed) : "";
  };
  EXPECT_EQ(host("http://127.0.0.1:7456/ok"), "127.0.0.1:7456");
  EXPECT_EQ(host("http://hooks.example.com/x"), "hooks.example.com");
  EXPECT_EQ(host("http://hooks.example.com:80/x"), "hooks.example.com");
  EXPECT_EQ(host("https://hooks.example.com?q"), "hooks.example.com");
  EXPECT_EQ(host("https://hooks.example.com:443/x"), "hooks.example.com");
  // The other scheme's default is not this one's.
  EXPECT_EQ(host("https://hooks.example.com:80/x"), "hooks.example.com:80");
  EXPECT_EQ(host("http://hooks.example.com:443/x"), "hooks.example.com:443");
  // IPv6 literals keep their brackets, with or without a port.
  EXPECT_EQ(host("http://[::1]:8080/x"), "[::1]:8080");
  EXPECT_EQ(host("http://[::1]/x"), "[::1]");
  EXPECT_EQ(host("https://[2001:db8::7]:443/x"), "[2001:db8::7]");
  EXPECT_EQ(host("https://[2001:db8::7]:8443/x"), "[2001:db8::7]:8443");
}

class WebhookTest : public test::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    Restart({.concurrency = 2});
  }
  // A deliverer with `options` (on the fake clock) instead of the one running.
  void Restart(WebhookOptions options) {
    deliverer_.reset();
    options.clock = &clock_;
    deliverer_ = std::make_unique<WebhookDeliverer>(*engine_, options);
  }
  void TearDown() override {
    deliverer_.reset();  // stops before the engine goes
    engine_.reset();
  }

  Task AddHook(WebhookTarget target, std::string payload = R"({"share":42})", std::string id = "",
               std::string key = "") {
    auto t = engine_->Enqueue({.queue = "hooks",
                               .payload = std::move(payload),
                               .id = std::move(id),
                               .target = std::move(target),
                               .key = std::move(key)});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    deliverer_->Serve("hooks");
    return t.ok() ? *t : Task{};
  }
  // Waits until the task left `running` after its first attempt.
  Task AwaitSettled(const std::string& id) {
    Task t;
    EXPECT_TRUE(Eventually([&] {
      t = *engine_->Get(id);
      return t.attempt >= 1 && t.state != TaskState::kRunning;
    })) << id;
    return t;
  }

  // Answers every request with `status`, `body` and `headers`.
  void AnswerAll(int status, std::string body = "",
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
    receiver_.SetHandler([=](const TestHttpServer::Request&) {
      return TestHttpServer::Response{.status = status, .body = body, .headers = headers};
    });
  }

  TestHttpServer receiver_;
  std::unique_ptr<WebhookDeliverer> deliverer_;
};

TEST_F(WebhookTest, A2xxAcknowledgesAndTheRequestIsAsSpecified) {
  receiver_.SetHandler([](const TestHttpServer::Request&) {
    return TestHttpServer::Response{.status = 204, .body = ""};
  });
  const Task t = AddHook({.url = receiver_.url() + "/expire?share=42",
                          .method = "PUT",
                          .headers = {{"Authorization", "Bearer abc"}, {"X-Trace", "7"}}});
  const Task done = AwaitSettled(t.id);
  EXPECT_EQ(done.state, TaskState::kSucceeded);
  EXPECT_EQ(done.last_response, "HTTP 204");
  auto requests = receiver_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].target, "/expire?share=42");
  EXPECT_EQ(requests[0].body, R"({"share":42})");
  EXPECT_EQ(requests[0].Header("authorization"), "Bearer abc");
  EXPECT_EQ(requests[0].Header("x-trace"), "7");
  EXPECT_EQ(requests[0].Header("content-type"), "application/json");
}

TEST_F(WebhookTest, TheHostHeaderNamesTheReceiversPort) {
  const Task t = AddHook({.url = receiver_.url() + "/hook"});
  EXPECT_EQ(AwaitSettled(t.id).state, TaskState::kSucceeded);
  auto requests = receiver_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].Header("host"), "127.0.0.1:" + std::to_string(receiver_.port()));
}

TEST_F(WebhookTest, AHostHeaderOfTheTargetReplacesChronoqdsOwn) {
  const Task t = AddHook({.url = receiver_.url() + "/hook", .headers = {{"Host", "a.example"}}});
  EXPECT_EQ(AwaitSettled(t.id).state, TaskState::kSucceeded);
  auto requests = receiver_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].Header("host"), "a.example");
  EXPECT_EQ(std::count_if(requests[0].headers.begin(), requests[0].headers.end(),
                          [](const auto& h) { return strcasecmp(h.first.c_str(), "host") == 0; }),
            1);
}

TEST_F(WebhookTest, A500FailsIntoRetryWithStatusAndBodyExcerpt) {
  receiver_.SetHandler([](const TestHttpServer::Request&) {
    return TestHttpServer::Response{.status = 500,
                                    .body = "database down " + std::string(2000, 'x')};
  });
  const Task t = AddHook({.url = receiver_.url() + "/hook"});
  const Task after = AwaitSettled(t.id);
  EXPECT_EQ(after.state, TaskState::kScheduled);
  EXPECT_EQ(after.attempt, 1);
  ASSERT_TRUE(after.last_error.has_value());
  EXPECT_THAT(*after.last_error, StartsWith("HTTP 500: database down xxx"));
  EXPECT_LE(after.last_error->size(), std::string("HTTP 500: ").size() + 512);
  EXPECT_EQ(after.last_response, after.last_error);

  // The retry delivers again once it is due, and a 200 then completes it.
  receiver_.SetHandler([](const TestHttpServer::Request&) {
    return TestHttpServer::Response{.body = R"({"ok":true})"};
  });
  clock_.Advance(2h);  // past any backoff
  EXPECT_TRUE(Eventually([&] { return engine_->Get(t.id)->state == TaskState::kSucceeded; }));
  EXPECT_EQ(engine_->Get(t.id)->attempt, 2);
  EXPECT_EQ(engine_->Get(t.id)->last_response, R"(HTTP 200: {"ok":true})");
}

TEST_F(WebhookTest, ATimeoutFailsTheAttempt) {
  receiver_.HoldNextRequest();
  const Task t = AddHook({.url = receiver_.url() + "/slow", .timeout = 50ms});
  ASSERT_TRUE(receiver_.AwaitHeldRequest());
  const Task after = AwaitSettled(t.id);
  receiver_.Release();
  EXPECT_EQ(after.state, TaskState::kScheduled);
  EXPECT_THAT(after.last_error.value_or(""), HasSubstr("timed out after 50 ms"));
}

TEST_F(WebhookTest, ARefusedConnectionFailsTheAttempt) {
  uint16_t closed_port = 0;
  {
    TestHttpServer gone;
    closed_port = gone.port();
  }
  const Task t = AddHook({.url = "http://127.0.0.1:" + std::to_string(closed_port) + "/"});
  const Task after = AwaitSettled(t.id);
  EXPECT_EQ(after.state, TaskState::kScheduled);
  EXPECT_THAT(after.last_error.value_or(""), HasSubstr("connecting"));
}

TEST_F(WebhookTest, ATaskWithoutTargetInAWebhookQueueIsFailedNotStarved) {
  auto plain = engine_->Enqueue({.queue = "hooks", .max_attempts = 1});
  ASSERT_TRUE(plain.ok());
  deliverer_->Serve("hooks");
  const Task after = AwaitSettled(plain->id);
  EXPECT_EQ(after.state, TaskState::kDead);
  EXPECT_THAT(after.last_error.value_or(""), HasSubstr("no target"));
}

TEST_F(WebhookTest, DeliveriesRunConcurrentlyUpToTheLimit) {
  receiver_.HoldNextRequest();
  const Task slow = AddHook({.url = receiver_.url() + "/slow"});
  ASSERT_TRUE(receiver_.AwaitHeldRequest());
  // The second delivery goes out while the first is still waiting.
  const Task fast = AddHook({.url = receiver_.url() + "/fast"});
  EXPECT_EQ(AwaitSettled(fast.id).state, TaskState::kSucceeded);
  EXPECT_EQ(engine_->Get(slow.id)->state, TaskState::kRunning);
  receiver_.Release();
  EXPECT_EQ(AwaitSettled(slow.id).state, TaskState::kSucceeded);
}

TEST_F(WebhookTest, StopInterruptsADeliveryAndLeavesTheTaskDueAgain) {
  receiver_.HoldNextRequest();
  // The longest timeout a target may have, so that a Stop() that waits for
  // the delivery instead of interrupting it fails rather than passes slowly.
  // Stop() used to wait out the timeout (10 s by default) in about one run
  // in ten, when it came after the request was written but before the read
  // began: cancelling the socket found no operation to cancel.
  const Task t = AddHook({.url = receiver_.url() + "/slow", .timeout = 5min});
  ASSERT_TRUE(receiver_.AwaitHeldRequest());
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    deliverer_->Stop();
    stopped = true;
  });
  EXPECT_TRUE(Eventually([&] { return stopped.load(); },
                         "Stop() to interrupt the delivery in flight", 30s));
  receiver_.Release();  // also ends a Stop() that waits for the answer
  stopper.join();
  const Task after = *engine_->Get(t.id);
  EXPECT_EQ(after.state, TaskState::kScheduled);
  EXPECT_EQ(after.run_at, clock_.Now());
  EXPECT_THAT(after.last_error.value_or(""), HasSubstr("interrupted"));
}

// --- what a receiver can verify ----------------------------------------------

constexpr std::string_view kSecretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr std::string_view kSecretB = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
constexpr std::string_view kSecretOther = "whsec_3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs=";

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t end = std::min(text.find(' ', i), text.size());
    out.push_back(text.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

// Whether `request` carries a signature made with `secret`, as a receiver
// holding only that secret checks it.
bool SignedWith(const TestHttpServer::Request& request, std::string_view secret) {
  Result<std::string> key = DecodeWebhookSecret(secret);
  const auto id = request.Header("webhook-id");
  const auto timestamp = request.Header("webhook-timestamp");
  const auto signature = request.Header("webhook-signature");
  if (!key.ok() || !id || !timestamp || !signature) return false;
  const std::string expected = WebhookSignature({*key}, *id, std::stoll(*timestamp), request.body);
  const std::vector<std::string> parts = Split(*signature);
  return std::find(parts.begin(), parts.end(), expected) != parts.end();
}

TEST_F(WebhookTest, DeliveriesAreSignedWithEveryActiveSecretOfTheirQueue) {
  // Rotation in progress for "hooks": both of its secrets sign; the "*"
  // secret is for other queues.
  WebhookSecretRegistry secrets(
      *WebhookSecrets::Parse("* " + std::string(kSecretOther) + "\nhooks " + std::string(kSecretA) +
                                 "\nhooks " + std::string(kSecretB) + "\n",
                             "test"));
  Restart({.concurrency = 2, .secrets = &secrets});
  AnswerAll(500, "not yet");
  const Task t =
      AddHook({.url = receiver_.url() + "/hook"}, R"({"share":42})", "share:42", "customer:7");
  ASSERT_EQ(AwaitSettled(t.id).state, TaskState::kScheduled);
  AnswerAll(204);
  clock_.Advance(2h);  // past any backoff
  ASSERT_TRUE(Eventually([&] { return engine_->Get(t.id)->state == TaskState::kSucceeded; }));

  const auto requests = receiver_.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (size_t i = 0; i < requests.size(); ++i) {
    const TestHttpServer::Request& r = requests[i];
    SCOPED_TRACE("attempt " + std::to_string(i + 1));
    EXPECT_TRUE(SignedWith(r, kSecretA));
    EXPECT_TRUE(SignedWith(r, kSecretB));
    EXPECT_FALSE(SignedWith(r, kSecretOther));
    EXPECT_EQ(Split(*r.Header("webhook-signature")).size(), 2u);
    EXPECT_THAT(r.Header("webhook-signature").value_or(""), StartsWith("v1,"));
    EXPECT_EQ(r.Header("chronoq-task-id"), "share:42");
    EXPECT_EQ(r.Header("chronoq-attempt"), std::to_string(i + 1));
    EXPECT_EQ(r.Header("chronoq-queue"), "hooks");
    EXPECT_EQ(r.Header("chronoq-key"), "customer:7");
    EXPECT_EQ(r.Header("chronoq-schedule"), std::nullopt);
    EXPECT_EQ(r.Header("chronoq-occurrence"), std::nullopt);
  }
  // One message, two attempts: the same id, each attempt's own time.
  EXPECT_THAT(requests[0].Header("webhook-id").value_or(""),
              ::testing::MatchesRegex("msg_[0-9a-f]{16}"));
  EXPECT_EQ(requests[0].Header("webhook-id"), requests[1].Header("webhook-id"));
  EXPECT_EQ(requests[1].Header("webhook-timestamp"),
            std::to_string(
                std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch())
                    .count()));
  EXPECT_NE(requests[0].Header("webhook-timestamp"), requests[1].Header("webhook-timestamp"));
}

TEST_F(WebhookTest, AReusedIdIsANewMessage) {
  const Task first = AddHook({.url = receiver_.url() + "/hook"}, "{}", "share:42");
  ASSERT_EQ(AwaitSettled(first.id).state, TaskState::kSucceeded);
  const Task second = AddHook({.url = receiver_.url() + "/hook"}, "{}", "share:42");
  ASSERT_EQ(AwaitSettled(second.id).state, TaskState::kSucceeded);
  const auto requests = receiver_.requests();
  EXPECT_NE(requests[0].Header("webhook-id"), requests[1].Header("webhook-id"));
  // Without secrets the deliveries go unsigned, but still say who they are.
  EXPECT_EQ(requests[0].Header("webhook-signature"), std::nullopt);
  EXPECT_TRUE(requests[0].Header("webhook-timestamp").has_value());
}

TEST_F(WebhookTest, AnOccurrenceNamesItsScheduleAndInstant) {
  auto schedule = engine_->CreateSchedule({.name = "nightly",
                                           .queue = "hooks",
                                           .every = 24h,
                                           .target = WebhookTarget{.url = receiver_.url()}});
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  ASSERT_TRUE(schedule->next_task_id.has_value());
  const std::string id = *schedule->next_task_id;
  deliverer_->Serve("hooks");
  ASSERT_TRUE(receiver_.AwaitRequests(1));
  const auto r = receiver_.requests().front();
  EXPECT_EQ(r.Header("chronoq-task-id"), id);
  EXPECT_EQ(r.Header("chronoq-schedule"), "nightly");
  EXPECT_EQ(r.Header("chronoq-occurrence"), id.substr(id.find('@') + 1));
  EXPECT_EQ(r.Header("chronoq-key"), std::nullopt);
}

// --- what an answer does ------------------------------------------------------

TEST_F(WebhookTest, A410GoneCancelsTheTaskWithTheReason) {
  AnswerAll(410, "no such share");
  const Task t = AddHook({.url = receiver_.url() + "/hook"});
  const Task after = AwaitSettled(t.id);
  EXPECT_EQ(after.state, TaskState::kCancelled);
  EXPECT_EQ(after.attempt, 1);
  EXPECT_THAT(after.last_error.value_or(""), StartsWith("HTTP 410: no such share"));
  EXPECT_THAT(after.last_error.value_or(""), HasSubstr("cancelled"));
  EXPECT_EQ(after.last_response, "HTTP 410: no such share");
  EXPECT_EQ(engine_->GetQueue("hooks")->counts[static_cast<size_t>(TaskState::kCancelled)], 1);
}

TEST_F(WebhookTest, AFinalStatusOfTheQueueMakesTheTaskDeadAtOnce) {
  auto q = engine_->ConfigureQueue("hooks", {.final_statuses = std::vector<int>{422, 404}});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->settings.final_statuses, (std::vector<int>{404, 422}));  // kept sorted
  AnswerAll(404, "unknown share");
  const Task gone = AddHook({.url = receiver_.url() + "/hook"});
  const Task dead = AwaitSettled(gone.id);
  EXPECT_EQ(dead.state, TaskState::kDead);
  EXPECT_EQ(dead.attempt, 1);
  EXPECT_EQ(dead.max_attempts, 25);
  EXPECT_EQ(dead.last_error, "HTTP 404: unknown share");
  // A status the queue does not list retries as before.
  AnswerAll(500);
  const Task retried = AddHook({.url = receiver_.url() + "/hook"});
  EXPECT_EQ(AwaitSettled(retried.id).state, TaskState::kScheduled);
}

TEST_F(WebhookTest, FinalStatusesAreValidated) {
  auto error = [&](std::vector<int> statuses) {
    auto q = engine_->ConfigureQueue("hooks", {.final_statuses = std::move(statuses)});
    return q.ok() ? std::string("accepted") : q.status().ToString();
  };
  EXPECT_THAT(error({404, 200}), HasSubstr("final_statuses[1]"));
  EXPECT_THAT(error({404, 200}), HasSubstr("between 300 and 599"));
  EXPECT_THAT(error({410}), HasSubstr("410 Gone always cancels"));
  EXPECT_THAT(error({404, 404}), HasSubstr("404 is listed twice"));
  EXPECT_THAT(error(std::vector<int>(33, 500)), HasSubstr("more than 32"));
  EXPECT_FALSE(engine_->GetQueue("hooks").ok());  // nothing was created
  EXPECT_EQ(error({}), "accepted");
}

TEST_F(WebhookTest, RetryAfterOnA503SetsTheNextAttempt) {
  AnswerAll(503, "busy", {{"Retry-After", "120"}});
  const Task t = AddHook({.url = receiver_.url() + "/hook"});
  const Task after = AwaitSettled(t.id);
  EXPECT_EQ(after.state, TaskState::kScheduled);
  EXPECT_EQ(after.run_at, clock_.Now() + 120s);

  // Not a moment before: one second short, nothing goes out; then it does.
  AnswerAll(200);
  clock_.Advance(119s);
  engine_->Sync();
  EXPECT_EQ(engine_->Get(t.id)->state, TaskState::kScheduled);
  EXPECT_EQ(receiver_.requests().size(), 1u);
  clock_.Advance(1s);
  EXPECT_TRUE(Eventually([&] { return engine_->Get(t.id)->state == TaskState::kSucceeded; }));
  EXPECT_EQ(receiver_.requests().size(), 2u);
}

TEST_F(WebhookTest, RetryAfterOnA429MayBeAnHttpDate) {
  const Timestamp at = clock_.Now() + 1h;
  // An HTTP-date has whole seconds.
  const Timestamp whole =
      Timestamp(std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()));
  const std::time_t tt =
      std::chrono::duration_cast<std::chrono::seconds>(whole.time_since_epoch()).count();
  char date[64];
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  AnswerAll(429, "slow down", {{"Retry-After", date}});
  const Task t = AddHook({.url = receiver_.url() + "/hook"});
  const Task after = AwaitSettled(t.id);
  EXPECT_EQ(after.state, TaskState::kScheduled);
  EXPECT_EQ(after.run_at, whole);
  EXPECT_EQ(after.last_error, "HTTP 429: slow down");
}

// --- connections --------------------------------------------------------------

TEST_F(WebhookTest, DeliveriesToOneHostReuseTheirConnections) {
  constexpr int kTasks = 40;
  std::vector<Task> tasks;
  for (int i = 0; i < kTasks; ++i) tasks.push_back(AddHook({.url = receiver_.url() + "/hook"}));
  for (const Task& t : tasks) EXPECT_EQ(AwaitSettled(t.id).state, TaskState::kSucceeded);
  std::set<int> connections;
  for (const auto& r : receiver_.requests()) connections.insert(r.connection);
  // At most one per delivery in flight (concurrency 2), not one per task.
  EXPECT_LE(connections.size(), 2u);
  EXPECT_EQ(receiver_.requests().size(), static_cast<size_t>(kTasks));
}

TEST_F(WebhookTest, BatchedClaimsDeliverAndSettleEveryTaskOfTheBatch) {
  Restart({.concurrency = 4, .claim_batch = 4});  // one loop claiming four at a time
  receiver_.SetHandler([](const TestHttpServer::Request& r) {
    return TestHttpServer::Response{.status = r.target == "/fail" ? 500 : 200};
  });
  std::vector<Task> tasks;
  for (int i = 0; i < 10; ++i) {
    tasks.push_back(AddHook({.url = receiver_.url() + (i == 3 ? "/fail" : "/ok")}));
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    EXPECT_EQ(AwaitSettled(tasks[i].id).state,
              i == 3 ? TaskState::kScheduled : TaskState::kSucceeded)
        << i;
  }
  EXPECT_EQ(receiver_.requests().size(), 10u);
}

TEST_F(WebhookTest, AConnectionTheReceiverClosedIsNotReused) {
  const Task first = AddHook({.url = receiver_.url() + "/hook"});
  ASSERT_EQ(AwaitSettled(first.id).state, TaskState::kSucceeded);
  receiver_.CloseConnections();  // as a server whose keep-alive timeout passed
  const Task second = AddHook({.url = receiver_.url() + "/hook"});
  EXPECT_EQ(AwaitSettled(second.id).state, TaskState::kSucceeded);
  const auto requests = receiver_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[0].connection, requests[1].connection);
}

TEST_F(WebhookTest, WithoutIdleConnectionsEachDeliveryOpensItsOwn) {
  Restart({.concurrency = 1, .max_idle_per_host = 0});
  const Task a = AddHook({.url = receiver_.url() + "/a"});
  ASSERT_EQ(AwaitSettled(a.id).state, TaskState::kSucceeded);
  const Task b = AddHook({.url = receiver_.url() + "/b"});
  ASSERT_EQ(AwaitSettled(b.id).state, TaskState::kSucceeded);
  const auto requests = receiver_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[0].connection, requests[1].connection);
  EXPECT_EQ(requests[0].Header("connection"), "close");
}

// A receiver that counts the requests it holds unanswered at once: each
// answer waits for the test's Answer(). Plain blocking sockets, a thread per
// connection; keep-alive.
class GatedReceiver {
 public:
  GatedReceiver() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(listener_, 64);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~GatedReceiver() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    acceptor_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int held() {
    std::lock_guard lock(mu_);
    return held_;
  }
  int peak() {
    std::lock_guard lock(mu_);
    return peak_;
  }
  // Lets one held request be answered.
  void Answer() {
    {
      std::lock_guard lock(mu_);
      ++permits_;
    }
    cv_.notify_all();
  }

 private:
  void Accept() {
    for (;;) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard lock(mu_);
      if (stopping_) {
        close(fd);
        return;
      }
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  void Serve(int fd) {
    std::string in;
    char buf[4096];
    for (;;) {
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
      }
      size_t length = 0;
      if (size_t at = in.find("ontent-Length: "); at != std::string::npos && at < end) {
        length = std::stoul(in.substr(at + 15));
      }
      while (in.size() < end + 4 + length) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
      }
      in.erase(0, end + 4 + length);
      {
        std::unique_lock lock(mu_);
        peak_ = std::max(peak_, ++held_);
        // Bounded: a test that fails early must not hang here.
        cv_.wait_for(lock, test::kGiveUpAfter, [&] { return permits_ > 0 || stopping_; });
        if (permits_ > 0) --permits_;
        --held_;
      }
      const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      if (write(fd, answer.data(), answer.size()) < 0) return;
    }
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  std::vector<int> fds_;
  int held_ = 0;
  int peak_ = 0;
  int permits_ = 0;
  bool stopping_ = false;
};

TEST_F(WebhookTest, ThePerHostLimitIsNeverExceeded) {
  constexpr int kLimit = 2;
  constexpr int kTasks = 8;
  GatedReceiver receiver;
  // Room for every task at once, but for the host's limit.
  Restart({.concurrency = kTasks, .max_per_host = kLimit});
  std::vector<Task> tasks;
  for (int i = 0; i < kTasks; ++i) tasks.push_back(AddHook({.url = receiver.url() + "/hook"}));
  // Each time the limit is reached, one answer goes out; were the limit not
  // kept, every task would be held at the receiver at once.
  for (int answered = 0; answered < kTasks; ++answered) {
    const int expect = std::min(kLimit, kTasks - answered);
    ASSERT_TRUE(Eventually([&] { return receiver.held() >= expect; },
                           std::to_string(expect) + " requests held"));
    receiver.Answer();
  }
  for (const Task& t : tasks) EXPECT_EQ(AwaitSettled(t.id).state, TaskState::kSucceeded);
  EXPECT_EQ(receiver.peak(), kLimit);
}

}  // namespace
}  // namespace chronoq::server
