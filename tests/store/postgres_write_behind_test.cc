// The PostgreSQL store's write-behind inserts (postgres_store.cc,
// Connection::CopyRow): inside a transaction, unnamed task rows go to the
// server in a COPY that stays open while the engine works. They must be
// indistinguishable from rows written one by one: every column and every
// byte kept, statements in between see them, key cursors move back as for a
// single insert, a rollback drops them.
//
// And its writes sent without waiting for their answers (Connection::Send:
// acknowledgements, counts, cursors and tokens, in a libpq pipeline): the
// statements after them see them, and a failure of one fails the next
// statement or the commit, so that nothing of the transaction stays.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "store/postgres/postgres_store.h"
#include "store/store.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using std::chrono::seconds;
using test::IsOk;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));

class PostgresWriteBehindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok());
    Result<std::unique_ptr<Store>> s = OpenPostgresStore({.conninfo = db_.conninfo()});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    ASSERT_THAT(store_->Begin(), IsOk());
    Result<int64_t> q = store_->QueueId("q");
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    qid_ = *q;
    ASSERT_THAT(store_->Commit(), IsOk());
  }

  TaskRow Row(int64_t seq) const {
    TaskRow r;
    r.seq = seq;
    r.qid = qid_;
    r.due = kNow + seconds(seq);
    r.payload = R"({"n":1})";
    r.max_attempts = 3;
    r.updated = kNow;
    return r;
  }
  std::string Count(const std::string& where = "true") {
    return db_.QueryText("SELECT count(*) FROM chronoq.tasks WHERE " + where);
  }

  test::PgTestDatabase db_;
  std::unique_ptr<Store> store_;
  int64_t qid_ = 0;
};

TEST_F(PostgresWriteBehindTest, EveryColumnAndEveryByteIsKept) {
  TaskRow r = Row(1);
  // Every character COPY's text form escapes, and UTF-8.
  r.payload = "{\"s\":\"tab\\t nl\\n cr\\r bs\\\\ \xc3\xa9\"}";
  r.payload += std::string("\t\n\r\\ raw");
  r.priority = -3;
  r.attempt = 2;
  r.run_at = kNow + seconds(7);
  r.token = 4097;
  static constexpr char kError[] = "nul\0byte\xff\t\n\\";
  r.last_error = std::string(kError, sizeof kError - 1);
  r.backoff_base = seconds(2);
  r.backoff_cap = seconds(60);
  r.target = R"({"url":"http://h/\t"})";
  r.sid = 9;
  r.key = "key\twith\\odd\nbytes";
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<bool> inserted = store_->Insert(r);
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  EXPECT_TRUE(*inserted);
  // A statement in the same transaction sees the row.
  Result<std::optional<TaskRow>> found = store_->FindBySeq(1);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  ASSERT_THAT(store_->Commit(), IsOk());
  const TaskRow& f = **found;
  EXPECT_EQ(f.payload, r.payload);
  EXPECT_EQ(f.priority, r.priority);
  EXPECT_EQ(f.attempt, r.attempt);
  EXPECT_EQ(f.max_attempts, r.max_attempts);
  EXPECT_EQ(f.due, r.due);
  EXPECT_EQ(f.run_at, r.run_at);
  EXPECT_EQ(f.token, r.token);
  EXPECT_EQ(f.last_error, r.last_error);
  EXPECT_EQ(f.updated, r.updated);
  EXPECT_EQ(f.backoff_base, r.backoff_base);
  EXPECT_EQ(f.backoff_cap, r.backoff_cap);
  EXPECT_EQ(f.target, r.target);
  EXPECT_EQ(f.sid, r.sid);
  EXPECT_EQ(f.key, r.key);
  EXPECT_FALSE(f.name.has_value());
  // korder is the due of a keyed row, as a single insert sets it.
  EXPECT_EQ(db_.QueryText("SELECT korder = due FROM chronoq.tasks WHERE seq=1"), "t");
}

TEST_F(PostgresWriteBehindTest, ManyRowsAndNamedRowsInOneTransactionKeepTheirOrder) {
  ASSERT_THAT(store_->Begin(), IsOk());
  for (int64_t seq = 1; seq <= 5000; ++seq) {
    TaskRow r = Row(seq);
    r.payload = std::string(static_cast<size_t>(seq % 97), 'x');  // crosses COPY blocks
    if (seq % 1000 == 0) r.name = "named-" + std::to_string(seq);
    Result<bool> inserted = store_->Insert(r);
    ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  }
  // A taken name is still refused, after copied rows.
  TaskRow again = Row(6000);
  again.name = "named-1000";
  Result<bool> dup = store_->Insert(again);
  ASSERT_TRUE(dup.ok()) << dup.status().ToString();
  EXPECT_FALSE(*dup);
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(Count(), "5000");
  EXPECT_EQ(Count("length(payload) = seq % 97"), "5000");
  EXPECT_EQ(Count("name IS NOT NULL"), "5");
}

TEST_F(PostgresWriteBehindTest, ARollbackDropsCopiedRows) {
  ASSERT_THAT(store_->Begin(), IsOk());
  for (int64_t seq = 1; seq <= 10; ++seq) ASSERT_TRUE(store_->Insert(Row(seq)).ok());
  store_->Rollback();
  EXPECT_EQ(Count(), "0");
  // The writer is usable at once.
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(Row(11)).ok());
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(Count(), "1");
}

