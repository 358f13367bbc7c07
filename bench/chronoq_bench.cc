// chronoq-bench: the load generator of the workloads in BENCHMARKS.md.
//
//   chronoq-bench --workload W1|W2|W3|W4|W5|W6|W7|W8|W9|W-schedule|all --target embedded|http
//                 [--dir DIR] [-n N] [--runs R] [--concurrency C] [--batch B] [--mode M]
//                 [--store postgresql://USER@HOST:PORT/DB] [--url URL | --chronoqd PATH]
//
// Prints one JSON object per result line on stdout, e.g.
//   {"workload":"W1","target":"embedded","mode":"batch","n":100000,"per_s":312345}
// and progress and diagnostics on stderr only. With --runs R every workload
// runs R times and prints every run; whoever reads the lines takes the median.
//
// Target `embedded`: each workload opens a fresh engine (DIR/<workload>-<mode>.db,
// or with --store the schema bench_<workload>_<mode> of that PostgreSQL
// database; see bench_store.h) in-process, on the real system clock.
// Target `http` (W1, W2, W3, W5, W6, W7; see http_target.h): each workload run starts a
// fresh chronoqd (DIR/http-<workload>[-<mode>]/, on the schema
// bench_http_<workload>[_<mode>] with --store) and talks to it over loopback,
// or uses the server at --url (W5 then fails: it reads the server's /proc).
// W9 (http only, never under "all") starts a cluster of three chronoqd
// nodes on PostgreSQL and kills its leader again and again (failover.cc).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "chronoq/clock.h"
#include "chronoq/engine.h"
#include "chronoq/queue.h"
#include "chronoq/status.h"
#include "chronoq/task.h"

#include "bench_common.h"
#include "bench_store.h"
#include "http_target.h"
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using chronoq::bench::BenchError;
using chronoq::bench::BenchStore;
using chronoq::bench::Emit;
using chronoq::bench::json;
using chronoq::bench::Line;
using chronoq::bench::Options;
using chronoq::bench::Payload;
using chronoq::bench::Percentile;
using chronoq::bench::Round;
using chronoq::bench::Seconds;
using chronoq::bench::SteadyClock;

// --- helpers -------------------------------------------------------------------

void Check(const chronoq::Status& s, const std::string& what) {
  if (!s.ok()) throw BenchError(what + ": " + s.ToString());
}

template <typename T>
T Check(chronoq::Result<T> r, const std::string& what) {
  if (!r.ok()) throw BenchError(what + ": " + r.status().ToString());
  return std::move(r).value();
}

// The store of one workload run ("W1", mode "batch": "W1-batch").
BenchStore StoreOf(const Options& o, const std::string& workload, const std::string& mode) {
  return BenchStore(o, mode.empty() ? workload : workload + "-" + mode);
}

std::unique_ptr<chronoq::Engine> OpenEngine(const BenchStore& store) {
  chronoq::EngineOptions options;
  options.store = store.url();
  return Check(chronoq::Engine::Open(options), "open " + store.Describe());
}

// Empties the store and opens a fresh engine on it.
std::unique_ptr<chronoq::Engine> OpenFresh(const BenchStore& store) {
  store.Reset();
  return OpenEngine(store);
}

// Resident memory of this process, in MiB.
double RssMib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  throw BenchError("no VmRSS in /proc/self/status");
}

// Voluntary context switches of every thread of this process but `skip_tid`.
int64_t VoluntarySwitches(pid_t skip_tid) {
  int64_t total = 0;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc/self/task")) {
    if (e.path().filename() == std::to_string(skip_tid)) continue;
    std::ifstream in(e.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
        total += std::stoll(line.substr(24));
        break;
      }
    }
  }
  return total;
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

// Hands memory freed by the previous workload back to the OS, so that one
// workload's resident memory does not include another's leftovers.
void TrimHeap() { malloc_trim(0); }

// Tasks of `queue` with 16-byte payloads, each due after a uniformly random
// delay in [lo, hi].
std::vector<chronoq::TaskSpec> MakeSpecs(const std::string& queue, int64_t count,
                                         chronoq::Duration lo, chronoq::Duration hi,
                                         std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> delay(lo.count(), hi.count());
  std::vector<chronoq::TaskSpec> specs(static_cast<size_t>(count));
  for (chronoq::TaskSpec& s : specs) {
    s.queue = queue;
    s.payload = Payload(rng);
    s.delay = chronoq::Duration(delay(rng));
  }
  return specs;
}

// Enqueues `specs` in batches of `batch`; returns the seconds spent in
// EnqueueBatch.
double EnqueueBatched(chronoq::Engine& engine, const std::vector<chronoq::TaskSpec>& specs,
                      size_t batch) {
  double spent = 0;
  std::vector<chronoq::TaskSpec> chunk;
  for (size_t i = 0; i < specs.size(); i += batch) {
    const size_t end = std::min(specs.size(), i + batch);
    chunk.assign(specs.begin() + static_cast<std::ptrdiff_t>(i),
                 specs.begin() + static_cast<std::ptrdiff_t>(end));
    const auto t0 = SteadyClock::now();
    Check(engine.EnqueueBatch(chunk), "enqueue batch");
    spent += Seconds(SteadyClock::now() - t0);
  }
  return spent;
}

