#include "chronoq/task.h"

#include <array>

#include "common/names.h"

namespace chronoq {
namespace {

constexpr std::array<std::string_view, 5> kStateNames = {"scheduled", "running", "succeeded",
                                                         "cancelled", "dead"};
constexpr std::array<std::string_view, 3> kConflictNames = {"reject", "ignore", "replace"};

}  // namespace

std::string_view TaskStateName(TaskState state) { return kStateNames[static_cast<size_t>(state)]; }

Result<TaskState> ParseTaskState(std::string_view text, std::string_view field) {
  return ParseName<TaskState>(kStateNames, text, field);
}

Result<OnConflict> ParseOnConflict(std::string_view text, std::string_view field) {
  return ParseName<OnConflict>(kConflictNames, text, field);
}

}  // namespace chronoq
