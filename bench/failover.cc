// W9: failover of a cluster (chronoqd --cluster, several nodes on one
// PostgreSQL schema) under load. See http_target.h (RunHttpW9) for what it
// measures; docs/BENCHMARKS.md, "Several nodes", for the figures.
//
// The shape of a run:
//
//   PostgreSQL (a throwaway one from scripts/pg-cluster.sh, or --store)
//   n1, n2, n3: chronoqd --cluster on fixed loopback ports, default heartbeat
//               and lease; n1 starts first and leads
//   8 workers:  long-polling claims (max 100, wait 1 s, lease 30 s), then one
//               POST /v1/acks; each knows all three URLs and moves to the next
//               on a connection failure, a timeout or a 502/503/504 answer
//   producer:   a stream of tasks with client ids (on_conflict "ignore", so a
//               create whose answer was lost can be sent again), due 10 s ahead
//   N pending:  enqueued once, due evenly over the first minute
//   then K times: find the leader (GET /v1/cluster), SIGKILL it (or SIGSTOP:
//               --mode sigstop), wait for the first claim sent after the kill
//               that comes back with tasks, start the node again (SIGCONT it)
//               as a standby, wait until the cluster has settled
//
// Afterwards the producer stops, the workers drain the queue, and every
// acknowledged create is looked up among the succeeded tasks.
//
// Every claim the workers receive is recorded (task id, fencing token, when
// it arrived, how its ack ended), which is what "doubled" is computed from: a
// task claimed again after an ack of it was answered ok. A task claimed again
// after an ack whose answer was lost (a connection that broke, then an ack
// refused on the next node) is counted apart, as "possibly doubled": the first
// ack may or may not have committed.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "chronoq/time.h"

#include "bench_common.h"
#include "bench_http.h"
#include "bench_store.h"
#include "cli/http_client.h"
#include "common/subprocess.h"
#include "http_target.h"
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

