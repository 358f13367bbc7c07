#include "server/http_server.h"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "codec/json_codec.h"
#include "common/mutex.h"
#include "server/ui.h"
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace chronoq::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
// Each I/O thread runs an io_context of its own, and a connection stays on
// one: its handlers never run concurrently, so it needs no strand, and its
// stream's executor is the context's own (no type erasure). Measured with
// W7 over HTTP, see docs/BENCHMARKS.md.
using Executor = asio::io_context::executor_type;
using Stream = beast::basic_stream<tcp, Executor, beast::unlimited_rate_policy>;
using Socket = tcp::socket::rebind_executor<Executor>::other;
// A TLS connection: OpenSSL over the same stream, its deadlines included.
using TlsStream = beast::ssl_stream<Stream>;

bool CrossSiteWrite(std::string_view method, std::string_view origin, std::string_view host,
                    std::string_view fetch_site, bool tls) {
  if (method == "GET" || method == "HEAD" || method == "OPTIONS") return false;
  if (!fetch_site.empty() && fetch_site != "same-origin" && fetch_site != "none") return true;
  if (origin.empty()) return false;
  // "null" (a sandboxed frame, a file), or another scheme, host or port.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (tls && scheme == "http://") continue;  // a plain page is not chronoqd's on a TLS port
    if (origin.size() == scheme.size() + host.size() && origin.substr(0, scheme.size()) == scheme &&
        origin.substr(scheme.size()) == host) {
      return false;
    }
  }
  return true;
}

namespace {

// What OpenSSL said, first cause first ("no start line (PEM lib)"), and its
// error queue emptied.
std::string OpenSslReason() {
  std::string out;
  int n = 0;
  for (unsigned long error = ERR_get_error(); error != 0; error = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(error);
    if (reason == nullptr) continue;
    out += n == 0 ? reason : (n == 1 ? " (" : ", ") + std::string(reason);
    ++n;
  }
  if (n > 1) out += ")";
  return n == 0 ? "unknown OpenSSL error" : out;
}

// Readable, or an error naming `field` with the system's reason.
Status CheckReadable(const std::string& path, std::string_view field) {
  std::ifstream in(path);
  if (!in) {
    return Status::InvalidArgument(field, "cannot read " + path + ": " + std::strerror(errno));
  }
  return {};
}

// The server's TLS context from `options`' files: null without them (plain
// HTTP). TLS 1.2 is the least version, whatever the system's OpenSSL
// configuration says.
Result<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const ServerOptions& options) {
  const std::string& cert = options.tls_cert_file;
  const std::string& key = options.tls_key_file;
  if (cert.empty() && key.empty()) return std::unique_ptr<asio::ssl::context>();
  if (cert.empty() || key.empty()) {
    return Status::InvalidArgument(cert.empty() ? "tls-cert" : "tls-key",
                                   "--tls-cert and --tls-key go together: give both or neither");
  }
  CHRONOQ_RETURN_IF_ERROR(CheckReadable(cert, "tls-cert"));
  CHRONOQ_RETURN_IF_ERROR(CheckReadable(key, "tls-key"));
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  ERR_clear_error();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    return Status::Internal("cannot require TLS 1.2: " + OpenSslReason());
  }
  // An encrypted key would make OpenSSL ask for its passphrase on the
  // terminal; fail instead.
  SSL_CTX_set_default_passwd_cb(ctx, [](char*, int, int, void*) { return 0; });
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
    return Status::InvalidArgument("tls-cert",
                                   cert + " is not a PEM certificate: " + OpenSslReason());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    const int reason = ERR_GET_REASON(ERR_peek_last_error());
    const bool mismatch =
        reason == X509_R_KEY_VALUES_MISMATCH || reason == X509_R_KEY_TYPE_MISMATCH;
    return Status::InvalidArgument(
        "tls-key", key +
                       (mismatch ? " is not the key of the certificate in " + cert + ": "
                                 : " is not an unencrypted PEM private key: ") +
                       OpenSslReason());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return Status::InvalidArgument(
        "tls-key", key + " is not the key of the certificate in " + cert + ": " + OpenSslReason());
  }
  return context;
}

// A header's value (by field or by name), empty when absent.
template <class Name>
std::string_view HeaderValue(const http::request<http::string_body>& req, Name name) {
  auto it = req.find(name);
  if (it == req.end()) return {};
  return {it->value().data(), it->value().size()};
}

// What Stop() needs of a connection, whatever its stream: one virtual call
// per connection at shutdown, none per request.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Closes the connection once the request in flight (if any) is answered.
  virtual void Shutdown() = 0;
};

