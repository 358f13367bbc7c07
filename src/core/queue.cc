#include "chronoq/queue.h"

#include <array>

namespace chronoq {
namespace {

// In QueueSetting order: the QueueSettings members.
constexpr std::array<std::string_view, 7> kSettingNames = {
    "concurrency",           "max_attempts",       "backoff", "retention", "rate_limit",
    "max_in_flight_per_key", "max_pending_per_key"};

}  // namespace

std::string_view QueueSettingName(QueueSetting setting) {
  return kSettingNames[static_cast<size_t>(setting)];
}

}  // namespace chronoq
