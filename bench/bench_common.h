// bench_common.h: what chronoq-bench's targets share: options, errors, the
// JSON result line and small numeric helpers. Header-only; bench/ only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
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
  int64_t n = 0;  // 0: each workload's default
  int runs = 1;
  int concurrency = 4;  // W2 workers (threads, or HTTP connections)
  int batch = 256;      // W2 claim batch
  double idle_s = 10;   // W5 idle period
  std::string mode;     // W1: "batch" or "single" only; empty: both
  // http target only.
  std::string url;               // a running chronoqd; empty: the bench starts one per workload
  std::string chronoqd;          // the chronoqd binary the bench starts
  int w1_batch_connections = 1;  // W1 batch: connections sending batches at once
};

inline double Round(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

inline double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

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

}  // namespace chronoq::bench
