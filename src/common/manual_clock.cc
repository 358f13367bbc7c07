#include "common/manual_clock.h"

namespace chronoq {

Timestamp ManualClock::Now() const {
  std::lock_guard lock(mu_);
  return now_;
}

void ManualClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                            Timestamp deadline) {
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

void ManualClock::Advance(Duration d) {
  std::map<uint64_t, Waiter> waiters;
  {
    std::lock_guard g(mu_);
    now_ += d;
    waiters = waiters_;
  }
  Wake(waiters);
}

void ManualClock::Set(Timestamp t) {
  std::map<uint64_t, Waiter> waiters;
  {
    std::lock_guard g(mu_);
    now_ = t;
    waiters = waiters_;
  }
  Wake(waiters);
}

void ManualClock::Wake(const std::map<uint64_t, Waiter>& waiters) {
  // Taking each waiter's mutex before notifying means a waiter between its
  // deadline check and cv.wait() cannot miss the wake-up. The mutexes and
  // condition variables outlive the waits (Clock::WaitUntil's contract).
  for (const auto& [id, w] : waiters) {
    std::lock_guard g(*w.mu);
    w.cv->notify_all();
  }
}

std::vector<Timestamp> ManualClock::Deadlines() const {
  std::lock_guard g(mu_);
  std::vector<Timestamp> out;
  for (const auto& [id, w] : waiters_) out.push_back(w.deadline);
  return out;
}

bool ManualClock::WaitForWaiter(Timestamp deadline, std::chrono::steady_clock::duration within) {
  std::unique_lock g(mu_);
  return registered_.wait_for(g, within, [&] {
    for (const auto& [id, w] : waiters_) {
      if (w.deadline == deadline) return true;
    }
    return false;
  });
}

}  // namespace chronoq
