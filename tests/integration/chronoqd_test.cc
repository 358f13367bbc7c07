// chronoqd end to end: the real binary on a free loopback port with its own
// data directory, driven over HTTP with keep-alive connections. Covers the
// task life cycle, long polls, redelivery and stale tokens, auth, the request
// limits, graceful shutdown, and a SIGKILL under load that must not lose an
// acknowledged task. Waits are for events (answers, exits), never sleeps.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chronoq/time.h"

#include "cli/http_client.h"
#include "common/subprocess.h"
#include "support/chronoqd_fixture.h"
#include "support/eventually.h"
#include "support/status_matchers.h"
#include "support/test_http_server.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using cli::HttpClient;
using cli::HttpResponse;
using nlohmann::json;
using test::IsOk;
using test::IsOkAndHolds;

// Launch(), Client(), Send(), Json(), server_ and dir_ come from the fixture.
using ChronoqdTest = test::ChronoqdFixture;

TEST_F(ChronoqdTest, TaskLifeCycleOverHttp) {
  Launch();
  EXPECT_EQ(Json(Send("GET", "/healthz"))["status"], "ok");
  HttpResponse created =
      Send("POST", "/v1/tasks", R"({"queue":"emails","id":"welcome:7","payload":{"to":"a"}})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.Header("Content-Type"), "application/json");

  HttpResponse claimed = Send("POST", "/v1/queues/emails/claim", R"({"max":10,"lease_ms":60000})");
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  json lease = Json(claimed)["tasks"][0];
  EXPECT_EQ(lease["id"], "welcome:7");
  EXPECT_EQ(lease["payload"]["to"], "a");

  HttpResponse acked =
      Send("POST", "/v1/tasks/welcome%3A7/ack", json({{"token", lease["token"]}}).dump());
  EXPECT_EQ(acked.status, 200) << acked.body;
  EXPECT_EQ(Json(Send("GET", "/v1/tasks/welcome:7"))["state"], "succeeded");
  EXPECT_THAT(server_->Stop(SIGTERM), test::IsOkAndHolds(0));
}

TEST_F(ChronoqdTest, LongPollIsAnsweredWhenATaskIsEnqueued) {
  Launch();
  std::atomic<bool> answered{false};
  json got;
  std::thread worker([&] {
    auto c = Client();
    auto r = c->Send("POST", "/v1/queues/jobs/claim", R"({"wait_ms":60000})", {});
    if (r.ok()) got = Json(*r);
    answered = true;
  });
  ASSERT_EQ(Send("POST", "/v1/tasks", R"({"queue":"jobs","id":"j1"})").status, 201);
  worker.join();
  EXPECT_TRUE(answered);
  ASSERT_EQ(got["tasks"].size(), 1u) << got.dump();
  EXPECT_EQ(got["tasks"][0]["id"], "j1");
}

// --claim-ahead-ms reaches the engine: a long poll takes a task that long
// before it is due (the loop waits until then) and is answered at the due
// time; with 0 the loop waits until the due time and the task stays
// scheduled until then. On the test clock, so nothing waits for real time.
class ChronoqdClaimAheadTest : public test::ChronoqdFixture,
                               public ::testing::WithParamInterface<int> {};

TEST_P(ChronoqdClaimAheadTest, ALongPollTakesTheTaskThatLongBeforeItIsDue) {
  const int ahead_ms = GetParam();
  Launch({"--test-clock", "--claim-ahead-ms", std::to_string(ahead_ms)});
  HttpResponse r = Send("POST", "/v1/tasks", R"({"queue":"jobs","id":"j1","delay_ms":1000})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string due = Json(r)["run_at"];
  Result<Timestamp> due_at = ParseTime(due);
  ASSERT_THAT(due_at, IsOk());
  const std::string wake = FormatTime(*due_at - std::chrono::milliseconds(ahead_ms));
  std::atomic<bool> answered{false};
  json got;
  std::thread worker([&] {
    auto c = Client();
    auto claim = c->Send("POST", "/v1/queues/jobs/claim", R"({"wait_ms":60000})", {});
    if (claim.ok()) got = Json(*claim);
    answered = true;
  });
  // The loop waits until the task is due less claim-ahead-ms.
  const bool armed = test::Eventually(
      [&] {
        const json clock = Json(Send("GET", "/v1/test/clock"));  // kept: the loop reads it
        for (const json& w : clock["waits"]) {
          if (w == wake) return true;
        }
        return false;
      },
      "the engine loop to wait until " + wake);
  EXPECT_TRUE(armed);
  if (armed) {
    ASSERT_EQ(Send("POST", "/v1/test/clock", json{{"advance_ms", 999}}.dump()).status, 200);
    EXPECT_EQ(Json(Send("GET", "/v1/tasks/j1"))["state"], ahead_ms > 0 ? "running" : "scheduled");
    EXPECT_FALSE(answered);  // not handed out before it is due
  }
  // To the due time (all of it when the wait was not seen: the worker must end).
  ASSERT_EQ(Send("POST", "/v1/test/clock", json{{"advance_ms", armed ? 1 : 1000}}.dump()).status,
            200);
  worker.join();
  ASSERT_EQ(got["tasks"].size(), 1u) << got.dump();
  EXPECT_EQ(got["tasks"][0]["id"], "j1");
  EXPECT_EQ(got["tasks"][0]["run_at"], due);
}

INSTANTIATE_TEST_SUITE_P(AheadMs, ChronoqdClaimAheadTest, ::testing::Values(10, 0));

TEST_F(ChronoqdTest, LapsedLeaseIsRedeliveredAndTheOldTokenIsStale) {
  Launch();
  ASSERT_EQ(Send("POST", "/v1/tasks", R"({"queue":"q","id":"t"})").status, 201);
  json first = Json(Send("POST", "/v1/queues/q/claim", R"({"lease_ms":1})"))["tasks"][0];
  // The next claim waits for the 1 ms lease to lapse and gets the task again.
  json second = Json(Send("POST", "/v1/queues/q/claim", R"({"lease_ms":60000,"wait_ms":60000})"));
  ASSERT_EQ(second["tasks"].size(), 1u) << second.dump();
  EXPECT_EQ(second["tasks"][0]["attempt"], 2);
  EXPECT_GT(second["tasks"][0]["token"].get<uint64_t>(), first["token"].get<uint64_t>());

  HttpResponse stale = Send("POST", "/v1/tasks/t/ack", json({{"token", first["token"]}}).dump());
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(Json(stale)["error"]["code"], "stale_token");
  HttpResponse ok =
      Send("POST", "/v1/tasks/t/ack", json({{"token", second["tasks"][0]["token"]}}).dump());
  EXPECT_EQ(ok.status, 200);
}

TEST_F(ChronoqdTest, BearerTokenGuardsEverythingButHealthz) {
  Launch({}, {"CHRONOQ_TOKEN=s3cret"});
  EXPECT_EQ(Send("GET", "/healthz").status, 200);
  HttpResponse denied = Send("GET", "/v1/version");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(Json(denied)["error"]["code"], "unauthorized");
  EXPECT_EQ(Send("GET", "/v1/version", "", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(
      Send("POST", "/v1/tasks", R"({"queue":"q"})", {{"Authorization", "Bearer s3cret"}}).status,
      201);
  // A rejected request wrote nothing.
  HttpResponse list = Send("GET", "/v1/tasks", "", {{"Authorization", "Bearer s3cret"}});
  EXPECT_EQ(Json(list)["tasks"].size(), 1u);
}

// Without a token, a page of another origin in the operator's browser could
// otherwise change state with a form or a fetch (no preflight for a
// text/plain POST): such writes are refused before their body is read.
TEST_F(ChronoqdTest, CrossSiteWritesAreRefused) {
  Launch();
  const std::string own = server_->url();
  HttpResponse evil =
      Send("POST", "/v1/tasks", R"({"queue":"q"})", {{"Origin", "http://evil.example"}});
  EXPECT_EQ(evil.status, 403);
  EXPECT_EQ(Json(evil)["error"]["code"], "forbidden");
  EXPECT_EQ(
      Send("POST", "/v1/tasks", R"({"queue":"q"})", {{"Sec-Fetch-Site", "cross-site"}}).status,
      403);
  EXPECT_EQ(Send("DELETE", "/v1/queues/q", "", {{"Origin", "http://127.0.0.1:1"}}).status, 403);
  EXPECT_EQ(Json(Send("GET", "/v1/tasks"))["tasks"].size(), 0u);  // nothing was written
  // The server's own pages may write; reads are the browser's to guard.
  EXPECT_EQ(Send("POST", "/v1/tasks", R"({"queue":"q"})",
                 {{"Origin", own}, {"Sec-Fetch-Site", "same-origin"}})
                .status,
            201);
  EXPECT_EQ(Send("GET", "/v1/tasks", "", {{"Origin", "http://evil.example"}}).status, 200);
}

// The dashboard's files hold no data: they are served without the token
// (the page asks for it), with a policy that lets only this server's
// scripts run; the API still needs the token.
TEST_F(ChronoqdTest, TheDashboardIsServedWithoutTheToken) {
  Launch({}, {"CHRONOQ_TOKEN=s3cret"});
  HttpResponse root = Send("GET", "/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.Header("Location"), "/ui/");
  HttpResponse page = Send("GET", "/ui/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.Header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(page.body, ::testing::HasSubstr("<script type=\"module\" src=\"app.js\">"));
  EXPECT_THAT(page.Header("Content-Security-Policy").value_or(""),
              ::testing::HasSubstr("script-src 'self'"));
  EXPECT_EQ(page.Header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(Send("GET", "/ui/index.html").body, page.body);
  HttpResponse js = Send("GET", "/ui/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.Header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_THAT(js.body, ::testing::HasSubstr("import { overviewPage } from \"./overview.js\""));
  // Every module app.js imports is served (the token lives in api.js).
  EXPECT_THAT(Send("GET", "/ui/api.js").body, ::testing::HasSubstr("sessionStorage"));
  for (const char* module :
       {"overview.js", "queue.js", "tasks.js", "task.js", "schedules.js", "locks.js", "dom.js",
        "format.js", "actions.js", "charts.js", "cron_words.js"}) {
    HttpResponse m = Send("GET", std::string("/ui/") + module);
    EXPECT_EQ(m.status, 200) << module;
    EXPECT_EQ(m.Header("Content-Type"), "text/javascript; charset=utf-8") << module;
  }
  EXPECT_EQ(Send("GET", "/ui/style.css").Header("Content-Type"), "text/css; charset=utf-8");
  HttpResponse missing = Send("GET", "/ui/nothing.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(Json(missing)["error"]["code"], "not_found");
  // Only reading the files needs no token.
  EXPECT_EQ(Send("POST", "/ui/", "").status, 401);
  EXPECT_EQ(Send("POST", "/ui/", "", {{"Authorization", "Bearer s3cret"}}).status, 405);
  EXPECT_EQ(Send("GET", "/v1/queues").status, 401);
  EXPECT_EQ(Send("GET", "/v1/queues", "", {{"Authorization", "Bearer s3cret"}}).status, 200);
}

TEST_F(ChronoqdTest, TokenFileWorksToo) {
  const std::string file = dir_.File("token");
  FILE* f = fopen(file.c_str(), "w");
  fputs("from-file\n", f);
  fclose(f);
  Launch({"--token-file", file});
  EXPECT_EQ(Send("GET", "/v1/version").status, 401);
  EXPECT_EQ(Send("GET", "/v1/version", "", {{"Authorization", "Bearer from-file"}}).status, 200);
}

// Without a token chronoqd serves loopback only; another address needs a
// token, or --insecure-no-auth, which it logs loudly.
TEST_F(ChronoqdTest, ANonLoopbackAddressNeedsATokenOrInsecureNoAuth) {
  SpawnOptions o;
  o.argv = {CHRONOQD_PATH, "--listen", "0.0.0.0:0", "--data", dir_.File("exposed")};
  Result<Subprocess::Completed> refused = Subprocess::Run(o, Deadline(60s));
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->code, 2);
  EXPECT_THAT(refused->err, ::testing::HasSubstr("listen: 0.0.0.0 is not a loopback address"));
  EXPECT_THAT(refused->err, ::testing::HasSubstr("--insecure-no-auth"));
  EXPECT_EQ(refused->out, "");

  // Served with a token, or when told to, with a warning in the log.
  const std::string log = dir_.File("exposed.log");
  const auto serves = [&](std::vector<std::string> extra, std::vector<std::string> env) {
    SpawnOptions spawn = o;
    spawn.argv.insert(spawn.argv.end(), extra.begin(), extra.end());
    spawn.env = std::move(env);
    spawn.stdin_mode = Stdio::kNull;
    spawn.stdout_mode = Stdio::kPipe;
    spawn.stderr_mode = Stdio::kFile;
    spawn.stderr_file = log;
    Result<Subprocess> p = Subprocess::Spawn(spawn);
    EXPECT_THAT(p, IsOk());
    if (!p.ok()) return std::string();
    Result<std::string> line = p->ReadLine(Deadline(60s), "chronoqd's \"listening on\" line");
    EXPECT_THAT(line, IsOk());
    p->Signal(SIGTERM);
    EXPECT_THAT(p->Wait(Deadline(60s)), IsOkAndHolds(0));
    return line.ok() ? *line : std::string();
  };
  const auto logged = [&] {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_THAT(serves({}, {"CHRONOQ_TOKEN=s3cret"}),
              ::testing::HasSubstr("listening on http://0.0.0.0:"));
  EXPECT_THAT(logged(), ::testing::Not(::testing::HasSubstr("WITHOUT AUTHENTICATION")));
  EXPECT_THAT(serves({"--insecure-no-auth"}, {}),
              ::testing::HasSubstr("listening on http://0.0.0.0:"));
  EXPECT_THAT(logged(), ::testing::HasSubstr("WITHOUT AUTHENTICATION"));
}

TEST_F(ChronoqdTest, OversizedRequestsAreRefused) {
  Launch();
  HttpResponse big =
      Send("POST", "/v1/tasks", R"({"queue":"q","payload":")" + std::string(1100000, 'x') + "\"}");
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(Json(big)["error"]["code"], "payload_too_large");
  json batch = {{"tasks", json::array()}};
  for (int i = 0; i < 10001; ++i) batch["tasks"].push_back({{"queue", "q"}});
  HttpResponse many = Send("POST", "/v1/tasks/batch", batch.dump());
  EXPECT_EQ(many.status, 400);
  EXPECT_EQ(Json(many)["error"]["field"], "tasks");
  EXPECT_EQ(Json(Send("GET", "/v1/tasks"))["tasks"].size(), 0u);
}

// Opens a raw TCP connection to 127.0.0.1:port.
int RawConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

TEST_F(ChronoqdTest, ASlowClientIsDroppedNotWaitedOn) {
  Launch({"--header-timeout-ms", "200"});
  const int slow = RawConnect(server_->port());
  const std::string partial = "POST /v1/tasks HTTP/1.1\r\nHost: x\r\n";
  ASSERT_EQ(write(slow, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  // Meanwhile others are served.
  EXPECT_EQ(Send("GET", "/healthz").status, 200);
  // The rest of the headers never come: chronoqd closes the connection (a
  // read returns end of stream) without answering.
  // (A 30 s receive timeout turns a server that waits forever into a failure.)
  timeval patience{.tv_sec = 30, .tv_usec = 0};
  setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  char buf[256];
  EXPECT_EQ(read(slow, buf, sizeof buf), 0);
  close(slow);
  EXPECT_EQ(Send("GET", "/healthz").status, 200);
}

TEST_F(ChronoqdTest, SigtermAnswersLongPollsAndExitsCleanly) {
  Launch();
  ASSERT_EQ(Send("POST", "/v1/tasks", R"({"queue":"later","id":"kept","delay_ms":3600000})").status,
            201);
  std::atomic<int> status{0};
  json got;
  auto poller = Client();
  // Ready once chronoqd has the claim: a second request on another
  // connection is answered after the claim was submitted only if the claim
  // is already parked, which it is by the time the queue listing shows it.
  std::thread worker([&] {
    auto r = poller->Send("POST", "/v1/queues/idle/claim", R"({"wait_ms":3600000})", {});
    if (r.ok()) {
      status = r->status;
      got = Json(*r);
    }
  });
  // The claim registers the queue; wait until chronoqd knows it.
  EXPECT_TRUE(test::Eventually(
      [&] {
        json queues = Json(Send("GET", "/v1/queues"));
        bool seen = false;
        for (const auto& q : queues["queues"]) seen = seen || q["name"] == "idle";
        return seen;
      },
      "chronoqd to list the queue of the parked claim"));
  EXPECT_THAT(server_->Stop(SIGTERM), test::IsOkAndHolds(0));
  worker.join();
  EXPECT_EQ(status.load(), 200);
  EXPECT_EQ(got["tasks"].size(), 0u);

  Launch();
  client_.reset();
  EXPECT_EQ(Json(Send("GET", "/v1/tasks/kept"))["state"], "scheduled");
}

// Runs the chronoq CLI against the server; returns its exit code and output.
std::pair<int, std::string> RunCli(const std::string& url, const std::string& args) {
  // Through the shell, for the quoting in `args`.
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c",
            std::string(CHRONOQ_CLI_PATH) + " --url " + url + " " + args + " 2>&1"};
  Result<Subprocess::Completed> done = Subprocess::Run(o, Deadline(120s));
  EXPECT_THAT(done, test::IsOk()) << "chronoq " << args;
  if (!done.ok()) return {-1, done.status().ToString()};
  return {done->code, done->out};
}

TEST_F(ChronoqdTest, TheCliDrivesTheServer) {
  Launch();
  auto [rc, out] = RunCli(server_->url(), R"(enqueue -q mail --id m1 --payload '{"to":"a"}')");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("m1"));
  std::tie(rc, out) = RunCli(server_->url(), "claim mail --max 5 --lease 1m");
  ASSERT_EQ(rc, 0) << out;
  // One line per task: id token attempt payload.
  std::istringstream line(out);
  std::string id, token;
  line >> id >> token;
  EXPECT_EQ(id, "m1") << out;
  std::tie(rc, out) = RunCli(server_->url(), "ack m1 --token " + token);
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = RunCli(server_->url(), "get m1 --json");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(json::parse(out, nullptr, false)["state"], "succeeded") << out;
  std::tie(rc, out) = RunCli(server_->url(), "cancel nope");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("not_found"));
  EXPECT_THAT(server_->Stop(SIGTERM), test::IsOkAndHolds(0));
  std::tie(rc, out) = RunCli(server_->url(), "health");
  EXPECT_EQ(rc, 3) << out;
}

TEST_F(ChronoqdTest, TheCliOrdersTasksByKey) {
  Launch();
  auto [rc, out] = RunCli(server_->url(), "queue set bill --max-pending-per-key 2");
  ASSERT_EQ(rc, 0) << out;
  for (const std::string id : {"b1", "b2"}) {
    std::tie(rc, out) = RunCli(server_->url(), "enqueue -q bill --key cust:7 --id " + id);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_THAT(out, ::testing::HasSubstr("enqueued " + id + ", key cust:7, due "));
  }
  std::tie(rc, out) = RunCli(server_->url(), "enqueue -q bill --key cust:7 --id b3");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("error: key_backlog_full: "));
  EXPECT_THAT(out, ::testing::HasSubstr("cust:7"));
  std::tie(rc, out) = RunCli(server_->url(), "enqueue -q bill --id plain");
  ASSERT_EQ(rc, 0) << out;

  std::tie(rc, out) = RunCli(server_->url(), "list --key cust:7 --json");
  ASSERT_EQ(rc, 0) << out;
  json page = json::parse(out, nullptr, false);
  ASSERT_EQ(page["tasks"].size(), 2u) << out;
  EXPECT_EQ(page["tasks"][0]["key"], "cust:7") << out;
  // One task of the key at a time: b1 and the unkeyed task, not b2.
  std::tie(rc, out) = RunCli(server_->url(), "claim bill --max 5 --json");
  ASSERT_EQ(rc, 0) << out;
  json leases = json::parse(out, nullptr, false);
  std::vector<std::string> claimed;
  for (const json& t : leases.value("tasks", json::array())) claimed.push_back(t.value("id", ""));
  EXPECT_THAT(claimed, ::testing::UnorderedElementsAre("b1", "plain")) << out;
}

TEST_F(ChronoqdTest, TheCliManagesSchedules) {
  Launch();
  auto [rc, out] =
      RunCli(server_->url(), R"(schedule add refresh -q cache --every 1h --payload '{"k":1}')");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("created schedule refresh, next run "));

  std::tie(rc, out) = RunCli(server_->url(), "schedule get refresh --json");
  ASSERT_EQ(rc, 0) << out;
  const json schedule = json::parse(out, nullptr, false);
  EXPECT_EQ(schedule["every_ms"], 3600000) << out;
  ASSERT_TRUE(schedule["next_run"].is_string()) << out;
  ASSERT_TRUE(schedule["next_task_id"].is_string()) << out;
  // Anchored at its creation, the first occurrence is due at once.
  EXPECT_EQ(schedule["next_run"], schedule["start"]) << out;
  // The next occurrence exists as a task with the payload and its instant.
  json task = Json(
      Send("GET", "/v1/tasks/" + cli::PercentEncode(schedule["next_task_id"].get<std::string>())));
  EXPECT_EQ(task["queue"], "cache") << task.dump();
  EXPECT_EQ(task["payload"]["k"], 1) << task.dump();
  EXPECT_EQ(task["payload"]["scheduled_for"], schedule["next_run"]) << task.dump();

  std::tie(rc, out) = RunCli(server_->url(), "schedule next refresh --count 3");
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::vector<Timestamp> next;
  for (std::string line; std::getline(lines, line);) {
    Result<Timestamp> t = ParseTime(line);
    ASSERT_TRUE(t.ok()) << out;
    next.push_back(*t);
  }
  ASSERT_EQ(next.size(), 3u) << out;
  EXPECT_EQ(FormatTime(next[0]), schedule["next_run"]);
  EXPECT_EQ(next[1] - next[0], std::chrono::hours(1));
  EXPECT_EQ(next[2] - next[1], std::chrono::hours(1));

  std::tie(rc, out) = RunCli(server_->url(), "schedule rm refresh");
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = RunCli(server_->url(), "schedule get refresh");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("not_found"));
}