namespace chronoq::bench {
namespace {

namespace fs = std::filesystem;
using std::chrono::system_clock;

constexpr int kNodes = 3;
constexpr int kWorkers = 8;
constexpr int kClaimMax = 100;
constexpr int64_t kLeaseMs = 30'000;
constexpr int64_t kWaitMs = 1'000;
// A request with no answer this long goes to the next node (a claim waits
// kWaitMs at most, so an answer later than this means a node that hangs: a
// paused leader, or a standby forwarding to it).
constexpr Ms kClientTimeout{3'000};
// After failing on every node in turn, a client pauses this long before the
// next round, so that clients do not spin while no node leads.
constexpr Ms kRoundPause{50};
constexpr int kStreamBatch = 20;            // stream tasks per create
constexpr Ms kStreamEvery{100};             // one create per 100 ms: 200 tasks/s
constexpr int64_t kStreamAheadMs = 10'000;  // due 10 s after their create
constexpr int64_t kPendingFromMs = 5'000;   // the N pending: due from 5 s ...
constexpr int64_t kPendingSpanMs = 60'000;  // ... over one minute
constexpr Ms kFailoverLimit{60'000};        // a failover slower than this is a failure
constexpr Ms kSettledFor{2'000};            // the cluster looks settled this long before a kill

double NowMs() {
  return std::chrono::duration<double, std::milli>(system_clock::now().time_since_epoch()).count();
}
int64_t NowMsInt() { return static_cast<int64_t>(NowMs()); }
double MsBetween(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A TCP port on 127.0.0.1 that nothing listens on now.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw BenchError("socket: " + ErrnoText(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    throw BenchError("cannot find a free port: " + ErrnoText(err));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last `max` bytes of a file.
std::string Tail(const fs::path& path, size_t max = 3000) {
  const std::string text = ReadFile(path);
  return text.size() <= max ? text : text.substr(text.size() - max);
}

// --- PostgreSQL -----------------------------------------------------------------

// A throwaway PostgreSQL (scripts/pg-cluster.sh start DIR), stopped and
// removed when this goes away.
class ThrowawayPostgres {
 public:
  explicit ThrowawayPostgres(fs::path dir) : dir_(std::move(dir)) {
    std::cerr << "W9: starting PostgreSQL in " << dir_.string() << "\n";
    Script("start");
    started_ = true;
    url_ = ReadFile(dir_ / "url");
    while (!url_.empty() && (url_.back() == '\n' || url_.back() == ' ')) url_.pop_back();
    if (url_.empty()) throw BenchError("pg-cluster.sh wrote no " + (dir_ / "url").string());
  }
  ~ThrowawayPostgres() {
    if (!started_) return;
    try {
      Script("stop");
    } catch (const std::exception& e) {
      std::cerr << "W9: " << e.what() << "\n";
    }
  }
  ThrowawayPostgres(const ThrowawayPostgres&) = delete;
  ThrowawayPostgres& operator=(const ThrowawayPostgres&) = delete;

  const std::string& url() const { return url_; }

 private:
  void Script(const std::string& command) {
    SpawnOptions o;
    o.argv = {"bash", CHRONOQ_PG_CLUSTER_SCRIPT, command, dir_.string()};
    o.search_path = true;
    Result<Subprocess::Completed> done = Subprocess::Run(o, Deadline(std::chrono::seconds(180)));
    if (!done.ok()) throw BenchError("pg-cluster.sh " + command + ": " + done.status().message());
    if (done->code != 0) {
      throw BenchError("pg-cluster.sh " + command + " " + Subprocess::DescribeExit(done->code) +
                       ": " + done->err);
    }
  }

  fs::path dir_;
  bool started_ = false;
  std::string url_;
};

// --- the nodes ----------------------------------------------------------------------

// One chronoqd --cluster on a fixed port, so that it can be started again
// where the clients expect it. Each start logs to DIR/<id>.<start>.log.
// Not thread-safe: the orchestrating thread only.
class ClusterNode {
 public:
  ClusterNode(std::string id, const std::string& chronoqd, const std::string& store, fs::path dir)
      : id_(std::move(id)), chronoqd_(chronoqd), store_(store), dir_(std::move(dir)) {
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    endpoint_ = ResolveUrl(url_, "");
  }

  const std::string& id() const { return id_; }
  const std::string& url() const { return url_; }
  const Endpoint& endpoint() const { return endpoint_; }
  bool running() const { return process_.running(); }
  bool paused() const { return paused_; }
  fs::path log() const { return dir_ / (id_ + "." + std::to_string(starts_) + ".log"); }

  // Starts chronoqd and waits for its "listening on" line.
  void Start() {
    ++starts_;
    SpawnOptions o;
    o.argv = {chronoqd_,   "--cluster", "--store",
              store_,      "--listen",  "127.0.0.1:" + std::to_string(port_),
              "--node-id", id_};
    o.stdin_mode = Stdio::kNull;
    o.stdout_mode = Stdio::kPipe;
    o.stderr_mode = Stdio::kFile;
    o.stderr_file = log().string();
    Result<Subprocess> p = Subprocess::Spawn(o);
    if (!p.ok()) throw BenchError("cannot start " + id_ + ": " + p.status().message());
    process_ = std::move(*p);
    paused_ = false;
    Result<std::string> line =
        process_.ReadLine(Deadline(std::chrono::seconds(60)), "chronoqd's \"listening on\" line");
    if (!line.ok() || line->find("listening on") == std::string::npos) {
      const int code = process_.Kill();
      throw BenchError("node " + id_ + " did not start (" +
                       (line.ok() ? *line : line.status().message()) + "; " +
                       Subprocess::DescribeExit(code) + "); the end of " + log().string() + ":\n" +
                       Tail(log()));
    }
  }
  void Signal(int sig) {
    process_.Signal(sig);
    if (sig == SIGSTOP) paused_ = true;
    if (sig == SIGCONT) paused_ = false;
  }
  // The exit code if the process ended by itself (then it is reaped).
  std::optional<int> Exited() {
    if (!process_.running()) return std::nullopt;
    std::optional<int> code = process_.Poll();
    if (code) paused_ = false;
    return code;
  }
  // SIGKILL (if still running) and reap.
  void Kill() {
    process_.Kill();
    paused_ = false;
  }
  // SIGTERM; its exit code (128 + signal when killed), or -1 if it did not
  // end within 60 s (then it is killed).
  int Terminate() {
    if (!process_.running()) return 0;
    if (paused_) Signal(SIGCONT);
    process_.Signal(SIGTERM);
    Result<int> code = process_.Wait(Deadline(std::chrono::seconds(60)));
    if (code.ok()) return *code;
    process_.Kill();
    return -1;
  }

 private:
  const std::string id_;
  const std::string chronoqd_;
  const std::string store_;
  const fs::path dir_;
  int port_ = 0;
  std::string url_;
  Endpoint endpoint_;
  Subprocess process_;
  bool paused_ = false;
  int starts_ = 0;
};

// What one node says in GET /v1/cluster.
struct NodeView {
  std::string role;    // "leader" or "standby": this node's own role
  std::string leader;  // the leader's node id; empty when none
  int64_t epoch = 0;
  int alive = 0;  // nodes with a heartbeat within the lease
  int fresh = 0;  // nodes with a heartbeat within the last 1.5 s (3 heartbeats)
};

std::optional<NodeView> AskNode(const Endpoint& ep) {
  try {
    Connection c(ep, Ms(2'000));
    const Connection::Response r = c.Send("GET", "/v1/cluster", "");
    if (r.status != 200) return std::nullopt;
    const json j = json::parse(r.body);
    NodeView v;
    v.role = j.at("role").get<std::string>();
    if (j.contains("leader") && j.at("leader").is_object()) {
      v.leader = j.at("leader").at("node_id").get<std::string>();
      v.epoch = j.at("leader").at("epoch").get<int64_t>();
    }
    const double now = NowMs();
    for (const auto& n : j.at("nodes")) {
      if (n.value("alive", false)) ++v.alive;
      const Result<Timestamp> seen = ParseTime(n.at("last_heartbeat").get<std::string>());
      if (seen.ok() &&
          now - std::chrono::duration<double, std::milli>(seen->time_since_epoch()).count() <
              1'500) {
        ++v.fresh;
      }
    }
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// --- clients ----------------------------------------------------------------------

// A client's way around the cluster: the node it talks to now, over one
// keep-alive connection. Not thread-safe: one per client thread.
class NodeRing {
 public:
  NodeRing(const std::vector<Endpoint>& nodes, int start, std::atomic<int64_t>& moves)
      : nodes_(nodes), at_(start % static_cast<int>(nodes.size())), moves_(moves) {}

  // Sends a request to the current node. nullopt when it could not be done
  // there (no connection, no answer within kClientTimeout, a broken
  // connection, or 502/503/504): then the next request goes to the next
  // node. The answer's body stays valid until the next Send.
  std::optional<Connection::Response> Send(std::string_view method, std::string_view target,
                                           std::string_view body) {
    try {
      if (!conn_)
        conn_ = std::make_unique<Connection>(nodes_[static_cast<size_t>(at_)], kClientTimeout);
      Connection::Response r = conn_->Send(method, target, body);
      if (r.status == 502 || r.status == 503 || r.status == 504) {
        Move();
        return std::nullopt;
      }
      failures_ = 0;
      return r;
    } catch (const BenchError&) {
      Move();
      return std::nullopt;
    }
  }

 private:
  void Move() {
    conn_.reset();
    moves_.fetch_add(1, std::memory_order_relaxed);
    at_ = (at_ + 1) % static_cast<int>(nodes_.size());
    if (++failures_ % static_cast<int>(nodes_.size()) == 0)
      std::this_thread::sleep_for(kRoundPause);
  }

  const std::vector<Endpoint>& nodes_;
  int at_;
  std::atomic<int64_t>& moves_;
  std::unique_ptr<Connection> conn_;
  int failures_ = 0;
};

// How an ack of one claim ended.
enum class AckState : uint8_t {
  kNone,     // not answered (the run ended first, or the ack was given up)
  kOk,       // answered ok
  kRefused,  // answered not ok, and no earlier attempt could have committed
  kUnknown,  // answered not ok after an attempt whose answer was lost
};

struct ClaimRecord {
  uint64_t token = 0;
  double arrived_ms = 0;  // system clock
  AckState ack = AckState::kNone;
};

struct TaskRecord {
  double run_at_ms = 0;
  std::vector<ClaimRecord> claims;  // in arrival order
};

// One failover.
struct KillRecord {
  int number = 0;
  std::string killed;
  std::string new_leader;
  int64_t epoch = 0;
  double kill_ms = 0;  // system clock
  double recovered_ms =
      0;  // system clock: the first claim with tasks sent after the kill came back
  double failover_ms = 0;
  double restart_ms = 0;  // until the killed node stood by again
  // The new leader's GET /v1/cluster said "role":"leader" while its
  // "leader" still named another node (seen once at least).
  bool stale_view = false;
  double takeover_ms = -1;  // until another node said it leads (GET /v1/cluster, polled)
  // Nodes that ended by themselves while the cluster settled after this
  // kill, and were started again (as a supervisor would): "n1 exited with
  // status 3 31.2 s after the kill".
  std::vector<std::string> exits;
};

// Nearest-rank percentiles of `v` (sorted here).
json Spread(std::vector<double> v, const std::string& prefix) {
  std::sort(v.begin(), v.end());
  json j;
  j[prefix + "count"] = static_cast<int64_t>(v.size());
  if (v.empty()) return j;
  j[prefix + "p50_ms"] = Round(Percentile(v, 50), 1);
  j[prefix + "p99_ms"] = Round(Percentile(v, 99), 1);
  j[prefix + "max_ms"] = Round(v.back(), 1);
  return j;
}

// --- the run ------------------------------------------------------------------------

class W9Run {
 public:
  W9Run(const Options& o, int64_t n) : o_(o), n_(n), pause_(o.mode == "sigstop") {}

  void Run();

 private:
  // Threads.
  void Worker(int w);
  void Ack(NodeRing& ring, const std::vector<std::pair<std::string, uint64_t>>& held);
  void Producer();
  void Guard(const std::function<void()>& fn);  // records the first error, stops everything
  void CheckThreads();

  // The orchestrator's steps.
  void EnqueuePending();
  std::optional<int> SettledLeader(bool need_flow, std::string& why);
  int Settle(bool need_flow, KillRecord* after = nullptr);
  // Waits until the cluster settled (after `previous`, if any), then kills
  // (pauses) its leader and measures the failover.
  KillRecord KillLeader(int number, KillRecord* previous);
  void WaitDrained();
  std::string Describe();
  void Report(const std::vector<KillRecord>& kills);

  const Options& o_;
  const int64_t n_;
  const bool pause_;  // SIGSTOP instead of SIGKILL
  fs::path dir_;
  // Declared before the nodes, so that on an error path they are killed
  // before PostgreSQL stops.
  std::optional<ThrowawayPostgres> pg_;
  std::string queue_;
  std::string claim_path_;
  std::string claim_body_;
  std::vector<std::unique_ptr<ClusterNode>> nodes_;
  std::vector<Endpoint> endpoints_;

  std::atomic<bool> stop_workers_{false};
  std::atomic<bool> stop_producer_{false};
  std::atomic<int64_t> moves_{0};  // requests that went to the next node
  // Failover detection: claims sent at or after watch_from_ (steady clock)
  // that come back with tasks lower recovered_ to their arrival.
  std::atomic<SteadyClock::rep> watch_from_{
      SteadyClock::time_point::max().time_since_epoch().count()};
  std::atomic<SteadyClock::rep> recovered_{
      SteadyClock::time_point::max().time_since_epoch().count()};
  std::atomic<SteadyClock::rep> last_tasks_{0};  // the last claim that came back with tasks

  std::mutex mu_;
  std::string error_;                                  // guarded by mu_
  std::unordered_map<std::string, TaskRecord> tasks_;  // guarded by mu_: by task id
  std::vector<std::string> created_;                   // guarded by mu_: acknowledged creates
  std::map<std::string, int64_t> ack_errors_;          // guarded by mu_: by code
  int64_t abandoned_acks_ = 0;                         // guarded by mu_
  int64_t abandoned_creates_ = 0;                      // guarded by mu_
  int64_t duplicate_tokens_ = 0;                       // guarded by mu_
};

void W9Run::Guard(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    if (error_.empty()) error_ = e.what();
    stop_producer_.store(true);
    stop_workers_.store(true);
  }
}

void W9Run::CheckThreads() {
  std::lock_guard lock(mu_);
  if (!error_.empty()) throw BenchError("W9: " + error_);
}

void W9Run::Worker(int w) {
  NodeRing ring(endpoints_, w, moves_);
  std::vector<LeaseRef> leases;
  std::vector<std::pair<std::string, uint64_t>> held;
  std::vector<double> run_at;
  while (!stop_workers_.load()) {
    const SteadyClock::time_point sent = SteadyClock::now();
    const std::optional<Connection::Response> r = ring.Send("POST", claim_path_, claim_body_);
    if (!r) continue;
    if (r->status != 200) {
      throw BenchError("POST " + claim_path_ + ": HTTP " + std::to_string(r->status) + ": " +
                       Excerpt(r->body));
    }
    const SteadyClock::time_point arrived = SteadyClock::now();
    const double arrived_ms = NowMs();
    leases.clear();
    LeaseScanner(r->body, "POST " + claim_path_).Scan(leases);
    if (leases.empty()) continue;
    StoreMax(last_tasks_, arrived);
    if (sent.time_since_epoch().count() >= watch_from_.load()) StoreMin(recovered_, arrived);
    held.clear();
    run_at.clear();
    for (const LeaseRef& l : leases) {
      const Result<Timestamp> t = ParseTime(l.run_at, "run_at");
      if (!t.ok()) throw BenchError("claim answer: " + t.status().ToString());
      run_at.push_back(std::chrono::duration<double, std::milli>(t->time_since_epoch()).count());
      held.emplace_back(std::string(l.id), l.token);
    }
    {
      std::lock_guard lock(mu_);
      for (size_t i = 0; i < held.size(); ++i) {
        TaskRecord& t = tasks_[held[i].first];
        t.run_at_ms = run_at[i];
        for (const ClaimRecord& c : t.claims) {
          if (c.token == held[i].second) ++duplicate_tokens_;
        }
        t.claims.push_back({held[i].second, arrived_ms, AckState::kNone});
      }
    }
    Ack(ring, held);
  }
}

// Acknowledges `held` (id, token) with POST /v1/acks, on whichever node
// answers, and records how each ack ended.
void W9Run::Ack(NodeRing& ring, const std::vector<std::pair<std::string, uint64_t>>& held) {
  std::string body = "{\"acks\":[";
  for (size_t i = 0; i < held.size(); ++i) {
    if (i > 0) body += ',';
    body.append("{\"id\":\"").append(held[i].first).append("\",\"token\":");
    body.append(std::to_string(held[i].second)).append("}");
  }
  body += "]}";
  bool lost_answer = false;  // an earlier attempt may have committed
  const auto limit = SteadyClock::now() + std::chrono::seconds(120);
  while (true) {
    if (SteadyClock::now() > limit) {
      std::lock_guard lock(mu_);
      abandoned_acks_ += static_cast<int64_t>(held.size());
      return;
    }
    const std::optional<Connection::Response> r = ring.Send("POST", "/v1/acks", body);
    if (!r) {
      lost_answer = true;
      continue;
    }
    if (r->status != 200) {
      throw BenchError("POST /v1/acks: HTTP " + std::to_string(r->status) + ": " +
                       Excerpt(r->body));
    }
    const json answer = json::parse(r->body);
    std::lock_guard lock(mu_);
    for (const auto& result : answer.at("results")) {
      const std::string id = result.at("id").get<std::string>();
      const bool ok = result.at("ok").get<bool>();
      if (!ok) ++ack_errors_[result.at("error").at("code").get<std::string>()];
      uint64_t token = 0;
      for (const auto& [hid, htoken] : held) {
        if (hid == id) token = htoken;
      }
      TaskRecord& t = tasks_[id];
      for (ClaimRecord& c : t.claims) {
        if (c.token != token) continue;
        c.ack = ok ? AckState::kOk : (lost_answer ? AckState::kUnknown : AckState::kRefused);
      }
    }
    return;
  }
}

void W9Run::Producer() {
  NodeRing ring(endpoints_, 0, moves_);
  SteadyClock::time_point next = SteadyClock::now();
  int64_t seq = 0;
  std::vector<std::string> ids;
  while (!stop_producer_.load()) {
    next += kStreamEvery;
    const SteadyClock::time_point now = SteadyClock::now();
    if (next < now - std::chrono::seconds(1)) next = now;  // after a failover: no burst
    std::this_thread::sleep_until(next);
    const std::string due = std::to_string(NowMsInt() + kStreamAheadMs);
    ids.clear();
    std::string body = "{\"tasks\":[";
    for (int i = 0; i < kStreamBatch; ++i, ++seq) {
      ids.emplace_back(1, 's');  // not "s" + to_string: GCC 12 warns (-Wrestrict) in vain
      ids.back() += std::to_string(seq);
      if (i > 0) body += ',';
      body.append(R"({"queue":")")
          .append(queue_)
          .append(R"(","id":")")
          .append(ids.back())
          .append(R"(","on_conflict":"ignore","payload":{"s":)")
          .append(std::to_string(seq))
          .append(R"(},"run_at":)")
          .append(due)
          .append("}");
    }
    body += "]}";
    const auto limit = SteadyClock::now() + std::chrono::seconds(60);
    bool created = false;
    while (!created && SteadyClock::now() < limit) {
      const std::optional<Connection::Response> r = ring.Send("POST", "/v1/tasks/batch", body);
      if (!r) continue;
      if (r->status != 201) {
        throw BenchError("POST /v1/tasks/batch: HTTP " + std::to_string(r->status) + ": " +
                         Excerpt(r->body));
      }
      created = true;
    }
    std::lock_guard lock(mu_);
    if (created) {
      created_.insert(created_.end(), ids.begin(), ids.end());
    } else {
      abandoned_creates_ += kStreamBatch;
    }
  }
}

// Which node leads, if the cluster has settled: every node runs and answers,
// exactly one says it leads, all name it, it sees every node alive with a
// heartbeat in the last 1.5 s, and (`need_flow`) a claim came back with tasks
// within the last second.
std::optional<int> W9Run::SettledLeader(bool need_flow, std::string& why) {
  std::optional<int> leader;
  std::string named;
  for (int i = 0; i < kNodes; ++i) {
    const ClusterNode& node = *nodes_[static_cast<size_t>(i)];
    if (!node.running() || node.paused()) {
      why = node.id() + " is not running";
      return std::nullopt;
    }
    const std::optional<NodeView> v = AskNode(node.endpoint());
    if (!v) {
      why = node.id() + " does not answer GET /v1/cluster";
      return std::nullopt;
    }
    if (v->leader.empty() || (!named.empty() && v->leader != named)) {
      why = node.id() + " names leader '" + v->leader + "'";
      return std::nullopt;
    }
    named = v->leader;
    if (v->role == "leader") {
      if (leader || v->leader != node.id()) {
        why = "two nodes say they lead";
        return std::nullopt;
      }
      leader = i;
      // Fresh heartbeats, not just alive ones: a node whose round is stuck
      // (a resumed leader stepping down) stays "alive" for a lease.
      if (v->alive != kNodes || v->fresh != kNodes) {
        why = "the leader sees " + std::to_string(v->alive) + " nodes alive, " +
              std::to_string(v->fresh) + " with a heartbeat in the last 1.5 s";
        return std::nullopt;
      }
    }
  }
  if (!leader) {
    why = "no node says it leads";
    return std::nullopt;
  }
  if (need_flow &&
      SteadyClock::now() - SteadyClock::time_point(SteadyClock::duration(last_tasks_.load())) >
          std::chrono::seconds(1)) {
    why = "no claim came back with tasks in the last second";
    return std::nullopt;
  }
  return leader;
}

// Waits until the cluster has looked settled for kSettledFor; its leader.
int W9Run::Settle(bool need_flow, KillRecord* after) {
  const auto limit = SteadyClock::now() + std::chrono::seconds(90);
  std::optional<SteadyClock::time_point> since;
  std::string why;
  while (true) {
    CheckThreads();
    // A node that ended by itself is started again, as its supervisor would.
    for (const auto& node : nodes_) {
      const std::optional<int> code = node->Exited();
      if (!code) continue;
      std::string what = node->id() + " " + Subprocess::DescribeExit(*code);
      if (after != nullptr) {
        std::ostringstream when;
        when.setf(std::ios::fixed);
        when.precision(1);
        when << ' ' << (NowMs() - after->kill_ms) / 1000 << " s after kill " << after->number;
        what += when.str();
        after->exits.push_back(what);
      }
      std::cerr << "W9: " << what << "; the end of its log (" << node->log().string() << "):\n"
                << Tail(node->log(), 800) << "W9: starting " << node->id() << " again\n";
      node->Start();
    }
    const std::optional<int> leader = SettledLeader(need_flow, why);
    const auto now = SteadyClock::now();
    if (!leader) {
      since.reset();
    } else if (!since) {
      since = now;
    } else if (now - *since >= kSettledFor) {
      return *leader;
    }
    if (now > limit) {
      throw BenchError("W9: the cluster did not settle within 90 s (" + why + ")\n" + Describe());
    }
    std::this_thread::sleep_for(Ms(100));
  }
}

// Every node's view and the end of its log, for error messages.
std::string W9Run::Describe() {
  std::string out;
  for (const auto& node : nodes_) {
    const std::optional<NodeView> v = AskNode(node->endpoint());
    out += node->id() + " (" + node->url() + ", " + (node->running() ? "running" : "not running") +
           (node->paused() ? ", paused" : "") + "): ";
    out += v ? "role " + v->role + ", leader '" + v->leader + "' epoch " +
                   std::to_string(v->epoch) + ", " + std::to_string(v->alive) + " alive"
             : std::string("no answer");
    out += "\n--- the end of " + node->log().string() + ":\n" + Tail(node->log(), 1500) + "\n";
  }
  return out;
}

void W9Run::EnqueuePending() {
  std::atomic<int64_t> ignored{0};
  NodeRing ring(endpoints_, 0, ignored);
  const int64_t start = NowMsInt() + kPendingFromMs;
  std::mt19937_64 rng(9);
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(n_));
  std::cerr << "W9: enqueueing " << n_ << " tasks due over " << kPendingSpanMs / 1000 << " s from "
            << kPendingFromMs / 1000 << " s on\n";
  for (int64_t i = 0; i < n_; i += 1000) {
    std::string body = "{\"tasks\":[";
    for (int64_t k = i; k < std::min(n_, i + 1000); ++k) {
      if (k > i) body += ',';
      body.append(R"({"queue":")")
          .append(queue_)
          .append(R"(","payload":)")
          .append(Payload(rng))
          .append(R"(,"run_at":)")
          .append(std::to_string(start + k * kPendingSpanMs / n_))
          .append("}");
    }
    body += "]}";
    // No failover happens meanwhile; a failure here is an error (the ids are
    // the server's, so a create sent twice could not be told apart).
    const std::optional<Connection::Response> r = ring.Send("POST", "/v1/tasks/batch", body);
    if (!r || r->status != 201) {
      throw BenchError("W9: enqueueing the pending tasks failed" +
                       (r ? ": HTTP " + std::to_string(r->status) + ": " + Excerpt(r->body)
                          : std::string(" (no answer)")));
    }
    // Generated ids hold no quotes, and the payloads hold no "id" key.
    const std::string_view text = r->body;
    for (size_t at = text.find("\"id\":\""); at != std::string_view::npos;
         at = text.find("\"id\":\"", at)) {
      at += 6;
      const size_t end = text.find('"', at);
      ids.emplace_back(text.substr(at, end - at));
      at = end;
    }
  }
  if (static_cast<int64_t>(ids.size()) != n_) {
    throw BenchError("W9: the batch answers named " + std::to_string(ids.size()) + " ids for " +
                     std::to_string(n_) + " tasks");
  }
  std::lock_guard lock(mu_);
  created_.insert(created_.end(), ids.begin(), ids.end());
}

KillRecord W9Run::KillLeader(int number, KillRecord* previous) {
  const int leader = Settle(true, previous);
  ClusterNode& node = *nodes_[static_cast<size_t>(leader)];
  KillRecord k;
  k.number = number;
  k.killed = node.id();
  recovered_.store(SteadyClock::time_point::max().time_since_epoch().count());
  const SteadyClock::time_point killed = SteadyClock::now();
  k.kill_ms = NowMs();
  node.Signal(pause_ ? SIGSTOP : SIGKILL);
  // Claims sent from now on cannot be answered by the old leader.
  watch_from_.store(SteadyClock::now().time_since_epoch().count());
  if (!pause_) node.Kill();  // reap
  auto next_poll = SteadyClock::now();
  while (recovered_.load() == SteadyClock::time_point::max().time_since_epoch().count()) {
    CheckThreads();
    if (k.takeover_ms < 0 && SteadyClock::now() >= next_poll) {
      next_poll = SteadyClock::now() + Ms(50);
      for (const auto& other : nodes_) {
        if (other.get() == &node) continue;
        if (const std::optional<NodeView> v = AskNode(other->endpoint());
            v && v->role == "leader") {
          k.takeover_ms = MsBetween(killed, SteadyClock::now());
          break;
        }
      }
    }
    if (SteadyClock::now() - killed > kFailoverLimit) {
      throw BenchError("W9: kill " + std::to_string(number) + " (" + node.id() +
                       "): no claim came back with tasks within " +
                       std::to_string(kFailoverLimit.count() / 1000) + " s of the " +
                       (pause_ ? "SIGSTOP" : "SIGKILL") + "\n" + Describe());
    }
    std::this_thread::sleep_for(Ms(5));
  }
  std::this_thread::sleep_for(Ms(200));  // a slower worker may have an earlier arrival
  watch_from_.store(SteadyClock::time_point::max().time_since_epoch().count());
  const SteadyClock::time_point recovered(SteadyClock::duration(recovered_.load()));
  k.failover_ms = MsBetween(killed, recovered);
  k.recovered_ms = k.kill_ms + k.failover_ms;
  // Polled every 50 ms: a claim with tasks may come back before the poll
  // sees the new leader, and it cannot without one.
  if (k.takeover_ms < 0 || k.takeover_ms > k.failover_ms) k.takeover_ms = k.failover_ms;
  // The new leader, once its GET /v1/cluster names itself: right after a
  // takeover it may still show the leader row of its last heartbeat round.
  const auto named_by = SteadyClock::now() + std::chrono::seconds(10);
  while (k.new_leader.empty() && SteadyClock::now() < named_by) {
    for (const auto& other : nodes_) {
      if (other.get() == &node) continue;
      const std::optional<NodeView> v = AskNode(other->endpoint());
      if (!v || v->role != "leader") continue;
      if (v->leader == other->id()) {
        k.new_leader = other->id();
        k.epoch = v->epoch;
      } else {
        k.stale_view = true;
      }
    }
    if (k.new_leader.empty()) std::this_thread::sleep_for(Ms(20));
  }
  // Back as a standby: a killed node is started again; a paused one resumes
  // and must find out by itself that it was deposed.
  const SteadyClock::time_point back = SteadyClock::now();
  if (pause_) {
    node.Signal(SIGCONT);
  } else {
    node.Start();
  }
  const auto limit = SteadyClock::now() + std::chrono::seconds(30);
  while (true) {
    const std::optional<NodeView> v = AskNode(node.endpoint());
    if (v && v->role == "standby" && !v->leader.empty() && v->leader != node.id()) break;
    if (SteadyClock::now() > limit) {
      throw BenchError("W9: kill " + std::to_string(number) + ": " + node.id() +
                       " did not stand by within 30 s of its " + (pause_ ? "SIGCONT" : "restart") +
                       "\n" + Describe());
    }
    std::this_thread::sleep_for(Ms(20));
  }
  k.restart_ms = MsBetween(back, SteadyClock::now());
  std::cerr << "W9: kill " << number << ": " << k.killed << " " << (pause_ ? "paused" : "killed")
            << "; " << k.new_leader << " led (epoch " << k.epoch << "), first claim with tasks "
            << Round(k.failover_ms, 1) << " ms after; " << k.killed << " stood by again after "
            << Round(k.restart_ms, 1) << " ms\n";
  return k;
}

// Waits until no task of the queue is scheduled or running (those whose
// lease lapsed in a failover come back after kLeaseMs).
void W9Run::WaitDrained() {
  std::atomic<int64_t> ignored{0};
  NodeRing ring(endpoints_, 0, ignored);
  const std::string path = "/v1/queues/" + cli::PercentEncode(queue_);
  const auto limit = SteadyClock::now() + Ms(kLeaseMs) + std::chrono::seconds(120);
  std::string last;
  while (true) {
    CheckThreads();
    if (const std::optional<Connection::Response> r = ring.Send("GET", path, ""); r) {
      if (r->status == 200) {
        const json counts = json::parse(r->body).at("counts");
        last = counts.dump();
        if (Count(counts, "scheduled") == 0 && Count(counts, "running") == 0) return;
      }
    }
    if (SteadyClock::now() > limit) {
      throw BenchError("W9: tasks left " + std::to_string(kLeaseMs / 1000 + 120) +
                       " s after the last failover: " + last + "\n" + Describe());
    }
    std::this_thread::sleep_for(Ms(500));
  }
}

void W9Run::Run() {
  dir_ = fs::path(o_.dir) / ("http-W9-" + std::string(pause_ ? "sigstop" : "sigkill"));
  std::error_code ec;
  fs::remove_all(dir_, ec);
  fs::create_directories(dir_, ec);
  if (ec) throw BenchError("cannot create " + dir_.string() + ": " + ec.message());
  std::string store;
  if (o_.store.empty()) {
    pg_.emplace(dir_ / "pg");
    store = pg_->url();
  } else {
    const BenchStore schema(o_, "W9");  // bench_w9 in that database, emptied
    schema.Reset();
    store = schema.url();
  }
  for (int i = 0; i < kNodes; ++i) {
    nodes_.push_back(
        std::make_unique<ClusterNode>("n" + std::to_string(i + 1), o_.chronoqd, store, dir_));
    endpoints_.push_back(nodes_.back()->endpoint());
  }
  std::random_device random;
  queue_ = "w9-" + std::to_string(random());
  claim_path_ = "/v1/queues/" + cli::PercentEncode(queue_) + "/claim";
  claim_body_ = "{\"max\":" + std::to_string(kClaimMax) +
                ",\"lease_ms\":" + std::to_string(kLeaseMs) +
                ",\"wait_ms\":" + std::to_string(kWaitMs) + "}";

  // n1 first, so that it leads; then the two standbys.
  nodes_[0]->Start();
  for (int i = 1; i < kNodes; ++i) nodes_[static_cast<size_t>(i)]->Start();
  Settle(false);
  std::cerr << "W9: " << kNodes << " nodes up (" << nodes_[0]->url() << ", " << nodes_[1]->url()
            << ", " << nodes_[2]->url() << "; logs in " << dir_.string() << ")\n";

  std::vector<std::thread> threads;
  std::thread producer;
  // However Run ends, the threads end first (the nodes may be gone by then:
  // every request has a timeout).
  struct Joiner {
    W9Run& run;
    std::vector<std::thread>& threads;
    std::thread& producer;
    ~Joiner() {
      run.stop_producer_.store(true);
      run.stop_workers_.store(true);
      if (producer.joinable()) producer.join();
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{*this, threads, producer};

  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([this, w] { Guard([&] { Worker(w); }); });
  }
  EnqueuePending();
  producer = std::thread([this] { Guard([&] { Producer(); }); });

  std::vector<KillRecord> kills;
  for (int k = 1; k <= o_.kills; ++k) {
    KillRecord next = KillLeader(k, kills.empty() ? nullptr : &kills.back());
    kills.push_back(std::move(next));
  }
  Settle(true, &kills.back());
  std::cerr << "W9: stopping the stream; draining\n";
  stop_producer_.store(true);
  producer.join();
  WaitDrained();
  stop_workers_.store(true);
  for (std::thread& t : threads) t.join();
  CheckThreads();
  Report(kills);

  for (const auto& node : nodes_) {
    const int code = node->Terminate();
    if (code != 0) {
      std::cerr << "W9: " << node->id() << " " << Subprocess::DescribeExit(code)
                << " after SIGTERM; the end of " << node->log().string() << ":\n"
                << Tail(node->log(), 1500) << "\n";
    }
  }
}

void W9Run::Report(const std::vector<KillRecord>& kills) {
  const std::string mode = pause_ ? "sigstop" : "sigkill";
  // What the server says: every succeeded task of the queue.
  std::atomic<int64_t> ignored{0};
  NodeRing ring(endpoints_, 0, ignored);
  std::unordered_set<std::string> succeeded;
  std::string cursor;
  const std::string base =
      "/v1/tasks?queue=" + cli::PercentEncode(queue_) + "&state=succeeded&limit=1000";
  const auto limit = SteadyClock::now() + std::chrono::seconds(120);
  while (true) {
    const std::string path = base + (cursor.empty() ? "" : "&cursor=" + cli::PercentEncode(cursor));
    const std::optional<Connection::Response> r = ring.Send("GET", path, "");
    if (!r || r->status != 200) {
      if (SteadyClock::now() > limit) throw BenchError("W9: cannot list the succeeded tasks");
      continue;
    }
    const json page = json::parse(r->body);
    for (const auto& t : page.at("tasks")) succeeded.insert(t.at("id").get<std::string>());
    if (page.at("next_cursor").is_null()) break;
    cursor = page.at("next_cursor").get<std::string>();
  }

  std::lock_guard lock(mu_);
  // Lost: acknowledged creates that did not end succeeded.
  std::vector<std::string> lost;
  std::unordered_set<std::string> created(created_.begin(), created_.end());
  for (const std::string& id : created_) {
    if (!succeeded.contains(id)) lost.push_back(id);
  }
  for (size_t i = 0; i < lost.size() && i < 10; ++i) {
    std::string state = "?";
    if (const auto r = ring.Send("GET", "/v1/tasks/" + cli::PercentEncode(lost[i]), ""); r) {
      state = "HTTP " + std::to_string(r->status) + ": " + Excerpt(r->body, 300);
    }
    std::cerr << "W9: LOST " << lost[i] << ": " << state << "\n";
  }
  int64_t extra = 0;  // succeeded, never acknowledged as created
  for (const std::string& id : succeeded) {
    if (!created.contains(id)) ++extra;
  }
  // Doubled: claimed again after an ack answered ok.
  int64_t doubled = 0, maybe_doubled = 0, redelivered = 0, never_claimed = 0, refused = 0;
  int64_t unacked = 0;
  std::vector<double> all_late;
  std::vector<std::pair<double, double>> due_late;  // (run_at, lateness)
  for (const std::string& id : created_) {
    const auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second.claims.empty()) {
      if (succeeded.contains(id)) ++never_claimed;
      continue;
    }
    const TaskRecord& t = it->second;
    const double late = t.claims.front().arrived_ms - t.run_at_ms;
    all_late.push_back(late);
    due_late.emplace_back(t.run_at_ms, late);
    if (t.claims.size() > 1) ++redelivered;
    bool acked_before = false, unknown_before = false, counted = false, maybe = false;
    for (const ClaimRecord& c : t.claims) {
      if (acked_before && !counted) {
        ++doubled;
        counted = true;
        std::cerr << "W9: DOUBLED " << id << ": claimed with token " << c.token
                  << " after an ack answered ok\n";
      } else if (unknown_before && !maybe) {
        ++maybe_doubled;
        maybe = true;
      }
      if (c.ack == AckState::kOk) acked_before = true;
      if (c.ack == AckState::kUnknown) unknown_before = true;
      if (c.ack == AckState::kRefused) ++refused;
      if (c.ack == AckState::kNone) ++unacked;
    }
  }
  // Lateness of the tasks due in each failover window [kill, first claim with tasks].
  std::sort(due_late.begin(), due_late.end());
  std::vector<double> window_late;
  for (const KillRecord& k : kills) {
    std::vector<double> mine;
    for (auto it =
             std::lower_bound(due_late.begin(), due_late.end(), std::make_pair(k.kill_ms, -1e300));
         it != due_late.end() && it->first <= k.recovered_ms; ++it) {
      mine.push_back(it->second);
    }
    window_late.insert(window_late.end(), mine.begin(), mine.end());
    json j = Line("W9", "http", mode, n_);
    j["kill"] = k.number;
    j["killed"] = k.killed;
    j["new_leader"] = k.new_leader;
    j["epoch"] = k.epoch;
    j["failover_ms"] = Round(k.failover_ms, 1);
    j["back_as_standby_ms"] = Round(k.restart_ms, 1);
    j["takeover_ms"] = Round(k.takeover_ms, 1);
    if (k.stale_view) j["stale_cluster_view"] = true;
    if (!k.exits.empty()) j["node_exits"] = k.exits;
    j.update(Spread(mine, "window_late_"));
    Emit(j);
  }
  std::vector<double> failover, takeover;
  int64_t exits = 0, stale_views = 0;
  for (const KillRecord& k : kills) {
    failover.push_back(k.failover_ms);
    takeover.push_back(k.takeover_ms);
    exits += static_cast<int64_t>(k.exits.size());
    stale_views += k.stale_view ? 1 : 0;
  }
  json j = Line("W9", "http", mode, n_);
  j["kills"] = static_cast<int64_t>(kills.size());
  json f = Spread(failover, "failover_");
  f.erase("failover_count");
  j.update(f);
  json t = Spread(takeover, "takeover_");
  t.erase("takeover_count");
  j.update(t);
  j.update(Spread(window_late, "window_late_"));
  j.update(Spread(all_late, "all_late_"));
  j["created"] = static_cast<int64_t>(created_.size());
  j["lost"] = static_cast<int64_t>(lost.size());
  j["doubled"] = doubled;
  j["possibly_doubled"] = maybe_doubled;
  j["redelivered"] = redelivered;
  j["acks_refused"] = refused;
  j["acks_unanswered"] = unacked;
  json codes = json::object();
  for (const auto& [code, count] : ack_errors_) codes[code] = count;
  j["ack_errors"] = codes;
  if (extra > 0) j["succeeded_not_created"] = extra;
  if (never_claimed > 0) j["succeeded_never_claimed"] = never_claimed;
  if (duplicate_tokens_ > 0) j["same_token_twice"] = duplicate_tokens_;
  if (abandoned_creates_ > 0) j["creates_abandoned"] = abandoned_creates_;
  if (abandoned_acks_ > 0) j["acks_abandoned"] = abandoned_acks_;
  if (exits > 0) j["node_exits"] = exits;
  if (stale_views > 0) j["stale_cluster_views"] = stale_views;
  j["moves"] = moves_.load();
  j["workers"] = kWorkers;
  Emit(j);
}

}  // namespace

void RunHttpW9(const Options& o, int64_t n, uint64_t) {
  if (!o.url.empty()) throw BenchError("W9 starts its own cluster: run it without --url");
  W9Run run(o, n);
  run.Run();
}

}  // namespace chronoq::bench
