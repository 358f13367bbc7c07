// Enum <-> name tables for the public enums' Parse*/…Name functions.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "chronoq/result.h"

namespace chronoq {

// Finds `text` among `names`; the index is the enum value. Otherwise
// InvalidArgument naming `field` and listing the names.
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

}  // namespace chronoq
