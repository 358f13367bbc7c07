// Eventually(done, what): repeats `done` until it holds, for states another
// thread or process reaches asynchronously (a worker acknowledging, a
// webhook being delivered, a server coming back). The real-time bound only
// turns a hang into a failure that names what was awaited; it never decides
// a pass, and nothing here waits for time to pass.
//
//   ASSERT_TRUE(Eventually([&] { return Count() == 3; }, "three acknowledgements"));
#pragma once

#include <chrono>
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

}  // namespace chronoq::test