TEST_F(ChronoqdTest, TheCliRunsCommandsUnderALock) {
  Launch();
  auto [rc, out] = RunCli(server_->url(), "lock k -- sh -c 'exit 0'");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(Json(Send("GET", "/v1/locks/k"))["held"], false);
  std::tie(rc, out) = RunCli(server_->url(), "lock k -- sh -c 'exit 3'");
  EXPECT_EQ(rc, 3) << out;

  // Held by an HTTP client: a try-lock exits 75 without running its command.
  HttpResponse held =
      Send("POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":60000,"owner":"http"})");
  ASSERT_EQ(held.status, 200) << held.body;
  std::tie(rc, out) = RunCli(server_->url(), "lock k --wait 0 -- sh -c 'echo ran'");
  EXPECT_EQ(rc, 75) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("k is locked"));
  EXPECT_THAT(out, ::testing::Not(::testing::HasSubstr("ran")));
  std::tie(rc, out) = RunCli(server_->url(), "lock-info k");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("http"));

  // A waiting CLI gets the lock once the holder releases it.
  std::pair<int, std::string> waited;
  std::thread waiter(
      [&] { waited = RunCli(server_->url(), "lock k --wait 60s -- sh -c 'echo ran'"); });
  EXPECT_TRUE(test::Eventually([&] { return Json(Send("GET", "/v1/locks/k"))["waiters"] == 1; }));
  EXPECT_EQ(
      Send("POST", "/v1/locks/k/release", json({{"token", Json(held)["token"]}}).dump()).status,
      200);
  waiter.join();
  EXPECT_EQ(waited.first, 0) << waited.second;
  EXPECT_EQ(waited.second, "ran\n");
  EXPECT_EQ(Json(Send("GET", "/v1/locks/k"))["held"], false);
}

