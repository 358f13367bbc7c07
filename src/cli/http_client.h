// cli/http_client.h: a small synchronous HTTP/1.1 client for the chronoq CLI.
//
// HttpClient talks http or https (TLS 1.2+, OpenSSL) to one server and keeps
// one keep-alive connection open across requests, so `chronoq list --all`
// pages over a single connection. An https server's certificate is always
// verified, and its host name (or IP address) checked: against the system's
// trusted CAs, or only those of TlsOptions::ca_file (chronoq --ca-file).
//
//   auto client = HttpClient::Create("http://127.0.0.1:7070", std::chrono::seconds(30));
//   if (!client.ok()) return client.status();
//   auto r = (*client)->Send("GET", "/healthz", "", {});
//   if (!r.ok()) std::cerr << r.status().message();  // "cannot connect to 127.0.0.1:7070: ..."
//
// MultiHttpClient is what the commands use: the same Send() over a list of
// chronoqd nodes ("http://a:7070,http://b:7070"), any of which answers any
// request, moving on to the next node when one cannot be reached or answers
// 503. With one URL it is exactly an HttpClient.
//
// Failover rules (MultiHttpClient::Send):
//   - The request goes to the current node first: the one that answered last
//     (at first, the first of the list). Its keep-alive connection stays open,
//     so a long `chronoq work` or `list --all` sticks to one node.
//   - Moving on to the next node is always safe when nothing reached the
//     server: it could not be resolved or connected to (refused, timed out
//     while connecting), or the connection failed before the request was
//     written in full. It is also safe when the node answered 503
//     (unavailable: chronoqd stopping, its store down); it did not act.
//   - A request that was written in full and then got no answer (the
//     connection was reset or closed, or the timeout ran out while waiting)
//     may have been applied by that node. It is sent to the next node only
//     if its method is idempotent: GET, HEAD, PUT, DELETE (a DELETE applied
//     twice may answer 404 the second time). A POST (or PATCH) is not resent:
//     Send() returns the error, naming the node.
//   - Each node is tried at most once per request: one round over the list,
//     starting at the current node. `timeout` bounds each node's attempt, so
//     a request may take up to one timeout per node.
//   - When every node tried answered 503, the last 503 answer is returned as
//     the response (the caller shows the server's error, as with one node);
//     otherwise, when no node gave a usable answer, the error lists each node
//     and what went wrong: "no node answered: http://a:7070: connection
//     refused; http://b:7070: 503 store_unavailable: ...".
// HttpClient's own rule still applies within one node, whatever the method:
// when a kept-alive connection is closed by the server just as a request
// goes out (most likely it was idle and never read it), the request is sent
// once more on a new connection to the same node; should that fail too, the
// request counts as sent if the first copy was written in full
// (HttpClient::Send, HttpClient::Failure).
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

// The parts of a base URL "http[s]://host[:port][/prefix]".
struct BaseUrl {
  std::string host;    // "127.0.0.1", "localhost", "::1" (brackets removed)
  std::string port;    // "7070"; "80" (http) or "443" (https) when the URL names none
  std::string prefix;  // "" or "/chronoq": prepended to every target
  bool tls = false;    // https

  // "host:port" as written in errors and in the Host header.
  std::string Authority() const;
};

// Parses a base URL: http:// or https:// (none: http). Errors are
// InvalidArgument naming `field`.
Result<BaseUrl> ParseBaseUrl(std::string_view url, std::string_view field = "url");

// Percent-encodes everything but the unreserved characters A-Z a-z 0-9 - . _ ~
// (RFC 3986), so the result is safe as one path segment or query value.
std::string PercentEncode(std::string_view text);

// How an https server is trusted.
struct TlsOptions {
  // A PEM file of the CA certificates to trust (a private CA) instead of the
  // system's; empty: the system's.
  std::string ca_file;
  // What names ca_file in errors: "--ca-file" or "CHRONOQ_CA_FILE".
  std::string ca_file_field = "ca-file";
};

// Whether `tls.ca_file` (if any) holds PEM certificates that can be trusted:
// InvalidArgument naming tls.ca_file_field with the reason otherwise.
Status CheckTlsOptions(const TlsOptions& tls);

