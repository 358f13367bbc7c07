// The PostgreSQL store when its server goes away (postgres_store.h,
// OpenPostgresStore): a lost writer makes writes fail with Unavailable and
// reason kStoreUnavailable, and Begin() connects again and takes the
// schema's lock again, at once after the loss, then no more often than a
// backoff on the store's clock (a FakeClock here), failing at once in
// between. What was committed before is all there afterwards.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "store/postgres/postgres_store.h"
#include "store/store.h"
#include "support/fake_clock.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::IsOk;
using test::StatusIs;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));

class PostgresReconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok());
    clock_.Set(kNow);
    Result<std::unique_ptr<Store>> s = Open();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    ASSERT_THAT(store_->Begin(), IsOk());
    Result<int64_t> q = store_->QueueId("q");
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    qid_ = *q;
    ASSERT_THAT(store_->Commit(), IsOk());
  }
  void TearDown() override { db_.AllowConnections(true); }

  Result<std::unique_ptr<Store>> Open() {
    return OpenPostgresStore({.conninfo = db_.conninfo(), .clock = &clock_});
  }
  TaskRow Row(int64_t seq) const {
    TaskRow r;
    r.seq = seq;
    r.qid = qid_;
    r.due = kNow + seconds(seq);
    r.payload = "{}";
    r.max_attempts = 3;
    return r;
  }
  // Begin, Insert(Row(seq)), Commit: the first error, if any.
  Status Write(int64_t seq) {
    Status s = store_->Begin();
    if (s.ok()) s = store_->Insert(Row(seq)).status();
    if (s.ok()) s = store_->Commit();
    if (!s.ok()) store_->Rollback();
    return s;
  }
  std::string Seqs() {
    return db_.QueryText("SELECT string_agg(seq::text, ',' ORDER BY seq) FROM chronoq.tasks");
  }
  static void ExpectStoreUnavailable(const Status& s) {
    EXPECT_THAT(s, StatusIs(StatusCode::kUnavailable));
    EXPECT_EQ(s.reason(), StatusReason::kStoreUnavailable) << s.ToString();
  }

  test::PgTestDatabase db_;
  test::FakeClock clock_;
  std::unique_ptr<Store> store_;
  int64_t qid_ = 0;
};

TEST_F(PostgresReconnectTest, ALostWriterIsMadeAgainByTheNextBegin) {
  ASSERT_THAT(Write(1), IsOk());
  ASSERT_EQ(db_.Terminate("chronoq writer"), 1);
  // The first statement finds the connection gone...
  ExpectStoreUnavailable(Write(2));
  // ... and the next Begin connects again, at once, and takes the lock.
  ASSERT_THAT(Write(3), IsOk());
  EXPECT_EQ(Seqs(), "1,3");
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                          "current_database() AND application_name = 'chronoq writer'"),
            "1");
  // Prepared statements were made again with the connection.
  Result<std::optional<TaskRow>> row = store_->FindBySeq(3);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_TRUE(row->has_value());
}

TEST_F(PostgresReconnectTest, WhileTheServerRefusesAttemptsBackOffAndCallsFailAtOnce) {
  ASSERT_THAT(Write(1), IsOk());
  db_.AllowConnections(false);
  ASSERT_EQ(db_.Terminate("chronoq writer"), 1);
  ExpectStoreUnavailable(Write(2));  // the loss
  // An attempt at once, refused: the next in 100 ms, then 200, 400 ...
  Status refused = store_->Begin();
  ExpectStoreUnavailable(refused);
  EXPECT_NE(refused.message().find("reconnecting failed"), std::string::npos) << refused.ToString();
  Status waiting = store_->Begin();
  ExpectStoreUnavailable(waiting);
  EXPECT_NE(waiting.message().find("next attempt in 100 ms"), std::string::npos)
      << waiting.ToString();
  clock_.Advance(milliseconds(99));
  EXPECT_NE(store_->Begin().message().find("next attempt in 1 ms"), std::string::npos);
  clock_.Advance(milliseconds(1));
  ExpectStoreUnavailable(store_->Begin());  // attempted, refused again
  EXPECT_NE(store_->Begin().message().find("next attempt in 200 ms"), std::string::npos);
  // The backoff stops growing at 5 s.
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(seconds(5));
    ExpectStoreUnavailable(store_->Begin());
  }
  EXPECT_NE(store_->Begin().message().find("next attempt in 5000 ms"), std::string::npos);
  // The server takes connections again: the next attempt, when due, works.
  db_.AllowConnections(true);
  ExpectStoreUnavailable(Write(3));
  clock_.Advance(seconds(5));
  ASSERT_THAT(Write(4), IsOk());
  EXPECT_EQ(Seqs(), "1,4");
  // ... and a later loss starts again from 100 ms.
  db_.AllowConnections(false);
  ASSERT_EQ(db_.Terminate("chronoq writer"), 1);
  ExpectStoreUnavailable(Write(5));
  ExpectStoreUnavailable(store_->Begin());
  EXPECT_NE(store_->Begin().message().find("next attempt in 100 ms"), std::string::npos);
}

TEST_F(PostgresReconnectTest, AnEngineThatTookTheSchemaMeanwhileKeepsIt) {
  ASSERT_THAT(Write(1), IsOk());
  ASSERT_EQ(db_.Terminate("chronoq writer"), 1);
  // Another engine opens the schema while this one's writer is gone...
  Result<std::unique_ptr<Store>> other = Open();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ExpectStoreUnavailable(Write(2));
  // ... so this one cannot take it back: it stays unavailable, and says why.
  Status refused = store_->Begin();
  ExpectStoreUnavailable(refused);
  EXPECT_NE(refused.message().find("open in another chronoq engine"), std::string::npos)
      << refused.ToString();
  clock_.Advance(seconds(1));
  ExpectStoreUnavailable(Write(3));
  // Once the other has closed, the next attempt takes the schema.
  other->reset();
  clock_.Advance(seconds(1));
  ASSERT_THAT(Write(4), IsOk());
  EXPECT_EQ(Seqs(), "1,4");
}

}  // namespace
}  // namespace chronoq
