// chronoqd: the chronoq engine behind an HTTP/JSON API.
//
//   chronoqd [--listen 127.0.0.1:7070] [--data ./data] [--token-file FILE]
//            [--insecure-no-auth] [--log-format text|json] [--durability normal|full] [--threads 2]
//            [--store postgresql://USER@HOST/DB?schema=NAME] [--tls-cert FILE --tls-key FILE]
//            [--cluster [--node-id ID] [--advertise http://HOST:PORT]
//             [--cluster-token-file FILE] [--heartbeat-ms 500] [--lease-ms 3000]]
//            [--attempt-history 10] [--claim-ahead-ms 10] [--config FILE] [--print-config]
//            [--check-config]
//
// Every flag has an environment variable and a key of the TOML --config
// file (CHRONOQ_CONFIG), all named in one table (server/config.h); a flag
// wins over its variable, which wins over the file, which wins over the
// default. --print-config prints the result and where each value came from;
// --check-config runs the checks start-up makes (Prepare() below) without
// listening or opening the store, and prints ok. A bad configuration exits
// 2 before anything starts. CHRONOQ_TOKEN (one admin secret, when no token
// file is set) has no flag and no key: a secret stays out of the file.
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
#include <atomic>
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
#include "server/config.h"
#include "server/http_server.h"
#include "server/log_format.h"
#include "server/tokens.h"
#include "server/webhook.h"
#include "server/webhook_signing.h"
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef CHRONOQ_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace {

using namespace chronoq;

// The allocator this chronoqd runs on (cmake/ChronoqHelpers.cmake), for its
// start-up line: asked of jemalloc itself, so the line shows that it is the
// one in use.
std::string AllocatorName() {
#ifdef CHRONOQ_JEMALLOC
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", static_cast<void*>(&version), &size, nullptr, 0) == 0 && version) {
    return std::string("jemalloc ") + version;
  }
  return "jemalloc (no version)";
#else
  return "the C library's malloc (or a sanitizer's)";
#endif
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

// SIGHUP: reads the webhook secrets file again, when there is one; on an
// error the secrets in force stay.
void ReloadWebhookSecrets(server::WebhookSecretRegistry* secrets) {
  if (secrets == nullptr) return;
  Result<std::shared_ptr<const server::WebhookSecrets>> loaded = secrets->Reload();
  if (loaded.ok()) {
    spdlog::info("SIGHUP: reloaded the webhook secrets from {}: {}", secrets->path(),
                 (*loaded)->Describe());
  } else {
    spdlog::error("SIGHUP: webhook secrets not reloaded, those in force stay: {}",
                  loaded.status().message());
  }
}

// Waits for SIGTERM or SIGINT and returns it; reloads the tokens and the
// webhook secrets on each SIGHUP meanwhile.
int WaitForStop(const sigset_t& signals, server::TokenRegistry* tokens,
                server::WebhookSecretRegistry* secrets) {
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGHUP) return sig;
    ReloadTokens(tokens);
    ReloadWebhookSecrets(secrets);
  }
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

