// cli/commands.h: the `chronoq` command-line client.
//
// RunCli parses a command line, turns it into one (or, for `list --all`,
// several) requests to chronoqd's HTTP/JSON API and prints the answer:
//
//   chronoq enqueue --queue expire-share --id share:42 --delay 7d --payload '{"share":42}'
//   chronoq list --queue expire-share --state scheduled
//   chronoq --json get share:42
//
// Tests call RunCli directly with their own streams and environment.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chronoq::cli {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitServerError = 1;  // the server answered with an error
inline constexpr int kExitUsage = 2;        // bad command line; nothing was sent
inline constexpr int kExitUnreachable = 3;  // no answer: connection refused, timeout, ...
// `lock`: the lock stayed held by another for the whole --wait (EX_TEMPFAIL);
// otherwise `lock` exits with its command's status.
inline constexpr int kExitLockBusy = 75;

// What a command may read and write besides the network.
struct CliIo {
  std::ostream& out;  // results
  std::ostream& err;  // errors and hints
  std::istream& in;   // `--payload-file -`
  // Looks up an environment variable (CHRONOQ_URL, CHRONOQ_TOKEN).
  std::function<std::optional<std::string>(std::string_view)> getenv;
  // Whether `out` and `err` are terminals: `import` draws a progress bar on
  // err, `stats --watch` clears the screen on out.
  bool out_is_terminal = false;
  bool err_is_terminal = false;
};

// Runs one command. `args` excludes the program name. Returns an exit code
// above. Not thread-safe with respect to `io`.
int RunCli(const std::vector<std::string>& args, const CliIo& io);

// main()'s entry: std::cin, the process environment, and isatty() of
// stdout and stderr.
int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace chronoq::cli
