// Answer<T>: a callback for the Engine's asynchronous calls that fulfils a
// future, so a test can wait for the answer (or check it has not come yet)
// without sleeping.
//
//   test::Answer<Result<std::vector<Lease>>> claim;
//   engine->ClaimAsync("q", 1, 30s, 10s, claim.Callback());
//   EXPECT_FALSE(claim.ready());
//   ... make a task due ...
//   EXPECT_EQ(claim.Get()->size(), 1u);
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>

#include "support/eventually.h"

namespace chronoq::test {

template <typename T>
struct Answer {
  std::shared_ptr<std::promise<T>> promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();

  std::function<void(T)> Callback() {
    return [p = promise](T value) { p->set_value(std::move(value)); };
  }
  bool ready() const {
    return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  // The answer; GaveUp when none came within a minute.
  T Get() { return GetWithin(future, "the engine's answer"); }
};

}  // namespace chronoq::test
