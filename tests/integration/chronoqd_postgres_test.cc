// chronoqd on PostgreSQL end to end: the real binary started with --store
// (and CHRONOQ_STORE) on a fresh database of the cluster ctest's `postgres`
// fixture starts, driven over HTTP, restarted, and refused as a second
// engine on the same schema.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/http_client.h"
#include "support/chronoqd_process.h"
#include "support/engine_fixture.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"
#include <signal.h>

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::IsOk;
using test::IsOkAndHolds;

// Sends one request to `server`; fails the test (and returns status 0) when
// no answer came.
cli::HttpResponse Send(const test::ChronoqdProcess& server, const std::string& method,
                       const std::string& path, const std::string& body = "") {
  Result<std::unique_ptr<cli::HttpClient>> client = cli::HttpClient::Create(server.url(), 30s);
  EXPECT_THAT(client, IsOk());
  if (!client.ok()) return {};
  Result<cli::HttpResponse> r = (*client)->Send(method, path, body, {});
  EXPECT_THAT(r, IsOk());
  return r.ok() ? *r : cli::HttpResponse{};
}

TEST(ChronoqdPostgresTest, ServesFromAStoreUrlAcrossARestart) {
  test::PgTestDatabase db;
  ASSERT_TRUE(db.ok());
  test::TempDir dir;
  const std::string store = db.Url() + "&schema=served";
  test::ChronoqdOptions options{.binary = CHRONOQD_PATH,
                                .data_dir = dir.File("unused"),
                                .args = {"--store", store},
                                .log = dir.File("chronoqd.log")};
  {
    test::ChronoqdProcess server(options);
    ASSERT_THAT(server.Start(), IsOk());
    ASSERT_EQ(Send(server, "POST", "/v1/tasks", R"({"queue":"q","id":"t1"})").status, 201);
    cli::HttpResponse claimed = Send(server, "POST", "/v1/queues/q/claim", R"({"lease_ms":60000})");
    ASSERT_EQ(claimed.status, 200) << claimed.body;
    EXPECT_EQ(json::parse(claimed.body)["tasks"][0]["id"], "t1");

    // A second chronoqd on the same schema is refused, and says why.
    test::ChronoqdProcess second({.binary = CHRONOQD_PATH,
                                  .data_dir = dir.File("unused"),
                                  .args = {"--store", store},
                                  .log = dir.File("second.log")});
    Status refused = second.Start();
    EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
    EXPECT_NE(refused.message().find("is open in another chronoq engine"), std::string::npos)
        << refused.ToString();
    EXPECT_THAT(server.Stop(SIGTERM), IsOkAndHolds(0));
  }
  // Nothing went to --data; everything to the schema.
  EXPECT_FALSE(std::filesystem::exists(dir.File("unused")));
  EXPECT_EQ(db.QueryText("SELECT count(*) FROM served.tasks"), "1");

  // Restarted (through the environment this time), it has the task, still
  // running under its lease.
  options.args = {};
  options.env = {"CHRONOQ_STORE=" + store};
  test::ChronoqdProcess again(options);
  ASSERT_THAT(again.Start(), IsOk());
  cli::HttpResponse got = Send(again, "GET", "/v1/tasks/t1");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["state"], "running");
  EXPECT_THAT(again.Stop(SIGTERM), IsOkAndHolds(0));
}

}  // namespace
}  // namespace chronoq
