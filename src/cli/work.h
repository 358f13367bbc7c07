// cli/work.h: the pieces of `chronoq work` (work.cc) that tests check on
// their own. Internal to src/cli and its tests.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace chronoq::cli {

// How much of a failed command's stderr goes into the task's error. chronoqd
// keeps at most 4096 bytes of an error; this leaves room for the status.
inline constexpr size_t kStderrTailBytes = 2048;

// The end of `bytes` as valid UTF-8 of at most `max_bytes`: invalid
// sequences become U+FFFD, the cut falls between characters, and trailing
// whitespace goes. Command output is bytes; chronoq's JSON must be UTF-8.
std::string Utf8Tail(std::string_view bytes, size_t max_bytes);

// The `error` a failed task gets: "exited with status 3: <stderr tail>",
// "killed by signal 9 (Killed): <tail>", or when chronoq killed it on a
// second SIGTERM, "interrupted: chronoq work was stopped and killed it".
// `code` is Subprocess::Wait's (128 + the signal when a signal ended it).
std::string FailureMessage(int code, bool interrupted, std::string_view stderr_tail);

}  // namespace chronoq::cli
