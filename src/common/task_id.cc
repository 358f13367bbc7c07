#include "common/task_id.h"

#include <algorithm>

namespace chronoq {

std::string FormatGeneratedId(int64_t seq) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(17, '_');
  auto v = static_cast<uint64_t>(seq);
  for (int i = 16; i >= 1; --i, v >>= 4) id[static_cast<size_t>(i)] = kHex[v & 0xf];
  return id;
}

std::optional<int64_t> ParseGeneratedId(std::string_view id) {
  if (id.size() != 17 || id[0] != '_') return std::nullopt;
  uint64_t v = 0;
  for (char c : id.substr(1)) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(v);
}

Timestamp SeqCreatedAt(int64_t seq) {
  return Timestamp(std::chrono::milliseconds(seq >> kSeqCounterBits));
}

int64_t SeqGenerator::Next(Timestamp now) {
  const int64_t ms = std::chrono::floor<std::chrono::milliseconds>(now).time_since_epoch().count();
  last_ = std::max(last_ + 1, std::max<int64_t>(ms, 0) << kSeqCounterBits);
  return last_;
}

}  // namespace chronoq
