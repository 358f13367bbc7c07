// chronoqd's HTTP/1.1 transport on Boost.Beast: a few I/O threads serve every
// connection asynchronously, so thousands of idle keep-alive or long-polling
// connections cost memory, not threads. Requests go to the handler (the Api); answers come
// back from the engine's loop thread and are written on the connection's
// strand.
//
// Limits: headers are read within `header_timeout` once a request starts (a
// slow client is dropped, not waited on), bodies above `max_body` get 413,
// and an idle keep-alive connection is closed after `idle_timeout`.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "chronoq/status.h"

#include "server/api.h"
#include "server/tokens.h"

namespace chronoq::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 7070;  // 0 picks a free port
  // When set, every request but /healthz and the dashboard's files needs
  // "Authorization: Bearer <secret>" of one of its tokens, with a scope that
  // covers the route's (RequestHandler::RequiredScope): else 401, or 403
  // insufficient_scope. Must outlive the server.
  const TokenRegistry* tokens = nullptr;
  // Also accepted where `tokens` are asked for, with scope admin: what
  // cluster nodes send on the requests they forward (chronoqd
  // --cluster-token). Empty: none.
  std::string cluster_token;
  int threads = 2;
  size_t max_body = 1 << 20;
  size_t max_header = 16 << 10;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds idle_timeout{120'000};
  // Connections open at once; more wait in the listen backlog until one
  // ends. Each holds a descriptor: chronoqd sets this below its open-file
  // limit, so that a flood of connections never leaves it without
  // descriptors for its store and webhooks. 0: no limit.
  size_t max_connections = 0;
};

// Whether a request is a browser page of another origin trying to change
// chronoqd's state (a cross-site request forgery, which a bearer token does
// not stop when chronoqd has none): a method other than GET, HEAD or
// OPTIONS whose Sec-Fetch-Site is not same-origin (another port of the same
// host is "same-site"), or whose Origin is not this server's own
// (http://<Host>). Clients that are not browsers send neither header.
bool CrossSiteWrite(std::string_view method, std::string_view origin, std::string_view host,
                    std::string_view fetch_site);

class HttpServer {
 public:
  HttpServer(ServerOptions options, RequestHandler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the I/O threads; an error names the address.
  Status Start();
  // The bound port (useful with port 0).
  uint16_t port() const;
  // Graceful stop: no new connections, idle connections close, requests in
  // flight are answered (with Connection: close), then the threads end.
  // `before_wait` runs once accepting stopped, e.g. to release long polls.
  void Stop(const std::function<void()>& before_wait);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chronoq::server
