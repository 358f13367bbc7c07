// cli/import.h: the progress line of `chronoq import` (import.cc), which
// tests check on its own: what the terminal shows depends on how far the
// sending thread has come, so the command's output cannot pin it down.
// Internal to src/cli and its tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace chronoq::cli {

// The line redrawn on a terminal after each batch: with the input's size
// known, "[#########-----------]  45%  450,000 tasks  210,512/s  ETA 3.00s";
// else "450,000 tasks  210,512/s". `done_bytes` is how much of the input the
// stored batches came from; `seconds` how long the import has run.
std::string ProgressLine(int64_t stored, double seconds, uint64_t done_bytes,
                         std::optional<uint64_t> total_bytes);

}  // namespace chronoq::cli