// Counts the tasks of `queue` in `state` by paging through List.
int64_t CountTasks(chronoq::Engine& engine, const std::string& queue, chronoq::TaskState state) {
  chronoq::ListRequest req;
  req.queue = queue;
  req.state = state;
  req.limit = 1000;
  int64_t count = 0;
  while (true) {
    chronoq::TaskPage page = Check(engine.List(req), "list tasks");
    count += static_cast<int64_t>(page.tasks.size());
    if (page.next_cursor.empty()) return count;
    req.cursor = page.next_cursor;
  }
}

bool AnyTask(chronoq::Engine& engine, const std::string& queue, chronoq::TaskState state) {
  chronoq::ListRequest req;
  req.queue = queue;
  req.state = state;
  req.limit = 1;
  return !Check(engine.List(req), "list tasks").tasks.empty();
}

// Returns once no task of `queue` is scheduled or running: the last
// acknowledgement is committed. Workers acknowledge after their handler
// returns, so a handler count alone does not mean that.
void WaitAllAcked(chronoq::Engine& engine, const std::string& queue,
                  SteadyClock::time_point limit) {
  while (AnyTask(engine, queue, chronoq::TaskState::kRunning) ||
         AnyTask(engine, queue, chronoq::TaskState::kScheduled)) {
    if (SteadyClock::now() > limit) {
      throw BenchError("tasks of queue " + queue + " still unacknowledged at the time limit");
    }
    engine.Sync();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Counts handler calls and wakes a waiter once `target` calls were made.
class CallCounter {
 public:
  explicit CallCounter(int64_t target) : target_(target) {}

  // Returns the 0-based index of this call.
  int64_t Add() {
    if (first_.load(std::memory_order_relaxed) == 0) {
      SteadyClock::rep unset = 0;
      first_.compare_exchange_strong(unset, SteadyClock::now().time_since_epoch().count());
    }
    const int64_t i = calls_.fetch_add(1);
    if (i + 1 == target_) {
      std::lock_guard lock(mu_);
      reached_ = true;
      cv_.notify_all();
    }
    return i;
  }
  // False when `timeout` passed first.
  bool Wait(SteadyClock::duration timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return reached_; });
  }
  int64_t calls() const { return calls_.load(); }
  // When the first call began; valid once Wait returned true.
  SteadyClock::time_point first() const {
    return SteadyClock::time_point(SteadyClock::duration(first_.load()));
  }

 private:
  const int64_t target_;
  std::atomic<int64_t> calls_{0};
  std::atomic<SteadyClock::rep> first_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool reached_ = false;
};

// --- workloads ---------------------------------------------------------------------

// W1: enqueue throughput, batched (one caller) and one task per call (16 callers).
void RunW1(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (o.mode.empty() || o.mode == "batch") {
    const BenchStore db = StoreOf(o, "W1", "batch");
    auto engine = OpenFresh(db);
    const auto specs = MakeSpecs("w1", n, std::chrono::seconds(1), std::chrono::seconds(600), rng);
    std::cerr << "W1 batch: enqueueing " << n << " tasks in batches of 1000\n";
    const auto t0 = SteadyClock::now();
    EnqueueBatched(*engine, specs, 1000);
    const double s = Seconds(SteadyClock::now() - t0);
    json j = Line("W1", "embedded", "batch", n);
    j["per_s"] = std::llround(static_cast<double>(n) / s);
    Emit(j);
  }
  TrimHeap();
  if (o.mode.empty() || o.mode == "single") {
    constexpr int kCallers = 16;
    const BenchStore db = StoreOf(o, "W1", "single");
    auto engine = OpenFresh(db);
    std::vector<std::vector<chronoq::TaskSpec>> per_thread;
    for (int t = 0; t < kCallers; ++t) {
      const int64_t count = n / kCallers + (t < n % kCallers ? 1 : 0);
      per_thread.push_back(
          MakeSpecs("w1", count, std::chrono::seconds(1), std::chrono::seconds(600), rng));
    }
    std::cerr << "W1 single: enqueueing " << n << " tasks one per call from " << kCallers
              << " threads\n";
    std::mutex mu;
    std::condition_variable cv;
    bool go = false;
    std::string error;
    std::vector<std::thread> threads;
    for (int t = 0; t < kCallers; ++t) {
      threads.emplace_back([&, t] {
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return go; });
        }
        for (const chronoq::TaskSpec& spec : per_thread[static_cast<size_t>(t)]) {
          chronoq::Result<chronoq::Task> r = engine->Enqueue(spec);
          if (!r.ok()) {
            std::lock_guard lock(mu);
            if (error.empty()) error = "enqueue: " + r.status().ToString();
            return;
          }
        }
      });
    }
    const auto t0 = SteadyClock::now();
    {
      std::lock_guard lock(mu);
      go = true;
    }
    cv.notify_all();
    for (std::thread& t : threads) t.join();
    const double s = Seconds(SteadyClock::now() - t0);
    if (!error.empty()) throw BenchError(error);
    json j = Line("W1", "embedded", "single", n);
    j["per_s"] = std::llround(static_cast<double>(n) / s);
    Emit(j);
  }
}

