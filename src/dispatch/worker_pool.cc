#include "dispatch/worker_pool.h"

#include <exception>

#include <spdlog/spdlog.h>

#include <pthread.h>

namespace chronoq {

WorkerPool::WorkerPool(Engine& engine, Clock& clock, std::string queue, HandlerOptions options,
                       BatchHandler handler, ClaimFn claim)
    : engine_(engine),
      clock_(clock),
      queue_(std::move(queue)),
      options_(options),
      handler_(std::move(handler)),
      claim_(std::move(claim)) {}

WorkerPool::~WorkerPool() {
  RequestStop();
  Join();
}

void WorkerPool::Start() {
  // Thread names show in top -H and profilers (15 characters at most).
  for (int i = 0; i < options_.concurrency; ++i) {
    workers_.emplace_back([this] {
      pthread_setname_np(pthread_self(), ("cq-w:" + queue_.substr(0, 10)).c_str());
      Work();
    });
  }
  keeper_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "chronoq-keeper");
    KeepLeases();
  });
}

void WorkerPool::RequestStop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void WorkerPool::Join() {
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  if (keeper_.joinable()) keeper_.join();
}

void WorkerPool::Pause(Duration d) {
  MutexLock lock(mu_);
  const Timestamp until = clock_.Now() + d;
  while (!stopping_ && clock_.Now() < until) clock_.WaitUntil(cv_, lock.std_lock(), until);
}

std::vector<Status> WorkerPool::RunHandler(const std::vector<Lease>& leases) {
  std::vector<Status> out;
  try {
    out = handler_(leases);
  } catch (const std::exception& e) {
    return std::vector<Status>(leases.size(),
                               Status(StatusCode::kAborted, std::string("exception: ") + e.what()));
  } catch (...) {
    return std::vector<Status>(leases.size(),
                               Status(StatusCode::kAborted, "exception of unknown type"));
  }
  if (out.size() != leases.size()) {
    return std::vector<Status>(
        leases.size(),
        Status::Internal("batch handler returned " + std::to_string(out.size()) + " results for " +
                         std::to_string(leases.size()) + " tasks"));
  }
  return out;
}

void WorkerPool::Work() {
  while (!stopping_) {
    Result<std::vector<Lease>> claimed = claim_(stopping_);
    if (!claimed.ok()) {
      spdlog::warn("queue {}: claim failed: {}", queue_, claimed.status().ToString());
      Pause(std::chrono::seconds(1));
      continue;
    }
    const std::vector<Lease>& leases = *claimed;
    if (leases.empty()) continue;
    {
      MutexLock lock(mu_);
      if (in_flight_.empty()) next_extend_ = clock_.Now() + options_.lease / 3;
      for (const Lease& l : leases) in_flight_.emplace(l.id, l.token);
    }
    cv_.notify_all();  // the keeper may be sleeping without a deadline

    const std::vector<Status> outcomes = RunHandler(leases);

    {
      MutexLock lock(mu_);
      for (const Lease& l : leases) in_flight_.erase({l.id, l.token});
    }
    // Successes and failures in one call (one commit), however many failed.
    std::vector<AckRequest> acks;
    acks.reserve(leases.size());
    for (size_t i = 0; i < leases.size(); ++i) {
      AckRequest& a = acks.emplace_back(AckRequest{leases[i].id, leases[i].token});
      if (!outcomes[i].ok()) {
        const std::string& error = outcomes[i].message();
        a.failure = AckFailure{error.empty() ? "failed" : error, std::nullopt};
      }
    }
    Result<std::vector<Status>> acked = engine_.AckMany(acks);
    if (!acked.ok()) {
      spdlog::warn("queue {}: ack failed: {}", queue_, acked.status().ToString());
      continue;
    }
    for (size_t i = 0; i < acks.size(); ++i) {
      if (!(*acked)[i].ok()) {
        spdlog::warn("queue {}: {} {}: {}", queue_, acks[i].failure ? "fail" : "ack", acks[i].id,
                     (*acked)[i].ToString());
      }
    }
  }
}

void WorkerPool::KeepLeases() {
  while (!stopping_) {
    std::vector<AckRequest> extend;
    {
      MutexLock lock(mu_);
      if (in_flight_.empty()) {
        clock_.WaitUntil(cv_, lock.std_lock(), kForever);
        continue;
      }
      if (clock_.Now() < next_extend_) {
        clock_.WaitUntil(cv_, lock.std_lock(), next_extend_);
        continue;
      }
      next_extend_ = clock_.Now() + options_.lease / 3;
      extend.reserve(in_flight_.size());
      for (const auto& [id, token] : in_flight_) extend.push_back({id, token});
    }
    // One commit for every task in flight, however large the batches; the
    // workers go on meanwhile.
    Result<std::vector<Status>> r = engine_.ExtendMany(extend, options_.lease);
    if (!r.ok()) {
      spdlog::warn("queue {}: extending leases: {}", queue_, r.status().ToString());
      continue;
    }
    for (size_t i = 0; i < extend.size(); ++i) {
      // The handler may have finished meanwhile; only a lost lease matters.
      if (!(*r)[i].ok()) {
        spdlog::debug("queue {}: extend {}: {}", queue_, extend[i].id, (*r)[i].ToString());
      }
    }
  }
}

}  // namespace chronoq