// A cluster node's name and address by default: its host name and port, and
// its listen address (the host name when it listens on all interfaces).
void DefaultNodeIdentity(const std::string& listen_host, uint16_t port, std::string& node_id,
                         std::string& advertise) {
  const bool any = listen_host == "0.0.0.0" || listen_host == "::";
  const std::string host = any ? HostName() : listen_host;
  const bool v6 = host.find(':') != std::string::npos;
  if (node_id.empty()) node_id = HostName() + ":" + std::to_string(port);
  if (advertise.empty()) {
    advertise = "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  }
}

// What chronoqd starts with, once every check passed.
struct Startup {
  server::ServerOptions options;
  std::unique_ptr<server::TokenRegistry> tokens;  // options.tokens points here
  // The webhook secrets file, read (null without --webhook-secrets);
  // webhooks.secrets points here.
  std::unique_ptr<server::WebhookSecretRegistry> webhook_secrets;
  server::WebhookOptions webhooks;
  std::string engine_store;       // without --cluster: the engine's store URL
  PostgresOptions cluster_store;  // with --cluster
};

// Everything start-up checks before it listens or opens the store, which
// --check-config runs alone: the listen address, the token files (read and
// parsed), exposure without a token, the webhook secrets file (read and
// parsed), the TLS certificate and key (loaded),
// the store URL (parsed, not opened), and with --cluster its PostgreSQL
// store, the cluster token and the node's options. Reads files; changes
// nothing.
Result<Startup> Prepare(const server::DaemonConfig& config) {
  Startup s;
  server::ServerOptions& options = s.options;
  options.threads = config.threads;
  options.header_timeout = std::chrono::milliseconds(config.header_timeout_ms);
  options.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
  CHRONOQ_RETURN_IF_ERROR(server::ParseListen("listen", config.listen, options.host, options.port));
  CHRONOQ_RETURN_IF_ERROR(LoadTokens(config.token_file, s.tokens));
  options.tokens = s.tokens.get();
  CHRONOQ_RETURN_IF_ERROR(CheckExposure(options, config.insecure_no_auth));
  if (!config.webhook_secrets.empty()) {
    CHRONOQ_ASSIGN_OR_RETURN(s.webhook_secrets,
                             server::WebhookSecretRegistry::FromFile(config.webhook_secrets));
    spdlog::info("webhook secrets from {}: {}", config.webhook_secrets,
                 s.webhook_secrets->Current()->Describe());
  }
  s.webhooks = server::WebhookOptions{
      .concurrency = config.webhook_concurrency,
      .claim_batch = config.webhook_claim_batch,
      .secrets = s.webhook_secrets.get(),
      .max_per_host = config.webhook_max_per_host,
      .max_idle_per_host = config.webhook_max_idle_per_host,
      .idle_timeout = std::chrono::milliseconds(config.webhook_idle_timeout_ms)};
  options.tls_cert_file = config.tls_cert;
  options.tls_key_file = config.tls_key;
  CHRONOQ_RETURN_IF_ERROR(server::CheckTls(options));
  if (config.test_clock && config.cluster) {
    return Status::InvalidArgument("test-clock",
                                   "cannot be used with --cluster: the nodes' heartbeats and "
                                   "leases keep real time");
  }
  if (!config.cluster) {
    s.engine_store = config.store.empty()
                         ? "sqlite:" + config.data + "/chronoq.db?durability=" + config.durability
                         : config.store;
    CHRONOQ_RETURN_IF_ERROR(ParseStoreUrl(s.engine_store).status());
    return s;
  }
  if (!config.tls_cert.empty()) {
    return Status::InvalidArgument(
        "tls-cert",
        "--tls-cert cannot be used with --cluster: the nodes forward requests to "
        "the leader over plain HTTP (docs/OPERATIONS.md, \"TLS\")");
  }
  CHRONOQ_RETURN_IF_ERROR(ReadToken(config.cluster_token_file, "cluster-token-file",
                                    "CHRONOQ_CLUSTER_TOKEN", options.cluster_token));
  if (options.cluster_token.empty() && s.tokens != nullptr) {
    // By default the nodes send each other the API's token: only when
    // there is one secret, not named tokens.
    if (!s.tokens->Current()->single_secret()) {
      return Status::InvalidArgument("cluster-token-file",
                                     "needed when --token-file holds named tokens: the nodes "
                                     "send each other one secret of their own");
    }
    CHRONOQ_RETURN_IF_ERROR(
        ReadToken(config.token_file, "token-file", "CHRONOQ_TOKEN", options.cluster_token));
  }
  if (config.store.empty()) {
    return Status::InvalidArgument("cluster", "needs --store naming a PostgreSQL database");
  }
  CHRONOQ_ASSIGN_OR_RETURN(StoreLocation location, ParseStoreUrl(config.store));
  if (!location.postgres) {
    return Status::InvalidArgument("cluster",
                                   "the nodes of a cluster share a PostgreSQL store, not " +
                                       server::RedactStoreUrl(config.store));
  }
  s.cluster_store = *location.postgres;
  // The node checks its options when it starts, after chronoqd listens (its
  // default name and address need the port): check them now too.
  cluster::NodeOptions node;
  node.node_id = config.node_id;
  node.advertise = config.advertise;
  // With port 0 the real port is known only once chronoqd listens: any
  // valid one stands in for it here.
  DefaultNodeIdentity(options.host, options.port != 0 ? options.port : 7070, node.node_id,
                      node.advertise);
  node.heartbeat = std::chrono::milliseconds(config.heartbeat_ms);
  node.lease = std::chrono::milliseconds(config.lease_ms);
  CHRONOQ_RETURN_IF_ERROR(cluster::ValidateNodeOptions(node));
  return s;
}

// chronoqd --cluster: the node answers every request; it runs the engine
// only while it leads.
int RunClusterNode(const server::DaemonConfig& config, Startup& startup, sigset_t signals) {
  const server::ServerOptions& options = startup.options;
  LateHandler late;
  server::HttpServer http(options, late);
  if (Status s = http.Start(); !s.ok()) return Fail(s);
  std::string node_id = config.node_id;
  std::string advertise = config.advertise;
  DefaultNodeIdentity(options.host, http.port(), node_id, advertise);

  boost::asio::thread_pool blocking(2);
  cluster::NodeOptions node_options;
  node_options.node_id = node_id;
  node_options.advertise = advertise;
  node_options.store = startup.cluster_store;
  node_options.heartbeat = std::chrono::milliseconds(config.heartbeat_ms);
  node_options.lease = std::chrono::milliseconds(config.lease_ms);
  node_options.cluster_token = options.cluster_token;
  node_options.version = CHRONOQ_VERSION;
  node_options.webhook_concurrency = config.webhook_concurrency;
  node_options.webhooks = startup.webhooks;
  node_options.stats_interval = std::chrono::milliseconds(config.stats_interval_ms);
  node_options.engine.attempt_history = config.attempt_history;
  node_options.engine.claim_ahead = std::chrono::milliseconds(config.claim_ahead_ms);
  node_options.run_blocking = [&blocking](std::function<void()> fn) {
    boost::asio::post(blocking, std::move(fn));
  };
  cluster::Node node(std::move(node_options));
  if (Status s = node.Start(); !s.ok()) return Fail(s);
  late.Set(&node);
  std::printf("chronoqd listening on http://%s:%u (cluster node %s, store %s%s)\n",
              options.host.c_str(), http.port(), node_id.c_str(),
              server::RedactStoreUrl(config.store).c_str(),
              options.tokens == nullptr ? "" : ", bearer token required");
  std::fflush(stdout);
  spdlog::info("chronoqd {} listening on {}:{} as cluster node {} ({}); allocator: {}",
               CHRONOQ_VERSION, options.host, http.port(), node_id, advertise, AllocatorName());

  const int sig = WaitForStop(signals, startup.tokens.get(), startup.webhook_secrets.get());
  spdlog::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  http.Stop([&] { node.ReleaseWaitingClaims(); });
  blocking.join();
  node.Stop();  // a leader closes its engine and frees the lock for a standby
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Every flag, its variable and its config key: server/config.h. A new
  // setting is a field of DaemonConfig and a row of its table, not an
  // add_option here.
  CLI::App app{"chronoqd: durable timed tasks over HTTP/JSON"};
  server::CommandLine command_line(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; a bad command line is a bad configuration: 2.
    return app.exit(e) == 0 ? 0 : 2;
  }
  const server::Environment env = server::ProcessEnvironment();
  const server::ResolvedConfig resolved = command_line.Resolve(env);
  if (!resolved.errors.empty()) {
    for (const std::string& error : resolved.errors) std::cerr << "chronoqd: " << error << "\n";
    return 2;
  }
  if (command_line.print_config()) {
    std::cout << server::PrintConfig(resolved, env) << std::flush;
    if (!command_line.check_config()) return 0;
  }
  const server::DaemonConfig& config = resolved.values;

  // Logs go to stderr; stdout carries only the "listening on" line.
  spdlog::set_default_logger(spdlog::stderr_color_mt("chronoqd"));
  if (config.log_format == "json") chronoq::server::UseJsonLogs();

  Result<Startup> startup = Prepare(config);
  if (!startup.ok()) return Fail(startup.status());
  if (command_line.check_config()) {
    std::cout << "ok" << std::endl;
    return 0;
  }
  server::ServerOptions& options = startup->options;
  // Descriptors kept for the store, webhooks and logs, beyond connections.
  constexpr rlim_t kReservedFiles = 64;
  const rlim_t files = RaiseOpenFileLimit();
  options.max_connections = files > 2 * kReservedFiles ? files - kReservedFiles : files / 2;
  spdlog::info("open-file limit {}: at most {} connections at once", files,
               options.max_connections);
  const bool tls = !config.tls_cert.empty();
  const char* scheme = tls ? "https" : "http";

  // Signals are taken by sigwait below, never by a handler on a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (config.cluster) return RunClusterNode(config, *startup, signals);

  // --test-clock: time stands still from start-up (to the millisecond) and
  // moves only when POST /v1/test/clock says (server/api_test_clock.cc).
  std::optional<ManualClock> test_clock;
  if (config.test_clock) {
    test_clock.emplace(
        std::chrono::time_point_cast<std::chrono::milliseconds>(SystemClock().Now()));
    spdlog::warn("--test-clock: time moves only when POST /v1/test/clock says; for tests only");
  }
  Clock& clock = test_clock ? static_cast<Clock&>(*test_clock) : SystemClock();

  EngineOptions engine_options;
  engine_options.clock = &clock;
  engine_options.store = startup->engine_store;
  engine_options.attempt_history = config.attempt_history;
  engine_options.claim_ahead = std::chrono::milliseconds(config.claim_ahead_ms);
  engine_options.node = config.node_id;  // attempts name no node without --node-id
  auto engine = Engine::Open(engine_options);
  if (!engine.ok()) return Fail(engine.status());

  // Queues that ever held a task with a target are delivered by chronoqd.
  startup->webhooks.clock = &clock;
  // The Api (below) samples the statistics; deliveries may settle before
  // it exists, and until webhooks.Stop() returns.
  std::atomic<server::Api*> stats_api{nullptr};
  startup->webhooks.on_settle = [&stats_api] {
    if (server::Api* api = stats_api.load()) api->NoteActivity();
  };
  server::WebhookDeliverer webhooks(**engine, startup->webhooks);
  auto queues = (*engine)->ListQueues();
  if (!queues.ok()) return Fail(queues.status());
  for (const QueueInfo& q : *queues) {
    if (q.webhooks) webhooks.Serve(q.name);
  }

  boost::asio::thread_pool blocking(2);
  server::Api api(
      **engine, clock,
      [&blocking](std::function<void()> fn) { boost::asio::post(blocking, std::move(fn)); },
      [&webhooks](const std::string& queue) { webhooks.Serve(queue); },
      std::chrono::milliseconds(config.stats_interval_ms));
  stats_api.store(&api);
  server::HttpServer http(options, api);
  if (Status s = http.Start(); !s.ok()) return Fail(s);
  const std::string where = config.store.empty() ? "data in " + config.data
                                                 : "store " + server::RedactStoreUrl(config.store);
  std::printf("chronoqd listening on %s://%s:%u (%s%s)\n", scheme, options.host.c_str(),
              http.port(), where.c_str(),
              options.tokens == nullptr ? "" : ", bearer token required");
  std::fflush(stdout);
  spdlog::info("chronoqd {} listening on {}://{}:{}; allocator: {}", CHRONOQ_VERSION, scheme,
               options.host, http.port(), AllocatorName());

  const int sig = WaitForStop(signals, startup->tokens.get(), startup->webhook_secrets.get());
  spdlog::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  http.Stop([&] { (*engine)->ReleaseWaitingClaims(); });
  blocking.join();
  webhooks.Stop();
  stats_api.store(nullptr);
  engine->reset();  // flushes the last commit
  spdlog::info("stopped");
  return 0;
}