// W2: drain N tasks due now with a no-op handler.
void RunW2(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const BenchStore db = StoreOf(o, "W2", "");
  CallCounter counter(n);
  std::atomic<int64_t> repeated{0};  // leases on a second or later attempt
  auto engine = OpenFresh(db);
  if (o.w2_bulk > 0) {
    // Far in the future: in the store, not the window, as a share's expiry.
    std::cerr << "W2: enqueueing " << o.w2_bulk << " tasks due in 30 days on w2-bulk\n";
    const auto month = std::chrono::hours(24 * 30);
    EnqueueBatched(*engine, MakeSpecs("w2-bulk", o.w2_bulk, month, month, rng), 1000);
  }
  const auto specs = MakeSpecs("w2", n, chronoq::Duration::zero(), chronoq::Duration::zero(), rng);
  std::cerr << "W2: enqueueing " << n << " tasks due now\n";
  EnqueueBatched(*engine, specs, 1000);
  engine->Sync();
  std::string bulk_id;
  if (o.w2_bulk > 0 && o.bulk_mode == "run") {
    chronoq::BulkRequest r;
    r.filter.queue = "w2-bulk";
    r.filter.state = chronoq::TaskState::kScheduled;
    r.action = chronoq::BulkAction::kReschedule;
    r.shift = std::chrono::hours(1);
    chronoq::Result<chronoq::BulkJob> job = engine->StartBulk(r);
    Check(job.status(), "start the bulk reschedule");
    bulk_id = job->id;
    std::cerr << "W2: bulk reschedule " << bulk_id << " of " << o.w2_bulk << " tasks started\n";
  }

  chronoq::HandlerOptions ho;
  ho.concurrency = o.concurrency;
  ho.batch_size = o.batch;
  std::cerr << "W2: draining with concurrency " << ho.concurrency << ", batch " << ho.batch_size
            << "\n";
  Check(engine->RegisterHandler("w2", ho,
                                [&](const chronoq::Lease& lease) {
                                  if (lease.attempt > 1) repeated.fetch_add(1);
                                  counter.Add();
                                  return chronoq::Status::Ok();
                                }),
        "register handler");
  const auto limit = SteadyClock::now() + std::chrono::seconds(120) +
                     std::chrono::microseconds(n * 100);  // generous: 10k/s
  if (!counter.Wait(limit - SteadyClock::now())) {
    throw BenchError("W2: only " + std::to_string(counter.calls()) + " of " + std::to_string(n) +
                     " tasks handled before the time limit");
  }
  WaitAllAcked(*engine, "w2", limit);
  const auto end = SteadyClock::now();
  const double s = Seconds(end - counter.first());

  const int64_t succeeded = CountTasks(*engine, "w2", chronoq::TaskState::kSucceeded);
  const int64_t calls = counter.calls();
  if (succeeded != n) {
    throw BenchError("W2: " + std::to_string(succeeded) + " of " + std::to_string(n) +
                     " tasks succeeded after the drain (" + std::to_string(calls) +
                     " handler calls)");
  }
  if (repeated.load() != 0) {
    std::cerr << "W2: " << repeated.load() << " leases had attempt > 1\n";
  }
  json j = Line("W2", "embedded", "", n);
  j["per_s"] = std::llround(static_cast<double>(n) / s);
  j["redelivered"] = calls - n;
  if (o.w2_bulk > 0) {
    j["bulk_tasks"] = o.w2_bulk;
    j["bulk_mode"] = o.bulk_mode;
  }
  if (!bulk_id.empty()) {
    // The drain must have run beside the job all along, or it measured nothing.
    const chronoq::Result<chronoq::BulkJob> at_end = engine->GetBulk(bulk_id);
    Check(at_end.status(), "read the bulk job");
    j["bulk_applied_during"] = at_end->applied;
    j["bulk_state_at_end"] = std::string(chronoq::BulkJobStateName(at_end->state));
    if (at_end->state != chronoq::BulkJobState::kRunning) {
      std::cerr << "W2: the bulk job ended before the drain did: use a larger --w2-bulk\n";
    }
    // How fast the job goes alone, once W2 is done (bounded: 10 minutes).
    const auto t0 = SteadyClock::now();
    const int64_t applied0 = at_end->applied;
    chronoq::BulkJob last = *at_end;
    while (last.state == chronoq::BulkJobState::kRunning &&
           SteadyClock::now() - t0 < std::chrono::minutes(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polls the job's thread
      last = Check(engine->GetBulk(bulk_id), "read the bulk job");
    }
    if (last.state != chronoq::BulkJobState::kDone || last.applied != o.w2_bulk) {
      throw BenchError("W2: the bulk job ended " +
                       std::string(chronoq::BulkJobStateName(last.state)) + " with " +
                       std::to_string(last.applied) + " of " + std::to_string(o.w2_bulk) +
                       " applied: " + last.error);
    }
    j["bulk_alone_per_s"] = std::llround(static_cast<double>(last.applied - applied0) /
                                         Seconds(SteadyClock::now() - t0));
    j["bulk_total_s"] = Round(Seconds(*last.finished - last.started), 2);
  }
  Emit(j);
  engine.reset();  // before the handler's captures go away
}

// W6, one mode: drains N tasks due now, task i of key i % 100 (index
// i / 100), with keys ("keyed") or without ("unkeyed"), by o.w6_workers
// workers claiming o.batch at a time, and checks each key's order as the
// workers see it. Prints the mode's line; returns its tasks/s. `unkeyed_per_s`
// (0: not measured) adds the keyed/unkeyed ratio to a keyed line.
double RunW6Mode(const Options& o, int64_t n, const std::string& mode, double unkeyed_per_s) {
  const bool keyed = mode == "keyed";
  const std::string label = "W6 " + mode;
  const BenchStore db = StoreOf(o, "W6", mode);
  CallCounter counter(n);
  chronoq::bench::KeyOrderChecker checker(keyed);
  auto engine = OpenFresh(db);
  if (keyed) {
    chronoq::QueueSettings settings;
    settings.max_in_flight_per_key = 1;  // the default, spelled out
    Check(engine->ConfigureQueue("w6", settings).status(), "configure queue w6");
  }
  // All due at the same instant, so that each key's order is its enqueue order.
  const chronoq::Timestamp due =
      std::chrono::time_point_cast<chronoq::Duration>(std::chrono::system_clock::now());
  std::vector<chronoq::TaskSpec> specs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    chronoq::TaskSpec& s = specs[static_cast<size_t>(i)];
    const int key = static_cast<int>(i % chronoq::bench::kW6Keys);
    s.queue = "w6";
    s.payload = chronoq::bench::W6Payload(key, i / chronoq::bench::kW6Keys);
    s.run_at = due;
    if (keyed) s.key = chronoq::bench::W6KeyName(key);
  }
  std::cerr << label << ": enqueueing " << n << " tasks due now over " << chronoq::bench::kW6Keys
            << " keys\n";
  EnqueueBatched(*engine, specs, 1000);
  engine->Sync();
  const chronoq::EngineStats before = engine->Stats();

  chronoq::HandlerOptions ho;
  ho.concurrency = o.w6_workers;
  ho.batch_size = o.batch;
  std::cerr << label << ": draining with " << ho.concurrency << " workers, batch " << ho.batch_size
            << "\n";
  // A batch handler sees each claim whole: its tasks all start, then all
  // finish, and the pool acknowledges them after it returns.
  auto handler = [&](std::span<const chronoq::Lease> leases) {
    std::vector<int> keys;
    keys.reserve(leases.size());
    for (const chronoq::Lease& l : leases) {
      keys.push_back(checker.Start(l.payload, l.key));
      counter.Add();
    }
    for (const int key : keys) checker.Finish(key);
    return std::vector<chronoq::Status>(leases.size(), chronoq::Status::Ok());
  };
  Check(engine->RegisterBatchHandler("w6", ho, handler), "register handler");
  const auto limit = SteadyClock::now() + std::chrono::seconds(120) +
                     std::chrono::microseconds(n * 1000);  // generous: 1k/s
  if (!counter.Wait(limit - SteadyClock::now())) {
    throw BenchError(label + ": only " + std::to_string(counter.calls()) + " of " +
                     std::to_string(n) + " tasks handled before the time limit");
  }
  WaitAllAcked(*engine, "w6", limit);
  const double s = Seconds(SteadyClock::now() - counter.first());

  const int64_t succeeded = CountTasks(*engine, "w6", chronoq::TaskState::kSucceeded);
  const int64_t calls = counter.calls();
  if (succeeded != n) {
    throw BenchError(label + ": " + std::to_string(succeeded) + " of " + std::to_string(n) +
                     " tasks succeeded after the drain (" + std::to_string(calls) +
                     " handler calls)");
  }
  const double per_s = static_cast<double>(n) / s;
  json j = Line("W6", "embedded", mode, n);
  j["per_s"] = std::llround(per_s);
  // Commits of the drain: with one task in flight per key a commit can move
  // at most 100 of them, so their number and cost set the keyed rate.
  j["commits"] = engine->Stats().commits - before.commits;
  chronoq::bench::ReportW6Checker(checker, label, j);
  if (keyed && unkeyed_per_s > 0) j["ratio"] = Round(per_s / unkeyed_per_s, 3);
  j["redelivered"] = calls - n;
  j["workers"] = o.w6_workers;
  j["claim_batch"] = o.batch;
  Emit(j);
  engine.reset();  // before the handler's captures go away
  return per_s;
}

