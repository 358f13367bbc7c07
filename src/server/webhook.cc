#include "server/webhook.h"

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "chronoq/time.h"

#include "common/mutex.h"
#include "server/webhook_signing.h"
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <sys/socket.h>

namespace chronoq::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

Result<TargetUrl> ParseTargetUrl(std::string_view url) {
  TargetUrl out;
  std::string_view rest;
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    out.tls = true;
    rest = url.substr(8);
  } else {
    return Status::InvalidArgument("target.url", "must start with http:// or https://");
  }
  const size_t end = std::min(rest.find('/'), rest.find('?'));
  std::string_view authority = rest.substr(0, end);
  out.target = end == std::string_view::npos ? "/" : std::string(rest.substr(end));
  if (out.target.front() == '?') out.target.insert(0, "/");
  if (const size_t hash = out.target.find('#'); hash != std::string::npos) out.target.resize(hash);
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    return Status::InvalidArgument("target.url", "credentials in the URL are not supported");
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return Status::InvalidArgument("target.url", "bad IPv6 host");
    out.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':')
      port = authority.substr(close + 2);
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return Status::InvalidArgument("target.url", "has no host");
  out.port = port.empty() ? (out.tls ? "443" : "80") : std::string(port);
  return out;
}

std::string HostHeader(const TargetUrl& url) {
  const bool ipv6 = url.host.find(':') != std::string::npos;
  std::string host = ipv6 ? "[" + url.host + "]" : url.host;
  // Receivers rebuild the URL they were called on from Host (to check a
  // signature over it, to route by virtual host); without a non-default
  // port that URL names another server.
  if (url.port != (url.tls ? "443" : "80")) host += ":" + url.port;
  return host;
}

