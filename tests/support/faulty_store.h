// FaultyStore: a Store that passes everything to a real one, except the
// commits (or claim statements) it is told to fail. A failed commit rolls the real transaction
// back, as a failed fsync or a full disk would, so tests can check that the engine answers every
// request of that commit with the error, forgets what memory learnt from it, and carries on.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

#include "store/store.h"

namespace chronoq::test {

// Thread-safe as far as the wrapped store is; the failure counter is atomic.
class FaultyStore final : public Store {
 public:
  explicit FaultyStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

  // The next `n` commits fail with Unavailable.
  void FailNextCommits(int n) { fail_commits_ = n; }
  // The next `n` transactions fail to begin with Unavailable, as when the
  // store's server cannot be reached.
  void FailNextBegins(int n) { fail_begins_ = n; }
  // The next `n` claim statements fail with Unavailable (the transaction
  // itself goes on and commits).
  void FailNextClaims(int n) { fail_claims_ = n; }
  int failed_commits() const { return failed_; }
  // While set, the reads of single tasks (ReadBySeq, ReadByName) fail with
  // Unavailable, as when the store's server cannot be reached.
  void FailReads(bool fail) { fail_reads_ = fail; }

  Status Commit() override {
    if (fail_commits_.load() > 0) {
      --fail_commits_;
      ++failed_;
      inner_->Rollback();
      return Status::Unavailable("injected commit failure");
    }
    return inner_->Commit();
  }

