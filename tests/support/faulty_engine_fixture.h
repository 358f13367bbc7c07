// FaultyEngineFixture: a test fixture whose engine runs over a FaultyStore
// (on the fake clock), so a test can make the next commits or claims fail.
// Start() (re)opens the engine on the same store, like a restart.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "engine/store_url.h"
#include "support/engine_fixture.h"
#include "support/faulty_store.h"
#include "support/test_store.h"

namespace chronoq::test {

class FaultyEngineFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<TestStore> store = FreshStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    test_store_.emplace(std::move(*store));
    Start();
  }
  void Start() {
    engine_.reset();
    auto inner = OpenStoreUrl(test_store_->url());
    ASSERT_TRUE(inner.ok()) << inner.status().ToString();
    auto faulty = std::make_unique<FaultyStore>(std::move(*inner));
    store_ = faulty.get();
    EngineOptions o;
    o.clock = &clock_;
    o.random_seed = 7;
    auto engine = Engine::Open(o, std::move(faulty));
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
  }

  TempDir dir_;
  std::optional<TestStore> test_store_;  // FreshStore's; outlives engine_
  FakeClock clock_;
  FaultyStore* store_ = nullptr;  // owned by engine_
  std::unique_ptr<Engine> engine_;
};

}  // namespace chronoq::test