namespace {

constexpr Duration kClaimWait = std::chrono::hours(1);
// What a delivery's task shows as its worker (Task::worker).
constexpr std::string_view kWorkerName = "chronoqd webhook delivery";
// Time a delivery's lease keeps beyond the target's timeout.
constexpr Duration kLeaseMargin = std::chrono::seconds(15);
// last_error of a delivery that Stop() interrupted or kept from starting.
constexpr std::string_view kInterrupted = "delivery interrupted: chronoqd stopped";

using Request = http::request<http::string_body>;

// What one exchange came to.
struct Outcome {
  std::string error;     // empty: a 2xx
  std::string response;  // "HTTP <status>[: <body excerpt>]" when an answer came
  std::optional<int> status;
  std::optional<Duration> retry_after;  // a 429 or 503 with a Retry-After
};

// One connection to a host, reused by one exchange after another.
struct Connection {
  Connection(asio::io_context& io, ssl::context& tls) : stream(io, tls), idle_timer(io) {}
  beast::ssl_stream<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  asio::steady_timer idle_timer;
  uint64_t idle_generation = 0;  // which stay in the pool the timer is for
  std::chrono::steady_clock::time_point idle_since;
};

// Whether an idle connection can carry a request: open, and the server has
// neither closed it nor sent anything (a stray byte, a TLS close_notify).
// A peek that would block means nothing happened.
bool Usable(Connection& c) {
  auto& socket = beast::get_lowest_layer(c.stream).socket();
  if (!socket.is_open()) return false;
  char byte;
  const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void CloseConnection(Connection& c) {
  beast::error_code ignored;
  c.idle_timer.cancel();
  beast::get_lowest_layer(c.stream).socket().close(ignored);
}

class Exchange;

// The connections and request slots of each (scheme, host, port). Confined
// to the I/O thread.
class Pool {
 public:
  Pool(asio::io_context& io, const WebhookOptions& options) : io_(io), options_(options) {}

  // Gives `exchange` a slot of `host` now (Exchange::OnSlot) or, at the
  // limit, once one frees.
  void Acquire(const std::string& host, const std::shared_ptr<Exchange>& exchange);
  // Frees a slot of `host`; the next exchange waiting for one gets it.
  void Release(const std::string& host);
  // A usable idle connection to `host`, the most recently used; nullptr if none.
  std::unique_ptr<Connection> TakeIdle(const std::string& host);
  // Keeps `c` for reuse, or closes it (the host has enough idle ones, or
  // the pool is closed).
  void PutIdle(const std::string& host, std::unique_ptr<Connection> c);
  // Closes every idle connection, and each one given back from now on.
  void Close() {
    closed_ = true;
    for (auto& [name, host] : hosts_) {
      for (auto& c : host.idle) CloseConnection(*c);
      host.idle.clear();
    }
  }

 private:
  struct Host {
    std::list<std::unique_ptr<Connection>> idle;  // most recently used last
    int in_flight = 0;
    std::deque<std::shared_ptr<Exchange>> waiting;
  };
  void Forget(std::map<std::string, Host>::iterator it) {
    if (it->second.idle.empty() && it->second.in_flight == 0 && it->second.waiting.empty()) {
      hosts_.erase(it);
    }
  }

  asio::io_context& io_;
  const WebhookOptions& options_;
  std::map<std::string, Host> hosts_;
  uint64_t next_generation_ = 1;
  bool closed_ = false;
};

// One HTTP exchange for one lease, on a pooled connection or a new one.
// Calls `done(outcome)` once.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  using Done = std::function<void(Outcome)>;

  Exchange(asio::io_context& io, ssl::context& tls, Pool& pool, TargetUrl url, Request request,
           Duration timeout, size_t excerpt_bytes, Clock& clock, Done done)
      : io_(io),
        tls_(tls),
        pool_(pool),
        resolver_(io),
        wait_timer_(io),
        url_(std::move(url)),
        host_((url_.tls ? "https://" : "http://") + url_.host + ":" + url_.port),
        request_(std::move(request)),
        timeout_(timeout),
        excerpt_bytes_(excerpt_bytes),
        clock_(clock),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout)),
        done_(std::move(done)) {}

  void Start() {
    waiting_ = true;
    wait_timer_.expires_at(deadline_);
    wait_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->waiting_) {
        self->Finish({.error = self->TimedOut("waiting for a connection")});
      }
    });
    pool_.Acquire(host_, shared_from_this());
  }

  // The exchange's turn to use its host: false if it finished meanwhile
  // (timed out waiting, or aborted), and the slot goes to the next one.
  bool OnSlot() {
    if (!done_) return false;
    waiting_ = false;
    has_slot_ = true;
    wait_timer_.cancel();
    if (FinishIfAborted()) return true;
    conn_ = pool_.TakeIdle(host_);
    if (conn_) {
      Write();
      return true;
    }
    conn_ = std::make_unique<Connection>(io_, tls_);
    if (url_.tls && !SSL_set_tlsext_host_name(conn_->stream.native_handle(), url_.host.c_str())) {
      Finish({.error = "TLS: cannot set the server name"});
      return true;
    }
    resolver_.async_resolve(
        url_.host, url_.port,
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
          if (ec) {
            return self->Finish({.error = "resolving " + self->url_.host + ": " + ec.message()});
          }
          self->Connect(results);
        });
    return true;
  }

  // Abandons the exchange (shutdown): it finishes with `reason` as soon as
  // its handler runs, without waiting for the target.
  void Abort(const std::string& reason) {
    aborted_ = reason;
    if (waiting_) return Finish({.error = reason});
    resolver_.cancel();
    // Closed, not just cancelled: cancel() only reaches an operation in
    // flight, and Abort() may run after one completed but before its handler
    // started the next (the request written, the read not yet begun; or
    // between two reads inside async_read), which would then wait for the
    // target's whole timeout (10 s by default, up to 5 min) and hold up
    // shutdown. On a closed socket the next operation fails at once.
    if (conn_) beast::get_lowest_layer(conn_->stream).close();
  }

 private:
  // Called before each step of our own: async_connect would open the closed
  // socket again, and the others need not rely on failing on it.
  bool FinishIfAborted() {
    if (aborted_.empty()) return false;
    Finish({.error = aborted_});
    return true;
  }

  void ArmTimeout() { beast::get_lowest_layer(conn_->stream).expires_at(deadline_); }

  void Connect(const tcp::resolver::results_type& results) {
    if (FinishIfAborted()) return;
    ArmTimeout();
    beast::get_lowest_layer(conn_->stream)
        .async_connect(
            results, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
              if (ec) return self->Finish({.error = self->Describe("connecting", ec)});
              beast::error_code ignored;
              beast::get_lowest_layer(self->conn_->stream)
                  .socket()
                  .set_option(tcp::no_delay(true), ignored);
              if (!self->url_.tls) return self->Write();
              if (self->FinishIfAborted()) return;
              self->ArmTimeout();
              auto& stream = self->conn_->stream;
              stream.set_verify_mode(ssl::verify_peer);
              stream.set_verify_callback(ssl::host_name_verification(self->url_.host));
              stream.async_handshake(ssl::stream_base::client, [self](beast::error_code e) {
                if (e) return self->Finish({.error = self->Describe("TLS handshake", e)});
                self->Write();
              });
            });
  }

  void Write() {
    if (FinishIfAborted()) return;
    ArmTimeout();
    auto on_written = [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Finish({.error = self->Describe("sending", ec)});
      self->Read();
    };
    if (url_.tls) {
      http::async_write(conn_->stream, request_, std::move(on_written));
    } else {
      http::async_write(beast::get_lowest_layer(conn_->stream), request_, std::move(on_written));
    }
  }

  void Read() {
    if (FinishIfAborted()) return;
    parser_.body_limit(1 << 20);
    ArmTimeout();
    auto on_read = [self = shared_from_this()](beast::error_code ec, size_t) {
      const bool have_status = self->parser_.is_header_done();
      if (ec && !(ec == http::error::body_limit && have_status)) {
        return self->Finish({.error = self->Describe("reading the response", ec)});
      }
      // A connection is reused only after a whole answer that keeps it open.
      self->reusable_ = !ec && self->parser_.keep_alive();
      const auto& res = self->parser_.get();
      const unsigned status = res.result_int();
      Outcome out{.status = static_cast<int>(status)};
      const std::string excerpt = res.body().substr(0, self->excerpt_bytes_);
      out.response = "HTTP " + std::to_string(status);
      if (!excerpt.empty()) out.response += ": " + excerpt;
      if (status < 200 || status >= 300) out.error = out.response;
      if (status == 429 || status == 503) {
        if (auto it = res.find(http::field::retry_after); it != res.end()) {
          const auto value = it->value();
          out.retry_after =
              ParseRetryAfter(std::string_view(value.data(), value.size()), self->clock_.Now());
        }
      }
      self->Finish(std::move(out));
    };
    if (url_.tls) {
      http::async_read(conn_->stream, conn_->buffer, parser_, std::move(on_read));
    } else {
      http::async_read(beast::get_lowest_layer(conn_->stream), conn_->buffer, parser_,
                       std::move(on_read));
    }
  }

  std::string TimedOut(std::string_view what) const {
    return "timed out after " +
           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count()) +
           " ms " + std::string(what);
  }

  std::string Describe(std::string_view what, beast::error_code ec) const {
    if (!aborted_.empty()) return aborted_;
    if (ec == beast::error::timeout) return TimedOut(what);
    return std::string(what) + ": " + ec.message();
  }

  void Finish(Outcome outcome) {
    if (!done_) return;
    if (!aborted_.empty() && !outcome.error.empty()) outcome = {.error = aborted_};
    waiting_ = false;
    wait_timer_.cancel();
    if (conn_) {
      if (reusable_ && aborted_.empty()) {
        pool_.PutIdle(host_, std::move(conn_));
      } else {
        CloseConnection(*conn_);
        conn_.reset();
      }
    }
    if (has_slot_) {
      has_slot_ = false;
      pool_.Release(host_);
    }
    Done done = std::move(done_);
    done_ = nullptr;
    done(std::move(outcome));
  }

  asio::io_context& io_;
  ssl::context& tls_;
  Pool& pool_;
  tcp::resolver resolver_;
  asio::steady_timer wait_timer_;
  TargetUrl url_;
  const std::string host_;  // the pool's name for the target's host
  Request request_;
  Duration timeout_;
  size_t excerpt_bytes_;
  Clock& clock_;
  std::chrono::steady_clock::time_point deadline_;
  Done done_;
  std::string aborted_;
  bool waiting_ = false;   // for a slot of its host
  bool has_slot_ = false;  // holds one
  bool reusable_ = false;  // the answer left the connection open and clean
  std::unique_ptr<Connection> conn_;
  http::response_parser<http::string_body> parser_;
};