TEST_F(ChronoqdTest, WebhooksAreDeliveredAlsoAfterARestart) {
  test::TestHttpServer receiver;
  Launch();
  const json target = {{"url", receiver.url() + "/expire"}, {"headers", {{"X-Key", "k"}}}};
  ASSERT_EQ(
      Send("POST", "/v1/tasks",
           json({{"queue", "hooks"}, {"id", "now"}, {"payload", {{"n", 1}}}, {"target", target}})
               .dump())
          .status,
      201);
  ASSERT_TRUE(receiver.AwaitRequests(1));
  EXPECT_EQ(receiver.requests()[0].body, R"({"n":1})");
  EXPECT_EQ(receiver.requests()[0].Header("X-Key"), "k");
  EXPECT_TRUE(
      test::Eventually([&] { return Json(Send("GET", "/v1/tasks/now"))["state"] == "succeeded"; }));

  // A webhook due later survives a crash; the restarted chronoqd knows the
  // queue is delivered by webhooks and delivers it once it is due.
  ASSERT_EQ(
      Send("POST", "/v1/tasks",
           json({{"queue", "hooks"}, {"id", "later"}, {"delay_ms", 3600000}, {"target", target}})
               .dump())
          .status,
      201);
  EXPECT_THAT(server_->Stop(SIGKILL), test::IsOkAndHolds(128 + SIGKILL));
  Launch();
  client_.reset();
  ASSERT_EQ(Send("PATCH", "/v1/tasks/later", R"({"delay_ms":0})").status, 200);
  ASSERT_TRUE(receiver.AwaitRequests(2));
  EXPECT_TRUE(test::Eventually(
      [&] { return Json(Send("GET", "/v1/tasks/later"))["state"] == "succeeded"; }));
}

