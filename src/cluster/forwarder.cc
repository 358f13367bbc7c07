// Forwarding, and why it is shaped so.
//
// A standby answers every API request by asking the leader. Some of those
// requests are long polls (a claim may wait 30 s for a task), so a request in
// flight must cost a socket, never a thread: every step is asynchronous, on
// a few I/O threads of the forwarder's own. As in server/http_server.cc, each
// thread runs an io_context of its own and a connection stays on the one it
// was opened on, so its handlers never run concurrently and need no strand.
// An Exchange (one forwarded request) runs on its connection's context.
//
// Connections are kept alive and pooled per target ("host:port"): a standby
// forwards a steady stream of small requests to one leader, and a new TCP
// connection per request would double their latency. The pool holds idle
// connections only (at most max_idle_per_target per target, LIFO so that
// the warmest is reused first); busy ones are owned by their Exchange, and
// there is no bound on those: a hundred waiting claims are a hundred
// connections, as they are between the workers and the leader.
//
// An idle connection is not left unwatched: a one-byte read waits on it, with
// idle_close as its timeout. It completes when the target closes the
// connection (chronoqd drops idle ones after 120 s, or on restart), when
// idle_close passes, or when a Forward takes the connection (which cancels
// it). Only in the last case is the connection still usable, so a dead one
// leaves the pool the moment it dies, at no cost while nothing happens (no
// sweeper, no polling; principle 2).
//
// That read cannot close every race: the target may close a connection just
// as we send on it. chronoqd closes only idle connections, so a reused
// connection that fails before the first byte of the answer (eof, reset,
// broken pipe) means the request was never processed, and it is sent once
// more on a fresh connection. A fresh connection that fails is not retried:
// the leader is down, or broke while answering, and the caller hears 503.
// Once a byte of the answer came, the request may have been carried out, and
// a failure is 502, never a resend.
//
// Every Exchange has one deadline (`timeout` from the Forward call), a timer
// that answers 504 and closes the connection whatever step it is in; the
// connect step also has connect_timeout, so a leader that is down (packets
// dropped) answers 503 quickly instead of holding the request to its end.
//
// Shutdown: the destructor marks the forwarder stopping (nothing new enters
// the pool), aborts every Exchange in flight on its own thread (each answers
// 503 at once and closes its socket), closes the idle connections, waits for
// the in-flight registry to drain, and only then stops the threads. So every
// accepted request is answered before ~Forwarder returns. (A host name being
// resolved when it stops holds it up until getaddrinfo returns: asio cannot
// interrupt that call. Leaders are usually named by address.)
#include "cluster/forwarder.h"

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chronoq/result.h"

#include "codec/json_codec.h"
#include "common/mutex.h"
#include "server/webhook.h"
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace chronoq::cluster {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using server::ApiResponse;
using Executor = asio::io_context::executor_type;
using Stream = beast::basic_stream<tcp, Executor, beast::unlimited_rate_policy>;
using Resolver = asio::ip::basic_resolver<tcp, Executor>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;

namespace {

// chronoqd's answers: a listing page or a batch is well under this.
constexpr uint64_t kMaxBody = 16 << 20;
constexpr uint32_t kMaxHeader = 64 << 10;

std::string ToString(beast::string_view s) { return {s.data(), s.size()}; }

struct BaseUrl {
  std::string host;  // without brackets for IPv6
  std::string port;
};

bool IsHostNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

Result<BaseUrl> ParseBaseUrl(std::string_view url, std::string_view field) {
  auto starts_with = [&](std::string_view prefix) {
    return url.size() >= prefix.size() &&
           beast::iequals(beast::string_view(url.data(), prefix.size()),
                          beast::string_view(prefix.data(), prefix.size()));
  };
  if (starts_with("https://")) {
    return Status::InvalidArgument(field, "https is not supported; use http://");
  }
  if (!starts_with("http://")) return Status::InvalidArgument(field, "must start with http://");
  std::string_view rest = url.substr(7);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#") != std::string_view::npos) {
    return Status::InvalidArgument(field, "must be http://host:port, without a path or query");
  }
  if (rest.find('@') != std::string_view::npos) {
    return Status::InvalidArgument(field, "must not contain user information");
  }
  BaseUrl out;
  std::string_view port;
  bool has_port = false;
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument(field, "unterminated [ in the host");
    }
    out.host = rest.substr(1, close - 1);
    beast::error_code ec;
    asio::ip::make_address_v6(out.host, ec);
    if (ec) return Status::InvalidArgument(field, "not an IPv6 address in [ ]");
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) {
      return Status::InvalidArgument(field, "unexpected text after the host");
    }
    has_port = !after.empty();
    if (has_port) port = after.substr(1);
  } else {
    const size_t colon = rest.find(':');
    out.host = rest.substr(0, colon);
    has_port = colon != std::string_view::npos;
    if (has_port) port = rest.substr(colon + 1);
    for (const char c : out.host) {
      if (!IsHostNameChar(c)) {
        return Status::InvalidArgument(field, "the host has a character not allowed in it");
      }
    }
  }
  if (out.host.empty()) return Status::InvalidArgument(field, "has no host");
  if (!has_port) {
    out.port = "80";
    return out;
  }
  int number = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || number < 1 ||
      number > 65535) {
    return Status::InvalidArgument(field, "the port must be a number from 1 to 65535");
  }
  out.port = std::to_string(number);
  return out;
}

