#include "server/webhook.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/mutex.h"
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

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

// One HTTP exchange for one lease. Calls `done(error, response)` once: an
// empty error for a 2xx, else what goes into last_error; `response` is the
// status and body excerpt, when an answer came.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  using Done = std::function<void(std::string error, std::string response)>;

  Exchange(asio::io_context& io, ssl::context& tls, TargetUrl url, const Lease& lease,
           size_t excerpt_bytes, Done done)
      : resolver_(io),
        stream_(io, tls),
        url_(std::move(url)),
        target_(*lease.target),
        payload_(lease.payload),
        excerpt_bytes_(excerpt_bytes),
        deadline_(
            std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(lease.target->timeout)),
        done_(std::move(done)) {}

  void Start() {
    if (url_.tls && !SSL_set_tlsext_host_name(stream_.native_handle(), url_.host.c_str())) {
      return Finish("TLS: cannot set the server name");
    }
    resolver_.async_resolve(
        url_.host, url_.port,
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
          if (ec) return self->Finish("resolving " + self->url_.host + ": " + ec.message());
          self->Connect(results);
        });
  }

  // Abandons the exchange (shutdown): it finishes with `reason` as soon as
  // its handler runs, without waiting for the target.
  void Abort(const std::string& reason) {
    aborted_ = reason;
    resolver_.cancel();
    // Closed, not just cancelled: cancel() only reaches an operation in
    // flight, and Abort() may run after one completed but before its handler
    // started the next (the request written, the read not yet begun; or
    // between two reads inside async_read), which would then wait for the
    // target's whole timeout (10 s by default, up to 5 min) and hold up
    // shutdown. On a closed socket the next operation fails at once.
    beast::get_lowest_layer(stream_).close();
  }

 private:
  // Called before each step of our own: async_connect would open the closed
  // socket again, and the others need not rely on failing on it.
  bool FinishIfAborted() {
    if (aborted_.empty()) return false;
    Finish(aborted_);
    return true;
  }

  void ArmTimeout() { beast::get_lowest_layer(stream_).expires_at(deadline_); }

  void Connect(const tcp::resolver::results_type& results) {
    if (FinishIfAborted()) return;
    ArmTimeout();
    beast::get_lowest_layer(stream_).async_connect(
        results, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return self->Finish(self->Describe("connecting", ec));
          if (!self->url_.tls) return self->Write();
          if (self->FinishIfAborted()) return;
          self->ArmTimeout();
          self->stream_.set_verify_mode(ssl::verify_peer);
          self->stream_.set_verify_callback(ssl::host_name_verification(self->url_.host));
          self->stream_.async_handshake(ssl::stream_base::client, [self](beast::error_code e) {
            if (e) return self->Finish(self->Describe("TLS handshake", e));
            self->Write();
          });
        });
  }

  void Write() {
    if (FinishIfAborted()) return;
    request_.method_string(target_.method);
    request_.target(url_.target);
    request_.version(11);
    request_.set(http::field::host, HostHeader(url_));
    request_.set(http::field::user_agent, "chronoqd");
    request_.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : target_.headers) request_.set(name, value);
    request_.keep_alive(false);
    request_.body() = payload_;
    request_.prepare_payload();
    ArmTimeout();
    auto on_written = [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Finish(self->Describe("sending", ec));
      self->Read();
    };
    if (url_.tls) {
      http::async_write(stream_, request_, std::move(on_written));
    } else {
      http::async_write(beast::get_lowest_layer(stream_), request_, std::move(on_written));
    }
  }

  void Read() {
    if (FinishIfAborted()) return;
    parser_.body_limit(1 << 20);
    ArmTimeout();
    auto on_read = [self = shared_from_this()](beast::error_code ec, size_t) {
      const bool have_status = self->parser_.is_header_done();
      if (ec && !(ec == http::error::body_limit && have_status)) {
        return self->Finish(self->Describe("reading the response", ec));
      }
      const auto& res = self->parser_.get();
      const unsigned status = res.result_int();
      const std::string excerpt = res.body().substr(0, self->excerpt_bytes_);
      std::string response = "HTTP " + std::to_string(status);
      if (!excerpt.empty()) response += ": " + excerpt;
      if (status >= 200 && status < 300) return self->Finish("", std::move(response));
      self->Finish(response, response);
    };
    if (url_.tls) {
      http::async_read(stream_, buffer_, parser_, std::move(on_read));
    } else {
      http::async_read(beast::get_lowest_layer(stream_), buffer_, parser_, std::move(on_read));
    }
  }

  std::string Describe(std::string_view what, beast::error_code ec) const {
    if (!aborted_.empty()) return aborted_;
    if (ec == beast::error::timeout) {
      return "timed out after " +
             std::to_string(
                 std::chrono::duration_cast<std::chrono::milliseconds>(target_.timeout).count()) +
             " ms " + std::string(what);
    }
    return std::string(what) + ": " + ec.message();
  }

  void Finish(std::string error, std::string response = "") {
    if (!done_) return;
    if (!aborted_.empty() && !error.empty()) error = aborted_;
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    Done done = std::move(done_);
    done_ = nullptr;
    done(std::move(error), std::move(response));
  }

  tcp::resolver resolver_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  TargetUrl url_;
  WebhookTarget target_;
  std::string payload_;
  size_t excerpt_bytes_;
  std::chrono::steady_clock::time_point deadline_;
  Done done_;
  std::string aborted_;
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
};

}  // namespace

