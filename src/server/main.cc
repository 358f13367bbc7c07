// chronoqd: the chronoq engine behind an HTTP/JSON API.
//
//   chronoqd [--listen 127.0.0.1:7070] [--data ./data] [--token-file FILE]
//            [--insecure-no-auth] [--log-format text|json] [--durability normal|full] [--threads 2]
//            [--store postgresql://USER@HOST/DB?schema=NAME] [--tls-cert FILE --tls-key FILE]
//            [--cluster [--node-id ID] [--advertise http://HOST:PORT]
//             [--cluster-token-file FILE] [--heartbeat-ms 500] [--lease-ms 3000]]
//            [--attempt-history 10]
//
// Every flag has an environment equivalent (CHRONOQ_LISTEN, CHRONOQ_DATA,
// CHRONOQ_STORE, CHRONOQ_TOKEN_FILE or CHRONOQ_TOKEN, CHRONOQ_LOG_FORMAT, ...).
// --store names the store as a URL (EngineOptions::store) and overrides
// --data and --durability, which describe the default SQLite file. SIGTERM and
// SIGINT stop it gracefully: no new connections, long polls answer empty,
// requests in flight finish, commits are flushed, exit 0. SIGHUP reads the
// token file again (server/tokens.h): new tokens apply to the next request,
// and a bad file changes nothing (the error is logged).
//
// --cluster makes this chronoqd one node of several on one PostgreSQL schema
// (cluster/node.h): it leads or stands by, and answers every request either
// way (docs/OPERATIONS.md, "Running a cluster").
//
// --tls-cert and --tls-key make every connection TLS (1.2 or later): the
// listening line then says https://. Not with --cluster: a node forwards
// requests to the leader over plain HTTP (cluster/forwarder.h), so the two
// are refused together.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "chronoq/engine.h"

#include "cluster/node.h"
#include "engine/store_url.h"
#include "server/api.h"
#include "server/http_server.h"
#include "server/log_format.h"
#include "server/tokens.h"
#include "server/webhook.h"
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

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

Status ReadTokenFile(const std::string& path, std::string& token, std::string_view field) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument(field, "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.empty()) return Status::InvalidArgument(field, path + " is empty");
  return {};
}

// A token from `file` (the flag `field`) when one is named, else from the
// environment variable `env`; left as it is when neither gives one.
Status ReadToken(const std::string& file, std::string_view field, const char* env,
                 std::string& token) {
  if (!file.empty()) return ReadTokenFile(file, token, field);
  if (const char* value = std::getenv(env); value != nullptr && *value != '\0') token = value;
  return {};
}

// "1 token", "3 tokens".
std::string TokensWord(size_t n) { return std::to_string(n) + (n == 1 ? " token" : " tokens"); }

// The API's tokens: the --token-file's (read again on SIGHUP), else
// CHRONOQ_TOKEN's single admin token; null when neither is given.
Status LoadTokens(const std::string& file, std::unique_ptr<server::TokenRegistry>& tokens) {
  if (!file.empty()) {
    CHRONOQ_ASSIGN_OR_RETURN(tokens, server::TokenRegistry::FromFile(file));
    spdlog::info("{} from {}: {}", TokensWord(tokens->Current()->tokens().size()), file,
                 tokens->Current()->Describe());
  } else if (const char* value = std::getenv("CHRONOQ_TOKEN"); value != nullptr && *value != '\0') {
    tokens = std::make_unique<server::TokenRegistry>(server::TokenSet::Single(value));
  }
  return {};
}

// SIGHUP: reads the token file again; on an error the tokens in force stay.
void ReloadTokens(server::TokenRegistry* tokens) {
  if (tokens == nullptr) {
    spdlog::info("SIGHUP: chronoqd has no token (no --token-file): nothing to reload");
    return;
  }
  Result<std::shared_ptr<const server::TokenSet>> loaded = tokens->Reload();
  if (loaded.ok()) {
    spdlog::info("SIGHUP: reloaded {} from {}: {}", TokensWord((*loaded)->tokens().size()),
                 tokens->path(), (*loaded)->Describe());
  } else if (loaded.status().code() == StatusCode::kFailedPrecondition) {
    spdlog::info("SIGHUP: {}", loaded.status().message());
  } else {
    spdlog::error("SIGHUP: tokens not reloaded, the {} in force stay: {}",
                  TokensWord(tokens->Current()->tokens().size()), loaded.status().message());
  }
}

