// Mutex and MutexLock: std::mutex with the thread-safety annotations clang
// checks (-Wthread-safety), so that which lock guards what is written where
// the compiler can read it:
//
//   Mutex mu_;
//   std::vector<Op*> pending_ CHRONOQ_GUARDED_BY(mu_);
//
//   void Submit(Op* op) CHRONOQ_EXCLUDES(mu_) {
//     MutexLock lock(mu_);
//     pending_.push_back(op);
//   }
//
// libstdc++'s mutex carries no annotations; GCC ignores them (the macros are
// empty there), clang with -Wthread-safety reports a guarded member touched
// without its lock. A MutexLock is also what a condition variable waits
// with (std_lock()), so waits stay inside the analysis.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define CHRONOQ_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define CHRONOQ_THREAD_ANNOTATION_(x)
#endif

#define CHRONOQ_CAPABILITY(name) CHRONOQ_THREAD_ANNOTATION_(capability(name))
#define CHRONOQ_SCOPED_CAPABILITY CHRONOQ_THREAD_ANNOTATION_(scoped_lockable)
#define CHRONOQ_GUARDED_BY(mu) CHRONOQ_THREAD_ANNOTATION_(guarded_by(mu))
#define CHRONOQ_PT_GUARDED_BY(mu) CHRONOQ_THREAD_ANNOTATION_(pt_guarded_by(mu))
#define CHRONOQ_REQUIRES(...) CHRONOQ_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define CHRONOQ_EXCLUDES(...) CHRONOQ_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define CHRONOQ_ACQUIRE(...) CHRONOQ_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define CHRONOQ_RELEASE(...) CHRONOQ_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define CHRONOQ_NO_THREAD_SAFETY_ANALYSIS CHRONOQ_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace chronoq {

class CHRONOQ_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() CHRONOQ_ACQUIRE() { mu_.lock(); }
  void Unlock() CHRONOQ_RELEASE() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope. Thread-compatible: one thread uses it.
class CHRONOQ_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) CHRONOQ_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() CHRONOQ_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // For std::condition_variable::wait and Clock::WaitUntil, which release
  // the mutex while they wait and hold it again when they return.
  std::unique_lock<std::mutex>& std_lock() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace chronoq
