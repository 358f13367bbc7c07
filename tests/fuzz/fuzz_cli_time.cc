// fuzz_cli_time: the duration and time parsers of the CLI and the wire
// (chronoq/time.h: ParseDuration, ParseTime; cli/cli_common.h: ParseMillis,
// ParseRunAt, ParseToken). The input is one flag's text.
//
// Checked: a duration lies in [0, kMaxDelay] and reads back from its
// canonical spellings (microseconds, and bare milliseconds when whole);
// ParseMillis agrees with ParseDuration; a time reads back from FormatTime
// at millisecond precision (within the years FormatTime writes as RFC 3339);
// ParseRunAt accepts exactly epoch milliseconds and what ParseTime accepts;
// every refusal is InvalidArgument naming the flag.
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <date/date.h>

#include "chronoq/limits.h"
#include "chronoq/time.h"

#include "cli/cli_common.h"
#include "common/check.h"

namespace chronoq::fuzz {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kFlag = "--delay";

void CheckRefusal(const Status& status) {
  if (status.ok()) return;
  CHRONOQ_CHECK(status.code() == StatusCode::kInvalidArgument && status.field() == kFlag,
                "a refused flag is InvalidArgument naming it");
}

void CheckDuration(std::string_view text) {
  const Result<Duration> d = ParseDuration(text, kFlag);
  const Result<int64_t> ms = cli::ParseMillis(text, kFlag);
  CheckRefusal(d.status());
  CheckRefusal(ms.status());
  if (!d.ok()) {
    CHRONOQ_CHECK(!ms.ok(), "ParseMillis refuses what ParseDuration refuses");
    return;
  }
  CHRONOQ_CHECK(*d >= Duration::zero() && *d <= kMaxDelay, "a duration lies in [0, 100 years]");
  const Result<Duration> micros = ParseDuration(std::to_string(d->count()) + "us", kFlag);
  CHRONOQ_CHECK(micros.ok() && *micros == *d, "a duration reads back from its microseconds");
  const bool whole = *d % milliseconds(1) == Duration::zero();
  CHRONOQ_CHECK(ms.ok() == whole, "ParseMillis takes exactly the whole milliseconds");
  if (!whole) return;
  CHRONOQ_CHECK(milliseconds(*ms) == *d, "ParseMillis agrees with ParseDuration");
  const Result<Duration> bare = ParseDuration(std::to_string(*ms), kFlag);
  CHRONOQ_CHECK(bare.ok() && *bare == *d, "a bare integer is milliseconds");
  CHRONOQ_CHECK(!cli::ShowMillis(cli::json(*ms)).empty(), "a duration shows as text");
}

bool WrittenAsRfc3339(Timestamp t) {
  const int year = static_cast<int>(date::year_month_day(std::chrono::floor<date::days>(t)).year());
  return year >= 0 && year <= 9999;
}

void CheckTime(std::string_view text) {
  const Result<Timestamp> t = ParseTime(text, kFlag);
  CheckRefusal(t.status());
  const Result<cli::json> run_at = cli::ParseRunAt(text, kFlag);
  CheckRefusal(run_at.status());
  int64_t epoch_ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epoch_ms);
  const bool is_epoch_ms = !text.empty() && ec == std::errc() && end == text.data() + text.size();
  CHRONOQ_CHECK(run_at.ok() == (is_epoch_ms || t.ok()),
                "--run-at takes epoch milliseconds or an RFC 3339 time");
  if (!t.ok() || !WrittenAsRfc3339(*t)) return;
  const std::string written = FormatTime(*t);
  const Result<Timestamp> again = ParseTime(written, kFlag);
  CHRONOQ_CHECK(again.ok() && *again == std::chrono::floor<milliseconds>(*t),
                "a time reads back from FormatTime to the millisecond");
}

}  // namespace
}  // namespace chronoq::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronoq::fuzz;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckDuration(text);
  CheckTime(text);
  const chronoq::Result<uint64_t> token = chronoq::cli::ParseToken(text);
  if (!token.ok()) {
    CHRONOQ_CHECK(token.status().code() == chronoq::StatusCode::kInvalidArgument,
                  "a refused token is InvalidArgument");
  }
  return 0;
}