// Errors that mean a reused keep-alive connection had been closed by the
// target before our request reached it: safe to send once more.
bool IsStaleConnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted;
}

ApiResponse ErrorAnswer(int status, std::string_view code, StatusCode status_code,
                        std::string message) {
  ApiResponse r;
  r.status = status;
  // ErrorBody escapes the message (it names a URL from the leadership
  // table, and carries the OS's words).
  r.body = ErrorBody(code, Status(status_code, std::move(message)));
  return r;
}

ApiResponse Unavailable(std::string message) {
  return ErrorAnswer(503, "leader_unavailable", StatusCode::kUnavailable, std::move(message));
}

// One keep-alive connection to a target. Confined to the thread of the
// io_context it was opened on; whether it is pooled is the pool's to say
// (under Shared::mu). The handler of every operation on it holds it: the
// operation writes into `buffer`, and an Exchange that fails lets go of its
// connection while an operation may still be pending.
struct Connection {
  Connection(const Executor& executor, std::string target, uint64_t opened_in)
      : stream(executor), key(std::move(target)), generation(opened_in) {
    // Beast reads into what the buffer has room for, 512 bytes when it has
    // none: an answer of a 1,000-task batch took ~550 reads (perf: 86% of a
    // forwarding standby's time in W1). Room for 64 KiB reads it in a few.
    buffer.reserve(64 * 1024);
  }

  Stream stream;
  beast::flat_buffer buffer;
  const std::string key;          // "host:port" of the target
  const uint64_t generation = 0;  // Shared::generation when the request that opened it came
  // While pooled, the read that watches it is pending. When an Exchange takes
  // it from the pool and cancels that read, the read's handler hands the
  // connection over through on_probe_end (true: still usable).
  bool probing = false;
  std::function<void(bool usable)> on_probe_end;
};

class Exchange;

// What the Exchanges share: options, the idle pool and the in-flight
// registry the destructor walks. Thread-safe.
struct Shared {
  explicit Shared(ForwarderOptions o) : options(o) {}

