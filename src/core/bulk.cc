#include "core/bulk.h"

#include <chrono>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/task_id.h"
#include "core/core.h"
#include "core/validate.h"
#include <pthread.h>

namespace chronoq {
namespace {

constexpr std::string_view kOutOfRange = "run_at_out_of_range";

std::string TaskIdOf(const TaskRow& row) { return row.name.value_or(FormatGeneratedId(row.seq)); }

}  // namespace

void BulkTally::AddTo(BulkJob& job) const {
  job.matched += matched;
  job.applied += applied;
  for (const auto& [reason, n] : skipped) job.skipped[reason] += n;
}

void BulkTally::Count(const std::optional<std::string>& reason) {
  ++matched;
  if (reason) {
    ++skipped[*reason];
  } else {
    ++applied;
  }
}

bool BulkMatches(const BulkFilter& f, const TaskRow& row, const std::string& queue) {
  if (f.queue && *f.queue != queue) return false;
  if (f.state && *f.state != row.state) return false;
  if (f.key && row.key != f.key) return false;
  if (!f.id_prefix.empty() && !TaskIdOf(row).starts_with(f.id_prefix)) return false;
  if (f.run_at_from || f.run_at_to) {
    const Timestamp run_at = RunAtOf(row);
    if (f.run_at_from && run_at < *f.run_at_from) return false;
    if (f.run_at_to && run_at >= *f.run_at_to) return false;
  }
  return true;
}

std::optional<std::string> BulkSkipReason(const BulkRequest& request, const TaskRow& row,
                                          Timestamp now, Timestamp* run_at) {
  if (!ActionTakes(request.action, row.state)) return std::string(TaskStateName(row.state));
  if (request.action != BulkAction::kReschedule) return std::nullopt;
  // A scheduled row's due is its run_at. Both terms are within 100 years of
  // now (validated), so the sum cannot overflow.
  const Timestamp to =
      request.run_at ? *request.run_at : row.due.value_or(Timestamp()) + *request.shift;
  if (!ValidateDue(to, now).ok()) return std::string(kOutOfRange);
  if (run_at != nullptr) *run_at = to;
  return std::nullopt;
}

// --- on the loop -------------------------------------------------------------

Result<BulkTally> Core::ApplyBulk(const BulkRequest& request, const std::vector<int64_t>& seqs) {
  const Timestamp now = clock_.Now();
  BulkTally tally;
  for (int64_t seq : seqs) {
    // The listing came from the reader, before this transaction: the row
    // may have changed (or gone) since. Only what matches now counts.
    CHRONOQ_ASSIGN_OR_RETURN(std::optional<TaskRow> row, store_.FindBySeq(seq));
    if (!row || !BulkMatches(request.filter, *row, QueueName(row->qid))) continue;
    Timestamp run_at;
    const std::optional<std::string> reason = BulkSkipReason(request, *row, now, &run_at);
    tally.Count(reason);
    if (reason) continue;
    switch (request.action) {
      case BulkAction::kCancel:
        CHRONOQ_RETURN_IF_ERROR(CancelRow(*row, now));
        break;
      case BulkAction::kReschedule:
        CHRONOQ_RETURN_IF_ERROR(RescheduleRow(*row, run_at, std::nullopt, now));
        break;
      case BulkAction::kRetry:
        CHRONOQ_RETURN_IF_ERROR(RetryRow(*row, now));
        break;
      case BulkAction::kDelete:
        CHRONOQ_RETURN_IF_ERROR(PurgeRow(*row));
        break;
    }
  }
  return tally;
}

// --- the jobs ----------------------------------------------------------------

BulkJobs::BulkJobs(Store& store, Clock& clock, int chunk, ApplyFn apply, LastSeqFn last_seq,
                   OpsRunFn ops_run)
    : store_(store),
      clock_(clock),
      chunk_(chunk),
      apply_(std::move(apply)),
      last_seq_(std::move(last_seq)),
      ops_run_(std::move(ops_run)) {}

BulkJobs::~BulkJobs() { Stop(); }

Result<bool> BulkJobs::Walk(Store::ListQuery q, const BulkRequest& request,
                            const std::atomic<bool>* cancel, const ChunkFn& on_chunk) {
  q.by_seq = true;
  q.limit = chunk_;
  for (;;) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return false;
    CHRONOQ_ASSIGN_OR_RETURN(std::vector<Store::ReadRow> rows, store_.List(q));
    if (rows.empty()) return true;
    std::vector<const TaskRow*> matching;
    for (const Store::ReadRow& r : rows) {
      if (BulkMatches(request.filter, r.row, r.queue)) matching.push_back(&r.row);
    }
    CHRONOQ_RETURN_IF_ERROR(on_chunk(matching, TaskIdOf(rows.back().row)));
    if (static_cast<int>(rows.size()) < q.limit) return true;
    q.after_seq = rows.back().row.seq;
  }
}

