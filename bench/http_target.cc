#include "http_target.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/time.h"

#include "bench_http.h"
#include "bench_store.h"
#include "cli/http_client.h"
#include "common/subprocess.h"
#include "support/chronoqd_process.h"
#include "webhook_receiver.h"
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

namespace chronoq::bench {
namespace {

namespace fs = std::filesystem;
using std::chrono::system_clock;

constexpr int kW1Connections = 32;  // W1 single: one thread each
constexpr int kW3Workers = 2;       // W3 long-polling workers, as the embedded target's pool
constexpr int kW5Pollers = 4;       // W5 long-polling claims held open while idle
constexpr int64_t kLeaseMs = 60'000;
constexpr Ms kRequestTimeout{60'000};

// --- the server ------------------------------------------------------------------------

// The server one workload run talks to: a chronoqd of its own, or --url.
class Server {
 public:
  // `name` ("W1-batch") names the data directory and the progress lines.
  Server(const Options& o, const std::string& name, std::vector<std::string> extra_args = {})
      : name_(name) {
    if (!o.url.empty()) {
      const char* token = std::getenv("CHRONOQ_TOKEN");
      endpoint_ = ResolveUrl(o.url, token == nullptr ? "" : token);
      // Queues of their own, so earlier runs' tasks do not count.
      std::random_device random;
      suffix_ = "-" + std::to_string(random());
      std::cerr << name << ": using " << o.url << "\n";
      return;
    }
    const fs::path data = fs::path(o.dir) / ("http-" + name);
    std::error_code ec;
    fs::remove_all(data, ec);
    if (ec) throw BenchError("cannot remove " + data.string() + ": " + ec.message());
    fs::create_directories(data, ec);
    if (ec) throw BenchError("cannot create " + data.string() + ": " + ec.message());
    // On PostgreSQL the data directory holds only the log.
    const BenchStore store(o, "http-" + name);
    std::vector<std::string> args = std::move(extra_args);
    if (store.postgres()) {
      store.Reset();
      args.insert(args.end(), {"--store", store.url()});
    }
    process_.emplace(test::ChronoqdOptions{
        .binary = o.chronoqd,
        .data_dir = data.string(),
        .args = std::move(args),
        .log = (data / "chronoqd.log").string(),
    });
    if (Status s = process_->Start(); !s.ok()) throw BenchError(s.message());
    const std::string url = "http://127.0.0.1:" + std::to_string(process_->port());
    endpoint_ = ResolveUrl(url, "");
    std::cerr << name << ": chronoqd pid " << process_->pid() << " on " << url << " (data in "
              << data.string() << ")\n";
  }

  const Endpoint& endpoint() const { return endpoint_; }
  // chronoqd's pid, or nullopt with --url.
  std::optional<pid_t> pid() const {
    if (!process_) return std::nullopt;
    return process_->pid();
  }
  // The queue name to use for `base` ("w1").
  std::string Queue(const std::string& base) const { return base + suffix_; }
  std::unique_ptr<Connection> Connect(Ms timeout = kRequestTimeout) const {
    return std::make_unique<Connection>(endpoint_, timeout);
  }
  // Kills a chronoqd of our own at once (SIGKILL): on error paths, to end
  // the long polls of threads that must be joined.
  void Kill() { process_.reset(); }
  // Stops a chronoqd of our own (SIGTERM, exit status 0 or a BenchError).
  void Stop() {
    if (!process_) return;
    const Result<int> code = process_->Stop(SIGTERM);
    if (!code.ok()) throw BenchError(code.status().message());
    if (*code != 0) {
      throw BenchError("chronoqd " + Subprocess::DescribeExit(*code) +
                       " after SIGTERM; the end of its log:\n" + process_->LogTail());
    }
    std::cerr << name_ << ": chronoqd stopped\n";
  }

 private:
  std::string name_;
  std::optional<test::ChronoqdProcess> process_;
  Endpoint endpoint_;
  std::string suffix_;
};

// Runs a function when the scope ends, however it ends.
template <typename F>
class AtScopeExit {
 public:
  explicit AtScopeExit(F fn) : fn_(std::move(fn)) {}
  ~AtScopeExit() { fn_(); }
  AtScopeExit(const AtScopeExit&) = delete;
  AtScopeExit& operator=(const AtScopeExit&) = delete;

 private:
  F fn_;
};

// --- running threads together ----------------------------------------------------------

struct Span {
  SteadyClock::time_point start;  // when the threads were released
  SteadyClock::time_point end;    // when the last one returned
};

// Runs fn(i) for i in [0, count) on threads of their own, released together
// once all of them exist. `stop` is raised as soon as one throws; the first
// error is rethrown as a BenchError after every thread ended.
Span RunTogether(int count, std::atomic<bool>& stop, const std::function<void(int)>& fn) {
  std::latch ready(count + 1);
  std::latch go(1);
  std::mutex mu;
  std::string error;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      ready.count_down();
      go.wait();
      try {
        fn(i);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (error.empty()) error = e.what();
        stop.store(true);
      }
    });
  }
  ready.arrive_and_wait();
  Span span;
  span.start = SteadyClock::now();
  go.count_down();
  for (std::thread& t : threads) t.join();
  span.end = SteadyClock::now();
  if (!error.empty()) throw BenchError(error);
  return span;
}