// Not thread-safe: one request at a time.
class HttpClient {
 public:
  // Parses `base_url` (see ParseBaseUrl); does not connect yet. `timeout`
  // bounds each Send() as a whole: connect, TLS handshake, write and read.
  // `tls` is used for an https URL (errors as CheckTlsOptions's).
  static Result<std::unique_ptr<HttpClient>> Create(std::string_view base_url, Duration timeout,
                                                    const TlsOptions& tls = {});

  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `method` (GET, POST, ...) for `target` ("/v1/tasks?queue=a", already
  // encoded; the base URL's prefix is prepended) with `body` and `headers`
  // (Host, User-Agent and Content-Length are added). Any HTTP status is a
  // success here; errors mean no response arrived:
  //   Unavailable: cannot resolve, connect, write or read ("cannot connect to
  //     127.0.0.1:7070: connection refused"), or the TLS handshake failed
  //     ("TLS handshake with 127.0.0.1:7070 failed: certificate verify
  //     failed (unable to get local issuer certificate)").
  //   DeadlineExceeded: no complete response within the timeout.
  // A kept-alive connection that the server closed while idle is reopened
  // once, transparently: checked before the request is written, and, should
  // the server close it just as the request went out (no byte of an answer
  // came), by sending the request once more on a new connection.
  Result<HttpResponse> Send(std::string_view method, std::string_view target, std::string_view body,
                            const HttpHeaders& headers);

  // How far the last Send() that failed got. Meaningless after a success.
  struct Failure {
    // The request was written in full before the failure (the connection
    // was lost, or the timeout ran out, while waiting for the answer): the
    // server may have acted on it. False when it never reached the server
    // whole: resolving, connecting or writing failed.
    bool sent = false;
    // What went wrong, without the server's name: "connection refused",
    // "timed out connecting after 30s", "no answer within 30s".
    std::string reason;
  };
  const Failure& last_failure() const;

  // The timeout for the following Send() calls.
  void set_timeout(Duration timeout);
  Duration timeout() const;
  const BaseUrl& base_url() const;

 private:
  class Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Several chronoqd nodes behind one Send(); see the failover rules at the top
// of this file. Owns one HttpClient per node, created when the node is first
// tried. Not thread-safe: one request at a time; a thread of its own makes
// its own MultiHttpClient (Create() again with the same list).
class MultiHttpClient {
 public:
  // Parses `urls`: one base URL, or several separated by commas (spaces
  // around each are dropped). Each is checked with ParseBaseUrl. Errors are
  // InvalidArgument naming `field`; with several URLs the message says which
  // entry is bad ("--url: entry 2 (ftp://b:7070): must start with http://
  // or https://"), with one it is ParseBaseUrl's. `tls` is checked
  // (CheckTlsOptions) and used for every https node. Does not connect.
  static Result<std::unique_ptr<MultiHttpClient>> Create(std::string_view urls, Duration timeout,
                                                         std::string_view field = "url",
                                                         TlsOptions tls = {});

  ~MultiHttpClient();
  MultiHttpClient(const MultiHttpClient&) = delete;
  MultiHttpClient& operator=(const MultiHttpClient&) = delete;

  // HttpClient::Send over the nodes, with failover. Any HTTP status but 503
  // is a success here, as is a 503 when every node tried answered 503 (the
  // last one). Errors, when no node gave such an answer: with one node, its
  // HttpClient error unchanged; with several, Unavailable listing each node
  // tried ("no node answered: http://a:7070: connection refused; ..."), or
  // naming the node that may have applied a request that is not resent.
  Result<HttpResponse> Send(std::string_view method, std::string_view target, std::string_view body,
                            const HttpHeaders& headers);

  // Whether the last Send() got through to some node: an answer came (any
  // status), or a request was written in full before its connection failed.
  // False when no node could be reached at all.
  bool last_reached_node() const { return last_reached_node_; }

  // The timeout for the following Send() calls, per node tried.
  void set_timeout(Duration timeout);
  Duration timeout() const { return timeout_; }
  // The URLs, as given (trimmed), in order.
  const std::vector<std::string>& urls() const { return urls_; }
  // The URL of the current node: the first request goes there.
  const std::string& current_url() const { return urls_[current_]; }
  const TlsOptions& tls() const { return tls_; }

 private:
  MultiHttpClient(std::vector<std::string> urls, Duration timeout, TlsOptions tls);
  // The node's client, created on first use.
  Result<HttpClient*> Node(size_t i);

  const std::vector<std::string> urls_;
  std::vector<std::unique_ptr<HttpClient>> clients_;  // per URL; null until first tried
  Duration timeout_;
  const TlsOptions tls_;
  size_t current_ = 0;  // index into urls_
  bool last_reached_node_ = false;
};

}  // namespace chronoq::cli
