// FastReceiver: the webhook workload's receiver. An HTTP/1.1 server on
// 127.0.0.1 (an ephemeral port) that answers every request at once with
// "200 OK" and no body, keeps connections alive, and counts the connections
// it accepted and the requests it answered. One thread, Boost.Asio: it costs
// the machine as little as a receiver can, so that what is measured is
// chronoqd's side.
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio.hpp>

namespace chronoq::bench {

class FastReceiver {
 public:
  FastReceiver() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FastReceiver() {
    io_.stop();
    thread_.join();
  }
  FastReceiver(const FastReceiver&) = delete;
  FastReceiver& operator=(const FastReceiver&) = delete;

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/hook";
  }
  int64_t requests() const { return requests_.load(); }
  int64_t connections() const { return connections_.load(); }
  // When the `n`th request was answered (steady clock), once it was.
  void WatchFor(int64_t n) { watch_ = n; }
  std::chrono::steady_clock::time_point reached() const { return reached_.load(); }

 private:
  using tcp = boost::asio::ip::tcp;

  class Session : public std::enable_shared_from_this<Session> {
   public:
    Session(FastReceiver& owner, tcp::socket socket) : owner_(owner), socket_(std::move(socket)) {}
    void Read() {
      if (in_.size() - used_ < 16384) in_.resize(std::max<size_t>(in_.size() * 2, 65536));
      socket_.async_read_some(boost::asio::buffer(in_.data() + used_, in_.size() - used_),
                              [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                                if (ec) return;
                                self->used_ += n;
                                self->Answer();
                              });
    }

   private:
    // Answers every whole request in the buffer with one write.
    void Answer() {
      static constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      out_.clear();
      size_t start = 0;
      for (;;) {
        const std::string_view seen(in_.data() + start, used_ - start);
        const size_t end = seen.find("\r\n\r\n");
        if (end == std::string_view::npos) break;
        const size_t whole = end + 4 + ContentLength(seen.substr(0, end));
        if (seen.size() < whole) break;
        start += whole;
        out_ += kOk;
        const int64_t count = ++owner_.requests_;
        if (count == owner_.watch_) owner_.reached_ = std::chrono::steady_clock::now();
      }
      std::copy(in_.begin() + static_cast<std::ptrdiff_t>(start),
                in_.begin() + static_cast<std::ptrdiff_t>(used_), in_.begin());
      used_ -= start;
      if (out_.empty()) return Read();
      boost::asio::async_write(socket_, boost::asio::buffer(out_),
                               [self = shared_from_this()](boost::system::error_code ec, size_t) {
                                 if (!ec) self->Read();
                               });
    }
    static size_t ContentLength(std::string_view head) {
      for (size_t at = 0; (at = head.find("\r\n", at)) != std::string_view::npos;) {
        at += 2;
        constexpr std::string_view kName = "content-length:";
        if (head.size() - at < kName.size()) break;
        bool match = true;
        for (size_t i = 0; i < kName.size() && match; ++i) {
          match = std::tolower(static_cast<unsigned char>(head[at + i])) == kName[i];
        }
        if (match) {
          const std::string value(head.substr(at + kName.size(), 20));
          return std::strtoull(value.c_str(), nullptr, 10);
        }
      }
      return 0;
    }

    FastReceiver& owner_;
    tcp::socket socket_;
    std::string in_;
    size_t used_ = 0;
    std::string out_;
  };

  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      ++connections_;
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Session>(*this, std::move(socket))->Read();
      Accept();
    });
  }

  boost::asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> watch_{-1};
  std::atomic<std::chrono::steady_clock::time_point> reached_{};
};

}  // namespace chronoq::bench
