// Schedule definitions: validation, the stored form, and what an occurrence
// looks like as a task (its id and payload).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chronoq/schedule.h"

namespace chronoq {

// Checks `spec`; errors are InvalidArgument naming the field ("cron", "tz",
// "every_ms", "payload", "target.url", ...). The result is normalised: the
// payload is compact JSON and a cron schedule has its tz. (An every schedule
// without start is anchored by the engine loop, at the instant it saves it.)
Result<ScheduleSpec> ValidateScheduleSpec(const ScheduleSpec& spec, Timestamp now);
Status ValidateScheduleName(std::string_view name, std::string_view field = "name");

// The stored form of a (valid) spec: compact JSON, defaults left out.
std::string EncodeScheduleSpec(const ScheduleSpec& spec);
// The inverse of EncodeScheduleSpec; DataLoss when `json` is not a spec.
Result<ScheduleSpec> DecodeScheduleSpec(std::string_view json);

// "<name>@<instant as RFC 3339 UTC>".
std::string OccurrenceId(std::string_view name, Timestamp at);
// The schedule's payload (a JSON object) with "scheduled_for" added first.
std::string OccurrencePayload(std::string_view payload, Timestamp at);

}  // namespace chronoq
