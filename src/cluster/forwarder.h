// Forwarding: how a standby answers an API request. It sends the request, as
// it came, to the leader over HTTP/1.1 and answers with what the leader said.
//
//   cluster::Forwarder forwarder;                       // one I/O thread of its own
//   forwarder.Forward("http://10.0.0.7:7070", std::move(request), token, "node-b",
//                     std::chrono::seconds(40), std::move(respond));
//   ...
//   forwarder.DropIdle();                               // the leader changed
//
// Connections to each target are kept alive and reused; a reused one that
// the target had closed while it sat idle is replaced transparently (the
// request is sent once more on a fresh connection). Requests are
// asynchronous: a long-polling claim holds a connection, not a thread.
// Boost.Beast stays inside forwarder.cc; the design notes are at its top.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "chronoq/status.h"

#include "server/api.h"

namespace chronoq::cluster {

struct ForwarderOptions {
  int threads = 1;  // its own I/O threads
  // Giving up on a connection attempt (resolving excluded) that takes longer:
  // a leader that is down answers 503 after this, not after the request's timeout.
  std::chrono::milliseconds connect_timeout{2000};
  // Pooled connections idle longer are closed (chronoqd closes idle ones
  // after 120 s: closing ours first avoids most races with it).
  std::chrono::seconds idle_close{50};
  size_t max_idle_per_target = 64;  // more idle ones are closed
};

// Thread-safe: Forward and DropIdle may be called from any number of threads
// at once. Every answer comes from one of the forwarder's own threads.
class Forwarder {
 public:
  explicit Forwarder(ForwarderOptions options = {});
  // Stops the threads. Requests in flight are answered 503
  // (leader_unavailable) first, unless their answer already went.
  // REQUIRES: no Forward() call runs or starts meanwhile.
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Sends `request` (method, target with its query, body) to `base_url`
  // ("http://host:port", see CheckBaseUrl) with the headers Host,
  // Content-Type: application/json (when there is a body), Authorization:
  // Bearer <token> (when `token` is not empty) and X-Chronoq-Forwarded-By:
  // <from>, and answers through `respond` exactly once, from one of the
  // forwarder's threads, with the target's status, body, Content-Type (empty
  // when it sent none) and Allow header as they came. Bodies of up to 16 MiB
  // are taken from the target.
  // On failure the answer is a JSON error as chronoqd writes them:
  // - 503 "leader_unavailable": `base_url` is not usable, the connection
  //   failed (name not resolved, refused, unreachable, no connection within
  //   connect_timeout) or broke before the request was sent whole, or the
  //   forwarder is being destroyed;
  // - 504 "leader_timeout": no complete answer within `timeout` (counted
  //   from the call, connecting included);
  // - 502 "leader_bad_response": the request went out whole and the
  //   connection broke before the answer was complete, or the answer was
  //   malformed (too large, cut short). The target may have carried the
  //   request out (a leader that died between its commit and its answer), so
  //   this is not an "unavailable". A GET, HEAD, PUT or DELETE that met a
  //   broken pooled connection before any byte of the answer is sent once
  //   more on a fresh one instead.
  // Each message names `base_url`.
  void Forward(const std::string& base_url, server::ApiRequest request, const std::string& token,
               const std::string& from, std::chrono::milliseconds timeout, server::Respond respond);

  // Closes the idle pooled connections to every target (e.g. when the leader
  // changed); connections busy with a request close when it is answered,
  // instead of going back to the pool.
  void DropIdle();

  // Answers every request in flight to `base_url` at once with 502
  // leader_bad_response (it may have been carried out before the old leader
  // stopped) and the message `why`, and closes its connection:
  // the leader there was replaced (it hung or vanished), so waiting for its
  // answer (up to the request's timeout) would only hold the client up.
  void AbortTarget(const std::string& base_url, const std::string& why);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks a base URL for Forward: "http://host:port" or "http://host:port/",
// where host is a name, an IPv4 address or a bracketed IPv6 address and port
// a number from 1 to 65535 (80 when absent). No https, user information,
// path, query or fragment. Errors are InvalidArgument naming `field`.
Status CheckBaseUrl(std::string_view url, std::string_view field);

}  // namespace chronoq::cluster
