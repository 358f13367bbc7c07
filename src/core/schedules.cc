// Core's schedules: each schedule keeps exactly one occurrence ahead of it as
// an ordinary task, and creates the next one when that occurrence is claimed
// (overlap allow) or finishes (the other policies, and fixed delays). See
// chronoq/schedule.h for the rules and docs/SCHEDULES.md for examples.
#include <algorithm>

#include "chronoq/time.h"

#include "codec/json_codec.h"
#include "core/core.h"
#include "schedule/recurrence.h"
#include "schedule/schedule_spec.h"

namespace chronoq {
namespace {

// How many taken ids Materialise steps past before giving up: each one is an
// occurrence that already ran.
constexpr int kMaxTakenIds = 16;

bool Running(const std::optional<TaskRow>& row) {
  return row.has_value() && row->state == TaskState::kRunning;
}

}  // namespace

std::optional<Timestamp> OccurrenceInstant(const std::string& id) {
  const size_t at = id.rfind('@');
  if (at == std::string::npos) return std::nullopt;
  Result<Timestamp> t = ParseTime(std::string_view(id).substr(at + 1));
  return t.ok() ? std::optional<Timestamp>(*t) : std::nullopt;
}

Result<ScheduleRow> Core::ScheduleOrNotFound(const std::string& name) {
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<ScheduleRow> row, store_.FindScheduleByName(name));
  if (!row) return Status::NotFound("schedule " + name + " does not exist");
  return std::move(*row);
}

Status Core::DropPending(ScheduleRow& row) {
  if (!row.next_at || !row.current_seq) return {};
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<TaskRow> task, store_.FindBySeq(*row.current_seq));
  if (task && task->state == TaskState::kScheduled) {
    CHRONOQ_RETURN_IF_ERROR(store_.Delete(task->seq));
    CHRONOQ_RETURN_IF_ERROR(Dropped(*task));
    Count(task->qid, TaskState::kScheduled, std::nullopt);
  }
  row.current_seq.reset();
  row.next_at.reset();
  return {};
}

Status Core::Materialise(ScheduleRow& row, const ScheduleSpec& spec, Timestamp at) {
  for (int tries = 0; tries < kMaxTakenIds; ++tries) {
    const std::string id = OccurrenceId(row.name, at);
    CHRONOQ_ASSIGN_OR_RETURN(std::optional<TaskRow> existing, store_.FindByName(id));
    if (!existing) {
      ValidTask t;
      t.queue = spec.queue;
      t.payload = OccurrencePayload(spec.payload, at);
      t.due = at;
      t.name = id;
      t.max_attempts = spec.max_attempts;
      t.priority = spec.priority;
      if (spec.target) t.target = EncodeTarget(*spec.target);
      t.sid = row.sid;
      std::vector<ValidTask> one;
      one.push_back(std::move(t));
      CHRONOQ_RETURN_IF_ERROR(Enqueue(std::move(one), /*batch=*/false).status());
      CHRONOQ_ASSIGN_OR_RETURN(existing, store_.FindByName(id));
      if (!existing) return Status::Internal("occurrence " + id + " vanished after insert");
    }
    if (existing->state == TaskState::kScheduled || existing->state == TaskState::kRunning) {
      // Created now, or by whoever got here first: either way it exists once.
      row.current_seq = existing->seq;
      row.cursor = at;
      row.next_at = existing->state == TaskState::kScheduled ? existing->due : std::nullopt;
      row.claimed_at = existing->state == TaskState::kRunning ? existing->updated : std::nullopt;
      return {};
    }
    // This occurrence already ran (a schedule re-created under the same name
    // reaches instants its predecessor ran): never run it twice.
    std::optional<Timestamp> next;
    if (spec.fixed_delay) {
      next = at + Duration(1);
    } else {
      CHRONOQ_ASSIGN_OR_RETURN(Recurrence rule, Recurrence::For(spec));
      next = rule.Next(at);
    }
    if (!next) break;
    at = *next;
  }
  row.current_seq.reset();
  row.next_at.reset();
  return {};
}