// Waits for SIGTERM or SIGINT and returns it; reloads the tokens on each
// SIGHUP meanwhile.
int WaitForStop(const sigset_t& signals, server::TokenRegistry* tokens) {
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGHUP) return sig;
    ReloadTokens(tokens);
  }
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

// Hands requests to the node once it exists: chronoqd in a cluster learns
// its port (and so its default node id and address) only once it listens.
class LateHandler final : public server::RequestHandler {
 public:
  void Set(server::RequestHandler* target) { target_.store(target); }
  void Handle(server::ApiRequest request, server::Respond respond) override {
    if (server::RequestHandler* target = target_.load()) {
      return target->Handle(std::move(request), std::move(respond));
    }
    respond(server::ErrorResponse(
        Status(StatusCode::kUnavailable, "the node is starting", {}, StatusReason::kNotLeader)));
  }
  server::Scope RequiredScope(std::string_view method, std::string_view target) const override {
    return cluster::Node::ScopeOf(method, target);
  }

 private:
  std::atomic<server::RequestHandler*> target_{nullptr};
};

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Every connection holds a descriptor, and the soft limit is often 1024
// (systemd's default for services) while the hard one is far higher: raise
// the soft limit to the hard one, as servers do, and return it.
rlim_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
  }
  return limit.rlim_cur;
}

// Only this machine can reach `host`: a loopback address, or localhost.
bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code error;
  const boost::asio::ip::address address = boost::asio::ip::make_address(host, error);
  return !error && address.is_loopback();
}

// chronoqd serves anyone who reaches it when it has no token: fine on
// loopback, a hole anywhere else unless the operator says so, loudly.
Status CheckExposure(const server::ServerOptions& options, bool insecure_no_auth) {
  if (options.tokens != nullptr || IsLoopback(options.host)) return {};
  if (!insecure_no_auth) {
    return Status::InvalidArgument(
        "listen", options.host +
                      " is not a loopback address and no token is set: anyone who reaches it "
                      "could run, change or delete every task; give --token-file (or "
                      "CHRONOQ_TOKEN), or --insecure-no-auth to serve it without one");
  }
  spdlog::warn(
      "--insecure-no-auth: serving {} WITHOUT AUTHENTICATION: anyone who reaches this address "
      "can run, change or delete every task",
      options.host);
  return {};
}

int Fail(const Status& s) {
  std::cerr << "chronoqd: " << s.ToString() << "\n";
  return 2;
}

