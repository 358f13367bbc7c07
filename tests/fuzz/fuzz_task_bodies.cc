// fuzz_task_bodies: a body of POST /v1/tasks/batch, of POST /v1/tasks, of a
// claim and of POST /v1/acks, read both ways (server/task_bodies.h).
//
// Checked: wherever the fast reading (simdjson, no document) takes a body,
// the reference reading (the JSON document) takes it too and reads the same
// tasks; and the reading chronoqd uses answers as the reference does, error
// and all.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "server/task_bodies.h"

namespace chronoq::fuzz {
namespace {

template <typename T>
void CheckSame(const Result<T>& used, const Result<T>& reference) {
  CHRONOQ_CHECK(used.ok() == reference.ok(), "the body is taken or refused as the reference does");
  if (used.ok()) {
    CHRONOQ_CHECK(*used == *reference, "the body reads as the reference reads it");
  } else {
    CHRONOQ_CHECK(used.status().field() == reference.status().field() &&
                      used.status().message() == reference.status().message(),
                  "a refused body gets the reference's error");
  }
}

template <typename T>
void CheckFast(const std::optional<T>& fast, const Result<T>& reference) {
  if (!fast) return;
  CHRONOQ_CHECK(reference.ok(), "the fast reading takes only bodies the reference takes");
  CHRONOQ_CHECK(*fast == *reference, "the fast reading reads what the reference reads");
}

}  // namespace
}  // namespace chronoq::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronoq::server;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const chronoq::Result<TaskBatch> batch = task_bodies::ReadBatchReference(body);
  chronoq::fuzz::CheckFast(task_bodies::ReadBatchFast(body), batch);
  chronoq::fuzz::CheckSame(ReadTaskBatchBody(body), batch);
  const chronoq::Result<chronoq::TaskSpec> task = task_bodies::ReadTaskReference(body);
  chronoq::fuzz::CheckFast(task_bodies::ReadTaskFast(body), task);
  chronoq::fuzz::CheckSame(ReadTaskBody(body), task);
  const chronoq::Result<chronoq::ClaimRequest> claim = task_bodies::ReadClaimReference(body);
  chronoq::fuzz::CheckFast(task_bodies::ReadClaimFast(body), claim);
  chronoq::fuzz::CheckSame(ReadClaimBody(body), claim);
  const chronoq::Result<std::vector<chronoq::AckRequest>> acks =
      task_bodies::ReadAcksReference(body);
  chronoq::fuzz::CheckFast(task_bodies::ReadAcksFast(body), acks);
  chronoq::fuzz::CheckSame(ReadAcksBody(body), acks);
  return 0;
}