// What sessions share: options, the handler, and the registry Stop() walks.
struct Shared {
  ServerOptions options;
  RequestHandler& handler;
  std::optional<TokenDigest> cluster_token;  // options.cluster_token's
  std::unique_ptr<asio::ssl::context> tls;   // null: plain HTTP
  Mutex mu;
  std::condition_variable drained;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions CHRONOQ_GUARDED_BY(mu);
  bool stopping CHRONOQ_GUARDED_BY(mu) = false;
};

// One connection, over a plain Stream or a TlsStream: a template rather
// than a virtual stream, so the plain path's reads and writes are direct
// calls, as they were before TLS.
template <class S>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<S>> {
 public:
  static constexpr bool kTls = std::is_same_v<S, TlsStream>;
  using std::enable_shared_from_this<Session<S>>::shared_from_this;
  using std::enable_shared_from_this<Session<S>>::weak_from_this;

  Session(Socket socket, Shared& shared)
      : stream_(MakeStream(std::move(socket), shared)), shared_(shared) {}
  ~Session() override {
    MutexLock lock(shared_.mu);
    shared_.sessions.erase(this);
    if (shared_.sessions.empty()) shared_.drained.notify_all();
  }

  // Registers with the server (false when it is stopping) and starts reading.
  bool Start() {
    {
      MutexLock lock(shared_.mu);
      if (shared_.stopping) return false;
      shared_.sessions.emplace(this, weak_from_this());
    }
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if constexpr (kTls) {
        self->Handshake();
      } else {
        self->AwaitRequest();
      }
    });
    return true;
  }

  void Shutdown() override {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->stopping_ = true;
      if (!self->busy_) self->Close();
    });
  }

 private:
  static S MakeStream(Socket socket, Shared& shared) {
    if constexpr (kTls) {
      return S(std::move(socket), *shared.tls);
    } else {
      return S(std::move(socket));
    }
  }

  // The TCP stream under TLS, or the stream itself: its deadline and socket.
  Stream& Tcp() { return beast::get_lowest_layer(stream_); }

  // The server's side of the TLS handshake, within the header timeout: a
  // client that connects and says nothing, or speaks plain HTTP (not a TLS
  // record), or offers only TLS 1.1 or older, is closed.
  void Handshake() {
    if (stopping_) return Close();
    Tcp().expires_after(shared_.options.header_timeout);
    stream_.async_handshake(asio::ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              if (ec) return self->Close();
                              self->AwaitRequest();
                            });
  }

  // Waits (up to the idle timeout) for the first bytes of the next request.
  void AwaitRequest() {
    if (stopping_) return Close();
    if (buffer_.size() > 0) return ReadHeader();  // a pipelined request
    Tcp().expires_after(shared_.options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(shared_.options.max_header));
    parser_->body_limit(shared_.options.max_body);
    Tcp().expires_after(shared_.options.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec == http::error::header_limit) {
      return Reject(431, "request_header_fields_too_large", "headers larger than 16 KiB");
    }
    // The parser refuses a Content-Length above the body limit with the header.
    if (ec == http::error::body_limit) {
      return Reject(413, "payload_too_large", "request body larger than 1 MiB");
    }
    if (ec) return Close();  // includes the header timeout: the client is dropped
    const auto& req = parser_->get();
    if (shared_.options.tokens != nullptr && !Public(req) && !Admitted(req)) return;
    if (CrossSiteWrite(std::string_view(req.method_string().data(), req.method_string().size()),
                       HeaderValue(req, http::field::origin), HeaderValue(req, http::field::host),
                       HeaderValue(req, beast::string_view("Sec-Fetch-Site")), kTls)) {
      return Reject(403, "forbidden",
                    "cross-site request refused: a page of another origin may not change "
                    "chronoqd's state (Origin and Sec-Fetch-Site)");
    }
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code e, size_t) { self->OnBody(e); });
  }

  // What needs no token: /healthz, and the dashboard's files (they hold no
  // data; the page asks for the token before it calls the API).
  static bool Public(const http::request<http::string_body>& req) {
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    return path == "/healthz" || (req.method() == http::verb::get && IsUiPath(path));
  }

  // Whether the request's token may make it; if not, refuses it (401 for
  // no such token, 403 for one without the route's scope).
  bool Admitted(const http::request<http::string_body>& req) {
    const std::optional<Grant> grant =
        Authenticate(HeaderValue(req, http::field::authorization),
                     *shared_.options.tokens->Current(), shared_.cluster_token);
    if (!grant) {
      Reject(401, "unauthorized", "missing or wrong bearer token");
      return false;
    }
    if (grant->scope == Scope::kAdmin) return true;  // no need to look the route up
    const std::string_view method(req.method_string().data(), req.method_string().size());
    const std::string_view target(req.target().data(), req.target().size());
    const Scope needed = shared_.handler.RequiredScope(method, target);
    std::string refusal = ScopeRefusal(*grant, needed, method, target.substr(0, target.find('?')));
    if (refusal.empty()) return true;
    Reject(403, "insufficient_scope", std::move(refusal),
           {{"WWW-Authenticate", "Bearer error=\"insufficient_scope\", scope=\"" +
                                     std::string(ScopeName(needed)) + "\""}});
    return false;
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Reject(413, "payload_too_large", "request body larger than 1 MiB");
    }
    if (ec) return Close();
    busy_ = true;
    Tcp().expires_never();  // a long-polling claim may take its time
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    ApiRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.body = std::move(req.body());
    if (auto by = req.find(beast::string_view(kForwardedBy.data(), kForwardedBy.size()));
        by != req.end()) {
      request.forwarded_by = std::string(by->value());
    }
    shared_.handler.Handle(std::move(request), [self = shared_from_this()](ApiResponse r) {
      // Often called on the engine's loop thread: hand over at once.
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(r)]() mutable { self->Write(std::move(r)); });
    });
  }

  // Answers an unreadable request and closes: its body was not consumed.
  void Reject(int status, std::string_view code, std::string message,
              std::vector<std::pair<std::string, std::string>> headers = {}) {
    busy_ = true;
    keep_alive_ = false;
    unread_body_ = true;
    ApiResponse r;
    r.status = status;
    r.headers = std::move(headers);
    r.body = ErrorBody(
        code, Status(status == 401 ? StatusCode::kInvalidArgument : StatusCode::kResourceExhausted,
                     std::move(message)));
    Write(std::move(r));
  }

  void Write(ApiResponse r) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->result(static_cast<unsigned>(r.status));
    res->version(11);
    res->set(http::field::server, "chronoqd");
    res->set(http::field::content_type, r.content_type);
    if (!r.allow.empty()) res->set(http::field::allow, r.allow);
    for (const auto& [name, value] : r.headers) res->set(name, value);
    if (r.status == 401) res->set(http::field::www_authenticate, "Bearer");
    res->keep_alive(keep_alive_ && !stopping_);
    res->body() = std::move(r.Render());
    res->prepare_payload();
    Tcp().expires_after(shared_.options.idle_timeout);  // a reader too slow to drain
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->busy_ = false;
                        if (ec) return self->Close();
                        if (self->unread_body_) return self->LingerClose();
                        if (!res->keep_alive()) return self->Close();
                        self->AwaitRequest();
                      });
  }

  // After refusing a request whose body was not read: stop sending, then read
  // and discard what the client still sends (bounded in time and bytes), so
  // it finishes writing and reads the answer instead of a connection reset.
  void LingerClose() {
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Tcp().expires_after(shared_.options.header_timeout);
    DiscardInput(0);
  }

  void DiscardInput(size_t discarded) {
    static constexpr size_t kMaxDiscard = 16 << 20;
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(64 << 10),
                            [self = shared_from_this(), discarded](beast::error_code ec, size_t n) {
                              if (ec || discarded + n > kMaxDiscard) return self->Tcp().close();
                              self->buffer_.commit(n);
                              self->DiscardInput(discarded + n);
                            });
  }

  // Over TLS too, the TCP connection is closed without waiting for the
  // client's close_notify: every answer says its length, so a cut cannot
  // pass for a whole one, and waiting would hold the connection's slot.
  void Close() {
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Tcp().close();
  }

  S stream_;
  Shared& shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool busy_ = false;  // a request is being answered
  bool keep_alive_ = true;
  bool unread_body_ = false;  // a refused request's body may still be coming
  bool stopping_ = false;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(ServerOptions options, RequestHandler& handler)
      : shared_{.options = std::move(options), .handler = handler},
        ios_(MakeContexts(shared_.options.threads)),
        acceptor_(ios_.front()->get_executor()) {
    for (auto& io : ios_) work_.push_back(asio::make_work_guard(*io));
    if (!shared_.options.cluster_token.empty()) {
      shared_.cluster_token = DigestOf(shared_.options.cluster_token);
    }
  }

  Status Start() {
    CHRONOQ_ASSIGN_OR_RETURN(shared_.tls, MakeTlsContext(shared_.options));
    const std::string where = shared_.options.host + ":" + std::to_string(shared_.options.port);
    beast::error_code ec;
    const auto address = asio::ip::make_address(shared_.options.host, ec);
    if (ec) return Status::InvalidArgument("listen", "not an IP address: " + shared_.options.host);
    const tcp::endpoint endpoint(address, shared_.options.port);
    if (acceptor_.open(endpoint.protocol(), ec) ||
        acceptor_.set_option(asio::socket_base::reuse_address(true), ec) ||
        acceptor_.bind(endpoint, ec) ||
        acceptor_.listen(asio::socket_base::max_listen_connections, ec)) {
      return Status::Unavailable("cannot listen on " + where + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (size_t i = 0; i < ios_.size(); ++i) {
      threads_.emplace_back([this, i] {
        const std::string name = "chronoqd-io-" + std::to_string(i);
        pthread_setname_np(pthread_self(), name.c_str());
        ios_[i]->run();
      });
    }
    return {};
  }

  void Stop(const std::function<void()>& before_wait) {
    std::vector<std::shared_ptr<SessionBase>> sessions;
    {
      MutexLock lock(shared_.mu);
      if (shared_.stopping) return;
      shared_.stopping = true;
      for (auto& [raw, weak] : shared_.sessions) {
        if (auto s = weak.lock()) sessions.push_back(std::move(s));
      }
    }
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      accept_retry_.cancel();
    });
    if (before_wait) before_wait();
    for (auto& s : sessions) s->Shutdown();
    sessions.clear();
    {
      // Sessions end as their last answer is written; give them 30 s.
      MutexLock lock(shared_.mu);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!shared_.sessions.empty() &&
             shared_.drained.wait_until(lock.std_lock(), give_up) != std::cv_status::timeout) {
      }
    }
    work_.clear();
    for (auto& io : ios_) io->stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  uint16_t port() const { return port_; }

 private:
  static std::vector<std::unique_ptr<asio::io_context>> MakeContexts(int threads) {
    std::vector<std::unique_ptr<asio::io_context>> out;
    for (int i = 0; i < std::max(1, threads); ++i) {
      out.push_back(std::make_unique<asio::io_context>(1));  // one thread runs it
    }
    return out;
  }

  size_t OpenConnections() {
    MutexLock lock(shared_.mu);
    return shared_.sessions.size();
  }

  // Says (once a minute at most) why accepting is paused, then tries again
  // in kAcceptRetry.
  void AcceptLater(const std::string& why) {
    const auto now = std::chrono::steady_clock::now();
    ++accept_waits_;
    if (now - last_accept_warning_ >= kAcceptWarningEvery) {
      spdlog::warn("accept: {} ({} waits since the last warning; trying every {} ms)", why,
                   accept_waits_, kAcceptRetry.count());
      last_accept_warning_ = now;
      accept_waits_ = 0;
    }
    accept_retry_.expires_after(kAcceptRetry);
    accept_retry_.async_wait([this](beast::error_code e) {
      if (!e && acceptor_.is_open()) Accept();
    });
  }

  // Connections go to the I/O threads in turn. (Only the acceptor's thread
  // runs this.)
  void Accept() {
    if (const size_t max = shared_.options.max_connections; max > 0 && OpenConnections() >= max) {
      return AcceptLater("at the limit of " + std::to_string(max) +
                         " connections open at once; new ones wait in the backlog");
    }
    asio::io_context& io = *ios_[next_io_++ % ios_.size()];
    acceptor_.async_accept(io.get_executor(), [this](beast::error_code ec, Socket s) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        beast::error_code ignored;
        s.set_option(tcp::no_delay(true), ignored);
        if (shared_.tls != nullptr) {
          std::make_shared<Session<TlsStream>>(std::move(s), shared_)->Start();
        } else {
          std::make_shared<Session<Stream>>(std::move(s), shared_)->Start();
        }
        return Accept();
      }
      // Out of descriptors (or memory), the waiting connection stays in the
      // backlog and the next accept fails at once: retrying at once would
      // spin a core and write a log line per try. Wait for connections to
      // end instead.
      AcceptLater(ec.message());
    });
  }

  static constexpr std::chrono::milliseconds kAcceptRetry{100};
  static constexpr std::chrono::seconds kAcceptWarningEvery{60};

  Shared shared_;
  std::vector<std::unique_ptr<asio::io_context>> ios_;  // one per I/O thread
  tcp::acceptor acceptor_;                              // on the first
  asio::steady_timer accept_retry_{acceptor_.get_executor()};
  std::chrono::steady_clock::time_point last_accept_warning_{};
  uint64_t accept_waits_ = 0;
  std::vector<asio::executor_work_guard<Executor>> work_;
  size_t next_io_ = 0;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
};

Status CheckTls(const ServerOptions& options) { return MakeTlsContext(options).status(); }

HttpServer::HttpServer(ServerOptions options, RequestHandler& handler)
    : impl_(std::make_unique<Impl>(std::move(options), handler)) {}

HttpServer::~HttpServer() { impl_->Stop(nullptr); }

Status HttpServer::Start() { return impl_->Start(); }

uint16_t HttpServer::port() const { return impl_->port(); }

void HttpServer::Stop(const std::function<void()>& before_wait) { impl_->Stop(before_wait); }

}  // namespace chronoq::server
