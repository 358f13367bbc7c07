// In-process handlers (WorkerPool through the Engine) on a fake clock.
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "support/engine_fixture.h"
#include "support/eventually.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::EngineFixture;
using test::Eventually;

// Records what handlers saw; tests block on it instead of sleeping.
class Notebook {
 public:
  void Record(const Lease& l) {
    std::lock_guard lock(mu_);
    seen_.push_back(l);
    cv_.notify_all();
  }
  // Blocks until `n` leases were recorded; returns them.
  std::vector<Lease> WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    test::WaitWithin(
        cv_, lock, [&] { return seen_.size() >= n; }, "the handler to see the tasks");
    return seen_;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return seen_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Lease> seen_;
};

// A gate a handler blocks on until the test opens it.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock lock(mu_);
    test::WaitWithin(
        cv_, lock, [&] { return open_; }, "the test to open the gate");
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class WorkerPoolTest : public EngineFixture {
 protected:
  // Handlers capture book_ and gate_, so both must outlive the engine's
  // worker threads: the engine closes here, after the gate opens, while the
  // members still exist (a handler of a redelivered task may still be waking
  // from the gate when the test body ends).
  void TearDown() override {
    gate_.Open();
    engine_.reset();
  }

  // Waits until the task reached `state` (the pool acks asynchronously).
  void AwaitState(const std::string& id, TaskState state) {
    EXPECT_TRUE(Eventually([&] {
      engine_->Sync();
      return StateOf(id) == state;
    })) << id
        << " never reached " << TaskStateName(state);
  }

  // Moves the clock `steps` seconds, one at a time, and after each step waits
  // until the pool's lease keeper has extended every task of `ids` at least 2 s
  // past now, so the next step cannot outrun the keeper.
  void AdvanceWhileKeeperExtends(const std::vector<std::string>& ids, int steps) {
    for (int i = 0; i < steps; ++i) {
      clock_.Advance(std::chrono::seconds(1));
      ASSERT_TRUE(Eventually([&] {
        for (const std::string& id : ids) {
          auto task = engine_->Get(id);
          if (!task->lease_until || *task->lease_until < clock_.Now() + 2s) return false;
        }
        return true;
      })) << "the lease keeper fell behind at step "
          << i;
    }
  }

  Notebook book_;
  Gate gate_;
};

TEST_F(WorkerPoolTest, HandlerRunsTasksWhenDueAndAcks) {
  ASSERT_TRUE(engine_
                  ->RegisterHandler("q", {},
                                    [&](const Lease& l) {
                                      book_.Record(l);
                                      return Status();
                                    })
                  .ok());
  const Task t = Add(5s);
  engine_->Sync();
  EXPECT_EQ(book_.size(), 0u);
  clock_.Advance(5s);
  auto seen = book_.WaitFor(1);
  EXPECT_EQ(seen[0].id, t.id);
  EXPECT_EQ(seen[0].attempt, 1);
  AwaitState(t.id, TaskState::kSucceeded);
}

TEST_F(WorkerPoolTest, ErrorsAndExceptionsRetryWithTheirMessage) {
  ASSERT_TRUE(engine_
                  ->RegisterHandler("q", {},
                                    [&](const Lease& l) -> Status {
                                      book_.Record(l);
                                      if (l.attempt == 1)
                                        return Status(StatusCode::kUnavailable, "s3 said 503");
                                      if (l.attempt == 2) throw std::runtime_error("boom");
                                      return Status();
                                    })
                  .ok());
  const Task t = Add();
  book_.WaitFor(1);
  AwaitState(t.id, TaskState::kScheduled);
  EXPECT_EQ(engine_->Get(t.id)->last_error, "s3 said 503");
  clock_.Advance(1s);  // the first backoff is at most 1 s
  book_.WaitFor(2);
  AwaitState(t.id, TaskState::kScheduled);
  EXPECT_EQ(engine_->Get(t.id)->last_error, "exception: boom");
  clock_.Advance(2s);
  book_.WaitFor(3);
  AwaitState(t.id, TaskState::kSucceeded);
  EXPECT_EQ(engine_->Get(t.id)->attempt, 3);
}

TEST_F(WorkerPoolTest, LeaseIsExtendedWhileTheHandlerRuns) {
  ASSERT_TRUE(engine_
                  ->RegisterHandler("q", {.lease = 3s},
                                    [&](const Lease& l) {
                                      book_.Record(l);
                                      gate_.Pass();
                                      return Status();
                                    })
                  .ok());
  const Task t = Add();
  book_.WaitFor(1);
  // 30 s of handler time on a 3 s lease: the keeper extends every second.
  AdvanceWhileKeeperExtends({t.id}, 30);
  engine_->Sync();
  auto running = engine_->Get(t.id);
  EXPECT_EQ(running->state, TaskState::kRunning);
  EXPECT_EQ(running->attempt, 1);
  gate_.Open();
  AwaitState(t.id, TaskState::kSucceeded);
  EXPECT_EQ(book_.size(), 1u);  // never run twice
}

