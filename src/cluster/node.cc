// A cluster node (node.h): leadership, stepping down, forwarding, and the
// cluster's own endpoints.
#include "cluster/node.h"

#include <chrono>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "chronoq/limits.h"
#include "chronoq/time.h"

#include "codec/json_codec.h"
#include "server/ui.h"
#include "server/webhook.h"

namespace chronoq::cluster {
namespace {

using server::ApiRequest;
using server::ApiResponse;
using server::Respond;

// How long a step-down waits for the old engine's requests in flight (long
// polls are released; the rest are commits that fail fast once deposed).
constexpr auto kDrainPatience = std::chrono::seconds(30);

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

ApiResponse Json(int status, std::string body) {
  ApiResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

ApiResponse NotLeader(std::string message) {
  return server::ErrorResponse(
      Status(StatusCode::kUnavailable, std::move(message), {}, StatusReason::kNotLeader));
}

// How long a forwarded request may take: a claim or a lock acquisition may
// wait up to its own limit, anything else is a commit away.
std::chrono::milliseconds ForwardTimeout(const ApiRequest& request) {
  const std::string_view path = PathOf(request.target);
  const bool waits = path.ends_with("/claim") || path.starts_with("/v1/locks/");
  const Duration limit = waits ? std::max(kMaxClaimWait, kMaxLockWait) : Duration::zero();
  return std::chrono::duration_cast<std::chrono::milliseconds>(limit) + std::chrono::seconds(60);
}

}  // namespace

// What a leader runs. Made when the node takes over; dropped when it steps
// down, once no request is inside it any more.
struct Node::Runtime {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<server::WebhookDeliverer> webhooks;
  std::unique_ptr<server::Api> api;
  int64_t epoch = 0;
  // Two per request in flight: one until Api::Handle returns, one until it
  // answered (either may come first).
  std::atomic<int64_t> in_flight{0};
};

// The cluster as the last round saw it, for GET /v1/cluster.
struct Node::Snapshot {
  ClusterView view;
  Timestamp taken;
};

Status ValidateNodeOptions(const NodeOptions& options) {
  if (options.node_id.empty()) return Status::InvalidArgument("node-id", "must not be empty");
  if (options.node_id.size() > 200) {
    return Status::InvalidArgument("node-id", "must be at most 200 characters");
  }
  CHRONOQ_RETURN_IF_ERROR(CheckBaseUrl(options.advertise, "advertise"));
  if (options.heartbeat <= Duration::zero()) {
    return Status::InvalidArgument("heartbeat-ms", "must be positive");
  }
  if (options.lease < 2 * options.heartbeat) {
    return Status::InvalidArgument("lease-ms", "must be at least twice the heartbeat");
  }
  return {};
}

Node::Node(NodeOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock()) {}

Node::~Node() { Stop(); }

Status Node::Start(bool run_thread) {
  CHRONOQ_RETURN_IF_ERROR(ValidateNodeOptions(options_));
  CHRONOQ_ASSIGN_OR_RETURN(control_, PostgresControl::Open(options_.store));
  CHRONOQ_ASSIGN_OR_RETURN(beat_control_, PostgresControl::Open(options_.store));
  {
    std::lock_guard<std::mutex> lock(beat_mu_);
    last_beat_ok_ = clock_.Now();
  }
  watched_since_ = clock_.Now();
  Tick();
  if (run_thread) {
    // Heartbeats have a thread of their own: a node that takes over and
    // opens its engine (seconds, on a large near future) keeps beating, so
    // the others do not depose it meanwhile.
    beat_thread_ = std::thread([this] { Loop([this] { Beat(); }, /*wakeable=*/false); });
    thread_ = std::thread([this] { Loop([this] { Decide(); }, /*wakeable=*/true); });
  }
  return {};
}

void Node::Stop() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (beat_thread_.joinable()) beat_thread_.join();
  if (leading()) StepDown("the node is stopping");
}

void Node::Loop(const std::function<void()>& round, bool wakeable) {
  std::unique_lock<std::mutex> lock(wake_mu_);
  while (!stop_) {
    const Timestamp next = clock_.Now() + options_.heartbeat;
    while (!stop_ && !(wakeable && wake_now_) && clock_.Now() < next) {
      clock_.WaitUntil(wake_, lock, next);
    }
    if (stop_) break;
    if (wakeable) wake_now_ = false;
    lock.unlock();
    round();
    lock.lock();
  }
}

bool Node::leading() const {
  MutexLock lock(mu_);
  return runtime_ != nullptr;
}

int64_t Node::epoch() const {
  MutexLock lock(mu_);
  return epoch_;
}

void Node::Beat() {
  NodeRecord self;
  self.node_id = options_.node_id;
  self.address = options_.advertise;
  self.version = options_.version;
  {
    MutexLock lock(mu_);
    self.role = runtime_ ? "leader" : "standby";
    if (runtime_) self.epoch = runtime_->epoch;
  }
  std::lock_guard<std::mutex> lock(beat_mu_);
  self.beats = beats_;
  if (Status s = beat_control_->Heartbeat(self); !s.ok()) {
    spdlog::warn("cluster: heartbeat failed: {}", s.message());
    return;
  }
  ++beats_;
  last_beat_ok_ = clock_.Now();
}

void Node::Tick() {
  Beat();
  Decide();
}

void Node::Decide() {
  const Timestamp now = clock_.Now();
  Timestamp last_beat_ok;
  {
    std::lock_guard<std::mutex> lock(beat_mu_);
    last_beat_ok = last_beat_ok_;
  }
  Result<ClusterView> view = control_->View();
  if (!view.ok()) {
    spdlog::warn("cluster: cannot read the cluster's state: {}", view.status().message());
    // Silent for a lease, a leader is about to be deposed by the others.
    if (leading() && now - last_beat_ok >= options_.lease) {
      StepDown("no heartbeat reached PostgreSQL for the lease");
    }
    return;
  }
  {
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->view = *view;
    snapshot->taken = now;
    MutexLock lock(mu_);
    snapshot_ = std::move(snapshot);
  }

  if (leading()) {
    const int64_t mine = epoch();
    if (deposed_.load()) return StepDown("the store refused a commit: another node leads");
    if (!view->leader || view->leader->epoch != mine) {
      return StepDown("the leader row names epoch " +
                      (view->leader ? std::to_string(view->leader->epoch) : "none") +
                      ", not this node's " + std::to_string(mine));
    }
    return;
  }

  if (view->lock_free) {
    return TryLead(view->leader ? "the leader's session ended" : "no leader", Duration::zero());
  }
  if (!view->leader) {
    // The lock is held by an engine that is not a cluster leader (a
    // single-node chronoqd): nothing to forward to, nothing to take.
    MutexLock lock(mu_);
    leader_address_.clear();
    return;
  }
  const LeaderRecord& leader = *view->leader;
  {
    MutexLock lock(mu_);
    if (leader_address_ != leader.address) {
      // Requests still waiting on the old leader will not be answered (it
      // hung or vanished, or it would not have been replaced): answer them.
      if (!leader_address_.empty()) {
        forwarder_.AbortTarget(leader_address_, "the leader at " + leader_address_ +
                                                    " was replaced by " + leader.node_id +
                                                    " while this request waited for it; it "
                                                    "may or may not have been done; retry");
      }
      leader_address_ = leader.address;
      forwarder_.DropIdle();
    }
  }
  // Is the leader alive? Its heartbeat count must grow within the lease.
  int64_t beats = -1;
  for (const NodeRecord& n : view->nodes) {
    if (n.node_id == leader.node_id) beats = n.beats;
  }
  const std::string watched = leader.node_id + "@" + std::to_string(leader.epoch);
  if (watched != watched_ || beats != watched_beats_) {
    watched_ = watched;
    watched_beats_ = beats;
    watched_since_ = now;
    return;
  }
  if (now - watched_since_ < options_.lease) return;
  spdlog::warn("cluster: leader {} (epoch {}) has not beaten for {} ms; deposing it",
               leader.node_id, leader.epoch,
               std::chrono::duration_cast<std::chrono::milliseconds>(now - watched_since_).count());
  Result<bool> ended = control_->Depose(leader);
  if (!ended.ok()) {
    spdlog::error("cluster: cannot end the silent leader's session: {}", ended.status().message());
    return;
  }
  // Another standby ended it first (or the leader changed): that one takes over.
  if (!*ended) return;
  TryLead("the leader went silent", std::chrono::seconds(2));
}

void Node::TryLead(const char* why, Duration lock_patience) {
  PostgresOptions store = options_.store;
  store.clock = &clock_;
  store.leadership = PostgresLeadership{
      .node_id = options_.node_id,
      .address = options_.advertise,
      .on_deposed =
          [this](const Status&) {
            deposed_.store(true);
            {
              std::lock_guard<std::mutex> lock(wake_mu_);
              wake_now_ = true;
            }
            wake_.notify_all();
          },
      .lock_patience = lock_patience,
  };
  deposed_.store(false);
  Result<std::unique_ptr<Store>> opened = OpenPostgresStore(store);
  if (!opened.ok()) {
    // Another standby was quicker, or the old leader's session lingers.
    spdlog::info("cluster: did not take over ({}): {}", why, opened.status().message());
    return;
  }
  EngineOptions engine_options = options_.engine;
  engine_options.node = options_.node_id;  // the node that ends an attempt names it
  engine_options.clock = &clock_;
  Result<std::unique_ptr<Engine>> engine = Engine::Open(engine_options, std::move(*opened));
  if (!engine.ok()) {
    spdlog::error("cluster: took the lock but cannot start the engine: {}",
                  engine.status().ToString());
    return;
  }
  auto runtime = std::make_shared<Runtime>();
  runtime->engine = std::move(*engine);
  server::WebhookOptions webhook_options = options_.webhooks;
  webhook_options.concurrency = options_.webhook_concurrency;
  // Deliveries start (Serve) only once runtime->api is set below.
  webhook_options.on_settle = [rt = runtime.get()] { rt->api->NoteActivity(); };
  runtime->webhooks = std::make_unique<server::WebhookDeliverer>(*runtime->engine, webhook_options);
  server::WebhookDeliverer* webhooks = runtime->webhooks.get();
  runtime->api = std::make_unique<server::Api>(
      *runtime->engine, clock_, options_.run_blocking,
      [webhooks](const std::string& queue) { webhooks->Serve(queue); }, options_.stats_interval);
  if (auto queues = runtime->engine->ListQueues(); queues.ok()) {
    for (const QueueInfo& q : *queues) {
      if (q.webhooks) webhooks->Serve(q.name);
    }
  }
  // The epoch the store took: the leader row is ours while we hold the lock.
  Result<ClusterView> view = control_->View();
  if (view.ok() && view->leader && view->leader->node_id == options_.node_id) {
    runtime->epoch = view->leader->epoch;
    // GET /v1/cluster shows the new leader at once, not after the next round.
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->view = *view;
    snapshot->taken = clock_.Now();
    MutexLock lock(mu_);
    snapshot_ = std::move(snapshot);
  }
  std::string old_leader;
  {
    MutexLock lock(mu_);
    runtime_ = runtime;
    epoch_ = runtime->epoch;
    old_leader.swap(leader_address_);
    leader_address_ = options_.advertise;
  }
  if (!old_leader.empty() && old_leader != options_.advertise) {
    forwarder_.AbortTarget(old_leader, "the leader at " + old_leader + " was replaced by " +
                                           options_.node_id +
                                           " while this request waited for it; it may or may "
                                           "not have been done; retry");
  }
  takeovers_.fetch_add(1);
  spdlog::info("cluster: node {} leads with epoch {} ({})", options_.node_id, runtime->epoch, why);
  Beat();
}

void Node::StepDown(const std::string& why) {
  std::shared_ptr<Runtime> runtime;
  {
    MutexLock lock(mu_);
    runtime.swap(runtime_);
    epoch_ = 0;
    leader_address_.clear();
  }
  if (!runtime) return;
  spdlog::warn("cluster: node {} steps down (epoch {}): {}", options_.node_id, runtime->epoch, why);
  step_downs_.fetch_add(1);
  // New requests are forwarded now; the old engine's long polls answer
  // empty, and the rest of its requests finish (failing fast if deposed).
  runtime->engine->ReleaseWaitingClaims();
  const auto give_up = std::chrono::steady_clock::now() + kDrainPatience;
  while (runtime->in_flight.load() > 0) {
    if (std::chrono::steady_clock::now() >= give_up) {
      // The engine cannot be closed under a request; a process that cannot
      // step down cleanly ends, and its supervisor starts it again.
      spdlog::critical("cluster: {} requests still in the old engine after {} s; exiting",
                       runtime->in_flight.load() / 2, kDrainPatience.count());
      std::_Exit(3);
    }
    runtime->engine->ReleaseWaitingClaims();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  runtime->webhooks->Stop();
  runtime->api.reset();
  runtime->webhooks.reset();
  runtime->engine.reset();  // flushes what it can; a deposed store refuses
  deposed_.store(false);
  Beat();
}

void Node::ReleaseWaitingClaims() {
  std::shared_ptr<Runtime> runtime;
  {
    MutexLock lock(mu_);
    runtime = runtime_;
  }
  if (runtime) runtime->engine->ReleaseWaitingClaims();
}

server::Scope Node::ScopeOf(std::string_view method, std::string_view target) {
  const std::string_view path = PathOf(target);
  for (const server::Route& r : Routes()) {
    if (r.method == method && r.pattern == path) return r.scope;
  }
  return server::Api::ScopeOf(method, target);
}

void Node::Handle(ApiRequest request, Respond respond) {
  const std::string_view path = PathOf(request.target);
  if (path == "/healthz") return Health(respond);
  // The dashboard's files are the same on every node: no need to forward.
  if (server::IsUiPath(path)) return respond(server::UiResponse(request.method, path));
  if (path == kClusterPath) {
    if (request.method != "GET")
      return respond(server::MethodNotAllowed(request.method, path, "GET"));
    return Describe(respond);
  }
  std::shared_ptr<Runtime> runtime;
  {
    MutexLock lock(mu_);
    runtime = runtime_;
  }
  if (!runtime) return Forward(std::move(request), std::move(respond));
  runtime->in_flight.fetch_add(2);
  std::atomic<int64_t>* in_flight = &runtime->in_flight;
  const bool metrics = path == "/metrics";
  // The answer may come from the engine's thread before Handle returns: the
  // runtime stays until both are done (Runtime::in_flight).
  runtime->api->Handle(std::move(request),
                       [this, in_flight, metrics, respond = std::move(respond)](ApiResponse r) {
                         if (metrics && r.status == 200) r.Render() += ClusterMetrics();
                         respond(std::move(r));
                         in_flight->fetch_sub(1);
                       });
  in_flight->fetch_sub(1);
}

void Node::Forward(ApiRequest request, Respond respond) {
  const std::string_view path = PathOf(request.target);
  if (path == "/metrics") {
    ApiResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = ClusterMetrics();
    return respond(std::move(r));
  }
  if (!request.forwarded_by.empty()) {
    // Forwarded to us as the leader, but we are not (any more): the
    // forwarding node answers 503 and its client tries another node.
    return respond(NotLeader("node " + options_.node_id + " does not lead the cluster (" +
                             request.forwarded_by + " thought it did); try again"));
  }
  std::string address;
  {
    MutexLock lock(mu_);
    address = leader_address_;
  }
  if (address.empty()) {
    return respond(NotLeader("no node leads the cluster right now (node " + options_.node_id +
                             " stands by); try again"));
  }
  forwarded_.fetch_add(1);
  const auto timeout = ForwardTimeout(request);
  forwarder_.Forward(address, std::move(request), options_.cluster_token, options_.node_id, timeout,
                     std::move(respond));
}

void Node::Health(const Respond& respond) {
  std::shared_ptr<Runtime> runtime;
  std::string address;
  {
    MutexLock lock(mu_);
    runtime = runtime_;
    address = leader_address_;
  }
  nlohmann::json body;
  body["node"] = options_.node_id;
  if (runtime) {
    const EngineStats stats = runtime->engine->Stats();
    body["role"] = "leader";
    body["epoch"] = runtime->epoch;
    body["store"] = stats.store_up ? "up" : "down";
    body["status"] = stats.store_up ? "ok" : "unavailable";
    if (!stats.store_up) {
      body["error"] = {{"code", "store_unavailable"}, {"message", stats.store_error}};
    }
    return respond(Json(stats.store_up ? 200 : 503, body.dump()));
  }
  body["role"] = "standby";
  if (address.empty()) {
    body["status"] = "unavailable";
    body["error"] = {{"code", "not_leader"},
                     {"message", "no node leads the cluster right now; this node stands by"}};
    return respond(Json(503, body.dump()));
  }
  body["status"] = "ok";
  body["leader"] = address;
  respond(Json(200, body.dump()));
}

void Node::Describe(const Respond& respond) {
  std::shared_ptr<const Snapshot> snapshot;
  {
    MutexLock lock(mu_);
    snapshot = snapshot_;
  }
  nlohmann::json body;
  body["node"] = options_.node_id;
  body["role"] = leading() ? "leader" : "standby";
  body["leader"] = nullptr;
  body["nodes"] = nlohmann::json::array();
  if (snapshot) {
    const ClusterView& view = snapshot->view;
    if (view.leader) {
      body["leader"] = {{"node_id", view.leader->node_id},
                        {"address", view.leader->address},
                        {"epoch", view.leader->epoch},
                        {"since", FormatTime(view.leader->since)}};
    }
    for (const NodeRecord& n : view.nodes) {
      const bool leads = view.leader && view.leader->node_id == n.node_id && !view.lock_free;
      body["nodes"].push_back({{"node_id", n.node_id},
                               {"address", n.address},
                               {"role", leads ? "leader" : "standby"},
                               {"last_heartbeat", FormatTime(n.seen)},
                               {"alive", view.now - n.seen < options_.lease},
                               {"version", n.version},
                               {"started", FormatTime(n.started)}});
    }
  }
  respond(Json(200, body.dump()));
}

std::string Node::ClusterMetrics() {
  const bool leads = leading();
  std::string out;
  out += "# HELP chronoq_cluster_leader 1 while this node leads the cluster.\n";
  out += "# TYPE chronoq_cluster_leader gauge\n";
  out += "chronoq_cluster_leader " + std::string(leads ? "1" : "0") + "\n";
  out += "# HELP chronoq_cluster_epoch The leader epoch this node leads with (0: standing by).\n";
  out += "# TYPE chronoq_cluster_epoch gauge\n";
  out += "chronoq_cluster_epoch " + std::to_string(epoch()) + "\n";
  out += "# HELP chronoq_cluster_takeovers_total Times this node took over the leadership.\n";
  out += "# TYPE chronoq_cluster_takeovers_total counter\n";
  out += "chronoq_cluster_takeovers_total " + std::to_string(takeovers_.load()) + "\n";
  out += "# HELP chronoq_cluster_step_downs_total Times this node stopped leading.\n";
  out += "# TYPE chronoq_cluster_step_downs_total counter\n";
  out += "chronoq_cluster_step_downs_total " + std::to_string(step_downs_.load()) + "\n";
  out += "# HELP chronoq_cluster_forwarded_total Requests this node forwarded to the leader.\n";
  out += "# TYPE chronoq_cluster_forwarded_total counter\n";
  out += "chronoq_cluster_forwarded_total " + std::to_string(forwarded_.load()) + "\n";
  return out;
}

}  // namespace chronoq::cluster
