// bench_http.h: chronoq-bench's HTTP client side, shared by the http
// target's workloads (http_target.cc) and W9 (failover.cc): a small blocking
// HTTP/1.1 client (one socket per connection, TCP_NODELAY) and a reader of
// claim answers that builds no JSON document, so that on a 2-core machine
// the load generator takes as little CPU from the server as it can.
// Header-only; bench/ only.
#pragma once

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.h"
#include "cli/http_client.h"
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

namespace chronoq::bench {

using Ms = std::chrono::milliseconds;

inline std::string ErrnoText(int err) { return std::strerror(err); }

// The first `max` bytes of `text`, for error messages.
inline std::string Excerpt(std::string_view text, size_t max = 400) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "...";
}

// --- the client ------------------------------------------------------------------

// Where requests go: a resolved address plus what every request carries.
struct Endpoint {
  std::string authority;      // "127.0.0.1:7070": the Host header and messages
  std::string prefix;         // "" or "/chronoq"
  std::string extra_headers;  // "Authorization: Bearer ...\r\n" or ""
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
};

inline Endpoint ResolveUrl(const std::string& url, const std::string& token) {
  Result<cli::BaseUrl> base = cli::ParseBaseUrl(url, "url");
  if (!base.ok()) throw BenchError("--url: " + base.status().ToString());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(base->host.c_str(), base->port.c_str(), &hints, &found);
  if (rc != 0) throw BenchError("cannot resolve " + base->host + ": " + gai_strerror(rc));
  Endpoint ep;
  std::memcpy(&ep.addr, found->ai_addr, found->ai_addrlen);
  ep.addr_len = found->ai_addrlen;
  freeaddrinfo(found);
  ep.authority = base->Authority();
  ep.prefix = base->prefix;
  if (!token.empty()) ep.extra_headers = "Authorization: Bearer " + token + "\r\n";
  return ep;
}

// One keep-alive HTTP/1.1 connection with blocking I/O. Requests are not
// pipelined: Send writes one request and reads its whole answer. Only
// Content-Length framed answers are understood (chronoqd sends nothing else).
// Not thread-safe: one thread per connection.
class Connection {
 public:
  struct Response {
    int status = 0;
    std::string_view body;  // valid until the next Send
  };

