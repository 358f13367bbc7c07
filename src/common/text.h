// Text checks shared by every layer that takes names and ids from outside:
// UTF-8 validity, control characters, the characters of names, and cutting
// text to a byte budget without splitting a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "chronoq/status.h"

namespace chronoq {

// Non-empty UTF-8 without control characters (C0, DEL, C1). Errors are
// InvalidArgument naming `field`.
Status ValidateText(std::string_view text, std::string_view field);
// Only A-Z a-z 0-9 _ - . : (queue and schedule names). Errors name `field`.
Status ValidateNameChars(std::string_view name, std::string_view field);
// Why `text` is not UTF-8 without control characters (tabs allowed when
// `tabs`), or empty when it is.
std::string_view BadText(std::string_view text, bool tabs);
// The length (1-4) of the valid UTF-8 sequence that starts at s[i], or 0
// when none does: overlong forms, surrogates and code points past U+10FFFF
// are not valid. REQUIRES: i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);
// Cuts `text` to at most `max` bytes without splitting a UTF-8 sequence.
std::string TruncateUtf8(std::string_view text, size_t max);

}  // namespace chronoq