// W6: keyed FIFO. 100 keys x N/100 tasks due now, at most one in flight per
// key, drained by 8 workers. Unless --mode picks one, the same drain without
// keys runs first, so that the keyed line carries its ratio to an unkeyed
// drain of the same run. The unkeyed line's violations are expected (nothing
// orders its tasks): they show that the checker sees them.
void RunW6(const Options& o, int64_t n, uint64_t) {
  double unkeyed_per_s = 0;
  if (o.mode != "keyed") {
    unkeyed_per_s = RunW6Mode(o, n, "unkeyed", 0);
    TrimHeap();
  }
  if (o.mode != "unkeyed") RunW6Mode(o, n, "keyed", unkeyed_per_s);
}

// W3: lateness of N tasks spread evenly over 10 s.
void RunW3(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const BenchStore db = StoreOf(o, "W3", "");
  std::vector<double> lateness_ms(static_cast<size_t>(n));
  CallCounter counter(n);
  auto engine = OpenFresh(db);

  chronoq::HandlerOptions ho;
  ho.concurrency = 2;
  Check(engine->RegisterHandler(
            "w3", ho,
            [&](const chronoq::Lease& lease) {
              const auto now =
                  std::chrono::time_point_cast<chronoq::Duration>(std::chrono::system_clock::now());
              const int64_t i = counter.Add();
              if (i < n) {
                lateness_ms[static_cast<size_t>(i)] =
                    std::chrono::duration<double, std::milli>(now - lease.run_at).count();
              }
              return chronoq::Status::Ok();
            }),
        "register handler");

  // The first task is due 1 s from now, so the enqueue itself is not late.
  const auto start =
      std::chrono::time_point_cast<chronoq::Duration>(std::chrono::system_clock::now()) +
      std::chrono::seconds(1);
  std::vector<chronoq::TaskSpec> specs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    chronoq::TaskSpec& s = specs[static_cast<size_t>(i)];
    s.queue = "w3";
    s.payload = Payload(rng);
    s.run_at = start + chronoq::Duration(i * 10'000'000 / n);
  }
  std::cerr << "W3: scheduling " << n << " tasks over 10 s\n";
  EnqueueBatched(*engine, specs, 1000);
  if (!counter.Wait(std::chrono::seconds(11 + 60))) {
    throw BenchError("W3: only " + std::to_string(counter.calls()) + " of " + std::to_string(n) +
                     " tasks ran within 60 s of the last one being due");
  }
  std::sort(lateness_ms.begin(), lateness_ms.end());
  json j = Line("W3", "embedded", "", n);
  j["p50_ms"] = Round(Percentile(lateness_ms, 50), 3);
  j["p99_ms"] = Round(Percentile(lateness_ms, 99), 3);
  j["max_ms"] = Round(lateness_ms.back(), 3);
  if (counter.calls() != n) j["redelivered"] = counter.calls() - n;
  Emit(j);
  engine.reset();
}

