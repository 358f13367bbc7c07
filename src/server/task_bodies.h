// The bodies of the requests that carry tasks by the thousand, read straight
// into the engine's requests: POST /v1/tasks and /v1/tasks/batch (TaskSpecs),
// a claim and POST /v1/acks (ClaimRequest, AckRequests).
//
// The reference reading builds a JSON document (codec/json_codec.h:
// ParseBody, then ParseTaskSpec): it accepts exactly the bodies the API takes
// and refuses the others with an error naming the field. Building that
// document (a tree of maps and strings) costs about as much as storing the
// tasks (docs/BENCHMARKS.md, "The HTTP path"), so these functions first read
// the body with simdjson, which validates it as strictly into one flat
// buffer, and hand it to the reference reading when it holds anything the
// fast reading does not take itself: invalid JSON, a value of the wrong type
// or out of range, a duplicate or unknown field, `backoff` or `target`, a
// \u escape, a number with a fraction or an exponent, or a payload the
// document would write back differently (object keys out of order, a \b).
// So every body gets the reference's answer, the common ones sooner;
// tests/server/task_bodies_test.cc and tests/fuzz/fuzz_task_bodies.cc
// compare the two readings on valid and invalid bodies.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "chronoq/engine.h"
#include "chronoq/result.h"
#include "chronoq/task.h"

namespace chronoq::server {

// POST /v1/tasks/batch: {"tasks": [...], "return": "tasks" | "ids"}.
struct TaskBatch {
  std::vector<TaskSpec> specs;
  bool ids_only = false;  // "return": "ids"

  friend bool operator==(const TaskBatch&, const TaskBatch&) = default;
};

Result<TaskSpec> ReadTaskBody(std::string_view body);
Result<TaskBatch> ReadTaskBatchBody(std::string_view body);
// POST /v1/queues/{queue}/claim: the request but its queue, with
// ClaimRequest's defaults for what the body leaves out; `acks` are
// [{id, token}] for successes and [{id, token, error, retry_in_ms?}] for
// failures.
Result<ClaimRequest> ReadClaimBody(std::string_view body);
// POST /v1/acks: {"acks": [...]}, as a claim's.
Result<std::vector<AckRequest>> ReadAcksBody(std::string_view body);

// The two readings on their own, for the tests. The fast one returns nullopt
// for a body it leaves to the reference.
namespace task_bodies {
std::optional<TaskSpec> ReadTaskFast(std::string_view body);
std::optional<TaskBatch> ReadBatchFast(std::string_view body);
Result<TaskSpec> ReadTaskReference(std::string_view body);
Result<TaskBatch> ReadBatchReference(std::string_view body);
std::optional<ClaimRequest> ReadClaimFast(std::string_view body);
Result<ClaimRequest> ReadClaimReference(std::string_view body);
std::optional<std::vector<AckRequest>> ReadAcksFast(std::string_view body);
Result<std::vector<AckRequest>> ReadAcksReference(std::string_view body);
}  // namespace task_bodies

}  // namespace chronoq::server
