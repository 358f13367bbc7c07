// FakeClock: a Clock that only moves when a test says so.
//
// Advance() and Set() move time and wake every thread blocked in WaitUntil()
// (the engine loop, worker pools), which then re-check their deadlines. No
// test ever sleeps to let time pass.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "chronoq/clock.h"

#include "support/eventually.h"

namespace chronoq::test {

// Thread-safe.
class FakeClock final : public Clock {
 public:
  // 2026-11-22T00:00:00Z: a fixed, realistic start.
  static constexpr Timestamp kStart = Timestamp(std::chrono::seconds(1'795'305'600));

  explicit FakeClock(Timestamp start = kStart) : now_(start) {}

  Timestamp Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }

  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 Timestamp deadline) override {
    uint64_t id;
    {
      std::lock_guard g(mu_);
      if (now_ >= deadline) return;
      id = next_id_++;
      waiters_.emplace(id, Waiter{lock.mutex(), &cv, deadline});
    }
    registered_.notify_all();
    cv.wait(lock);
    std::lock_guard g(mu_);
    waiters_.erase(id);
  }

  void Advance(Duration d) { Set(Now() + d); }

  // Blocks until some thread waits on this clock with exactly `deadline`: lets
  // a test know a claim or lease timer is armed before it moves time. Throws
  // GaveUp when none does within a minute.
  void AwaitWaiter(Timestamp deadline) {
    std::unique_lock g(mu_);
    WaitWithin(
        registered_, g,
        [&] {
          for (const auto& [id, w] : waiters_) {
            if (w.deadline == deadline) return true;
          }
          return false;
        },
        "a thread to wait on the fake clock until a given instant");
  }

  // The deadlines of the threads waiting now (kForever for "until notified").
  std::vector<Timestamp> Deadlines() const {
    std::lock_guard g(mu_);
    std::vector<Timestamp> out;
    for (const auto& [id, w] : waiters_) out.push_back(w.deadline);
    return out;
  }

  void Set(Timestamp t) {
    std::map<uint64_t, Waiter> waiters;
    {
      std::lock_guard g(mu_);
      now_ = t;
      waiters = waiters_;
    }
    // Taking each waiter's mutex before notifying means a waiter between its
    // deadline check and cv.wait() cannot miss the wake-up. The mutexes and
    // condition variables outlive the waits (Clock::WaitUntil's contract).
    for (auto& [id, w] : waiters) {
      std::lock_guard g(*w.mu);
      w.cv->notify_all();
    }
  }

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
    Timestamp deadline;
  };
  mutable std::mutex mu_;
  Timestamp now_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Waiter> waiters_;
  std::condition_variable registered_;
};

}  // namespace chronoq::test