// chronoqd --cluster: the node answers every request; it runs the engine
// only while it leads.
int RunClusterNode(server::ServerOptions options, const std::string& store, std::string node_id,
                   std::string advertise, int heartbeat_ms, int lease_ms, int webhook_concurrency,
                   Duration stats_interval, sigset_t signals, server::TokenRegistry* tokens,
                   int attempt_history) {
  if (store.empty()) {
    return Fail(Status::InvalidArgument("cluster", "needs --store naming a PostgreSQL database"));
  }
  Result<StoreLocation> location = ParseStoreUrl(store);
  if (!location.ok()) return Fail(location.status());
  if (!location->postgres) {
    return Fail(Status::InvalidArgument(
        "cluster", "the nodes of a cluster share a PostgreSQL store, not " + Redacted(store)));
  }
  LateHandler late;
  server::HttpServer http(options, late);
  if (Status s = http.Start(); !s.ok()) return Fail(s);
  const std::string port = std::to_string(http.port());
  const bool any = options.host == "0.0.0.0" || options.host == "::";
  const std::string host = any ? HostName() : options.host;
  const bool v6 = host.find(':') != std::string::npos;
  if (node_id.empty()) node_id = HostName() + ":" + port;
  if (advertise.empty()) advertise = "http://" + (v6 ? "[" + host + "]" : host) + ":" + port;

  boost::asio::thread_pool blocking(2);
  cluster::NodeOptions node_options;
  node_options.node_id = node_id;
  node_options.advertise = advertise;
  node_options.store = *location->postgres;
  node_options.heartbeat = std::chrono::milliseconds(heartbeat_ms);
  node_options.lease = std::chrono::milliseconds(lease_ms);
  node_options.cluster_token = options.cluster_token;
  node_options.version = CHRONOQ_VERSION;
  node_options.webhook_concurrency = webhook_concurrency;
  node_options.stats_interval = stats_interval;
  node_options.engine.attempt_history = attempt_history;
  node_options.run_blocking = [&blocking](std::function<void()> fn) {
    boost::asio::post(blocking, std::move(fn));
  };
  cluster::Node node(std::move(node_options));
  if (Status s = node.Start(); !s.ok()) return Fail(s);
  late.Set(&node);
  std::printf("chronoqd listening on http://%s:%u (cluster node %s, store %s%s)\n",
              options.host.c_str(), http.port(), node_id.c_str(), Redacted(store).c_str(),
              options.tokens == nullptr ? "" : ", bearer token required");
  std::fflush(stdout);
  spdlog::info("chronoqd {} listening on {}:{} as cluster node {} ({})", CHRONOQ_VERSION,
               options.host, http.port(), node_id, advertise);

  const int sig = WaitForStop(signals, tokens);
  spdlog::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  http.Stop([&] { node.ReleaseWaitingClaims(); });
  blocking.join();
  node.Stop();  // a leader closes its engine and frees the lock for a standby
  spdlog::info("stopped");
  return 0;
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
  int stats_interval_ms = 10'000;
  int attempt_history = kDefaultAttemptHistory;
  bool insecure_no_auth = false;
  app.add_option("--listen", listen,
                 "address to listen on (port 0: any free port); other than loopback only with "
                 "a token or --insecure-no-auth")
      ->envname("CHRONOQ_LISTEN")
      ->capture_default_str();
  app.add_flag("--insecure-no-auth", insecure_no_auth,
               "serve a non-loopback --listen address without a token (anyone who reaches it "
               "can do anything)")
      ->envname("CHRONOQ_INSECURE_NO_AUTH");
  std::string store;
  app.add_option("--data", data, "data directory")->envname("CHRONOQ_DATA")->capture_default_str();
  app.add_option("--store", store,
                 "store URL, overriding --data and --durability: postgresql://USER@HOST/DB"
                 "[?schema=NAME&...] or sqlite:PATH[?durability=full]")
      ->envname("CHRONOQ_STORE");
  app.add_option("--token-file", token_file,
                 "file of the bearer tokens (one secret, or lines of NAME SCOPE SECRET with "
                 "scope read, write or admin) every request but /healthz needs; read again on "
                 "SIGHUP (or set CHRONOQ_TOKEN to one admin secret)")
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
  app.add_option("--stats-interval-ms", stats_interval_ms,
                 "how often the statistics behind GET /v1/stats/history (the dashboard's charts) "
                 "are sampled; an hour of samples is kept")
      ->envname("CHRONOQ_STATS_INTERVAL_MS")
      ->check(CLI::Range(100, 600'000))
      ->capture_default_str();
  std::string tls_cert;
  std::string tls_key;
  app.add_option("--tls-cert", tls_cert,
                 "PEM file of the server's certificate (and any intermediates): serve TLS 1.2+ "
                 "(https://) instead of plain HTTP; needs --tls-key")
      ->envname("CHRONOQ_TLS_CERT");
  app.add_option("--tls-key", tls_key,
                 "PEM file of the certificate's private key, unencrypted; needs --tls-cert")
      ->envname("CHRONOQ_TLS_KEY");
  bool cluster = false;
  std::string node_id;
  std::string advertise;
  std::string cluster_token_file;
  int heartbeat_ms = 500;
  int lease_ms = 3000;
  app.add_flag("--cluster", cluster,
               "run as one node of several on the --store PostgreSQL schema: lead or stand by")
      ->envname("CHRONOQ_CLUSTER");
  app.add_option("--node-id", node_id,
                 "this node's name in the cluster, and in the attempt histories of tasks "
                 "(default: HOST:PORT)")
      ->envname("CHRONOQ_NODE_ID");
  app.add_option("--attempt-history", attempt_history,
                 "finished attempts kept per task (GET /v1/tasks/{id}?attempts=true); 0 keeps "
                 "none")
      ->envname("CHRONOQ_ATTEMPT_HISTORY")
      ->check(CLI::Range(0, kMaxAttemptHistory))
      ->capture_default_str();
  app.add_option("--advertise", advertise,
                 "where the other nodes reach this one, http://HOST:PORT (default: the "
                 "listen address, the host name if it listens on all interfaces)")
      ->envname("CHRONOQ_ADVERTISE");
  app.add_option("--cluster-token-file", cluster_token_file,
                 "file holding the token nodes send each other (or set CHRONOQ_CLUSTER_TOKEN; "
                 "default: the API token)")
      ->envname("CHRONOQ_CLUSTER_TOKEN_FILE");
  app.add_option("--heartbeat-ms", heartbeat_ms, "how often each node writes its heartbeat")
      ->envname("CHRONOQ_HEARTBEAT_MS")
      ->check(CLI::Range(10, 60'000))
      ->capture_default_str();
  app.add_option("--lease-ms", lease_ms,
                 "a leader whose heartbeat stopped this long is replaced (at least twice "
                 "--heartbeat-ms)")
      ->envname("CHRONOQ_LEASE_MS")
      ->check(CLI::Range(20, 600'000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Logs go to stderr; stdout carries only the "listening on" line.
  spdlog::set_default_logger(spdlog::stderr_color_mt("chronoqd"));
  if (log_format == "json") chronoq::server::UseJsonLogs();

  server::ServerOptions options;
  options.threads = threads;
  // Descriptors kept for the store, webhooks and logs, beyond connections.
  constexpr rlim_t kReservedFiles = 64;
  const rlim_t files = RaiseOpenFileLimit();
  options.max_connections = files > 2 * kReservedFiles ? files - kReservedFiles : files / 2;
  spdlog::info("open-file limit {}: at most {} connections at once", files,
               options.max_connections);
  options.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  options.idle_timeout = std::chrono::milliseconds(idle_timeout_ms);
  if (Status s = ParseListen(listen, options); !s.ok()) return Fail(s);
  std::unique_ptr<server::TokenRegistry> tokens;
  if (Status s = LoadTokens(token_file, tokens); !s.ok()) return Fail(s);
  options.tokens = tokens.get();
  if (Status s = CheckExposure(options, insecure_no_auth); !s.ok()) return Fail(s);
  options.tls_cert_file = tls_cert;
  options.tls_key_file = tls_key;
  if (Status s = server::CheckTls(options); !s.ok()) return Fail(s);
  const bool tls = !tls_cert.empty();
  if (tls && cluster) {
    return Fail(Status::InvalidArgument(
        "tls-cert",
        "--tls-cert cannot be used with --cluster: the nodes forward requests to "
        "the leader over plain HTTP (docs/OPERATIONS.md, \"TLS\")"));
  }
  const char* scheme = tls ? "https" : "http";

  // Signals are taken by sigwait below, never by a handler on a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (cluster) {
    Status s = ReadToken(cluster_token_file, "cluster-token-file", "CHRONOQ_CLUSTER_TOKEN",
                         options.cluster_token);
    if (!s.ok()) return Fail(s);
    if (options.cluster_token.empty() && tokens != nullptr) {
      // By default the nodes send each other the API's token: only when
      // there is one secret, not named tokens.
      if (!tokens->Current()->single_secret()) {
        return Fail(
            Status::InvalidArgument("cluster-token-file",
                                    "needed when --token-file holds named tokens: the nodes send "
                                    "each other one secret of their own"));
      }
      s = ReadToken(token_file, "token-file", "CHRONOQ_TOKEN", options.cluster_token);
      if (!s.ok()) return Fail(s);
    }
    return RunClusterNode(options, store, node_id, advertise, heartbeat_ms, lease_ms,
                          webhook_concurrency, std::chrono::milliseconds(stats_interval_ms),
                          signals, tokens.get(), attempt_history);
  }

  EngineOptions engine_options;
  engine_options.store =
      store.empty() ? "sqlite:" + data + "/chronoq.db?durability=" + durability : store;
  engine_options.attempt_history = attempt_history;
  // Before listening the port is known only when --listen names one.
  engine_options.node =
      !node_id.empty() ? node_id
                       : HostName() + (options.port != 0 ? ":" + std::to_string(options.port) : "");
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
      [&webhooks](const std::string& queue) { webhooks.Serve(queue); },
      std::chrono::milliseconds(stats_interval_ms));
  server::HttpServer http(options, api);
  if (Status s = http.Start(); !s.ok()) return Fail(s);
  const std::string where = store.empty() ? "data in " + data : "store " + Redacted(store);
  std::printf("chronoqd listening on %s://%s:%u (%s%s)\n", scheme, options.host.c_str(),
              http.port(), where.c_str(),
              options.tokens == nullptr ? "" : ", bearer token required");
  std::fflush(stdout);
  spdlog::info("chronoqd {} listening on {}://{}:{}", CHRONOQ_VERSION, scheme, options.host,
               http.port());

  const int sig = WaitForStop(signals, tokens.get());
  spdlog::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  http.Stop([&] { (*engine)->ReleaseWaitingClaims(); });
  blocking.join();
  webhooks.Stop();
  engine->reset();  // flushes the last commit
  spdlog::info("stopped");
  return 0;
}
