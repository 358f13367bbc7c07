#include "cli/http_client.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>

namespace chronoq::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// Responses are held in memory; this only guards against a runaway server.
constexpr uint64_t kMaxResponseBytes = uint64_t{1} << 30;
// What one read from the socket may take (see Impl::Impl).
constexpr size_t kReadBufferBytes = 64 * 1024;

std::string ToString(beast::string_view s) { return std::string(s.data(), s.size()); }

// "Connection refused" -> "connection refused": errors read as one sentence.
std::string Describe(const beast::error_code& ec) {
  std::string m = ec.message();
  if (!m.empty()) m[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(m[0])));
  return m;
}

// "30s", "1500ms".
std::string DescribeTimeout(Duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// Errors that mean a reused keep-alive connection was closed by the server
// before it saw our request: safe to resend once on a new connection.
bool IsStaleConnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec == asio::error::not_connected;
}

bool Iequals(std::string_view a, std::string_view b) {
  return beast::iequals(beast::string_view(a.data(), a.size()),
                        beast::string_view(b.data(), b.size()));
}

// Methods whose effect is the same sent once or twice (RFC 9110, 9.2.2), so
// that one a node may have applied can still go to the next node.
bool IsIdempotent(std::string_view method) {
  for (const std::string_view m : {"GET", "HEAD", "PUT", "DELETE"}) {
    if (Iequals(method, m)) return true;
  }
  return false;
}

// What a node's 503 said, for the list of what each node tried said:
// "503 store_unavailable: the store cannot be reached", or "503" when the
// body is not chronoq's error shape.
std::string Describe503(const HttpResponse& r) {
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  std::string out = std::to_string(r.status);
  if (!body.is_object()) return out;
  const auto error = body.find("error");
  if (error == body.end() || !error->is_object()) return out;
  const auto code = error->find("code");
  const auto message = error->find("message");
  if (code != error->end() && code->is_string()) out += " " + code->get<std::string>();
  if (message != error->end() && message->is_string()) out += ": " + message->get<std::string>();
  return out;
}

// The client's TLS context: TLS 1.2 or later, trusting the CAs of
// `tls.ca_file`, or the system's when it names none.
Result<std::unique_ptr<ssl::context>> MakeTlsContext(const TlsOptions& tls) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  ERR_clear_error();
  if (SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION) != 1) {
    return Status::Internal("cannot require TLS 1.2");
  }
  beast::error_code ec;
  if (tls.ca_file.empty()) {
    context->set_default_verify_paths(ec);
    if (ec) return Status::Internal("cannot load the system's trusted CAs: " + ec.message());
    return context;
  }
  if (std::ifstream in(tls.ca_file); !in) {
    return Status::InvalidArgument(tls.ca_file_field,
                                   "cannot read " + tls.ca_file + ": " + std::strerror(errno));
  }
  context->load_verify_file(tls.ca_file, ec);
  if (ec) {
    return Status::InvalidArgument(tls.ca_file_field,
                                   tls.ca_file + " holds no PEM CA certificate: " + Describe(ec));
  }
  return context;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::string> HttpResponse::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (beast::iequals(key, beast::string_view(name.data(), name.size()))) return value;
  }
  return std::nullopt;
}

std::string BaseUrl::Authority() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + port;
}

