#include "core/validate.h"

#include <algorithm>
#include <array>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace chronoq {
namespace {

std::string Field(std::string_view prefix, std::string_view name) {
  std::string f(prefix);
  f.append(name);
  return f;
}

// An HTTP token character (RFC 9110 tchar).
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

// Checks that `text` is UTF-8 without control characters (tabs allowed when
// `tabs`); the reason, or empty.
std::string_view BadText(std::string_view text, bool tabs) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) return "not valid UTF-8";
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c0 = n == 1 && ((c < 0x20 && !(tabs && c == '\t')) || c == 0x7f);
    const bool c1 = n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
    if (c0 || c1) return "must not contain control characters (CR, LF, ...)";
    i += n;
  }
  return {};
}

constexpr std::array<std::string_view, 5> kTargetMethods = {"POST", "PUT", "PATCH", "GET",
                                                            "DELETE"};

}  // namespace

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

Status ValidateQueueName(std::string_view queue, std::string_view field) {
  if (queue.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (queue.size() > kMaxQueueNameBytes) {
    return Status::InvalidArgument(field, "longer than 100 bytes");
  }
  return ValidateNameChars(queue, field);
}

Status ValidateNameChars(std::string_view name, std::string_view field) {
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok) return Status::InvalidArgument(field, "may contain only A-Z a-z 0-9 _ - . :");
  }
  return {};
}

