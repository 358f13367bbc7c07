#include "schedule/recurrence.h"

#include <algorithm>
#include <vector>

namespace chronoq {

Result<Recurrence> Recurrence::For(const ScheduleSpec& spec) {
  Recurrence r;
  if (spec.cron) {
    CHRONOQ_ASSIGN_OR_RETURN(
        CronExpr cron,
        CronExpr::Parse(*spec.cron, {spec.tz.value_or("UTC"), spec.dst_gap, spec.dst_repeat}));
    r.cron_ = std::move(cron);
  } else if (spec.every) {
    r.every_ = *spec.every;
  } else {
    return Status::Internal("schedule " + spec.name + " has no cron or every rule");
  }
  r.start_ = spec.start.value_or(Timestamp());
  return r;
}

std::optional<Timestamp> Recurrence::Next(Timestamp t) const {
  if (cron_) return cron_->Next(std::max(t, start_ - Duration(1)));
  if (t < start_) return start_;
  return start_ + ((t - start_) / every_ + 1) * every_;
}

int64_t Recurrence::CountBetween(Timestamp after, Timestamp before) const {
  if (!cron_) {
    // n in [first, last] with after < start + n * every < before.
    if (before <= start_) return 0;
    const int64_t first = after < start_ ? 0 : (after - start_) / every_ + 1;
    const int64_t last = (before - start_ - Duration(1)) / every_;
    return std::max<int64_t>(0, last - first + 1);
  }
  int64_t n = 0;
  for (auto t = Next(after); t && *t < before && n < kMaxScan; t = Next(*t)) ++n;
  return n;
}

Timestamp Recurrence::KthLatest(Timestamp after, Timestamp before, int64_t k) const {
  if (!cron_) {
    const int64_t last = (before - start_ - Duration(1)) / every_;
    return start_ + (last - (k - 1)) * every_;
  }
  // Cron rules cannot step backwards: scan windows ending at `before` that
  // double in width until one holds k occurrences, remembering the last k.
  std::vector<Timestamp> ring(static_cast<size_t>(k));
  for (Duration width = std::chrono::seconds(1);; width *= 2) {
    const Timestamp from = before - after > width ? before - width : after;
    int64_t n = 0;
    for (auto t = Next(from); t && *t < before && n < kMaxScan; t = Next(*t)) {
      ring[static_cast<size_t>(n % k)] = *t;
      ++n;
    }
    if (n >= k) return ring[static_cast<size_t>(n % k)];  // the oldest of the last k
    if (from == after) return n > 0 ? ring[0] : before;   // fewer than k: broken REQUIRES
  }
}

Recurrence::Step Recurrence::Advance(Timestamp after, Timestamp now, Misfire misfire,
                                     int max_catchup) const {
  const std::optional<Timestamp> next = Next(after);
  if (!next || *next >= now) return {next, 0};
  const int64_t missed = CountBetween(after, now);
  switch (misfire) {
    case Misfire::kSkip:
      return {AtOrAfter(now), missed};
    case Misfire::kRunOnce:
      return {KthLatest(after, now, 1), missed - 1};
    case Misfire::kRunAll:
      if (missed <= max_catchup) return {next, 0};
      return {KthLatest(after, now, max_catchup), missed - max_catchup};
  }
  return {next, 0};
}

}  // namespace chronoq
