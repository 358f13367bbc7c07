// Recurrence: the occurrence instants of a cron or every schedule, and which
// one to create next when some were missed (the misfire policy).
#pragma once

#include <cstdint>
#include <optional>

#include "chronoq/cron.h"
#include "chronoq/schedule.h"

namespace chronoq {

class Recurrence {
 public:
  // REQUIRES: `spec` passed ValidateScheduleSpec and is a cron or every
  // schedule. Fails only if the stored cron or zone no longer parses.
  static Result<Recurrence> For(const ScheduleSpec& spec);

  // The first occurrence strictly after `t`; nullopt when there is none.
  std::optional<Timestamp> Next(Timestamp t) const;
  // The first occurrence at or after `t`.
  std::optional<Timestamp> AtOrAfter(Timestamp t) const { return Next(t - Duration(1)); }

  // The occurrence to create after occurrence `after`, at `now`. Occurrences
  // before `now` are missed; `misfire` and `max_catchup` choose among them
  // (chronoq/schedule.h). `skipped` counts the missed ones left out (exact
  // up to kMaxScan, a lower bound beyond).
  struct Step {
    std::optional<Timestamp> at;
    int64_t skipped = 0;
  };
  Step Advance(Timestamp after, Timestamp now, Misfire misfire, int max_catchup) const;

  // Occurrences examined at most per count or search.
  static constexpr int64_t kMaxScan = 1'000'000;

 private:
  Recurrence() = default;

  // How many occurrences lie in (after, before), up to kMaxScan.
  int64_t CountBetween(Timestamp after, Timestamp before) const;
  // The k-th latest occurrence in (after, before); REQUIRES: there are at
  // least k there.
  Timestamp KthLatest(Timestamp after, Timestamp before, int64_t k) const;

  std::optional<CronExpr> cron_;
  Duration every_{0};  // when not cron: occurrences are start_ + n * every_, n >= 0
  Timestamp start_;    // no occurrence before it
};

}  // namespace chronoq