// --- request bodies ----------------------------------------------------------------------

// One task object; `when` is "delay_ms":D or "run_at":T, or empty (due now).
void AppendTask(std::string& out, const std::string& queue, std::mt19937_64& rng,
                const std::string& when) {
  out.append("{\"queue\":\"").append(queue).append("\",\"payload\":").append(Payload(rng));
  if (!when.empty()) out.append(",").append(when);
  out.append("}");
}

// Bodies of POST /v1/tasks/batch with up to `per_batch` tasks each;
// when(i) gives task i's timing field (or any other field: a target).
std::vector<std::string> BatchBodies(const std::string& queue, int64_t n, int64_t per_batch,
                                     std::mt19937_64& rng,
                                     const std::function<std::string(int64_t)>& when) {
  std::vector<std::string> bodies;
  for (int64_t i = 0; i < n; i += per_batch) {
    std::string body = "{\"tasks\":[";
    for (int64_t k = i; k < std::min(n, i + per_batch); ++k) {
      if (k > i) body += ',';
      AppendTask(body, queue, rng, when(k));
    }
    body += "]}";
    bodies.push_back(std::move(body));
  }
  return bodies;
}

void SendBatches(Connection& c, const std::vector<std::string>& bodies) {
  for (const std::string& body : bodies) c.Expect2xx("POST", "/v1/tasks/batch", body);
}

// --- /proc -------------------------------------------------------------------------------

// Voluntary context switches per thread of `pid`, by "tid name".
std::map<std::string, int64_t> ThreadSwitches(pid_t pid) {
  std::map<std::string, int64_t> out;
  const fs::path dir = fs::path("/proc") / std::to_string(pid) / "task";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::ifstream in(e.path() / "status");
    std::string line, name;
    std::optional<int64_t> switches;
    while (std::getline(in, line)) {
      if (line.rfind("Name:", 0) == 0) name = line.substr(line.find_first_not_of(" \t", 5));
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
        switches = std::stoll(line.substr(24));
        break;
      }
    }
    if (switches) out[e.path().filename().string() + " " + name] = *switches;
  }
  if (ec || out.empty()) throw BenchError("cannot read " + dir.string() + ": " + ec.message());
  return out;
}

