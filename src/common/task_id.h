// Task ids and sequence numbers.
//
// Every task row has a `seq`: a 64-bit, strictly increasing, time-ordered
// number, (creation unix-ms << 16) | counter. It is the row's primary key, its
// creation time and its enqueue order. A task without a client-chosen id is
// known by its generated id, "_" followed by seq as 16 hex digits, which sorts
// like seq; client-chosen ids may therefore not start with "_".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "chronoq/clock.h"

namespace chronoq {

inline constexpr int kSeqCounterBits = 16;

std::string FormatGeneratedId(int64_t seq);
// The seq of a generated id, or nothing if `id` is not one.
std::optional<int64_t> ParseGeneratedId(std::string_view id);
// When the task with this seq was created (millisecond precision).
Timestamp SeqCreatedAt(int64_t seq);

// Hands out seqs. Not thread-safe (the engine loop owns it).
class SeqGenerator {
 public:
  explicit SeqGenerator(int64_t last) : last_(last) {}
  // A seq larger than every previous one and, unless more than 65,536 were
  // taken in one millisecond, equal to (now_ms << 16) | n.
  int64_t Next(Timestamp now);
  // The last seq handed out (or the one it started from).
  int64_t last() const { return last_; }

 private:
  int64_t last_;
};

}  // namespace chronoq