// Starts two workers on each of `queues`, lets them park, then measures the
// process's voluntary context switches (wake-ups) and CPU over o.idle_s
// seconds, leaving out the measuring thread itself. Adds wakeups_per_s and
// cpu_pct to `j`; complains when a handler ran, since nothing should be due.
void MeasureIdle(const Options& o, const std::string& workload, chronoq::Engine& engine,
                 const std::vector<std::string>& queues, json& j) {
  // Shared with the handlers, which live as long as the engine.
  auto calls = std::make_shared<std::atomic<int64_t>>(0);
  chronoq::HandlerOptions ho;
  ho.concurrency = 2;
  for (const std::string& q : queues) {
    Check(engine.RegisterHandler(q, ho,
                                 [calls](const chronoq::Lease&) {
                                   calls->fetch_add(1);
                                   return chronoq::Status::Ok();
                                 }),
          "register handler");
  }
  engine.Sync();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let the workers park

  std::cerr << workload << ": idling " << o.idle_s << " s\n";
  const pid_t self = static_cast<pid_t>(gettid());
  const int64_t switches0 = VoluntarySwitches(self);
  const double cpu0 = CpuSeconds();
  const auto t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_s));
  const int64_t switches1 = VoluntarySwitches(self);
  const double cpu1 = CpuSeconds();
  const double s = Seconds(SteadyClock::now() - t0);
  if (calls->load() != 0) {
    std::cerr << workload << ": handler ran " << calls->load() << " times (expected 0)\n";
  }
  j["wakeups_per_s"] = Round(static_cast<double>(switches1 - switches0) / s, 2);
  j["cpu_pct"] = Round((cpu1 - cpu0) / s * 100.0, 3);
}

// W4: disk bytes per pending task and resident memory with N tasks.
void RunW4(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const BenchStore db = StoreOf(o, "W4", "");
  OpenFresh(db).reset();
  const uint64_t empty_bytes = db.Bytes();
  const double rss_base = RssMib();

  auto engine = OpenEngine(db);
  const auto specs = MakeSpecs("w4", n, std::chrono::seconds(1), std::chrono::seconds(600), rng);
  std::cerr << "W4: enqueueing " << n << " tasks in batches of 1000\n";
  EnqueueBatched(*engine, specs, 1000);
  engine->Sync();
  const double rss = RssMib();
  engine.reset();
  const uint64_t full_bytes = db.Bytes();
  std::cerr << "W4: database " << empty_bytes << " bytes empty, " << full_bytes << " bytes with "
            << n << " tasks\n";

  json j = Line("W4", "embedded", "", n);
  j["bytes_per_task"] =
      Round(static_cast<double>(full_bytes - empty_bytes) / static_cast<double>(n), 1);
  j["rss_mib"] = Round(rss, 1);
  j["rss_base_mib"] = Round(rss_base, 1);  // before the engine was opened
  Emit(j);
}

