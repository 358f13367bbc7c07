#include "support/test_http_server.h"

#include <cctype>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "support/eventually.h"
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace chronoq::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr uint64_t kMaxRequestBytes = 64 << 20;

std::string ToString(beast::string_view s) { return std::string(s.data(), s.size()); }

}  // namespace

std::optional<std::string> TestHttpServer::Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (beast::iequals(key, beast::string_view(name.data(), name.size()))) return value;
  }
  return std::nullopt;
}

// All socket work happens on thread_, which runs ioc_. The mutex guards what
// the test thread reads or changes: the handler, the log and the hold.
class TestHttpServer::Impl {
 public:
  explicit Impl(Handler handler) : handler_(std::move(handler)) {
    const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }

  ~Impl() {
    ioc_.stop();
    thread_.join();
    std::lock_guard lock(mu_);
    held_.reset();  // its session needs ioc_, which outlives it
  }

  uint16_t port() const { return port_; }

  void SetHandler(Handler handler) {
    std::lock_guard lock(mu_);
    handler_ = std::move(handler);
  }

  std::vector<Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

  bool AwaitRequests(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }

  void HoldNextRequest() {
    std::lock_guard lock(mu_);
    hold_next_ = true;
    held_arrived_ = false;
  }

  bool AwaitHeldRequest(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return held_arrived_; });
  }

  void Release();
  void CloseConnections();

 private:
  class Session;
  struct Held {
    std::shared_ptr<Session> session;
    Response response;
  };

  void Accept();
  // Called on the server thread with each complete request.
  void OnRequest(const std::shared_ptr<Session>& session, Request request);
  // Sends `response` on `session`, or keeps the session open without a word
  // if it is silent, or closes it if it is a drop. Server thread only.
  void Answer(const std::shared_ptr<Session>& session, const Response& response);

  asio::io_context ioc_;  // first: destroyed after everything that uses it
  asio::executor_work_guard<asio::io_context::executor_type> work_{ioc_.get_executor()};
  tcp::acceptor acceptor_{ioc_};
  uint16_t port_ = 0;
  int connections_ = 0;                           // server thread only
  std::vector<std::weak_ptr<Session>> sessions_;  // server thread only
  // Sessions answered with silence, kept open; server thread only.
  std::vector<std::shared_ptr<Session>> silent_;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // requests_ grew, or a held request arrived
  Handler handler_;             // guarded by mu_
  std::vector<Request> requests_;
  bool hold_next_ = false;
  bool held_arrived_ = false;
  std::optional<Held> held_;
};

// One connection: read a request, hand it to the server, write the answer,
// repeat while both sides keep the connection alive.
class TestHttpServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Impl& server, int connection)
      : stream_(std::move(socket)), server_(server), connection_(connection) {}

  void Read() {
    parser_.emplace();
    parser_->body_limit(kMaxRequestBytes);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](const beast::error_code& ec, size_t) { self->OnRead(ec); });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  void Write(const Response& response) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(11);
    res->result(static_cast<unsigned>(response.status));
    if (!response.content_type.empty()) res->set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) res->set(name, value);
    res->body() = response.body;
    res->keep_alive(keep_alive_ && !response.close);
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](const beast::error_code& ec, size_t) {
                        if (ec || !res->keep_alive()) {
                          self->Close();
                          return;
                        }
                        self->Read();
                      });
  }

 private:
  void OnRead(const beast::error_code& ec) {
    if (ec) {
      Close();
      return;
    }
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    Request out;
    out.method = ToString(req.method_string());
    out.target = ToString(req.target());
    for (const auto& f : req)
      out.headers.emplace_back(ToString(f.name_string()), ToString(f.value()));
    out.body = std::move(req.body());
    out.connection = connection_;
    server_.OnRequest(shared_from_this(), std::move(out));
  }

  beast::tcp_stream stream_;
  Impl& server_;
  const int connection_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
};

void TestHttpServer::Impl::Accept() {
  acceptor_.async_accept([this](const beast::error_code& ec, tcp::socket socket) {
    if (ec) return;  // the acceptor is closing
    auto session = std::make_shared<Session>(std::move(socket), *this, ++connections_);
    std::erase_if(sessions_, [](const std::weak_ptr<Session>& s) { return s.expired(); });
    sessions_.push_back(session);
    session->Read();
    Accept();
  });
}

void TestHttpServer::Impl::OnRequest(const std::shared_ptr<Session>& session, Request request) {
  Handler handler;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    handler = handler_;
  }
  cv_.notify_all();
  // Outside the lock: the handler may call back into the server.
  Response response = handler ? handler(request) : Response{};
  {
    std::lock_guard lock(mu_);
    if (hold_next_) {
      hold_next_ = false;
      held_arrived_ = true;
      held_ = Held{session, std::move(response)};
      cv_.notify_all();
      return;
    }
  }
  Answer(session, response);
}

void TestHttpServer::Impl::Answer(const std::shared_ptr<Session>& session,
                                  const Response& response) {
  if (response.silent) {
    silent_.push_back(session);
    return;
  }
  if (response.drop) {
    session->Close();
    return;
  }
  session->Write(response);
}

void TestHttpServer::Impl::Release() {
  std::optional<Held> held;
  {
    std::lock_guard lock(mu_);
    hold_next_ = false;
    held.swap(held_);
  }
  if (!held.has_value()) return;
  asio::post(ioc_, [this, held = std::move(*held)] { Answer(held.session, held.response); });
}

void TestHttpServer::Impl::CloseConnections() {
  std::promise<void> done;
  asio::post(ioc_, [&] {
    for (const std::weak_ptr<Session>& s : sessions_) {
      if (const std::shared_ptr<Session> session = s.lock()) session->Close();
    }
    done.set_value();
  });
  GetWithin(done.get_future(), "the test server to close its connections");
}

TestHttpServer::TestHttpServer(Handler handler)
    : impl_(std::make_unique<Impl>(std::move(handler))) {}
TestHttpServer::~TestHttpServer() = default;

uint16_t TestHttpServer::port() const { return impl_->port(); }
std::string TestHttpServer::url() const { return "http://127.0.0.1:" + std::to_string(port()); }
void TestHttpServer::SetHandler(Handler handler) { impl_->SetHandler(std::move(handler)); }
std::vector<TestHttpServer::Request> TestHttpServer::requests() const { return impl_->requests(); }
bool TestHttpServer::AwaitRequests(size_t n, std::chrono::milliseconds timeout) {
  return impl_->AwaitRequests(n, timeout);
}
void TestHttpServer::HoldNextRequest() { impl_->HoldNextRequest(); }
bool TestHttpServer::AwaitHeldRequest(std::chrono::milliseconds timeout) {
  return impl_->AwaitHeldRequest(timeout);
}
void TestHttpServer::Release() { impl_->Release(); }
void TestHttpServer::CloseConnections() { impl_->CloseConnections(); }

}  // namespace chronoq::test
