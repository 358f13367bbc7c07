#include "schedule/schedule_spec.h"

#include "chronoq/time.h"

namespace chronoq {

std::string OccurrenceId(std::string_view name, Timestamp at) {
  std::string id(name);
  id += '@';
  id += FormatTime(at);
  return id;
}

std::string OccurrencePayload(std::string_view payload, Timestamp at) {
  // `payload` is a compact JSON object (ValidateScheduleSpec): splice the
  // member in rather than parse it again.
  std::string out = "{\"scheduled_for\":\"" + FormatTime(at) + "\"";
  if (payload.size() > 2) out += ',';
  out.append(payload.substr(1));
  return out;
}

}  // namespace chronoq
