// Eventually(done, what): repeats `done` until it holds, for states another
// thread or process reaches asynchronously (a worker acknowledging, a
// webhook being delivered, a server coming back). The real-time bound only
// turns a hang into a failure that names what was awaited; it never decides
// a pass, and nothing here waits for time to pass.
//
//   ASSERT_TRUE(Eventually([&] { return Count() == 3; }, "three acknowledgements"));
#pragma once

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

namespace chronoq::test {

// How long a test waits for anything before it fails: generous, since a
// 2-core machine running ASan and other tests can be slow, yet well under
// ctest's per-test timeout so that the failure names its cause.
inline constexpr std::chrono::seconds kGiveUpAfter{60};

template <typename Pred>
::testing::AssertionResult Eventually(Pred done, std::string_view what = "the condition",
                                      std::chrono::seconds give_up_after = kGiveUpAfter) {
  const auto give_up = std::chrono::steady_clock::now() + give_up_after;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) {
      return ::testing::AssertionFailure()
             << "gave up waiting for " << what << " after " << give_up_after.count() << " s";
    }
    // Polling, not waiting for time: a yield loop would take a core from the
    // threads (or the server) that must make `done` true.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return ::testing::AssertionSuccess();
}

// Thrown by the waits below when they give up. A test that lets it escape
// fails, and gtest prints the message ("C++ exception with description ...").
class GaveUp : public std::runtime_error {
 public:
  GaveUp(std::string_view what, std::chrono::seconds after)
      : std::runtime_error("gave up waiting for " + std::string(what) + " after " +
                           std::to_string(after.count()) + " s") {}
};

// future.get(), giving up (GaveUp) when no value came within `give_up_after`.
template <typename T>
T GetWithin(std::future<T>& future, std::string_view what,
            std::chrono::seconds give_up_after = kGiveUpAfter) {
  if (future.wait_for(give_up_after) != std::future_status::ready) {
    throw GaveUp(what, give_up_after);
  }
  return future.get();
}
template <typename T>
T GetWithin(std::future<T>&& future, std::string_view what,
            std::chrono::seconds give_up_after = kGiveUpAfter) {
  return GetWithin(future, what, give_up_after);
}

// cv.wait(lock, done), giving up (GaveUp) after `give_up_after`.
template <typename Pred>
void WaitWithin(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Pred done,
                std::string_view what, std::chrono::seconds give_up_after = kGiveUpAfter) {
  if (!cv.wait_for(lock, give_up_after, done)) throw GaveUp(what, give_up_after);
}

}  // namespace chronoq::test