Status Core::Continue(ScheduleRow& row, const ScheduleSpec& spec, Misfire misfire, Timestamp now) {
  if (row.paused) return {};
  if (spec.fixed_delay) return Materialise(row, spec, now + *spec.fixed_delay);
  CHRONOQ_ASSIGN_OR_RETURN(Recurrence rule, Recurrence::For(spec));
  // Without a current occurrence (new, resumed): the first one from now.
  const Recurrence::Step step =
      row.cursor && row.current_seq
          ? rule.Advance(*row.cursor, now, misfire, spec.max_catchup)
          : Recurrence::Step{rule.AtOrAfter(std::max(now, spec.start.value_or(now))), 0};
  row.skipped += step.skipped;
  if (!step.at) {
    row.current_seq.reset();
    row.next_at.reset();
    return {};
  }
  return Materialise(row, spec, *step.at);
}

Status Core::OccurrenceClaimed(int64_t sid, int64_t seq, Timestamp now) {
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<ScheduleRow> row, store_.FindSchedule(sid));
  // A deleted schedule's occurrences run on their own; older occurrences
  // (being retried) change nothing.
  if (!row || row->current_seq != seq) return {};
  row->next_at.reset();
  row->claimed_at = now;
  CHRONOQ_ASSIGN_OR_RETURN(ScheduleSpec spec, DecodeScheduleSpec(row->spec));
  if (!spec.fixed_delay && spec.overlap == Overlap::kAllow) {
    CHRONOQ_RETURN_IF_ERROR(Continue(*row, spec, spec.misfire, now));
  }
  row->updated = now;
  return store_.SaveSchedule(*row);
}

Status Core::OccurrenceFinished(int64_t sid, int64_t seq, const std::string& id, TaskState state,
                                const std::optional<std::string>& error, Timestamp now) {
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<ScheduleRow> row, store_.FindSchedule(sid));
  if (!row) return {};
  row->last_task = id;
  row->last_for = OccurrenceInstant(id);
  row->last_state = state;
  row->last_finished = now;
  row->last_error = error;
  // A cancelled occurrence did not run: it was skipped by hand.
  ++(state == TaskState::kCancelled ? row->skipped : row->runs);
  if (row->current_seq == seq) {
    CHRONOQ_ASSIGN_OR_RETURN(ScheduleSpec spec, DecodeScheduleSpec(row->spec));
    // Occurrences that came due after this one was claimed are overlaps:
    // kSkip drops them, kQueueOne runs the latest (as run_once would). Those
    // due before it was claimed (or ever, if it was cancelled unclaimed) were
    // missed, and the misfire policy goes on with them (run_all's catch-up).
    Misfire policy = spec.misfire;
    std::optional<Timestamp> following;
    if (!spec.fixed_delay && row->cursor) {
      CHRONOQ_ASSIGN_OR_RETURN(Recurrence rule, Recurrence::For(spec));
      following = rule.Next(*row->cursor);
    }
    const bool overlapped = state != TaskState::kCancelled && row->claimed_at && following &&
                            *following >= *row->claimed_at;
    if (overlapped && spec.overlap == Overlap::kSkip) policy = Misfire::kSkip;
    if (overlapped && spec.overlap == Overlap::kQueueOne) policy = Misfire::kRunOnce;
    // With kAllow the next occurrence was created at claim time; only a
    // cancelled (never claimed) one leaves the schedule without a next.
    const bool next_exists =
        !spec.fixed_delay && spec.overlap == Overlap::kAllow && state != TaskState::kCancelled;
    if (!next_exists) {
      row->next_at.reset();
      CHRONOQ_RETURN_IF_ERROR(Continue(*row, spec, policy, now));
    }
  }
  row->updated = now;
  return store_.SaveSchedule(*row);
}

