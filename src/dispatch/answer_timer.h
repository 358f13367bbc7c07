// AnswerTimer: answers claims that were served ahead, each at its instant.
//
// A claim waiting for a task due within EngineOptions::claim_ahead takes it
// early, so that the commit recording its lease is done before the task is
// due, and is answered at the due time (core/core.cc, ServeParked). The
// engine loop cannot answer it then itself: it may be inside the next
// commit, which waits for the disk. This thread does, on the engine's clock.
//
// Thread-safe. The thread starts with the first At().
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "chronoq/clock.h"

#include "common/mutex.h"

namespace chronoq {

class AnswerTimer {
 public:
  // `clock` must outlive the timer.
  explicit AnswerTimer(Clock& clock) : clock_(clock) {}
  // Hurry(), then joins the thread once every callback ran.
  ~AnswerTimer();
  AnswerTimer(const AnswerTimer&) = delete;
  AnswerTimer& operator=(const AnswerTimer&) = delete;

  // Runs `fn` on the timer's thread once the clock reaches `at`; callbacks
  // run in instant order, those of one instant in the order given.
  void At(Timestamp at, std::function<void()> fn) CHRONOQ_EXCLUDES(mu_);
  // For a stop: from now on what is left of each wait passes in real time
  // (the same wait on the system clock; never before the instant there: a
  // worker must not see a task before it is due), so a clock that does not
  // move (a test's) holds a stop for no longer than claim_ahead.
  void Hurry() CHRONOQ_EXCLUDES(mu_);

 private:
  void Run() CHRONOQ_EXCLUDES(mu_);

  Clock& clock_;
  Mutex mu_;
  std::condition_variable cv_;
  std::multimap<Timestamp, std::function<void()>> due_ CHRONOQ_GUARDED_BY(mu_);
  bool hurry_ CHRONOQ_GUARDED_BY(mu_) = false;
  bool exit_ CHRONOQ_GUARDED_BY(mu_) = false;  // once nothing is queued
  std::thread thread_ CHRONOQ_GUARDED_BY(mu_);
};

}  // namespace chronoq
