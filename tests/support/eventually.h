// Eventually(done): repeats `done` until it holds, for states another thread
// reaches asynchronously (a worker acknowledging, a webhook being delivered).
// The real-time bound only turns a hang into a failure; it never decides a
// pass, and nothing here waits for time to pass.
#pragma once

#include <chrono>
#include <thread>

namespace chronoq::test {

template <typename Pred>
bool Eventually(Pred done, std::chrono::seconds give_up_after = std::chrono::seconds(60)) {
  const auto give_up = std::chrono::steady_clock::now() + give_up_after;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace chronoq::test