class WebhookDeliverer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(Engine& engine, WebhookOptions options)
      : engine_(engine),
        options_(options),
        tls_(ssl::context::tls_client),
        work_(asio::make_work_guard(io_)) {
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
    for (int i = 0; i < options_.concurrency; ++i) {
      ++loops_;
      ClaimLocked(queue);
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
      for (const auto& [raw, exchange] : self->in_flight_) {
        exchange->Abort(std::string(kInterrupted));
      }
    });
    {
      MutexLock lock(mu_);
      while (loops_ > 0) idle_.wait(lock.std_lock());
    }
    work_.reset();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Waits for the next task of `queue`.
  void ClaimLocked(const std::string& queue) CHRONOQ_REQUIRES(mu_) {
    ClaimRequest request{.queue = queue,
                         .max = 1,
                         .lease = options_.lease,
                         .wait = kClaimWait,
                         .worker = std::string(kWorkerName)};
    engine_.ClaimAsync(
        std::move(request), [self = shared_from_this(), queue](Result<ClaimAnswer> answer) {
          Result<std::vector<Lease>> leases =
              answer.ok() ? Result<std::vector<Lease>>(std::move(answer->leases)) : answer.status();
          asio::post(self->io_, [self, queue, leases = std::move(leases)]() mutable {
            self->OnClaim(queue, std::move(leases));
          });
        });
  }

  // Claims again unless stopping; ends the loop otherwise.
  void Next(const std::string& queue) CHRONOQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (!stopping_) return ClaimLocked(queue);
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
    Lease lease = std::move(leases->front());
    if (!lease.target) {
      return Settle(queue, lease,
                    "no target: queue " + queue +
                        " is delivered by chronoqd because it holds tasks with a target");
    }
    Result<TargetUrl> url = ParseTargetUrl(lease.target->url);
    if (!url.ok()) return Settle(queue, lease, url.status().message());
    if (lease.target->timeout + kLeaseMargin > options_.lease) {
      // A slow target: make the lease outlast its timeout first.
      const Duration longer = lease.target->timeout + kLeaseMargin;
      engine_.ExtendAsync(lease.id, lease.token, longer,
                          [self = shared_from_this(), queue, lease,
                           url = *url](Result<Timestamp> extended) mutable {
                            asio::post(self->io_, [self, queue, lease = std::move(lease),
                                                   url = std::move(url), ok = extended.ok()] {
                              if (!ok) return self->Next(queue);  // the lease is gone already
                              self->Deliver(queue, lease, url);
                            });
                          });
      return;
    }
    Deliver(queue, lease, *url);
  }

  void Deliver(const std::string& queue, const Lease& lease, const TargetUrl& url) {
    // A lease that came (or was extended) after Stop() swept in_flight_
    // would start an exchange nothing aborts, and Stop() would wait for it.
    if (Stopping()) return Settle(queue, lease, std::string(kInterrupted));
    // The completion unregisters the exchange, whose address it learns after
    // construction.
    auto slot = std::make_shared<Exchange*>(nullptr);
    auto exchange = std::make_shared<Exchange>(
        io_, tls_, url, lease, options_.excerpt_bytes,
        [self = shared_from_this(), queue, lease, slot](std::string error, std::string response) {
          self->in_flight_.erase(*slot);
          self->Settle(queue, lease, std::move(error), std::move(response));
        });
    *slot = exchange.get();
    in_flight_.emplace(exchange.get(), exchange);
    exchange->Start();
  }

  // Acknowledges (empty error) or fails the lease, keeping the response on
  // the task, then claims again.
  void Settle(const std::string& queue, const Lease& lease, std::string error,
              std::string response = "") {
    auto next = [self = shared_from_this(), queue](const Status& s, const std::string& id) {
      if (!s.ok()) spdlog::warn("webhook {}: {}", id, s.ToString());
      asio::post(self->io_, [self, queue] { self->Next(queue); });
    };
    if (error.empty()) {
      engine_.AckManyAsync({{lease.id, lease.token, std::move(response)}},
                           [next, id = lease.id](Result<std::vector<Status>> r) {
                             next(r.ok() ? r->front() : r.status(), id);
                           });
    } else {
      const bool interrupted = Stopping();
      engine_.FailAsync(lease.id, lease.token, std::move(error),
                        interrupted ? std::optional<Duration>(Duration::zero()) : std::nullopt,
                        std::move(response), [next, id = lease.id](Status s) { next(s, id); });
    }
  }

  bool Stopping() CHRONOQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stopping_;
  }

  Engine& engine_;
  const WebhookOptions options_;
  asio::io_context io_;
  ssl::context tls_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
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