void Pool::Acquire(const std::string& host, const std::shared_ptr<Exchange>& exchange) {
  Host& h = hosts_[host];
  if (h.in_flight >= options_.max_per_host) return h.waiting.push_back(exchange);
  ++h.in_flight;
  if (!exchange->OnSlot()) Release(host);
}

void Pool::Release(const std::string& host) {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return;
  --it->second.in_flight;
  // The next waiter starts from the loop, not from inside the finishing
  // exchange's handler (no recursion through a long line of waiters).
  asio::post(io_, [this, host] {
    auto found = hosts_.find(host);
    if (found == hosts_.end()) return;
    Host& h = found->second;
    while (!h.waiting.empty() && h.in_flight < options_.max_per_host) {
      std::shared_ptr<Exchange> next = std::move(h.waiting.front());
      h.waiting.pop_front();
      ++h.in_flight;
      if (next->OnSlot()) continue;
      --h.in_flight;
    }
    Forget(found);
  });
}

std::unique_ptr<Connection> Pool::TakeIdle(const std::string& host) {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return nullptr;
  auto& idle = it->second.idle;
  const auto now = std::chrono::steady_clock::now();
  while (!idle.empty()) {
    std::unique_ptr<Connection> c = std::move(idle.back());
    idle.pop_back();
    c->idle_timer.cancel();
    c->idle_generation = 0;
    if (now - c->idle_since < options_.idle_timeout && Usable(*c)) return c;
    CloseConnection(*c);
  }
  return nullptr;
}

