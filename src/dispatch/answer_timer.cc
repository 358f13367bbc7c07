#include "dispatch/answer_timer.h"

#include <pthread.h>

namespace chronoq {

AnswerTimer::~AnswerTimer() {
  std::thread thread;
  {
    MutexLock lock(mu_);
    hurry_ = exit_ = true;
    thread.swap(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

void AnswerTimer::Hurry() {
  {
    MutexLock lock(mu_);
    hurry_ = true;
  }
  cv_.notify_all();
}

void AnswerTimer::At(Timestamp at, std::function<void()> fn) {
  bool first = false;
  {
    MutexLock lock(mu_);
    first = due_.empty() || at < due_.begin()->first;
    due_.emplace(at, std::move(fn));
    if (!thread_.joinable()) {
      thread_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "chronoq-answer");
        Run();
      });
    }
  }
  // Only an earlier first instant changes what the thread waits for.
  if (first) cv_.notify_all();
}

void AnswerTimer::Run() {
  for (;;) {
    std::function<void()> fn;
    Duration rest = Duration::zero();  // hurried: what is left of fn's wait
    {
      MutexLock lock(mu_);
      for (;;) {
        if (due_.empty()) {
          if (exit_) return;
          clock_.WaitUntil(cv_, lock.std_lock(), kForever);
          continue;
        }
        const Timestamp at = due_.begin()->first;
        const Timestamp now = clock_.Now();
        if (now >= at) break;
        if (hurry_) {
          rest = at - now;
          break;
        }
        clock_.WaitUntil(cv_, lock.std_lock(), at);
      }
      fn = std::move(due_.begin()->second);
      due_.erase(due_.begin());
    }
    // Hurried, the rest of the wait passes in real time (see Hurry).
    if (rest > Duration::zero()) std::this_thread::sleep_for(rest);
    fn();
  }
}

}  // namespace chronoq
