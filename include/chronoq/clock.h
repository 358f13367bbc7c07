// chronoq/clock.h: the one place chronoq learns what time it is.
//
// Everything time-dependent in chronoq (due tasks, leases, backoff, retention)
// reads a Clock, so tests can run on a fake clock that only moves when told to
// (tests/support/fake_clock.h) and never sleep.
//
// Times are UTC instants with microsecond resolution. Time zones exist only at
// the edges (parsing and display).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

using Duration = std::chrono::microseconds;
using Timestamp = std::chrono::sys_time<Duration>;

// A Timestamp far enough in the future to mean "never".
inline constexpr Timestamp kForever = Timestamp::max();

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;

  // The current UTC instant.
  virtual Timestamp Now() const = 0;

  // Blocks on `cv` until it is notified or until Now() >= `deadline`, then
  // returns with `lock` held again. May return early (spuriously): callers
  // re-check their condition in a loop. `deadline == kForever` waits for a
  // notification only.
  // REQUIRES: `lock` holds the mutex every notifier of `cv` holds while changing
  // the waited-for state; `cv` and that mutex outlive the wait.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         Timestamp deadline) = 0;
};

// The real clock: std::chrono::system_clock for instants; waits use the
// monotonic clock, so a wall-clock step does not stretch a wait.
Clock& SystemClock();

}  // namespace chronoq
#pragma GCC visibility pop
