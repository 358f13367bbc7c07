// Subprocess: starts a program and waits for it, with deadlines.
//
// Every child is started with posix_spawn, never with a bare fork(). In a
// process with threads, fork() copies only the calling thread: a lock that
// another thread held at that instant (the allocator's, under ASan) stays
// held forever in the child, and anything but an async-signal-safe call
// before exec may block on it. That once hung `make test` for 10 minutes.
// posix_spawn builds everything (argv, environment, descriptors) in the
// parent, before the child exists.
//
//   SpawnOptions o;
//   o.argv = {"/usr/bin/env"};
//   o.stdout_mode = Stdio::kPipe;
//   CHRONOQ_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Spawn(o));
//   CHRONOQ_ASSIGN_OR_RETURN(std::string line, p.ReadLine(Deadline(5s), "the first line"));
//   CHRONOQ_ASSIGN_OR_RETURN(int code, p.Wait(Deadline(5s)));
//
// Not thread-safe: one thread uses a Subprocess at a time (its pid may be
// signalled from anywhere).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chronoq/result.h"

#include <sys/types.h>

namespace chronoq {

using SteadyTime = std::chrono::steady_clock::time_point;
// Now + `d` on the steady clock: the deadline of a real wait (never of a
// test's timing, which runs on a fake clock).
inline SteadyTime Deadline(std::chrono::steady_clock::duration d) {
  return std::chrono::steady_clock::now() + d;
}

// What one of the child's standard streams is connected to.
enum class Stdio {
  kInherit,  // the parent's
  kPipe,     // a pipe the parent reads (stdout, stderr) or writes (stdin)
  kNull,     // /dev/null
  kFile,     // a file: SpawnOptions::*_file (truncated) for output, read for input
};

struct SpawnOptions {
  // argv[0] is the program: a path, or with `search_path` a name looked up in PATH.
  std::vector<std::string> argv;
  bool search_path = false;
  // "NAME=value" entries added to the parent's environment; each replaces
  // the variable of its name.
  std::vector<std::string> env;
  Stdio stdin_mode = Stdio::kInherit;
  Stdio stdout_mode = Stdio::kInherit;
  Stdio stderr_mode = Stdio::kInherit;
  std::string stdin_file, stdout_file, stderr_file;
  // Descriptors of the parent given to the child as the second number
  // (e.g. {pipe_write_end, 3}); they need not be inheritable.
  std::vector<std::pair<int, int>> pass_fds;
  // Puts the child in a process group of its own, so that a signal sent to
  // the terminal's group (Ctrl-C) does not reach it and Signal(sig, true)
  // reaches everything it started.
  bool new_process_group = false;
};

// write(2) to a pipe whose reader may be gone: EPIPE instead of a SIGPIPE
// that would end the process. Returns what write returns; errno as it sets.
ssize_t WriteNoSigpipe(int fd, std::string_view data);

class Subprocess {
 public:
  // What a finished program left: its exit code (as Wait() reports it) and
  // what it wrote to stdout and stderr.
  struct Completed {
    int code = -1;
    std::string out;
    std::string err;
  };
  // Runs a program to its end: feeds it `input` on stdin (then end of
  // file), collects its stdout and stderr, and reaps it. The three stdio
  // modes of `options` are ignored (all pipes). DeadlineExceeded, after
  // killing it, when it has not ended by `deadline`; the message quotes the
  // end of what it wrote so far.
  static Result<Completed> Run(SpawnOptions options, SteadyTime deadline,
                               std::string_view input = "");

  // Starts the program. The child gets every signal at its default and none
  // blocked, whatever the parent ignores or blocks. Errors: NotFound when
  // the program does not exist; Unavailable for any other failure to start
  // (the message names the program and the reason).
  static Result<Subprocess> Spawn(const SpawnOptions& options);

  Subprocess() = default;  // no child: running() is false
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // Kills (SIGKILL) and reaps the child if it is still running.
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // The parent's ends of the pipes asked for; -1 otherwise. Owned here.
  int stdin_fd() const { return stdin_fd_; }
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  // A descriptor that polls readable once the child has ended (a pidfd), so
  // one poll() can wait for its exit and its pipes together; then Poll()
  // reaps it. -1 on kernels without pidfd (before 5.3): call Poll() instead.
  int exit_fd() const { return pidfd_; }
  // Closes the child's stdin (it then reads end of file).
  void CloseStdin();

  // Reads the child's stdout (kPipe) up to and including the next '\n' and
  // returns the line without it. DeadlineExceeded when no whole line
  // arrived by `deadline`, Unavailable when stdout ended first; both
  // messages say they waited for `what` and quote what did arrive.
  Result<std::string> ReadLine(SteadyTime deadline, std::string_view what);

  // Sends `sig` to the child (to its whole group with `group`, which needs
  // new_process_group). False when it has already been reaped.
  bool Signal(int sig, bool group = false);

  // Waits for the child to end and reaps it: its exit code, or 128 + the
  // signal that killed it, as shells report it. DeadlineExceeded (the child
  // still running) when it has not ended by `deadline`.
  Result<int> Wait(SteadyTime deadline);
  // Wait without waiting: the exit code when the child has ended.
  std::optional<int> Poll();
  // SIGKILL, then reap; returns the exit code as Wait does (137 when the
  // kill ended it), or -1 when there was no child.
  int Kill();

  // A wait status as words: "exited with status 3", "was killed by signal 9".
  static std::string DescribeExit(int code);

 private:
  // Reaps the child if it has ended (waitpid WNOHANG).
  std::optional<int> Reap();
  void CloseAll();

  pid_t pid_ = -1;
  int pidfd_ = -1;  // readable once the child ends
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::string stdout_buffer_;  // read past the last line ReadLine returned
};

}  // namespace chronoq
