// The PostgreSQL store as a cluster's leader (PostgresOptions::leadership)
// and the control connection (store/postgres/control.h): the epoch each
// leader takes, the fence on every transaction, and deposing a silent leader.
// The fence is proven by what reaches the database: the rows a deposed
// leader tries to write are not there.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "store/postgres/control.h"
#include "store/postgres/postgres_store.h"
#include "store/store.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using std::chrono::seconds;
using test::IsOk;
using test::StatusIs;

constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));

class PostgresLeadershipTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()); }

  // A leader's store; `deposed` counts its on_deposed calls.
  Result<std::unique_ptr<Store>> OpenLeader(const std::string& node, std::atomic<int>* deposed,
                                            Duration patience = Duration::zero()) {
    PostgresOptions options{.conninfo = db_.conninfo()};
    options.leadership = PostgresLeadership{
        .node_id = node,
        .address = "http://" + node + ":7070",
        .on_deposed = [deposed](const Status&) { deposed->fetch_add(1); },
        .lock_patience = patience,
    };
    return OpenPostgresStore(options);
  }

  std::unique_ptr<PostgresControl> Control() {
    Result<std::unique_ptr<PostgresControl>> c =
        PostgresControl::Open({.conninfo = db_.conninfo()});
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Begin, a queue and one task, Commit: the first error, if any.
  static Status Write(Store& store, int64_t seq) {
    Status s = store.Begin();
    Result<int64_t> qid = s.ok() ? store.QueueId("q") : Result<int64_t>(s);
    if (!qid.ok()) s = qid.status();
    if (s.ok()) {
      TaskRow r;
      r.seq = seq;
      r.qid = *qid;
      r.due = kNow + seconds(seq);
      r.payload = "{}";
      r.max_attempts = 3;
      s = store.Insert(r).status();
    }
    if (s.ok()) s = store.Commit();
    if (!s.ok()) store.Rollback();
    return s;
  }
  std::string Seqs() {
    return db_.QueryText(
        "SELECT coalesce(string_agg(seq::text, ',' ORDER BY seq), '') FROM "
        "chronoq.tasks");
  }
  static void ExpectNotLeader(const Status& s) {
    EXPECT_THAT(s, StatusIs(StatusCode::kUnavailable));
    EXPECT_EQ(s.reason(), StatusReason::kNotLeader) << s.ToString();
  }

  test::PgTestDatabase db_;
};

TEST_F(PostgresLeadershipTest, EachLeaderTakesTheNextEpochAndRecordsItsWriterSession) {
  std::atomic<int> deposed{0};
  {
    Result<std::unique_ptr<Store>> a = OpenLeader("a", &deposed);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(db_.QueryText("SELECT epoch || ' ' || node_id || ' ' || address FROM chronoq.leader"),
              "1 a http://a:7070");
    EXPECT_EQ(db_.QueryText("SELECT application_name FROM pg_stat_activity WHERE pid = "
                            "(SELECT writer_pid FROM chronoq.leader)"),
              "chronoq writer");
    ASSERT_THAT(Write(**a, 1), IsOk());
  }
  Result<std::unique_ptr<Store>> b = OpenLeader("b", &deposed, seconds(2));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(db_.QueryText("SELECT epoch || ' ' || node_id FROM chronoq.leader"), "2 b");
  ASSERT_THAT(Write(**b, 2), IsOk());
  EXPECT_EQ(Seqs(), "1,2");
  EXPECT_EQ(deposed.load(), 0);
}

TEST_F(PostgresLeadershipTest, ASecondLeaderIsRefusedWhileTheFirstHoldsTheLock) {
  std::atomic<int> deposed{0};
  Result<std::unique_ptr<Store>> a = OpenLeader("a", &deposed);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Result<std::unique_ptr<Store>> b = OpenLeader("b", &deposed);
  EXPECT_THAT(b.status(), StatusIs(StatusCode::kFailedPrecondition));
  // The refused open changed nothing: a still leads, with epoch 1.
  EXPECT_EQ(db_.QueryText("SELECT epoch || ' ' || node_id FROM chronoq.leader"), "1 a");
  EXPECT_THAT(Write(**a, 1), IsOk());
}

