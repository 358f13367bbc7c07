// WorkerPool: in-process handlers for one queue.
//
// `concurrency` threads each claim up to `batch_size` tasks (waiting for them
// without polling), run the handler, and acknowledge the tasks that succeeded
// and fail the rest. A keeper thread extends the leases of tasks in flight
// every lease/3, so a long handler keeps its tasks while a crashed process
// loses them within one lease. With nothing in flight the keeper sleeps
// without a deadline: an idle pool makes no wake-ups.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chronoq/engine.h"

#include "common/mutex.h"

namespace chronoq {

class WorkerPool {
 public:
  // Claims for this pool; returns (possibly no tasks) once `stop` is set.
  using ClaimFn = std::function<Result<std::vector<Lease>>(const std::atomic<bool>& stop)>;

  // `engine` and `clock` must outlive the pool.
  WorkerPool(Engine& engine, Clock& clock, std::string queue, HandlerOptions options,
             BatchHandler handler, ClaimFn claim);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool();

  void Start();
  // Asks workers to stop after their current tasks. The caller must then make
  // the engine answer this pool's waiting claims (they see the stop flag).
  void RequestStop();
  // Waits for every thread. REQUIRES: RequestStop() was called.
  void Join();

  const std::atomic<bool>& stopping() const { return stopping_; }

 private:
  void Work();
  void KeepLeases();
  std::vector<Status> RunHandler(const std::vector<Lease>& leases);
  // Waits up to `d` on the clock unless stopping; for retrying after errors.
  void Pause(Duration d);

  Engine& engine_;
  Clock& clock_;
  const std::string queue_;
  const HandlerOptions options_;
  const BatchHandler handler_;
  const ClaimFn claim_;

  std::atomic<bool> stopping_{false};
  Mutex mu_;
  std::condition_variable cv_;
  // (id, token) of every lease a worker is running. Both parts are needed: one
  // Claim call's tasks share a token, and after a lapse two workers may each
  // hold a lease on the same task.
  std::set<std::pair<std::string, uint64_t>> in_flight_ CHRONOQ_GUARDED_BY(mu_);
  Timestamp next_extend_ CHRONOQ_GUARDED_BY(mu_) = kForever;
  std::vector<std::thread> workers_;
  std::thread keeper_;
};

}  // namespace chronoq
