#include "admin/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace chronoq::admin {

std::string WithCommas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Clock(int64_t seconds) {
  char buf[32];
  if (seconds >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(seconds / 3600),
                  static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(seconds / 60),
                  static_cast<long long>(seconds % 60));
  }
  return buf;
}

Progress::Progress(std::ostream& out, bool terminal, std::function<TimePoint()> now)
    : out_(out), terminal_(terminal), now_(std::move(now)) {}

void Progress::Start(int64_t total) {
  total_ = std::max<int64_t>(total, 0);
  done_ = 0;
  next_tenth_ = 1;
  finished_ = false;
  start_ = drawn_at_ = now_();
  if (terminal_) Draw();
}

double Progress::Seconds() const { return std::chrono::duration<double>(now_() - start_).count(); }

double Progress::Rate() const {
  const double s = Seconds();
  return s > 0 ? static_cast<double>(done_) / s : 0.0;
}

void Progress::Advance(int64_t rows) {
  done_ += rows;
  if (terminal_) {
    // Redrawing costs a write per call; ten a second is plenty to watch.
    if (now_() - drawn_at_ >= std::chrono::milliseconds(100)) Draw();
    return;
  }
  if (total_ <= 0) return;
  const int tenth = static_cast<int>(std::min<int64_t>(10, done_ * 10 / total_));
  if (tenth >= next_tenth_ && done_ < total_) {
    next_tenth_ = tenth + 1;
    out_ << "copied " << Describe() << "\n" << std::flush;
  }
}

void Progress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (terminal_) {
    Draw();
    out_ << "\n" << std::flush;
  } else {
    out_ << "copied " << Describe() << "\n" << std::flush;
  }
}

void Progress::Draw() {
  drawn_at_ = now_();
  constexpr int kWidth = 30;
  const double fraction =
      total_ > 0 ? std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_)) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  // \r and "erase to the end of the line": the new line may be shorter.
  out_ << "\r[" << std::string(static_cast<size_t>(filled), '#')
       << std::string(static_cast<size_t>(kWidth - filled), '.') << "] " << Describe() << "\x1b[K"
       << std::flush;
}

std::string Progress::Describe() const {
  const int percent =
      total_ > 0 ? static_cast<int>(std::min<int64_t>(100, done_ * 100 / total_)) : 100;
  const double rate = Rate();
  std::string s = std::to_string(percent) + "% " + WithCommas(done_) + "/" + WithCommas(total_) +
                  " rows, " + WithCommas(std::llround(rate)) + " rows/s";
  if (done_ < total_ && rate > 0) {
    s += ", ETA " + Clock(std::llround(static_cast<double>(total_ - done_) / rate));
  } else if (done_ >= total_) {
    s += ", " + Clock(std::llround(Seconds()));
  }
  return s;
}

}  // namespace chronoq::admin
