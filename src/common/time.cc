#include "chronoq/time.h"

#include <cctype>
#include <charconv>
#include <sstream>

#include <date/date.h>

#include "chronoq/task.h"

namespace chronoq {
namespace {

// Reads exactly `n` digits at text[pos]; advances pos.
bool Digits(std::string_view text, size_t& pos, int n, int& out) {
  if (pos + static_cast<size_t>(n) > text.size()) return false;
  out = 0;
  for (int i = 0; i < n; ++i) {
    const char c = text[pos + static_cast<size_t>(i)];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  pos += static_cast<size_t>(n);
  return true;
}

bool Expect(std::string_view text, size_t& pos, char c) {
  if (pos >= text.size() || std::toupper(static_cast<unsigned char>(text[pos])) != c) return false;
  ++pos;
  return true;
}

}  // namespace

Result<Timestamp> ParseTime(std::string_view text, std::string_view field) {
  const auto bad = [&] {
    return Status::InvalidArgument(field, "not an RFC 3339 time (e.g. 2026-11-22T03:00:00Z)");
  };
  // RFC 3339: date-time = full-date "T" partial-time time-offset.
  size_t pos = 0;
  int y, mo, d, h, mi, s;
  if (!Digits(text, pos, 4, y) || !Expect(text, pos, '-') || !Digits(text, pos, 2, mo) ||
      !Expect(text, pos, '-') || !Digits(text, pos, 2, d)) {
    return bad();
  }
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' ')) {
    return bad();
  }
  ++pos;
  if (!Digits(text, pos, 2, h) || !Expect(text, pos, ':') || !Digits(text, pos, 2, mi) ||
      !Expect(text, pos, ':') || !Digits(text, pos, 2, s)) {
    return bad();
  }
  int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 6) micros = micros * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (int i = digits; i < 6; ++i) micros *= 10;
  }
  int offset_minutes = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!Digits(text, pos, 2, oh) || !Expect(text, pos, ':') || !Digits(text, pos, 2, om) ||
        oh > 23 || om > 59) {
      return bad();
    }
    offset_minutes = sign * (oh * 60 + om);
  } else {
    return Status::InvalidArgument(field, "an RFC 3339 time needs an offset (Z or +hh:mm)");
  }
  if (pos != text.size()) return bad();

  const date::year_month_day ymd{date::year{y}, date::month{static_cast<unsigned>(mo)},
                                 date::day{static_cast<unsigned>(d)}};
  // A leap second (60) is accepted as the last instant of its minute.
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) {
    return Status::InvalidArgument(field, "not a valid date and time of day");
  }
  const auto day = date::sys_days(ymd);
  const Duration since =
      std::chrono::hours(h) + std::chrono::minutes(mi) + std::chrono::seconds(s == 60 ? 59 : s) +
      Duration(s == 60 ? 999'999 : micros) - std::chrono::minutes(offset_minutes);
  return Timestamp(std::chrono::duration_cast<Duration>(day.time_since_epoch()) + since);
}

std::string FormatTime(Timestamp t) {
  std::string out;
  AppendFormattedTime(out, t);
  return out;
}

void AppendFormattedTime(std::string& out, Timestamp t) {
  using namespace std::chrono;
  const auto ms = floor<milliseconds>(t);
  const auto day = floor<date::days>(ms);
  const date::year_month_day ymd(day);
  const int year = static_cast<int>(ymd.year());
  if (year < 0 || year > 9999) {
    out += date::format("%FT%TZ", ms);
    return;
  }
  // By hand: date::format goes through an ostringstream, which profiles of
  // chronoqd found to be most of the cost of writing a task as JSON.
  int64_t rest = (ms - day).count();  // milliseconds into the day
  const int64_t millis = rest % 1000;
  rest /= 1000;
  char buf[24];  // YYYY-MM-DDTHH:MM:SS.mmmZ
  const auto put = [&buf](int at, int64_t value, int digits) {
    for (int i = digits - 1; i >= 0; --i, value /= 10)
      buf[at + i] = static_cast<char>('0' + value % 10);
  };
  put(0, year, 4);
  buf[4] = '-';
  put(5, static_cast<unsigned>(ymd.month()), 2);
  buf[7] = '-';
  put(8, static_cast<unsigned>(ymd.day()), 2);
  buf[10] = 'T';
  put(11, rest / 3600, 2);
  buf[13] = ':';
  put(14, rest / 60 % 60, 2);
  buf[16] = ':';
  put(17, rest % 60, 2);
  buf[19] = '.';
  put(20, millis, 3);
  buf[23] = 'Z';
  out.append(buf, sizeof buf);
}

Result<Duration> ParseDuration(std::string_view text, std::string_view field) {
  if (text.empty()) return Status::InvalidArgument(field, "empty duration");
  // A bare integer is milliseconds.
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec == std::errc() && end == text.data() + text.size()) {
    if (n < 0) return Status::InvalidArgument(field, "must not be negative");
    if (n > std::chrono::duration_cast<std::chrono::milliseconds>(kMaxDelay).count()) {
      return Status::InvalidArgument(field, "too large");
    }
    return Duration(std::chrono::milliseconds(n));
  }
  Duration total{0};
  size_t pos = 0;
  while (pos < text.size()) {
    const char* begin = text.data() + pos;
    auto [p, e] = std::from_chars(begin, text.data() + text.size(), n);
    if (e != std::errc() || p == begin || n < 0) {
      return Status::InvalidArgument(field, "not a duration (e.g. 250ms, 10s, 5m, 2h, 7d)");
    }
    pos = static_cast<size_t>(p - text.data());
    // Longest spellings first, so "ms" is not read as "m".
    static constexpr std::pair<std::string_view, Duration> kUnits[] = {
        {"ms", std::chrono::milliseconds(1)}, {"us", Duration(1)},
        {"s", std::chrono::seconds(1)},       {"m", std::chrono::minutes(1)},
        {"h", std::chrono::hours(1)},         {"d", std::chrono::hours(24)},
    };
    const std::string_view rest = text.substr(pos);
    Duration one{0};
    for (const auto& [name, length] : kUnits) {
      if (rest.starts_with(name)) {
        one = length;
        pos += name.size();
        break;
      }
    }
    if (one == Duration::zero()) {
      return Status::InvalidArgument(field, "unknown unit (use ms, s, m, h or d)");
    }
    if (n > (kMaxDelay - total) / one) return Status::InvalidArgument(field, "too large");
    total += one * n;
  }
  return total;
}

}  // namespace chronoq
