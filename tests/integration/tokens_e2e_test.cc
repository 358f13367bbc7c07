// chronoqd's named tokens end to end: the real binary with a --token-file of
// a read, a write and an admin token, each held to the endpoints' scopes;
// then a file rewritten while chronoqd runs and reloaded by SIGHUP. The
// reload is awaited by polling with a deadline (the old token refused, the
// new one accepted, or the error in the log), never by sleeping.
#include <csignal>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

class TokensE2eTest : public ::testing::Test {
 protected:
  void WriteTokens(const std::string& text) {
    std::ofstream out(file_, std::ios::trunc);
    out << text;
  }

  void Start() {
    server_ = std::make_unique<test::ChronoqdProcess>(test::ChronoqdOptions{
        .binary = CHRONOQD_PATH,
        .data_dir = dir_.File("data"),
        .args = {"--token-file", file_},
        .log = dir_.File("chronoqd.log"),
    });
    ASSERT_THAT(server_->Start(), IsOk());
  }

  // One request with `secret` (none: no Authorization), on a connection of
  // its own (a refusal closes the connection).
  cli::HttpResponse Send(const std::string& secret, std::string_view method,
                         std::string_view target, std::string_view body = "") {
    auto client = cli::HttpClient::Create(server_->url(), 30s);
    EXPECT_THAT(client, IsOk());
    if (!client.ok()) return {};
    cli::HttpHeaders headers;
    if (!secret.empty()) headers.push_back({"Authorization", "Bearer " + secret});
    auto r = (*client)->Send(method, target, body, headers);
    EXPECT_THAT(r, IsOk()) << method << " " << target;
    return r.ok() ? *r : cli::HttpResponse{};
  }
  int StatusOf(const std::string& secret, std::string_view method, std::string_view target,
               std::string_view body = "") {
    return Send(secret, method, target, body).status;
  }

  void Hangup() { ASSERT_EQ(::kill(server_->pid(), SIGHUP), 0); }

  test::TempDir dir_;
  const std::string file_ = dir_.File("tokens");
  std::unique_ptr<test::ChronoqdProcess> server_;
};

const std::string kReader = "reader-secret-0000000000000000";
const std::string kWriter = "writer-secret-0000000000000000";
const std::string kAdmin = "admin-secret-00000000000000000";

TEST_F(TokensE2eTest, EachScopeGetsWhatItCoversAnd403ForTheRest) {
  WriteTokens("viewer read " + kReader + "\napp write " + kWriter + "\nops admin " + kAdmin + "\n");
  Start();
  const std::string task = R"({"queue":"q","id":"t1"})";
  // Unknown or missing token: 401 as always; /healthz and the dashboard need none.
  EXPECT_EQ(StatusOf("", "GET", "/v1/queues"), 401);
  EXPECT_EQ(StatusOf("nope", "GET", "/v1/queues"), 401);
  EXPECT_EQ(StatusOf("", "GET", "/healthz"), 200);
  EXPECT_EQ(StatusOf("", "GET", "/ui/app.js"), 200);

  // read: every GET, nothing else; the refusal names the scope and the token.
  EXPECT_EQ(StatusOf(kReader, "GET", "/v1/queues"), 200);
  EXPECT_EQ(StatusOf(kReader, "GET", "/metrics"), 200);
  cli::HttpResponse refused = Send(kReader, "POST", "/v1/tasks", task);
  EXPECT_EQ(refused.status, 403);
  const nlohmann::json error = nlohmann::json::parse(refused.body, nullptr, false)["error"];
  EXPECT_EQ(error["code"], "insufficient_scope");
  EXPECT_EQ(error["message"],
            "POST /v1/tasks needs a token with scope write; token 'viewer' has scope read");
  EXPECT_THAT(refused.body, Not(HasSubstr(kReader)));
  EXPECT_EQ(refused.Header("WWW-Authenticate"),
            R"(Bearer error="insufficient_scope", scope="write")");
  EXPECT_EQ(StatusOf(kReader, "PUT", "/v1/queues/q", "{}"), 403);
  // ... and changed nothing.
  EXPECT_EQ(StatusOf(kReader, "GET", "/v1/tasks/t1"), 404);

  // write: what an application does, not an operator's queue actions.
  EXPECT_EQ(StatusOf(kWriter, "POST", "/v1/tasks", task), 201);
  EXPECT_EQ(StatusOf(kWriter, "POST", "/v1/queues/q/claim", R"({"max":1})"), 200);
  EXPECT_EQ(StatusOf(kWriter, "POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":1000})"),
            200);
  cli::HttpResponse pause = Send(kWriter, "POST", "/v1/queues/q/pause");
  EXPECT_EQ(pause.status, 403);
  EXPECT_THAT(pause.body, HasSubstr("needs a token with scope admin; token 'app' has scope write"));
  EXPECT_EQ(StatusOf(kWriter, "POST", "/v1/tasks/t1/purge", "{}"), 403);

  // admin: everything.
  EXPECT_EQ(StatusOf(kAdmin, "POST", "/v1/queues/q/pause"), 200);
  EXPECT_EQ(StatusOf(kAdmin, "PUT", "/v1/queues/q", R"({"max_in_flight":3})"), 200);
  EXPECT_TRUE(nlohmann::json::parse(Send(kReader, "GET", "/v1/queues/q").body)["paused"]);
}

