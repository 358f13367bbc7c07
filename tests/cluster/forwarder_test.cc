// The Forwarder against a scripted HTTP server standing in for the leader:
// what arrives there, what comes back, which connection carries it, and the
// answers when the leader is down, slow, or closes connections under us.
// Nothing sleeps: waits are for answers and for requests to arrive (held
// ones with HoldNextRequest), each with a deadline.
#include "cluster/forwarder.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/answer.h"
#include "support/eventually.h"
#include "support/status_matchers.h"
#include "support/test_http_server.h"
#include <pthread.h>

namespace chronoq::cluster {
namespace {

using namespace std::chrono_literals;
using server::ApiRequest;
using server::ApiResponse;
using test::StatusIs;
using test::TestHttpServer;
using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::StartsWith;

constexpr auto kLongTimeout = std::chrono::milliseconds(30'000);

// Forwards `request` with the test's token and node name and waits for the
// answer (at most a minute). A second answer would throw on the forwarder's
// thread (the promise is satisfied) and end the test binary.
ApiResponse Send(Forwarder& forwarder, const std::string& url, ApiRequest request,
                 const std::string& token = "s3cret",
                 std::chrono::milliseconds timeout = kLongTimeout) {
  test::Answer<ApiResponse> answer;
  forwarder.Forward(url, std::move(request), token, "node-b", timeout, answer.Callback());
  return answer.Get();
}

ApiRequest Get(std::string target) { return {.method = "GET", .target = std::move(target)}; }

nlohmann::json ErrorOf(const ApiResponse& r) {
  const nlohmann::json body = nlohmann::json::parse(r.body);
  return body.at("error");
}

std::string ThreadName() {
  std::array<char, 16> name{};
  pthread_getname_np(pthread_self(), name.data(), name.size());
  return name.data();
}

std::vector<int> ConnectionsOf(const TestHttpServer& server) {
  std::vector<int> out;
  for (const TestHttpServer::Request& r : server.requests()) out.push_back(r.connection);
  return out;
}

// --- CheckBaseUrl ---------------------------------------------------------------

TEST(CheckBaseUrlTest, AcceptsHostAndPort) {
  for (const char* url :
       {"http://127.0.0.1:7070", "http://127.0.0.1:7070/", "http://node-a:1",
        "HTTP://node-a.example.com:65535", "http://[::1]:7070", "http://node-a"}) {
    EXPECT_THAT(CheckBaseUrl(url, "leader_url"), test::IsOk()) << url;
  }
}

TEST(CheckBaseUrlTest, RejectsAnythingElseNamingTheField) {
  for (const char* url : {"", "127.0.0.1:7070", "https://node-a:7070", "ftp://node-a:21", "http://",
                          "http://:7070", "http://node-a:7070/v1", "http://node-a:7070?x=1",
                          "http://node-a:7070#f", "http://user@node-a:7070", "http://node-a:0",
                          "http://node-a:65536", "http://node-a:x", "http://node-a:", "http://[::1",
                          "http://[::1]x", "http://[nope]:7070", "http://a b:7070"}) {
    const Status s = CheckBaseUrl(url, "leader_url");
    EXPECT_THAT(s, StatusIs(StatusCode::kInvalidArgument)) << url;
    EXPECT_EQ(s.field(), "leader_url") << url;
  }
  EXPECT_THAT(CheckBaseUrl("https://node-a:7070", "leader_url").message(), HasSubstr("https"));
}

// --- what goes and what comes back ---------------------------------------------

TEST(ForwarderTest, SendsMethodTargetBodyAndHeaders) {
  TestHttpServer server;
  Forwarder forwarder;
  const ApiResponse r = Send(forwarder, server.url(),
                             {.method = "POST",
                              .target = "/v1/queues/mail/claim?wait_ms=100&x=a%2Fb",
                              .body = R"({"max":2})"});
  EXPECT_EQ(r.status, 200);

  ASSERT_EQ(server.requests().size(), 1u);
  const TestHttpServer::Request got = server.requests()[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/v1/queues/mail/claim?wait_ms=100&x=a%2Fb");
  EXPECT_EQ(got.body, R"({"max":2})");
  EXPECT_THAT(got.Header("Host"), Optional("127.0.0.1:" + std::to_string(server.port())));
  EXPECT_THAT(got.Header("Content-Type"), Optional(std::string("application/json")));
  EXPECT_THAT(got.Header("Authorization"), Optional(std::string("Bearer s3cret")));
  EXPECT_THAT(got.Header("X-Chronoq-Forwarded-By"), Optional(std::string("node-b")));
}

TEST(ForwarderTest, LeavesOutAuthorizationWithoutTokenAndContentTypeWithoutBody) {
  TestHttpServer server;
  Forwarder forwarder;
  EXPECT_EQ(Send(forwarder, server.url() + "/", Get("/v1/tasks/a%3Ab"), /*token=*/"").status, 200);

  ASSERT_EQ(server.requests().size(), 1u);
  const TestHttpServer::Request got = server.requests()[0];
  EXPECT_EQ(got.method, "GET");
  EXPECT_EQ(got.target, "/v1/tasks/a%3Ab");
  EXPECT_EQ(got.body, "");
  EXPECT_EQ(got.Header("Authorization"), std::nullopt);
  EXPECT_EQ(got.Header("Content-Type"), std::nullopt);
  EXPECT_THAT(got.Header("X-Chronoq-Forwarded-By"), Optional(std::string("node-b")));
}

TEST(ForwarderTest, AnswersWithStatusBodyContentTypeAndAllowAsTheyCame) {
  TestHttpServer server([](const TestHttpServer::Request&) {
    return TestHttpServer::Response{.status = 405,
                                    .body = "not here\n",
                                    .content_type = "text/plain; charset=utf-8",
                                    .headers = {{"Allow", "GET, POST"}}};
  });
  Forwarder forwarder;
  std::string thread;
  test::Answer<ApiResponse> answer;
  forwarder.Forward(server.url(), {.method = "DELETE", .target = "/v1/tasks"}, "s3cret", "node-b",
                    kLongTimeout, [&, callback = answer.Callback()](ApiResponse r) {
                      thread = ThreadName();
                      callback(std::move(r));
                    });
  const ApiResponse r = answer.Get();
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.body, "not here\n");
  EXPECT_EQ(r.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(r.allow, "GET, POST");
  EXPECT_THAT(thread, StartsWith("chronoqd-fwd-"));  // one of the forwarder's own threads
}

TEST(ForwarderTest, ResolvesHostNames) {
  TestHttpServer server;
  Forwarder forwarder;
  const std::string url = "http://localhost:" + std::to_string(server.port());
  EXPECT_EQ(Send(forwarder, url, Get("/healthz")).status, 200);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0].Header("Host"),
              Optional("localhost:" + std::to_string(server.port())));
}

TEST(ForwarderTest, TakesBodiesUpTo16MiBAndAnswers502AboveThat) {
  const std::string big(16 << 20, 'x');
  TestHttpServer server([&](const TestHttpServer::Request& req) {
    return TestHttpServer::Response{.body = req.target == "/big" ? big : big + "x"};
  });
  Forwarder forwarder;
  const ApiResponse fits = Send(forwarder, server.url(), Get("/big"));
  EXPECT_EQ(fits.status, 200);
  EXPECT_EQ(fits.body.size(), big.size());

  // The answer had begun: the request may have been carried out.
  const ApiResponse too_big = Send(forwarder, server.url(), Get("/bigger"));
  EXPECT_EQ(too_big.status, 502);
  EXPECT_EQ(ErrorOf(too_big).at("code"), "leader_bad_response");
  EXPECT_THAT(ErrorOf(too_big).at("message").get<std::string>(), HasSubstr(server.url()));
}

// --- connections ----------------------------------------------------------------

TEST(ForwarderTest, SequentialRequestsReuseOneConnection) {
  TestHttpServer server;
  Forwarder forwarder;
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(Send(forwarder, server.url(), Get("/v1/queues")).status, 200);
  EXPECT_THAT(ConnectionsOf(server), ::testing::ElementsAre(1, 1, 1));
}

TEST(ForwarderTest, AnswerWithConnectionCloseIsNotPooled) {
  TestHttpServer server([](const TestHttpServer::Request& req) {
    return TestHttpServer::Response{.close = req.target == "/close"};
  });
  Forwarder forwarder;
  ASSERT_EQ(Send(forwarder, server.url(), Get("/close")).status, 200);
  ASSERT_EQ(Send(forwarder, server.url(), Get("/a")).status, 200);
  ASSERT_EQ(Send(forwarder, server.url(), Get("/b")).status, 200);
  EXPECT_THAT(ConnectionsOf(server), ::testing::ElementsAre(1, 2, 2));
}

TEST(ForwarderTest, ConnectionClosedByTheTargetWhileIdleIsReplaced) {
  TestHttpServer server;
  Forwarder forwarder;
  ASSERT_EQ(Send(forwarder, server.url(), Get("/a")).status, 200);
  server.CloseConnections();  // as chronoqd does with idle ones after 120 s
  EXPECT_EQ(Send(forwarder, server.url(), Get("/b")).status, 200);
  EXPECT_THAT(ConnectionsOf(server), ::testing::ElementsAre(1, 2));
}

// The target closes a pooled connection just as the request goes out on it:
// it is sent once more, on a fresh connection.
TEST(ForwarderTest, ReusedConnectionClosedBeforeAnsweringIsRetriedOnAFreshOne) {
  TestHttpServer server;
  Forwarder forwarder;
  ASSERT_EQ(Send(forwarder, server.url(), Get("/a")).status, 200);
  server.SetHandler([](const TestHttpServer::Request& req) {
    if (req.connection == 1) return TestHttpServer::Response{.silent = true};
    return TestHttpServer::Response{.status = 201, .body = R"({"fresh":true})"};
  });
  test::Answer<ApiResponse> answer;
  forwarder.Forward(server.url(), Get("/b"), "s3cret", "node-b", kLongTimeout, answer.Callback());
  ASSERT_TRUE(server.AwaitRequests(2));  // on the pooled connection, unanswered
  EXPECT_FALSE(answer.ready());
  server.CloseConnections();

  const ApiResponse r = answer.Get();
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, R"({"fresh":true})");
  EXPECT_THAT(ConnectionsOf(server), ::testing::ElementsAre(1, 1, 2));
}

// The leader got the whole request and the connection broke: it may have
// carried it out (died between its commit and its answer), so the answer
// says "may have been done" (502), not 503, which sends clients elsewhere.
// On a reused connection too, a POST that went out whole is not sent
// again: the leader may have died after carrying it out.
TEST(ForwarderTest, AReusedConnectionThatBreaksAfterAPostIsNotRetried) {
  TestHttpServer server;
  Forwarder forwarder;
  ASSERT_EQ(Send(forwarder, server.url(), Get("/a")).status, 200);
  server.SetHandler([](const TestHttpServer::Request& req) {
    if (req.connection == 1) return TestHttpServer::Response{.silent = true};
    return TestHttpServer::Response{.status = 201, .body = R"({"fresh":true})"};
  });
  test::Answer<ApiResponse> answer;
  forwarder.Forward(server.url(), {.method = "POST", .target = "/v1/tasks", .body = "{}"}, "",
                    "node-b", kLongTimeout, answer.Callback());
  ASSERT_TRUE(server.AwaitRequests(2));
  server.CloseConnections();

  const ApiResponse r = answer.Get();
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(ErrorOf(r).at("code"), "leader_bad_response");
  EXPECT_EQ(server.requests().size(), 2u) << "sent once, not again";
}

TEST(ForwarderTest, FreshConnectionClosedBeforeAnsweringIsNotRetried) {
  TestHttpServer server(
      [](const TestHttpServer::Request&) { return TestHttpServer::Response{.silent = true}; });
  Forwarder forwarder;
  test::Answer<ApiResponse> answer;
  forwarder.Forward(server.url(), Get("/a"), "s3cret", "node-b", kLongTimeout, answer.Callback());
  ASSERT_TRUE(server.AwaitRequests(1));
  server.CloseConnections();

  const ApiResponse r = answer.Get();
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(ErrorOf(r).at("code"), "leader_bad_response");
  EXPECT_THAT(ErrorOf(r).at("message").get<std::string>(), HasSubstr(server.url()));
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(ForwarderTest, DropIdleClosesPooledConnections) {
  TestHttpServer server;
  Forwarder forwarder;
  ASSERT_EQ(Send(forwarder, server.url(), Get("/a")).status, 200);
  forwarder.DropIdle();
  ASSERT_EQ(Send(forwarder, server.url(), Get("/b")).status, 200);
  EXPECT_THAT(ConnectionsOf(server), ::testing::ElementsAre(1, 2));
}

// A connection busy when DropIdle() is called (the leader changed while a
// request was in flight) is closed once answered, not pooled.
TEST(ForwarderTest, DropIdleKeepsBusyConnectionsOutOfThePool) {
  TestHttpServer server;
  Forwarder forwarder;
  server.HoldNextRequest();
  test::Answer<ApiResponse> held;
  forwarder.Forward(server.url(), Get("/a"), "s3cret", "node-b", kLongTimeout, held.Callback());
  ASSERT_TRUE(server.AwaitHeldRequest());
  forwarder.DropIdle();
  server.Release();
  ASSERT_EQ(held.Get().status, 200);
  ASSERT_EQ(Send(forwarder, server.url(), Get("/b")).status, 200);
  EXPECT_THAT(ConnectionsOf(server), ::testing::ElementsAre(1, 2));
}

TEST(ForwarderTest, PoolsNoMoreIdleConnectionsThanAllowed) {
  TestHttpServer server;
  Forwarder forwarder({.max_idle_per_target = 0});
  ASSERT_EQ(Send(forwarder, server.url(), Get("/a")).status, 200);
  ASSERT_EQ(Send(forwarder, server.url(), Get("/b")).status, 200);
  EXPECT_THAT(ConnectionsOf(server), ::testing::ElementsAre(1, 2));
}

// --- failures -------------------------------------------------------------------

TEST(ForwarderTest, TargetDownAnswers503NamingTheUrl) {
  std::string url;
  {
    TestHttpServer gone;
    url = gone.url();
  }  // nothing listens on its port any more
  Forwarder forwarder;
  const ApiResponse r = Send(forwarder, url, Get("/v1/queues"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(ErrorOf(r).at("code"), "leader_unavailable");
  EXPECT_THAT(ErrorOf(r).at("message").get<std::string>(), HasSubstr(url));
}

TEST(ForwarderTest, UnusableBaseUrlAnswers503NamingIt) {
  Forwarder forwarder;
  const ApiResponse r = Send(forwarder, "https://node-a:7070", Get("/v1/queues"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(ErrorOf(r).at("code"), "leader_unavailable");
  EXPECT_THAT(ErrorOf(r).at("message").get<std::string>(), HasSubstr("https://node-a:7070"));
}

TEST(ForwarderTest, ErrorMessagesAreEscapedJson) {
  Forwarder forwarder;
  const std::string url = "http://no\"de:7070";  // not a usable URL: named in the message
  const ApiResponse r = Send(forwarder, url, Get("/"));
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(ErrorOf(r).at("message").get<std::string>(), HasSubstr(url));
}

TEST(ForwarderTest, AnswerHeldPastTheTimeoutAnswers504) {
  TestHttpServer server;
  Forwarder forwarder;
  server.HoldNextRequest();
  test::Answer<ApiResponse> answer;
  forwarder.Forward(server.url(), Get("/v1/queues/q/claim"), "s3cret", "node-b", 200ms,
                    answer.Callback());
  // Waits for the forwarder's deadline, not for the request to arrive: on a
  // machine too loaded to send it within 200 ms the 504 is as right.
  const ApiResponse r = answer.Get();
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(ErrorOf(r).at("code"), "leader_timeout");
  EXPECT_THAT(ErrorOf(r).at("message").get<std::string>(), HasSubstr(server.url()));
  server.Release();  // too late: dropped

  // The timed-out connection was closed, not pooled.
  ASSERT_EQ(Send(forwarder, server.url(), Get("/v1/queues")).status, 200);
  const std::vector<int> connections = ConnectionsOf(server);
  EXPECT_EQ(std::count(connections.begin(), connections.end(), connections.back()), 1);
}

// --- concurrency and shutdown ----------------------------------------------------

TEST(ForwarderTest, HeldRequestDoesNotBlockAnother) {
  TestHttpServer server([](const TestHttpServer::Request& req) {
    return TestHttpServer::Response{.body = R"({"target":")" + req.target + R"("})"};
  });
  Forwarder forwarder;  // one I/O thread
  server.HoldNextRequest();
  test::Answer<ApiResponse> held;
  forwarder.Forward(server.url(), Get("/held"), "s3cret", "node-b", kLongTimeout, held.Callback());
  ASSERT_TRUE(server.AwaitHeldRequest());

  const ApiResponse other = Send(forwarder, server.url(), Get("/other"));
  EXPECT_EQ(other.body, R"({"target":"/other"})");
  EXPECT_FALSE(held.ready());

  server.Release();
  EXPECT_EQ(held.Get().body, R"({"target":"/held"})");
}

// A standby whose leader was replaced answers what still waits on the old
// one at once, rather than after the request's timeout; requests to other
// targets go on.
TEST(ForwarderTest, AbortTargetAnswersRequestsWaitingOnItWith502) {
  TestHttpServer old_leader([](const TestHttpServer::Request& req) {
    return TestHttpServer::Response{.body = R"({"target":")" + req.target + R"("})"};
  });
  TestHttpServer new_leader([](const TestHttpServer::Request& req) {
    return TestHttpServer::Response{.body = R"({"new":")" + req.target + R"("})"};
  });
  Forwarder forwarder;
  old_leader.HoldNextRequest();
  test::Answer<ApiResponse> held;
  forwarder.Forward(old_leader.url(), Get("/held"), "", "node-b", kLongTimeout, held.Callback());
  ASSERT_TRUE(old_leader.AwaitHeldRequest());
  EXPECT_FALSE(held.ready());

  forwarder.AbortTarget(new_leader.url(), "not this one");
  EXPECT_EQ(Send(forwarder, new_leader.url(), Get("/other")).body, R"({"new":"/other"})");
  EXPECT_FALSE(held.ready());

  forwarder.AbortTarget(old_leader.url(), "the leader at X was replaced");
  const ApiResponse r = held.Get();
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("leader_bad_response"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("the leader at X was replaced"), std::string::npos) << r.body;
  old_leader.Release();
}

TEST(ForwarderTest, ManyConcurrentForwardsAreEachAnsweredOnce) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  constexpr int kTotal = kThreads * kPerThread;
  TestHttpServer server([](const TestHttpServer::Request& req) {
    return TestHttpServer::Response{.body = req.body};
  });
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> calls(kTotal, 0);
  std::vector<std::string> bodies(kTotal);
  int answered = 0;
  {
    Forwarder forwarder({.threads = 2});
    std::vector<std::thread> callers;
    callers.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      callers.emplace_back([&, t] {
        for (int i = t * kPerThread; i < (t + 1) * kPerThread; ++i) {
          forwarder.Forward(server.url(),
                            {.method = "POST",
                             .target = "/v1/tasks",
                             .body = R"({"i":)" + std::to_string(i) + "}"},
                            "s3cret", "node-b", kLongTimeout, [&, i](ApiResponse r) {
                              std::lock_guard lock(mu);
                              ++calls[i];
                              bodies[i] = std::move(r.body);
                              ++answered;
                              cv.notify_all();
                            });
        }
      });
    }
    for (std::thread& c : callers) c.join();
    std::unique_lock lock(mu);
    test::WaitWithin(
        cv, lock, [&] { return answered == kTotal; }, "every answer");
  }  // the forwarder is gone: no answer can come late
  for (int i = 0; i < kTotal; ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(bodies[i], R"({"i":)" + std::to_string(i) + "}") << i;
  }
  EXPECT_EQ(server.requests().size(), static_cast<size_t>(kTotal));
}

TEST(ForwarderTest, DestroyingItAnswersRequestsInFlight) {
  TestHttpServer server;
  auto forwarder = std::make_unique<Forwarder>();
  server.HoldNextRequest();
  test::Answer<ApiResponse> answer;
  forwarder->Forward(server.url(), Get("/v1/queues/q/claim"), "s3cret", "node-b", kLongTimeout,
                     answer.Callback());
  ASSERT_TRUE(server.AwaitHeldRequest());
  ASSERT_EQ(Send(*forwarder, server.url(), Get("/other")).status, 200);  // leaves an idle one
  forwarder.reset();

  ASSERT_TRUE(answer.ready());  // before the destructor returned
  const ApiResponse r = answer.Get();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(ErrorOf(r).at("code"), "leader_unavailable");
  server.Release();
}

}  // namespace
}  // namespace chronoq::cluster