// User + system CPU seconds of `pid` (all threads), from /proc/PID/stat.
double ProcessCpuSeconds(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');  // the name may hold spaces and parentheses
  if (paren == std::string::npos) throw BenchError("cannot read " + path);
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  // After the name: state is field 3, utime field 14, stime field 15.
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

// Checks that all `n` tasks of a W1 run are scheduled, then prints its line.
void ReportW1(Connection& c, const std::string& queue, const std::string& mode, int64_t n,
              int connections, const Span& span, const std::string& batch_return = "") {
  const int64_t scheduled = Count(QueueCounts(c, queue), "scheduled");
  if (scheduled != n) {
    throw BenchError("W1 " + mode + ": " + std::to_string(scheduled) + " of " + std::to_string(n) +
                     " tasks are scheduled after the enqueue");
  }
  json j = Line("W1", "http", mode, n);
  j["per_s"] = std::llround(static_cast<double>(n) / Seconds(span.end - span.start));
  j["connections"] = connections;
  if (!batch_return.empty()) j["return"] = batch_return;
  Emit(j);
}

// --- workloads ---------------------------------------------------------------------------

void RunHttpW1(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> delay_ms(1'000, 600'000);
  auto random_delay = [&](int64_t) { return "\"delay_ms\":" + std::to_string(delay_ms(rng)); };

  if (o.mode.empty() || o.mode == "batch") {
    Server server(o, "W1-batch");
    const std::string queue = server.Queue("w1");
    const int conns = static_cast<int>(
        std::min<int64_t>(o.w1_batch_connections, std::max<int64_t>(1, (n + 999) / 1000)));
    std::vector<std::string> bodies = BatchBodies(queue, n, 1000, rng, random_delay);
    if (o.w1_batch_return != "tasks") {
      for (std::string& body : bodies) {
        body.insert(body.size() - 1, ",\"return\":\"" + o.w1_batch_return + "\"");
      }
    }
    std::vector<std::unique_ptr<Connection>> c;
    for (int i = 0; i < conns; ++i) c.push_back(server.Connect());
    std::cerr << "W1 batch: enqueueing " << n << " tasks in batches of 1000 over " << conns
              << " connection(s)\n";
    std::atomic<bool> stop{false};
    const Span span = RunTogether(conns, stop, [&](int t) {
      for (size_t i = static_cast<size_t>(t); i < bodies.size() && !stop.load();
           i += static_cast<size_t>(conns)) {
        c[static_cast<size_t>(t)]->Expect2xx("POST", "/v1/tasks/batch", bodies[i]);
      }
    });
    ReportW1(*c[0], queue, "batch", n, conns, span, o.w1_batch_return);
    c.clear();
    server.Stop();
  }
  if (o.mode.empty() || o.mode == "single") {
    Server server(o, "W1-single");
    const std::string queue = server.Queue("w1");
    // Every connection's request bodies, back to back, with their end offsets.
    std::vector<std::string> text(kW1Connections);
    std::vector<std::vector<size_t>> ends(kW1Connections);
    for (int t = 0; t < kW1Connections; ++t) {
      const int64_t count = n / kW1Connections + (t < n % kW1Connections ? 1 : 0);
      for (int64_t k = 0; k < count; ++k) {
        AppendTask(text[static_cast<size_t>(t)], queue, rng, random_delay(k));
        ends[static_cast<size_t>(t)].push_back(text[static_cast<size_t>(t)].size());
      }
    }
    std::vector<std::unique_ptr<Connection>> c;
    for (int i = 0; i < kW1Connections; ++i) c.push_back(server.Connect());
    std::cerr << "W1 single: enqueueing " << n << " tasks one per request over " << kW1Connections
              << " connections\n";
    std::atomic<bool> stop{false};
    const Span span = RunTogether(kW1Connections, stop, [&](int t) {
      const std::string& all = text[static_cast<size_t>(t)];
      Connection& conn = *c[static_cast<size_t>(t)];
      size_t begin = 0;
      for (const size_t end : ends[static_cast<size_t>(t)]) {
        if (stop.load(std::memory_order_relaxed)) return;
        conn.Expect2xx("POST", "/v1/tasks", std::string_view(all).substr(begin, end - begin));
        begin = end;
      }
    });
    ReportW1(*c[0], queue, "single", n, kW1Connections, span);
    c.clear();
    server.Stop();
  }
}

namespace {
// A claim request body for `max` tasks under the benchmarks' lease. The
// claimers name themselves as real workers do (HOST:PID is ~20 bytes), so
// the cost of keeping each task's worker is in the figures.
std::string ClaimBody(int max, int wait_ms) {
  return "{\"max\":" + std::to_string(max) + ",\"lease_ms\":" + std::to_string(kLeaseMs) +
         ",\"wait_ms\":" + std::to_string(wait_ms) +
         ",\"worker\":\"chronoq-bench:" + std::to_string(getpid()) + "\"}";
}
// What a drain measured.
struct Drained {
  double seconds = 0;  // from the first claim to the last acknowledgement
  int64_t claimed = 0;
};

// Drains the n tasks due in `queue`: one worker per connection claims
// `batch` at a time and calls on_claim(leases) (from several threads); each
// claim after the first acknowledges the one before (its "acks"), and the
// last claim is acknowledged with one POST /v1/acks. Then checks that all n
// succeeded.
Drained Drain(std::vector<std::unique_ptr<Connection>>& c, const std::string& queue, int batch,
              int64_t n, const std::string& label,
              const std::function<void(const std::vector<LeaseRef>&)>& on_claim) {
  const std::string claim_path = "/v1/queues/" + cli::PercentEncode(queue) + "/claim";
  std::atomic<int64_t> claimed{0}, empty_claims{0};
  std::atomic<SteadyClock::rep> first_claim{
      SteadyClock::time_point::max().time_since_epoch().count()};
  std::atomic<SteadyClock::rep> last_ack{0};
  const auto limit =
      SteadyClock::now() + std::chrono::seconds(120) + std::chrono::microseconds(n * 1000);
  std::atomic<bool> stop{false};
  RunTogether(static_cast<int>(c.size()), stop, [&](int t) {
    Connection& conn = *c[static_cast<size_t>(t)];
    std::vector<LeaseRef> leases;
    std::string acks;  // `"acks":[...]` of the last claim, until sent
    size_t unacked = 0;
    std::string body;
    bool waited = false;
    while (claimed.load() < n && !stop.load(std::memory_order_relaxed)) {
      if (SteadyClock::now() > limit) throw BenchError(label + ": tasks left at the time limit");
      // After an empty answer while tasks are left: wait instead of spinning.
      body = ClaimBody(batch, waited ? 200 : 0);
      if (unacked > 0) {
        body.back() = ',';
        body.append(acks).append("}");
      }
      leases.clear();
      StoreMin(first_claim, SteadyClock::now());
      const Connection::Response r = conn.Expect2xx("POST", claim_path, body);
      if (unacked > 0) {
        CheckAcked(r.body, r.body.rfind("\"acks\":"), unacked, "POST " + claim_path);
        StoreMax(last_ack, SteadyClock::now());
        unacked = 0;
      }
      LeaseScanner(r.body, conn.what()).Scan(leases);
      if (leases.empty()) {
        empty_claims.fetch_add(1);
        waited = true;
        continue;
      }
      waited = false;
      on_claim(leases);
      claimed.fetch_add(static_cast<int64_t>(leases.size()));
      acks.clear();
      AppendAcks(acks, leases);
      unacked = leases.size();
    }
    if (unacked > 0) {
      body = "{" + acks + "}";
      CheckAcked(conn.Expect2xx("POST", "/v1/acks", body).body, 0, unacked, "POST /v1/acks");
      StoreMax(last_ack, SteadyClock::now());
    }
  });
  const json counts = QueueCounts(*c[0], queue);
  if (Count(counts, "succeeded") != n) {
    throw BenchError(label + ": " + std::to_string(Count(counts, "succeeded")) + " of " +
                     std::to_string(n) + " tasks succeeded after the drain (" +
                     std::to_string(claimed.load()) + " claimed): " + counts.dump());
  }
  if (empty_claims.load() > 0) {
    std::cerr << label << ": " << empty_claims.load() << " empty claims\n";
  }
  return {Seconds(AsTime(last_ack) - AsTime(first_claim)), claimed.load()};
}
}  // namespace

namespace {

// Dashboards left open on the overview while a workload runs: each, on its
// own keep-alive connection, asks what the dashboard's overview asks
// (src/server/ui/overview.js): GET /v1/queues every 2 s and GET
// /v1/stats/history every 10 s, their starts spread over the first 2 s.
class DashboardLoad {
 public:
  static constexpr Ms kRefresh{2000};
  static constexpr int kHistoryEvery = 5;  // refreshes

  DashboardLoad(const Server& server, int dashboards) {
    for (int i = 0; i < dashboards; ++i) {
      threads_.emplace_back([this, conn = server.Connect(), i, dashboards] {
        auto next = SteadyClock::now() + kRefresh * i / dashboards;
        for (int round = 0;; ++round) {
          {
            std::unique_lock lock(mu_);
            if (stop_cv_.wait_until(lock, next, [this] { return stopping_; })) return;
          }
          conn->Expect2xx("GET", "/v1/queues", "");
          if (round % kHistoryEvery == 0) conn->Expect2xx("GET", "/v1/stats/history", "");
          requests_.fetch_add(round % kHistoryEvery == 0 ? 2 : 1);
          next += kRefresh;
        }
      });
    }
  }
  ~DashboardLoad() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  int64_t requests() const { return requests_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::atomic<int64_t> requests_{0};
  std::vector<std::thread> threads_;
};

}  // namespace

void RunHttpW2(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Server server(o, "W2");
  const std::string queue = server.Queue("w2");
  // chronoqd's CPU through enqueue, claim and acknowledgement of the n tasks
  // (issue 19's cost per task), when this process started it.
  const std::optional<pid_t> pid = server.pid();
  const double cpu0 = pid ? ProcessCpuSeconds(*pid) : 0.0;
  {
    const auto bodies = BatchBodies(queue, n, 1000, rng, [](int64_t) { return std::string(); });
    std::cerr << "W2: enqueueing " << n << " tasks due now\n";
    SendBatches(*server.Connect(), bodies);
  }
  const int workers = o.concurrency;
  std::vector<std::unique_ptr<Connection>> c;
  for (int i = 0; i < workers; ++i) c.push_back(server.Connect());
  std::cerr << "W2: draining with " << workers << " connections, claims of " << o.batch << "\n";

  std::optional<DashboardLoad> dashboards;
  if (o.dashboards > 0) {
    std::cerr << "W2: " << o.dashboards << " dashboards open meanwhile\n";
    dashboards.emplace(server, o.dashboards);
  }
  const Drained d = Drain(c, queue, o.batch, n, "W2", [](const std::vector<LeaseRef>&) {});
  json j = Line("W2", "http", "", n);
  if (dashboards) {
    j["dashboards"] = o.dashboards;
    j["dashboard_requests"] = dashboards->requests();
    dashboards.reset();
  }
  j["per_s"] = std::llround(static_cast<double>(n) / d.seconds);
  j["redelivered"] = d.claimed - n;
  j["connections"] = workers;
  j["claim_batch"] = o.batch;
  if (pid) {
    j["chronoqd_cpu_s_per_m"] =
        Round((ProcessCpuSeconds(*pid) - cpu0) / static_cast<double>(n) * 1e6, 2);
  }
  Emit(j);
  c.clear();
  server.Stop();
}

namespace {

// One W6 mode over HTTP, as RunW6Mode in chronoq_bench.cc: n tasks due now,
// task i of key i % 100 (index i / 100), with or without keys, drained by
// o.w6_workers connections claiming o.batch at a time and acknowledging each
// claim with one POST /v1/acks. Prints the mode's line; returns its tasks/s.
double RunHttpW6Mode(const Options& o, int64_t n, const std::string& mode, double unkeyed_per_s) {
  const bool keyed = mode == "keyed";
  const std::string label = "W6 " + mode;
  Server server(o, "W6-" + mode);
  const std::string queue = server.Queue("w6");
  // The queue's max_in_flight_per_key stays at its default, 1.
  {
    // All due at the same instant, so that each key's order is its enqueue order.
    const std::string due_ms = std::to_string(
        std::chrono::duration_cast<Ms>(system_clock::now().time_since_epoch()).count());
    std::vector<std::string> bodies;
    bodies.reserve(static_cast<size_t>((n + 999) / 1000));
    for (int64_t i = 0; i < n; i += 1000) {
      std::string body = "{\"tasks\":[";
      for (int64_t k = i; k < std::min(n, i + 1000); ++k) {
        const int key = static_cast<int>(k % kW6Keys);
        if (k > i) body += ',';
        body.append(R"({"queue":")")
            .append(queue)
            .append(R"(","payload":)")
            .append(W6Payload(key, k / kW6Keys))
            .append(R"(,"run_at":)")
            .append(due_ms);
        if (keyed) body.append(R"(,"key":")").append(W6KeyName(key)).append("\"");
        body += '}';
      }
      body += "]}";
      bodies.push_back(std::move(body));
    }
    std::cerr << label << ": enqueueing " << n << " tasks due now over " << kW6Keys << " keys\n";
    SendBatches(*server.Connect(), bodies);
  }
  const int workers = o.w6_workers;
  std::vector<std::unique_ptr<Connection>> c;
  for (int i = 0; i < workers; ++i) c.push_back(server.Connect());
  std::cerr << label << ": draining with " << workers << " connections, claims of " << o.batch
            << "\n";

  KeyOrderChecker checker(keyed);  // thread-safe
  const Drained d = Drain(c, queue, o.batch, n, label, [&](const std::vector<LeaseRef>& leases) {
    // The claim's tasks all start, then all finish, before the ack.
    std::vector<int> keys;
    keys.reserve(leases.size());
    for (const LeaseRef& l : leases) keys.push_back(checker.Start(l.payload, l.key));
    for (const int key : keys) checker.Finish(key);
  });
  const double per_s = static_cast<double>(n) / d.seconds;
  json j = Line("W6", "http", mode, n);
  j["per_s"] = std::llround(per_s);
  ReportW6Checker(checker, label, j);
  if (keyed && unkeyed_per_s > 0) j["ratio"] = Round(per_s / unkeyed_per_s, 3);
  j["redelivered"] = d.claimed - n;
  j["connections"] = workers;
  j["claim_batch"] = o.batch;
  Emit(j);
  c.clear();
  server.Stop();
  return per_s;
}

}  // namespace

void RunHttpW6(const Options& o, int64_t n, uint64_t) {
  double unkeyed_per_s = 0;
  if (o.mode != "keyed") unkeyed_per_s = RunHttpW6Mode(o, n, "unkeyed", 0);
  if (o.mode != "unkeyed") RunHttpW6Mode(o, n, "keyed", unkeyed_per_s);
}

void RunHttpW3(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Server server(o, "W3");
  const std::string queue = server.Queue("w3");
  std::vector<std::unique_ptr<Connection>> c;
  for (int i = 0; i < kW3Workers; ++i) c.push_back(server.Connect());
  auto producer = server.Connect();

  std::mutex mu;
  std::vector<double> lateness_ms;
  std::exception_ptr failed;
  // The workers long-poll from before the enqueue on, as a real pool would,
  // each claim carrying the acknowledgements of the one before (Drain).
  std::thread runner([&] {
    try {
      Drain(c, queue, 100, n, "W3", [&](const std::vector<LeaseRef>& leases) {
        const auto arrived = system_clock::now();
        std::lock_guard lock(mu);
        for (const LeaseRef& l : leases) {
          const Result<Timestamp> run_at = ParseTime(l.run_at, "run_at");
          if (!run_at.ok()) throw BenchError("W3: claim answer: " + run_at.status().ToString());
          lateness_ms.push_back(
              std::chrono::duration<double, std::milli>(arrived - *run_at).count());
        }
      });
    } catch (...) {
      failed = std::current_exception();
    }
  });

  // The first task is due 1 s from now, so the enqueue itself is not late.
  const int64_t start_ms =
      std::chrono::duration_cast<Ms>(system_clock::now().time_since_epoch()).count() + 1000;
  const auto bodies = BatchBodies(queue, n, 1000, rng, [&](int64_t i) {
    return "\"run_at\":" + std::to_string(start_ms + i * 10'000 / n);
  });
  std::cerr << "W3: scheduling " << n << " tasks over 10 s, " << kW3Workers
            << " long-polling workers\n";
  try {
    SendBatches(*producer, bodies);
  } catch (...) {
    // The drain ends at its time limit, without the tasks.
    runner.join();
    throw;
  }
  runner.join();
  if (failed) std::rethrow_exception(failed);
  std::vector<double>& all = lateness_ms;
  std::sort(all.begin(), all.end());
  json j = Line("W3", "http", "", n);
  j["p50_ms"] = Round(Percentile(all, 50), 3);
  j["p99_ms"] = Round(Percentile(all, 99), 3);
  j["max_ms"] = Round(all.back(), 3);
  if (static_cast<int64_t>(all.size()) != n)
    j["redelivered"] = static_cast<int64_t>(all.size()) - n;
  j["connections"] = kW3Workers;
  Emit(j);
  c.clear();
  producer.reset();
  server.Stop();
}

void RunHttpW7(const Options& o, int64_t n, uint64_t) {
  constexpr int kClients = 32;
  constexpr int kContenders = 8;
  Server server(o, "W7");
  const std::string prefix = server.Queue("w7");
  // Acquires and releases `pairs` locks from `clients` connections; the key of
  // pair i is key_of(i). Pairs per second.
  auto run = [&](int clients, int64_t pairs, const std::string& wait_ms, auto key_of) {
    std::vector<std::unique_ptr<Connection>> c;
    for (int i = 0; i < clients; ++i) c.push_back(server.Connect());
    const std::string acquire = R"({"wait_ms":)" + wait_ms + R"(,"lease_ms":30000})";
    std::atomic<bool> stop{false};
    const Span span = RunTogether(clients, stop, [&](int t) {
      Connection& conn = *c[static_cast<size_t>(t)];
      for (int64_t i = t; i < pairs && !stop.load(std::memory_order_relaxed); i += clients) {
        const std::string path = "/v1/locks/" + key_of(i);
        const Connection::Response r = conn.Expect2xx("POST", path + "/acquire", acquire);
        const size_t at = r.body.find("\"token\":");
        if (at == std::string::npos) throw BenchError("no token in " + Excerpt(r.body));
        uint64_t token = 0;
        std::from_chars(r.body.data() + at + 8, r.body.data() + r.body.size(), token);
        conn.Expect2xx("POST", path + "/release", R"({"token":)" + std::to_string(token) + "}");
      }
    });
    return static_cast<double>(pairs) / Seconds(span.end - span.start);
  };
  std::cerr << "W7: " << n << " acquire+release pairs on distinct keys over " << kClients
            << " connections\n";
  const double uncontended =
      run(kClients, n, "0", [&](int64_t i) { return prefix + "-" + std::to_string(i); });
  std::cerr << "W7: " << n / 4 << " pairs on one key over " << kContenders << " connections\n";
  const double contended =
      run(kContenders, n / 4, "60000", [&](int64_t) { return prefix + "-hot"; });
  json j = Line("W7", "http", "", n);
  j["uncontended_pairs_per_s"] = std::llround(uncontended);
  j["contended_pairs_per_s"] = std::llround(contended);
  Emit(j);
  server.Stop();
}

void RunHttpW5(const Options& o, int64_t n, uint64_t seed) {
  if (!o.url.empty()) {
    throw BenchError(
        "W5 needs a chronoqd that the bench starts itself (it reads the server's "
        "/proc/PID/task/*/status and /proc/PID/stat): run it without --url");
  }
  std::mt19937_64 rng(seed);
  // chronoqd samples its statistics (the dashboard's charts) every
  // --stats-interval-ms while it works, and after the last activity takes up
  // to two more samples (the interval that counted it, one that counted
  // nothing) before it sleeps. Sampled every second here (ten times as often
  // as by default), those fall in the settling time below, before the
  // measured idle.
  Server server(o, "W5", {"--stats-interval-ms", "1000"});
  const pid_t pid = *server.pid();
  const std::string queue = server.Queue("w5");
  const std::string claim_path = "/v1/queues/" + cli::PercentEncode(queue) + "/claim";
  {
    const auto bodies = BatchBodies(queue, n, 1000, rng,
                                    [](int64_t) { return std::string("\"delay_ms\":3600000"); });
    std::cerr << "W5: enqueueing " << n << " tasks due in 1 h\n";
    SendBatches(*server.Connect(), bodies);
  }
  // Long polls that outlast the idle period: SIGTERM answers them (empty).
  constexpr int64_t kWaitMs = 3'600'000;
  const std::string claim_body = ClaimBody(100, static_cast<int>(kWaitMs));
  std::vector<std::unique_ptr<Connection>> c;
  for (int i = 0; i < kW5Pollers; ++i) c.push_back(server.Connect(Ms(kWaitMs + 60'000)));
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> claimed{0};
  std::mutex mu;
  std::string error;
  std::vector<std::thread> pollers;
  // On an error path, SIGKILL ends the long polls so that the threads can be
  // joined; on the normal path they are joined already.
  const AtScopeExit join_pollers([&] {
    stopping.store(true);
    if (std::none_of(pollers.begin(), pollers.end(), [](auto& t) { return t.joinable(); })) return;
    server.Kill();
    for (std::thread& t : pollers) {
      if (t.joinable()) t.join();
    }
  });
  for (int i = 0; i < kW5Pollers; ++i) {
    pollers.emplace_back([&, i] {
      try {
        std::vector<LeaseRef> leases;
        while (!stopping.load()) {
          leases.clear();
          Claim(*c[static_cast<size_t>(i)], claim_path, claim_body, leases);
          claimed.fetch_add(static_cast<int64_t>(leases.size()));
        }
      } catch (const std::exception& e) {
        if (stopping.load()) return;  // chronoqd closing the connection at its stop
        std::lock_guard lock(mu);
        if (error.empty()) error = e.what();
      }
    });
  }
  // Let the claims park and the statistics sampler settle (above).
  std::this_thread::sleep_for(std::chrono::seconds(3));

  std::cerr << "W5: idling " << o.idle_s << " s with " << kW5Pollers << " long polls open\n";
  const auto switches0 = ThreadSwitches(pid);
  const double cpu0 = ProcessCpuSeconds(pid);
  const auto t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_s));
  const auto switches1 = ThreadSwitches(pid);
  const double cpu1 = ProcessCpuSeconds(pid);
  const double s = Seconds(SteadyClock::now() - t0);

  int64_t total = 0;
  for (const auto& [thread, after] : switches1) {
    const auto before = switches0.find(thread);
    const int64_t delta = after - (before == switches0.end() ? 0 : before->second);
    total += delta;
    if (delta != 0) std::cerr << "W5: thread " << thread << ": " << delta << " wake-ups\n";
  }
  for (const auto& [thread, before] : switches0) {
    if (!switches1.contains(thread)) std::cerr << "W5: thread " << thread << " ended meanwhile\n";
  }

  stopping.store(true);
  std::exception_ptr stop_error;
  try {
    server.Stop();  // answers the long polls
  } catch (...) {
    stop_error = std::current_exception();
  }
  for (std::thread& t : pollers) t.join();
  if (!error.empty()) throw BenchError("W5: " + error);
  if (stop_error) std::rethrow_exception(stop_error);
  if (claimed.load() != 0) {
    std::cerr << "W5: " << claimed.load() << " tasks were claimed (expected 0)\n";
  }
  json j = Line("W5", "http", "", n);
  j["wakeups_per_s"] = Round(static_cast<double>(total) / s, 2);
  j["cpu_pct"] = Round((cpu1 - cpu0) / s * 100.0, 3);
  j["threads"] = static_cast<int64_t>(switches1.size());
  j["long_polls"] = kW5Pollers;
  Emit(j);
}

void RunHttpWebhook(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  FastReceiver receiver;
  Server server(o, "W-webhook",
                {"--webhook-concurrency", std::to_string(o.webhook_concurrency),
                 "--webhook-claim-batch", std::to_string(o.webhook_claim_batch)});
  const std::string queue = server.Queue("hooks");
  const std::string path = "/v1/queues/" + cli::PercentEncode(queue);
  auto c = server.Connect();
  // Paused while it fills, so that the deliveries are timed alone.
  c->Expect2xx("POST", path + "/pause", "");
  {
    // Each task's extra field (BatchBodies') is its target.
    const std::string target = R"("target":{"url":")" + receiver.url() + "\"}";
    const auto bodies = BatchBodies(queue, n, 1000, rng, [&](int64_t) { return target; });
    std::cerr << "W-webhook: enqueueing " << n << " webhook tasks on a paused queue\n";
    SendBatches(*c, bodies);
  }
  receiver.WatchFor(n);
  std::cerr << "W-webhook: delivering with --webhook-concurrency " << o.webhook_concurrency
            << ", --webhook-claim-batch " << o.webhook_claim_batch << "\n";
  const auto t0 = SteadyClock::now();
  c->Expect2xx("POST", path + "/resume", "");
  const auto limit = t0 + std::chrono::seconds(120) + std::chrono::microseconds(n * 200);
  int64_t succeeded = 0;
  while ((succeeded = Count(QueueCounts(*c, queue), "succeeded")) < n) {
    if (SteadyClock::now() > limit) {
      throw BenchError("W-webhook: only " + std::to_string(succeeded) + " of " + std::to_string(n) +
                       " deliveries succeeded before the time limit");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto end = SteadyClock::now();
  json j = Line("W-webhook", "http", "", n);
  j["per_s"] = std::llround(static_cast<double>(n) / Seconds(end - t0));
  j["answered_per_s"] = std::llround(static_cast<double>(n) / Seconds(receiver.reached() - t0));
  j["requests"] = receiver.requests();
  j["connections"] = receiver.connections();
  j["webhook_concurrency"] = o.webhook_concurrency;
  j["claim_batch"] = o.webhook_claim_batch;
  Emit(j);
  c.reset();
  server.Stop();
}

}  // namespace chronoq::bench