Result<BaseUrl> ParseBaseUrl(std::string_view url, std::string_view field) {
  std::string_view rest = url;
  BaseUrl out;
  if (const size_t sep = rest.find("://"); sep != std::string_view::npos) {
    const std::string_view scheme = rest.substr(0, sep);
    out.tls = Iequals(scheme, "https");
    if (!out.tls && !Iequals(scheme, "http")) {
      return Status::InvalidArgument(field, "must start with http:// or https://");
    }
    rest.remove_prefix(sep + 3);
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Status::InvalidArgument(field, "must not have a query or fragment");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return Status::InvalidArgument(field, "must not contain user information");
  }

  std::string_view port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument(field, "unterminated [ in the host");
    }
    out.host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) {
      return Status::InvalidArgument(field, "unexpected text after the host");
    }
    if (!after.empty()) port = after.substr(1);
  } else {
    const size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return Status::InvalidArgument(field, "no host");
  if (port.empty()) {
    out.port = out.tls ? "443" : "80";
  } else {
    int value = 0;
    for (const char c : port) {
      if (c < '0' || c > '9' || value > 65535) {
        return Status::InvalidArgument(field, "the port must be a number from 1 to 65535");
      }
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) {
      return Status::InvalidArgument(field, "the port must be a number from 1 to 65535");
    }
    out.port = std::to_string(value);
  }
  while (path.ends_with('/')) path.remove_suffix(1);
  out.prefix = path;
  return out;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

// Drives Beast's asynchronous operations to completion on a private
// io_context, so every step can share one deadline (tcp_stream's expiry).
class HttpClient::Impl {
 public:
  Impl(BaseUrl url, Duration timeout, std::unique_ptr<ssl::context> tls)
      : url_(std::move(url)), timeout_(timeout), tls_(std::move(tls)) {
    // Beast reads at most what the buffer has room for (512 bytes when it is
    // empty and small), and the parser moves body bytes out at once, so an
    // unreserved buffer read a 2.5 MB answer (a batch of 10,000 tasks) in
    // ~5,000 recvmsg calls, each with an epoll_wait and a timer update: half
    // of `chronoq import`'s CPU. With 64 KiB it takes ~40.
    buffer_.reserve(kReadBufferBytes);
  }

  ~Impl() { Close(); }

  Result<HttpResponse> Send(std::string_view method, std::string_view target, std::string_view body,
                            const HttpHeaders& headers) {
    http::request<http::string_body> req;
    req.version(11);
    const beast::string_view verb_name(method.data(), method.size());
    if (const http::verb verb = http::string_to_verb(verb_name); verb != http::verb::unknown) {
      req.method(verb);
    } else {
      req.method_string(verb_name);
    }
    req.target(url_.prefix + std::string(target));
    req.set(http::field::host, url_.Authority());
    req.set(http::field::user_agent, "chronoq-cli");
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = body;
    req.prepare_payload();

    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    failure_ = {};
    // Found closed before the request goes out, a connection is replaced
    // with no doubt that the server never saw the request (a node that
    // restarted, or dropped the connection while idle). Sent into it, the
    // request would fail after being written, and MultiHttpClient could then
    // not move a POST on to another node.
    if (Connected() && ClosedByServer()) Close();
    const bool reused = Connected();
    if (!reused) CHRONOQ_RETURN_IF_ERROR(Connect(deadline));
    bool stale = false;
    Result<HttpResponse> r = Exchange(req, deadline, reused, stale);
    if (stale) {
      // Closed just as the request went out. Most likely the server closed
      // it while idle and never read the request; but if the write had gone
      // through, failure_.sent stays set (Exchange): it may have read it.
      Close();
      CHRONOQ_RETURN_IF_ERROR(Connect(deadline));
      r = Exchange(req, deadline, /*reused=*/false, stale);
    }
    return r;
  }

  const Failure& last_failure() const { return failure_; }
  void set_timeout(Duration timeout) { timeout_ = timeout; }
  Duration timeout() const { return timeout_; }
  const BaseUrl& url() const { return url_; }

 private:
  // Runs the queued operations until they have all completed.
  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  bool Connected() const { return stream_.has_value() || tls_stream_.has_value(); }

  // The TCP stream (under TLS for https). REQUIRES: Connected().
  beast::tcp_stream& Tcp() {
    return tls_stream_.has_value() ? beast::get_lowest_layer(*tls_stream_) : *stream_;
  }

  // Runs `op` on the open stream, whichever it is. REQUIRES: Connected().
  template <class Op>
  void OnStream(Op&& op) {
    if (tls_stream_.has_value()) {
      op(*tls_stream_);
    } else {
      op(*stream_);
    }
  }

  // Closes without TLS's close_notify: the answers we read say their length.
  void Close() {
    if (!Connected()) return;
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().close();
    stream_.reset();
    tls_stream_.reset();
    buffer_.clear();
  }

  // Whether the server has closed the idle open connection (or sent bytes
  // nobody asked for): a peek finds the end of the stream, an error or data
  // where a live idle connection has nothing to read.
  bool ClosedByServer() {
    char byte = 0;
    const ssize_t n = ::recv(Tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || errno != EAGAIN;  // EAGAIN is EWOULDBLOCK on Linux
  }

  Status Connect(std::chrono::steady_clock::time_point deadline) {
    const std::string where = url_.Authority();
    beast::error_code ec;
    // Synchronous: a numeric host resolves at once; a DNS lookup cannot be
    // cancelled anyway.
    const tcp::resolver::results_type endpoints = resolver_.resolve(url_.host, url_.port, ec);
    if (ec) {
      failure_.reason = "cannot resolve " + url_.host + ": " + Describe(ec);
      return Status::Unavailable("cannot resolve " + url_.host + ": " + Describe(ec));
    }
    if (url_.tls) {
      tls_stream_.emplace(ioc_, *tls_);
    } else {
      stream_.emplace(ioc_);
    }
    Tcp().expires_at(deadline);
    Tcp().async_connect(endpoints,
                        [&](const beast::error_code& e, const tcp::endpoint&) { ec = e; });
    Run();
    if (ec == beast::error::timeout) {
      Close();
      failure_.reason = "timed out connecting after " + DescribeTimeout(timeout_);
      return {StatusCode::kDeadlineExceeded,
              "cannot connect to " + where + ": timed out after " + DescribeTimeout(timeout_)};
    }
    if (ec) {
      Close();
      failure_.reason = Describe(ec);
      return Status::Unavailable("cannot connect to " + where + ": " + Describe(ec));
    }
    // A request goes out whole and then we wait for the answer: Nagle's
    // algorithm would hold its last partial segment until the server ACKs
    // the ones before, which a delayed ACK can put off for up to 40 ms.
    beast::error_code ignored;
    Tcp().socket().set_option(tcp::no_delay(true), ignored);
    if (url_.tls) return Handshake();
    return Status::Ok();
  }

  // TLS over the connection just made, under the same deadline. The
  // server's certificate must chain to a trusted CA and name the URL's host
  // (or IP address), which OpenSSL checks during the handshake.
  Status Handshake() {
    const std::string where = url_.Authority();
    SSL* ssl = tls_stream_->native_handle();
    beast::error_code not_ip;
    asio::ip::make_address(url_.host, not_ip);
    const bool named = not_ip.failed();
    // The name goes in the handshake (SNI) for a name, never for an address.
    if (named ? SSL_set_tlsext_host_name(ssl, url_.host.c_str()) != 1 ||
                    SSL_set1_host(ssl, url_.host.c_str()) != 1
              : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url_.host.c_str()) != 1) {
      Close();
      failure_.reason = "cannot set up TLS for " + url_.host;
      return Status::Internal("cannot set up TLS for " + url_.host);
    }
    tls_stream_->set_verify_mode(ssl::verify_peer);
    beast::error_code ec;
    tls_stream_->async_handshake(ssl::stream_base::client,
                                 [&](const beast::error_code& e) { ec = e; });
    Run();
    if (!ec) return Status::Ok();
    if (ec == beast::error::timeout) {
      Close();
      failure_.reason = "timed out in the TLS handshake after " + DescribeTimeout(timeout_);
      return {StatusCode::kDeadlineExceeded,
              "TLS handshake with " + where + ": timed out after " + DescribeTimeout(timeout_)};
    }
    // "certificate verify failed" says little without OpenSSL's reason:
    // "(unable to get local issuer certificate)" for a CA not trusted.
    std::string why = Describe(ec);
    if (const long verify = SSL_get_verify_result(ssl); verify != X509_V_OK) {
      why += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
    }
    Close();
    failure_.reason = "TLS handshake failed: " + why;
    return Status::Unavailable("TLS handshake with " + where + " failed: " + why);
  }

  // One request and its response on the open connection. Sets `stale` (and
  // returns an error) when a reused connection turns out to be closed. On an
  // error, sets failure_.sent if the request was written in full.
  Result<HttpResponse> Exchange(const http::request<http::string_body>& req,
                                std::chrono::steady_clock::time_point deadline, bool reused,
                                bool& stale) {
    const std::string where = url_.Authority();
    stale = false;
    beast::error_code ec;
    Tcp().expires_at(deadline);
    OnStream([&](auto& stream) {
      http::async_write(stream, req, [&](const beast::error_code& e, size_t) { ec = e; });
    });
    Run();
    // All of it is with the kernel now, and may reach the server whatever
    // happens next.
    const bool written = !ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    if (!ec) {
      OnStream([&](auto& stream) {
        http::async_read(stream, buffer_, parser,
                         [&](const beast::error_code& e, size_t) { ec = e; });
      });
      Run();
    }
    if (ec) {
      Close();
      if (written) failure_.sent = true;
      const std::string stage = written ? "while waiting for the answer" : "while sending";
      if (ec == beast::error::timeout) {
        failure_.reason = (written ? "no answer within " : "timed out sending after ") +
                          DescribeTimeout(timeout_);
        return Status{StatusCode::kDeadlineExceeded,
                      "no answer from " + where + " within " + DescribeTimeout(timeout_)};
      }
      if (reused && !parser.got_some() && IsStaleConnection(ec)) {
        stale = true;
        failure_.reason = "connection closed " + stage;
        return Status::Unavailable("connection to " + where + " closed");
      }
      failure_.reason = Describe(ec) + " " + stage;
      return Status::Unavailable("lost the connection to " + where + ": " + Describe(ec));
    }
    http::response<http::string_body> res = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    for (const auto& f : res)
      out.headers.emplace_back(ToString(f.name_string()), ToString(f.value()));
    out.body = std::move(res.body());
    if (!res.keep_alive()) Close();
    return out;
  }

  const BaseUrl url_;
  Duration timeout_;
  asio::io_context ioc_;
  tcp::resolver resolver_{ioc_};
  const std::unique_ptr<ssl::context> tls_;  // https only
  std::optional<beast::tcp_stream> stream_;  // the open http connection, if any
  std::optional<TlsStream> tls_stream_;      // the open https connection, if any
  beast::flat_buffer buffer_;                // bytes read past the last response
  Failure failure_;                          // of the last Send()
};

Status CheckTlsOptions(const TlsOptions& tls) { return MakeTlsContext(tls).status(); }

Result<std::unique_ptr<HttpClient>> HttpClient::Create(std::string_view base_url, Duration timeout,
                                                       const TlsOptions& tls) {
  CHRONOQ_ASSIGN_OR_RETURN(BaseUrl url, ParseBaseUrl(base_url));
  std::unique_ptr<ssl::context> context;
  if (url.tls) {
    CHRONOQ_ASSIGN_OR_RETURN(context, MakeTlsContext(tls));
  }
  return std::unique_ptr<HttpClient>(
      new HttpClient(std::make_unique<Impl>(std::move(url), timeout, std::move(context))));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::Send(std::string_view method, std::string_view target,
                                      std::string_view body, const HttpHeaders& headers) {
  return impl_->Send(method, target, body, headers);
}

const HttpClient::Failure& HttpClient::last_failure() const { return impl_->last_failure(); }
void HttpClient::set_timeout(Duration timeout) { impl_->set_timeout(timeout); }
Duration HttpClient::timeout() const { return impl_->timeout(); }
const BaseUrl& HttpClient::base_url() const { return impl_->url(); }

// ---------------------------------------------------------------------------
// MultiHttpClient

Result<std::unique_ptr<MultiHttpClient>> MultiHttpClient::Create(std::string_view urls,
                                                                 Duration timeout,
                                                                 std::string_view field,
                                                                 TlsOptions tls) {
  std::vector<std::string> list;
  while (true) {
    const size_t comma = urls.find(',');
    list.emplace_back(TrimSpaces(urls.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    urls.remove_prefix(comma + 1);
  }
  if (list.size() == 1) {
    CHRONOQ_RETURN_IF_ERROR(ParseBaseUrl(list.front(), field).status());
  } else {
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string entry = "entry " + std::to_string(i + 1);
      if (list[i].empty()) {
        return Status::InvalidArgument(field, entry + " is empty (URLs are separated by commas)");
      }
      // The entry stands in for the field, so that the message reads
      // "--url: entry 2 (ftp://b): must start with http:// or https://".
      if (const Result<BaseUrl> url = ParseBaseUrl(list[i], entry + " (" + list[i] + ")");
          !url.ok()) {
        return Status::InvalidArgument(field, url.status().message());
      }
    }
  }
  CHRONOQ_RETURN_IF_ERROR(CheckTlsOptions(tls));
  return std::unique_ptr<MultiHttpClient>(
      new MultiHttpClient(std::move(list), timeout, std::move(tls)));
}

MultiHttpClient::MultiHttpClient(std::vector<std::string> urls, Duration timeout, TlsOptions tls)
    : urls_(std::move(urls)), clients_(urls_.size()), timeout_(timeout), tls_(std::move(tls)) {}
MultiHttpClient::~MultiHttpClient() = default;

void MultiHttpClient::set_timeout(Duration timeout) {
  timeout_ = timeout;
  for (const std::unique_ptr<HttpClient>& c : clients_) {
    if (c != nullptr) c->set_timeout(timeout);
  }
}

Result<HttpClient*> MultiHttpClient::Node(size_t i) {
  if (clients_[i] == nullptr) {
    CHRONOQ_ASSIGN_OR_RETURN(clients_[i], HttpClient::Create(urls_[i], timeout_, tls_));
  }
  return clients_[i].get();
}

Result<HttpResponse> MultiHttpClient::Send(std::string_view method, std::string_view target,
                                           std::string_view body, const HttpHeaders& headers) {
  const size_t n = urls_.size();
  last_reached_node_ = false;
  std::string tried;                        // "http://a:7070: connection refused; ..."
  std::optional<HttpResponse> unavailable;  // the last 503
  bool all_unavailable = true;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = (current_ + i) % n;
    CHRONOQ_ASSIGN_OR_RETURN(HttpClient * client, Node(k));
    Result<HttpResponse> r = client->Send(method, target, body, headers);
    if (!tried.empty()) tried += "; ";
    if (r.ok()) {
      last_reached_node_ = true;
      if (r->status != 503) {
        current_ = k;  // sticks to the node that answered
        return r;
      }
      tried += urls_[k] + ": " + Describe503(*r);
      unavailable = std::move(*r);
      continue;
    }
    all_unavailable = false;
    const HttpClient::Failure& failure = client->last_failure();
    if (failure.sent) last_reached_node_ = true;
    // One node: its error, word for word as before there were several.
    if (n == 1) return r;
    tried += urls_[k] + ": " + failure.reason;
    if (failure.sent && !IsIdempotent(method)) {
      return Status::Unavailable("no answer: " + tried + "; " + std::string(method) +
                                 " not resent to another node: " + urls_[k] +
                                 " may have applied it");
    }
  }
  // Every node answered 503: the last answer is the response, so the
  // caller shows the server's error just as it does for a single node
  // (whose 503 was always returned as a response, never as an error).
  if (all_unavailable && unavailable.has_value()) return std::move(*unavailable);
  return Status::Unavailable("no node answered: " + tried);
}

}  // namespace chronoq::cli
