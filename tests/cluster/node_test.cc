// cluster::Node's decisions, round by round: who leads, when a standby
// deposes a silent leader (the lease, on a fake clock), when it takes over
// at once (the lock is free), when a leader steps down, and what a node
// answers itself (/healthz, /v1/cluster, a forwarded request it cannot
// lead). Two nodes live in this process on one fresh database; rounds run
// only when the test calls Tick(), so nothing here waits for real time.
// Forwarding over HTTP is forwarder_test's; real processes and failover
// under load are integration/cluster_e2e_test's.
#include "cluster/node.h"

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/answer.h"
#include "support/fake_clock.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"

namespace chronoq::cluster {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::IsOk;

constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));
constexpr Duration kHeartbeat = milliseconds(500);
constexpr Duration kLease = seconds(3);

class NodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok());
    clock_.Set(kNow);
  }

  std::unique_ptr<Node> MakeNode(const std::string& id) {
    NodeOptions o;
    o.node_id = id;
    o.advertise = "http://127.0.0.1:1" + std::to_string(nodes_++);  // never called here
    o.store.conninfo = db_.conninfo();
    o.heartbeat = kHeartbeat;
    o.lease = kLease;
    o.version = "test";
    o.clock = &clock_;
    o.run_blocking = [](std::function<void()> fn) { fn(); };
    return std::make_unique<Node>(std::move(o));
  }

  // Starts a node without its thread: rounds run on Tick().
  std::unique_ptr<Node> StartNode(const std::string& id) {
    std::unique_ptr<Node> node = MakeNode(id);
    EXPECT_THAT(node->Start(/*run_thread=*/false), IsOk());
    return node;
  }

  static server::ApiResponse Call(Node& node, const std::string& method, const std::string& target,
                                  const std::string& body = "", const std::string& by = "") {
    test::Answer<server::ApiResponse> answer;
    node.Handle({.method = method, .target = target, .body = body, .forwarded_by = by},
                answer.Callback());
    server::ApiResponse r = answer.Get();
    r.Render();
    return r;
  }

  // Advances the clock by `d` in heartbeats, running a round of each given
  // node at every one.
  void Rounds(Duration d, std::initializer_list<Node*> nodes) {
    for (Duration passed{}; passed < d; passed += kHeartbeat) {
      clock_.Advance(kHeartbeat);
      for (Node* n : nodes) n->Tick();
    }
  }

  test::PgTestDatabase db_;
  test::FakeClock clock_;
  int nodes_ = 0;
};

TEST_F(NodeTest, TheFirstNodeLeadsAndTheSecondStandsBy) {
  std::unique_ptr<Node> a = StartNode("a");
  std::unique_ptr<Node> b = StartNode("b");
  EXPECT_TRUE(a->leading());
  EXPECT_EQ(a->epoch(), 1);
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(b->epoch(), 0);

  // The leader serves the API itself.
  server::ApiResponse created =
      Call(*a, "POST", "/v1/tasks", R"({"queue":"q","id":"t1","payload":{}})");
  EXPECT_EQ(created.status, 201) << created.body;

  const auto health_a = nlohmann::json::parse(Call(*a, "GET", "/healthz").body);
  EXPECT_EQ(health_a["role"], "leader");
  EXPECT_EQ(health_a["epoch"], 1);
  const server::ApiResponse hb = Call(*b, "GET", "/healthz");
  EXPECT_EQ(hb.status, 200);
  const auto health_b = nlohmann::json::parse(hb.body);
  EXPECT_EQ(health_b["role"], "standby");
  EXPECT_EQ(health_b["leader"], "http://127.0.0.1:10");

  b->Tick();
  const auto cluster = nlohmann::json::parse(Call(*b, "GET", "/v1/cluster").body);
  EXPECT_EQ(cluster["node"], "b");
  EXPECT_EQ(cluster["role"], "standby");
  EXPECT_EQ(cluster["leader"]["node_id"], "a");
  EXPECT_EQ(cluster["leader"]["epoch"], 1);
  ASSERT_EQ(cluster["nodes"].size(), 2u);
  EXPECT_EQ(cluster["nodes"][0]["node_id"], "a");
  EXPECT_EQ(cluster["nodes"][0]["role"], "leader");
  EXPECT_EQ(cluster["nodes"][1]["role"], "standby");
  EXPECT_EQ(cluster["nodes"][1]["version"], "test");
}