TEST_F(ChronoqdTest, SigkillUnderLoadLosesNoAcknowledgedTask) {
  Launch();
  std::mutex mu;
  std::set<std::string> acknowledged;
  std::atomic<bool> stop{false};
  std::atomic<int> count{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&, t] {
      auto c = Client();
      for (int n = 0; !stop; ++n) {
        const std::string id = "p" + std::to_string(t) + "-" + std::to_string(n);
        auto r = c->Send("POST", "/v1/tasks", json({{"queue", "load"}, {"id", id}}).dump(), {});
        if (!r.ok()) break;  // the server is gone
        if (r->status == 201) {
          std::lock_guard lock(mu);
          acknowledged.insert(id);
          ++count;
        }
      }
    });
  }
  EXPECT_TRUE(test::Eventually([&] { return count >= 2000; }, "2,000 acknowledged enqueues"));
  EXPECT_THAT(server_->Stop(SIGKILL), test::IsOkAndHolds(128 + SIGKILL));
  stop = true;
  for (auto& p : producers) p.join();

  Launch();
  client_.reset();
  std::set<std::string> stored;
  std::string cursor;
  for (;;) {
    json page = Json(Send(
        "GET", "/v1/tasks?queue=load&limit=1000" + (cursor.empty() ? "" : "&cursor=" + cursor)));
    for (const auto& t : page["tasks"]) stored.insert(t["id"].get<std::string>());
    if (page["next_cursor"].is_null()) break;
    cursor = page["next_cursor"];
  }
  for (const std::string& id : acknowledged) EXPECT_TRUE(stored.contains(id)) << id;
  EXPECT_GE(stored.size(), acknowledged.size());
}