TEST_F(WorkerPoolTest, ARedeliveredTaskKeepsItsNewLeaseWhileTheOldRunStillRuns) {
  ASSERT_TRUE(engine_
                  ->RegisterHandler("q", {.concurrency = 2, .lease = 3s},
                                    [&](const Lease& l) {
                                      book_.Record(l);
                                      gate_.Pass();
                                      return Status();
                                    })
                  .ok());
  const Task t = Add();
  book_.WaitFor(1);
  // Time jumps past the lease before the keeper can extend it: the task is
  // redelivered to the pool's other worker while the first run still runs.
  clock_.Advance(10s);
  auto runs = book_.WaitFor(2);
  EXPECT_EQ(runs[1].attempt, 2);
  // The second run's lease must now be kept alive as well.
  AdvanceWhileKeeperExtends({t.id}, 6);
  engine_->Sync();
  auto running = engine_->Get(t.id);
  EXPECT_EQ(running->state, TaskState::kRunning);
  EXPECT_EQ(running->attempt, 2);
  gate_.Open();
  AwaitState(t.id, TaskState::kSucceeded);
  EXPECT_EQ(book_.size(), 2u);
}

TEST_F(WorkerPoolTest, EveryLeaseOfABatchIsExtendedWhileTheHandlerRuns) {
  std::vector<TaskSpec> specs(5, TaskSpec{.queue = "rows"});
  auto tasks = engine_->EnqueueBatch(specs);
  ASSERT_TRUE(tasks.ok());
  ASSERT_TRUE(engine_
                  ->RegisterBatchHandler("rows", {.lease = 3s, .batch_size = 5},
                                         [&](std::span<const Lease> leases) {
                                           for (const Lease& l : leases) book_.Record(l);
                                           gate_.Pass();
                                           return std::vector<Status>(leases.size());
                                         })
                  .ok());
  book_.WaitFor(5);
  // The five tasks share one claim (and token); each needs its own extension.
  std::vector<std::string> ids;
  for (const Task& t : *tasks) ids.push_back(t.id);
  AdvanceWhileKeeperExtends(ids, 10);
  engine_->Sync();
  for (const Task& t : *tasks) {
    auto running = engine_->Get(t.id);
    EXPECT_EQ(running->state, TaskState::kRunning) << t.id;
    EXPECT_EQ(running->attempt, 1) << t.id;
  }
  gate_.Open();
  for (const Task& t : *tasks) AwaitState(t.id, TaskState::kSucceeded);
  EXPECT_EQ(book_.size(), 5u);  // never run twice
}

TEST_F(WorkerPoolTest, BatchHandlerAcknowledgesOnlyWhatSucceeded) {
  std::vector<TaskSpec> specs(10, TaskSpec{.queue = "rows"});
  for (size_t i = 0; i < specs.size(); ++i) specs[i].payload = std::to_string(i);
  auto tasks = engine_->EnqueueBatch(specs);
  ASSERT_TRUE(tasks.ok());
  ASSERT_TRUE(engine_
                  ->RegisterBatchHandler("rows", {.batch_size = 10},
                                         [&](std::span<const Lease> leases) {
                                           std::vector<Status> out;
                                           for (const Lease& l : leases) {
                                             book_.Record(l);
                                             const bool even = std::stoi(l.payload) % 2 == 0;
                                             out.push_back(even ? Status()
                                                                : Status(StatusCode::kUnavailable,
                                                                         "delete failed"));
                                           }
                                           return out;
                                         })
                  .ok());
  book_.WaitFor(10);
  for (const Task& t : *tasks) {
    const bool even = std::stoi(t.payload) % 2 == 0;
    AwaitState(t.id, even ? TaskState::kSucceeded : TaskState::kScheduled);
    if (!even) {
      EXPECT_EQ(engine_->Get(t.id)->last_error, "delete failed");
    }
  }
}

TEST_F(WorkerPoolTest, OnePoolPerQueue) {
  auto noop = [](const Lease&) { return Status(); };
  ASSERT_TRUE(engine_->RegisterHandler("q", {}, noop).ok());
  EXPECT_EQ(engine_->RegisterHandler("q", {}, noop).code(), StatusCode::kAlreadyExists);
}

TEST_F(WorkerPoolTest, IdlePoolsStopPromptly) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine_
                    ->RegisterHandler("q" + std::to_string(i), {.concurrency = 4},
                                      [](const Lease&) { return Status(); })
                    .ok());
  }
  engine_->Sync();
  engine_.reset();  // must not hang on the workers' waiting claims
  SUCCEED();
}

}  // namespace
}  // namespace chronoq
