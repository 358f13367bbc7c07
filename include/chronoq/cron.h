// chronoq/cron.h: cron expressions evaluated in an IANA time zone.
//
// A CronExpr turns "when should this next run?" into a UTC instant. Fields are
// matched against the local wall time of the expression's zone; the result is
// always the first fire strictly after the instant asked about:
//
//   Result<CronExpr> c = CronExpr::Parse("0 30 2 * * *", {.tz = "America/New_York"});
//   if (!c.ok()) return c.status();                 // invalid_argument, field "cron" or "tz"
//   std::optional<Timestamp> next = c->Next(clock.Now());
//
// Dialect (issue 4): 5 fields `minute hour day-of-month month day-of-week`, or 6
// with `second` first; lists, ranges, steps (`*/7`, `5-59/15`, `10/20`), month
// and day names in any case, day of week 0-7 (0 and 7 are Sunday), `?` as `*`;
// `L`, `L-n`, `nW`, `LW` in day-of-month; `nL` and `n#k` in day-of-week; the
// macros @yearly @annually @monthly @weekly @daily @midnight @hourly. When both
// day fields are restricted (text other than exactly `*` or `?`) a day matches
// if either matches (Vixie cron); otherwise both must. Resolution is whole
// seconds; a 5-field expression fires at second 0.
//
// Daylight saving time. A rule is fixed-time when its second, minute and hour
// fields contain no `*`, `?` or `/`; otherwise it is an interval rule.
//   - Spring-forward gap: interval rules skip the missing local times. A
//     fixed-time rule whose time falls in the gap fires once at the first
//     instant after the gap (DstGap::kRunAfter, the default) or not at all
//     (DstGap::kSkip).
//   - Fall-back repeat: interval rules fire on both passes of the repeated
//     local times. A fixed-time rule fires once, at the first pass
//     (DstRepeat::kOnce, the default), or on both passes (DstRepeat::kTwice).
// The overrides in CronOptions affect fixed-time rules only.
//
// Zones come from the system tz database through date/tz. Its zone files list
// transitions only up to 2037 and date/tz 3.0.1 ignores the POSIX rule that
// ends each file, so after the last listed transition CronExpr applies that
// rule itself (when it reproduces the listed transitions of the years before).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "chronoq/clock.h"
#include "chronoq/result.h"

namespace date {
class time_zone;
}  // namespace date

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

// What a fixed-time rule does when its local time falls in a spring-forward gap.
enum class DstGap { kRunAfter, kSkip };
// What a fixed-time rule does when its local time repeats at fall-back.
enum class DstRepeat { kOnce, kTwice };

struct CronOptions {
  std::string tz = "UTC";               // IANA zone name
  std::optional<DstGap> dst_gap;        // default kRunAfter
  std::optional<DstRepeat> dst_repeat;  // default kOnce
};

// An immutable, parsed cron expression bound to a time zone. Cheap to copy.
// Thread-safe: const methods may be called concurrently.
class CronExpr {
 public:
  // Parses `text` in the dialect above. Errors are InvalidArgument with field
  // "cron" and a message naming the cron field and the offending text
  // ("day-of-month: '32' is out of range 1-31"), or "never fires" for an
  // expression no date can satisfy; an unknown zone is InvalidArgument with
  // field "tz".
  static Result<CronExpr> Parse(std::string_view text, const CronOptions& options = {});

  // The first fire strictly after `from`, or nullopt if there is none within
  // about 400 years of it. Does not allocate.
  std::optional<Timestamp> Next(Timestamp from) const;

  // True when the second, minute and hour fields contain no `*`, `?` or `/`.
  bool fixed_time() const { return fixed_time_; }
  // The zone name given at parse time.
  const std::string& tz() const { return tz_; }

 private:
  CronExpr() = default;

  // A span of UTC seconds [begin, end) with one UTC offset.
  struct Segment {
    int64_t begin;
    int64_t end;
    int64_t offset;
  };
  // A POSIX TZ rule "Mm.w.d/time": weekday d (0 = Sunday) of week w (5 = last)
  // of month m, at `time` seconds of local wall time.
  struct PosixRule {
    unsigned month = 0;
    unsigned week = 0;
    unsigned weekday = 0;
    int64_t time = 0;
  };
  // The rule that continues a zone after its last listed transition.
  struct PosixZone {
    int64_t from = 0;  // the last listed transition
    int64_t std_offset = 0;
    int64_t dst_offset = 0;
    bool has_dst = false;
    PosixRule start;  // DST starts (wall time in standard time)
    PosixRule end;    // DST ends (wall time in DST)
  };

  // The segment of zone_ containing UTC second `t`. REQUIRES: zone_ != nullptr.
  Segment SegmentAt(int64_t t) const;
  static Segment PosixSegmentAt(const PosixZone& zone, int64_t t);
  // The rule continuing `zone` after 2037, read once per zone from its TZif
  // file; nullptr when there is none or it does not match the listed data.
  static const PosixZone* LoadPosix(const date::time_zone& zone);

  // Whether UTC second `t` ends a spring-forward gap in which a local time
  // of the rule fell (its fire under DstGap::kRunAfter).
  bool FiresAtGapEnd(int64_t t) const;
  // The first local time (seconds since the local epoch) in [begin, end) whose
  // fields match, or nullopt.
  std::optional<int64_t> FindLocal(int64_t begin, int64_t end) const;
  // Bit d-1 set when day d of year/month (month 1-12) matches the day fields.
  uint32_t DayMask(int year, unsigned month) const;

  uint64_t seconds_ = 0;              // bit s: second s
  uint64_t minutes_ = 0;              // bit m: minute m
  uint32_t hours_ = 0;                // bit h: hour h
  uint16_t months_ = 0;               // bit m: month m (1-12)
  uint32_t dom_ = 0;                  // bit d: day d (1-31)
  uint32_t dom_last_ = 0;             // bit n: `L-n` (bit 0 is `L`)
  uint32_t dom_weekday_ = 0;          // bit d: `dW`
  bool dom_last_weekday_ = false;     // `LW`
  uint8_t dow_ = 0;                   // bit w: weekday w (0 = Sunday)
  uint8_t dow_last_ = 0;              // bit w: `wL`
  std::array<uint8_t, 6> dow_nth_{};  // dow_nth_[k] bit w: `w#k`
  bool dom_restricted_ = false;
  bool dow_restricted_ = false;
  bool fixed_time_ = false;
  DstGap dst_gap_ = DstGap::kRunAfter;
  DstRepeat dst_repeat_ = DstRepeat::kOnce;
  std::string tz_ = "UTC";
  const date::time_zone* zone_ = nullptr;  // nullptr for UTC; owned by the tz database
  const PosixZone* posix_ = nullptr;       // nullptr if none; cached for the process
};

}  // namespace chronoq
#pragma GCC visibility pop
