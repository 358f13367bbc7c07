#include "core/validate.h"

#include <nlohmann/json.hpp>

namespace chronoq {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
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

std::string Field(std::string_view prefix, std::string_view name) {
  std::string f(prefix);
  f.append(name);
  return f;
}

}  // namespace

Status ValidateQueueName(std::string_view queue, std::string_view field) {
  if (queue.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (queue.size() > kMaxQueueNameBytes) {
    return Status::InvalidArgument(field, "longer than 100 bytes");
  }
  for (char c : queue) {
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