void Pool::PutIdle(const std::string& host, std::unique_ptr<Connection> c) {
  auto it = hosts_.find(host);
  if (closed_ || it == hosts_.end() ||
      static_cast<int>(it->second.idle.size()) >= options_.max_idle_per_host) {
    return CloseConnection(*c);
  }
  const uint64_t generation = next_generation_++;
  c->idle_generation = generation;
  c->idle_since = std::chrono::steady_clock::now();
  c->idle_timer.expires_after(options_.idle_timeout);
  c->idle_timer.async_wait([this, host, generation](beast::error_code ec) {
    if (ec) return;
    auto found = hosts_.find(host);
    if (found == hosts_.end()) return;
    auto& idle = found->second.idle;
    auto expired = std::find_if(idle.begin(), idle.end(),
                                [&](const auto& e) { return e->idle_generation == generation; });
    if (expired == idle.end()) return;
    CloseConnection(**expired);
    idle.erase(expired);
    Forget(found);
  });
  it->second.idle.push_back(std::move(c));
}

// The request of one delivery: the target's method, URL and headers, the
// payload, and the headers of webhook.h (signed with `keys`, when any).
Request BuildWebhookRequest(const Lease& lease, const TargetUrl& url,
                            const std::vector<std::string>& keys, int64_t timestamp,
                            bool keep_alive) {
  const WebhookTarget& target = *lease.target;
  Request request;
  request.method_string(target.method);
  request.target(url.target);
  request.version(11);
  request.set(http::field::host, HostHeader(url));
  request.set(http::field::user_agent, "chronoqd");
  request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : target.headers) request.set(name, value);
  // After the target's own headers, so that none of them can stand in for
  // these.
  const std::string id = WebhookMessageId(lease.seq);
  request.set("webhook-id", id);
  request.set("webhook-timestamp", std::to_string(timestamp));
  if (!keys.empty()) {
    request.set("webhook-signature", WebhookSignature(keys, id, timestamp, lease.payload));
  }
  request.set("chronoq-task-id", lease.id);
  request.set("chronoq-attempt", std::to_string(lease.attempt));
  request.set("chronoq-queue", lease.queue);
  if (!lease.key.empty()) request.set("chronoq-key", lease.key);
  if (lease.occurrence) {
    request.set("chronoq-schedule", lease.schedule);
    request.set("chronoq-occurrence", FormatTime(*lease.occurrence));
  }
  request.keep_alive(keep_alive);
  request.body() = lease.payload;
  request.prepare_payload();
  return request;
}

}  // namespace