// A request forwarded to a node that does not lead is not forwarded again
// (no loops): the forwarding node gets 503 not_leader and its client moves on.
TEST_F(NodeTest, AStandbyRefusesAForwardedRequest) {
  std::unique_ptr<Node> a = StartNode("a");
  std::unique_ptr<Node> b = StartNode("b");
  const server::ApiResponse r = Call(*b, "POST", "/v1/tasks", R"({"queue":"q","payload":{}})", "c");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "not_leader");
  const server::ApiResponse metrics = Call(*b, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("chronoq_cluster_leader 0"), std::string::npos) << metrics.body;
  const server::ApiResponse leader_metrics = Call(*a, "GET", "/metrics");
  EXPECT_NE(leader_metrics.body.find("chronoq_cluster_leader 1"), std::string::npos);
  EXPECT_NE(leader_metrics.body.find("chronoq_cluster_epoch 1"), std::string::npos);
  EXPECT_NE(leader_metrics.body.find("chronoq_tasks"), std::string::npos)
      << "the engine's metrics too";
}

// A leader that keeps beating is never deposed, however long it leads.
TEST_F(NodeTest, ALeaderThatBeatsKeepsTheLeadership) {
  std::unique_ptr<Node> a = StartNode("a");
  std::unique_ptr<Node> b = StartNode("b");
  Rounds(4 * kLease, {a.get(), b.get()});
  EXPECT_TRUE(a->leading());
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(a->epoch(), 1);
}

// A paused leader (it holds its session, but its rounds stopped) is deposed
// once its heartbeat count has not grown for the lease, not before; the
// standby then leads with the next epoch, and the old leader, when it runs
// again, steps down: its store was fenced.
TEST_F(NodeTest, ASilentLeaderIsDeposedAfterTheLeaseAndStepsDownWhenItWakes) {
  std::unique_ptr<Node> a = StartNode("a");
  std::unique_ptr<Node> b = StartNode("b");
  ASSERT_EQ(Call(*a, "POST", "/v1/tasks", R"({"queue":"q","id":"before","payload":{}})").status,
            201);
  b->Tick();  // b sees a's beats
  Rounds(kLease - kHeartbeat, {b.get()});
  EXPECT_FALSE(b->leading()) << "deposed before the lease ran out";
  Rounds(kHeartbeat, {b.get()});
  EXPECT_TRUE(b->leading());
  EXPECT_EQ(b->epoch(), 2);

  // a wakes: its commit is refused (the fence), then its round steps down.
  const server::ApiResponse refused =
      Call(*a, "POST", "/v1/tasks", R"({"queue":"q","id":"after","payload":{}})");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(nlohmann::json::parse(refused.body)["error"]["code"], "not_leader");
  a->Tick();
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.tasks WHERE name = 'after'"), "0");
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.tasks WHERE name = 'before'"), "1");
  // b, the new leader, has the task a acknowledged.
  EXPECT_EQ(Call(*b, "GET", "/v1/tasks/before").status, 200);
  EXPECT_NE(Call(*a, "GET", "/metrics").body.find("chronoq_cluster_step_downs_total 1"),
            std::string::npos);
}

// A leader that stops cleanly frees the lock: the standby leads at its next
// round, without waiting for the lease.
TEST_F(NodeTest, WhenTheLeaderStopsTheStandbyTakesOverAtItsNextRound) {
  std::unique_ptr<Node> a = StartNode("a");
  std::unique_ptr<Node> b = StartNode("b");
  ASSERT_EQ(Call(*a, "POST", "/v1/tasks", R"({"queue":"q","id":"t","payload":{}})").status, 201);
  a->Stop();
  EXPECT_FALSE(a->leading());
  b->Tick();
  EXPECT_TRUE(b->leading());
  EXPECT_EQ(b->epoch(), 2);
  EXPECT_EQ(Call(*b, "GET", "/v1/tasks/t").status, 200);
  EXPECT_EQ(b->takeovers(), 1u);
  // Its view says so at once, not from before the takeover.
  const auto cluster = nlohmann::json::parse(Call(*b, "GET", "/v1/cluster").body);
  EXPECT_EQ(cluster["leader"]["node_id"], "b");
  EXPECT_EQ(cluster["leader"]["epoch"], 2);
}

TEST_F(NodeTest, BadOptionsAreRefusedNamingTheFlag) {
  NodeOptions o;
  o.node_id = "";
  o.advertise = "http://127.0.0.1:1";
  EXPECT_EQ(ValidateNodeOptions(o).field(), "node-id");
  o.node_id = "a";
  o.advertise = "ftp://x";
  EXPECT_EQ(ValidateNodeOptions(o).field(), "advertise");
  o.advertise = "http://127.0.0.1:1";
  o.heartbeat = seconds(2);
  o.lease = seconds(3);
  EXPECT_EQ(ValidateNodeOptions(o).field(), "lease-ms");
}

}  // namespace
}  // namespace chronoq::cluster
