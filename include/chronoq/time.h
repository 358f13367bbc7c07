// chronoq/time.h: instants on the wire.
//
// chronoq writes instants as RFC 3339 UTC with milliseconds
// ("2026-11-22T03:00:00.000Z") and accepts RFC 3339 with any offset
// ("2026-11-22T12:00:00+09:00", fractional seconds up to microseconds) or
// integer Unix epoch milliseconds.
#pragma once

#include <string>
#include <string_view>

#include "chronoq/clock.h"
#include "chronoq/result.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

// Parses an RFC 3339 instant. Errors are InvalidArgument naming `field`.
Result<Timestamp> ParseTime(std::string_view text, std::string_view field = "time");

// Formats as RFC 3339 UTC with milliseconds ("...T03:00:00.000Z").
std::string FormatTime(Timestamp t);
// Appends FormatTime(t) to `out` without a string of its own (24 bytes: one
// allocation saved per instant written, three or four per task as JSON).
void AppendFormattedTime(std::string& out, Timestamp t);

// Parses a human duration: "250ms", "10s", "5m", "2h", "7d" or a combination
// ("1h30m"); a bare integer means milliseconds.
Result<Duration> ParseDuration(std::string_view text, std::string_view field = "duration");

}  // namespace chronoq
#pragma GCC visibility pop
