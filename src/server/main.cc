// chronoqd: the chronoq engine behind an HTTP/JSON API.
//
//   chronoqd [--listen 127.0.0.1:7070] [--data ./data] [--token-file FILE]
//            [--log-format text|json] [--durability normal|full] [--threads 2]
//            [--store postgresql://USER@HOST/DB?schema=NAME]
//
// Every flag has an environment equivalent (CHRONOQ_LISTEN, CHRONOQ_DATA,
// CHRONOQ_STORE, CHRONOQ_TOKEN_FILE or CHRONOQ_TOKEN, CHRONOQ_LOG_FORMAT, ...).
// --store names the store as a URL (EngineOptions::store) and overrides
// --data and --durability, which describe the default SQLite file. SIGTERM and
// SIGINT stop it gracefully: no new connections, long polls answer empty,
// requests in flight finish, commits are flushed, exit 0.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "chronoq/engine.h"

#include "server/api.h"
#include "server/http_server.h"
#include "server/log_format.h"
#include "server/webhook.h"
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <signal.h>

namespace {

using namespace chronoq;

// "host:port", "[v6]:port" or ":port" (all interfaces of IPv4).
Status ParseListen(const std::string& text, server::ServerOptions& out) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument("listen", "must be host:port, e.g. 127.0.0.1:7070");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out.host = host.empty() ? "0.0.0.0" : host;
  const std::string port = text.substr(colon + 1);
  int value = -1;
  try {
    size_t used = 0;
    value = std::stoi(port, &used);
    if (used != port.size()) value = -1;
  } catch (const std::exception&) {
    value = -1;
  }
  if (value < 0 || value > 65535) {
    return Status::InvalidArgument("listen", "port must be 0-65535, not '" + port + "'");
  }
  out.port = static_cast<uint16_t>(value);
  return {};
}

Status ReadTokenFile(const std::string& path, std::string& token) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("token-file", "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.empty()) return Status::InvalidArgument("token-file", path + " is empty");
  return {};
}

// The store URL as it may be printed: without a password, whether in the
// user part ("postgresql://user:secret@host") or a parameter ("password=").
std::string Redacted(std::string url) {
  const size_t scheme = url.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t at = url.find('@', start);
    const size_t slash = url.find('/', start);
    const size_t colon = url.find(':', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash) &&
        colon != std::string::npos && colon < at) {
      url.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t p = url.find("password="); p != std::string::npos; p = url.find("password=", p)) {
    p += 9;
    const size_t end = url.find('&', p);
    url.replace(p, (end == std::string::npos ? url.size() : end) - p, "***");
  }
  return url;
}

int Fail(const Status& s) {
  std::cerr << "chronoqd: " << s.ToString() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chronoqd: durable timed tasks over HTTP/JSON"};
  std::string listen = "127.0.0.1:7070";
  std::string data = "./data";
  std::string token_file;
  std::string log_format = "text";
  std::string durability = "normal";
  int threads = 2;
  int webhook_concurrency = 16;
  int header_timeout_ms = 10'000;
  int idle_timeout_ms = 120'000;
  app.add_option("--listen", listen, "address to listen on (port 0: any free port)")
      ->envname("CHRONOQ_LISTEN")
      ->capture_default_str();
  std::string store;
  app.add_option("--data", data, "data directory")->envname("CHRONOQ_DATA")->capture_default_str();
  app.add_option("--store", store,
                 "store URL, overriding --data and --durability: postgresql://USER@HOST/DB"
                 "[?schema=NAME&...] or sqlite:PATH[?durability=full]")
      ->envname("CHRONOQ_STORE");
  app.add_option("--token-file", token_file,
                 "file holding the bearer token every request but /healthz needs "
                 "(or set CHRONOQ_TOKEN)")
      ->envname("CHRONOQ_TOKEN_FILE");
  app.add_option("--log-format", log_format, "text or json")
      ->envname("CHRONOQ_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--durability", durability,
                 "normal (survives a crash of the process) or full (fsync: survives power loss)")
      ->envname("CHRONOQ_DURABILITY")
      ->check(CLI::IsMember({"normal", "full"}))
      ->capture_default_str();
  app.add_option("--threads", threads, "I/O threads")
      ->envname("CHRONOQ_THREADS")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--webhook-concurrency", webhook_concurrency,
                 "webhook deliveries in flight per queue")
      ->envname("CHRONOQ_WEBHOOK_CONCURRENCY")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--header-timeout-ms", header_timeout_ms,
                 "a client that started a request must send its headers within this")
      ->envname("CHRONOQ_HEADER_TIMEOUT_MS")
      ->check(CLI::Range(1, 3'600'000))
      ->capture_default_str();
  app.add_option("--idle-timeout-ms", idle_timeout_ms,
                 "idle keep-alive connections close after this")
      ->envname("CHRONOQ_IDLE_TIMEOUT_MS")
      ->check(CLI::Range(1, 86'400'000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Logs go to stderr; stdout carries only the "listening on" line.
  spdlog::set_default_logger(spdlog::stderr_color_mt("chronoqd"));
  if (log_format == "json") chronoq::server::UseJsonLogs();

  server::ServerOptions options;
  options.threads = threads;
  options.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  options.idle_timeout = std::chrono::milliseconds(idle_timeout_ms);
  if (Status s = ParseListen(listen, options); !s.ok()) return Fail(s);
  if (!token_file.empty()) {
    if (Status s = ReadTokenFile(token_file, options.token); !s.ok()) return Fail(s);
  } else if (const char* env = std::getenv("CHRONOQ_TOKEN"); env != nullptr && *env != '\0') {
    options.token = env;
  }

  // Signals are taken by sigwait below, never by a handler on a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  EngineOptions engine_options;
  engine_options.store =
      store.empty() ? "sqlite:" + data + "/chronoq.db?durability=" + durability : store;
  auto engine = Engine::Open(engine_options);
  if (!engine.ok()) return Fail(engine.status());

  // Queues that ever held a task with a target are delivered by chronoqd.
  server::WebhookDeliverer webhooks(**engine, {.concurrency = webhook_concurrency});
  auto queues = (*engine)->ListQueues();
  if (!queues.ok()) return Fail(queues.status());
  for (const QueueInfo& q : *queues) {
    if (q.webhooks) webhooks.Serve(q.name);
  }

  boost::asio::thread_pool blocking(2);
  server::Api api(
      **engine, SystemClock(),
      [&blocking](std::function<void()> fn) { boost::asio::post(blocking, std::move(fn)); },
      [&webhooks](const std::string& queue) { webhooks.Serve(queue); });
  server::HttpServer http(options, api);
  if (Status s = http.Start(); !s.ok()) return Fail(s);
  const std::string where = store.empty() ? "data in " + data : "store " + Redacted(store);
  std::printf("chronoqd listening on http://%s:%u (%s%s)\n", options.host.c_str(), http.port(),
              where.c_str(), options.token.empty() ? "" : ", bearer token required");
  std::fflush(stdout);
  spdlog::info("chronoqd {} listening on {}:{}", CHRONOQ_VERSION, options.host, http.port());

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  http.Stop([&] { (*engine)->ReleaseWaitingClaims(); });
  blocking.join();
  webhooks.Stop();
  engine->reset();  // flushes the last commit
  spdlog::info("stopped");
  return 0;
}
