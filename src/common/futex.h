// Futex: sleep until a 32-bit counter changes, without spinning first.
//
// std::atomic<T>::wait in libstdc++ spins with sched_yield before it sleeps;
// with many callers waiting on a 2-core machine those yields stole a third of
// the CPU the engine loop needed. These call the Linux futex directly.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace chronoq {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the futex word must be a plain 32-bit integer");

// Sleeps while `word` still holds `seen`; may return spuriously.
inline void FutexWait(std::atomic<uint32_t>& word, uint32_t seen) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr,
          0);
}

// Wakes every thread sleeping in FutexWait on `word`.
inline void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace chronoq
