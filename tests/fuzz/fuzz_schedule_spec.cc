// fuzz_schedule_spec: a schedule definition in JSON, read as POST and PUT
// /v1/schedules read it (ParseScheduleSpec), checked as the engine checks it
// (ValidateScheduleSpec), and read as the store reads its own copy
// (DecodeScheduleSpec).
//
// Checked: the readers fail only with InvalidArgument (DataLoss for the
// stored form) and say why; a valid definition is stored and read back
// unchanged (a restart must not change a schedule), stays valid once
// normalised, and a cron or every definition has a recurrence whose next
// occurrence is after now.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "chronoq/schedule.h"

#include "codec/json_codec.h"
#include "common/check.h"
#include "core/validate.h"
#include "schedule/recurrence.h"

namespace chronoq::fuzz {
namespace {

// The tests' fake clock's start, 2026-11-22T00:00:00Z: start times are
// validated against now.
constexpr Timestamp kNow{std::chrono::seconds(1'795'305'600)};

// The field is not checked: it may be the empty key of {"":1}.
void CheckFailure(const Status& error, StatusCode code) {
  CHRONOQ_CHECK(error.code() == code, "a schedule definition is refused with the reader's code");
  CHRONOQ_CHECK(!error.message().empty(), "a refused schedule definition says why");
}

// A definition the engine accepted, as it would store and reload it.
void CheckValid(const ScheduleSpec& valid) {
  const std::string stored = EncodeScheduleSpec(valid);
  Result<ScheduleSpec> reloaded = DecodeScheduleSpec(stored);
  CHRONOQ_CHECK(reloaded.ok(), "a valid schedule definition reads back from the store");
  CHRONOQ_CHECK(EncodeScheduleSpec(*reloaded) == stored,
                "a schedule definition reads back from the store unchanged");
  Result<ScheduleSpec> again = ValidateScheduleSpec(*reloaded, kNow);
  CHRONOQ_CHECK(again.ok(), "a stored schedule definition is still valid");
  CHRONOQ_CHECK(EncodeScheduleSpec(*again) == stored, "validating a valid definition is a no-op");
  if (valid.fixed_delay) return;  // no recurrence: each run follows the last one
  // An every schedule without start is anchored by the engine when saved.
  ScheduleSpec anchored = valid;
  if (!anchored.cron && !anchored.start) anchored.start = kNow;
  Result<Recurrence> recurrence = Recurrence::For(anchored);
  CHRONOQ_CHECK(recurrence.ok(), "a valid cron or every definition has a recurrence");
  if (std::optional<Timestamp> next = recurrence->Next(kNow)) {
    CHRONOQ_CHECK(*next > kNow, "the next occurrence is after now");
  }
}

void CheckRequestBody(std::string_view body, std::optional<std::string_view> path_name) {
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return CheckFailure(json.status(), StatusCode::kInvalidArgument);
  Result<ScheduleSpec> spec = ParseScheduleSpec(*json, path_name);
  if (!spec.ok()) return CheckFailure(spec.status(), StatusCode::kInvalidArgument);
  if (path_name) {
    CHRONOQ_CHECK(spec->name == *path_name, "PUT's definition is named by its path");
  }
  Result<ScheduleSpec> valid = ValidateScheduleSpec(*spec, kNow);
  if (!valid.ok()) return CheckFailure(valid.status(), StatusCode::kInvalidArgument);
  CheckValid(*valid);
}

}  // namespace
}  // namespace chronoq::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronoq;
  using namespace chronoq::fuzz;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckRequestBody(text, std::nullopt);     // POST /v1/schedules
  CheckRequestBody(text, "nightly-purge");  // PUT /v1/schedules/nightly-purge
  Result<ScheduleSpec> stored = DecodeScheduleSpec(text);
  if (!stored.ok()) {
    CHRONOQ_CHECK(stored.status().code() == StatusCode::kDataLoss,
                  "an unreadable stored definition is DataLoss");
  }
  return 0;
}