class WebhookDeliverer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(Engine& engine, WebhookOptions options)
      : engine_(engine),
        options_(options),
        clock_(options.clock != nullptr ? *options.clock : SystemClock()),
        tls_(ssl::context::tls_client),
        work_(asio::make_work_guard(io_)),
        pool_(io_, options_) {
    tls_.set_default_verify_paths();
  }

  void Start() {
    thread_ = std::thread([self = shared_from_this()] {
      pthread_setname_np(pthread_self(), "chronoqd-hook");
      self->io_.run();
    });
  }

  void Serve(const std::string& queue) CHRONOQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (stopping_ || !queues_.insert(queue).second) return;
    spdlog::info("delivering webhooks of queue {}", queue);
    // Each loop has up to claim_batch deliveries in flight.
    const int loops = std::max(1, options_.concurrency / std::max(1, options_.claim_batch));
    for (int i = 0; i < loops; ++i) {
      ++loops_;
      ClaimLocked(queue, {});
    }
  }

  void Stop() CHRONOQ_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    // Every claim was submitted before stopping_ was set, so this releases all.
    engine_.ReleaseWaitingClaims();
    asio::post(io_, [self = shared_from_this()] {
      // Aborting finishes some exchanges at once, which erases them.
      const auto in_flight = self->in_flight_;
      for (const auto& [raw, exchange] : in_flight) exchange->Abort(std::string(kInterrupted));
      // Idle connections would keep the loop running until they expire.
      self->pool_.Close();
    });
    {
      MutexLock lock(mu_);
      while (loops_ > 0) idle_.wait(lock.std_lock());
    }
    work_.reset();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Settles `settle` (the previous delivery's outcome, if any) and waits for
  // the next task of `queue`, in one engine call: half the engine's work per
  // delivery of an acknowledgement and a claim apart.
  void ClaimLocked(const std::string& queue, std::vector<AckRequest> settle) CHRONOQ_REQUIRES(mu_) {
    ClaimRequest request{.queue = queue,
                         .max = options_.claim_batch,
                         .lease = options_.lease,
                         .wait = kClaimWait,
                         .worker = std::string(kWorkerName),
                         .acks = std::move(settle)};
    engine_.ClaimAsync(
        std::move(request), [self = shared_from_this(), queue](Result<ClaimAnswer> answer) {
          Result<std::vector<Lease>> leases =
              answer.ok() ? Result<std::vector<Lease>>(std::move(answer->leases)) : answer.status();
          for (const Status& s : answer.ok() ? answer->acks : std::vector<Status>()) {
            if (!s.ok()) spdlog::warn("webhook of queue {}: {}", queue, s.ToString());
          }
          asio::post(self->io_, [self, queue, leases = std::move(leases)]() mutable {
            self->OnClaim(queue, std::move(leases));
          });
        });
  }

  // Settles `settle` and claims again unless stopping; otherwise only
  // settles it, then ends the loop.
  void Next(const std::string& queue, std::vector<AckRequest> settle = {}) CHRONOQ_EXCLUDES(mu_) {
    if (!settle.empty() && options_.on_settle) options_.on_settle();
    {
      MutexLock lock(mu_);
      // Under the lock: Stop() releases waiting claims once stopping_ is
      // set, so no claim may be made after that.
      if (!stopping_) return ClaimLocked(queue, std::move(settle));
    }
    if (settle.empty()) return EndLoop();
    engine_.AckManyAsync(std::move(settle),
                         [self = shared_from_this(), queue](Result<std::vector<Status>> r) {
                           for (const Status& s : r.ok() ? *r : std::vector<Status>{r.status()}) {
                             if (!s.ok()) {
                               spdlog::warn("webhook of queue {}: {}", queue, s.ToString());
                             }
                           }
                           asio::post(self->io_, [self] { self->EndLoop(); });
                         });
  }

  // The outcomes of one claim's deliveries, gathered to settle them with
  // the loop's next claim once the last one is known. I/O thread only.
  struct Batch {
    size_t pending = 0;
    std::vector<AckRequest> acks;
  };
  // One of the batch's deliveries ended: with `ack`, or with none (its lease
  // was lost).
  void Done(const std::string& queue, const std::shared_ptr<Batch>& batch,
            std::optional<AckRequest> ack) {
    if (ack) batch->acks.push_back(*std::move(ack));
    if (--batch->pending == 0) Next(queue, std::move(batch->acks));
  }

  void EndLoop() CHRONOQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (--loops_ == 0) idle_.notify_all();
  }

  void OnClaim(const std::string& queue, Result<std::vector<Lease>> leases) {
    if (!leases.ok()) {
      // The store failed or the engine is stopping: try again in a second.
      spdlog::warn("webhooks of queue {}: claim failed: {}", queue, leases.status().ToString());
      auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(1));
      timer->async_wait(
          [self = shared_from_this(), queue, timer](beast::error_code) { self->Next(queue); });
      return;
    }
    if (leases->empty()) return Next(queue);
    auto batch = std::make_shared<Batch>();
    batch->pending = leases->size();
    for (Lease& lease : *leases) Start(queue, std::move(lease), batch);
  }

  void Start(const std::string& queue, Lease lease, const std::shared_ptr<Batch>& batch) {
    if (!lease.target) {
      return Settle(queue, lease,
                    {.error = "no target: queue " + queue +
                              " is delivered by chronoqd because it holds tasks with a target"},
                    batch);
    }
    Result<TargetUrl> url = ParseTargetUrl(lease.target->url);
    if (!url.ok()) return Settle(queue, lease, {.error = url.status().message()}, batch);
    if (lease.target->timeout + kLeaseMargin > options_.lease) {
      // A slow target: make the lease outlast its timeout first.
      const Duration longer = lease.target->timeout + kLeaseMargin;
      engine_.ExtendAsync(lease.id, lease.token, longer,
                          [self = shared_from_this(), queue, lease, url = *url,
                           batch](Result<Timestamp> extended) mutable {
                            asio::post(self->io_,
                                       [self, queue, lease = std::move(lease), url = std::move(url),
                                        batch, ok = extended.ok()] {
                                         // Not extended: the lease is gone already, nothing to
                                         // settle.
                                         if (!ok) return self->Done(queue, batch, std::nullopt);
                                         self->Deliver(queue, lease, url, batch);
                                       });
                          });
      return;
    }
    Deliver(queue, lease, *url, batch);
  }

  void Deliver(const std::string& queue, const Lease& lease, const TargetUrl& url,
               const std::shared_ptr<Batch>& batch) {
    // A lease that came (or was extended) after Stop() swept in_flight_
    // would start an exchange nothing aborts, and Stop() would wait for it.
    if (Stopping()) return Settle(queue, lease, {.error = std::string(kInterrupted)}, batch);
    std::shared_ptr<const WebhookSecrets> secrets;
    if (options_.secrets != nullptr) secrets = options_.secrets->Current();
    static const std::vector<std::string> kUnsigned;
    const int64_t timestamp =
        std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
    Request request = BuildWebhookRequest(lease, url, secrets ? secrets->KeysFor(queue) : kUnsigned,
                                          timestamp, options_.max_idle_per_host > 0);
    // The completion unregisters the exchange, whose address it learns after
    // construction.
    auto slot = std::make_shared<Exchange*>(nullptr);
    auto exchange = std::make_shared<Exchange>(
        io_, tls_, pool_, url, std::move(request), lease.target->timeout, options_.excerpt_bytes,
        clock_, [self = shared_from_this(), queue, lease, slot, batch](Outcome outcome) {
          self->in_flight_.erase(*slot);
          self->Settle(queue, lease, std::move(outcome), batch);
        });
    *slot = exchange.get();
    in_flight_.emplace(exchange.get(), exchange);
    exchange->Start();
  }

  // Acknowledges (no error) or fails the lease, keeping the response on the
  // task, with the batch's next claim. A 410 cancels the task; the engine
  // makes it dead at once when the queue lists the status in final_statuses.
  void Settle(const std::string& queue, const Lease& lease, Outcome outcome,
              const std::shared_ptr<Batch>& batch) {
    AckRequest ack{.id = lease.id, .token = lease.token, .response = std::move(outcome.response)};
    if (!outcome.error.empty()) {
      ack.failure = AckFailure{.error = std::move(outcome.error),
                               .retry_after = outcome.retry_after,
                               .cancel = outcome.status == 410,
                               .http_status = outcome.status};
      // An interrupted delivery is due again at once (after the restart).
      if (Stopping()) ack.failure->retry_after = Duration::zero();
      if (ack.failure->cancel) ack.failure->error += " (the target is gone: task cancelled)";
    }
    Done(queue, batch, std::move(ack));
  }

  bool Stopping() CHRONOQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stopping_;
  }

  Engine& engine_;
  const WebhookOptions options_;
  Clock& clock_;
  asio::io_context io_;
  ssl::context tls_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  Pool pool_;  // I/O thread only
  std::thread thread_;
  std::map<Exchange*, std::shared_ptr<Exchange>> in_flight_;  // I/O thread only

  Mutex mu_;
  std::condition_variable idle_;
  std::set<std::string> queues_ CHRONOQ_GUARDED_BY(mu_);
  bool stopping_ CHRONOQ_GUARDED_BY(mu_) = false;
  int loops_ CHRONOQ_GUARDED_BY(mu_) = 0;  // claim loops running
};

WebhookDeliverer::WebhookDeliverer(Engine& engine, WebhookOptions options)
    : impl_(std::make_shared<Impl>(engine, options)) {
  impl_->Start();
}

WebhookDeliverer::~WebhookDeliverer() { Stop(); }

void WebhookDeliverer::Serve(const std::string& queue) { impl_->Serve(queue); }

void WebhookDeliverer::Stop() { impl_->Stop(); }

}  // namespace chronoq::server