Status ValidateTaskId(std::string_view id, std::string_view field) {
  if (id.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (id.size() > kMaxIdBytes) return Status::InvalidArgument(field, "longer than 200 bytes");
  if (id[0] == '_') {
    return Status::InvalidArgument(field, "must not start with '_' (reserved for generated ids)");
  }
  return ValidateText(id, field);
}

Status ValidateTaskKey(std::string_view key, std::string_view field) {
  if (key.size() > kMaxKeyBytes) return Status::InvalidArgument(field, "longer than 200 bytes");
  return ValidateText(key, field);
}

Status ValidateText(std::string_view text, std::string_view field) {
  if (text.empty()) return Status::InvalidArgument(field, "must not be empty");
  const std::string_view id = text;
  for (size_t i = 0; i < id.size();) {
    const size_t n = Utf8SequenceLength(id, i);
    if (n == 0) return Status::InvalidArgument(field, "not valid UTF-8");
    // C0 controls and DEL, and C1 controls (U+0080-U+009F, encoded C2 80-9F).
    const auto c = static_cast<unsigned char>(id[i]);
    const bool c0 = n == 1 && (c < 0x20 || c == 0x7f);
    const bool c1 = n == 2 && c == 0xc2 && static_cast<unsigned char>(id[i + 1]) < 0xa0;
    if (c0 || c1) return Status::InvalidArgument(field, "must not contain control characters");
    i += n;
  }
  return {};
}

Status ValidatePayload(std::string_view payload, std::string_view field) {
  if (payload.size() > kMaxPayloadBytes) {
    return Status::InvalidArgument(field, "larger than 256 KiB");
  }
  if (!nlohmann::json::accept(payload)) return Status::InvalidArgument(field, "not valid JSON");
  return {};
}

Status ValidateLease(Duration lease, std::string_view field) {
  if (lease < kMinLease) return Status::InvalidArgument(field, "must be at least 1 ms");
  if (lease > kMaxLease) return Status::InvalidArgument(field, "must be at most 7 days");
  return {};
}

Status ValidateDue(Timestamp due, Timestamp now, std::string_view field) {
  if (due < Timestamp()) return Status::InvalidArgument(field, "before 1970");
  if (due > now + kMaxDelay) return Status::InvalidArgument(field, "more than 100 years ahead");
  return {};
}

Status ValidateTarget(const WebhookTarget& target, std::string_view field) {
  const std::string url_field = Field(field, ".url");
  const std::string_view url = target.url;
  if (url.empty()) return Status::InvalidArgument(url_field, "must not be empty");
  if (url.size() > kMaxTargetUrlBytes) {
    return Status::InvalidArgument(url_field, "longer than 2048 bytes");
  }
  size_t host = 0;
  if (StartsWithNoCase(url, "http://")) {
    host = 7;
  } else if (StartsWithNoCase(url, "https://")) {
    host = 8;
  } else {
    return Status::InvalidArgument(url_field, "must start with http:// or https://");
  }
  if (host == url.size() || url[host] == '/' || url[host] == '?' || url[host] == '#') {
    return Status::InvalidArgument(url_field, "has no host");
  }
  for (char c : url) {
    // Printable ASCII only: anything else must be percent-encoded.
    if (c <= ' ' || c == 0x7f) {
      return Status::InvalidArgument(url_field,
                                     "must not contain spaces, control characters or non-ASCII "
                                     "bytes (percent-encode them)");
    }
  }

  if (std::find(kTargetMethods.begin(), kTargetMethods.end(), target.method) ==
      kTargetMethods.end()) {
    return Status::InvalidArgument(Field(field, ".method"),
                                   "must be one of POST, PUT, PATCH, GET, DELETE");
  }

  if (target.headers.size() > kMaxTargetHeaders) {
    return Status::InvalidArgument(Field(field, ".headers"), "more than 32 headers");
  }
  for (size_t i = 0; i < target.headers.size(); ++i) {
    const auto& [name, value] = target.headers[i];
    const std::string at = Field(field, ".headers[" + std::to_string(i) + "]");
    if (name.empty()) return Status::InvalidArgument(at + ".name", "must not be empty");
    if (name.size() > 256) return Status::InvalidArgument(at + ".name", "longer than 256 bytes");
    if (!std::all_of(name.begin(), name.end(), IsTokenChar)) {
      return Status::InvalidArgument(at + ".name", "must be an HTTP token (no spaces, CR, LF, :)");
    }
    if (value.size() > kMaxTargetHeaderValueBytes) {
      return Status::InvalidArgument(at + ".value", "longer than 8 KiB");
    }
    if (std::string_view why = BadText(value, /*tabs=*/true); !why.empty()) {
      return Status::InvalidArgument(at + ".value", std::string(why));
    }
  }

  if (target.timeout < kMinTargetTimeout || target.timeout > kMaxTargetTimeout) {
    return Status::InvalidArgument(Field(field, ".timeout"), "must be between 1 ms and 5 minutes");
  }
  return {};
}

Status ValidateQueueSettings(const QueueSettings& s, const std::vector<QueueSetting>& reset) {
  for (QueueSetting field : reset) {
    if (WithQueueSetting(s, field, [](const auto& value) { return value.has_value(); })) {
      return Status::InvalidArgument(QueueSettingName(field), "is both given and reset");
    }
  }
  if (s.concurrency && (*s.concurrency < 1 || *s.concurrency > kMaxQueueConcurrency)) {
    return Status::InvalidArgument("concurrency", "must be between 1 and 100000");
  }
  if (s.max_attempts && (*s.max_attempts < 1 || *s.max_attempts > kMaxAttemptsLimit)) {
    return Status::InvalidArgument("max_attempts", "must be between 1 and 1000");
  }
  if (s.backoff) {
    if (s.backoff->base < std::chrono::milliseconds(1)) {
      return Status::InvalidArgument("backoff.base", "must be at least 1 ms");
    }
    if (s.backoff->cap < s.backoff->base || s.backoff->cap > kMaxQueueBackoffCap) {
      return Status::InvalidArgument("backoff.cap",
                                     "must be at least backoff.base and at most 7 days");
    }
  }
  if (s.retention && (*s.retention < Duration::zero() || *s.retention > kMaxQueueRetention)) {
    return Status::InvalidArgument("retention", "must be between 0 and 3650 days");
  }
  if (s.max_in_flight_per_key &&
      (*s.max_in_flight_per_key < 1 || *s.max_in_flight_per_key > kMaxInFlightPerKey)) {
    return Status::InvalidArgument("max_in_flight_per_key", "must be between 1 and 100000");
  }
  if (s.max_pending_per_key &&
      (*s.max_pending_per_key < 1 || *s.max_pending_per_key > kMaxPendingPerKey)) {
    return Status::InvalidArgument("max_pending_per_key", "must be between 1 and 1000000000");
  }
  if (s.rate_limit) {
    if (s.rate_limit->count < 1 || s.rate_limit->count > kMaxRateLimitCount) {
      return Status::InvalidArgument("rate_limit.count", "must be between 1 and 1000000");
    }
    if (s.rate_limit->period < std::chrono::milliseconds(1) ||
        s.rate_limit->period > kMaxRateLimitPeriod) {
      return Status::InvalidArgument("rate_limit.period", "must be between 1 ms and 1 day");
    }
  }
  return {};
}

std::string EncodeTarget(const WebhookTarget& target) {
  nlohmann::json j = nlohmann::json::object();
  j["url"] = target.url;
  if (target.method != "POST") j["method"] = target.method;
  if (!target.headers.empty()) {
    nlohmann::json headers = nlohmann::json::array();
    for (const auto& [name, value] : target.headers) headers.push_back({name, value});
    j["headers"] = std::move(headers);
  }
  if (target.timeout != kDefaultTargetTimeout) j["timeout_us"] = target.timeout.count();
  // Validated targets are UTF-8; replace() only guards against unvalidated ones.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<WebhookTarget> DecodeTarget(std::string_view json) {
  try {
    const nlohmann::json j = nlohmann::json::parse(json);
    WebhookTarget t;
    t.url = j.at("url").get<std::string>();
    if (auto it = j.find("method"); it != j.end()) t.method = it->get<std::string>();
    if (auto it = j.find("headers"); it != j.end()) {
      for (const nlohmann::json& h : *it) {
        t.headers.emplace_back(h.at(0).get<std::string>(), h.at(1).get<std::string>());
      }
    }
    if (auto it = j.find("timeout_us"); it != j.end()) t.timeout = Duration(it->get<int64_t>());
    return t;
  } catch (const std::exception& e) {
    spdlog::warn("stored webhook target is not valid: {}", e.what());
    return std::nullopt;
  }
}

Result<ValidTask> ValidateTaskSpec(const TaskSpec& spec, Timestamp now, int default_max_attempts,
                                   std::string_view prefix) {
  ValidTask t;
  CHRONOQ_RETURN_IF_ERROR(ValidateQueueName(spec.queue, Field(prefix, "queue")));
  t.queue = spec.queue;
  CHRONOQ_RETURN_IF_ERROR(ValidatePayload(spec.payload, Field(prefix, "payload")));
  t.payload = spec.payload;

  if (spec.run_at.has_value() && spec.delay.has_value()) {
    return Status::InvalidArgument(Field(prefix, "delay"), "give run_at or delay, not both");
  }
  if (spec.delay.has_value()) {
    if (*spec.delay < Duration::zero()) {
      return Status::InvalidArgument(Field(prefix, "delay"), "must not be negative");
    }
    if (*spec.delay > kMaxDelay) {
      return Status::InvalidArgument(Field(prefix, "delay"), "more than 100 years");
    }
    t.due = now + *spec.delay;
  } else if (spec.run_at.has_value()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateDue(*spec.run_at, now, Field(prefix, "run_at")));
    t.due = *spec.run_at;
  } else {
    t.due = now;
  }

  if (!spec.id.empty()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateTaskId(spec.id, Field(prefix, "id")));
    t.name = spec.id;
  }
  t.on_conflict = spec.on_conflict;
  if (!spec.key.empty()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateTaskKey(spec.key, Field(prefix, "key")));
    t.key = spec.key;
  }

  if (spec.max_attempts < 0 || spec.max_attempts > kMaxAttemptsLimit) {
    return Status::InvalidArgument(Field(prefix, "max_attempts"), "must be between 1 and 1000");
  }
  t.max_attempts = spec.max_attempts == 0 ? default_max_attempts : spec.max_attempts;
  t.priority = spec.priority;

  if (spec.backoff.has_value()) {
    const Backoff& b = *spec.backoff;
    if (b.base <= Duration::zero()) {
      return Status::InvalidArgument(Field(prefix, "backoff.base"), "must be positive");
    }
    if (b.cap < b.base || b.cap > kMaxDelay) {
      return Status::InvalidArgument(Field(prefix, "backoff.cap"),
                                     "must be at least backoff.base and at most 100 years");
    }
    t.backoff = b;
  }

  if (spec.target.has_value()) {
    CHRONOQ_RETURN_IF_ERROR(ValidateTarget(*spec.target, Field(prefix, "target")));
    t.target = EncodeTarget(*spec.target);
  }
  return t;
}

std::string TruncateUtf8(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t end = max;
  // Step back over continuation bytes so a multi-byte sequence is not split.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

}  // namespace chronoq
