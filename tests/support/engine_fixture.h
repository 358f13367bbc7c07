// EngineFixture: an Engine on a FakeClock over a fresh SQLite file.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace chronoq::test {

class EngineFixture : public ::testing::Test {
 protected:
  EngineOptions Options() {
    EngineOptions o;
    o.store = dir_.File("chronoq.db");
    o.clock = &clock_;
    o.random_seed = 42;
    return o;
  }
  void Open(EngineOptions o) {
    auto e = Engine::Open(std::move(o));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
  }
  void Open() { Open(Options()); }
  void SetUp() override { Open(); }

  // Enqueues a task on "q" due after `delay`; fails the test on error.
  Task Add(Duration delay = Duration::zero(), std::string id = "") {
    TaskSpec spec;
    spec.queue = "q";
    spec.delay = delay;
    spec.id = std::move(id);
    auto t = engine_->Enqueue(spec);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : Task{};
  }
  TaskState StateOf(const std::string& id) {
    auto t = engine_->Get(id);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->state : TaskState::kScheduled;
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace chronoq::test
