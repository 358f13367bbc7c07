#include "chronoq/cron.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <date/tz.h>

// Design. Parse() turns each field into a bitset. Next() works on whole
// seconds as int64 counts, in two clocks: UTC seconds since the epoch and
// local wall seconds since the local epoch (UTC + offset). The zone's history
// is a sequence of segments with a constant offset (date::sys_info); within one
// segment local and UTC time differ by a constant, so Next() walks segments
// forward from `from` and, in each, asks FindLocal() for the first matching
// local time that the segment covers. FindLocal() jumps a whole month, day,
// hour or minute at a time, so a call costs a handful of bit operations per
// unit skipped. The DST rules only matter at segment boundaries:
//   - a spring-forward boundary leaves local times [end + off, end + next_off)
//     uncovered: interval rules never see them; fixed-time rules with
//     DstGap::kRunAfter fire at the boundary instant if one of them matches;
//   - a fall-back boundary covers local times [begin + off, begin + prev_off)
//     a second time: fixed-time rules with DstRepeat::kOnce skip them.
// Segments come from date/tz up to the zone's last listed transition (2037 in
// Debian's files) and from the zone file's POSIX footer rule after it.

namespace chronoq {
namespace {

constexpr int64_t kSecondsPerDay = 86'400;
// Next() looks this far ahead (a little over 400 years) before giving up.
constexpr int64_t kHorizon = int64_t{401} * 366 * kSecondsPerDay;
// Next() answers only for instants between years 1 and 9999.
constexpr int64_t kMinSeconds = -62'135'596'800;  // 0001-01-01T00:00:00Z
constexpr int64_t kMaxSeconds = 253'402'300'799;  // 9999-12-31T23:59:59Z

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Howard Hinnant's days_from_civil / civil_from_days.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = FloorDiv(y, 400);
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146'097 + static_cast<int64_t>(doe) - 719'468;
}

struct Civil {
  int64_t year;
  unsigned month;
  unsigned day;
};

Civil CivilFromDays(int64_t z) {
  z += 719'468;
  const int64_t era = FloorDiv(z, 146'097);
  const auto doe = static_cast<unsigned>(z - era * 146'097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36'524 - doe / 146'096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<int64_t>(yoe) + era * 400 + (m <= 2), m, d};
}

bool IsLeap(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr std::array<unsigned, 12> kDays = {31, 28, 31, 30, 31, 30,
                                                     31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// 0 = Sunday.
unsigned WeekdayFromDays(int64_t days) {
  return static_cast<unsigned>(days + 4 - FloorDiv(days + 4, 7) * 7);  // 1970-01-01 was a Thursday
}

// The lowest set bit of `bits` at or above `from`, or -1.
int NextBit(uint64_t bits, int from) {
  if (from >= 64) return -1;
  const uint64_t rest = bits >> from;
  return rest == 0 ? -1 : from + std::countr_zero(rest);
}

struct FieldSpec {
  std::string_view name;
  int lo;
  int hi;
  const std::string_view* names;  // lower-case names, or nullptr
  int name_base;                  // the value of names[0]
  int name_count;
};

constexpr std::array<std::string_view, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kDayNames = {"sun", "mon", "tue", "wed",
                                                       "thu", "fri", "sat"};

enum FieldIndex { kSecond, kMinute, kHour, kDom, kMonth, kDow };

constexpr std::array<FieldSpec, 6> kSpecs = {{
    {"second", 0, 59, nullptr, 0, 0},
    {"minute", 0, 59, nullptr, 0, 0},
    {"hour", 0, 23, nullptr, 0, 0},
    {"day-of-month", 1, 31, nullptr, 0, 0},
    {"month", 1, 12, kMonthNames.data(), 1, 12},
    {"day-of-week", 0, 7, kDayNames.data(), 0, 7},
}};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

// 'text', built by appending: GCC 12 reports a false -Wrestrict for
// "'" + std::string(...) at -O2.
std::string Quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  out += text;
  out += '\'';
  return out;
}

Status FieldError(const FieldSpec& spec, std::string_view reason) {
  return Status::InvalidArgument("cron", std::string(spec.name) + ": " + std::string(reason));
}

Status OutOfRange(const FieldSpec& spec, std::string_view token) {
  return FieldError(spec, Quote(token) + " is out of range " + std::to_string(spec.lo) + "-" +
                              std::to_string(spec.hi));
}

Status Invalid(const FieldSpec& spec, std::string_view token) {
  return FieldError(spec, "invalid " + Quote(token));
}

// Parses a non-negative integer of at most 4 digits filling all of `s`.
std::optional<int> ParseInt(std::string_view s) {
  // from_chars would take a minus sign: "L--3" would shift by -3.
  if (s.empty() || s.size() > 4 || s[0] < '0' || s[0] > '9') return std::nullopt;
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// A number or a name of the field, range-checked. Errors name `token`.
Result<int> ParseValue(const FieldSpec& spec, std::string_view token) {
  if (std::optional<int> v = ParseInt(token)) {
    if (*v < spec.lo || *v > spec.hi) return OutOfRange(spec, token);
    return *v;
  }
  for (int i = 0; i < spec.name_count; ++i) {
    if (EqualsIgnoreCase(token, spec.names[i])) return spec.name_base + i;
  }
  if (!token.empty() && token.find_first_not_of("0123456789") == std::string_view::npos) {
    return OutOfRange(spec, token);  // too many digits
  }
  return Invalid(spec, token);
}

// The parsed form of one field before it is stored in a CronExpr.
struct Field {
  uint64_t bits = 0;
  uint32_t dom_last = 0;
  uint32_t dom_weekday = 0;
  bool dom_last_weekday = false;
  uint8_t dow_last = 0;
  std::array<uint8_t, 6> dow_nth{};
};

bool ContainsAny(std::string_view s, std::string_view chars) {
  return s.find_first_of(chars) != std::string_view::npos;
}

// Parses one item of a comma-separated list into `out`.
Status ParseItem(FieldIndex index, std::string_view item, Field& out) {
  const FieldSpec& spec = kSpecs[index];
  if (item.empty()) return FieldError(spec, "empty list item");

  // Quartz specials.
  if (index == kDom && (ContainsAny(item, "LlWw"))) {
    if (EqualsIgnoreCase(item, "l")) {
      out.dom_last |= 1;
      return Status::Ok();
    }
    if (EqualsIgnoreCase(item, "lw")) {
      out.dom_last_weekday = true;
      return Status::Ok();
    }
    if (item.size() > 2 && (item[0] == 'L' || item[0] == 'l') && item[1] == '-') {
      std::optional<int> n = ParseInt(item.substr(2));
      if (!n) return Invalid(spec, item);
      if (*n > 30) {
        return FieldError(spec, Quote(item) + " is out of range L-0 to L-30");
      }
      out.dom_last |= uint32_t{1} << *n;
      return Status::Ok();
    }
    if (item.size() > 1 && (item.back() == 'W' || item.back() == 'w')) {
      std::string_view day = item.substr(0, item.size() - 1);
      if (!ParseInt(day)) return Invalid(spec, item);
      CHRONOQ_ASSIGN_OR_RETURN(int d, ParseValue(spec, day));
      out.dom_weekday |= uint32_t{1} << d;
      return Status::Ok();
    }
    return Invalid(spec, item);
  }
  if (index == kDow && ContainsAny(item, "#")) {
    const size_t hash = item.find('#');
    CHRONOQ_ASSIGN_OR_RETURN(int w, ParseValue(spec, item.substr(0, hash)));
    std::optional<int> k = ParseInt(item.substr(hash + 1));
    if (!k) return Invalid(spec, item);
    if (*k < 1 || *k > 5) {
      return FieldError(spec, Quote(item) + ": occurrence must be 1-5");
    }
    out.dow_nth[static_cast<size_t>(*k)] |= static_cast<uint8_t>(1u << (w % 7));
    return Status::Ok();
  }
  if (index == kDow && item.size() > 1 && (item.back() == 'L' || item.back() == 'l')) {
    CHRONOQ_ASSIGN_OR_RETURN(int w, ParseValue(spec, item.substr(0, item.size() - 1)));
    out.dow_last |= static_cast<uint8_t>(1u << (w % 7));
    return Status::Ok();
  }
  if (index == kDow && EqualsIgnoreCase(item, "l")) {  // Quartz: `L` alone is Saturday
    out.bits |= uint64_t{1} << 6;
    return Status::Ok();
  }

  // [range][/step]
  std::string_view range = item;
  int step = 1;
  bool has_step = false;
  if (const size_t slash = item.find('/'); slash != std::string_view::npos) {
    range = item.substr(0, slash);
    std::optional<int> s = ParseInt(item.substr(slash + 1));
    if (!s) return Invalid(spec, item);
    if (*s < 1) return FieldError(spec, "step must be at least 1 in " + Quote(item));
    step = *s;
    has_step = true;
  }
  int lo = 0;
  int hi = 0;
  if (range == "*" || range == "?") {
    lo = spec.lo;
    hi = spec.hi;
  } else if (const size_t dash = range.find('-'); dash != std::string_view::npos) {
    if (dash == 0 || dash + 1 == range.size()) return Invalid(spec, item);
    CHRONOQ_ASSIGN_OR_RETURN(lo, ParseValue(spec, range.substr(0, dash)));
    CHRONOQ_ASSIGN_OR_RETURN(hi, ParseValue(spec, range.substr(dash + 1)));
    if (index == kDow && hi == 0 && lo > 0) hi = 7;  // FRI-SUN
    if (lo > hi) {
      return FieldError(spec, Quote(range) + ": range start is after its end");
    }
  } else {
    CHRONOQ_ASSIGN_OR_RETURN(lo, ParseValue(spec, range));
    hi = has_step ? spec.hi : lo;  // `a/n` runs to the end of the field
  }
  for (int v = lo; v <= hi; v += step) {
    out.bits |= uint64_t{1} << (index == kDow ? v % 7 : v);
  }
  return Status::Ok();
}

Status ParseField(FieldIndex index, std::string_view text, Field& out) {
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    CHRONOQ_RETURN_IF_ERROR(ParseItem(index, item, out));
    if (comma == std::string_view::npos) return Status::Ok();
    start = comma + 1;
  }
}

std::optional<std::string_view> ExpandMacro(std::string_view text) {
  struct Macro {
    std::string_view name;
    std::string_view expansion;
  };
  static constexpr std::array<Macro, 7> kMacros = {{
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
  }};
  for (const Macro& m : kMacros) {
    if (EqualsIgnoreCase(text, m.name)) return m.expansion;
  }
  return std::nullopt;
}

}  // namespace

Result<CronExpr> CronExpr::Parse(std::string_view text, const CronOptions& options) {
  // Trim.
  const size_t first = text.find_first_not_of(" \t\n\r");
  if (first == std::string_view::npos) return Status::InvalidArgument("cron", "empty expression");
  text = text.substr(first, text.find_last_not_of(" \t\n\r") - first + 1);
  if (text.front() == '@') {
    std::optional<std::string_view> expansion = ExpandMacro(text);
    if (!expansion) {
      return Status::InvalidArgument("cron", "unknown macro " + Quote(text));
    }
    text = *expansion;
  }

  std::vector<std::string_view> fields;
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = text.find_first_not_of(" \t", pos);
    if (begin == std::string_view::npos) break;
    const size_t end = std::min(text.find_first_of(" \t", begin), text.size());
    fields.push_back(text.substr(begin, end - begin));
    pos = end;
  }
  if (fields.size() != 5 && fields.size() != 6) {
    return Status::InvalidArgument("cron",
                                   "expected 5 or 6 fields, got " + std::to_string(fields.size()));
  }
  if (fields.size() == 5) fields.insert(fields.begin(), "0");

  CronExpr expr;
  std::array<Field, 6> parsed;
  for (int i = 0; i < 6; ++i) {
    CHRONOQ_RETURN_IF_ERROR(ParseField(static_cast<FieldIndex>(i), fields[i], parsed[i]));
  }
  expr.seconds_ = parsed[kSecond].bits;
  expr.minutes_ = parsed[kMinute].bits;
  expr.hours_ = static_cast<uint32_t>(parsed[kHour].bits);
  expr.dom_ = static_cast<uint32_t>(parsed[kDom].bits);
  expr.dom_last_ = parsed[kDom].dom_last;
  expr.dom_weekday_ = parsed[kDom].dom_weekday;
  expr.dom_last_weekday_ = parsed[kDom].dom_last_weekday;
  expr.months_ = static_cast<uint16_t>(parsed[kMonth].bits);
  expr.dow_ = static_cast<uint8_t>(parsed[kDow].bits);
  expr.dow_last_ = parsed[kDow].dow_last;
  expr.dow_nth_ = parsed[kDow].dow_nth;
  expr.dom_restricted_ = fields[kDom] != "*" && fields[kDom] != "?";
  expr.dow_restricted_ = fields[kDow] != "*" && fields[kDow] != "?";
  expr.fixed_time_ = !ContainsAny(fields[kSecond], "*?/") && !ContainsAny(fields[kMinute], "*?/") &&
                     !ContainsAny(fields[kHour], "*?/");
  expr.dst_gap_ = options.dst_gap.value_or(DstGap::kRunAfter);
  expr.dst_repeat_ = options.dst_repeat.value_or(DstRepeat::kOnce);

  // The calendar repeats every 400 years, so one cycle shows whether any day matches.
  bool fires = false;
  for (int y = 2000; y < 2400 && !fires; ++y) {
    for (unsigned m = 1; m <= 12 && !fires; ++m) {
      fires = (expr.months_ >> m & 1) != 0 && expr.DayMask(y, m) != 0;
    }
  }
  if (!fires) {
    return Status::InvalidArgument("cron", Quote(text) + " never fires");
  }

  expr.tz_ = options.tz;
  if (options.tz != "UTC" && options.tz != "Etc/UTC") {
    try {
      expr.zone_ = date::locate_zone(options.tz);
    } catch (const std::exception&) {
      return Status::InvalidArgument("tz", "unknown time zone " + Quote(options.tz));
    }
    expr.posix_ = LoadPosix(*expr.zone_);
  }
  return expr;
}

uint32_t CronExpr::DayMask(int year, unsigned month) const {
  const unsigned dim = DaysInMonth(year, month);
  const uint32_t all = (uint32_t{1} << dim) - 1;
  const unsigned wd1 = WeekdayFromDays(DaysFromCivil(year, month, 1));

  uint32_t dom = (dom_ >> 1) & all;
  for (uint32_t rest = dom_last_; rest != 0; rest &= rest - 1) {
    const auto n = static_cast<unsigned>(std::countr_zero(rest));
    if (n < dim) dom |= uint32_t{1} << (dim - n - 1);
  }
  for (uint32_t rest = dom_weekday_; rest != 0; rest &= rest - 1) {
    const auto d = static_cast<unsigned>(std::countr_zero(rest));
    if (d > dim) continue;
    const unsigned wd = (wd1 + d - 1) % 7;
    unsigned target = d;
    if (wd == 6) target = d == 1 ? 3 : d - 1;        // Saturday: Friday, or Monday the 3rd
    if (wd == 0) target = d == dim ? d - 2 : d + 1;  // Sunday: Monday, or Friday before the end
    dom |= uint32_t{1} << (target - 1);
  }
  if (dom_last_weekday_) {
    const unsigned wd = (wd1 + dim - 1) % 7;
    const unsigned target = wd == 6 ? dim - 1 : wd == 0 ? dim - 2 : dim;
    dom |= uint32_t{1} << (target - 1);
  }

  uint32_t dow = 0;
  const bool has_specials = dow_last_ != 0 || std::any_of(dow_nth_.begin(), dow_nth_.end(),
                                                          [](uint8_t b) { return b != 0; });
  for (unsigned d = 0; d < dim; ++d) {
    const unsigned wd = (wd1 + d) % 7;
    bool match = (dow_ >> wd & 1) != 0;
    if (has_specials) {
      match = match || ((dow_last_ >> wd & 1) != 0 && d + 7 >= dim) ||
              (dow_nth_[d / 7 + 1] >> wd & 1) != 0;
    }
    if (match) dow |= uint32_t{1} << d;
  }

  if (dom_restricted_ && dow_restricted_) return dom | dow;
  return dom & dow;
}

namespace {

// Parses a POSIX TZ time "[+-]hh[:mm[:ss]]" at `s[i]` into seconds.
std::optional<int64_t> ParsePosixTime(std::string_view s, size_t& i) {
  int64_t sign = 1;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
  int64_t total = 0;
  for (int part = 0; part < 3; ++part) {
    if (part > 0) {
      if (i >= s.size() || s[i] != ':') break;
      ++i;
    }
    const size_t start = i;
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 3) v = v * 10 + (s[i++] - '0');
    if (i == start) return std::nullopt;
    total += v * (part == 0 ? 3600 : part == 1 ? 60 : 1);
  }
  return sign * total;
}

// Skips a zone abbreviation ("EST" or "<+1245>").
bool SkipPosixName(std::string_view s, size_t& i) {
  if (i < s.size() && s[i] == '<') {
    const size_t close = s.find('>', i);
    if (close == std::string_view::npos) return false;
    i = close + 1;
    return true;
  }
  const size_t start = i;
  while (i < s.size() && ((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) ++i;
  return i - start >= 3;
}

// The local wall second at which `rule` falls in `year`.
int64_t PosixRuleLocal(int64_t year, unsigned month, unsigned week, unsigned weekday,
                       int64_t time) {
  const int64_t first = DaysFromCivil(year, month, 1);
  int64_t day = 1 + (weekday + 7 - WeekdayFromDays(first)) % 7 + (int64_t{week} - 1) * 7;
  while (day > DaysInMonth(year, month)) day -= 7;
  return (first + day - 1) * kSecondsPerDay + time;
}

}  // namespace

CronExpr::Segment CronExpr::PosixSegmentAt(const PosixZone& zone, int64_t t) {
  if (!zone.has_dst) return {zone.from, kMaxSeconds + 1, zone.std_offset};
  const int64_t year = CivilFromDays(FloorDiv(t, kSecondsPerDay)).year;
  struct Transition {
    int64_t at;
    int64_t offset;
  };
  std::array<Transition, 6> transitions;
  for (size_t k = 0; k < 3; ++k) {
    const int64_t y = year - 1 + static_cast<int64_t>(k);
    const PosixRule& s = zone.start;
    const PosixRule& e = zone.end;
    transitions[2 * k] = {PosixRuleLocal(y, s.month, s.week, s.weekday, s.time) - zone.std_offset,
                          zone.dst_offset};
    transitions[2 * k + 1] = {
        PosixRuleLocal(y, e.month, e.week, e.weekday, e.time) - zone.dst_offset, zone.std_offset};
  }
  std::sort(transitions.begin(), transitions.end(),
            [](const Transition& a, const Transition& b) { return a.at < b.at; });
  // The year before and after bracket t, so some transition precedes it.
  size_t i = 0;
  while (i + 1 < transitions.size() && transitions[i + 1].at <= t) ++i;
  const int64_t end = i + 1 < transitions.size() ? transitions[i + 1].at : kMaxSeconds + 1;
  return {std::max(transitions[i].at, zone.from), end, transitions[i].offset};
}

const CronExpr::PosixZone* CronExpr::LoadPosix(const date::time_zone& zone) {
  // Zones live as long as the tz database, so the cache does too.
  static std::mutex mu;
  static std::map<const date::time_zone*, std::unique_ptr<PosixZone>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(&zone); it != cache.end()) return it->second.get();
  std::unique_ptr<PosixZone>& slot = cache[&zone];

  // date/tz reads the system zone files from here (USE_OS_TZDB).
  std::ifstream file("/usr/share/zoneinfo/" + std::string(zone.name()), std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // TZif version 2 and later end with "\n<POSIX TZ string>\n".
  if (data.size() < 6 || data.compare(0, 4, "TZif") != 0 || data[4] < '2' || data.back() != '\n') {
    return nullptr;
  }
  const size_t nl = data.rfind('\n', data.size() - 2);
  if (nl == std::string::npos) return nullptr;
  const std::string_view tz = std::string_view(data).substr(nl + 1, data.size() - nl - 2);

  PosixZone p;
  size_t i = 0;
  if (!SkipPosixName(tz, i)) return nullptr;
  std::optional<int64_t> std_offset = ParsePosixTime(tz, i);
  if (!std_offset) return nullptr;
  p.std_offset = -*std_offset;  // POSIX counts west as positive
  if (i < tz.size()) {
    if (!SkipPosixName(tz, i)) return nullptr;
    p.has_dst = true;
    p.dst_offset = p.std_offset + 3600;
    if (i < tz.size() && tz[i] != ',') {
      std::optional<int64_t> dst_offset = ParsePosixTime(tz, i);
      if (!dst_offset) return nullptr;
      p.dst_offset = -*dst_offset;
    }
    for (PosixRule* rule : {&p.start, &p.end}) {
      // Only the "Mm.w.d[/time]" form, which every current zone uses.
      if (i + 1 >= tz.size() || tz[i] != ',' || tz[i + 1] != 'M') return nullptr;
      i += 2;
      std::array<unsigned, 3> mwd{};
      for (size_t k = 0; k < 3; ++k) {
        if (k > 0 && (i >= tz.size() || tz[i++] != '.')) return nullptr;
        const size_t start = i;
        while (i < tz.size() && tz[i] >= '0' && tz[i] <= '9')
          mwd[k] = mwd[k] * 10 + (tz[i++] - '0');
        if (i == start) return nullptr;
      }
      if (mwd[0] < 1 || mwd[0] > 12 || mwd[1] < 1 || mwd[1] > 5 || mwd[2] > 6) return nullptr;
      *rule = {mwd[0], mwd[1], mwd[2], 7200};
      if (i < tz.size() && tz[i] == '/') {
        ++i;
        std::optional<int64_t> time = ParsePosixTime(tz, i);
        if (!time) return nullptr;
        rule->time = *time;
      }
    }
  }
  if (i != tz.size()) return nullptr;

  // Use the rule only where it reproduces the zone's listed offsets: the final
  // listed one, and for DST rules every 6 hours of the 4 years before it.
  using std::chrono::seconds;
  const date::sys_info last = zone.get_info(date::sys_seconds(seconds(kMaxSeconds)));
  p.from = last.begin.time_since_epoch().count();
  if (PosixSegmentAt(p, p.from).offset != last.offset.count()) return nullptr;
  if (p.has_dst) {
    for (int64_t t = p.from - kSecondsPerDay * 4 * 366; t < p.from; t += kSecondsPerDay / 4) {
      const int64_t listed = zone.get_info(date::sys_seconds(seconds(t))).offset.count();
      if (PosixSegmentAt(p, t).offset != listed) return nullptr;
    }
  }
  slot = std::make_unique<PosixZone>(p);
  return slot.get();
}

CronExpr::Segment CronExpr::SegmentAt(int64_t t) const {
  if (posix_ != nullptr && t >= posix_->from) return PosixSegmentAt(*posix_, t);
  const date::sys_info info = zone_->get_info(date::sys_seconds(std::chrono::seconds(t)));
  return {info.begin.time_since_epoch().count(), info.end.time_since_epoch().count(),
          info.offset.count()};
}

std::optional<int64_t> CronExpr::FindLocal(int64_t begin, int64_t end) const {
  int64_t t = begin;
  int64_t cached_year = 0;
  unsigned cached_month = 0;
  uint32_t mask = 0;
  while (t < end) {
    const int64_t days = FloorDiv(t, kSecondsPerDay);
    const int64_t day_start = days * kSecondsPerDay;
    const Civil c = CivilFromDays(days);
    if ((months_ >> c.month & 1) == 0) {
      const int m = NextBit(months_, static_cast<int>(c.month) + 1);
      t = m < 0 ? DaysFromCivil(c.year + 1, static_cast<unsigned>(std::countr_zero(months_)), 1)
                : DaysFromCivil(c.year, static_cast<unsigned>(m), 1);
      t *= kSecondsPerDay;
      continue;
    }
    if (c.year != cached_year || c.month != cached_month) {
      mask = DayMask(static_cast<int>(c.year), c.month);
      cached_year = c.year;
      cached_month = c.month;
    }
    const uint32_t rest = mask >> (c.day - 1);
    if (rest == 0) {  // no more days this month
      t = (c.month == 12 ? DaysFromCivil(c.year + 1, 1, 1)
                         : DaysFromCivil(c.year, c.month + 1, 1)) *
          kSecondsPerDay;
      continue;
    }
    if (const int skip = std::countr_zero(rest); skip != 0) {
      t = day_start + skip * kSecondsPerDay;
      continue;
    }
    const int64_t sod = t - day_start;
    const auto h = static_cast<int>(sod / 3600);
    const auto mi = static_cast<int>(sod / 60 % 60);
    const auto s = static_cast<int>(sod % 60);
    const int64_t hh = NextBit(hours_, h);
    if (hh < 0) {
      t = day_start + kSecondsPerDay;
      continue;
    }
    if (hh != h) {
      t = day_start + hh * 3600;
      continue;
    }
    const int64_t mm = NextBit(minutes_, mi);
    if (mm < 0) {
      t = day_start + (int64_t{h} + 1) * 3600;
      continue;
    }
    if (mm != mi) {
      t = day_start + int64_t{h} * 3600 + mm * 60;
      continue;
    }
    const int64_t ss = NextBit(seconds_, s);
    if (ss < 0) {
      t = day_start + int64_t{h} * 3600 + (int64_t{mi} + 1) * 60;
      continue;
    }
    t = day_start + int64_t{h} * 3600 + int64_t{mi} * 60 + ss;
    if (t >= end) return std::nullopt;
    return t;
  }
  return std::nullopt;
}

bool CronExpr::FiresAtGapEnd(int64_t t) const {
  const Segment seg = SegmentAt(t);
  if (seg.begin != t) return false;
  const int64_t before = SegmentAt(t - 1).offset;
  return seg.offset > before && FindLocal(t + before, t + seg.offset).has_value();
}

std::optional<Timestamp> CronExpr::Next(Timestamp from) const {
  using std::chrono::seconds;
  int64_t t = std::chrono::floor<seconds>(from).time_since_epoch().count() + 1;
  if (t > kMaxSeconds) return std::nullopt;
  t = std::max(t, kMinSeconds);
  const int64_t horizon = std::min(t + kHorizon, kMaxSeconds + 1);
  const auto to_timestamp = [](int64_t s) { return Timestamp(seconds(s)); };

  if (zone_ == nullptr) {
    std::optional<int64_t> local = FindLocal(t, horizon);
    if (!local) return std::nullopt;
    return to_timestamp(*local);
  }

  const bool fixed_once = fixed_time_ && dst_repeat_ == DstRepeat::kOnce;
  const bool fixed_run_after = fixed_time_ && dst_gap_ == DstGap::kRunAfter;
  // A rule whose time fell in a spring-forward gap fires at the gap's end.
  // The loop below finds that fire when it leaves the segment before the
  // gap, so a search starting exactly at the gap's end must look back itself.
  if (fixed_run_after && FiresAtGapEnd(t)) return to_timestamp(t);
  while (t < horizon) {
    const Segment seg = SegmentAt(t);
    const int64_t off = seg.offset;
    const int64_t end = std::min(seg.end, horizon);
    int64_t search_from = t + off;
    // Offsets never jump by more than a few hours; only look back near the segment start.
    if (fixed_once && search_from < seg.begin + off + int64_t{4} * 3600) {
      // Local times this segment shares with the one before are second passes.
      const int64_t prev_off = SegmentAt(seg.begin - 1).offset;
      if (prev_off > off) search_from = std::max(search_from, seg.begin + prev_off);
    }
    if (std::optional<int64_t> local = FindLocal(search_from, end + off)) {
      return to_timestamp(*local - off);
    }
    if (end >= horizon) return std::nullopt;
    if (fixed_run_after && FiresAtGapEnd(end)) return to_timestamp(end);
    t = end;
  }
  return std::nullopt;
}

}  // namespace chronoq
