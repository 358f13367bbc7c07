// chronoqd on PostgreSQL when PostgreSQL fails under it (the real binaries).
//
// - A crash of the server (pg_ctl stop -m immediate, then a start: a power
//   cut for the database) under 4 writers and 4 workers: chronoqd does not
//   crash, answers 503 store_unavailable meanwhile (and /healthz says the
//   store is down), goes on once the server is back, and every acknowledged
//   enqueue and ack is still there. This test restarts PostgreSQL, so it runs
//   a cluster of its own (scripts/pg-cluster.sh), never the shared one.
// - pg_terminate_backend of chronoqd's writer and reader sessions: it
//   connects again and goes on; and 20 such cuts at random points under
//   load lose nothing acknowledged.
// - A statement timeout: 503 store_unavailable for the calls it cancels,
//   and chronoqd goes on once the lock that held them is gone.
//
// Real time passes here only as long as the server needs to come back and
// chronoqd's reconnection backoff (at most 5 s); every wait has a deadline.
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/http_client.h"
#include "common/subprocess.h"
#include "support/chronoqd_process.h"
#include "support/eventually.h"
#include "support/own_pg_cluster.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"
#include "support/temp_dir.h"

#ifndef CHRONOQD_PATH
#error "CHRONOQD_PATH (the chronoqd binary) must be defined for the test target"
#endif