// What a standby does to a leader that stopped beating (a paused process):
// it ends the leader's writer session, then leads. The old leader's next
// transaction is refused, it is told once, and none of its rows land.
TEST_F(PostgresLeadershipTest, ADeposedLeaderCanNeverCommitAgain) {
  std::atomic<int> a_deposed{0};
  std::atomic<int> b_deposed{0};
  Result<std::unique_ptr<Store>> a = OpenLeader("a", &a_deposed);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_THAT(Write(**a, 1), IsOk());

  std::unique_ptr<PostgresControl> control = Control();
  ASSERT_NE(control, nullptr);
  Result<ClusterView> view = control->View();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE(view->leader.has_value());
  EXPECT_FALSE(view->lock_free);
  Result<bool> ended = control->Depose(*view->leader);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_TRUE(*ended);
  Result<std::unique_ptr<Store>> b = OpenLeader("b", &b_deposed, seconds(2));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_THAT(Write(**b, 2), IsOk());

  ExpectNotLeader(Write(**a, 3));
  ExpectNotLeader(Write(**a, 4));  // and stays refused: it never reconnects
  EXPECT_EQ(a_deposed.load(), 1);
  EXPECT_EQ(b_deposed.load(), 0);
  EXPECT_EQ(Seqs(), "1,2");
  EXPECT_EQ(db_.QueryText("SELECT epoch || ' ' || node_id FROM chronoq.leader"), "2 b");
  // Deposing the old record again ends nothing: the row names b's session now.
  Result<bool> again = control->Depose(*view->leader);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(*again);
  EXPECT_THAT(Write(**b, 5), IsOk());
}

// The second guard on its own: were the engine lock ever bypassed (here the
// epoch is bumped by hand while a keeps its session), a's transactions read
// the new epoch under their share lock and refuse to write.
TEST_F(PostgresLeadershipTest, TheEpochFencesALeaderWhoseSessionSurvived) {
  std::atomic<int> deposed{0};
  Result<std::unique_ptr<Store>> a = OpenLeader("a", &deposed);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_THAT(Write(**a, 1), IsOk());
  db_.Exec("UPDATE chronoq.leader SET epoch = epoch + 1, node_id = 'b'");
  ExpectNotLeader(Write(**a, 2));
  EXPECT_EQ(deposed.load(), 1);
  EXPECT_EQ(Seqs(), "1");
}

// A takeover's epoch bump waits for the leader's transaction in flight: the
// share lock each transaction takes on the leader row. So a transaction that
// started under epoch 1 commits before the bump, never after it.
TEST_F(PostgresLeadershipTest, ATakeoverWaitsForTheLeadersTransactionInFlight) {
  std::atomic<int> deposed{0};
  Result<std::unique_ptr<Store>> a = OpenLeader("a", &deposed);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_THAT((*a)->Begin(), IsOk());
  // While a's transaction is open, an update of the leader row cannot get
  // its row lock (lock_timeout makes the wait observable without a thread).
  const std::string blocked = db_.QueryText(
      "DO $$ BEGIN SET LOCAL lock_timeout = '100ms'; "
      "UPDATE chronoq.leader SET epoch = epoch + 1; "
      "EXCEPTION WHEN lock_not_available THEN RAISE NOTICE 'blocked'; END $$; SELECT 'ok'");
  EXPECT_EQ(blocked, "ok");
  EXPECT_EQ(db_.QueryText("SELECT epoch FROM chronoq.leader"), "1");
  (*a)->Rollback();
  db_.Exec("UPDATE chronoq.leader SET epoch = epoch + 1");
  EXPECT_EQ(db_.QueryText("SELECT epoch FROM chronoq.leader"), "2");
}

TEST_F(PostgresLeadershipTest, HeartbeatsCountAndTheViewShowsEveryNode) {
  std::unique_ptr<PostgresControl> control = Control();
  ASSERT_NE(control, nullptr);
  NodeRecord a{.node_id = "a", .address = "http://a:1", .role = "standby", .version = "0.1.0"};
  ASSERT_THAT(control->Heartbeat(a), IsOk());
  a.beats = 1;
  ASSERT_THAT(control->Heartbeat(a), IsOk());
  NodeRecord b{.node_id = "b", .address = "http://b:1", .role = "leader", .version = "0.1.0"};
  b.epoch = 7;
  ASSERT_THAT(control->Heartbeat(b), IsOk());
  Result<ClusterView> view = control->View();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_FALSE(view->leader.has_value());
  EXPECT_TRUE(view->lock_free);
  ASSERT_EQ(view->nodes.size(), 2u);
  EXPECT_EQ(view->nodes[0].node_id, "a");
  EXPECT_EQ(view->nodes[0].beats, 2);
  EXPECT_EQ(view->nodes[0].epoch, std::nullopt);
  EXPECT_EQ(view->nodes[1].node_id, "b");
  EXPECT_EQ(view->nodes[1].beats, 1);
  EXPECT_EQ(view->nodes[1].epoch, 7);
  EXPECT_EQ(view->nodes[1].role, "leader");
  // Looking at the lock did not keep it: a leader can still take it.
  std::atomic<int> deposed{0};
  Result<std::unique_ptr<Store>> leader = OpenLeader("c", &deposed);
  ASSERT_TRUE(leader.ok()) << leader.status().ToString();
  view = control->View();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_FALSE(view->lock_free);
  ASSERT_TRUE(view->leader.has_value());
  EXPECT_EQ(view->leader->node_id, "c");
}

}  // namespace
}  // namespace chronoq
