// chronoq/bulk.h: one action on every task a filter matches.
//
// An administrator's tool: cancel a deleted user's pending work, move every
// share's expiry by a day when the share period changes, retry what died in
// an outage, delete what is finished. A bulk job applies the action to each
// matching task under the same state rules as the single-task call (cancel
// and reschedule take scheduled tasks, retry dead ones, delete finished
// ones) and counts what it did: applied, or skipped with the reason.
//
//   chronoq::BulkRequest r;
//   r.filter.queue = "expire-share";
//   r.filter.state = chronoq::TaskState::kScheduled;
//   r.action = chronoq::BulkAction::kReschedule;
//   r.shift = std::chrono::hours(24);
//   r.dry_run = true;                       // count first
//   auto preview = engine->StartBulk(r);    // preview->applied: would move
//   r.dry_run = false;
//   auto job = engine->StartBulk(r);        // runs in the background
//   ... engine->GetBulk(job->id) ...        // progress
//
// The job walks the matching tasks in creation (seq) order, a chunk at a
// time, each chunk one operation of the engine loop, so claims and
// acknowledgements go on between chunks. It covers the tasks that existed
// when it started. Jobs live in memory: a restart ends a running job (see
// docs/OPERATIONS.md, "Bulk actions").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "chronoq/clock.h"
#include "chronoq/result.h"
#include "chronoq/task.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

enum class BulkAction {
  kCancel,      // scheduled tasks, as Engine::Cancel
  kReschedule,  // scheduled tasks, to `run_at` or by `shift`, as Engine::Reschedule
  kRetry,       // dead tasks, as Engine::Retry
  kDelete,      // finished tasks (succeeded, cancelled, dead), as Engine::Purge
};
// "cancel", "reschedule", "retry", "delete".
std::string_view BulkActionName(BulkAction action);
// The inverse; InvalidArgument naming `field` otherwise.
Result<BulkAction> ParseBulkAction(std::string_view text, std::string_view field = "action");

// Which tasks: every condition set must hold. A filter without conditions
// is refused unless `all` says "every task" (and `all` with conditions too):
// an empty filter is more often a mistake than a wish.
struct BulkFilter {
  std::optional<std::string> queue;
  std::optional<TaskState> state;
  std::optional<std::string> key;
  std::string id_prefix;  // as ListRequest::id_prefix
  // Task::run_at in [run_at_from, run_at_to).
  std::optional<Timestamp> run_at_from;
  std::optional<Timestamp> run_at_to;
  // Says "every task" on purpose; only without conditions.
  bool all = false;

  bool empty() const {
    return !queue && !state && !key && id_prefix.empty() && !run_at_from && !run_at_to;
  }
};

struct BulkRequest {
  BulkFilter filter;
  BulkAction action = BulkAction::kCancel;
  // A reschedule moves each task to `run_at`, or by `shift` from its due
  // (exactly one of them; neither for other actions).
  std::optional<Timestamp> run_at;
  std::optional<Duration> shift;
  // Counts what the job would do and changes nothing.
  bool dry_run = false;
};

enum class BulkJobState { kRunning, kDone, kFailed, kCancelled };
// "running", "done", "failed", "cancelled".
std::string_view BulkJobStateName(BulkJobState state);

struct BulkJob {
  std::string id;  // empty for a dry run
  BulkRequest request;
  BulkJobState state = BulkJobState::kRunning;
  // Tasks that matched the filter when the job came to them, and of those,
  // the ones the action changed and the ones it left alone, by reason: the
  // state the single-task call refuses ("running", "scheduled", ...), or
  // "run_at_out_of_range" for a shift past the limits of run_at.
  int64_t matched = 0;
  int64_t applied = 0;
  std::map<std::string, int64_t> skipped;
  Timestamp started;
  std::optional<Timestamp> finished;
  std::string error;  // why it failed
  // The id of the last task the job came to (empty before the first):
  // everything up to it, in creation order, is done.
  std::string cursor;
};

}  // namespace chronoq
#pragma GCC visibility pop