namespace chronoq {
namespace {

using nlohmann::json;
using test::Eventually;
using test::IsOk;

std::unique_ptr<cli::HttpClient> Connect(const std::string& url) {
  auto c = cli::HttpClient::Create(url, std::chrono::seconds(30));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// chronoqd on the store at `url`, its files in `dir`.
test::ChronoqdOptions OnStore(const std::string& url, const test::TempDir& dir) {
  return {.binary = CHRONOQD_PATH,
          .data_dir = dir.File("data"),
          .args = {"--store", url},
          .log = dir.File("chronoqd.log")};
}

// What the load saw: acknowledged enqueues and acks, 503s, anything else.
struct Outcomes {
  std::mutex mu;
  std::set<std::string> enqueued, acked;
  std::vector<std::string> unexpected;
  std::atomic<int> unavailable{0};
  std::atomic<int> enqueued_count{0};

  // A 503 must be store_unavailable; any other failure is unexpected.
  void Failed(const std::string& what, const Result<cli::HttpResponse>& r) {
    if (r.ok() && r->status == 503 &&
        json::parse(r->body, nullptr, false).value("/error/code"_json_pointer, "") ==
            "store_unavailable") {
      ++unavailable;
      return;
    }
    std::lock_guard lock(mu);
    unexpected.push_back(
        what + ": " + (r.ok() ? std::to_string(r->status) + " " + r->body : r.status().ToString()));
  }
};

// 4 writers enqueueing with client ids and 4 workers claiming and acking,
// on their own connections, until Stop(); what they saw goes to `out`.
class Load {
 public:
  Load(const std::string& url, Outcomes& out) : out_(out) {
    for (int w = 0; w < 4; ++w) threads_.emplace_back([this, url, w] { Write(url, w); });
    for (int k = 0; k < 4; ++k) threads_.emplace_back([this, url] { Work(url); });
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Write(const std::string& url, int w) {
    auto c = Connect(url);
    if (!c) return;
    bool retrying = false;
    for (int i = 0; !stop_.load();) {
      const std::string id = "w" + std::to_string(w) + "-" + std::to_string(i);
      auto r = c->Send("POST", "/v1/tasks", R"({"queue":"q","id":")" + id + "\"}", {});
      // After a 503 the same id again: the outcome was unknown, and a
      // 409 conflict now says the earlier attempt had committed.
      const bool stored =
          r.ok() && (r->status == 201 ||
                     (retrying && r->status == 409 &&
                      json::parse(r->body, nullptr, false).value("/error/code"_json_pointer, "") ==
                          "conflict"));
      if (stored) {
        std::lock_guard lock(out_.mu);
        out_.enqueued.insert(id);
        ++out_.enqueued_count;
        ++i;
        retrying = false;
      } else {
        out_.Failed("enqueue " + id, r);
        retrying = true;
      }
    }
  }

  void Work(const std::string& url) {
    auto c = Connect(url);
    if (!c) return;
    while (!stop_.load()) {
      auto r = c->Send("POST", "/v1/queues/q/claim",
                       R"({"max":10,"lease_ms":600000,"wait_ms":100})", {});
      if (!r.ok() || r->status != 200) {
        out_.Failed("claim", r);
        continue;
      }
      const json claimed = json::parse(r->body);
      json acks = json::array();
      for (const json& t : claimed.at("tasks")) {
        acks.push_back({{"id", t["id"]}, {"token", t["token"]}});
      }
      if (acks.empty()) continue;
      auto a = c->Send("POST", "/v1/acks", json{{"acks", acks}}.dump(), {});
      if (!a.ok() || a->status != 200) {
        out_.Failed("ack", a);  // the leases stay; they are not counted
        continue;
      }
      const json results = json::parse(a->body);
      std::lock_guard lock(out_.mu);
      for (const json& result : results.at("results")) {
        if (result.value("ok", false)) out_.acked.insert(result["id"].get<std::string>());
      }
    }
  }

  Outcomes& out_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

int HealthStatus(const std::string& url) {
  auto c = Connect(url);
  auto r = c ? c->Send("GET", "/healthz", "", {})
             : Result<cli::HttpResponse>(Status::Internal("no client"));
  return r.ok() ? r->status : 0;
}

// After the load stopped: nothing unexpected happened, every acknowledged
// enqueue is there and every acknowledged ack held; then chronoqd, which
// never crashed, stops cleanly.
void ExpectNothingAcknowledgedLost(test::ChronoqdProcess& server, Outcomes& out) {
  EXPECT_THAT(out.unexpected, ::testing::IsEmpty());
  auto c = Connect(server.url());
  ASSERT_NE(c, nullptr);
  int missing = 0, not_succeeded = 0;
  for (const std::string& id : out.enqueued) {
    auto r = c->Send("GET", "/v1/tasks/" + id, "", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->status != 200) {
      ADD_FAILURE() << "GET " << id << ": " << r->status << " " << r->body;
      ++missing;
    } else if (out.acked.count(id) > 0 && json::parse(r->body)["state"] != "succeeded") {
      ++not_succeeded;
    }
  }
  EXPECT_EQ(missing, 0) << "of " << out.enqueued.size() << " acknowledged enqueues";
  EXPECT_EQ(not_succeeded, 0) << "of " << out.acked.size() << " acknowledged acks";
  EXPECT_THAT(server.Stop(SIGTERM), test::IsOkAndHolds(0));
}

TEST(PostgresFaultTest, APostgresCrashUnderLoadLosesNothingAcknowledged) {
  test::OwnPgCluster cluster;
  ASSERT_THAT(cluster.Start(), IsOk());
  test::TempDir dir;
  test::ChronoqdProcess server(OnStore(cluster.Url(), dir));
  ASSERT_THAT(server.Start(), IsOk());

  Outcomes out;
  Load load(server.url(), out);
  auto enqueued = [&] { return out.enqueued_count.load(); };
  auto acked = [&] {
    std::lock_guard lock(out.mu);
    return out.acked.size();
  };
  EXPECT_TRUE(Eventually([&] { return enqueued() >= 300 && acked() >= 100; },
                         "300 acknowledged enqueues and 100 acks before the crash"));
  ASSERT_THAT(cluster.Crash(), IsOk());
  EXPECT_TRUE(Eventually([&] { return out.unavailable.load() > 0; },
                         "a 503 store_unavailable while PostgreSQL is down"));
  EXPECT_TRUE(Eventually([&] { return HealthStatus(server.url()) == 503; },
                         "/healthz to say the store is down"));
  const int before_restart = enqueued();
  ASSERT_THAT(cluster.Restart(), IsOk());
  EXPECT_TRUE(Eventually([&] { return HealthStatus(server.url()) == 200; },
                         "/healthz to say the store is up"));
  EXPECT_TRUE(Eventually([&] { return enqueued() >= before_restart + 300; },
                         "300 more acknowledged enqueues after the restart"));
  load.Stop();
  EXPECT_GT(out.unavailable.load(), 0);
  ExpectNothingAcknowledgedLost(server, out);
}

// The connection cut at random points of the write path (mid-statement,
// mid-commit, between them): pg_terminate_backend of chronoqd's writer,
// now and then of its reader, after a random number of further acknowledged
// enqueues each time, 20 times under load. Whatever was cut, every call
// either was acknowledged and holds, or was answered 503 store_unavailable.
TEST(PostgresFaultTest, SessionsCutAtRandomPointsUnderLoadLoseNothingAcknowledged) {
  test::PgTestDatabase db;
  ASSERT_TRUE(db.ok());
  test::TempDir dir;
  test::ChronoqdProcess server(OnStore(db.Url(), dir));
  ASSERT_THAT(server.Start(), IsOk());

  Outcomes out;
  Load load(server.url(), out);
  std::mt19937 random(std::random_device{}());
  int cuts = 0;
  for (int i = 0; i < 20; ++i) {
    const int after = out.enqueued_count.load() + std::uniform_int_distribution(5, 60)(random);
    ASSERT_TRUE(Eventually([&] { return out.enqueued_count.load() >= after; },
                           "more acknowledged enqueues before cut " + std::to_string(i + 1)));
    cuts += db.Terminate("chronoq writer");
    if (i % 4 == 3) cuts += db.Terminate("chronoq reader");
  }
  const int after_cuts = out.enqueued_count.load();
  EXPECT_TRUE(Eventually([&] { return out.enqueued_count.load() >= after_cuts + 200; },
                         "200 more acknowledged enqueues after the last cut"));
  load.Stop();
  EXPECT_GE(cuts, 20) << "sessions terminated";
  std::cout << "cuts " << cuts << ", acknowledged enqueues " << out.enqueued.size() << ", acks "
            << out.acked.size() << ", 503s " << out.unavailable.load() << "\n";
  ExpectNothingAcknowledgedLost(server, out);
  // No session a cut left behind holds a transaction open.
  EXPECT_EQ(db.QueryText("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                         "AND state LIKE 'idle in transaction%'"),
            "0");
}

// A statement timeout (an operator's `statement_timeout`, hit while another
// session holds a lock chronoqd needs): the calls it cancels are answered
// 503 store_unavailable, naming the timeout, and nothing else breaks; once
// the lock is gone chronoqd goes on on the same sessions.
TEST(PostgresFaultTest, AStatementTimeoutIsAnswered503AndChronoqdGoesOn) {
  test::PgTestDatabase db;
  ASSERT_TRUE(db.ok());
  db.Exec("ALTER DATABASE " + db.name() + " SET statement_timeout = '300ms'");
  test::TempDir dir;
  test::ChronoqdProcess server(OnStore(db.Url(), dir));
  ASSERT_THAT(server.Start(), IsOk());
  auto c = Connect(server.url());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->Send("POST", "/v1/tasks", R"({"queue":"q","id":"before"})", {})->status, 201);

  {
    test::PgTestDatabase::Session blocker = db.Open();
    blocker.Exec("BEGIN");
    blocker.Exec("LOCK TABLE chronoq.tasks IN ACCESS EXCLUSIVE MODE");
    auto r = c->Send("POST", "/v1/tasks", R"({"queue":"q","id":"blocked"})", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 503) << r->body;
    const json error = json::parse(r->body, nullptr, false);
    EXPECT_EQ(error.value("/error/code"_json_pointer, ""), "store_unavailable") << r->body;
    EXPECT_THAT(error.value("/error/message"_json_pointer, ""),
                ::testing::HasSubstr("statement timeout"));
    blocker.Exec("ROLLBACK");
  }
  // The same id again: the 503 did not store it half.
  auto again = c->Send("POST", "/v1/tasks", R"({"queue":"q","id":"blocked"})", {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 201) << again->body;
  EXPECT_EQ(c->Send("GET", "/v1/tasks/before", "", {})->status, 200);
  EXPECT_EQ(HealthStatus(server.url()), 200);
  EXPECT_THAT(server.Stop(SIGTERM), test::IsOkAndHolds(0));
}

TEST(PostgresFaultTest, ChronoqdConnectsAgainAfterItsSessionsAreTerminated) {
  test::PgTestDatabase db;
  ASSERT_TRUE(db.ok());
  test::TempDir dir;
  test::ChronoqdProcess server(OnStore(db.Url(), dir));
  ASSERT_THAT(server.Start(), IsOk());
  auto c = Connect(server.url());
  ASSERT_NE(c, nullptr);
  auto before = c->Send("POST", "/v1/tasks", R"({"queue":"q","id":"before"})", {});
  ASSERT_TRUE(before.ok() && before->status == 201);
  ASSERT_EQ(c->Send("GET", "/v1/tasks/before", "", {})->status, 200);  // the reader exists

  EXPECT_EQ(db.Terminate("chronoq writer"), 1);
  EXPECT_EQ(db.Terminate("chronoq reader"), 1);
  // At most the call that finds the writer gone fails; then it works again.
  int attempts = 0;
  EXPECT_TRUE(Eventually(
      [&] {
        ++attempts;
        auto r = c->Send("POST", "/v1/tasks", R"({"queue":"q","id":"after"})", {});
        return r.ok() && r->status == 201;
      },
      "an enqueue to succeed after the sessions were terminated"));
  EXPECT_LE(attempts, 2);
  auto got = c->Send("GET", "/v1/tasks/before", "", {});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(c->Send("GET", "/healthz", "", {})->status, 200);
  EXPECT_THAT(server.Stop(SIGTERM), test::IsOkAndHolds(0));
}

}  // namespace
}  // namespace chronoq
