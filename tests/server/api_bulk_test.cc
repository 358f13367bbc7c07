// Bulk actions over HTTP, driven directly on a real engine and a fake clock:
// POST /v1/tasks:bulk (dry run 200, job 202), reading, listing and
// cancelling jobs, and every bad request a 400 naming the field with nothing
// changed.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api.h"
#include "server/api_fixture.h"

namespace chronoq::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class ApiBulkTest : public test::ApiFixture {
 protected:
  void Enqueue(const json& body) {
    ApiResponse r = Call("POST", "/v1/tasks", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
  }
  std::string StateOf(const std::string& id) {
    ApiResponse r = Call("GET", "/v1/tasks/" + id);
    if (r.status != 200) return "status " + std::to_string(r.status);
    return Json(r).value("state", "");
  }
  // Waits for the job to end; returns it as it ended.
  json Finished(const std::string& id) {
    json job;
    EXPECT_TRUE(test::Eventually(
        [&] {
          ApiResponse r = Call("GET", "/v1/bulk/" + id);
          if (r.status != 200) return false;
          job = Json(r);
          return job["state"] != "running";
        },
        "bulk job " + id + " to end"));
    return job;
  }
};

TEST_F(ApiBulkTest, DryRunThenJobThenItsProgress) {
  for (int i = 0; i < 3; ++i) {
    Enqueue({{"queue", "expire-share"}, {"id", "share:" + std::to_string(i)}, {"delay_ms", 60000}});
  }
  Enqueue({{"queue", "other"}, {"id", "x"}, {"delay_ms", 60000}});
  const std::string body =
      R"({"filter":{"queue":"expire-share","state":"scheduled"},"action":"reschedule",)"
      R"("shift_ms":86400000)";
  ApiResponse dry = Call("POST", "/v1/tasks:bulk", body + R"(,"dry_run":true})");
  ASSERT_EQ(dry.status, 200) << dry.body;
  json d = Json(dry);
  EXPECT_TRUE(d["id"].is_null());
  EXPECT_EQ(d["state"], "done");
  EXPECT_EQ(d["dry_run"], true);
  EXPECT_EQ(d["matched"], 3);
  EXPECT_EQ(d["applied"], 3);
  EXPECT_EQ(d["filter"], json({{"queue", "expire-share"}, {"state", "scheduled"}}));
  EXPECT_EQ(d["shift_ms"], 86400000);
  EXPECT_TRUE(d["run_at"].is_null());
  const std::string before = Json(Call("GET", "/v1/tasks/share:0"))["run_at"];

  ApiResponse started = Call("POST", "/v1/tasks:bulk", body + "}");
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = Json(started)["id"];
  const json job = Finished(id);
  EXPECT_EQ(job["state"], "done");
  EXPECT_EQ(job["applied"], 3);
  EXPECT_EQ(job["skipped"], json::object());
  EXPECT_EQ(job["cursor"], "share:2");
  EXPECT_TRUE(job["error"].is_null());
  EXPECT_FALSE(job["finished_at"].is_null());
  EXPECT_NE(Json(Call("GET", "/v1/tasks/share:0"))["run_at"], before);

  ApiResponse list = Call("GET", "/v1/bulk");
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(Json(list)["jobs"].size(), 1u);
  EXPECT_EQ(Json(list)["jobs"][0]["id"], id);
  // Cancelling a finished job answers it as it is.
  ApiResponse cancelled = Call("POST", "/v1/bulk/" + id + "/cancel");
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(Json(cancelled)["state"], "done");
  ExpectError(Call("GET", "/v1/bulk/bulk-0-0"), 404, "not_found", "id");
  ExpectError(Call("POST", "/v1/bulk/bulk-0-0/cancel"), 404, "not_found", "id");
  ExpectError(Call("GET", "/v1/bulk?x=1"), 400, "invalid_argument", "x");
}

TEST_F(ApiBulkTest, SkippedTasksAreCountedByTheirState) {
  Enqueue({{"queue", "q"}, {"id", "now"}});
  ASSERT_EQ(Call("POST", "/v1/queues/q/claim", "{}").status, 200);
  Enqueue({{"queue", "q"}, {"id", "later"}, {"delay_ms", 60000}});
  ApiResponse r = Call("POST", "/v1/tasks:bulk",
                       R"({"filter":{"queue":"q"},"action":"cancel","dry_run":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["skipped"], json({{"running", 1}}));
  EXPECT_EQ(Json(r)["applied"], 1);
}

TEST_F(ApiBulkTest, BadRequestsNameTheFieldAndChangeNothing) {
  Enqueue({{"queue", "q"}, {"id", "t"}, {"delay_ms", 60000}});
  const std::string p = "/v1/tasks:bulk";
  ExpectErrors({
      {"POST", p, R"({"action":"cancel"})", 400, "invalid_argument", "filter"},
      {"POST", p, R"({"filter":{"queue":"q"}})", 400, "invalid_argument", "action"},
      {"POST", p, R"({"filter":{"queue":"q"},"action":"frob"})", 400, "invalid_argument", "action"},
      {"POST", p, R"({"filter":{"queue":"q","owner":"me"},"action":"cancel"})", 400,
       "invalid_argument", "filter.owner"},
      {"POST", p, R"({"filter":{"state":"sleeping"},"action":"cancel"})", 400, "invalid_argument",
       "filter.state"},
      {"POST", p,
       R"({"filter":{"run_at_from":"2026-01-02T00:00:00Z","run_at_to":"2026-01-01T00:00:00Z"},)"
       R"("action":"cancel"})",
       400, "invalid_argument", "filter.run_at_to"},
      {"POST", p, R"({"filter":{"queue":"q"},"action":"reschedule","shift_ms":0})", 400,
       "invalid_argument", "shift_ms"},
      {"POST", p, R"({"filter":{"queue":"q"},"action":"reschedule","shift_ms":3153600000001})", 400,
       "invalid_argument", "shift_ms"},
      {"POST", p,
       R"({"filter":{"queue":"q"},"action":"reschedule","shift_ms":1,"run_at":1795406400000})", 400,
       "invalid_argument", "shift_ms"},
      {"POST", p, R"({"filter":{"queue":"q"},"action":"reschedule"})", 400, "invalid_argument",
       "run_at"},
      {"POST", p, R"({"filter":{"queue":"q"},"action":"cancel","shift_ms":1000})", 400,
       "invalid_argument", "shift_ms"},
      {"POST", p, R"({"filter":{},"action":"delete"})", 400, "invalid_argument", "filter"},
      {"POST", p, R"({"filter":{"queue":"q","all":true},"action":"delete"})", 400,
       "invalid_argument", "filter.all"},
      {"POST", p, R"({"filter":{"all":"yes"},"action":"delete"})", 400, "invalid_argument",
       "filter.all"},
      {"POST", p, R"({"filter":{"id_prefix":""},"action":"cancel"})", 400, "invalid_argument",
       "filter.id_prefix"},
      {"POST", p, R"({"filter":{"id_prefix":"_zz"},"action":"cancel"})", 400, "invalid_argument",
       "filter.id_prefix"},
      {"POST", p, R"({"filter":{"queue":"q"},"action":"cancel","dry_run":1})", 400,
       "invalid_argument", "dry_run"},
      {"POST", p, R"({"filter":[],"action":"cancel"})", 400, "invalid_argument", "filter"},
  });
  EXPECT_EQ(StateOf("t"), "scheduled");
  EXPECT_EQ(Json(Call("GET", "/v1/bulk"))["jobs"], json::array());
}

TEST_F(ApiBulkTest, StartingAndCancellingNeedAdminReadingNeedsRead) {
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/tasks:bulk"), Scope::kAdmin);
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/bulk/bulk-1-1/cancel"), Scope::kAdmin);
  EXPECT_EQ(Api::ScopeOf("GET", "/v1/bulk/bulk-1-1"), Scope::kRead);
  EXPECT_EQ(Api::ScopeOf("GET", "/v1/bulk"), Scope::kRead);
  // Not a task called "tasks:bulk": the path has no /v1/tasks/ prefix.
  ApiResponse get = Call("GET", "/v1/tasks:bulk");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.allow, "POST");
}

}  // namespace
}  // namespace chronoq::server