Result<BulkJob> BulkJobs::Start(const BulkRequest& request, Store::ListQuery query) {
  {
    MutexLock lock(mu_);
    if (stopped_) return Status::Unavailable("the engine is stopping");
  }
  // The tasks that exist now: a job that also took the tasks enqueued while
  // it runs might never end.
  CHRONOQ_ASSIGN_OR_RETURN(const int64_t last_seq, last_seq_());
  query.max_seq = std::min(query.max_seq, last_seq);
  BulkJob job;
  job.request = request;
  job.started = clock_.Now();
  if (request.dry_run) {
    BulkTally tally;
    CHRONOQ_RETURN_IF_ERROR(
        Walk(query, request, nullptr,
             [&](const std::vector<const TaskRow*>& rows, const std::string& last) -> Status {
               const Timestamp now = clock_.Now();
               for (const TaskRow* row : rows) tally.Count(BulkSkipReason(request, *row, now));
               job.cursor = last;
               return {};
             })
            .status());
    tally.AddTo(job);
    job.state = BulkJobState::kDone;
    job.finished = clock_.Now();
    return job;
  }
  MutexLock lock(mu_);
  if (stopped_) return Status::Unavailable("the engine is stopping");
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(job.started.time_since_epoch()).count();
  job.id = "bulk-" + std::to_string(ms) + "-" + std::to_string(next_id_++);
  auto owned = std::make_unique<Job>();
  Job* j = owned.get();
  j->job = job;
  jobs_.push_front(std::move(owned));
  j->thread = std::thread([this, j, query = std::move(query)] {
    pthread_setname_np(pthread_self(), "chronoq-bulk");
    Run(j, query);
  });
  Trim();
  return job;
}

void BulkJobs::Run(Job* job, const Store::ListQuery& query) {
  BulkRequest request;
  {
    MutexLock lock(mu_);
    request = job->job.request;
  }
  Result<bool> ended = Walk(
      query, request, &job->cancel,
      [&](const std::vector<const TaskRow*>& rows, const std::string& last) -> Status {
        BulkTally tally;
        if (!rows.empty()) {
          std::vector<int64_t> seqs;
          seqs.reserve(rows.size());
          for (const TaskRow* row : rows) seqs.push_back(row->seq);
          const uint64_t ops_before = ops_run_();
          const auto t0 = std::chrono::steady_clock::now();
          CHRONOQ_ASSIGN_OR_RETURN(tally, apply_(request, seqs));
          // Other ops ran beside the chunk: claims are waiting on the loop.
          // Pacing is a monotonic interval, not an instant of the engine's clock.
          if (ops_run_() - ops_before > 1) {
            std::this_thread::sleep_for((std::chrono::steady_clock::now() - t0) * kYieldFactor);
          }
        }
        MutexLock lock(mu_);
        tally.AddTo(job->job);
        job->job.cursor = last;
        return {};
      });
  MutexLock lock(mu_);
  BulkJob& j = job->job;
  j.finished = clock_.Now();
  if (!ended.ok()) {
    j.state = BulkJobState::kFailed;
    j.error = ended.status().ToString();
    spdlog::warn("bulk job {} failed after {} tasks (cursor {}): {}", j.id, j.matched,
                 j.cursor.empty() ? "none" : j.cursor, j.error);
  } else {
    // A cancel that came after the last chunk changed nothing: done.
    j.state = *ended ? BulkJobState::kDone : BulkJobState::kCancelled;
  }
}

Result<BulkJob> BulkJobs::Get(const std::string& id) const {
  MutexLock lock(mu_);
  for (const std::unique_ptr<Job>& j : jobs_) {
    if (j->job.id == id) return j->job;
  }
  return Status(StatusCode::kNotFound, "bulk job " + id + " does not exist", "id");
}

std::vector<BulkJob> BulkJobs::List() const {
  MutexLock lock(mu_);
  std::vector<BulkJob> out;
  out.reserve(jobs_.size());
  for (const std::unique_ptr<Job>& j : jobs_) out.push_back(j->job);
  return out;
}

Result<BulkJob> BulkJobs::Cancel(const std::string& id) {
  MutexLock lock(mu_);
  for (const std::unique_ptr<Job>& j : jobs_) {
    if (j->job.id != id) continue;
    if (j->job.state == BulkJobState::kRunning) j->cancel.store(true, std::memory_order_relaxed);
    return j->job;
  }
  return Status(StatusCode::kNotFound, "bulk job " + id + " does not exist", "id");
}

void BulkJobs::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    stopped_ = true;
    for (const std::unique_ptr<Job>& j : jobs_) {
      j->cancel.store(true, std::memory_order_relaxed);
      if (j->thread.joinable()) threads.push_back(std::move(j->thread));
    }
  }
  for (std::thread& t : threads) t.join();
}

void BulkJobs::Trim() {
  size_t finished = 0;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if ((*it)->job.state == BulkJobState::kRunning || ++finished <= kKeptJobs) {
      ++it;
      continue;
    }
    // Its thread has set the final state and only returns from here on.
    if ((*it)->thread.joinable()) (*it)->thread.join();
    it = jobs_.erase(it);
  }
}

}  // namespace chronoq
