// Bulk jobs (chronoq/bulk.h): one action on every task a filter matches,
// done in chunks so that the engine loop stays free for claims meanwhile.
//
// A job has a thread of its own, which walks the matching tasks in seq
// (creation) order on the store's reader connection, a chunk
// (EngineOptions::bulk_chunk tasks) at a time, and hands each chunk's seqs
// to the engine loop as one operation (Core::ApplyBulk). The loop reads each row
// again on the writer, checks that it still matches, and applies the action
// under the single-task call's state rule (ActionTakes): the listing only
// proposes, the loop decides. Between chunks the loop runs whatever else
// arrived, so a claim waits for at most one chunk of bulk work, never for the
// whole job; and while others use the loop, a job leaves it to them for a
// while after each chunk (kYieldFactor). The walk is by seq, not by due, so a rescheduled task
// never comes back in front of the cursor, and it stops at the largest seq handed out when the job
// started, so a job ends even while producers keep enqueueing.
//
// Jobs are kept in memory (the last kKeptJobs finished ones, and every
// running one); a restart ends a running job.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "chronoq/bulk.h"
#include "chronoq/clock.h"

#include "common/mutex.h"
#include "store/store.h"

namespace chronoq {

// What a chunk (or a whole job) did: tasks that matched, those changed, and
// those left alone by reason (BulkJob's counts).
struct BulkTally {
  int64_t matched = 0;
  int64_t applied = 0;
  std::map<std::string, int64_t> skipped;

  // Adds the counts to the job's.
  void AddTo(BulkJob& job) const;
  // Counts `row` (which matched): applied, or skipped for `reason`.
  void Count(const std::optional<std::string>& reason);
};

// Checks a request against `now`; InvalidArgument names the field as the
// HTTP API spells it ("filter.queue", "filter.run_at_to", "shift_ms", ...).
Status ValidateBulkRequest(const BulkRequest& request, Timestamp now);

// Whether the row (of the queue named `queue`) matches every condition of
// the filter.
bool BulkMatches(const BulkFilter& filter, const TaskRow& row, const std::string& queue);

// Why the action leaves a matching row alone (the state its single-task
// call refuses, or "run_at_out_of_range" for a shift past run_at's limits),
// or nullopt when it applies. For a reschedule, `run_at` gets the instant.
std::optional<std::string> BulkSkipReason(const BulkRequest& request, const TaskRow& row,
                                          Timestamp now, Timestamp* run_at = nullptr);

// The jobs of one engine. Thread-safe.
class BulkJobs {
 public:
  // Runs a chunk on the engine loop (Core::ApplyBulk) and returns once it
  // committed.
  using ApplyFn =
      std::function<Result<BulkTally>(const BulkRequest&, const std::vector<int64_t>& seqs)>;
  // The largest seq handed out so far (Core::last_seq, read on the loop).
  using LastSeqFn = std::function<Result<int64_t>()>;
  // How many ops the engine loop has run so far (any thread).
  using OpsRunFn = std::function<uint64_t()>;

  // While others use the loop, a job leaves it this many times as long as
  // its last chunk took before it sends the next: at most 1/(1 + k) of the
  // loop's time goes to bulk work then (docs/BENCHMARKS.md, "W2 during a
  // bulk reschedule"); alone, a job goes at full speed.
  static constexpr int kYieldFactor = 9;

  // Finished jobs kept for GetBulk/ListBulk.
  static constexpr size_t kKeptJobs = 100;

  // `store` (its readers) and `clock` must outlive *this; `chunk` is the
  // number of tasks read per page and applied per loop operation.
  BulkJobs(Store& store, Clock& clock, int chunk, ApplyFn apply, LastSeqFn last_seq,
           OpsRunFn ops_run);
  BulkJobs(const BulkJobs&) = delete;
  BulkJobs& operator=(const BulkJobs&) = delete;
  // Stop() if not stopped yet.
  ~BulkJobs();

  // A dry run walks now, on the caller's thread, and returns the counts the
  // job would have; otherwise starts a job and returns it. `query` holds the
  // filter's conditions the store can narrow to (queue, state, key, id
  // ranges); the rest is checked per row. REQUIRES: the request passed
  // ValidateBulkRequest. Unavailable once stopped.
  Result<BulkJob> Start(const BulkRequest& request, Store::ListQuery query);
  // NotFound naming "id" if there is no such job (any more).
  Result<BulkJob> Get(const std::string& id) const;
  // Newest first.
  std::vector<BulkJob> List() const;
  // Asks a running job to stop after its current chunk; returns the job as
  // it is now (still running until the chunk commits).
  Result<BulkJob> Cancel(const std::string& id);
  // Cancels every running job and waits for their threads (before the
  // engine loop stops).
  void Stop();

 private:
  struct Job {
    BulkJob job;  // guarded by BulkJobs::mu_
    std::atomic<bool> cancel{false};
    std::thread thread;
  };
  // Gets a chunk's rows that match the filter, in seq order, and the id of
  // the last row read (matching or not).
  using ChunkFn =
      std::function<Status(const std::vector<const TaskRow*>& rows, const std::string& last)>;
  // Walks the rows of `q` a chunk at a time until the last (true), an
  // error of `on_chunk`, or `*cancel` (false).
  Result<bool> Walk(Store::ListQuery q, const BulkRequest& request, const std::atomic<bool>* cancel,
                    const ChunkFn& on_chunk);
  // A job's thread.
  void Run(Job* job, const Store::ListQuery& query);
  // Drops the oldest finished jobs beyond kKeptJobs.
  void Trim() CHRONOQ_REQUIRES(mu_);

  Store& store_;
  Clock& clock_;
  const int chunk_;
  const ApplyFn apply_;
  const LastSeqFn last_seq_;
  const OpsRunFn ops_run_;

  mutable Mutex mu_;
  bool stopped_ CHRONOQ_GUARDED_BY(mu_) = false;
  uint64_t next_id_ CHRONOQ_GUARDED_BY(mu_) = 1;
  std::list<std::unique_ptr<Job>> jobs_ CHRONOQ_GUARDED_BY(mu_);  // newest first
};

}  // namespace chronoq
