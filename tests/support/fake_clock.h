// FakeClock: the tests' clock, which only moves when a test says so
// (common/manual_clock.h). No test ever sleeps to let time pass.
#pragma once

#include "common/manual_clock.h"
#include "support/eventually.h"

namespace chronoq::test {

// Thread-safe.
class FakeClock final : public ManualClock {
 public:
  using ManualClock::ManualClock;

  // Blocks until some thread waits on this clock with exactly `deadline`: lets
  // a test know a claim or lease timer is armed before it moves time. Throws
  // GaveUp when none does within a minute.
  void AwaitWaiter(Timestamp deadline) {
    if (!WaitForWaiter(deadline, kGiveUpAfter)) {
      throw GaveUp("a thread to wait on the fake clock until a given instant", kGiveUpAfter);
    }
  }
};

}  // namespace chronoq::test
