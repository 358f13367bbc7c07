// chronoqd's named tokens end to end: the real binary with a --token-file,
// rewritten while it runs and reloaded by SIGHUP. The reload is awaited by
// polling with a deadline (the old token refused, the new one accepted, or
// the error in the log), never by sleeping.
#include <csignal>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/http_client.h"
#include "common/subprocess.h"
#include "support/chronoqd_process.h"
#include "support/eventually.h"
#include "support/status_matchers.h"
#include "support/temp_dir.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::Eventually;
using test::IsOk;
using test::IsOkAndHolds;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kOld = "old-secret-000000000000000000";
const std::string kNew = "new-secret-000000000000000000";
const std::string kBad = "bad-secret-000000000000000000";

class TokenReloadTest : public ::testing::Test {
 protected:
  void WriteTokens(const std::string& text) {
    std::ofstream out(file_, std::ios::trunc);
    out << text;
  }

  // The status of one request with `secret`, on a connection of its own (a
  // refusal closes the connection).
  int Status(const std::string& secret, std::string_view method, std::string_view target,
             std::string_view body = "") {
    auto client = cli::HttpClient::Create(server_->url(), 30s);
    EXPECT_THAT(client, IsOk());
    if (!client.ok()) return 0;
    auto r = (*client)->Send(method, target, body, {{"Authorization", "Bearer " + secret}});
    EXPECT_THAT(r, IsOk());
    return r.ok() ? r->status : 0;
  }

  void Hangup() { ASSERT_EQ(::kill(server_->pid(), SIGHUP), 0); }

  test::TempDir dir_;
  const std::string file_ = dir_.File("tokens");
  std::unique_ptr<test::ChronoqdProcess> server_;
};

TEST_F(TokenReloadTest, SighupSwapsTheTokensAndABadFileKeepsTheOldOnes) {
  WriteTokens("# the first token\nci write " + kOld + "\n");
  server_ = std::make_unique<test::ChronoqdProcess>(test::ChronoqdOptions{
      .binary = CHRONOQD_PATH,
      .data_dir = dir_.File("data"),
      .args = {"--token-file", file_},
      .log = dir_.File("chronoqd.log"),
  });
  ASSERT_THAT(server_->Start(), IsOk());
  EXPECT_EQ(Status(kOld, "POST", "/v1/tasks", R"({"queue":"q"})"), 201);
  EXPECT_EQ(Status(kNew, "GET", "/v1/queues"), 401);

  // Rotation: the old token out, a new one in, chronoqd still running.
  WriteTokens("ci-2 write " + kNew + "\n");
  Hangup();
  ASSERT_TRUE(Eventually([&] { return Status(kNew, "GET", "/v1/queues") == 200; },
                         "the new token to be accepted after SIGHUP"));
  EXPECT_EQ(Status(kOld, "GET", "/v1/queues"), 401);
  EXPECT_EQ(Status(kNew, "POST", "/v1/tasks", R"({"queue":"q"})"), 201);
  EXPECT_THAT(server_->LogTail(), HasSubstr("SIGHUP: reloaded 1 token from " + file_ +
                                            ": ci-2 (write)"));

  // A bad file changes nothing; the log names the line and the reason.
  WriteTokens("ci-2 read " + kNew + "\nbad wrte " + kBad + "\n");
  Hangup();
  ASSERT_TRUE(Eventually(
      [&] { return server_->LogTail().find(file_ + ":2: unknown scope 'wrte'") != std::string::npos; },
      "the reload's error in the log"));
  EXPECT_EQ(Status(kNew, "POST", "/v1/tasks", R"({"queue":"q"})"), 201);  // still write
  EXPECT_EQ(Status(kBad, "GET", "/v1/queues"), 401);

  // A scope taken away applies at once too.
  WriteTokens("ci-2 read " + kNew + "\n");
  Hangup();
  ASSERT_TRUE(Eventually(
      [&] { return Status(kNew, "POST", "/v1/tasks", R"({"queue":"q"})") == 403; },
      "the narrowed token to be refused a write after SIGHUP"));
  EXPECT_EQ(Status(kNew, "GET", "/v1/tasks?queue=q"), 200);

  EXPECT_THAT(server_->Stop(SIGTERM), IsOkAndHolds(0));
  const std::string log = server_->LogTail(1 << 20);
  for (const std::string& secret : {kOld, kNew, kBad}) {
    EXPECT_THAT(log, Not(HasSubstr(secret))) << "a secret in the log";
  }
}

// chronoqd does not start on a token file it cannot read right, and says
// which line is wrong and why.
TEST_F(TokenReloadTest, ABadTokenFileStopsTheStart) {
  WriteTokens("ci write " + kOld + "\nci admin " + kNew + "\n");
  SpawnOptions o;
  o.argv = {CHRONOQD_PATH, "--listen", "127.0.0.1:0", "--data", dir_.File("data"),
            "--token-file", file_};
  Result<Subprocess::Completed> refused = Subprocess::Run(o, Deadline(60s));
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->code, 2);
  EXPECT_THAT(refused->err,
              HasSubstr("invalid_argument: token-file: " + file_ +
                        ":2: duplicate name 'ci' (also on line 1)"));
  EXPECT_EQ(refused->out, "");
}

}  // namespace
}  // namespace chronoq
