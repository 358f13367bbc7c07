#include "schedule/schedule_spec.h"

#include <array>

#include <nlohmann/json.hpp>

#include "chronoq/time.h"

#include "common/names.h"
#include "core/validate.h"

namespace chronoq {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::array<std::string_view, 3> kMisfireNames = {"skip", "run_once", "run_all"};
constexpr std::array<std::string_view, 3> kOverlapNames = {"allow", "skip", "queue_one"};
constexpr std::array<std::string_view, 2> kDstGapNames = {"run_after", "skip"};
constexpr std::array<std::string_view, 2> kDstRepeatNames = {"once", "twice"};

int64_t Micros(Duration d) { return d.count(); }
int64_t Micros(Timestamp t) { return t.time_since_epoch().count(); }

Status ValidateInterval(Duration d, std::string_view field) {
  if (d < kMinScheduleInterval) return Status::InvalidArgument(field, "must be at least 1 ms");
  if (d > kMaxScheduleInterval) return Status::InvalidArgument(field, "must be at most 10 years");
  return {};
}

}  // namespace

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

Status ValidateScheduleName(std::string_view name, std::string_view field) {
  if (name.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (name.size() > kMaxScheduleNameBytes) {
    return Status::InvalidArgument(field, "longer than 150 bytes");
  }
  if (name[0] == '_') {
    return Status::InvalidArgument(field, "must not start with '_' (reserved for generated ids)");
  }
  return ValidateNameChars(name, field);
}

Result<ScheduleSpec> ValidateScheduleSpec(const ScheduleSpec& spec, Timestamp now) {
  ScheduleSpec out = spec;
  CHRONOQ_RETURN_IF_ERROR(ValidateScheduleName(spec.name));
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(spec.queue));
  const int kinds =
      int{spec.cron.has_value()} + int{spec.every.has_value()} + int{spec.fixed_delay.has_value()};
  if (kinds != 1) {
    return Status::InvalidArgument(
        "cron", kinds == 0 ? "one of cron, every_ms and fixed_delay_ms is required"
                           : "give only one of cron, every_ms and fixed_delay_ms");
  }
  if (spec.cron) {
    CronOptions options{spec.tz.value_or("UTC"), spec.dst_gap, spec.dst_repeat};
    CHRONOQ_RETURN_IF_ERROR(CronExpr::Parse(*spec.cron, options).status());
    out.tz = options.tz;
  } else {
    if (spec.tz) return Status::InvalidArgument("tz", "applies to cron schedules only");
    if (spec.dst_gap) return Status::InvalidArgument("dst_gap", "applies to cron schedules only");
    if (spec.dst_repeat) {
      return Status::InvalidArgument("dst_repeat", "applies to cron schedules only");
    }
  }
  if (spec.every) CHRONOQ_RETURN_IF_ERROR(ValidateInterval(*spec.every, "every_ms"));
  if (spec.fixed_delay)
    CHRONOQ_RETURN_IF_ERROR(ValidateInterval(*spec.fixed_delay, "fixed_delay_ms"));
  if (spec.start) CHRONOQ_RETURN_IF_ERROR(ValidateDue(*spec.start, now, "start"));

  CHRONOQ_RETURN_IF_ERROR(ValidatePayload(spec.payload, "payload"));
  const OrderedJson payload = OrderedJson::parse(spec.payload);
  if (!payload.is_object()) return Status::InvalidArgument("payload", "must be a JSON object");
  if (payload.contains("scheduled_for")) {
    return Status::InvalidArgument(
        "payload", "must not have a scheduled_for member (each occurrence gets one)");
  }
  out.payload = payload.dump();

  if (spec.max_catchup < 1 || spec.max_catchup > kMaxCatchupLimit) {
    return Status::InvalidArgument("max_catchup", "must be between 1 and 10000");
  }
  if (spec.max_attempts < 0 || spec.max_attempts > kMaxAttemptsLimit) {
    return Status::InvalidArgument("max_attempts", "must be between 1 and 1000");
  }
  if (spec.target) CHRONOQ_RETURN_IF_ERROR(ValidateTarget(*spec.target));
  return out;
}

std::string EncodeScheduleSpec(const ScheduleSpec& spec) {
  OrderedJson j;
  j["name"] = spec.name;
  j["queue"] = spec.queue;
  if (spec.cron) j["cron"] = *spec.cron;
  if (spec.every) j["every_us"] = Micros(*spec.every);
  if (spec.fixed_delay) j["fixed_delay_us"] = Micros(*spec.fixed_delay);
  if (spec.tz) j["tz"] = *spec.tz;
  if (spec.dst_gap) j["dst_gap"] = DstGapName(*spec.dst_gap);
  if (spec.dst_repeat) j["dst_repeat"] = DstRepeatName(*spec.dst_repeat);
  if (spec.start) j["start_us"] = Micros(*spec.start);
  j["payload"] = OrderedJson::parse(spec.payload);
  j["misfire"] = MisfireName(spec.misfire);
  j["max_catchup"] = spec.max_catchup;
  j["overlap"] = OverlapName(spec.overlap);
  if (spec.priority != 0) j["priority"] = spec.priority;
  if (spec.max_attempts != 0) j["max_attempts"] = spec.max_attempts;
  if (spec.target) j["target"] = OrderedJson::parse(EncodeTarget(*spec.target));
  return j.dump();
}

Result<ScheduleSpec> DecodeScheduleSpec(std::string_view json) {
  const OrderedJson j = OrderedJson::parse(json, nullptr, /*allow_exceptions=*/false);
  auto corrupt = [&](std::string_view what) {
    return Status(StatusCode::kDataLoss, "stored schedule is corrupt (" + std::string(what) + ")");
  };
  if (!j.is_object()) return corrupt("not an object");
  try {
    ScheduleSpec s;
    s.name = j.at("name").get<std::string>();
    s.queue = j.at("queue").get<std::string>();
    if (j.contains("cron")) s.cron = j["cron"].get<std::string>();
    if (j.contains("every_us")) s.every = Duration(j["every_us"].get<int64_t>());
    if (j.contains("fixed_delay_us")) s.fixed_delay = Duration(j["fixed_delay_us"].get<int64_t>());
    if (j.contains("tz")) s.tz = j["tz"].get<std::string>();
    if (j.contains("dst_gap")) {
      CHRONOQ_ASSIGN_OR_RETURN(s.dst_gap, ParseDstGap(j["dst_gap"].get<std::string>()));
    }
    if (j.contains("dst_repeat")) {
      CHRONOQ_ASSIGN_OR_RETURN(s.dst_repeat, ParseDstRepeat(j["dst_repeat"].get<std::string>()));
    }
    if (j.contains("start_us")) s.start = Timestamp(Duration(j["start_us"].get<int64_t>()));
    s.payload = j.at("payload").dump();
    CHRONOQ_ASSIGN_OR_RETURN(s.misfire, ParseMisfire(j.at("misfire").get<std::string>()));
    s.max_catchup = j.at("max_catchup").get<int>();
    CHRONOQ_ASSIGN_OR_RETURN(s.overlap, ParseOverlap(j.at("overlap").get<std::string>()));
    s.priority = j.value("priority", 0);
    s.max_attempts = j.value("max_attempts", 0);
    if (j.contains("target")) {
      s.target = DecodeTarget(j["target"].dump());
      if (!s.target) return corrupt("target");
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return corrupt(e.what());
  }
}

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