  // Takes the most recently pooled idle connection to `key`, or nullptr.
  std::shared_ptr<Connection> TakeIdleLocked(const std::string& key) CHRONOQ_REQUIRES(mu) {
    auto it = idle.find(key);
    if (it == idle.end()) return nullptr;
    std::shared_ptr<Connection> conn = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) idle.erase(it);
    return conn;
  }

  // Puts `conn`, which just carried a complete answer, into the pool and
  // watches it; or closes it if it may not stay. On its thread.
  void Park(std::shared_ptr<Connection> conn) CHRONOQ_EXCLUDES(mu) {
    bool keep = false;
    {
      MutexLock lock(mu);
      if (!stopping && conn->generation == generation && options.max_idle_per_target > 0) {
        std::vector<std::shared_ptr<Connection>>& list = idle[conn->key];
        keep = list.size() < options.max_idle_per_target;
        if (keep) list.push_back(conn);
      }
    }
    if (!keep) return conn->stream.close();
    // A Forward on another thread may take it from here on; its Exchange
    // runs on this thread, after this handler, so the read is in place.
    Connection& c = *conn;
    c.probing = true;
    c.stream.expires_after(options.idle_close);
    c.stream.async_read_some(
        c.buffer.prepare(1), [this, conn = std::move(conn)](const beast::error_code& ec, size_t n) {
          conn->probing = false;
          // Only a cancel (by the Exchange that took it) leaves it usable;
          // eof, a reset, idle_close or a stray byte end it.
          const bool usable =
              ec == asio::error::operation_aborted && n == 0 && conn->stream.socket().is_open();
          if (!Unpool(*conn) && conn->on_probe_end) {
            auto next = std::move(conn->on_probe_end);
            conn->on_probe_end = nullptr;
            return next(usable);
          }
          // Still pooled (it died idle), or dropped by DropIdle() or the
          // destructor, or taken by an Exchange that has not started yet
          // (which then finds it closed and opens another).
          conn->stream.close();
        });
  }

  // Removes `conn` from the pool; false if it was not there.
  bool Unpool(const Connection& conn) CHRONOQ_EXCLUDES(mu) {
    MutexLock lock(mu);
    auto it = idle.find(conn.key);
    if (it == idle.end()) return false;
    const size_t before = it->second.size();
    std::erase_if(it->second,
                  [&](const std::shared_ptr<Connection>& c) { return c.get() == &conn; });
    const bool found = it->second.size() != before;
    if (it->second.empty()) idle.erase(it);
    return found;
  }

  // Takes every idle connection out of the pool.
  std::vector<std::shared_ptr<Connection>> TakeAllIdleLocked() CHRONOQ_REQUIRES(mu) {
    std::vector<std::shared_ptr<Connection>> out;
    for (auto& [key, list] : idle) {
      for (auto& conn : list) out.push_back(std::move(conn));
    }
    idle.clear();
    return out;
  }

  // The Exchange answered: it leaves the registry.
  void Forget(Exchange* exchange) CHRONOQ_EXCLUDES(mu) {
    MutexLock lock(mu);
    in_flight.erase(exchange);
    if (stopping && in_flight.empty()) drained.notify_all();
  }

  const ForwarderOptions options;
  Mutex mu;
  std::condition_variable drained;  // in_flight became empty while stopping
  bool stopping CHRONOQ_GUARDED_BY(mu) = false;
  // DropIdle() bumps it: connections opened for requests that came before
  // are closed when they finish instead of joining the pool.
  uint64_t generation CHRONOQ_GUARDED_BY(mu) = 0;
  std::unordered_map<std::string, std::vector<std::shared_ptr<Connection>>> idle
      CHRONOQ_GUARDED_BY(mu);
  std::unordered_map<Exchange*, std::shared_ptr<Exchange>> in_flight CHRONOQ_GUARDED_BY(mu);
};

