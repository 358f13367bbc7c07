#include "common/subprocess.h"

#include <csignal>
#include <cstring>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/status_matchers.h"
#include <fcntl.h>
#include <unistd.h>

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::IsOk;
using test::IsOkAndHolds;
using test::StatusIs;
using ::testing::HasSubstr;

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

TEST(SubprocessTest, RunCollectsOutputErrorsAndTheExitCode) {
  auto done = Subprocess::Run(Shell("echo out; echo err >&2; exit 3"), Deadline(30s));
  ASSERT_THAT(done, IsOk());
  EXPECT_EQ(done->code, 3);
  EXPECT_EQ(done->out, "out\n");
  EXPECT_EQ(done->err, "err\n");
}

TEST(SubprocessTest, RunFeedsStdinAndAddsToTheEnvironment) {
  SpawnOptions o = Shell("cat; echo \"$CHRONOQ_X\"");
  o.env = {"CHRONOQ_X=seen", "PATH=/usr/bin:/bin"};
  auto done = Subprocess::Run(o, Deadline(30s), "payload\n");
  ASSERT_THAT(done, IsOk());
  EXPECT_EQ(done->out, "payload\nseen\n");
}

TEST(SubprocessTest, AChildThatStopsReadingDoesNotKillTheParentWithSigpipe) {
  // 8 MiB is far more than a pipe holds; `true` reads none of it.
  const std::string big(8 << 20, 'x');
  auto done = Subprocess::Run(Shell("exec true"), Deadline(30s), big);
  ASSERT_THAT(done, IsOk());
  EXPECT_EQ(done->code, 0);
}

TEST(SubprocessTest, ReportsTheSignalThatEndedTheChild) {
  auto done = Subprocess::Run(Shell("kill -TERM $$"), Deadline(30s));
  ASSERT_THAT(done, IsOk());
  EXPECT_EQ(done->code, 128 + SIGTERM);
  EXPECT_THAT(Subprocess::DescribeExit(done->code), HasSubstr("signal 15"));
}

TEST(SubprocessTest, AMissingProgramIsNotFound) {
  SpawnOptions o;
  o.argv = {"/nonexistent/chronoq-no-such-program"};
  EXPECT_THAT(Subprocess::Spawn(o), StatusIs(StatusCode::kNotFound));
  o.argv = {"chronoq-no-such-program"};
  o.search_path = true;
  EXPECT_THAT(Subprocess::Spawn(o), StatusIs(StatusCode::kNotFound));
}

TEST(SubprocessTest, WaitGivesUpAtItsDeadlineAndKillReaps) {
  SpawnOptions o = Shell("exec sleep 600");
  auto p = Subprocess::Spawn(o);
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(p->Wait(Deadline(20ms)), StatusIs(StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(p->running());
  EXPECT_EQ(p->Poll(), std::nullopt);
  EXPECT_EQ(p->Kill(), 128 + SIGKILL);
  EXPECT_FALSE(p->running());
}

TEST(SubprocessTest, ReadLineReturnsLinesAndSaysWhatItAwaited) {
  SpawnOptions o = Shell("printf 'one\\ntwo\\npartial'");
  o.stdout_mode = Stdio::kPipe;
  auto p = Subprocess::Spawn(o);
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(p->ReadLine(Deadline(30s), "line one"), IsOkAndHolds(std::string("one")));
  EXPECT_THAT(p->ReadLine(Deadline(30s), "line two"), IsOkAndHolds(std::string("two")));
  Result<std::string> last = p->ReadLine(Deadline(30s), "a third line");
  EXPECT_THAT(last, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(last.status().message(), HasSubstr("a third line"));
  EXPECT_THAT(last.status().message(), HasSubstr("partial"));
  EXPECT_THAT(p->Wait(Deadline(30s)), IsOkAndHolds(0));

  SpawnOptions silent = Shell("exec sleep 600");
  silent.stdout_mode = Stdio::kPipe;
  auto q = Subprocess::Spawn(silent);
  ASSERT_THAT(q, IsOk());
  Result<std::string> none = q->ReadLine(Deadline(20ms), "the greeting");
  EXPECT_THAT(none, StatusIs(StatusCode::kDeadlineExceeded));
  EXPECT_THAT(none.status().message(), HasSubstr("the greeting"));
}

TEST(SubprocessTest, PassesDescriptorsUnderTheirNewNumbers) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  SpawnOptions o = Shell("echo hi >&5");
  o.pass_fds = {{fds[1], 5}};
  auto done = Subprocess::Run(o, Deadline(30s));
  close(fds[1]);
  ASSERT_THAT(done, IsOk());
  EXPECT_EQ(done->code, 0) << done->err;
  char buf[16] = {};
  EXPECT_EQ(read(fds[0], buf, sizeof buf), 3);
  EXPECT_STREQ(buf, "hi\n");
  close(fds[0]);
}

// True once process `pid` has ended (gone, or a zombie nobody reaped yet).
bool Ended(pid_t pid) {
  const int fd = open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY);
  if (fd < 0) return true;
  char buf[512] = {};
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  const char* paren = n > 0 ? strrchr(buf, ')') : nullptr;
  return paren == nullptr || paren[2] == 'Z' || paren[2] == 'X';
}

TEST(SubprocessTest, ASignalToTheGroupReachesTheGrandchildren) {
  SpawnOptions o = Shell("sleep 600 & echo $!; wait");
  o.new_process_group = true;
  o.stdout_mode = Stdio::kPipe;
  auto p = Subprocess::Spawn(o);
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ(getpgid(p->pid()), p->pid());
  Result<std::string> grandchild = p->ReadLine(Deadline(30s), "the pid of sleep");
  ASSERT_THAT(grandchild, IsOk());
  const pid_t sleeper = std::stoi(*grandchild);
  EXPECT_FALSE(Ended(sleeper));
  EXPECT_TRUE(p->Signal(SIGTERM, /*group=*/true));
  EXPECT_THAT(p->Wait(Deadline(30s)), IsOkAndHolds(128 + SIGTERM));
  // The orphaned sleep is reaped by init; it must have been signalled too.
  const SteadyTime give_up = Deadline(30s);
  while (!Ended(sleeper) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(Ended(sleeper)) << "sleep " << sleeper << " outlived the signal to its group";
}

TEST(SubprocessTest, TheChildGetsSignalsAtTheirDefaultsWhateverTheParentIgnores) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(sigaction(SIGINT, &ignore, &old), 0);
  auto done = Subprocess::Run(Shell("kill -INT $$; echo survived"), Deadline(30s));
  sigaction(SIGINT, &old, nullptr);
  ASSERT_THAT(done, IsOk());
  EXPECT_EQ(done->code, 128 + SIGINT) << done->out;
}

}  // namespace
}  // namespace chronoq