// 100 keys x 300 tasks drained by 8 workers over HTTP: no two tasks of a
// key ever run at once and each key's tasks start in enqueue order, also
// when some fail once and retry, and when chronoqd is killed with SIGKILL
// halfway and started again on the same data.
//
// "At once" is judged on intervals, not on two workers' bookkeeping that has
// to happen to overlap. For every attempt, a worker records on the steady
// clock all workers share `start`, when the claim answer that handed it out
// arrived, and `end`, when the worker sent the request that ended it (the ack,
// alone or riding on its next claim, or the fail). It keeps the attempt only
// if chronoqd confirmed that end: the ack's result is ok, the fail was
// answered 200, or (a kill cut off the answer to an ack) the task is
// succeeded at that very attempt. An overlap of two kept attempts of a key is
// then a real violation:
// - On the server, with max_in_flight_per_key 1, an attempt holds its key from
//   the commit that hands it out to the commit that ends it, and the key's
//   next attempt is handed out only after that. A lapsed lease's task is
//   handed out again under a new token and attempt; the old lease's late ack
//   is refused as stale, so it is not confirmed and not kept.
// - A kept attempt's client interval lies inside its server interval: the
//   claim answer arrives after the hand-out committed, and the ending request
//   leaves before the commit that applies it (a request resent after the kill
//   keeps the time of its first send, earlier still).
// So, per key and sorted by start, each kept attempt starts at or after the
// previous one's end.
TEST_F(ChronoqdTest, KeyedTasksKeepOrderAcrossRetriesAndSigkill) {
  constexpr int kKeys = 100, kPerKey = 300, kWorkers = 8;
  constexpr int kTotal = kKeys * kPerKey;
  // How long a worker tries one request while chronoqd does not answer, and
  // the whole run: limits that turn a hang into a failure naming it, well
  // inside ctest's 180 s.
  constexpr auto kNoAnswerLimit = 60s;
  constexpr auto kRunLimit = 120s;
  Launch();
  for (int b = 0; b < kTotal / 1000; ++b) {
    json tasks = json::array();
    for (int n = b * 1000; n < (b + 1) * 1000; ++n) {
      tasks.push_back({{"queue", "keyed"},
                       {"key", "k" + std::to_string(n % kKeys)},
                       {"payload", {{"k", n % kKeys}, {"i", n / kKeys}}}});
    }
    ASSERT_EQ(Send("POST", "/v1/tasks/batch", json({{"tasks", tasks}}).dump()).status, 201);
  }

  using Clock = std::chrono::steady_clock;
  struct Attempt {
    std::string id;
    int attempt = 0;
    Clock::time_point start, end;
  };
  std::mutex kept_mu;
  std::vector<std::vector<Attempt>> kept(kKeys);  // confirmed attempts by key
  std::set<std::string> acked;                    // ids with a confirmed ack
  struct KeyLog {
    std::mutex mu;
    int last = -1;  // the highest index started
  };
  std::vector<KeyLog> logs(kKeys);
  std::atomic<int> out_of_order{0}, retried{0};
  std::mutex done_mu;
  std::set<std::string> done;  // succeeded ids
  // The server's URL, which changes when it is started again.
  std::mutex url_mu;
  std::string url = server_->url();
  auto current_url = [&] {
    std::lock_guard lock(url_mu);
    return url;
  };
  auto done_count = [&] {
    std::lock_guard lock(done_mu);
    return static_cast<int>(done.size());
  };
  const SteadyTime run_limit = Deadline(kRunLimit);
  std::atomic<bool> gave_up{false};
  auto give_up = [&](const std::string& why) {
    if (!gave_up.exchange(true)) ADD_FAILURE() << why;
  };

  // Half the workers acknowledge with POST /v1/acks, half in their next
  // claim (`acks`), so both paths meet the kill.
  auto worker = [&](bool acks_ride) {
    std::string at;
    std::unique_ptr<HttpClient> c;
    std::vector<std::pair<int, Attempt>> mine;  // kept: key, attempt
    // Sends until chronoqd answers (it may be down and come back); nullopt
    // after kNoAnswerLimit without an answer, past the run's limit, or once
    // another worker gave up.
    auto send = [&](std::string_view method, const std::string& target,
                    const std::string& body) -> std::optional<HttpResponse> {
      const SteadyTime no_answer_limit = Deadline(kNoAnswerLimit);
      for (;;) {
        if (gave_up) return std::nullopt;
        if (Clock::now() > no_answer_limit) {
          give_up("chronoqd did not answer " + std::string(method) + " " + target + " for " +
                  std::to_string(kNoAnswerLimit.count()) + " s");
          return std::nullopt;
        }
        if (Clock::now() > run_limit) {
          give_up("the workers had not finished after " + std::to_string(kRunLimit.count()) +
                  " s: " + std::to_string(done_count()) + " of " + std::to_string(kTotal) +
                  " tasks succeeded");
          return std::nullopt;
        }
        if (!c || at != current_url()) {
          at = current_url();
          auto made = HttpClient::Create(at, kNoAnswerLimit);
          if (made.ok()) c = std::move(*made);
        }
        if (c) {
          auto r = c->Send(method, target, body, {});
          if (r.ok()) return *r;
          c.reset();
        }
        // chronoqd is down (killed, not yet restarted): ask again shortly.
        std::this_thread::sleep_for(1ms);
      }
    };
    // An attempt whose ending request went out.
    struct Ending {
      json lease;
      Clock::time_point start, end;
    };
    auto keep = [&](const Ending& e) {
      mine.emplace_back(e.lease["payload"]["k"].get<int>(),
                        Attempt{.id = e.lease["id"].get<std::string>(),
                                .attempt = e.lease["attempt"].get<int>(),
                                .start = e.start,
                                .end = e.end});
    };
    // Settles acks by their results ({id, ok, ...}, in the order sent).
    auto settle = [&](const std::vector<Ending>& endings, const json& results) {
      for (size_t n = 0; n < endings.size(); ++n) {
        const Ending& e = endings[n];
        const std::string id = e.lease["id"];
        EXPECT_EQ(results[n]["id"], id);
        bool confirmed = results[n]["ok"] == true;
        bool succeeded = confirmed;
        if (!confirmed) {
          // A kill may have cut off the answer to an ack that committed.
          const std::optional<HttpResponse> t = send("GET", "/v1/tasks/" + id, "");
          if (!t) return;
          const json task = json::parse(t->body, nullptr, false);
          succeeded = task["state"] == "succeeded";
          confirmed = succeeded && task["attempt"] == e.lease["attempt"];
        }
        if (confirmed) {
          keep(e);
          std::lock_guard lock(kept_mu);
          EXPECT_TRUE(acked.insert(id).second) << id << " acknowledged twice";
        }
        if (succeeded) {
          std::lock_guard lock(done_mu);
          done.insert(id);
        }
      }
    };
    std::vector<Ending> riding;  // acks for the next claim (acks_ride)
    while (!gave_up && done_count() < kTotal) {
      json claim = {{"max", 16}, {"lease_ms", 3000}, {"wait_ms", 100}};
      if (!riding.empty()) {
        claim["acks"] = json::array();
        for (const Ending& e : riding) {
          claim["acks"].push_back({{"id", e.lease["id"]}, {"token", e.lease["token"]}});
        }
      }
      // The first claim that carries an ack ends its attempt: after an answer
      // other than 200 the acks ride again, but may have committed already.
      const Clock::time_point sent = Clock::now();
      for (Ending& e : riding) {
        if (e.end == Clock::time_point()) e.end = sent;
      }
      const std::optional<HttpResponse> r = send("POST", "/v1/queues/keyed/claim", claim.dump());
      if (!r) break;
      const Clock::time_point received = Clock::now();
      if (r->status != 200) continue;
      const json answer = json::parse(r->body, nullptr, false);
      if (!riding.empty()) {
        ASSERT_EQ(answer["acks"].size(), riding.size()) << r->body;
        settle(riding, answer["acks"]);
        riding.clear();
      }
      std::vector<Ending> acks;
      for (const json& l : answer["tasks"]) {
        const int k = l["payload"]["k"], i = l["payload"]["i"];
        EXPECT_EQ(l["key"], "k" + std::to_string(k));
        {
          KeyLog& log = logs[static_cast<size_t>(k)];
          std::lock_guard lock(log.mu);
          // A retry (or a redelivery) starts the same index again.
          if (i != log.last && i != log.last + 1) ++out_of_order;
          log.last = std::max(log.last, i);
        }
        Ending e{.lease = l, .start = received};
        if (i % 97 != 5 || l["attempt"] != 1) {
          acks.push_back(std::move(e));
          continue;
        }
        // Fails once; retries at once, keeping its key's place. 409: this
        // call committed before a kill lost its answer, or the lease lapsed;
        // either way it is not confirmed, so not kept.
        const std::string id = l["id"];
        e.end = Clock::now();
        const std::optional<HttpResponse> f =
            send("POST", "/v1/tasks/" + id + "/fail",
                 json({{"token", l["token"]}, {"retry_in_ms", 0}}).dump());
        if (!f) break;
        EXPECT_TRUE(f->status == 200 || f->status == 409) << f->status << " " << f->body;
        if (f->status == 200) keep(e);
        ++retried;
      }
      if (acks.empty()) continue;
      if (acks_ride) {
        riding = std::move(acks);
        continue;
      }
      json body = {{"acks", json::array()}};
      for (const Ending& e : acks) {
        body["acks"].push_back({{"id", e.lease["id"]}, {"token", e.lease["token"]}});
      }
      const Clock::time_point acked_at = Clock::now();
      for (Ending& e : acks) e.end = acked_at;
      const std::optional<HttpResponse> a = send("POST", "/v1/acks", body.dump());
      if (!a) break;
      ASSERT_EQ(a->status, 200) << a->body;
      settle(acks, json::parse(a->body, nullptr, false)["results"]);
    }
    std::lock_guard lock(kept_mu);
    for (auto& [k, attempt] : mine) kept[static_cast<size_t>(k)].push_back(std::move(attempt));
  };
  std::atomic<int> working{kWorkers};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      worker(w % 2 == 1);
      --working;
    });
  }

  // Kill it halfway, then start it again on the same data.
  EXPECT_TRUE(test::Eventually([&] { return working == 0 || done_count() >= kTotal / 2; },
                               "half the tasks to succeed (then chronoqd is killed)", kRunLimit));
  EXPECT_THAT(server_->Stop(SIGKILL), test::IsOkAndHolds(128 + SIGKILL));
  Launch();
  client_.reset();
  {
    std::lock_guard lock(url_mu);
    url = server_->url();
  }
  for (auto& w : workers) w.join();
  ASSERT_FALSE(gave_up.load());

  // Every task's success is one kept attempt, so the check below is not
  // vacuous; then no two kept attempts of a key overlap.
  EXPECT_EQ(acked.size(), static_cast<size_t>(kTotal));
  int overlaps = 0;
  for (int k = 0; k < kKeys; ++k) {
    std::vector<Attempt>& attempts = kept[static_cast<size_t>(k)];
    std::sort(attempts.begin(), attempts.end(),
              [](const Attempt& a, const Attempt& b) { return a.start < b.start; });
    for (size_t n = 1; n < attempts.size(); ++n) {
      const Attempt& before = attempts[n - 1];
      const Attempt& next = attempts[n];
      if (next.start >= before.end) continue;
      // The first few, not a hundred thousand lines.
      if (++overlaps <= 5) {
        const auto early =
            std::chrono::duration_cast<std::chrono::microseconds>(before.end - next.start);
        ADD_FAILURE() << "key k" << k << ": " << next.id << " (attempt " << next.attempt
                      << ") started " << early.count() << " us before " << before.id << " (attempt "
                      << before.attempt << ") ended";
      }
    }
  }
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(out_of_order, 0);
  EXPECT_GE(retried, kTotal / 97);
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(logs[static_cast<size_t>(k)].last, kPerKey - 1) << k;
  const json q = Json(Send("GET", "/v1/queues/keyed"));
  EXPECT_EQ(q["counts"]["succeeded"], kTotal) << q.dump();
  // A clean stop at the end of the suite's longest mixed run (30,000 tasks
  // over HTTP: claims, acks alone and riding, /v1/acks, failures and
  // retries, a SIGKILL and a recovery). Under ASan, LeakSanitizer checks
  // chronoqd's heap at this exit, and a leak makes the status non-zero
  // (docs/TESTING.md, "Leaks"); the fixture's SIGKILL would check nothing.
  EXPECT_THAT(server_->Stop(SIGTERM), test::IsOkAndHolds(0));
}

}  // namespace
}  // namespace chronoq