// W5: the cost of an idle engine holding N tasks due in an hour, with workers
// waiting for them.
void RunW5(const Options& o, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const BenchStore db = StoreOf(o, "W5", "");
  auto engine = OpenFresh(db);
  const auto specs = MakeSpecs("w5", n, std::chrono::hours(1), std::chrono::hours(1), rng);
  std::cerr << "W5: enqueueing " << n << " tasks due in 1 h\n";
  EnqueueBatched(*engine, specs, 1000);
  json j = Line("W5", "embedded", "", n);
  MeasureIdle(o, "W5", *engine, {"w5"}, j);
  Emit(j);
  engine.reset();
}

// W-schedule: N recurring schedules, none due for the next hour: how long
// registering them takes, what they cost on disk and in memory, and what the
// idle engine costs with workers waiting on their queues.
void RunWSchedule(const Options& o, int64_t n, uint64_t seed) {
  constexpr int kCallers = 16;
  std::mt19937_64 rng(seed);
  const BenchStore db = StoreOf(o, "W-schedule", "");
  OpenFresh(db).reset();
  const uint64_t empty_bytes = db.Bytes();
  const double rss_base = RssMib();
  auto engine = OpenEngine(db);

  // Half daily cron rules at a random time between 2 and 22 hours from now
  // (in a few zones), half `every` rules of a day anchored likewise.
  const auto now = std::chrono::system_clock::now();
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch());
  const std::vector<std::string> zones = {"UTC", "Asia/Seoul", "America/New_York", "Europe/London"};
  std::uniform_int_distribution<int64_t> ahead(2 * 3600, 22 * 3600);
  std::vector<chronoq::ScheduleSpec> specs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    chronoq::ScheduleSpec& s = specs[static_cast<size_t>(i)];
    s.name = "s" + std::to_string(i);
    s.queue = "ws" + std::to_string(i % 4);
    const chronoq::Timestamp first = chronoq::Timestamp(now_s + std::chrono::seconds(ahead(rng)));
    if (i % 2 == 0) {
      s.every = std::chrono::hours(24);
      s.start = first;
    } else {
      // The time of day of `first` (UTC), read as local time in the zone;
      // `start` keeps the first fire at least two hours away.
      const std::string& zone = zones[static_cast<size_t>(i / 2) % zones.size()];
      const int64_t tod = (first.time_since_epoch().count() / 1'000'000) % 86'400;
      s.cron = std::to_string(tod % 60) + " " + std::to_string(tod / 60 % 60) + " " +
               std::to_string(tod / 3600) + " * * *";
      s.tz = zone;
      s.start = chronoq::Timestamp(now_s + std::chrono::hours(2));
    }
  }
  std::cerr << "W-schedule: creating " << n << " schedules from " << kCallers << " threads\n";
  const auto t0 = SteadyClock::now();
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < specs.size(); i += kCallers) {
        Check(engine->CreateSchedule(specs[i]).status(), "create schedule " + specs[i].name);
      }
    });
  }
  for (std::thread& c : callers) c.join();
  const double create_s = Seconds(SteadyClock::now() - t0);
  engine->Sync();
  // The specs are the harness's memory (about 40 MiB), not the engine's.
  std::vector<chronoq::ScheduleSpec>().swap(specs);
  TrimHeap();
  const double rss = RssMib();

  json j = Line("W-schedule", "embedded", "", n);
  j["create_per_s"] = Round(static_cast<double>(n) / create_s, 0);
  j["rss_mib"] = Round(rss, 1);
  j["rss_base_mib"] = Round(rss_base, 1);  // before the engine was opened
  engine.reset();
  j["bytes_per_schedule"] =
      Round(static_cast<double>(db.Bytes() - empty_bytes) / static_cast<double>(n), 1);
  // After a restart the page cache holds only what opening read: what the
  // schedules themselves cost a running engine.
  TrimHeap();
  engine = OpenEngine(db);
  engine->Sync();
  j["rss_mib_after_restart"] = Round(RssMib(), 1);
  MeasureIdle(o, "W-schedule", *engine, {"ws0", "ws1", "ws2", "ws3"}, j);
  engine.reset();
  Emit(j);
}

