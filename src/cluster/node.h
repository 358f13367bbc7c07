// Node: one chronoqd of a cluster (several chronoqd nodes on one PostgreSQL
// schema; docs/ARCHITECTURE.md, "Several nodes").
//
// One node leads: it runs the engine on a store opened with
// PostgresOptions::leadership (the schema's engine lock, a new epoch, the
// fence on every commit). The others stand by: they answer every request
// by forwarding it to the leader (Forwarder), and each heartbeat they look at
// the leader. A standby takes over when the engine lock is free (the
// leader's session ended: it crashed, stopped, or was cut off), or when the
// leader's heartbeat count has not grown for `lease` on the standby's own
// clock (a paused process, a lost machine): then it first ends the silent
// leader's writer session (PostgresControl::Depose), so that leader can never
// commit again. A leader steps down when its store says it was deposed, when
// the leader row names another epoch, or when it could not heartbeat for
// `lease`; stepping down releases its long polls, waits for its requests in
// flight, and closes its engine.
//
//   cluster::Node node(options);            // see NodeOptions
//   CHRONOQ_RETURN_IF_ERROR(node.Start());  // connects; the first heartbeat
//   server::HttpServer http(server_options, node);
//   ...
//   http.Stop([&] { node.ReleaseWaitingClaims(); });
//   node.Stop();                            // a leader hands over at once
//
// Thread-safe: Handle is called from the I/O threads; Tick runs on the
// node's own thread (or a test's).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "chronoq/clock.h"
#include "chronoq/engine.h"

#include "cluster/forwarder.h"
#include "common/mutex.h"
#include "server/api.h"
#include "server/webhook.h"
#include "store/postgres/control.h"
#include "store/postgres/postgres_store.h"

namespace chronoq::cluster {

struct NodeOptions {
  std::string node_id;    // unique in the cluster (chronoqd: host name and port)
  std::string advertise;  // where the others reach this node: "http://host:port"
  PostgresOptions store;  // the shared schema (leadership is filled in by the node)
  EngineOptions engine;   // how the engine runs while this node leads (`store` unused)
  // How often each node writes its heartbeat and looks at the others.
  Duration heartbeat = std::chrono::milliseconds(500);
  // A leader whose heartbeat did not grow for this long is deposed.
  Duration lease = std::chrono::seconds(3);
  std::string cluster_token;  // sent on forwarded requests
  std::string version;        // shown in GET /v1/cluster
  int webhook_concurrency = 16;
  // How the leader delivers webhooks; its concurrency is webhook_concurrency.
  server::WebhookOptions webhooks;
  Duration stats_interval = server::kDefaultStatsInterval;  // GET /v1/stats/history's pace
  // Paces heartbeats and measures the lease; must outlive the node.
  // nullptr: the system clock.
  Clock* clock = nullptr;
  // Runs the Api's calls that block on a commit, off the I/O threads.
  std::function<void(std::function<void()>)> run_blocking;
};

// Checks the options a node needs (node_id, advertise, heartbeat < lease):
// InvalidArgument naming the flag.
Status ValidateNodeOptions(const NodeOptions& options);

class Node final : public server::RequestHandler {
 public:
  explicit Node(NodeOptions options);
  ~Node() override;  // Stop()s
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Connects the control connection (creating the schema if need be), takes
  // part in the first round (it may lead at once), and starts the node's
  // thread, which runs a round every `heartbeat`. `run_thread` false: rounds
  // run only when the caller calls Tick() (tests, on a fake clock).
  Status Start(bool run_thread = true);
  // Ends the thread; a leader steps down (its engine flushes and closes, and
  // the engine lock is released for a standby to take at once).
  void Stop();

  // One round: heartbeat, then look at the cluster, take over or step down
  // (Decide). With the node's threads, each half runs every `heartbeat` on a
  // thread of its own.
  void Tick();

  void Handle(server::ApiRequest request, server::Respond respond) override;
  // The endpoints a node answers itself, beside its Api's (server::Api::Routes()).
  static std::vector<server::Route> Routes() {
    return {{"GET", kClusterPath, server::Scope::kRead}};
  }
  // The scope a request needs on a node: its own routes', else its Api's.
  static server::Scope ScopeOf(std::string_view method, std::string_view target);
  server::Scope RequiredScope(std::string_view method, std::string_view target) const override {
    return ScopeOf(method, target);
  }
  static constexpr std::string_view kClusterPath = "/v1/cluster";

  // Answers the leader's waiting claims with no tasks (a graceful stop).
  void ReleaseWaitingClaims();

  bool leading() const;
  int64_t epoch() const;  // the epoch this node leads with; 0 when standing by
  uint64_t takeovers() const { return takeovers_.load(); }

 private:
  struct Runtime;
  struct Snapshot;

  void TryLead(const char* why, Duration lock_patience);
  void StepDown(const std::string& why);
  void Beat();
  void Decide();
  // Runs `round` every heartbeat until Stop(); `wakeable`: also at once when
  // the store says this node was deposed.
  void Loop(const std::function<void()>& round, bool wakeable);
  // GET /healthz, GET /v1/cluster, and the cluster's lines of /metrics.
  void Health(const server::Respond& respond);
  void Describe(const server::Respond& respond);
  std::string ClusterMetrics();
  void Forward(server::ApiRequest request, server::Respond respond);

  const NodeOptions options_;
  Clock& clock_;
  Forwarder forwarder_;
  std::unique_ptr<PostgresControl> control_;  // Decide's only

  std::mutex beat_mu_;  // Beat's: its connection and what it counts
  std::unique_ptr<PostgresControl> beat_control_;
  uint64_t beats_ = 0;      // heartbeats written
  Timestamp last_beat_ok_;  // the last heartbeat that reached PostgreSQL

  // What Decide tracks between rounds.
  std::string watched_;               // leader node id and epoch being watched
  int64_t watched_beats_ = -1;        // its beats when they last grew
  Timestamp watched_since_;           // when they last grew (our clock)
  std::atomic<bool> deposed_{false};  // the store said so (any thread)

  mutable Mutex mu_;
  std::shared_ptr<Runtime> runtime_ CHRONOQ_GUARDED_BY(mu_);  // set while leading
  std::shared_ptr<const Snapshot> snapshot_ CHRONOQ_GUARDED_BY(mu_);
  std::string leader_address_ CHRONOQ_GUARDED_BY(mu_);  // where standbys forward
  int64_t epoch_ CHRONOQ_GUARDED_BY(mu_) = 0;

  std::atomic<uint64_t> takeovers_{0};
  std::atomic<uint64_t> step_downs_{0};
  std::atomic<uint64_t> forwarded_{0};

  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // under wake_mu_
  bool wake_now_ = false;
  std::thread thread_;       // Decide's rounds
  std::thread beat_thread_;  // Beat's rounds
};

}  // namespace chronoq::cluster