Status Core::CatchUpSchedules() {
  const Timestamp now = clock_.Now();
  constexpr int kChunk = 1000;
  int64_t after = 0;
  for (;;) {
    CHRONOQ_ASSIGN_OR_RETURN(std::vector<ScheduleRow> rows,
                             store_.SchedulesDueBefore(now, after, kChunk));
    for (ScheduleRow& row : rows) {
      after = row.sid;
      CHRONOQ_ASSIGN_OR_RETURN(ScheduleSpec spec, DecodeScheduleSpec(row.spec));
      // A fixed-delay schedule owes one run at most: it runs late.
      if (spec.fixed_delay || !row.cursor) continue;
      CHRONOQ_ASSIGN_OR_RETURN(Recurrence rule, Recurrence::For(spec));
      // The unclaimed occurrence at `cursor` is itself among the missed.
      const Recurrence::Step step =
          rule.Advance(*row.cursor - Duration(1), now, spec.misfire, spec.max_catchup);
      if (step.at == row.cursor) continue;  // it runs, late, as the policy wants
      CHRONOQ_RETURN_IF_ERROR(DropPending(row));
      row.skipped += step.skipped;
      if (step.at) CHRONOQ_RETURN_IF_ERROR(Materialise(row, spec, *step.at));
      row.updated = now;
      CHRONOQ_RETURN_IF_ERROR(store_.SaveSchedule(row));
    }
    if (rows.size() < kChunk) return {};
  }
}

// --- the schedule calls ------------------------------------------------------------

Result<Schedule> Core::SaveSchedule(const ScheduleSpec& valid, bool replace) {
  const Timestamp now = clock_.Now();
  ScheduleSpec spec = valid;
  // Anchored here, not when validated: the first occurrence is then exactly
  // now, not an instant just missed.
  if (spec.every && !spec.start) spec.start = now;
  CHRONOQ_ASSIGN_OR_RETURN(QueueState * queue, QueueOf(spec.queue));
  CHRONOQ_ASSIGN_OR_RETURN(std::optional<ScheduleRow> existing,
                           store_.FindScheduleByName(spec.name));
  ScheduleRow row;
  if (existing) {
    if (!replace) {
      return Status(StatusCode::kAlreadyExists, "schedule " + spec.name + " already exists",
                    "name");
    }
    row = std::move(*existing);
    CHRONOQ_RETURN_IF_ERROR(DropPending(row));
  } else {
    row.name = spec.name;
    row.created = now;
  }
  row.qid = queue->qid;
  row.spec = EncodeScheduleSpec(spec);
  row.updated = now;
  // The new definition starts afresh from now, not from the old cursor.
  row.current_seq.reset();
  row.cursor.reset();
  if (!existing) {
    CHRONOQ_ASSIGN_OR_RETURN(std::optional<int64_t> sid, store_.InsertSchedule(row));
    if (!sid) return Status::Internal("schedule " + spec.name + " is taken but not found");
    row.sid = *sid;
  }
  if (spec.fixed_delay) {
    if (!row.paused) {
      const Timestamp first = std::max(now, spec.start.value_or(now + *spec.fixed_delay));
      CHRONOQ_RETURN_IF_ERROR(Materialise(row, spec, first));
    }
  } else {
    CHRONOQ_RETURN_IF_ERROR(Continue(row, spec, spec.misfire, now));
  }
  CHRONOQ_RETURN_IF_ERROR(store_.SaveSchedule(row));
  return ToSchedule(row, now);
}

Result<Schedule> Core::GetSchedule(const std::string& name) {
  CHRONOQ_ASSIGN_OR_RETURN(ScheduleRow row, ScheduleOrNotFound(name));
  return ToSchedule(row, clock_.Now());
}

Result<SchedulePage> Core::ListSchedules(const ListSchedulesRequest& request) {
  std::optional<int64_t> qid;
  if (request.queue) {
    auto it = qids_.find(*request.queue);
    if (it == qids_.end()) return SchedulePage();
    qid = it->second;
  }
  CHRONOQ_ASSIGN_OR_RETURN(std::vector<ScheduleRow> rows,
                           store_.ListSchedules(qid, request.cursor, request.limit + 1));
  SchedulePage page;
  const Timestamp now = clock_.Now();
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(request.limit); ++i) {
    CHRONOQ_ASSIGN_OR_RETURN(Schedule s, ToSchedule(rows[i], now));
    page.schedules.push_back(std::move(s));
  }
  if (rows.size() > static_cast<size_t>(request.limit)) {
    page.next_cursor = page.schedules.back().spec.name;
  }
  return page;
}

