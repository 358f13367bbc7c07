// ChronoqdProcess: the real chronoqd binary as a child process, for the
// end-to-end tests and the load generator's http target. It listens on a free
// loopback port (it prints the port on its first stdout line) with its data
// in a directory the caller owns, so it can be killed with SIGKILL and started
// again on the same data.
//
//   test::ChronoqdProcess server({.binary = CHRONOQD_PATH, .data_dir = dir.File("data")});
//   ASSERT_THAT(server.Start(), IsOk());
//   auto client = cli::HttpClient::Create(server.url(), 30s);
//   ...
//   EXPECT_THAT(server.Stop(SIGTERM), IsOkAndHolds(0));  // the exit status
//
// Every wait has a deadline and its error says what it waited for. The child
// is started with posix_spawn (common/subprocess.h): the tests that start it
// have threads of their own running.
//
// Not thread-safe; url() and port() may be read from any thread while no
// Start() or Stop() runs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "chronoq/result.h"

#include "common/subprocess.h"

namespace chronoq::test {

struct ChronoqdOptions {
  std::string binary;             // the chronoqd executable
  std::string data_dir;           // --data
  std::vector<std::string> args;  // more flags
  std::vector<std::string> env;   // "NAME=value" added to the environment
  // chronoqd's stderr (its log) goes to this file, truncated at each
  // Start(); empty: to the parent's stderr.
  std::string log;
  // How long Start() waits for the "listening on" line, and Stop() for the exit.
  std::chrono::seconds start_timeout{60};
  std::chrono::seconds stop_timeout{60};
  // A program (looked up in PATH) and its arguments that run chronoqd, e.g.
  // {"prlimit", "--nofile=128:128", "--"}; empty: chronoqd itself. The
  // wrapper must exec chronoqd, so that signals reach it.
  std::vector<std::string> wrapper;
};

class ChronoqdProcess {
 public:
  explicit ChronoqdProcess(ChronoqdOptions options) : options_(std::move(options)) {}
  ChronoqdProcess(const ChronoqdProcess&) = delete;
  ChronoqdProcess& operator=(const ChronoqdProcess&) = delete;
  // Kills chronoqd (SIGKILL) if it is still running.
  ~ChronoqdProcess() = default;

  // Starts chronoqd and waits for its "listening on" line. The error says
  // what went wrong: the binary is missing, chronoqd exited (with its
  // status), or the line did not come within start_timeout; with a log file,
  // the message ends with the log's tail.
  Status Start();

  // Sends `sig` and waits up to stop_timeout for chronoqd to end: its exit
  // code, or 128 + the signal that killed it. DeadlineExceeded (after a
  // SIGKILL, so no process is left behind) when it did not end in time.
  Result<int> Stop(int sig);

  bool running() const { return process_.running(); }
  pid_t pid() const { return process_.pid(); }
  int port() const { return port_; }
  // "http://127.0.0.1:PORT", or https:// when chronoqd serves TLS (--tls-cert).
  std::string url() const { return scheme_ + "://127.0.0.1:" + std::to_string(port_); }
  // The last `max` bytes of the log file ("" without one).
  std::string LogTail(size_t max = 2000) const;

 private:
  // `message`, plus the log's tail when there is a log file.
  std::string WithLog(const std::string& message) const;

  const ChronoqdOptions options_;
  Subprocess process_;
  int port_ = 0;
  std::string scheme_ = "http";  // as chronoqd's "listening on" line said
};

}  // namespace chronoq::test
