#include "admin/copy.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace chronoq::admin {
namespace {

constexpr const char* kStateNames[] = {"scheduled", "running", "succeeded", "cancelled", "dead"};

std::string Plural(int64_t n, const std::string& one, const std::string& many) {
  return WithCommas(n) + " " + (n == 1 ? one : many);
}

// Runs `write` in a transaction of its own on `to`; rolls back on an error.
template <typename F>
Status InTransaction(Store& to, F write) {
  CHRONOQ_RETURN_IF_ERROR(to.Begin());
  Status s = write();
  if (s.ok()) s = to.Commit();
  if (!s.ok()) to.Rollback();
  return s;
}

class Copier {
 public:
  Copier(Store& from, Store& to, const CopyOptions& options, Progress& progress)
      : from_(from), to_(to), options_(options), progress_(progress) {}

  Result<CopyReport> Run() {
    CHRONOQ_ASSIGN_OR_RETURN(report_.source, from_.CountRows());
    CHRONOQ_ASSIGN_OR_RETURN(const Store::RowCounts target, to_.CountRows());
    if (!target.empty()) {
      return Status::FailedPrecondition(
          "the target is not empty: it holds " + DescribeRows(target) +
          "; a copy goes only into an empty store, and nothing was written" +
          (options_.empty_target_hint.empty()
               ? ""
               : " (to empty it: " + options_.empty_target_hint + ")"));
    }
    if (report_.source.empty()) {
      return Status::FailedPrecondition("the source holds nothing to copy");
    }
    CHRONOQ_ASSIGN_OR_RETURN(report_.source_meta, from_.ExportMeta());
    const Store::RowCounts& s = report_.source;
    progress_.Start(s.total_tasks() + s.queues + s.schedules + s.locks + s.key_cursors);
    Status copied = CopyAll();
    if (!copied.ok()) {
      return Status(copied.code(),
                    "the copy stopped after " + WithCommas(report_.rows) +
                        " rows: " + copied.message() +
                        ". The target now holds part of the copy: do not start chronoqd on it. "
                        "Empty it, then run the same command again" +
                        (options_.empty_target_hint.empty()
                             ? ""
                             : " (to empty it: " + options_.empty_target_hint + ")"));
    }
    progress_.Finish();
    report_.seconds = progress_.Seconds();
    CHRONOQ_ASSIGN_OR_RETURN(report_.target, to_.CountRows());
    CHRONOQ_ASSIGN_OR_RETURN(report_.target_meta, to_.ExportMeta());
    return report_;
  }

 private:
  Status CopyAll() {
    // The queues, the locks and the meta first, in one transaction: few rows.
    CHRONOQ_ASSIGN_OR_RETURN(const std::vector<QueueRow> queues, from_.Queues());
    CHRONOQ_ASSIGN_OR_RETURN(const std::vector<LockRow> locks, from_.LoadLocks());
    CHRONOQ_RETURN_IF_ERROR(InTransaction(to_, [&] { return ImportFew(queues, locks); }));
    Done(static_cast<int64_t>(queues.size() + locks.size()));

    // Schedules, by name.
    std::string after_name;
    for (;;) {
      CHRONOQ_ASSIGN_OR_RETURN(std::vector<ScheduleRow> page,
                               from_.ListSchedules(std::nullopt, after_name, options_.batch_rows));
      if (page.empty()) break;
      CHRONOQ_RETURN_IF_ERROR(InTransaction(to_, [&] { return to_.ImportSchedules(page); }));
      Done(static_cast<int64_t>(page.size()));
      after_name = page.back().name;
    }

    // Key cursors, by (queue, key).
    int64_t after_qid = 0;
    std::string after_key;
    for (;;) {
      CHRONOQ_ASSIGN_OR_RETURN(std::vector<Store::KeyCursorRow> page,
                               from_.ExportKeyCursors(after_qid, after_key, options_.batch_rows));
      if (page.empty()) break;
      CHRONOQ_RETURN_IF_ERROR(InTransaction(to_, [&] { return to_.ImportKeyCursors(page); }));
      Done(static_cast<int64_t>(page.size()));
      after_qid = page.back().qid;
      after_key = page.back().key;
    }

    // Tasks, by seq.
    int64_t after_seq = 0;
    for (;;) {
      CHRONOQ_ASSIGN_OR_RETURN(std::vector<Store::StoredTask> page,
                               from_.ExportTasks(after_seq, options_.batch_rows));
      if (page.empty()) break;
      CHRONOQ_RETURN_IF_ERROR(InTransaction(to_, [&] { return to_.ImportTasks(page); }));
      Done(static_cast<int64_t>(page.size()));
      after_seq = page.back().row.seq;
    }
    return {};
  }

  Status ImportFew(const std::vector<QueueRow>& queues, const std::vector<LockRow>& locks) {
    CHRONOQ_RETURN_IF_ERROR(to_.ImportMeta(report_.source_meta));
    CHRONOQ_RETURN_IF_ERROR(to_.ImportQueues(queues));
    for (const LockRow& lock : locks) CHRONOQ_RETURN_IF_ERROR(to_.SaveLock(lock));
    return {};
  }

  void Done(int64_t rows) {
    report_.rows += rows;
    progress_.Advance(rows);
  }

  Store& from_;
  Store& to_;
  const CopyOptions& options_;
  Progress& progress_;
  CopyReport report_;
};

}  // namespace

std::string DescribeRows(const Store::RowCounts& counts) {
  std::string tasks = Plural(counts.total_tasks(), "task", "tasks");
  std::string states;
  for (size_t i = 0; i < counts.tasks.size(); ++i) {
    if (counts.tasks[i] == 0) continue;
    states += (states.empty() ? "" : ", ") + WithCommas(counts.tasks[i]) + " " + kStateNames[i];
  }
  if (!states.empty()) tasks += " (" + states + ")";
  return tasks + ", " + Plural(counts.queues, "queue", "queues") + ", " +
         Plural(counts.schedules, "schedule", "schedules") + ", " +
         Plural(counts.locks, "held lock", "held locks") + ", " +
         Plural(counts.key_cursors, "key cursor", "key cursors");
}

Result<CopyReport> CopyStore(Store& from, Store& to, const CopyOptions& options,
                             Progress& progress) {
  if (options.batch_rows <= 0) return Status::InvalidArgument("batch_rows", "must be positive");
  return Copier(from, to, options, progress).Run();
}

}  // namespace chronoq::admin