  // Connects now. `timeout` bounds each blocking read and write.
  Connection(const Endpoint& ep, Ms timeout) : ep_(ep), buf_(64 << 10) {
    fd_ = socket(ep.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw BenchError("socket: " + ErrnoText(errno));
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd_, reinterpret_cast<const sockaddr*>(&ep.addr), ep.addr_len) != 0) {
      const int err = errno;
      close(fd_);
      throw BenchError("cannot connect to " + ep.authority + ": " + ErrnoText(err));
    }
  }
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `method target` with `body` and returns the answer, whatever its
  // status. Throws BenchError when no complete answer arrives.
  Response Send(std::string_view method, std::string_view target, std::string_view body) {
    what_.assign(method).append(" ").append(target);
    if (fd_ < 0) throw BenchError(what_ + ": the server closed the connection before");
    head_.assign(method)
        .append(" ")
        .append(ep_.prefix)
        .append(target)
        .append(" HTTP/1.1\r\nHost: ")
        .append(ep_.authority)
        .append("\r\n")
        .append(ep_.extra_headers);
    if (!body.empty()) {
      head_.append("Content-Type: application/json\r\nContent-Length: ")
          .append(std::to_string(body.size()))
          .append("\r\n");
    } else if (method == "POST" || method == "PUT") {
      head_.append("Content-Length: 0\r\n");
    }
    head_.append("\r\n");
    WriteAll(head_, body);
    return ReadResponse();
  }

  // As Send, but throws BenchError unless the status is 2xx.
  Response Expect2xx(std::string_view method, std::string_view target, std::string_view body) {
    Response r = Send(method, target, body);
    if (r.status < 200 || r.status > 299) {
      throw BenchError(what_ + ": HTTP " + std::to_string(r.status) + ": " + Excerpt(r.body));
    }
    return r;
  }

  // "POST /v1/tasks" of the last request, for messages.
  const std::string& what() const { return what_; }

 private:
  void WriteAll(std::string_view head, std::string_view body) {
    iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                    {const_cast<char*>(body.data()), body.size()}};
    int first = 0;
    const int count = body.empty() ? 1 : 2;
    while (first < count) {
      msghdr msg{};
      msg.msg_iov = iov + first;
      msg.msg_iovlen = static_cast<size_t>(count - first);
      const ssize_t sent = sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) throw BenchError(what_ + ": write timed out");
        throw BenchError(what_ + ": write to " + ep_.authority + ": " + ErrnoText(errno));
      }
      auto left = static_cast<size_t>(sent);
      while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
      if (first < count) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
  }

  // Reads more bytes into buf_ after used_, growing it when full.
  void ReadSome() {
    if (used_ == buf_.size()) buf_.resize(buf_.size() * 2);
    while (true) {
      const ssize_t got = recv(fd_, buf_.data() + used_, buf_.size() - used_, 0);
      if (got > 0) {
        used_ += static_cast<size_t>(got);
        return;
      }
      if (got == 0) {
        throw BenchError(what_ + ": " + ep_.authority + " closed the connection before answering");
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) throw BenchError(what_ + ": no answer in time");
      throw BenchError(what_ + ": read from " + ep_.authority + ": " + ErrnoText(errno));
    }
  }

  static bool StartsWithNoCase(std::string_view line, std::string_view prefix) {
    if (line.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(line[i])) != prefix[i]) return false;
    }
    return true;
  }

  static std::string_view Trim(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
  }

  Response ReadResponse() {
    used_ = 0;  // requests are not pipelined: nothing of an earlier answer is left
    size_t head_end = std::string_view::npos;
    size_t scanned = 0;
    while (true) {
      const std::string_view seen(buf_.data(), used_);
      const size_t at = seen.find("\r\n\r\n", scanned > 3 ? scanned - 3 : 0);
      if (at != std::string_view::npos) {
        head_end = at + 4;
        break;
      }
      scanned = used_;
      if (used_ > (64 << 10)) throw BenchError(what_ + ": answer headers over 64 KiB");
      ReadSome();
    }
    const std::string_view head(buf_.data(), head_end);
    Response r;
    if (!head.starts_with("HTTP/1.1 ") && !head.starts_with("HTTP/1.0 ")) {
      throw BenchError(what_ + ": not an HTTP answer: " + Excerpt(head, 80));
    }
    r.status = std::atoi(head.data() + 9);
    std::optional<size_t> length;
    bool close_after = head.starts_with("HTTP/1.0 ");
    size_t pos = head.find("\r\n") + 2;
    while (pos < head_end - 2) {
      const size_t eol = head.find("\r\n", pos);
      const std::string_view line = head.substr(pos, eol - pos);
      pos = eol + 2;
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view value = Trim(line.substr(colon + 1));
      if (StartsWithNoCase(line, "content-length:")) {
        length = static_cast<size_t>(std::strtoull(std::string(value).c_str(), nullptr, 10));
      } else if (StartsWithNoCase(line, "transfer-encoding:")) {
        throw BenchError(what_ + ": chunked answers are not supported by the bench client");
      } else if (StartsWithNoCase(line, "connection:")) {
        close_after = StartsWithNoCase(value, "close");
      }
    }
    if (!length) throw BenchError(what_ + ": answer without Content-Length");
    const size_t total = head_end + *length;
    if (buf_.size() < total) buf_.resize(total);
    while (used_ < total) ReadSome();
    if (used_ > total) throw BenchError(what_ + ": unexpected bytes after the answer");
    r.body = std::string_view(buf_.data() + head_end, *length);
    if (close_after) {
      close(fd_);
      fd_ = -1;
    }
    return r;
  }

  const Endpoint ep_;
  int fd_ = -1;
  std::vector<char> buf_;
  size_t used_ = 0;
  std::string head_;
  std::string what_;
};

// --- reading chronoqd's answers --------------------------------------------------------

// A lease as found in a claim answer; the views point into the answer body.
struct LeaseRef {
  std::string_view id;  // as written: generated ids need no escapes
  uint64_t token = 0;
  std::string_view run_at;
  std::string_view payload;  // the JSON value as written
  std::string_view key;      // as written; empty when absent or null
};