TEST_F(PostgresWriteBehindTest, ASavepointRollbackKeepsRowsCopiedBeforeIt) {
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(Row(1)).ok());
  ASSERT_THAT(store_->Savepoint(), IsOk());
  ASSERT_TRUE(store_->Insert(Row(2)).ok());
  store_->RollbackToSavepoint();
  ASSERT_TRUE(store_->Insert(Row(3)).ok());
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(db_.QueryText("SELECT string_agg(seq::text, ',' ORDER BY seq) FROM chronoq.tasks"),
            "1,3");
}

TEST_F(PostgresWriteBehindTest, CopiedKeyedRowsMoveTheirKeysCursorBack) {
  auto keyed = [&](int64_t seq, Timestamp due) {
    TaskRow r = Row(seq);
    r.key = "k";
    r.due = due;
    return r;
  };
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(keyed(1, kNow)).ok());
  ASSERT_TRUE(store_->MarkRunningMany({1}, kNow + seconds(30), 1, kNow, "", "").ok());
  ASSERT_THAT(store_->SaveKeyCursor(qid_, "k", KeyPosition{kNow, 0, 1}), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  // Two rows of the key waiting before the cursor, in one transaction: the
  // cursor goes back to just before the first of them in line.
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(keyed(3, kNow - seconds(1))).ok());
  ASSERT_TRUE(store_->Insert(keyed(2, kNow - seconds(2))).ok());
  ASSERT_THAT(store_->Commit(), IsOk());
  // (The place just before seq 2 at its due: seq 2 - 1 there.)
  EXPECT_EQ(db_.QueryText("SELECT seq || '@' || korder FROM chronoq.key_cursors WHERE key='k'"),
            "1@" + std::to_string((kNow - seconds(2)).time_since_epoch().count()));
  Result<std::vector<DueEntry>> heads = store_->KeyHeads(qid_, "k", std::nullopt, 3);
  ASSERT_TRUE(heads.ok()) << heads.status().ToString();
  ASSERT_EQ(heads->size(), 2u);
  EXPECT_EQ((*heads)[0].seq, 2);
  EXPECT_EQ((*heads)[1].seq, 3);
}

TEST_F(PostgresWriteBehindTest, WritesSentWithoutWaitingAreSeenAfterThemAndCommit) {
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(Row(1)).ok());
  ASSERT_TRUE(store_->MarkRunningMany({1}, kNow + seconds(30), 1, kNow, "", "").ok());
  ASSERT_THAT(store_->SaveQueueCounts(qid_, {1, 2, 3, 4, 5}), IsOk());
  ASSERT_THAT(store_->MarkSucceeded({1}, kNow + seconds(60), kNow), IsOk());
  // Read in the same transaction, after them.
  Result<std::optional<TaskRow>> row = store_->FindBySeq(1);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(row->has_value());
  EXPECT_EQ((*row)->state, TaskState::kSucceeded);
  ASSERT_THAT(store_->SaveQueueCounts(qid_, {5, 4, 3, 2, 1}), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());  // in one round trip with the counts
  EXPECT_EQ(Count("state = 2"), "1");
  EXPECT_EQ(db_.QueryText(
                "SELECT concat_ws(',', n_scheduled, n_running, n_succeeded, n_cancelled, n_dead)"
                " FROM chronoq.queues WHERE qid = " +
                std::to_string(qid_)),
            "5,4,3,2,1");
}

// A write the server refuses (here a trigger's exception): the statement
// after it, or the commit, fails with its error, the rollback leaves nothing
// of the transaction, and the writer goes on.
TEST_F(PostgresWriteBehindTest, AFailedWriteSentWithoutWaitingFailsWhatComesNextAndCommitsNothing) {
  db_.Exec(
      "CREATE FUNCTION chronoq.refuse() RETURNS trigger LANGUAGE plpgsql AS"
      " $$BEGIN RAISE EXCEPTION 'refused by the test'; END$$;"
      " CREATE TRIGGER refuse BEFORE UPDATE ON chronoq.queues"
      " FOR EACH ROW EXECUTE FUNCTION chronoq.refuse()");
  // The next statement fails; so does the commit after it.
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(Row(1)).ok());
  ASSERT_THAT(store_->SaveQueueCounts(qid_, {1, 0, 0, 0, 0}), IsOk());  // sent, not answered yet
  Result<std::optional<TaskRow>> row = store_->FindBySeq(1);
  ASSERT_FALSE(row.ok());
  EXPECT_NE(row.status().message().find("save queue counts"), std::string::npos)
      << row.status().ToString();
  EXPECT_NE(row.status().message().find("refused by the test"), std::string::npos)
      << row.status().ToString();
  EXPECT_FALSE(store_->Commit().ok());
  store_->Rollback();
  EXPECT_EQ(Count(), "0");
  // The commit is the next statement.
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(Row(2)).ok());
  ASSERT_THAT(store_->SaveQueueCounts(qid_, {1, 0, 0, 0, 0}), IsOk());
  Status committed = store_->Commit();
  EXPECT_FALSE(committed.ok());
  EXPECT_NE(committed.message().find("refused by the test"), std::string::npos)
      << committed.ToString();
  store_->Rollback();
  EXPECT_EQ(Count(), "0");
  // The writer goes on.
  db_.Exec("DROP TRIGGER refuse ON chronoq.queues");
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_TRUE(store_->Insert(Row(3)).ok());
  ASSERT_THAT(store_->SaveQueueCounts(qid_, {1, 0, 0, 0, 0}), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(Count(), "1");
}

}  // namespace
}  // namespace chronoq
