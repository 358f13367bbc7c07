// bench_common.h: what chronoq-bench's targets share: options, errors, the
// JSON result line, small numeric helpers and W6's order checker.
// Header-only; bench/ only.
#pragma once

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace chronoq::bench {

using json = nlohmann::ordered_json;  // keys in the order written
using SteadyClock = std::chrono::steady_clock;

// A failed workload: reported on stderr, exit status 1.
class BenchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string workload;
  std::string target;
  std::string dir = "bench-data";
  // A postgres:// URL: the workloads run on PostgreSQL (bench_store.h).
  std::string store;
  int64_t n = 0;  // 0: each workload's default
  int runs = 1;
  int concurrency = 4;  // W2 workers (threads, or HTTP connections)
  int w6_workers = 8;   // W6 workers: --concurrency when given, else 8
  int batch = 256;      // W2 and W6 claim batch
  double idle_s = 10;   // W5 idle period
  // W1: "batch" or "single" only; W6: "keyed" or "unkeyed" only; empty: both.
  // W9: "sigkill" (the default) or "sigstop".
  std::string mode;
  // http target only.
  std::string url;               // a running chronoqd; empty: the bench starts one per workload
  std::string chronoqd;          // the chronoqd binary the bench starts
  int w1_batch_connections = 1;  // W1 batch: connections sending batches at once
  std::string w1_batch_return = "tasks";  // W1 batch: the answer asked for ("return")
  int kills = 20;                // W9: failovers
  int dashboards = 0;            // http W2: dashboards open meanwhile (DashboardLoad)
  // Embedded W2: this many more tasks, due in 30 days on queue "w2-bulk",
  // and (bulk_mode "run") a bulk reschedule of all of them by +1 h running
  // while W2 drains; "idle": the same tasks, no job (the baseline).
  int64_t w2_bulk = 0;
  std::string bulk_mode = "run";
  int webhook_concurrency = 64;  // W-webhook: chronoqd's --webhook-concurrency
  int webhook_claim_batch = 1;   // W-webhook: chronoqd's --webhook-claim-batch
};

