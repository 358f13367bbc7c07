// chronoq/task.h: the task model.
//
// A task is one unit of work: a JSON payload in a named queue, due at `run_at`.
// Its life:
//
//   scheduled ──claim──▶ running ──ack──▶ succeeded
//      ▲  │                 │  └──fail / lease lapsed──▶ scheduled (retry, after backoff)
//      │  └─cancel─▶ cancelled   └──fail on the last attempt──▶ dead ──retry by hand──┐
//      └──────────────────────────────────────────────────────────────────────────────┘
//
// Succeeded and cancelled tasks are kept for the retention period, then purged.
// Dead tasks are kept until retried or replaced.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/limits.h"
#include "chronoq/result.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

enum class TaskState { kScheduled = 0, kRunning = 1, kSucceeded = 2, kCancelled = 3, kDead = 4 };

// "scheduled", "running", "succeeded", "cancelled", "dead".
std::string_view TaskStateName(TaskState state);
// The inverse of TaskStateName; InvalidArgument naming `field` otherwise.
Result<TaskState> ParseTaskState(std::string_view text, std::string_view field = "state");

// What an enqueue with a client-chosen id does when that id names an
// unfinished (scheduled or running) task. A finished task's id is free to reuse.
enum class OnConflict {
  kReject,   // AlreadyExists (the default)
  kIgnore,   // return the existing task unchanged
  kReplace,  // new run_at, payload and options; FailedPrecondition if it is running
};
Result<OnConflict> ParseOnConflict(std::string_view text, std::string_view field = "on_conflict");

// Retry delay: attempt n (1-based) waits a uniformly random time in
// [0, min(cap, base * 2^(n-1))] ("full jitter").
struct Backoff {
  Duration base = std::chrono::seconds(1);
  Duration cap = std::chrono::hours(1);

  friend bool operator==(const Backoff&, const Backoff&) = default;
};

// An HTTP request to make when the task runs. The engine only stores it and
// hands it out with each claim; chronoqd delivers it.
struct WebhookTarget {
  std::string url;              // http:// or https://, at most 2048 bytes
  std::string method = "POST";  // POST, PUT, PATCH, GET or DELETE
  // At most 32; names are HTTP tokens, values at most 8 KiB of UTF-8; no
  // control characters (so no CR/LF) anywhere except tabs in values.
  std::vector<std::pair<std::string, std::string>> headers;
  Duration timeout = kDefaultTargetTimeout;  // 1 ms - 5 min

  friend bool operator==(const WebhookTarget&, const WebhookTarget&) = default;
};

// What to enqueue.
struct TaskSpec {
  std::string queue;           // 1-100 bytes of [A-Za-z0-9_.:-]
  std::string payload = "{}";  // JSON text, at most 256 KiB
  // When to run: `run_at`, or `delay` from now, or (neither) now.
  std::optional<Timestamp> run_at;
  std::optional<Duration> delay;
  // Client-chosen id, 1-200 bytes of UTF-8 without control characters, not
  // starting with '_' (reserved for generated ids). Empty: generate one.
  std::string id;
  OnConflict on_conflict = OnConflict::kReject;
  int max_attempts = 0;            // 1-1000; 0 takes the queue's default, else the engine's (25)
  int priority = 0;                // lower runs first among tasks due at the same instant
  std::optional<Backoff> backoff;  // unset: the queue's default, else the engine's
  std::optional<WebhookTarget> target;  // stored with the task, handed out with each claim
  // Per-key ordering (docs/KEYS.md): tasks of one queue with the same key
  // start in order (run_at, then priority, then enqueue order), at most the
  // queue's max_in_flight_per_key (default 1) at once; a task keeps its key's
  // place while it retries. 1-200 bytes of UTF-8 without control characters;
  // empty: no key.
  std::string key;

  friend bool operator==(const TaskSpec&, const TaskSpec&) = default;
};

// How one attempt (a claim) ended: an acknowledgement, a failure (which
// retries the task, buries it when it was the last attempt or its status is
// final, or cancels it on a webhook's 410 Gone), or its lease lapsing
// (retried or buried likewise).
enum class AttemptOutcome { kSucceeded = 0, kFailed = 1, kLeaseExpired = 2 };
// "succeeded", "failed", "lease_expired".
std::string_view AttemptOutcomeName(AttemptOutcome outcome);
Result<AttemptOutcome> ParseAttemptOutcome(std::string_view text,
                                           std::string_view field = "outcome");

