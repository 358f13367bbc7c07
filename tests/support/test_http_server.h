// TestHttpServer: a scripted HTTP/1.1 server on 127.0.0.1 for tests.
//
// It listens on an ephemeral port (port 0), serves on its own thread, records
// every request (method, target, headers, body) and answers each one with
// what the test's handler returns. It speaks keep-alive and serves several
// connections at once, so it can stand in for chronoqd (CLI tests) or for a
// webhook receiver (delivery tests).
//
//   test::TestHttpServer server([](const test::TestHttpServer::Request& req) {
//     return test::TestHttpServer::Response{.status = 201, .body = R"({"id":"a"})"};
//   });
//   Send(server.url() + "/v1/tasks");               // "http://127.0.0.1:<port>/v1/tasks"
//   ASSERT_EQ(server.requests().size(), 1u);
//   EXPECT_EQ(server.requests()[0].target, "/v1/tasks");
//
// To look at the world while a request is in flight (timeouts, retries),
// hold its answer back instead of sleeping:
//
//   server.HoldNextRequest();
//   std::thread client([&] { Send(...); });         // blocks: no answer yet
//   ASSERT_TRUE(server.AwaitHeldRequest());          // it arrived, unanswered
//   ...                                              // check what happens meanwhile
//   server.Release();                                // the answer goes out now
//   client.join();
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chronoq::test {

// Thread-safe: every method may be called from any thread while the server
// thread serves.
class TestHttpServer {
 public:
  struct Request {
    std::string method;  // "GET", "POST", ...
    std::string target;  // as sent, still percent-encoded: "/v1/tasks/a%3Ab?x=1"
    std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
    std::string body;
    int connection = 0;  // which TCP connection, from 1 in accept order

    // The first header named `name` (any case), or nullopt.
    std::optional<std::string> Header(std::string_view name) const;
  };

  struct Response {
    int status = 200;
    std::string body = "{}";
    std::string content_type = "application/json";             // empty: no Content-Type
    std::vector<std::pair<std::string, std::string>> headers;  // extra headers
    bool close = false;  // answer with "Connection: close" and close the connection
    // No answer at all: the connection stays open and silent until the
    // server goes (a receiver that hangs).
    bool silent = false;
    // No answer: the connection is closed once the request has been read
    // (a server that crashed while handling it). The request is recorded.
    bool drop = false;
  };

  // Runs on the server thread, one request at a time; must not throw.
  using Handler = std::function<Response(const Request&)>;

  // Starts listening and serving. No handler: every request gets 200 "{}".
  explicit TestHttpServer(Handler handler = {});
  // Stops serving and closes every connection. Held answers are never sent.
  ~TestHttpServer();
  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  uint16_t port() const;
  // "http://127.0.0.1:<port>".
  std::string url() const;

  // Replaces the handler for the requests that arrive from now on.
  void SetHandler(Handler handler);

  // Every request received so far, in arrival order.
  std::vector<Request> requests() const;
  // Blocks until at least `n` requests have arrived; false on timeout.
  bool AwaitRequests(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // The next request to arrive is recorded and passed to the handler as
  // usual, but its answer waits until Release().
  void HoldNextRequest();
  // Blocks until the request held by HoldNextRequest() has arrived; false on
  // timeout.
  bool AwaitHeldRequest(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Sends the held answer, or cancels the hold if no request has arrived yet.
  // The answer is dropped if the client has gone meanwhile.
  void Release();

  // Closes every open connection from the server's side without a word, as
  // a server dropping idle keep-alive connections does. Returns once they are
  // closed.
  void CloseConnections();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chronoq::test
