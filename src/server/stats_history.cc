#include "server/stats_history.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "codec/json_codec.h"

namespace chronoq::server {

std::optional<double> QuantileOfGrowth(const EngineStats::Histogram& before,
                                       const EngineStats::Histogram& after, double q) {
  const size_t buckets = after.counts.size();
  if (buckets == 0 || after.total <= before.total) return std::nullopt;
  auto gained = [&](size_t i) {  // cumulative, like the counts themselves
    const uint64_t b = i < before.counts.size() ? before.counts[i] : 0;
    return after.counts[i] - std::min(b, after.counts[i]);
  };
  const double total = static_cast<double>(after.total - before.total);
  const double rank = q * total;
  double below = 0;  // observations in the buckets before i
  for (size_t i = 0; i < buckets; ++i) {
    const double upto = static_cast<double>(gained(i));
    if (upto >= rank && upto > below) {
      if (i >= after.bounds.size()) return after.bounds.empty() ? 0 : after.bounds.back();
      const double low = i == 0 ? 0 : after.bounds[i - 1];
      const double high = after.bounds[i];
      return low + (high - low) * (rank - below) / (upto - below);
    }
    below = upto;
  }
  return after.bounds.empty() ? 0 : after.bounds.back();
}

bool StatsHistory::Add(Timestamp now, const EngineStats& stats) {
  MutexLock lock(mu_);
  bool counted = false;
  if (last_at_ && now > *last_at_) {
    const double seconds = std::chrono::duration<double>(now - *last_at_).count();
    auto rate = [seconds](uint64_t before, uint64_t after) {
      return after >= before ? static_cast<double>(after - before) / seconds : 0.0;
    };
    Sample s;
    s.at = now;
    s.enqueued_per_s = rate(last_.enqueued, stats.enqueued);
    s.acked_per_s = rate(last_.acked, stats.acked);
    s.failed_per_s = rate(last_.failed, stats.failed);
    s.lateness_p50_s = QuantileOfGrowth(last_.dispatch_lateness_s, stats.dispatch_lateness_s, 0.5);
    s.lateness_p99_s = QuantileOfGrowth(last_.dispatch_lateness_s, stats.dispatch_lateness_s, 0.99);
    counted = s.enqueued_per_s > 0 || s.acked_per_s > 0 || s.failed_per_s > 0 ||
              stats.dispatch_lateness_s.total != last_.dispatch_lateness_s.total;
    samples_.push_back(s);
    while (samples_.size() > capacity_) samples_.pop_front();
  }
  last_at_ = now;
  last_ = stats;
  return counted;
}

void StatsHistory::FillIdle(Timestamp until) {
  MutexLock lock(mu_);
  if (!last_at_) return;
  // At most a full history of them: older ones would be dropped at once.
  const int64_t whole = (until - *last_at_) / interval_;
  if (whole <= 0) return;
  const auto capacity = static_cast<int64_t>(capacity_);
  const int64_t skipped = whole > capacity ? whole - capacity : 0;
  *last_at_ += skipped * interval_;
  for (int64_t i = skipped; i < whole; ++i) {
    *last_at_ += interval_;
    Sample s;
    s.at = *last_at_;
    samples_.push_back(s);
    while (samples_.size() > capacity_) samples_.pop_front();
  }
}

Timestamp StatsHistory::NextAt() const {
  MutexLock lock(mu_);
  return last_at_.value_or(Timestamp()) + interval_;
}

namespace {

void AppendNumber(std::string& out, double v) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%.6g", v);
  out.append(buf, static_cast<size_t>(n));
}

void AppendOptionalNumber(std::string& out, const std::optional<double>& v) {
  if (v) {
    AppendNumber(out, *v);
  } else {
    out += "null";
  }
}

}  // namespace

std::string StatsHistory::Json() const {
  std::string out = "{\"interval_s\":";
  AppendNumber(out, std::chrono::duration<double>(interval_).count());
  out += ",\"samples\":[";
  MutexLock lock(mu_);
  for (size_t i = 0; i < samples_.size(); ++i) {
    const Sample& s = samples_[i];
    if (i > 0) out += ',';
    out += "{\"at\":";
    AppendTime(out, s.at);
    out += ",\"enqueued_per_s\":";
    AppendNumber(out, s.enqueued_per_s);
    out += ",\"acked_per_s\":";
    AppendNumber(out, s.acked_per_s);
    out += ",\"failed_per_s\":";
    AppendNumber(out, s.failed_per_s);
    out += ",\"lateness_p50_s\":";
    AppendOptionalNumber(out, s.lateness_p50_s);
    out += ",\"lateness_p99_s\":";
    AppendOptionalNumber(out, s.lateness_p99_s);
    out += '}';
  }
  out += "]}";
  return out;
}

StatsSampler::StatsSampler(Engine& engine, Clock& clock, StatsHistory& history)
    : clock_(clock), history_(history) {
  history.Add(clock.Now(), engine.Stats());
  thread_ = std::thread([this, &engine] { Run(engine); });
}

void StatsSampler::Run(Engine& engine) {
  std::unique_lock lock(mu_);
  Timestamp next = history_.NextAt();
  while (!stopping_) {
    const Timestamp until = idle_ ? std::max(next, wake_) : next;
    if (!poked_ && clock_.Now() < until) {
      clock_.WaitUntil(cv_, lock, until);
      continue;  // woken, or spuriously: look again
    }
    if (poked_) {  // Poke filled the history up to its call
      poked_ = false;
      next = history_.NextAt();
      continue;
    }
    const Timestamp now = clock_.Now();
    if (idle_) {
      // The engine's timed work is due: nothing was counted before it.
      history_.FillIdle(std::min(now, wake_));
      idle_ = false;
      idle_flag_.store(false);
      next = history_.NextAt();
      continue;
    }
    lock.unlock();
    const bool noted = noted_.exchange(false);  // since the sample before
    const EngineStats stats = engine.Stats();
    const bool counted = history_.Add(now, stats);
    lock.lock();
    next = history_.NextAt();
    if (!counted && !noted) {
      // Idle, unless a poke comes now: the flag is set before noted_ is
      // read again, and Poke sets noted_ before it reads the flag (all
      // sequentially consistent), so one of the two sees the other.
      idle_flag_.store(true);
      if (!noted_.load()) {
        idle_ = true;
        wake_ = stats.next_wake.value_or(kForever);
      } else {
        idle_flag_.store(false);
      }
    }
  }
}

void StatsSampler::Poke() {
  // Read before it is written: while chronoqd works, noted_ is set nearly
  // always (cleared once an interval), so a request only reads its line.
  if (!noted_.load()) noted_.store(true);
  if (!idle_flag_.load()) return;
  std::lock_guard lock(mu_);
  if (!idle_) return;
  history_.FillIdle(clock_.Now());
  idle_ = false;
  idle_flag_.store(false);
  poked_ = true;
  cv_.notify_all();
}

StatsSampler::~StatsSampler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace chronoq::server