// A minimal JSON reader for the fields the bench needs from a claim answer
// ({"tasks":[{...,"id":"..",...,"run_at":"..",...,"token":17},...]}), which
// skips everything else without building a document: parsing every answer
// with a DOM would cost the load generator the CPU the server needs.
class LeaseScanner {
 public:
  LeaseScanner(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  // Appends the leases of the answer to `out`.
  void Scan(std::vector<LeaseRef>& out) {
    Expect('{');
    if (Peek() == '}') return Fail("no tasks");
    bool found = false;
    while (true) {
      const std::string_view key = String();
      Expect(':');
      if (key == "tasks") {
        found = true;
        Expect('[');
        if (Peek() == ']') {
          ++i_;
        } else {
          while (true) {
            out.push_back(Lease());
            if (Next(',', ']') == ']') break;
          }
        }
      } else {
        SkipValue();
      }
      if (Next(',', '}') == '}') break;
    }
    if (!found) Fail("no tasks");
  }

 private:
  LeaseRef Lease() {
    LeaseRef l;
    bool has_id = false, has_token = false, has_run_at = false;
    Expect('{');
    if (Peek() == '}') Fail("an empty task");
    while (true) {
      const std::string_view key = String();
      Expect(':');
      if (key == "id") {
        l.id = String();
        has_id = true;
      } else if (key == "token") {
        l.token = Unsigned();
        has_token = true;
      } else if (key == "run_at") {
        l.run_at = String();
        has_run_at = true;
      } else if (key == "payload") {
        Ws();
        const size_t start = i_;
        SkipValue();
        l.payload = s_.substr(start, i_ - start);
      } else if (key == "key" && Peek() == '"') {
        l.key = String();
      } else {
        SkipValue();
      }
      if (Next(',', '}') == '}') break;
    }
    if (!has_id || !has_token || !has_run_at) Fail("a task without id, token or run_at");
    return l;
  }

  [[noreturn]] void Fail(const std::string& why) const {
    throw BenchError(what_ + ": unexpected answer (" + why + " at byte " + std::to_string(i_) +
                     "): " + Excerpt(s_));
  }
  void Ws() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) {
      ++i_;
    }
  }
  char Peek() {
    Ws();
    if (i_ >= s_.size()) Fail("end of text");
    return s_[i_];
  }
  void Expect(char c) {
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++i_;
  }
  char Next(char a, char b) {
    const char c = Peek();
    if (c != a && c != b) Fail(std::string("expected '") + a + "' or '" + b + "'");
    ++i_;
    return c;
  }
  // A string without its quotes; escapes are kept as written.
  std::string_view String() {
    Expect('"');
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ >= s_.size()) Fail("unterminated string");
    return s_.substr(start, i_++ - start);
  }
  uint64_t Unsigned() {
    Ws();
    uint64_t v = 0;
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') v = v * 10 + (s_[i_++] - '0');
    if (i_ == start) Fail("expected a number");
    return v;
  }
  void SkipValue() {
    const char c = Peek();
    if (c == '"') {
      String();
    } else if (c == '{' || c == '[') {
      int depth = 0;
      while (true) {
        const char d = Peek();
        if (d == '"') {
          String();
          continue;
        }
        ++i_;
        if (d == '{' || d == '[') ++depth;
        if ((d == '}' || d == ']') && --depth == 0) return;
      }
    } else {  // number, true, false, null
      while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ') {
        ++i_;
      }
    }
  }

  std::string_view s_;
  const std::string& what_;
  size_t i_ = 0;
};

// Claims up to `max` tasks of `queue`; appends the leases to `out` (views
// into the connection's buffer, valid until its next request).
inline void Claim(Connection& c, const std::string& path, const std::string& body,
                  std::vector<LeaseRef>& out) {
  const Connection::Response r = c.Expect2xx("POST", path, body);
  LeaseScanner(r.body, c.what()).Scan(out);
}

// Appends `"acks":[{"id":..,"token":..},...]` for `leases` (generated ids
// need no escapes).
inline void AppendAcks(std::string& out, const std::vector<LeaseRef>& leases) {
  out += "\"acks\":[";
  for (size_t i = 0; i < leases.size(); ++i) {
    if (i > 0) out += ',';
    out.append("{\"id\":\"").append(leases[i].id).append("\",\"token\":");
    out.append(std::to_string(leases[i].token)).append("}");
  }
  out += ']';
}

// Throws unless the ack results in `body` from `from` on (POST /v1/acks,
// or a claim's "acks") count `n` successes.
inline void CheckAcked(std::string_view body, size_t from, size_t n, const std::string& what) {
  // Generated ids hold no quotes, so these markers occur only as results.
  size_t oks = 0;
  for (size_t at = body.find("\"ok\":true", from); at != std::string_view::npos;
       at = body.find("\"ok\":true", at + 9)) {
    ++oks;
  }
  if (oks != n) {
    throw BenchError(what + ": " + std::to_string(n - oks) + " of " + std::to_string(n) +
                     " acks failed: " + Excerpt(body));
  }
}

// Acknowledges `leases` with one POST /v1/acks; throws unless every ack
// succeeded. `body` is scratch space reused across calls.
inline void AckAll(Connection& c, const std::vector<LeaseRef>& leases, std::string& body) {
  body.assign("{");
  AppendAcks(body, leases);
  body += '}';
  const Connection::Response r = c.Expect2xx("POST", "/v1/acks", body);
  CheckAcked(r.body, 0, leases.size(), "POST /v1/acks");
}

// The counts of `queue` ({"scheduled":..,"running":..,"succeeded":..,...}).
inline json QueueCounts(Connection& c, const std::string& queue) {
  const Connection::Response r = c.Expect2xx("GET", "/v1/queues/" + cli::PercentEncode(queue), "");
  try {
    return json::parse(r.body).at("counts");
  } catch (const std::exception& e) {
    throw BenchError(c.what() + ": unexpected answer (" + e.what() + "): " + Excerpt(r.body));
  }
}

inline int64_t Count(const json& counts, const char* state) {
  return counts.at(state).get<int64_t>();
}

}  // namespace chronoq::bench