// One forwarded request, from Forward() to its answer. Confined to the
// thread of its executor; answers exactly once (Finish).
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  struct Params {
    std::string base_url;
    Result<BaseUrl> url;  // an error answers 503 at once
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    uint64_t generation = 0;
  };

  Exchange(Shared& shared, const Executor& executor, Params params, server::ApiRequest request,
           const std::string& token, const std::string& from, server::Respond respond,
           std::shared_ptr<Connection> pooled)
      : shared_(shared),
        executor_(executor),
        base_url_(std::move(params.base_url)),
        url_(std::move(params.url)),
        deadline_at_(params.deadline),
        timeout_(params.timeout),
        generation_(params.generation),
        respond_(std::move(respond)),
        resolver_(executor),
        deadline_(executor),
        conn_(std::move(pooled)) {
    if (!url_.ok()) return;
    request_.method_string(request.method);
    request_.target(request.target);
    request_.version(11);
    request_.set(http::field::host, server::HostHeader({.host = url_->host, .port = url_->port}));
    if (!token.empty()) request_.set(http::field::authorization, "Bearer " + token);
    request_.set(beast::string_view(server::kForwardedBy.data(), server::kForwardedBy.size()),
                 from);
    if (!request.body.empty()) request_.set(http::field::content_type, "application/json");
    request_.keep_alive(true);
    request_.body() = std::move(request.body);
    request_.prepare_payload();
  }

  Executor GetExecutor() const { return executor_; }

  void Start() {
    if (done_) return;  // aborted before it started
    if (!url_.ok()) {
      return Fail(Unavailable("the leader's URL " + base_url_ +
                              " is not usable: " + url_.status().message()));
    }
    deadline_.expires_at(deadline_at_);
    deadline_.async_wait([self = shared_from_this()](const beast::error_code& ec) {
      if (ec) return;  // cancelled: answered already
      self->Fail(ErrorAnswer(504, "leader_timeout", StatusCode::kDeadlineExceeded,
                             "the leader at " + self->base_url_ + " did not answer within " +
                                 std::to_string(self->timeout_.count()) + " ms"));
    });
    if (!conn_) return Resolve();
    reused_ = true;
    if (!conn_->probing) return OnPooledReady(conn_->stream.socket().is_open());
    conn_->on_probe_end = [self = shared_from_this()](bool usable) { self->OnPooledReady(usable); };
    conn_->stream.cancel();
  }

  // Answers 503 at once (the forwarder is being destroyed).
  void Abort() {
    Fail(Unavailable("this node stopped forwarding before the leader at " + base_url_ +
                     " answered"));
  }
  // Answers 502 with `why` unless answered already (AbortTarget): the
  // request may have reached the old leader, which may have carried it out.
  void Abort(const std::string& why) {
    Fail(ErrorAnswer(502, "leader_bad_response", StatusCode::kUnavailable, why));
  }
  const std::string& base_url() const { return base_url_; }

 private:
  void OnPooledReady(bool usable) {
    if (done_) return;
    if (usable) return Write();
    // It died while idle, before we sent anything: open another.
    CloseConnection();
    reused_ = false;
    Resolve();
  }

  void Resolve() {
    beast::error_code ec;
    const asio::ip::address address = asio::ip::make_address(url_->host, ec);
    if (!ec) {
      endpoints_.assign(1, tcp::endpoint(address, static_cast<uint16_t>(std::stoi(url_->port))));
      return Connect();
    }
    resolver_.async_resolve(
        url_->host, url_->port,
        [self = shared_from_this()](const beast::error_code& e,
                                    const Resolver::results_type& results) {
          if (self->done_) return;
          if (e) {
            return self->Fail(Unavailable("cannot resolve the leader at " + self->base_url_ + ": " +
                                          e.message()));
          }
          self->endpoints_.assign(results.begin(), results.end());
          self->Connect();
        });
  }

  void Connect() {
    conn_ = std::make_shared<Connection>(executor_, url_->host + ":" + url_->port, generation_);
    conn_->stream.expires_after(shared_.options.connect_timeout);
    conn_->stream.async_connect(endpoints_, [self = shared_from_this(), conn = conn_](
                                                const beast::error_code& ec, const tcp::endpoint&) {
      if (self->done_) return;
      if (ec == beast::error::timeout) {
        return self->Fail(Unavailable(
            "cannot connect to the leader at " + self->base_url_ + ": no connection within " +
            std::to_string(self->shared_.options.connect_timeout.count()) + " ms"));
      }
      if (ec) {
        return self->Fail(Unavailable("cannot connect to the leader at " + self->base_url_ + ": " +
                                      ec.message()));
      }
      beast::error_code ignored;
      self->conn_->stream.socket().set_option(tcp::no_delay(true), ignored);
      self->Write();
    });
  }

  void Write() {
    conn_->stream.expires_never();  // the deadline timer bounds the rest
    http::async_write(
        conn_->stream, request_,
        [self = shared_from_this(), conn = conn_](const beast::error_code& ec, size_t) {
          if (self->done_) return;
          if (ec && self->MaySendAgain(ec)) return self->SendAgain();
          if (ec) {
            return self->Fail(Unavailable("cannot send the request to the leader at " +
                                          self->base_url_ + ": " + ec.message()));
          }
          self->Read();
        });
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(kMaxBody);
    parser_->header_limit(kMaxHeader);
    if (request_.method() == http::verb::head) parser_->skip(true);
    // The header first: Boost 1.74's async_read parses eagerly, and its eager
    // parse drops the body_limit error a too large Content-Length raises,
    // then reads the whole body anyway. async_read_header reports it.
    http::async_read_header(
        conn_->stream, conn_->buffer, *parser_,
        [self = shared_from_this(), conn = conn_](const beast::error_code& ec, size_t) {
          if (self->done_) return;
          if (ec) return self->OnRead(ec);
          http::async_read(conn->stream, conn->buffer, *self->parser_,
                           [self, conn](const beast::error_code& e, size_t) { self->OnRead(e); });
        });
  }

  void OnRead(const beast::error_code& ec) {
    if (done_) return;
    if (ec && !parser_->got_some()) {
      // The request went out whole: the leader may have carried it out and
      // died before answering (SIGKILL between its commit and its answer).
      // Only a request that is safe to repeat is sent again; any other is
      // answered "may have been done" (502), never 503, which tells clients
      // to send it to another node.
      if (MaySendAgain(ec) && Repeatable()) return SendAgain();
      return Fail(ErrorAnswer(502, "leader_bad_response", StatusCode::kUnavailable,
                              "the leader at " + base_url_ +
                                  " closed the connection after the request was sent and "
                                  "before answering (it may have died): the request may or may "
                                  "not have been done: " +
                                  ec.message()));
    }
    if (ec) {
      return Fail(
          ErrorAnswer(502, "leader_bad_response", StatusCode::kUnavailable,
                      "the answer of the leader at " + base_url_ + " broke off: " + ec.message()));
    }
    http::response<http::string_body>& res = parser_->get();
    ApiResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    const auto content_type = res.find(http::field::content_type);
    out.content_type = content_type == res.end() ? "" : ToString(content_type->value());
    if (const auto allow = res.find(http::field::allow); allow != res.end()) {
      out.allow = ToString(allow->value());
    }
    // An answer that ended with the connection (no length) leaves nothing to
    // reuse, and bytes beyond the answer would be read as the next one's start.
    if (res.keep_alive() && !parser_->need_eof() && conn_->buffer.size() == 0) {
      shared_.Park(std::move(conn_));
    }
    Finish(std::move(out));
  }

  // A reused connection failed before any byte of the answer: the target
  // closed it while idle and never saw the request (see the top).
  bool MaySendAgain(const beast::error_code& ec) const { return reused_ && IsStaleConnection(ec); }
  // Whether carrying the request out twice does what once does.
  bool Repeatable() const {
    const http::verb m = request_.method();
    return m == http::verb::get || m == http::verb::head || m == http::verb::put ||
           m == http::verb::delete_;
  }

  void SendAgain() {
    CloseConnection();
    reused_ = false;  // a fresh connection is not retried
    Resolve();
  }

  void CloseConnection() {
    if (!conn_) return;
    conn_->stream.close();
    conn_.reset();
  }

  void Fail(ApiResponse response) {
    if (done_) return;
    CloseConnection();
    Finish(std::move(response));
  }

  void Finish(ApiResponse response) {
    if (done_) return;
    done_ = true;
    deadline_.cancel();
    resolver_.cancel();
    // A connection that was not parked is closed: it is mid-exchange.
    CloseConnection();
    server::Respond respond = std::move(respond_);
    respond_ = nullptr;
    // After Forget the destructor may go on; it joins this thread, so the
    // answer still goes before ~Forwarder returns.
    shared_.Forget(this);
    respond(std::move(response));
  }

  Shared& shared_;
  const Executor executor_;
  const std::string base_url_;
  const Result<BaseUrl> url_;
  const std::chrono::steady_clock::time_point deadline_at_;
  const std::chrono::milliseconds timeout_;
  const uint64_t generation_;
  server::Respond respond_;
  http::request<http::string_body> request_;
  Resolver resolver_;
  Timer deadline_;
  std::vector<tcp::endpoint> endpoints_;
  std::shared_ptr<Connection> conn_;
  std::optional<http::response_parser<http::string_body>> parser_;
  bool reused_ = false;  // conn_ came from the pool
  bool done_ = false;    // answered
};

}  // namespace

