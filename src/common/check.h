// CHRONOQ_CHECK: invariants that cannot fail unless chronoq has a bug.
//
//   CHRONOQ_CHECK(it != keys_.end(), "a queued head belongs to a loaded key");
//
// A failed check prints the condition, the message and where it is, then
// aborts. That is safe because the store is the truth: a restart recovers
// from the last commit, and leases that were handed out simply lapse.
// CHRONOQ_CHECK is always on; CHRONOQ_DCHECK only in debug builds (for
// checks too costly for the hot path). Never use either on input from
// clients, the store or the network: those get a Status.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace chronoq::internal {

[[noreturn]] inline void CheckFailed(const char* condition, const char* message, const char* file,
                                     int line) {
  std::fprintf(stderr, "%s:%d: CHRONOQ_CHECK(%s) failed: %s\n", file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace chronoq::internal

#define CHRONOQ_CHECK(condition, message)                                        \
  do {                                                                           \
    if (!(condition)) [[unlikely]] {                                             \
      ::chronoq::internal::CheckFailed(#condition, message, __FILE__, __LINE__); \
    }                                                                            \
  } while (false)

#ifdef NDEBUG
#define CHRONOQ_DCHECK(condition, message) \
  do {                                     \
  } while (false && (condition))
#else
#define CHRONOQ_DCHECK(condition, message) CHRONOQ_CHECK(condition, message)
#endif
