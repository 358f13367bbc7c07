// Schedules: the names of their enums, and what an occurrence looks like as
// a task (its id and payload). Their JSON form is in codec/json_codec.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chronoq/schedule.h"

namespace chronoq {

// "<name>@<instant as RFC 3339 UTC>".
std::string OccurrenceId(std::string_view name, Timestamp at);
// The schedule's payload (a JSON object) with "scheduled_for" added first.
std::string OccurrencePayload(std::string_view payload, Timestamp at);

}  // namespace chronoq
