// Webhook delivery against a scripted HTTP server in the test: a 2xx
// acknowledges, a 500 or a timeout or a refused connection fails into the
// retry policy with what happened in last_error. The engine runs on the fake
// clock; only the HTTP exchange takes real (short) time.
#include "server/webhook.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/engine_fixture.h"
#include "support/eventually.h"
#include "support/test_http_server.h"
#include <strings.h>

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
    deliverer_ = std::make_unique<WebhookDeliverer>(*engine_, WebhookOptions{.concurrency = 2});
  }
  void TearDown() override {
    deliverer_.reset();  // stops before the engine goes
    engine_.reset();
  }

  Task AddHook(WebhookTarget target, std::string payload = R"({"share":42})") {
    auto t = engine_->Enqueue(
        {.queue = "hooks", .payload = std::move(payload), .target = std::move(target)});
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

}  // namespace
}  // namespace chronoq::server
