// chronoqd's HTTP/1.1 transport on Boost.Beast: a few I/O threads serve every
// connection asynchronously, so thousands of idle keep-alive or long-polling
// connections cost memory, not threads. Requests go to the handler (the Api); answers come
// back from the engine's loop thread and are written on the connection's
// strand.
//
// Limits: headers are read within `header_timeout` once a request starts (a
// slow client is dropped, not waited on), bodies above `max_body` get 413,
// and an idle keep-alive connection is closed after `idle_timeout`.
//
// TLS: with a certificate and key (ServerOptions::tls_cert_file and
// tls_key_file, chronoqd --tls-cert and --tls-key) every connection is TLS,
// 1.2 or later, through OpenSSL; the handshake must end within
// `header_timeout` of the connection, or it is closed, so a client that
// connects and says nothing does not hold a connection slot; one that speaks
// plain HTTP to it is closed. Without them the connections are plain HTTP,
// served by the same code instantiated for a plain stream (no per-request
// cost for the option).
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
  // PEM files: the server's certificate (followed by any intermediate
  // certificates) and its private key, not encrypted. Both set: TLS on every
  // connection; both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Whether the TLS files of `options` can serve: both or neither given, each
// readable and PEM, the key the certificate's. Errors are InvalidArgument
// naming the flag ("tls-cert" or "tls-key") and the reason, with OpenSSL's.
// HttpServer::Start() checks the same; this lets chronoqd say so before it
// opens its store.
Status CheckTls(const ServerOptions& options);

// Whether a request is a browser page of another origin trying to change
// chronoqd's state (a cross-site request forgery, which a bearer token does
// not stop when chronoqd has none): a method other than GET, HEAD or
// OPTIONS whose Sec-Fetch-Site is not same-origin (another port of the same
// host is "same-site"), or whose Origin is not this server's own: with `tls`
// (chronoqd serves TLS itself) only https://<Host>; without, http://<Host>
// or https://<Host> (a proxy in front of it may end TLS). Clients that are
// not browsers send neither header.
bool CrossSiteWrite(std::string_view method, std::string_view origin, std::string_view host,
                    std::string_view fetch_site, bool tls = false);

class HttpServer {
 public:
  HttpServer(ServerOptions options, RequestHandler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files if any (errors as CheckTls's), binds and starts the
  // I/O threads; an error names the address.
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
