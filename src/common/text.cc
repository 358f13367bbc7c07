#include "common/text.h"

#include <cstdint>

namespace chronoq {

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

Status ValidateText(std::string_view text, std::string_view field) {
  if (text.empty()) return Status::InvalidArgument(field, "must not be empty");
  if (std::string_view why = BadText(text, /*tabs=*/false); !why.empty()) {
    return Status::InvalidArgument(field, std::string(why));
  }
  return {};
}

Status ValidateNameChars(std::string_view name, std::string_view field) {
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok) return Status::InvalidArgument(field, "may contain only A-Z a-z 0-9 _ - . :");
  }
  return {};
}

std::string TruncateUtf8(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t end = max;
  // Step back over continuation bytes so a multi-byte sequence is not split.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

}  // namespace chronoq