class Forwarder::Impl {
 public:
  explicit Impl(ForwarderOptions options) : ios_(MakeContexts(options.threads)), shared_(options) {
    for (auto& io : ios_) work_.push_back(asio::make_work_guard(*io));
    for (size_t i = 0; i < ios_.size(); ++i) {
      threads_.emplace_back([this, i] {
        const std::string name = "chronoqd-fwd-" + std::to_string(i);
        pthread_setname_np(pthread_self(), name.c_str());
        ios_[i]->run();
      });
    }
  }

  ~Impl() {
    std::vector<std::shared_ptr<Exchange>> exchanges;
    std::vector<std::shared_ptr<Connection>> idle;
    {
      MutexLock lock(shared_.mu);
      shared_.stopping = true;
      for (auto& [raw, exchange] : shared_.in_flight) exchanges.push_back(exchange);
      idle = shared_.TakeAllIdleLocked();
    }
    for (auto& exchange : exchanges) {
      asio::post(exchange->GetExecutor(), [exchange] { exchange->Abort(); });
    }
    for (auto& conn : idle) {
      asio::post(conn->stream.get_executor(), [conn] { conn->stream.close(); });
    }
    exchanges.clear();
    idle.clear();
    {
      MutexLock lock(shared_.mu);
      while (!shared_.in_flight.empty()) shared_.drained.wait(lock.std_lock());
    }
    // Handlers still queued (reads failing on closed sockets) need not run:
    // they only release what they hold.
    work_.clear();
    for (auto& io : ios_) io->stop();
    for (auto& t : threads_) t.join();
  }