// One finished attempt of a task (Task::attempts).
struct TaskAttempt {
  int number = 0;        // Task::attempt at the claim (starts at 1 again after a retry by hand)
  Timestamp started_at;  // the claim (after a restart, the lease's last extension)
  Timestamp ended_at;    // the acknowledgement, failure or lapse
  std::string node;      // the engine that granted the claim: EngineOptions::node
  std::string worker;    // who claimed it (ClaimRequest::worker); empty: nobody named
  AttemptOutcome outcome = AttemptOutcome::kSucceeded;
  std::string error;     // a failure's error, or the lapse; first 1,024 bytes
  std::string response;  // the webhook response given with it; first 1,024 bytes
  Duration duration() const { return ended_at - started_at; }

  friend bool operator==(const TaskAttempt&, const TaskAttempt&) = default;
};

// A task as stored.
struct Task {
  std::string id;
  std::string queue;
  TaskState state = TaskState::kScheduled;
  std::string payload;
  Timestamp run_at;  // when it is (or was last) due to run
  int attempt = 0;   // claims so far
  int max_attempts = 0;
  int priority = 0;
  std::optional<std::string> last_error;
  std::optional<Timestamp> lease_until;  // set while running
  std::optional<uint64_t> lease_token;   // set while running: the holder's fencing token
  // The worker that claimed it last, as it named itself (ClaimRequest::worker):
  // the lease holder while running, kept afterwards. Empty: none named.
  std::string worker;
  Timestamp created_at;
  Timestamp updated_at;
  std::optional<WebhookTarget> target;
  // The last webhook response ("HTTP 204", "HTTP 500: <body excerpt>"), kept
  // by whoever acknowledged or failed the task with one (chronoqd does).
  std::optional<std::string> last_response;
  std::string key;  // empty: none
  // Its last finished attempts, oldest first: at most
  // EngineOptions::attempt_history of them; those that failed or lapsed
  // within kMaxAttemptHistoryBytes (chronoq/limits.h), plus a succeeded
  // task's last one. Purged with the task.
  std::vector<TaskAttempt> attempts;
  // The schedule this task is an occurrence of, while that schedule exists
  // (read by Get and List; empty otherwise).
  std::string schedule;
  // Set only by Enqueue: the id named an unfinished task that on_conflict
  // kIgnore returned unchanged (nothing was written).
  bool existed = false;
};

// A claimed task: the worker owns it until `lease_until`, and proves it by
// presenting `token` to Ack, Fail and Extend. Tokens only grow, so a stale
// worker's late call is recognised and refused (a fencing token).
struct Lease {
  std::string id;
  std::string queue;
  std::string payload;
  Timestamp run_at;
  int attempt = 0;  // 1 on the first claim
  int max_attempts = 0;
  uint64_t token = 0;
  Timestamp lease_until;
  std::optional<WebhookTarget> target;
  std::string key;  // empty: none
  // For an occurrence of a schedule: the schedule's name and the
  // occurrence's instant (its id is "<schedule>@<instant>").
  std::string schedule;
  std::optional<Timestamp> occurrence;
  // The task's row number, which no other task ever has (not even one that
  // reuses its id later): what a webhook delivery's webhook-id is made of.
  int64_t seq = 0;
};

// A page of tasks. `next_cursor` is empty on the last page.
struct ListRequest {
  std::optional<std::string> queue;
  std::optional<TaskState> state;
  std::optional<std::string> key;  // only tasks with this key
  std::string id_prefix;           // only tasks whose id starts with this
  // Only tasks created in [created_after, created_before) (millisecond precision).
  std::optional<Timestamp> created_after;
  std::optional<Timestamp> created_before;
  int limit = 100;                 // 1-1000
  std::string cursor;              // from a previous page's next_cursor
};
struct TaskPage {
  std::vector<Task> tasks;
  std::string next_cursor;
};

// A key of a queue and its scheduled tasks (Engine::KeyBacklogs).
struct KeyBacklog {
  std::string key;
  int64_t backlog = 0;
};

}  // namespace chronoq
#pragma GCC visibility pop
