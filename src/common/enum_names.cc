// The names of the public enums (chronoq/task.h, queue.h, schedule.h, bulk.h): as
// the API spells them, and back. Each table is in enum order.
#include <array>

#include "chronoq/bulk.h"
#include "chronoq/queue.h"
#include "chronoq/schedule.h"
#include "chronoq/task.h"

#include "common/names.h"

namespace chronoq {
namespace {

constexpr std::array<std::string_view, 5> kStateNames = {"scheduled", "running", "succeeded",
                                                         "cancelled", "dead"};
constexpr std::array<std::string_view, 3> kOutcomeNames = {"succeeded", "failed", "lease_expired"};
constexpr std::array<std::string_view, 3> kConflictNames = {"reject", "ignore", "replace"};
// In QueueSetting order: the settings' names in the API.
constexpr std::array<std::string_view, 8> kSettingNames = {
    "concurrency",           "max_attempts",        "backoff",       "retention_ms", "rate_limit",
    "max_in_flight_per_key", "max_pending_per_key", "final_statuses"};
constexpr std::array<std::string_view, 3> kMisfireNames = {"skip", "run_once", "run_all"};
constexpr std::array<std::string_view, 3> kOverlapNames = {"allow", "skip", "queue_one"};
constexpr std::array<std::string_view, 2> kDstGapNames = {"run_after", "skip"};
constexpr std::array<std::string_view, 2> kDstRepeatNames = {"once", "twice"};
constexpr std::array<std::string_view, 4> kBulkActionNames = {"cancel", "reschedule", "retry",
                                                              "delete"};
constexpr std::array<std::string_view, 4> kBulkJobStateNames = {"running", "done", "failed",
                                                                "cancelled"};

}  // namespace

std::string_view TaskStateName(TaskState state) { return kStateNames[static_cast<size_t>(state)]; }

std::string_view AttemptOutcomeName(AttemptOutcome outcome) {
  return kOutcomeNames[static_cast<size_t>(outcome)];
}
Result<AttemptOutcome> ParseAttemptOutcome(std::string_view text, std::string_view field) {
  return ParseName<AttemptOutcome>(kOutcomeNames, text, field);
}

Result<TaskState> ParseTaskState(std::string_view text, std::string_view field) {
  return ParseName<TaskState>(kStateNames, text, field);
}

Result<OnConflict> ParseOnConflict(std::string_view text, std::string_view field) {
  return ParseName<OnConflict>(kConflictNames, text, field);
}

std::string_view QueueSettingName(QueueSetting setting) {
  return kSettingNames[static_cast<size_t>(setting)];
}

std::string_view MisfireName(Misfire m) { return kMisfireNames[static_cast<size_t>(m)]; }
Result<Misfire> ParseMisfire(std::string_view text, std::string_view field) {
  return ParseName<Misfire>(kMisfireNames, text, field);
}
std::string_view OverlapName(Overlap o) { return kOverlapNames[static_cast<size_t>(o)]; }
Result<Overlap> ParseOverlap(std::string_view text, std::string_view field) {
  return ParseName<Overlap>(kOverlapNames, text, field);
}
std::string_view DstGapName(DstGap g) { return kDstGapNames[static_cast<size_t>(g)]; }
Result<DstGap> ParseDstGap(std::string_view text, std::string_view field) {
  return ParseName<DstGap>(kDstGapNames, text, field);
}
std::string_view DstRepeatName(DstRepeat r) { return kDstRepeatNames[static_cast<size_t>(r)]; }
Result<DstRepeat> ParseDstRepeat(std::string_view text, std::string_view field) {
  return ParseName<DstRepeat>(kDstRepeatNames, text, field);
}

std::string_view BulkActionName(BulkAction a) { return kBulkActionNames[static_cast<size_t>(a)]; }
Result<BulkAction> ParseBulkAction(std::string_view text, std::string_view field) {
  return ParseName<BulkAction>(kBulkActionNames, text, field);
}
std::string_view BulkJobStateName(BulkJobState s) {
  return kBulkJobStateNames[static_cast<size_t>(s)];
}

}  // namespace chronoq