Status Core::DeleteSchedule(const std::string& name) {
  CHRONOQ_ASSIGN_OR_RETURN(ScheduleRow row, ScheduleOrNotFound(name));
  CHRONOQ_RETURN_IF_ERROR(DropPending(row));
  return store_.DeleteSchedule(row.sid);
}

Result<Schedule> Core::PauseSchedule(const std::string& name, bool paused) {
  const Timestamp now = clock_.Now();
  CHRONOQ_ASSIGN_OR_RETURN(ScheduleRow row, ScheduleOrNotFound(name));
  if (row.paused == paused) return ToSchedule(row, now);
  row.paused = paused;
  row.updated = now;
  if (paused) {
    CHRONOQ_RETURN_IF_ERROR(DropPending(row));
  } else {
    // A running occurrence under kSkip or kQueueOne creates the next one when
    // it finishes; otherwise the schedule continues from now.
    CHRONOQ_ASSIGN_OR_RETURN(ScheduleSpec spec, DecodeScheduleSpec(row.spec));
    std::optional<TaskRow> current;
    if (row.current_seq) {
      CHRONOQ_ASSIGN_OR_RETURN(current, store_.FindBySeq(*row.current_seq));
    }
    const bool waits_for_current =
        Running(current) && (spec.fixed_delay || spec.overlap != Overlap::kAllow);
    if (!waits_for_current) {
      row.current_seq.reset();
      row.cursor.reset();
      if (spec.fixed_delay) {
        CHRONOQ_RETURN_IF_ERROR(Materialise(row, spec, now + *spec.fixed_delay));
      } else {
        CHRONOQ_RETURN_IF_ERROR(Continue(row, spec, spec.misfire, now));
      }
    }
  }
  CHRONOQ_RETURN_IF_ERROR(store_.SaveSchedule(row));
  return ToSchedule(row, now);
}

Result<std::vector<Timestamp>> Core::NextOccurrences(const std::string& name, int count) {
  CHRONOQ_ASSIGN_OR_RETURN(ScheduleRow row, ScheduleOrNotFound(name));
  CHRONOQ_ASSIGN_OR_RETURN(Schedule s, ToSchedule(row, clock_.Now()));
  std::vector<Timestamp> out;
  if (!s.next_run) return out;
  out.push_back(*s.next_run);
  if (s.spec.fixed_delay) return out;
  CHRONOQ_ASSIGN_OR_RETURN(Recurrence rule, Recurrence::For(s.spec));
  // From the occurrence's own instant: a late or caught-up one is due before
  // its successors, whatever its run time.
  Timestamp from = row.next_at && row.cursor ? *row.cursor : *s.next_run;
  while (static_cast<int>(out.size()) < count) {
    std::optional<Timestamp> next = rule.Next(from);
    if (!next) break;
    out.push_back(*next);
    from = *next;
  }
  return out;
}

Result<Schedule> Core::ToSchedule(const ScheduleRow& row, Timestamp now) {
  Schedule s;
  CHRONOQ_ASSIGN_OR_RETURN(s.spec, DecodeScheduleSpec(row.spec));
  s.paused = row.paused;
  if (row.next_at && row.cursor) {
    s.next_task_id = OccurrenceId(row.name, *row.cursor);
    s.next_run = row.next_at;
  } else if (!s.spec.fixed_delay) {
    // None exists yet: what the rule gives next (after the running one, or
    // from now when paused).
    CHRONOQ_ASSIGN_OR_RETURN(Recurrence rule, Recurrence::For(s.spec));
    s.next_run = row.cursor && !row.paused
                     ? rule.Advance(*row.cursor, now, Misfire::kSkip, 1).at
                     : rule.AtOrAfter(std::max(now, s.spec.start.value_or(now)));
  }
  if (row.last_task && row.last_state && row.last_finished) {
    s.last_run = ScheduleRun{*row.last_task, row.last_for.value_or(Timestamp()), *row.last_state,
                             *row.last_finished, row.last_error};
  }
  s.runs = row.runs;
  s.skipped = row.skipped;
  s.created_at = row.created;
  s.updated_at = row.updated;
  return s;
}

}  // namespace chronoq