  Result<StoreMeta> LoadMeta() override { return inner_->LoadMeta(); }
  Status Begin() override {
    if (fail_begins_.load() > 0) {
      --fail_begins_;
      return Status::Unavailable("injected begin failure");
    }
    return inner_->Begin();
  }
  void Rollback() override { inner_->Rollback(); }
  Status Savepoint() override { return inner_->Savepoint(); }
  Status ReleaseSavepoint() override { return inner_->ReleaseSavepoint(); }
  void RollbackToSavepoint() override { inner_->RollbackToSavepoint(); }
  Result<int64_t> QueueId(const std::string& name) override { return inner_->QueueId(name); }
  Result<std::vector<QueueRow>> Queues() override { return inner_->Queues(); }
  Status SaveQueueSettings(int64_t qid, const QueueSettings& settings, bool paused,
                           bool webhooks) override {
    return inner_->SaveQueueSettings(qid, settings, paused, webhooks);
  }
  Status SaveQueueCounts(int64_t qid, const std::array<int64_t, 5>& counts) override {
    return inner_->SaveQueueCounts(qid, counts);
  }
  Result<std::optional<int64_t>> InsertSchedule(const ScheduleRow& row) override {
    return inner_->InsertSchedule(row);
  }
  Status SaveSchedule(const ScheduleRow& row) override { return inner_->SaveSchedule(row); }
  Status DeleteSchedule(int64_t sid) override { return inner_->DeleteSchedule(sid); }
  Result<std::optional<ScheduleRow>> FindSchedule(int64_t sid) override {
    return inner_->FindSchedule(sid);
  }
  Result<std::optional<ScheduleRow>> FindScheduleByName(const std::string& name) override {
    return inner_->FindScheduleByName(name);
  }
  Result<std::vector<ScheduleRow>> SchedulesDueBefore(Timestamp before, int64_t after_sid,
                                                      int limit) override {
    return inner_->SchedulesDueBefore(before, after_sid, limit);
  }
  Result<std::vector<ScheduleRow>> ListSchedules(std::optional<int64_t> qid,
                                                 const std::string& after_name,
                                                 int limit) override {
    return inner_->ListSchedules(qid, after_name, limit);
  }
  Status SaveLock(const LockRow& row) override { return inner_->SaveLock(row); }
  Status DeleteLock(const std::string& key) override { return inner_->DeleteLock(key); }
  Result<std::vector<LockRow>> LoadLocks() override { return inner_->LoadLocks(); }
  Result<std::vector<DueEntry>> KeyHeads(int64_t qid, const std::string& key,
                                         const std::optional<KeyPosition>& after,
                                         int limit) override {
    return inner_->KeyHeads(qid, key, after, limit);
  }
  Result<std::vector<std::vector<DueEntry>>> KeyHeadsOf(
      const std::vector<KeyRead>& reads) override {
    return inner_->KeyHeadsOf(reads);
  }
  Result<int64_t> CountKeyPending(int64_t qid, const std::string& key,
                                  const std::optional<KeyPosition>& after) override {
    return inner_->CountKeyPending(qid, key, after);
  }
  Status SaveKeyCursor(int64_t qid, const std::string& key, const KeyPosition& at) override {
    return inner_->SaveKeyCursor(qid, key, at);
  }
  Result<std::vector<std::pair<int64_t, std::string>>> LoadKeyRetries() override {
    return inner_->LoadKeyRetries();
  }
  Result<bool> Insert(const TaskRow& row) override { return inner_->Insert(row); }
  Status Overwrite(const TaskRow& row) override { return inner_->Overwrite(row); }
  Status Delete(int64_t seq) override { return inner_->Delete(seq); }
  Result<std::optional<TaskRow>> FindBySeq(int64_t seq) override { return inner_->FindBySeq(seq); }
  Result<std::optional<TaskRow>> FindByName(const std::string& name) override {
    return inner_->FindByName(name);
  }
  Result<std::vector<TaskRow>> MarkRunningMany(const std::vector<int64_t>& seqs,
                                               Timestamp lease_until, uint64_t token, Timestamp now,
                                               const std::string& worker,
                                               const std::string& node) override {
    if (fail_claims_.load() > 0) {
      --fail_claims_;
      return Status::Unavailable("injected claim failure");
    }
    return inner_->MarkRunningMany(seqs, lease_until, token, now, worker, node);
  }
  Status Move(const Transition& t) override { return inner_->Move(t); }
  Status MarkSucceeded(const std::vector<int64_t>& seqs, Timestamp purge_at,
                       Timestamp now) override {
    return inner_->MarkSucceeded(seqs, purge_at, now);
  }
  Status SetDue(int64_t seq, Timestamp due, Timestamp now) override {
    return inner_->SetDue(seq, due, now);
  }
  Status SetResponse(int64_t seq, const std::optional<std::string>& response) override {
    return inner_->SetResponse(seq, response);
  }
  Status SetPayload(int64_t seq, const std::string& payload) override {
    return inner_->SetPayload(seq, payload);
  }
  Status SaveNextToken(uint64_t next_token) override { return inner_->SaveNextToken(next_token); }
  Result<std::vector<DueEntry>> LoadScheduled(int64_t from_bucket, int64_t after_seq,
                                              int64_t to_bucket, int limit) override {
    return inner_->LoadScheduled(from_bucket, after_seq, to_bucket, limit);
  }
  Result<std::optional<int64_t>> NextScheduledBucket(int64_t from_bucket) override {
    return inner_->NextScheduledBucket(from_bucket);
  }
  Result<std::vector<TaskRow>> LoadRunning() override { return inner_->LoadRunning(); }
  Result<Purged> PurgeFinished(Timestamp before, int limit) override {
    return inner_->PurgeFinished(before, limit);
  }
  Result<std::optional<Timestamp>> NextPurgeDue() override { return inner_->NextPurgeDue(); }
  Result<std::optional<ReadRow>> ReadBySeq(int64_t seq) override {
    if (fail_reads_.load()) return Status::Unavailable("injected read failure");
    return inner_->ReadBySeq(seq);
  }
  Result<std::optional<ReadRow>> ReadByName(const std::string& name) override {
    if (fail_reads_.load()) return Status::Unavailable("injected read failure");
    return inner_->ReadByName(name);
  }
  Result<std::vector<ReadRow>> List(const ListQuery& q) override { return inner_->List(q); }
  Result<std::vector<KeyBacklog>> KeyBacklogs(const std::string& queue, int limit) override {
    return inner_->KeyBacklogs(queue, limit);
  }
  Result<RowCounts> CountRows() override { return inner_->CountRows(); }
  Result<CopyMeta> ExportMeta() override { return inner_->ExportMeta(); }
  Status ImportMeta(const CopyMeta& meta) override { return inner_->ImportMeta(meta); }
  Result<std::vector<StoredTask>> ExportTasks(int64_t after_seq, int limit) override {
    return inner_->ExportTasks(after_seq, limit);
  }
  Status ImportTasks(const std::vector<StoredTask>& rows) override {
    return inner_->ImportTasks(rows);
  }
  Status ImportQueues(const std::vector<QueueRow>& queues) override {
    return inner_->ImportQueues(queues);
  }
  Status ImportSchedules(const std::vector<ScheduleRow>& rows) override {
    return inner_->ImportSchedules(rows);
  }
  Result<std::vector<KeyCursorRow>> ExportKeyCursors(int64_t after_qid,
                                                     const std::string& after_key,
                                                     int limit) override {
    return inner_->ExportKeyCursors(after_qid, after_key, limit);
  }
  Status ImportKeyCursors(const std::vector<KeyCursorRow>& rows) override {
    return inner_->ImportKeyCursors(rows);
  }

 private:
  std::unique_ptr<Store> inner_;
  std::atomic<int> fail_commits_{0};
  std::atomic<int> fail_begins_{0};
  std::atomic<int> fail_claims_{0};
  std::atomic<int> failed_{0};
  std::atomic<bool> fail_reads_{false};
};

}  // namespace chronoq::test
