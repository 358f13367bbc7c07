// ChronoqdProcess: the real chronoqd binary as a child process, for
// end-to-end tests. It listens on a free loopback port (it prints the port on
// its first line) with its data in a directory the test owns, so a test can
// kill it with SIGKILL and start it again on the same data.
//
//   test::TempDir dir;
//   test::ChronoqdProcess server(dir.File("data"));
//   ASSERT_TRUE(server.Start());
//   auto client = cli::HttpClient::Create(server.url(), 30s);
//   ...
//   EXPECT_EQ(server.Stop(SIGTERM), 0);  // the exit status
#pragma once

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace chronoq::test {

class ChronoqdProcess {
 public:
  // `env` entries are "NAME=value" added to the child's environment.
  explicit ChronoqdProcess(std::string data_dir, std::vector<std::string> args = {},
                           std::vector<std::string> env = {})
      : data_dir_(std::move(data_dir)), args_(std::move(args)), env_(std::move(env)) {}
  ~ChronoqdProcess() {
    if (pid_ > 0) Stop(SIGKILL);
  }

  // Starts chronoqd and waits for its "listening on" line. False when it
  // exited instead (its stderr goes to the test's).
  bool Start() {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      for (const std::string& e : env_) putenv(const_cast<char*>(e.c_str()));
      std::vector<std::string> argv_s = {CHRONOQD_PATH, "--listen", "127.0.0.1:0", "--data",
                                         data_dir_};
      argv_s.insert(argv_s.end(), args_.begin(), args_.end());
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(CHRONOQD_PATH, argv.data());
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    char line[512] = {};
    const bool got = fgets(line, sizeof line, f) != nullptr;
    fclose(f);  // chronoqd prints nothing else on stdout
    const char* at = got ? std::strstr(line, "http://127.0.0.1:") : nullptr;
    if (at == nullptr) {
      Stop(SIGKILL);
      return false;
    }
    port_ = std::atoi(at + std::strlen("http://127.0.0.1:"));
    return port_ > 0;
  }

  // Sends `sig` and reaps the child; returns its exit code, or 128 + the
  // signal that killed it.
  int Stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string data_dir_;
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace chronoq::test
