// ManualClock: a Clock that only moves when told to.
//
// The fake clock of chronoq's own tests (tests/support/fake_clock.h) and of
// `chronoqd --test-clock`, which lets the clients' tests move the server's
// time over HTTP (POST /v1/test/clock) instead of sleeping. Advance() and
// Set() move time and wake every thread blocked in WaitUntil() (the engine
// loop, worker pools, samplers), which then re-check their deadlines.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "chronoq/clock.h"

namespace chronoq {

// Thread-safe.
class ManualClock : public Clock {
 public:
  // 2026-11-22T00:00:00Z: a fixed, realistic start.
  static constexpr Timestamp kStart = Timestamp(std::chrono::seconds(1'795'305'600));

  explicit ManualClock(Timestamp start = kStart) : now_(start) {}

  Timestamp Now() const override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 Timestamp deadline) override;

  void Advance(Duration d);
  void Set(Timestamp t);

  // The deadlines of the threads waiting now (kForever for "until notified").
  std::vector<Timestamp> Deadlines() const;

  // Blocks until some thread waits on this clock with exactly `deadline`, or
  // `within` of real time has passed; says which. Lets a test know a claim or
  // lease timer is armed before it moves time.
  bool WaitForWaiter(Timestamp deadline, std::chrono::steady_clock::duration within);

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
    Timestamp deadline;
  };
  static void Wake(const std::map<uint64_t, Waiter>& waiters);

  mutable std::mutex mu_;
  Timestamp now_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Waiter> waiters_;
  std::condition_variable registered_;
};

}  // namespace chronoq
