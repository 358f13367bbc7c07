#include "chronoq/task.h"

#include <array>

namespace chronoq {
namespace {

constexpr std::array<std::string_view, 5> kStateNames = {"scheduled", "running", "succeeded",
                                                         "cancelled", "dead"};
constexpr std::array<std::string_view, 3> kConflictNames = {"reject", "ignore", "replace"};

// Finds `text` among `names`; the index is the enum value.
template <typename Enum, size_t N>
Result<Enum> ParseName(const std::array<std::string_view, N>& names, std::string_view text,
                       std::string_view field) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == text) return static_cast<Enum>(i);
  }
  std::string expected;
  for (size_t i = 0; i < N; ++i) expected.append(i ? ", " : "").append(names[i]);
  return Status::InvalidArgument(field, "must be one of " + expected);
}

}  // namespace

std::string_view TaskStateName(TaskState state) { return kStateNames[static_cast<size_t>(state)]; }

Result<TaskState> ParseTaskState(std::string_view text, std::string_view field) {
  return ParseName<TaskState>(kStateNames, text, field);
}

Result<OnConflict> ParseOnConflict(std::string_view text, std::string_view field) {
  return ParseName<OnConflict>(kConflictNames, text, field);
}

}  // namespace chronoq