  void Forward(const std::string& base_url, server::ApiRequest request, const std::string& token,
               const std::string& from, std::chrono::milliseconds timeout,
               server::Respond respond) {
    Exchange::Params params{.base_url = base_url,
                            .url = ParseBaseUrl(base_url, "leader URL"),
                            .deadline = std::chrono::steady_clock::now() + timeout,
                            .timeout = timeout};
    {
      MutexLock lock(shared_.mu);
      if (!shared_.stopping) {
        params.generation = shared_.generation;
        std::shared_ptr<Connection> pooled;
        if (params.url.ok()) {
          pooled = shared_.TakeIdleLocked(params.url->host + ":" + params.url->port);
        }
        const Executor executor =
            pooled ? pooled->stream.get_executor() : ios_[next_io_++ % ios_.size()]->get_executor();
        auto exchange =
            std::make_shared<Exchange>(shared_, executor, std::move(params), std::move(request),
                                       token, from, std::move(respond), std::move(pooled));
        shared_.in_flight.emplace(exchange.get(), exchange);
        // Posted under the lock, so that the destructor's Abort comes after it.
        asio::post(executor, [exchange] { exchange->Start(); });
        return;
      }
    }
    // A caller racing the destructor (see REQUIRES): answered on its own thread.
    respond(Unavailable("this node stopped forwarding to the leader at " + base_url));
  }

  void AbortTarget(const std::string& base_url, const std::string& why) {
    std::vector<std::shared_ptr<Exchange>> exchanges;
    {
      MutexLock lock(shared_.mu);
      for (auto& [raw, exchange] : shared_.in_flight) {
        if (exchange->base_url() == base_url) exchanges.push_back(exchange);
      }
    }
    for (auto& exchange : exchanges) {
      asio::post(exchange->GetExecutor(), [exchange, why] { exchange->Abort(why); });
    }
  }

  void DropIdle() {
    std::vector<std::shared_ptr<Connection>> idle;
    {
      MutexLock lock(shared_.mu);
      ++shared_.generation;
      idle = shared_.TakeAllIdleLocked();
    }
    // Their watching reads end, find them out of the pool and close them.
    for (auto& conn : idle) {
      asio::post(conn->stream.get_executor(), [conn] { conn->stream.close(); });
    }
  }

 private:
  static std::vector<std::unique_ptr<asio::io_context>> MakeContexts(int threads) {
    std::vector<std::unique_ptr<asio::io_context>> out;
    for (int i = 0; i < std::max(1, threads); ++i) {
      out.push_back(std::make_unique<asio::io_context>(1));  // one thread runs it
    }
    return out;
  }

  // First: destroyed last, after everything that holds a socket or timer on them.
  std::vector<std::unique_ptr<asio::io_context>> ios_;
  Shared shared_;
  std::vector<asio::executor_work_guard<Executor>> work_;
  std::vector<std::thread> threads_;
  size_t next_io_ CHRONOQ_GUARDED_BY(shared_.mu) = 0;
};

Forwarder::Forwarder(ForwarderOptions options) : impl_(std::make_unique<Impl>(options)) {}

Forwarder::~Forwarder() = default;

void Forwarder::Forward(const std::string& base_url, server::ApiRequest request,
                        const std::string& token, const std::string& from,
                        std::chrono::milliseconds timeout, server::Respond respond) {
  impl_->Forward(base_url, std::move(request), token, from, timeout, std::move(respond));
}

void Forwarder::DropIdle() { impl_->DropIdle(); }

void Forwarder::AbortTarget(const std::string& base_url, const std::string& why) {
  impl_->AbortTarget(base_url, why);
}

Status CheckBaseUrl(std::string_view url, std::string_view field) {
  Result<BaseUrl> parsed = ParseBaseUrl(url, field);
  return parsed.ok() ? Status() : parsed.status();
}

}  // namespace chronoq::cluster
