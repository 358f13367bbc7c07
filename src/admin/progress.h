// Progress: how far a long copy got, on stderr.
//
// On a terminal, one line redrawn in place (at most every 100 ms): a bar,
// the rows done of the total, the rate and the time left. Elsewhere (a log,
// a pipe), one line each time another ~10% is done, so a log of a copy of a
// billion rows still has ten lines.
//
//   Progress progress(std::cerr, isatty(STDERR_FILENO) == 1);
//   progress.Start(1'000'000);
//   progress.Advance(10'000);  // after each batch
//   progress.Finish();
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace chronoq::admin {

// Not thread-safe.
class Progress {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // `out` must outlive *this; `now` reads the time (tests give a fake one).
  Progress(
      std::ostream& out, bool terminal,
      std::function<TimePoint()> now = [] { return std::chrono::steady_clock::now(); });

  void Start(int64_t total);
  // `rows` more are done.
  void Advance(int64_t rows);
  // Draws the last state (on a terminal, then ends the line).
  void Finish();

  int64_t done() const { return done_; }
  // Rows per second since Start (0 before any time passed).
  double Rate() const;
  double Seconds() const;

 private:
  void Draw();
  // "42%", "1,234/5,678 rows", "61,234 rows/s", "ETA 1:05".
  std::string Describe() const;

  std::ostream& out_;
  const bool terminal_;
  const std::function<TimePoint()> now_;
  int64_t total_ = 0;
  int64_t done_ = 0;
  TimePoint start_;
  TimePoint drawn_at_;
  int next_tenth_ = 1;  // lines mode: the next 10% step to report
  bool finished_ = false;
};

// 1234567 -> "1,234,567".
std::string WithCommas(int64_t n);
// Seconds as "0:07", "12:34", "1:02:03".
std::string Clock(int64_t seconds);

}  // namespace chronoq::admin
