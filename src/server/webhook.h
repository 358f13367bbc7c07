// Webhook delivery: chronoqd itself runs the tasks that carry a `target`.
//
// For every queue it serves, the deliverer keeps up to `concurrency` claims
// waiting on the engine (long polls, so an idle deliverer costs nothing).
// Each claimed task's payload is sent as the body of one HTTP(S) request to
// its target; a 2xx acknowledges the task, anything else (or a timeout, or a
// connection error) fails it into the retry policy with "HTTP <status>: <body
// excerpt>" (or the error) as last_error. Requests run on the deliverer's own
// I/O thread and never block the API.
//
// What a receiver gets besides the payload (docs/OPERATIONS.md, "Webhooks"):
// Standard Webhooks headers, signed with the queue's secrets when it has any
// (server/webhook_signing.h), and chronoq-task-id, chronoq-attempt,
// chronoq-queue, chronoq-key, chronoq-schedule and chronoq-occurrence.
//
// What an answer does besides 2xx: 410 Gone cancels the task; a status the
// queue lists in final_statuses makes it dead at once; a 429 or 503 with
// Retry-After schedules the next attempt after that wait (at most
// kMaxRetryAfter) instead of the backoff.
//
// Connections are kept alive and reused, one pool per (scheme, host, port):
// at most max_per_host requests in flight to one host (across queues), at
// most max_idle_per_host idle connections kept, each closed after
// idle_timeout unused. An idle connection that the server closed (or wrote
// to) is noticed before reuse and dropped. A request is never sent twice by
// the deliverer itself: once written, a failure fails the attempt into the
// retry policy, since the receiver may have acted on it (webhook-id lets it
// tell).
//
// A queue that holds tasks with a target is delivered by chronoqd: its tasks
// without a target are failed ("no target") rather than left to starve.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "chronoq/engine.h"

namespace chronoq::server {

class WebhookSecretRegistry;

struct WebhookOptions {
  int concurrency = 16;  // deliveries in flight per queue
  // Tasks claimed at once by each of the queue's concurrency / claim_batch
  // claim loops (1-64). Above 1, fewer engine operations per delivery (a
  // claim and its acknowledgements cover a batch), but a loop claims again
  // only once every delivery of its batch has ended: one slow target holds
  // back its batch-mates' successors.
  int claim_batch = 1;
  // The lease of a delivery; targets with a longer timeout extend it first.
  Duration lease = std::chrono::seconds(60);
  size_t excerpt_bytes = 512;  // of a failed response's body, kept in last_error
  // The secrets that sign deliveries (read for each one, so a reload applies
  // to the next); nullptr: unsigned. Must outlive the deliverer.
  const WebhookSecretRegistry* secrets = nullptr;
  // The time of webhook-timestamp and of Retry-After dates; nullptr: the
  // system clock. Must outlive the deliverer.
  Clock* clock = nullptr;
  // Requests in flight to one (scheme, host, port), all queues together
  // (1-10000); more wait for one to finish, within their timeout.
  int max_per_host = 64;
  // Idle kept-alive connections kept per host (0: none, a connection per
  // request), and how long one is kept unused. Below the usual servers'
  // keep-alive timeouts (5 s and more), so that the server rarely closes a
  // connection just as it is reused.
  int max_idle_per_host = 64;
  Duration idle_timeout = std::chrono::seconds(4);
  // Called before deliveries' outcomes go to the engine (they change its
  // counters): chronoqd's statistics sampler hears so of activity that comes
  // in no request (Api::NoteActivity). May be empty; any thread.
  std::function<void()> on_settle;
};

// A URL of a webhook target, split.
struct TargetUrl {
  bool tls = false;
  std::string host;    // without brackets for IPv6
  std::string port;    // "80"/"443" when absent
  std::string target;  // path and query, at least "/"
};
Result<TargetUrl> ParseTargetUrl(std::string_view url);

// The Host header of a request to `url` (RFC 9110 7.2): the host, in
// brackets when it is an IPv6 literal, then ":port" unless the port is the
// scheme's default (80 for http, 443 for https). "127.0.0.1:7456",
// "example.com", "[::1]:8080".
std::string HostHeader(const TargetUrl& url);

class WebhookDeliverer {
 public:
  WebhookDeliverer(Engine& engine, WebhookOptions options = {});
  ~WebhookDeliverer();  // Stop()s
  WebhookDeliverer(const WebhookDeliverer&) = delete;
  WebhookDeliverer& operator=(const WebhookDeliverer&) = delete;

  // Starts delivering the tasks of `queue`; does nothing if it already does.
  void Serve(const std::string& queue);
  // Stops claiming; deliveries in flight are abandoned and their tasks failed
  // for an immediate retry (after the restart). The engine's waiting claims
  // must be released (Engine::ReleaseWaitingClaims) for Stop to return.
  void Stop();

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace chronoq::server