TEST_F(TokensE2eTest, SighupSwapsTheTokensAndABadFileKeepsTheOldOnes) {
  WriteTokens("# the first token\nci write " + kOld + "\n");
  Start();
  EXPECT_EQ(StatusOf(kOld, "POST", "/v1/tasks", R"({"queue":"q"})"), 201);
  EXPECT_EQ(StatusOf(kNew, "GET", "/v1/queues"), 401);

  // Rotation: the old token out, a new one in, chronoqd still running.
  WriteTokens("ci-2 write " + kNew + "\n");
  Hangup();
  ASSERT_TRUE(Eventually([&] { return StatusOf(kNew, "GET", "/v1/queues") == 200; },
                         "the new token to be accepted after SIGHUP"));
  EXPECT_EQ(StatusOf(kOld, "GET", "/v1/queues"), 401);
  EXPECT_EQ(StatusOf(kNew, "POST", "/v1/tasks", R"({"queue":"q"})"), 201);
  EXPECT_THAT(server_->LogTail(),
              HasSubstr("SIGHUP: reloaded 1 token from " + file_ + ": ci-2 (write)"));

  // A bad file changes nothing; the log names the line and the reason.
  WriteTokens("ci-2 read " + kNew + "\nbad wrte " + kBad + "\n");
  Hangup();
  ASSERT_TRUE(Eventually(
      [&] {
        return server_->LogTail().find(file_ + ":2: unknown scope 'wrte'") != std::string::npos;
      },
      "the reload's error in the log"));
  EXPECT_EQ(StatusOf(kNew, "POST", "/v1/tasks", R"({"queue":"q"})"), 201);  // still write
  EXPECT_EQ(StatusOf(kBad, "GET", "/v1/queues"), 401);

  // A scope taken away applies at once too.
  WriteTokens("ci-2 read " + kNew + "\n");
  Hangup();
  ASSERT_TRUE(
      Eventually([&] { return StatusOf(kNew, "POST", "/v1/tasks", R"({"queue":"q"})") == 403; },
                 "the narrowed token to be refused a write after SIGHUP"));
  EXPECT_EQ(StatusOf(kNew, "GET", "/v1/tasks?queue=q"), 200);

  EXPECT_THAT(server_->Stop(SIGTERM), IsOkAndHolds(0));
  const std::string log = server_->LogTail(1 << 20);
  for (const std::string& secret : {kOld, kNew, kBad}) {
    EXPECT_THAT(log, Not(HasSubstr(secret))) << "a secret in the log";
  }
}

// chronoqd does not start on a token file it cannot read right, and says
// which line is wrong and why.
TEST_F(TokensE2eTest, ABadTokenFileStopsTheStart) {
  WriteTokens("ci write " + kOld + "\nci admin " + kNew + "\n");
  SpawnOptions o;
  o.argv = {CHRONOQD_PATH,     "--listen",     "127.0.0.1:0", "--data",
            dir_.File("data"), "--token-file", file_};
  Result<Subprocess::Completed> refused = Subprocess::Run(o, Deadline(60s));
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->code, 2);
  EXPECT_THAT(refused->err, HasSubstr("invalid_argument: token-file: " + file_ +
                                      ":2: duplicate name 'ci' (also on line 1)"));
  EXPECT_EQ(refused->out, "");
}

// The nodes of a cluster send each other one secret: by default the API's,
// which named tokens do not give, so then a cluster token must be given
// (refused before anything starts); one bare secret still is the default
// (the node gets as far as PostgreSQL, which is not there).
TEST_F(TokensE2eTest, NamedTokensInAClusterNeedAClusterToken) {
  const auto start_node = [&] {
    SpawnOptions o;
    o.argv = {CHRONOQD_PATH, "--cluster",   "--store",      "postgresql://nobody@127.0.0.1:1/none",
              "--listen",    "127.0.0.1:0", "--token-file", file_};
    return Subprocess::Run(o, Deadline(60s));
  };
  WriteTokens("ci write " + kOld + "\n");
  Result<Subprocess::Completed> refused = start_node();
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->code, 2);
  EXPECT_THAT(refused->err, HasSubstr("invalid_argument: cluster-token-file: needed when "
                                      "--token-file holds named tokens"));

  WriteTokens(kOld + "\n");
  Result<Subprocess::Completed> single = start_node();
  ASSERT_THAT(single, IsOk());
  EXPECT_EQ(single->code, 2);
  EXPECT_THAT(single->err, HasSubstr("cannot connect to PostgreSQL"));
  EXPECT_THAT(single->err, Not(HasSubstr("cluster-token-file")));
}

}  // namespace
}  // namespace chronoq