// W7: keyed locks. Uncontended: 16 clients acquire and release locks on
// distinct keys (each key used once: N keys in all, so the memory figure
// after shows whether keys are forgotten). Contended: 8 clients take turns on
// one key, N/4 pairs. Pairs per second for both.
void RunW7(const Options& o, int64_t n, uint64_t) {
  constexpr int kClients = 16;
  constexpr int kContenders = 8;
  const BenchStore db = StoreOf(o, "W7", "");
  const double rss_base = RssMib();
  auto engine = OpenFresh(db);
  engine->Sync();
  const double rss_open = RssMib();

  auto run = [&](int clients, int64_t pairs, auto key_of) {
    std::vector<std::thread> threads;
    const auto t0 = SteadyClock::now();
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        chronoq::LockRequest req;
        req.wait = std::chrono::hours(1);
        for (int64_t i = c; i < pairs; i += clients) {
          const std::string key = key_of(i);
          auto grant = Check(engine->AcquireLock(key, req), "acquire " + key);
          Check(engine->ReleaseLock(key, grant.token), "release " + key);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return static_cast<double>(pairs) / Seconds(SteadyClock::now() - t0);
  };
  std::cerr << "W7: " << n << " acquire+release pairs on distinct keys, " << kClients
            << " clients\n";
  const double uncontended = run(kClients, n, [](int64_t i) { return "w7-" + std::to_string(i); });
  engine->Sync();
  TrimHeap();
  const double rss_after = RssMib();
  std::cerr << "W7: " << n / 4 << " pairs on one key, " << kContenders << " clients\n";
  const double contended = run(kContenders, n / 4, [](int64_t) { return std::string("w7-hot"); });

  json j = Line("W7", "embedded", "", n);
  j["uncontended_pairs_per_s"] = Round(uncontended, 0);
  j["contended_pairs_per_s"] = Round(contended, 0);
  j["rss_base_mib"] = Round(rss_base, 1);
  j["rss_open_mib"] = Round(rss_open, 1);                  // the engine open, no lock taken yet
  j["rss_after_distinct_keys_mib"] = Round(rss_after, 1);  // after n keys locked and released
  Emit(j);
  engine.reset();
}

// W8: N tasks due over 30 days: enqueue time, bytes per task, resident memory,
// restart time.
void RunW8(const Options& o, int64_t n, uint64_t seed) {
  constexpr int64_t kBatch = 10'000;
  std::mt19937_64 rng(seed);
  const BenchStore db = StoreOf(o, "W8", "");
  OpenFresh(db).reset();
  const uint64_t empty_bytes = db.Bytes();

  auto engine = OpenEngine(db);
  std::cerr << "W8: enqueueing " << n << " tasks due over 30 days in batches of " << kBatch << "\n";
  double enqueue_s = 0;
  int64_t next_report = 1;
  for (int64_t done = 0; done < n;) {
    const int64_t count = std::min(kBatch, n - done);
    const auto specs =
        MakeSpecs("w8", count, std::chrono::seconds(1), std::chrono::hours(24 * 30), rng);
    enqueue_s += EnqueueBatched(*engine, specs, static_cast<size_t>(kBatch));
    done += count;
    while (next_report <= 10 && done * 10 >= n * next_report) {
      std::cerr << "W8: " << next_report * 10 << "% (" << done << " tasks, " << Round(enqueue_s, 1)
                << " s)\n";
      ++next_report;
    }
  }
  engine->Sync();
  const double rss = RssMib();
  engine.reset();
  const uint64_t full_bytes = db.Bytes();
  TrimHeap();

  std::cerr << "W8: restarting\n";
  const auto t0 = SteadyClock::now();
  engine = OpenEngine(db);
  const double restart_s = Seconds(SteadyClock::now() - t0);
  engine->Sync();
  const double rss_restart = RssMib();
  engine.reset();

  json j = Line("W8", "embedded", "", n);
  j["enqueue_s"] = Round(enqueue_s, 3);
  j["bytes_per_task"] =
      Round(static_cast<double>(full_bytes - empty_bytes) / static_cast<double>(n), 1);
  j["rss_mib"] = Round(rss, 1);
  j["restart_s"] = Round(restart_s, 3);
  j["rss_mib_after_restart"] = Round(rss_restart, 1);
  Emit(j);
}

struct Workload {
  const char* name;
  int64_t default_n;
  void (*run)(const Options&, int64_t, uint64_t);       // target embedded
  void (*run_http)(const Options&, int64_t, uint64_t);  // target http; null: not there
};

constexpr Workload kWorkloads[] = {
    {"W1", 100'000, RunW1, chronoq::bench::RunHttpW1},
    {"W2", 50'000, RunW2, chronoq::bench::RunHttpW2},
    {"W3", 5'000, RunW3, chronoq::bench::RunHttpW3},
    {"W4", 100'000, RunW4, nullptr},
    {"W5", 100'000, RunW5, chronoq::bench::RunHttpW5},
    {"W6", 50'000, RunW6, chronoq::bench::RunHttpW6},
    {"W7", 100'000, RunW7, chronoq::bench::RunHttpW7},
    {"W8", 10'000'000, RunW8, nullptr},
    {"W9", 100'000, nullptr, chronoq::bench::RunHttpW9},  // not in "all": minutes, 3 nodes
    {"W-schedule", 100'000, RunWSchedule, nullptr},
    {"W-webhook", 100'000, nullptr, chronoq::bench::RunHttpWebhook},  // not in "all"
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.chronoqd = CHRONOQD_PATH;
  CLI::App app{"chronoq load generator: runs the workloads of BENCHMARKS.md"};
  app.add_option("--workload", o.workload,
                 "W1, W2, W3, W4, W5, W6, W7, W8, W9, W-schedule, W-webhook or all")
      ->required();
  app.add_option("--target", o.target, "embedded (in-process engine) or http (chronoqd)")
      ->required()
      ->check(CLI::IsMember({"embedded", "http"}));
  app.add_option("--dir", o.dir, "directory for the benchmark databases")->capture_default_str();
  app.add_option("--store", o.store,
                 "a PostgreSQL database (postgresql://USER@HOST:PORT/DB) instead of SQLite "
                 "files: each workload run gets a schema of its own");
  app.add_option("-n", o.n, "tasks per workload (default: each workload's own)");
  app.add_option("--runs", o.runs, "repetitions of each workload")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI::Option* concurrency =
      app.add_option("--concurrency", o.concurrency,
                     "W2 and W6 worker threads (http: connections); W6 default 8")
          ->capture_default_str()
          ->check(CLI::Range(1, 1024));
  app.add_option("--batch", o.batch, "W2 and W6 tasks claimed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--idle", o.idle_s, "W5 idle seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--mode", o.mode,
                 "W1: batch or single; W6: keyed or unkeyed (default both; keyed alone has no "
                 "ratio); W9: sigkill (default) or sigstop")
      ->check(CLI::IsMember({"batch", "single", "keyed", "unkeyed", "sigkill", "sigstop"}));
  app.add_option("--url", o.url,
                 "http target: use the chronoqd at this URL (token from $CHRONOQ_TOKEN) instead "
                 "of starting one per workload; W5 needs its own");
  app.add_option("--chronoqd", o.chronoqd, "http target: the chronoqd binary to start")
      ->capture_default_str();
  app.add_option("--batch-connections", o.w1_batch_connections,
                 "http target, W1 batch: connections sending batches at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--batch-return", o.w1_batch_return,
                 "http target, W1 batch: what each batch's answer holds (\"return\")")
      ->capture_default_str()
      ->check(CLI::IsMember({"tasks", "ids"}));
  app.add_option("--dashboards", o.dashboards,
                 "http target, W2: dashboards open while it drains, each refreshing its overview "
                 "as the dashboard does (queues every 2 s, the stats history every 10 s)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--w2-bulk", o.w2_bulk,
                 "embedded W2: this many more tasks due in 30 days, bulk-rescheduled by +1 h "
                 "while W2 drains (docs/BENCHMARKS.md, \"W2 during a bulk reschedule\")")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  app.add_option("--bulk-mode", o.bulk_mode,
                 "with --w2-bulk: run the bulk job (run), or only hold its tasks (idle, the "
                 "baseline)")
      ->capture_default_str()
      ->check(CLI::IsMember({"run", "idle"}));
  app.add_option("--webhook-concurrency", o.webhook_concurrency,
                 "W-webhook: chronoqd's --webhook-concurrency (deliveries in flight)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--webhook-claim-batch", o.webhook_claim_batch,
                 "W-webhook: chronoqd's --webhook-claim-batch (tasks claimed together)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--kills", o.kills, "W9: failovers (the leader killed, or paused, this often)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (concurrency->count() > 0) o.w6_workers = o.concurrency;

  const bool http = o.target == "http";
  if (!http && !o.url.empty()) {
    std::cerr << "chronoq-bench: --url is for --target http\n";
    return 2;
  }
  if (o.n < 0) {
    std::cerr << "chronoq-bench: -n must be positive\n";
    return 2;
  }
  const bool w6_mode = o.mode == "keyed" || o.mode == "unkeyed";
  const bool w9_mode = o.mode == "sigkill" || o.mode == "sigstop";
  if ((w6_mode && o.workload != "W6") || (o.workload == "W6" && !o.mode.empty() && !w6_mode) ||
      (w9_mode && o.workload != "W9") || (o.workload == "W9" && !o.mode.empty() && !w9_mode)) {
    std::cerr << "chronoq-bench: --mode batch|single is for W1, keyed|unkeyed for W6, "
                 "sigkill|sigstop for W9\n";
    return 2;
  }
  std::vector<const Workload*> selected;
  for (const Workload& w : kWorkloads) {
    if (o.workload != "all" && o.workload != w.name) continue;
    if (o.workload == "all" &&
        (std::string(w.name) == "W9" || std::string(w.name) == "W-webhook")) {
      continue;
    }
    if (!http && w.run == nullptr) {
      std::cerr << "chronoq-bench: " << w.name << " is for --target http only\n";
      return 2;
    }
    if (http && w.run_http == nullptr) {
      if (o.workload == "all") continue;
      std::cerr << "chronoq-bench: " << w.name
                << " is not implemented for --target http (only W1, W2, W3, W5, W6, W7, W9)\n";
      return 2;
    }
    selected.push_back(&w);
  }
  if (selected.empty()) {
    std::cerr << "chronoq-bench: unknown workload '" << o.workload
              << "': expected W1, W2, W3, W4, W5, W6, W7, W8, W9, W-schedule, W-webhook or all\n";
    return 2;
  }
  if (o.workload == "all") {
    if (o.n > 0) {
      std::cerr << "chronoq-bench: every workload uses n=" << o.n << "\n";
    } else if (!http) {
      std::cerr << "chronoq-bench: W8 uses n=1000000 under 'all' (pass -n to change)\n";
    }
  }

  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) {
    std::cerr << "chronoq-bench: cannot create " << o.dir << ": " << ec.message() << "\n";
    return 1;
  }
  try {
    for (const Workload* w : selected) {
      int64_t n = o.n > 0 ? o.n : w->default_n;
      if (o.n == 0 && o.workload == "all" && std::string(w->name) == "W8") n = 1'000'000;
      for (int run = 0; run < o.runs; ++run) {
        if (o.runs > 1) std::cerr << w->name << ": run " << run + 1 << " of " << o.runs << "\n";
        TrimHeap();
        (http ? w->run_http : w->run)(o, n, 42 + static_cast<uint64_t>(run));
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "chronoq-bench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