inline double Round(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

inline double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// Lowers `target` to `value` if that is earlier (relaxed: a single value, read
// after joins or polled).
inline void StoreMin(std::atomic<SteadyClock::rep>& target, SteadyClock::time_point value) {
  const SteadyClock::rep v = value.time_since_epoch().count();
  SteadyClock::rep cur = target.load(std::memory_order_relaxed);
  while (v < cur && !target.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
// Raises `target` to `value` if that is later.
inline void StoreMax(std::atomic<SteadyClock::rep>& target, SteadyClock::time_point value) {
  const SteadyClock::rep v = value.time_since_epoch().count();
  SteadyClock::rep cur = target.load(std::memory_order_relaxed);
  while (v > cur && !target.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
inline SteadyClock::time_point AsTime(const std::atomic<SteadyClock::rep>& rep) {
  return SteadyClock::time_point(SteadyClock::duration(rep.load()));
}

inline void Emit(const json& line) { std::cout << line.dump() << std::endl; }

// The fields every result line starts with.
inline json Line(const std::string& workload, const std::string& target, const std::string& mode,
                 int64_t n) {
  json j;
  j["workload"] = workload;
  j["target"] = target;
  if (!mode.empty()) j["mode"] = mode;
  j["n"] = n;
  return j;
}

// Nearest-rank percentile of sorted values.
inline double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// A 16-byte JSON payload: {"n":1234567890}.
inline std::string Payload(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> digits(1'000'000'000, 9'999'999'999);
  return "{\"n\":" + std::to_string(digits(rng)) + "}";
}

// --- W6: keyed FIFO ------------------------------------------------------------

// W6 spreads its tasks over this many keys: task i (in enqueue order) has key
// i % kW6Keys and index i / kW6Keys within its key.
inline constexpr int kW6Keys = 100;

// The key name of key number `key`: "k17".
inline std::string W6KeyName(int key) { return "k" + std::to_string(key); }

// Task `index` of key number `key` carries {"k":17,"i":123}.
inline std::string W6Payload(int key, int64_t index) {
  return "{\"k\":" + std::to_string(key) + ",\"i\":" + std::to_string(index) + "}";
}

struct W6Task {
  int key = 0;
  int64_t index = 0;
};

// Reads W6Payload's fields back from `payload` as the engine or the server
// hands it out (whitespace tolerated); nullopt when they are not there.
inline std::optional<W6Task> ParseW6Payload(std::string_view payload) {
  auto number = [&](std::string_view name, int64_t& out) {
    size_t at = payload.find(name);
    if (at == std::string_view::npos) return false;
    at += name.size();
    while (at < payload.size() && (payload[at] == ' ' || payload[at] == ':')) ++at;
    const char* end = payload.data() + payload.size();
    return std::from_chars(payload.data() + at, end, out).ec == std::errc();
  };
  int64_t key = 0;
  W6Task t;
  if (!number("\"k\"", key) || !number("\"i\"", t.index)) return std::nullopt;
  if (key < 0 || key >= kW6Keys || t.index < 0) return std::nullopt;
  t.key = static_cast<int>(key);
  return t;
}

// W6's per-key order checker, shared by both targets. For each claim, a
// worker calls Start for every task it received, in the order received, and
// Finish for each of them before acknowledging them. It counts, per key:
//  - overlaps: a task started while another task of its key was started and
//    not finished (W6 allows one in flight per key). Tasks of one claim are
//    all started before any is finished, so a claim holding two tasks of one
//    key is an overlap, as it is for the engine;
//  - out-of-order starts: a task started after a task of its key that was
//    enqueued later (its index is below the highest index of its key
//    started so far). A task started again (a redelivery) is not one.
// If every task succeeds and both counts are 0, each key's tasks first
// started in enqueue order, one at a time. Finish must come before the
// acknowledgement: once that commits, the engine may hand the key's next task
// to another worker, and a Finish after it would show a false overlap. So the
// checker's "in flight" (Start to Finish) lies inside the engine's (claim to
// committed ack): it never sees a violation the engine did not make, and sees
// every out-of-order start; an overlap of tasks on two workers shows only when
// their Start-Finish spans meet, which the no-op handler makes short.
// Thread-safe.
class KeyOrderChecker {
 public:
  // `keyed`: the tasks were enqueued with keys, so each lease must carry its
  // payload's key name (counted as key_mismatches otherwise).
  explicit KeyOrderChecker(bool keyed) : keyed_(keyed), keys_(kW6Keys) {}
  KeyOrderChecker(const KeyOrderChecker&) = delete;
  KeyOrderChecker& operator=(const KeyOrderChecker&) = delete;

  // A worker received the task with `payload`, whose lease names `lease_key`.
  // Returns the key number to pass to Finish (-1: unreadable payload, counted).
  int Start(std::string_view payload, std::string_view lease_key) {
    const std::optional<W6Task> t = ParseW6Payload(payload);
    if (!t) {
      unreadable_.fetch_add(1, std::memory_order_relaxed);
      if (NeedExample()) Example("unreadable payload " + std::string(payload.substr(0, 80)));
      return -1;
    }
    if (keyed_ && !IsKeyName(lease_key, t->key)) {
      key_mismatches_.fetch_add(1, std::memory_order_relaxed);
      if (NeedExample()) {
        Example("lease key '" + std::string(lease_key) + "' for a task of key " +
                W6KeyName(t->key));
      }
    }
    Key& k = keys_[static_cast<size_t>(t->key)];
    std::lock_guard lock(k.mu);
    if (k.in_flight > 0) {
      overlaps_.fetch_add(1, std::memory_order_relaxed);
      if (NeedExample()) {
        Example("key " + W6KeyName(t->key) + ": index " + std::to_string(t->index) +
                " started while index " + std::to_string(k.last) + " was in flight");
      }
    }
    if (t->index < k.highest) {
      out_of_order_.fetch_add(1, std::memory_order_relaxed);
      if (NeedExample()) {
        Example("key " + W6KeyName(t->key) + ": index " + std::to_string(t->index) +
                " started after index " + std::to_string(k.highest));
      }
    }
    ++k.in_flight;
    k.last = t->index;
    k.highest = std::max(k.highest, t->index);
    return t->key;
  }

  // The worker is done with a task Start returned `key` for.
  void Finish(int key) {
    if (key < 0) return;
    Key& k = keys_[static_cast<size_t>(key)];
    std::lock_guard lock(k.mu);
    --k.in_flight;
  }

  int64_t overlaps() const { return overlaps_.load(); }
  int64_t out_of_order() const { return out_of_order_.load(); }
  int64_t violations() const { return overlaps() + out_of_order(); }
  int64_t unreadable() const { return unreadable_.load(); }
  int64_t key_mismatches() const { return key_mismatches_.load(); }
  // The first problem seen, described; empty when none.
  std::string first_problem() const {
    std::lock_guard lock(example_mu_);
    return example_;
  }

 private:
  struct Key {
    std::mutex mu;
    int in_flight = 0;     // started, not finished
    int64_t last = -1;     // the index started last
    int64_t highest = -1;  // the highest index started
  };

  // Whether `name` is W6KeyName(key), without building that string.
  static bool IsKeyName(std::string_view name, int key) {
    int parsed = -1;
    if (name.size() < 2 || name[0] != 'k') return false;
    const auto [end, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), parsed);
    return ec == std::errc() && end == name.data() + name.size() && parsed == key;
  }
  // Only the first problem is described, so that a run full of them (the
  // unkeyed one) spends no time building messages.
  bool NeedExample() const { return !has_example_.load(std::memory_order_relaxed); }
  void Example(std::string what) {
    std::lock_guard lock(example_mu_);
    if (example_.empty()) example_ = std::move(what);
    has_example_.store(true, std::memory_order_relaxed);
  }

  const bool keyed_;
  std::vector<Key> keys_;
  std::atomic<int64_t> overlaps_{0};
  std::atomic<int64_t> out_of_order_{0};
  std::atomic<int64_t> unreadable_{0};
  std::atomic<int64_t> key_mismatches_{0};
  std::atomic<bool> has_example_{false};
  mutable std::mutex example_mu_;
  std::string example_;  // guarded by example_mu_
};

// Adds a W6 run's checker figures to its result line, reports problems on
// stderr, and throws when payloads were unreadable (a harness or server
// fault, not an ordering one).
inline void ReportW6Checker(const KeyOrderChecker& checker, const std::string& label, json& j) {
  if (checker.unreadable() > 0) {
    throw BenchError(label + ": " + std::to_string(checker.unreadable()) +
                     " tasks had unreadable payloads; first: " + checker.first_problem());
  }
  j["violations"] = checker.violations();
  j["overlaps"] = checker.overlaps();
  j["out_of_order"] = checker.out_of_order();
  if (checker.key_mismatches() > 0) j["key_mismatches"] = checker.key_mismatches();
  if (checker.violations() > 0 || checker.key_mismatches() > 0) {
    std::cerr << label << ": " << checker.overlaps() << " overlaps, " << checker.out_of_order()
              << " out-of-order starts, " << checker.key_mismatches()
              << " lease key mismatches; first: " << checker.first_problem() << "\n";
  }
}

}  // namespace chronoq::bench
