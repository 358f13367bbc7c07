// fuzz_cron: CronExpr::Parse and Next, in zones whose transitions make cron
// hard, from instants next to transitions.
//
// Input: byte 0 picks the zone (kZones), byte 1 the instant to start from
// (low nibble, kStarts) and the DST overrides (bits 4-5 dst_gap, 6-7
// dst_repeat: 0 unset, 1 and 2 the two values, 3 unset); the rest is the
// rule. The seed corpus writes the two bytes as printable characters.
//
// Checked (chronoq/cron.h's contract): a rule that does not parse is
// InvalidArgument naming "cron" or "tz"; each Next is a whole second strictly
// after the instant asked about; and it is the *first* fire after it, so
// asking from just before it finds it again.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

#include "chronoq/cron.h"

#include "common/check.h"

namespace chronoq::fuzz {
namespace {

using std::chrono::seconds;

constexpr std::string_view kZones[] = {
    "UTC",
    "America/New_York",
    "Europe/London",
    "Asia/Seoul",
    "Australia/Lord_Howe",  // DST of 30 minutes
    "Pacific/Chatham",      // +12:45 / +13:45
    "Europe/Dublin",        // tzdata's negative DST in winter
    "America/Santiago",     // DST changes at midnight: days without 00:00
    "Pacific/Apia",         // skipped 2011-12-30 altogether
    "Asia/Kathmandu",       // +05:45
};

// Unix seconds: the tests' fake clock, and the seconds before transitions.
constexpr int64_t kStarts[] = {
    1'795'305'600,  // 2026-11-22T00:00:00Z, FakeClock::kStart
    1'772'953'199,  // 2026-03-08T06:59:59Z, New York springs forward
    1'793'512'799,  // 2026-11-01T05:59:59Z, New York falls back
    1'774'745'999,  // 2026-03-29T00:59:59Z, London springs forward
    1'325'239'199,  // 2011-12-30T09:59:59Z, Apia skips a day
    2'145'916'799,  // 2037-12-31T23:59:59Z, the zone files' last year ends
    2'160'000'000,  // 2038-06-13T00:00:00Z, after the listed transitions (POSIX rules)
    0,              // 1970-01-01
    951'782'400,    // 2000-02-29
    4'107'542'400,  // 2100-03-01, after a century's non-leap February
};

constexpr int kNextCalls = 4;

template <typename T>
std::optional<T> Option(unsigned bits, T first, T second) {
  if (bits == 1) return first;
  if (bits == 2) return second;
  return std::nullopt;
}

void CheckNext(const CronExpr& cron, Timestamp from) {
  for (int i = 0; i < kNextCalls; ++i) {
    const std::optional<Timestamp> next = cron.Next(from);
    if (!next) return;
    CHRONOQ_CHECK(*next > from, "Next is strictly after the instant asked about");
    CHRONOQ_CHECK(next->time_since_epoch() % seconds(1) == Duration::zero(),
                  "Next is a whole second");
    CHRONOQ_CHECK(cron.Next(*next - Duration(1)) == next,
                  "Next is the first fire: asked from just before it, it is found again");
    from = *next;
  }
}

}  // namespace
}  // namespace chronoq::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronoq;
  using namespace chronoq::fuzz;
  if (size < 2) return 0;
  CronOptions options;
  options.tz = std::string(kZones[data[0] % std::size(kZones)]);
  options.dst_gap = Option(data[1] >> 4 & 3u, DstGap::kRunAfter, DstGap::kSkip);
  options.dst_repeat = Option(data[1] >> 6 & 3u, DstRepeat::kOnce, DstRepeat::kTwice);
  const Timestamp start{std::chrono::seconds(kStarts[(data[1] & 0xfu) % std::size(kStarts)])};
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  Result<CronExpr> cron = CronExpr::Parse(text, options);
  if (!cron.ok()) {
    const Status& error = cron.status();
    CHRONOQ_CHECK(error.code() == StatusCode::kInvalidArgument &&
                      (error.field() == "cron" || error.field() == "tz"),
                  "a rule that does not parse is InvalidArgument naming cron or tz");
    return 0;
  }
  CheckNext(*cron, start);
  // Off the whole second too: Next's resolution is seconds, its input is not.
  CheckNext(*cron, start + Duration(1));
  return 0;
}
