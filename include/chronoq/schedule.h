// chronoq/schedule.h: recurring schedules.
//
// A schedule creates one task per occurrence in its queue, with the id
// "<schedule name>@<occurrence instant>" (RFC 3339 UTC, e.g.
// "purge@2026-11-23T03:00:00Z") and the schedule's payload plus
// "scheduled_for". Only the next occurrence exists as a task at any time, so
// 100,000 idle schedules cost rows on disk and nothing else.
//
//   chronoq::ScheduleSpec purge;                  // 03:00 in Seoul, every night
//   purge.name = "purge-soft-deleted";
//   purge.queue = "maintenance";
//   purge.cron = "0 0 3 * * *";
//   purge.tz = "Asia/Seoul";
//   engine->CreateSchedule(purge);
//
//   chronoq::ScheduleSpec refresh;                // every 30 s, anchored
//   refresh.name = "refresh";
//   refresh.queue = "cache";
//   refresh.every = std::chrono::seconds(30);
//   engine->CreateSchedule(refresh);
//
// When the next occurrence is created:
//   - cron and every, overlap kAllow: when the previous occurrence is claimed.
//   - cron and every, overlap kSkip or kQueueOne: when the previous occurrence
//     finishes (succeeds, dies, or is cancelled). An occurrence "runs" from
//     its claim until it finishes, retries included.
//   - fixed_delay: `fixed_delay` after the previous occurrence finished.
//
// Missed occurrences. An occurrence is missed when its instant passes before
// its task could be created or run: chronoq was down, or (overlap kAllow) no
// worker claimed the previous one in time. `misfire` decides:
//   kSkip     none of them runs; the next future occurrence is created.
//   kRunOnce  the most recent missed occurrence runs once, now (the default).
//   kRunAll   each runs, oldest first, but at most the `max_catchup` most
//             recent ones; older ones are skipped.
// A fixed_delay schedule owes at most one run, which runs late whatever the
// policy.
//
// Overlap. Occurrences that come due while the previous one still runs:
//   kAllow     run anyway (concurrently).
//   kSkip      are skipped (the default); the next one after the previous
//              finished is created.
//   kQueueOne  the most recent of them runs as soon as the previous
//              finishes; the others are skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/cron.h"
#include "chronoq/limits.h"
#include "chronoq/result.h"
#include "chronoq/task.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

enum class Misfire { kSkip, kRunOnce, kRunAll };
enum class Overlap { kAllow, kSkip, kQueueOne };

// "skip" | "run_once" | "run_all"; "allow" | "skip" | "queue_one";
// "run_after" | "skip"; "once" | "twice". Parse* fail with InvalidArgument
// naming `field`.
std::string_view MisfireName(Misfire m);
Result<Misfire> ParseMisfire(std::string_view text, std::string_view field = "misfire");
std::string_view OverlapName(Overlap o);
Result<Overlap> ParseOverlap(std::string_view text, std::string_view field = "overlap");
std::string_view DstGapName(DstGap g);
Result<DstGap> ParseDstGap(std::string_view text, std::string_view field = "dst_gap");
std::string_view DstRepeatName(DstRepeat r);
Result<DstRepeat> ParseDstRepeat(std::string_view text, std::string_view field = "dst_repeat");

struct ScheduleSpec {
  // 1-150 bytes of [A-Za-z0-9_.:-], not starting with '_' (no '@': it
  // separates the name from the instant in task ids).
  std::string name;
  std::string queue;  // as TaskSpec::queue
  // Exactly one of the three.
  std::optional<std::string> cron;      // the dialect of chronoq/cron.h
  std::optional<Duration> every;        // fixed rate, 1 ms - 10 years
  std::optional<Duration> fixed_delay;  // 1 ms - 10 years after the previous run finished
  // cron only: the IANA zone its fields are matched in (default UTC), and the
  // DST overrides of fixed-time rules (chronoq/cron.h).
  std::optional<std::string> tz;
  std::optional<DstGap> dst_gap;
  std::optional<DstRepeat> dst_repeat;
  // every: the anchor, occurrences are start + k * every (default: when the
  // schedule is created or replaced, so the first runs at once).
  // fixed_delay: the first run (default: now + delay).
  // cron: no occurrence before it.
  std::optional<Timestamp> start;
  // A JSON object, at most 256 KiB, without a "scheduled_for" member; each
  // occurrence's payload is this object plus "scheduled_for" (RFC 3339 UTC).
  std::string payload = "{}";
  Misfire misfire = Misfire::kRunOnce;
  int max_catchup = 100;  // 1-10000; kRunAll only
  Overlap overlap = Overlap::kSkip;
  // Options of each occurrence's task, as in TaskSpec.
  int priority = 0;
  int max_attempts = 0;
  std::optional<WebhookTarget> target;
};

// The latest finished occurrence.
struct ScheduleRun {
  std::string task_id;
  Timestamp scheduled_for;
  TaskState state = TaskState::kSucceeded;  // succeeded, dead or cancelled
  Timestamp finished_at;
  std::optional<std::string> error;  // the task's last_error, if any
};

struct Schedule {
  ScheduleSpec spec;
  bool paused = false;
  // The occurrence that exists as a task and has not been claimed yet.
  std::optional<std::string> next_task_id;
  // When the next occurrence is due: next_task_id's run time, or when
  // there is none (paused, or the previous one still runs) the next instant
  // the rule gives.
  std::optional<Timestamp> next_run;
  std::optional<ScheduleRun> last_run;
  int64_t runs = 0;     // occurrences that finished
  int64_t skipped = 0;  // occurrences skipped by misfire or overlap
  Timestamp created_at;
  Timestamp updated_at;
};

struct ListSchedulesRequest {
  std::optional<std::string> queue;
  int limit = 100;     // 1-1000
  std::string cursor;  // from a previous page's next_cursor
};
struct SchedulePage {
  std::vector<Schedule> schedules;  // by name
  std::string next_cursor;          // empty on the last page
};

}  // namespace chronoq
#pragma GCC visibility pop
