// chronoq work: its command line, what a failed task's error says, and how
// its claims fail over between nodes. The worker itself runs end to end in
// tests/integration/cli_e2e_test.cc, where it can be stopped with signals.
#include "cli/work.h"

#include <atomic>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_fixture.h"
#include <signal.h>
#include <unistd.h>

namespace chronoq::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(Utf8TailTest, KeepsTheEndWithinTheLimit) {
  EXPECT_EQ(Utf8Tail("abcdef", 10), "abcdef");
  EXPECT_EQ(Utf8Tail("abcdef", 3), "def");
  EXPECT_EQ(Utf8Tail("", 3), "");
  // Trailing newlines and spaces go before the cut.
  EXPECT_EQ(Utf8Tail("line 1\nline 2\n\n  ", 6), "line 2");
}

TEST(Utf8TailTest, CutsBetweenCharacters) {
  // "é" is 2 bytes, "€" 3: the last 4 bytes start inside the "€" before "é".
  EXPECT_EQ(Utf8Tail("a\xE2\x82\xAC\xC3\xA9", 4), "\xC3\xA9");
  EXPECT_EQ(Utf8Tail("a\xE2\x82\xAC\xC3\xA9", 5), "\xE2\x82\xAC\xC3\xA9");
}

TEST(Utf8TailTest, ReplacesWhatIsNotUtf8) {
  EXPECT_EQ(Utf8Tail("a\xFF"
                     "b",
                     10),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(Utf8Tail("\xC0\xAF", 10), "\xEF\xBF\xBD\xEF\xBF\xBD");  // an overlong '/'
  EXPECT_EQ(Utf8Tail("\xED\xA0\x80", 10),                           // a surrogate
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Utf8Tail("ok\xE2\x82", 10), "ok\xEF\xBF\xBD\xEF\xBF\xBD");  // cut short
  EXPECT_EQ(Utf8Tail("\xF0\x9F\x98\x80", 10), "\xF0\x9F\x98\x80");      // an emoji is fine
}

TEST(FailureMessageTest, SaysHowTheCommandEnded) {
  EXPECT_EQ(FailureMessage(3, false, "disk full"), "exited with status 3: disk full");
  EXPECT_EQ(FailureMessage(3, false, ""), "exited with status 3");
  EXPECT_EQ(FailureMessage(128 + SIGKILL, false, ""), "killed by signal 9 (Killed)");
  EXPECT_EQ(FailureMessage(128 + SIGKILL, true, "half done"),
            "interrupted: chronoq work was stopped and killed it: half done");
}

TEST(FailureMessageTest, StaysUnderTheServersLimit) {
  const std::string noise(100'000, 'x');
  EXPECT_LE(FailureMessage(255, false, Utf8Tail(noise, kStderrTailBytes)).size(), 4096u);
}

TEST_F(CliTest, BadWorkCommandLinesExitTwoAndSendNothing) {
  ExpectUsageError({"work"}, "queue is required");
  ExpectUsageError({"work", "q"}, "command is required");
  ExpectUsageError({"work", "q", "--"}, "command is required");
  ExpectUsageError({"work", "q", "--concurrency", "0", "--", "true"},
                   "error: --concurrency: must be 1-1000");
  ExpectUsageError({"work", "q", "--concurrency", "1001", "--", "true"},
                   "error: --concurrency: must be 1-1000");
  ExpectUsageError({"work", "q", "--lease", "500ms", "--", "true"},
                   "error: --lease: must be between 1s and 7d");
  ExpectUsageError({"work", "q", "--wait", "1ms", "--", "true"},
                   "error: --wait: must be between 10ms and 1h");
  ExpectUsageError({"work", "q", "--wait", "soon", "--", "true"}, "error: --wait:");
  ExpectUsageError({"work", "q", "--worker", std::string(201, 'w'), "--", "true"},
                   "error: --worker: longer than 200 bytes");
  ExpectUsageError({"work", "q", "--worker", "a\tb", "--", "true"}, "error: --worker:");
  ExpectUsageError({"work", "q", "--", "/nonexistent/chronoq-cmd"},
                   "error: work: cannot run /nonexistent/chronoq-cmd: no such program");
  ExpectUsageError({"work", "q", "--", "chronoq-no-such-command-anywhere"},
                   "cannot run chronoq-no-such-command-anywhere: no such program");
}

TEST_F(CliTest, AnUnreachableServerStopsTheWorkerWithExitThree) {
  {
    test::TestHttpServer gone;
    env_["CHRONOQ_URL"] = gone.url();
  }
  EXPECT_EQ(Run({"work", "q", "--", "true"}), kExitUnreachable);
  EXPECT_THAT(err(), HasSubstr("error: cannot connect to "));
}

TEST_F(CliTest, ARefusedClaimStopsTheWorkerWithExitOne) {
  AnswerAll(Error(400, "invalid_argument", "queue: contains a control character", "queue"));
  EXPECT_EQ(Run({"work", "q", "--wait", "10ms", "--", "true"}), kExitServerError);
  EXPECT_EQ(err(), "error: invalid_argument: queue: contains a control character (field queue)\n");
  const Request claim = OnlyRequest();
  EXPECT_EQ(claim.target, "/v1/queues/q/claim");
  json body = BodyOf(claim);
  // Named HOST:PID unless told otherwise (the CLI runs in this process).
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(body["worker"], std::string(host) + ":" + std::to_string(getpid()));
  body.erase("worker");
  EXPECT_EQ(body, json::parse(R"({"max":1,"lease_ms":30000,"wait_ms":10})"));
}

TEST_F(CliTest, TheWorkerGivesItsClaimsTheNameItIsTold) {
  AnswerAll(Error(400, "invalid_argument", "stop here", "queue"));
  EXPECT_EQ(Run({"work", "q", "--worker", "billing-7", "--wait", "10ms", "--", "true"}),
            kExitServerError);
  EXPECT_EQ(BodyOf(OnlyRequest())["worker"], "billing-7");
}

TEST_F(CliTest, AnUnreachableClusterStopsTheWorkerWithExitThree) {
  std::string first, second;
  {
    test::TestHttpServer gone;
    first = gone.url();
  }
  {
    test::TestHttpServer gone;
    second = gone.url();
  }
  env_["CHRONOQ_URL"] = first + "," + second;
  EXPECT_EQ(Run({"work", "q", "--", "true"}), kExitUnreachable);
  EXPECT_EQ(err(), "error: no node answered: " + first + ": connection refused; " + second +
                       ": connection refused\n");
}

TEST_F(CliTest, TheWorkerClaimsFromTheNextNodeWhenOneIsDown) {
  std::string down;
  {
    test::TestHttpServer gone;
    down = gone.url();
  }
  env_["CHRONOQ_URL"] = down + "," + server_.url();
  // A refused claim stops the worker, so the test sees it reached the node.
  AnswerAll(Error(400, "invalid_argument", "queue: contains a control character", "queue"));
  EXPECT_EQ(Run({"work", "q", "--wait", "10ms", "--", "true"}), kExitServerError);
  EXPECT_EQ(OnlyRequest().target, "/v1/queues/q/claim");
}

TEST_F(CliTest, AClaimCutOffAfterSendingIsNotResentAndTheWorkerCarriesOn) {
  // The first claim reaches this node, which goes before answering: the
  // claim may have been applied, so it does not go to the other node, and
  // the worker claims again (from the same node, after its backoff of 1s)
  // rather than exiting as for a cluster it never reached.
  test::TestHttpServer other;
  auto claims = std::make_shared<std::atomic<int>>(0);
  server_.SetHandler([claims](const Request&) {
    if (++*claims == 1) return Response{.drop = true};
    return Error(400, "invalid_argument", "queue: contains a control character", "queue");
  });
  env_["CHRONOQ_URL"] = server_.url() + "," + other.url();
  EXPECT_EQ(Run({"work", "q", "--wait", "10ms", "--", "true"}), kExitServerError);
  EXPECT_THAT(err(), HasSubstr("warning: cannot claim from q: no answer: " + server_.url()));
  EXPECT_THAT(err(), HasSubstr("POST not resent to another node"));
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_THAT(other.requests(), IsEmpty());
}

}  // namespace
}  // namespace chronoq::cli
