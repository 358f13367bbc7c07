#include "chronoq/clock.h"

namespace chronoq {
namespace {

class RealClock final : public Clock {
 public:
  Timestamp Now() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  }

  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 Timestamp deadline) override {
    if (deadline == kForever) {
      cv.wait(lock);
      return;
    }
    // Wait on the monotonic clock for the remaining span, so stepping the
    // wall clock does not stretch or shorten a wait already under way.
    const Duration left = deadline - Now();
    if (left <= Duration::zero()) return;
    cv.wait_until(lock, std::chrono::steady_clock::now() + left);
  }
};

}  // namespace

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

}  // namespace chronoq
