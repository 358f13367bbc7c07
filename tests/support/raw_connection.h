// RawConnection: a raw TCP connection to chronoqd on 127.0.0.1, closed
// with the object, for the tests that speak to it below HTTP (hostile
// requests, connections that never say anything).
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace chronoq::test {

class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool Write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = write(fd_, bytes.data(), bytes.size());
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Everything chronoqd sends until it closes the connection (or resets it),
  // waiting at most 30 s for each read: a server that neither answers nor
  // closes fails the test instead of hanging it.
  std::string ReadToClose() {
    std::string out;
    char buf[65536];
    for (;;) {
      pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
      if (poll(&p, 1, 30'000) != 1) {
        ADD_FAILURE() << "chronoqd neither answered nor closed within 30 s; read so far: " << out;
        return out;
      }
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace chronoq::test
