// cli/http_client.h: a small synchronous HTTP/1.1 client for the chronoq CLI.
//
// HttpClient talks plain http to one server (no TLS) and keeps one
// keep-alive connection open across requests, so `chronoq list --all` pages
// over a single connection:
//
//   auto client = HttpClient::Create("http://127.0.0.1:7070", std::chrono::seconds(30));
//   if (!client.ok()) return client.status();
//   auto r = (*client)->Send("GET", "/healthz", "", {});
//   if (!r.ok()) std::cerr << r.status().message();  // "cannot connect to 127.0.0.1:7070: ..."
//
// Boost.Beast stays inside http_client.cc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/result.h"

namespace chronoq::cli {

// Header name and value, in order. Names are compared case-insensitively.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 0;  // 200, 404, ...
  HttpHeaders headers;
  std::string body;

  // The first header named `name` (any case), or nullopt.
  std::optional<std::string> Header(std::string_view name) const;
};

// The parts of a base URL "http://host[:port][/prefix]".
struct BaseUrl {
  std::string host;    // "127.0.0.1", "localhost", "::1" (brackets removed)
  std::string port;    // "7070"; "80" when the URL names none
  std::string prefix;  // "" or "/chronoq": prepended to every target

  // "host:port" as written in errors and in the Host header.
  std::string Authority() const;
};

// Parses a base URL. Only http is supported. Errors are InvalidArgument
// naming `field`.
Result<BaseUrl> ParseBaseUrl(std::string_view url, std::string_view field = "url");

// Percent-encodes everything but the unreserved characters A-Z a-z 0-9 - . _ ~
// (RFC 3986), so the result is safe as one path segment or query value.
std::string PercentEncode(std::string_view text);

// Not thread-safe: one request at a time.
class HttpClient {
 public:
  // Parses `base_url` (see ParseBaseUrl); does not connect yet. `timeout`
  // bounds each Send() as a whole: connect, write and read.
  static Result<std::unique_ptr<HttpClient>> Create(std::string_view base_url, Duration timeout);

  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `method` (GET, POST, ...) for `target` ("/v1/tasks?queue=a", already
  // encoded; the base URL's prefix is prepended) with `body` and `headers`
  // (Host, User-Agent and Content-Length are added). Any HTTP status is a
  // success here; errors mean no response arrived:
  //   Unavailable: cannot resolve, connect, write or read ("cannot connect to
  //     127.0.0.1:7070: connection refused").
  //   DeadlineExceeded: no complete response within the timeout.
  // A kept-alive connection that the server closed while idle is reopened
  // once, transparently.
  Result<HttpResponse> Send(std::string_view method, std::string_view target, std::string_view body,
                            const HttpHeaders& headers);

  // The timeout for the following Send() calls.
  void set_timeout(Duration timeout);
  Duration timeout() const;
  const BaseUrl& base_url() const;

 private:
  class Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace chronoq::cli
