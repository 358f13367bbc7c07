// The PostgreSQL store against the Store contract (store/store.h): the same
// checks as tests/store/sqlite_store_test.cc, each on a fresh database of
// the cluster ctest's `postgres` fixture starts, then what only PostgreSQL
// has: the schema option, the engine lock, server-side types, lost
// connections.
#include "store/postgres/postgres_store.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using test::IsOk;
using test::IsOkAndHolds;
using test::StatusIs;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));
// Due buckets (store.h): kBase starts the bucket holding kNow; kBucket is one
// bucket long, kB0 its number.
constexpr int64_t kB0 = DueBucket(kNow);
constexpr Timestamp kBase = BucketStart(kB0);
constexpr Duration kBucket = Duration(int64_t{1} << kDueBucketShift);

// A fresh database per test, dropped afterwards; the store on its default
// schema.
class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok());
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }

  void TearDown() override { store_.reset(); }

  Result<std::unique_ptr<Store>> OpenStore(const std::string& schema = "chronoq") {
    return OpenPostgresStore({.conninfo = db_.conninfo(), .schema = schema});
  }

  // Closes the store (if open) and opens the same database again.
  void Reopen() {
    store_.reset();
    Result<std::unique_ptr<Store>> s = OpenStore();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  int64_t Queue(const std::string& name) {
    Result<int64_t> qid = store_->QueueId(name);
    EXPECT_TRUE(qid.ok()) << qid.status().ToString();
    return qid.ok() ? *qid : -1;
  }

  // Inserts `row` in its own transaction.
  void InsertCommitted(const TaskRow& row) {
    ASSERT_TRUE(store_->Begin().ok());
    Result<bool> inserted = store_->Insert(row);
    ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
    ASSERT_TRUE(*inserted) << "seq " << row.seq;
    ASSERT_TRUE(store_->Commit().ok());
  }

  std::optional<TaskRow> Find(int64_t seq) {
    Result<std::optional<TaskRow>> r = store_->FindBySeq(seq);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::nullopt;
  }

  std::optional<Store::ReadRow> Read(int64_t seq) {
    Result<std::optional<Store::ReadRow>> r = store_->ReadBySeq(seq);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::nullopt;
  }

  // The seqs of a List page.
  std::vector<int64_t> ListSeqs(const Store::ListQuery& q) {
    Result<std::vector<Store::ReadRow>> r = store_->List(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<int64_t> out;
    if (r.ok()) {
      for (const Store::ReadRow& row : *r) out.push_back(row.row.seq);
    }
    return out;
  }

  // The backend pid of the store's connection named `app` ("chronoq writer"
  // or "chronoq reader"), as pg_stat_activity shows it.
  std::string BackendPid(const std::string& app) {
    return db_.QueryText(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = '" +
        app + "'");
  }

  test::PgTestDatabase db_;
  std::unique_ptr<Store> store_;
};

TaskRow Row(int64_t seq, int64_t qid, TaskState state, std::optional<Timestamp> due) {
  TaskRow r;
  r.seq = seq;
  r.qid = qid;
  r.state = state;
  r.due = due;
  r.max_attempts = 25;
  r.payload = R"({"n":)" + std::to_string(seq) + "}";
  r.updated = kNow;
  return r;
}

TaskRow Scheduled(int64_t seq, int64_t qid, Timestamp due) {
  return Row(seq, qid, TaskState::kScheduled, due);
}

void ExpectSameRow(const TaskRow& got, const TaskRow& want) {
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.qid, want.qid);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.due, want.due);
  EXPECT_EQ(got.priority, want.priority);
  EXPECT_EQ(got.attempt, want.attempt);
  EXPECT_EQ(got.max_attempts, want.max_attempts);
  EXPECT_EQ(got.payload, want.payload);
  EXPECT_EQ(got.run_at, want.run_at);
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.last_error, want.last_error);
  EXPECT_EQ(got.updated, want.updated);
  EXPECT_EQ(got.backoff_base, want.backoff_base);
  EXPECT_EQ(got.backoff_cap, want.backoff_cap);
  EXPECT_EQ(got.target, want.target);
}

// A row with every optional column set.
TaskRow FullRow(int64_t seq, int64_t qid) {
  TaskRow r = Row(seq, qid, TaskState::kScheduled, kNow + seconds(30));
  r.name = "share:42";
  r.priority = -3;
  r.attempt = 2;
  r.max_attempts = 7;
  r.payload = R"({"to":"a@example.com","body":"caf\u00e9"})";
  r.run_at = kNow - seconds(5);
  r.token = 123456789012ull;
  r.last_error = "smtp: 451 try again";
  r.updated = kNow + Duration(17);
  r.backoff_base = std::chrono::milliseconds(250);
  r.backoff_cap = std::chrono::minutes(10);
  r.target = R"({"url":"https://example.com/hook"})";
  return r;
}

TEST_F(PostgresStoreTest, LoadMetaOnANewDatabase) {
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->max_seq, 0);
  EXPECT_EQ(meta->next_token, 1u);
}

TEST_F(PostgresStoreTest, LoadMetaReportsTheLargestSeq) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(70, q, kNow));
  InsertCommitted(Scheduled(900, q, kNow));
  InsertCommitted(Scheduled(5, q, kNow));
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->max_seq, 900);
  EXPECT_EQ(meta->next_token, 1u);
}

TEST_F(PostgresStoreTest, InsertThenFindAndReadEveryColumn) {
  ASSERT_TRUE(store_->Begin().ok());
  const int64_t q = Queue("email");
  const TaskRow row = FullRow(1001, q);
  Result<bool> inserted = store_->Insert(row);
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  EXPECT_TRUE(*inserted);
  ASSERT_TRUE(store_->Commit().ok());

  std::optional<TaskRow> by_seq = Find(1001);
  ASSERT_TRUE(by_seq.has_value());
  ExpectSameRow(*by_seq, row);

  Result<std::optional<TaskRow>> by_name = store_->FindByName("share:42");
  ASSERT_TRUE(by_name.ok());
  ASSERT_TRUE(by_name->has_value());
  ExpectSameRow(**by_name, row);

  std::optional<Store::ReadRow> read = Read(1001);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->queue, "email");
  ExpectSameRow(read->row, row);

  Result<std::optional<Store::ReadRow>> read_name = store_->ReadByName("share:42");
  ASSERT_TRUE(read_name.ok());
  ASSERT_TRUE(read_name->has_value());
  EXPECT_EQ((*read_name)->queue, "email");
  ExpectSameRow((*read_name)->row, row);
}

TEST_F(PostgresStoreTest, UnsetOptionalColumnsStayUnset) {
  const int64_t q = Queue("q");
  const TaskRow row = Row(3, q, TaskState::kDead, std::nullopt);
  InsertCommitted(row);
  std::optional<TaskRow> got = Find(3);
  ASSERT_TRUE(got.has_value());
  ExpectSameRow(*got, row);
  EXPECT_FALSE(got->due.has_value());
  EXPECT_FALSE(got->name.has_value());
  EXPECT_FALSE(got->token.has_value());
  EXPECT_FALSE(got->backoff_base.has_value());
  EXPECT_FALSE(got->target.has_value());
}

TEST_F(PostgresStoreTest, MissingRowsAreNotFound) {
  Result<std::optional<TaskRow>> seq = store_->FindBySeq(404);
  ASSERT_TRUE(seq.ok());
  EXPECT_FALSE(seq->has_value());
  Result<std::optional<TaskRow>> name = store_->FindByName("nope");
  ASSERT_TRUE(name.ok());
  EXPECT_FALSE(name->has_value());
  Result<std::optional<Store::ReadRow>> read = store_->ReadBySeq(404);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->has_value());
  Result<std::optional<Store::ReadRow>> read_name = store_->ReadByName("nope");
  ASSERT_TRUE(read_name.ok());
  EXPECT_FALSE(read_name->has_value());
}

TEST_F(PostgresStoreTest, ReaderSeesOnlyCommittedData) {
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(10, q, kNow);
  row.name = "visible-later";

  ASSERT_TRUE(store_->Begin().ok());
  Result<bool> inserted = store_->Insert(row);
  ASSERT_TRUE(inserted.ok());
  ASSERT_TRUE(*inserted);
  // The writer sees its own transaction...
  EXPECT_TRUE(Find(10).has_value());
  // ...the reader does not.
  EXPECT_FALSE(Read(10).has_value());
  Result<std::optional<Store::ReadRow>> by_name = store_->ReadByName("visible-later");
  ASSERT_TRUE(by_name.ok());
  EXPECT_FALSE(by_name->has_value());
  EXPECT_TRUE(ListSeqs({}).empty());

  ASSERT_TRUE(store_->Commit().ok());
  std::optional<Store::ReadRow> read = Read(10);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->row.seq, 10);
  EXPECT_EQ(read->queue, "q");
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{10}));
}

TEST_F(PostgresStoreTest, ReaderDoesNotSeeUncommittedUpdates) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->Begin().ok());
  Result<std::optional<TaskRow>> running =
      store_->MarkRunning(10, kNow + seconds(30), 5, kNow + seconds(1));
  ASSERT_TRUE(running.ok());
  ASSERT_TRUE(running->has_value());
  std::optional<Store::ReadRow> before = Read(10);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->row.state, TaskState::kScheduled);
  ASSERT_TRUE(store_->Commit().ok());
  std::optional<Store::ReadRow> after = Read(10);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->row.state, TaskState::kRunning);
}

TEST_F(PostgresStoreTest, RollbackDiscardsTheTransaction) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(10, q, kNow)));
  store_->Rollback();
  EXPECT_FALSE(Find(10).has_value());
  // Rollback outside a transaction is harmless.
  store_->Rollback();
  InsertCommitted(Scheduled(11, q, kNow));
  EXPECT_TRUE(Find(11).has_value());
}

TEST_F(PostgresStoreTest, DuplicateNameInsertReturnsFalseAndWritesNothing) {
  const int64_t q = Queue("q");
  TaskRow first = Scheduled(1, q, kNow);
  first.name = "dup";
  InsertCommitted(first);

  ASSERT_TRUE(store_->Begin().ok());
  TaskRow second = Scheduled(2, q, kNow + seconds(1));
  second.name = "dup";
  Result<bool> inserted = store_->Insert(second);
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  EXPECT_FALSE(*inserted);
  // The transaction is still usable.
  TaskRow third = Scheduled(3, q, kNow);
  third.name = "other";
  Result<bool> ok = store_->Insert(third);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(*ok);
  ASSERT_TRUE(store_->Commit().ok());

  EXPECT_FALSE(Find(2).has_value());
  EXPECT_TRUE(Find(3).has_value());
  Result<std::optional<TaskRow>> by_name = store_->FindByName("dup");
  ASSERT_TRUE(by_name.ok());
  ASSERT_TRUE(by_name->has_value());
  EXPECT_EQ((*by_name)->seq, 1);
}

TEST_F(PostgresStoreTest, UnnamedRowsNeverConflict) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 3; ++seq) {
    Result<bool> inserted = store_->Insert(Scheduled(seq, q, kNow));
    ASSERT_TRUE(inserted.ok());
    EXPECT_TRUE(*inserted);
  }
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(PostgresStoreTest, QueueIdCreatesOnceAndIsStable) {
  const int64_t a = Queue("alpha");
  const int64_t b = Queue("beta");
  EXPECT_NE(a, b);
  EXPECT_EQ(Queue("alpha"), a);
  EXPECT_EQ(Queue("beta"), b);

  Result<std::vector<QueueRow>> queues = store_->Queues();
  ASSERT_TRUE(queues.ok());
  std::vector<std::pair<int64_t, std::string>> got;
  for (const QueueRow& q : *queues) got.emplace_back(q.qid, q.name);
  const std::vector<std::pair<int64_t, std::string>> want = {{a, "alpha"}, {b, "beta"}};
  EXPECT_EQ(got, want);

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Queue("beta"), b);
  EXPECT_EQ(Queue("alpha"), a);
  Result<std::vector<QueueRow>> again = store_->Queues();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 2u);
}

TEST_F(PostgresStoreTest, MarkRunningClaimsAScheduledRow) {
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(10, q, kNow);
  row.attempt = 2;
  row.last_error = "earlier failure";
  InsertCommitted(row);

  const Timestamp lease = kNow + seconds(30);
  const Timestamp now = kNow + seconds(1);
  Result<std::optional<TaskRow>> r = store_->MarkRunning(10, lease, 77, now);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const TaskRow& got = **r;
  EXPECT_EQ(got.seq, 10);
  EXPECT_EQ(got.state, TaskState::kRunning);
  EXPECT_EQ(got.due, lease);
  EXPECT_EQ(got.run_at, kNow);  // the old due
  EXPECT_EQ(got.token, 77u);
  EXPECT_EQ(got.attempt, 3);
  EXPECT_EQ(got.updated, now);
  EXPECT_EQ(got.last_error, "earlier failure");
  EXPECT_EQ(got.payload, row.payload);

  std::optional<TaskRow> stored = Find(10);
  ASSERT_TRUE(stored.has_value());
  ExpectSameRow(*stored, got);
}

TEST_F(PostgresStoreTest, MarkRunningReturnsNothingUnlessScheduled) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  Result<std::optional<TaskRow>> first = store_->MarkRunning(10, kNow + seconds(30), 1, kNow);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_value());

  // Already running: no second claim, nothing changes.
  Result<std::optional<TaskRow>> second =
      store_->MarkRunning(10, kNow + seconds(90), 2, kNow + seconds(5));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->has_value());
  std::optional<TaskRow> stored = Find(10);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->token, 1u);
  EXPECT_EQ(stored->due, kNow + seconds(30));
  EXPECT_EQ(stored->attempt, 1);

  for (TaskState st : {TaskState::kSucceeded, TaskState::kCancelled, TaskState::kDead}) {
    const int64_t seq = 20 + static_cast<int64_t>(st);
    InsertCommitted(Row(seq, q, st, kNow));
    Result<std::optional<TaskRow>> r = store_->MarkRunning(seq, kNow + seconds(30), 3, kNow);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value()) << TaskStateName(st);
    std::optional<TaskRow> unchanged = Find(seq);
    ASSERT_TRUE(unchanged.has_value());
    EXPECT_EQ(unchanged->state, st);
    EXPECT_EQ(unchanged->attempt, 0);
    EXPECT_FALSE(unchanged->token.has_value());
  }

  Result<std::optional<TaskRow>> missing = store_->MarkRunning(404, kNow, 4, kNow);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_F(PostgresStoreTest, MoveRunningBackToScheduledClearsRunAtAndToken) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow).ok());

  const Timestamp retry_at = kNow + seconds(45);
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kScheduled,
                          .due = retry_at,
                          .last_error = "boom",
                          .attempt = std::nullopt,
                          .now = kNow + seconds(2)})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kScheduled);
  EXPECT_EQ(got->due, retry_at);
  EXPECT_FALSE(got->run_at.has_value());
  EXPECT_FALSE(got->token.has_value());
  EXPECT_EQ(got->last_error, "boom");
  EXPECT_EQ(got->attempt, 1);  // kept
  EXPECT_EQ(got->updated, kNow + seconds(2));
}

TEST_F(PostgresStoreTest, MoveLeavingScheduledKeepsTheDueInRunAt) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow + seconds(100)));
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kCancelled,
                          .due = kNow + std::chrono::hours(24),
                          .last_error = std::nullopt,
                          .attempt = std::nullopt,
                          .now = kNow})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kCancelled);
  EXPECT_EQ(got->run_at, kNow + seconds(100));
  EXPECT_EQ(got->due, kNow + std::chrono::hours(24));
  EXPECT_FALSE(got->last_error.has_value());
}

TEST_F(PostgresStoreTest, MoveFromRunningKeepsRunAtClearsTokenAndCoalescesError) {
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(10, q, kNow);
  row.last_error = "first failure";
  InsertCommitted(row);
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow + seconds(1)).ok());

  // No last_error given: the old one is kept.
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kSucceeded,
                          .due = kNow + std::chrono::hours(24),
                          .last_error = std::nullopt,
                          .attempt = std::nullopt,
                          .now = kNow + seconds(3)})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kSucceeded);
  EXPECT_EQ(got->run_at, kNow);  // when it was claimed for, not the lease end
  EXPECT_FALSE(got->token.has_value());
  EXPECT_EQ(got->last_error, "first failure");
  EXPECT_EQ(got->attempt, 1);
}

TEST_F(PostgresStoreTest, MoveToDeadSetsAttemptErrorAndNullDue) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow).ok());
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kDead,
                          .due = std::nullopt,
                          .last_error = "gave up",
                          .attempt = 25,
                          .now = kNow + seconds(4)})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kDead);
  EXPECT_FALSE(got->due.has_value());
  EXPECT_EQ(got->last_error, "gave up");
  EXPECT_EQ(got->attempt, 25);
  EXPECT_EQ(got->run_at, kNow);
  EXPECT_FALSE(got->token.has_value());
}

TEST_F(PostgresStoreTest, MoveDeadBackToScheduledResetsAttempt) {
  const int64_t q = Queue("q");
  TaskRow row = Row(10, q, TaskState::kDead, std::nullopt);
  row.attempt = 25;
  row.run_at = kNow - seconds(60);
  row.last_error = "gave up";
  InsertCommitted(row);
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kScheduled,
                          .due = kNow,
                          .last_error = std::nullopt,
                          .attempt = 0,
                          .now = kNow})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kScheduled);
  EXPECT_EQ(got->due, kNow);
  EXPECT_EQ(got->attempt, 0);
  EXPECT_FALSE(got->run_at.has_value());
  EXPECT_EQ(got->last_error, "gave up");
}

TEST_F(PostgresStoreTest, MoveToRunningKeepsTheToken) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow).ok());
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kRunning,
                          .due = kNow + seconds(60),
                          .last_error = std::nullopt,
                          .attempt = std::nullopt,
                          .now = kNow})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->token, 9u);
  EXPECT_EQ(got->run_at, kNow);
  EXPECT_EQ(got->due, kNow + seconds(60));
}

TEST_F(PostgresStoreTest, MarkRunningManyClaimsOnlyScheduledRowsInChunks) {
  const int64_t q = Queue("q");
  std::vector<int64_t> seqs;
  for (int64_t seq = 1; seq <= 150; ++seq) {
    // Every tenth row is already running and must be left alone.
    InsertCommitted(seq % 10 == 0 ? Row(seq, q, TaskState::kRunning, kNow + seconds(5))
                                  : Scheduled(seq, q, kNow - seconds(seq)));
    seqs.push_back(151 - seq);  // asked for in reverse order
  }
  seqs.push_back(999);  // does not exist
  ASSERT_TRUE(store_->Begin().ok());
  Result<std::vector<TaskRow>> rows =
      store_->MarkRunningMany(seqs, kNow + seconds(30), 42, kNow + seconds(1));
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_EQ(rows->size(), 135u);
  std::set<int64_t> claimed;
  for (const TaskRow& r : *rows) {
    EXPECT_NE(r.seq % 10, 0) << r.seq;
    EXPECT_TRUE(claimed.insert(r.seq).second) << "twice: " << r.seq;
    EXPECT_EQ(r.state, TaskState::kRunning);
    EXPECT_EQ(r.token, 42u);
    EXPECT_EQ(r.attempt, 1);
    EXPECT_EQ(r.due, kNow + seconds(30));
    EXPECT_EQ(r.run_at, kNow - seconds(r.seq));
  }
  Result<std::optional<TaskRow>> untouched = store_->FindBySeq(10);
  ASSERT_TRUE(untouched.ok() && untouched->has_value());
  EXPECT_EQ((*untouched)->due, kNow + seconds(5));
  EXPECT_NE((*untouched)->token, 42u);
}

TEST_F(PostgresStoreTest, MarkSucceededMovesOnlyRunningRowsInChunks) {
  const int64_t q = Queue("q");
  // 150 running rows: more than two statements' worth (64 per statement).
  std::vector<int64_t> seqs;
  for (int64_t seq = 1; seq <= 150; ++seq) {
    InsertCommitted(Row(seq, q, TaskState::kRunning, kNow + seconds(30)));
    seqs.push_back(seq);
  }
  InsertCommitted(Scheduled(151, q, kNow));
  seqs.push_back(151);  // not running: must stay as it is
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->MarkSucceeded(seqs, kNow + hours(24), kNow + seconds(1)).ok());
  ASSERT_TRUE(store_->Commit().ok());
  for (int64_t seq : {int64_t{1}, int64_t{64}, int64_t{65}, int64_t{129}, int64_t{150}}) {
    Result<std::optional<TaskRow>> row = store_->FindBySeq(seq);
    ASSERT_TRUE(row.ok() && row->has_value()) << seq;
    EXPECT_EQ((*row)->state, TaskState::kSucceeded) << seq;
    EXPECT_EQ((*row)->due, kNow + hours(24)) << seq;
    EXPECT_EQ((*row)->updated, kNow + seconds(1)) << seq;
    EXPECT_FALSE((*row)->token.has_value()) << seq;
  }
  Result<std::optional<TaskRow>> scheduled = store_->FindBySeq(151);
  ASSERT_TRUE(scheduled.ok() && scheduled->has_value());
  EXPECT_EQ((*scheduled)->state, TaskState::kScheduled);
  EXPECT_EQ((*scheduled)->due, kNow);
}

TEST_F(PostgresStoreTest, SetDueChangesOnlyDueAndUpdated) {
  const int64_t q = Queue("q");
  InsertCommitted(FullRow(10, q));
  std::optional<TaskRow> before = Find(10);
  ASSERT_TRUE(before.has_value());

  ASSERT_TRUE(store_->SetDue(10, kNow + seconds(500), kNow + seconds(7)).ok());
  std::optional<TaskRow> after = Find(10);
  ASSERT_TRUE(after.has_value());
  TaskRow want = *before;
  want.due = kNow + seconds(500);
  want.updated = kNow + seconds(7);
  ExpectSameRow(*after, want);
}

TEST_F(PostgresStoreTest, SetPayloadAndOverwrite) {
  const int64_t q = Queue("q");
  InsertCommitted(FullRow(10, q));
  ASSERT_TRUE(store_->SetPayload(10, R"({"v":2})").ok());
  std::optional<TaskRow> with_payload = Find(10);
  ASSERT_TRUE(with_payload.has_value());
  EXPECT_EQ(with_payload->payload, R"({"v":2})");

  const int64_t q2 = Queue("q2");
  TaskRow replaced = Row(10, q2, TaskState::kScheduled, kNow + seconds(9));
  replaced.name = "renamed";
  ASSERT_TRUE(store_->Overwrite(replaced).ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  ExpectSameRow(*got, replaced);
}

TEST_F(PostgresStoreTest, SaveNextTokenPersistsAcrossReopen) {
  ASSERT_TRUE(store_->SaveNextToken(4242).ok());
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->next_token, 4242u);

  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->SaveNextToken(5000).ok());
  ASSERT_TRUE(store_->Commit().ok());

  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<StoreMeta> reopened = store_->LoadMeta();
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(reopened->next_token, 5000u);
}

TEST_F(PostgresStoreTest, KeyedTasksWaitingToStartAreFoundByKeyInOrder) {
  const int64_t q = Queue("q");
  auto keyed = [&](int64_t seq, Timestamp due, int attempt = 0, int prio = 0) {
    TaskRow r = Scheduled(seq, q, due);
    r.key = "k";
    r.attempt = attempt;
    r.priority = prio;
    return r;
  };
  InsertCommitted(keyed(1, kBase + seconds(20)));
  InsertCommitted(keyed(2, kBase + seconds(10)));
  InsertCommitted(keyed(3, kBase + seconds(10)));
  InsertCommitted(keyed(4, kBase + seconds(10), 0, -1));
  InsertCommitted(keyed(5, kBase, /*attempt=*/2));  // waiting to retry: not waiting to start
  TaskRow other = keyed(6, kBase);
  other.key = "other";
  InsertCommitted(other);
  InsertCommitted(Scheduled(7, q, kBase));  // no key

  // (due, priority, seq) order; `after` steps past a position.
  std::vector<int64_t> order;
  std::vector<int64_t> counts;  // waiting after each position
  std::optional<KeyPosition> after;
  for (;;) {
    Result<std::vector<DueEntry>> head = store_->KeyHeads(q, "k", after, 1);
    ASSERT_TRUE(head.ok()) << head.status().ToString();
    Result<int64_t> count = store_->CountKeyPending(q, "k", after);
    ASSERT_TRUE(count.ok()) << count.status().ToString();
    counts.push_back(*count);
    if (head->empty()) break;
    const DueEntry& h = head->front();
    order.push_back(h.seq);
    after = KeyPosition{h.due, h.priority, h.seq};
  }
  EXPECT_EQ(order, (std::vector<int64_t>{4, 2, 3, 1}));
  EXPECT_EQ(counts, (std::vector<int64_t>{4, 3, 2, 1, 0}));
  // Several at once: the same order, across equal and greater (due, priority).
  auto seqs = [&](const std::optional<KeyPosition>& from, int limit) {
    std::vector<int64_t> out;
    Result<std::vector<DueEntry>> rows = store_->KeyHeads(q, "k", from, limit);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (rows.ok()) {
      for (const DueEntry& e : *rows) out.push_back(e.seq);
    }
    return out;
  };
  EXPECT_EQ(seqs(std::nullopt, 10), (std::vector<int64_t>{4, 2, 3, 1}));
  EXPECT_EQ(seqs(std::nullopt, 2), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(seqs(KeyPosition{kBase + seconds(10), 0, 2}, 2), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(*store_->CountKeyPending(q, "other", std::nullopt), 1);
  EXPECT_EQ(*store_->CountKeyPending(q + 1, "k", std::nullopt), 0);
  Result<std::vector<std::pair<int64_t, std::string>>> retries = store_->LoadKeyRetries();
  ASSERT_TRUE(retries.ok());
  EXPECT_EQ(*retries, (std::vector<std::pair<int64_t, std::string>>{{q, "k"}}));

  // The window's load says which rows are keyed and which started.
  Result<std::vector<DueEntry>> loaded = store_->LoadScheduled(kB0, 0, kB0 + 1, 100);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->size(), 7u);
  EXPECT_EQ((*loaded)[4].key, "k");
  EXPECT_TRUE((*loaded)[4].started);
  EXPECT_FALSE((*loaded)[0].started);
  EXPECT_EQ((*loaded)[6].key, std::nullopt);
  // Going on after seq 5 within the first bucket.
  Result<std::vector<DueEntry>> rest = store_->LoadScheduled(kB0, 5, kB0 + 1, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].seq, 6);
}

// The saved cursor of a key (store.h): where reads start; never backwards,
// moved back by a task that comes to wait before it, dropped when nothing
// lies before it.
TEST_F(PostgresStoreTest, AKeysSavedCursorStaysBeforeEveryTaskWaitingToStart) {
  const int64_t q = Queue("q");
  auto keyed = [&](int64_t seq, Timestamp due) {
    TaskRow r = Scheduled(seq, q, due);
    r.key = "k";
    return r;
  };
  for (int64_t seq = 1; seq <= 5; ++seq) InsertCommitted(keyed(seq, kBase));
  auto saved = [&] {
    return db_.QueryText("SELECT seq FROM chronoq.key_cursors WHERE qid=" + std::to_string(q) +
                         " AND key='k'");
  };
  auto head = [&]() -> int64_t {
    Result<std::vector<DueEntry>> h = store_->KeyHeads(q, "k", std::nullopt, 1);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() && !h->empty() ? h->front().seq : 0;
  };
  // Only ever at a task that started (as the engine does).
  auto save = [&](int64_t seq, Timestamp at = kBase) {
    ASSERT_TRUE(store_->Begin().ok());
    ASSERT_TRUE(store_->SaveKeyCursor(q, "k", KeyPosition{at, 0, seq}).ok());
    ASSERT_TRUE(store_->Commit().ok());
  };
  auto start = [&](std::vector<int64_t> seqs) {
    ASSERT_TRUE(store_->Begin().ok());
    ASSERT_TRUE(store_->MarkRunningMany(seqs, kNow + seconds(30), 1, kNow).ok());
    ASSERT_TRUE(store_->Commit().ok());
  };
  EXPECT_EQ(saved(), "");  // none yet: reads start at the beginning
  start({1, 2});
  EXPECT_EQ(head(), 3);
  save(2);
  EXPECT_EQ(saved(), "2");
  EXPECT_EQ(head(), 3);
  EXPECT_EQ(*store_->CountKeyPending(q, "k", std::nullopt), 3);
  start({3});
  save(3);
  EXPECT_EQ(saved(), "3");
  EXPECT_EQ(head(), 4);
  save(1);  // never backwards
  EXPECT_EQ(saved(), "3");

  // A task enqueued earlier in the line moves the cursor back.
  InsertCommitted(keyed(6, kBase - seconds(1)));
  EXPECT_EQ(saved(), "5");  // just before seq 6, at its earlier due
  EXPECT_EQ(head(), 6);
  start({6});
  save(6, kBase - seconds(1));
  EXPECT_EQ(saved(), "6");
  // ... and so does a task rescheduled to wait earlier, or retried by hand.
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->Move({5, TaskState::kScheduled, kBase - seconds(5), {}, 0, kNow, true}).ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(saved(), "4");
  EXPECT_EQ(head(), 5);
  // A task waiting to retry has started: it moves nothing.
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(
      store_->Move({1, TaskState::kScheduled, kBase - seconds(9), {}, {}, kNow, true}).ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(saved(), "4");
  EXPECT_EQ(head(), 5);

  // A cursor lies before every task of its key waiting to start, and the key
  // index holds no other tasks (postgres_store.cc): a delete or purge of the
  // key's tasks drops it, since reads find the same without it.
  start({5, 4});
  save(4);
  EXPECT_EQ(saved(), "4");
  EXPECT_EQ(head(), 0);
  InsertCommitted(keyed(7, kBase - seconds(9)));  // waits before the cursor
  EXPECT_EQ(saved(), "6");
  ASSERT_TRUE(store_->Begin().ok());
  for (int64_t seq : {1, 2, 3, 5, 6}) ASSERT_TRUE(store_->Delete(seq).ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(saved(), "");  // task 4 still runs, task 7 still waits
  EXPECT_EQ(head(), 7);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->MarkSucceeded({4}, kNow, kNow).ok());
  Result<Purged> purged = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(purged->rows, 1);
  EXPECT_EQ(saved(), "");
}

TEST_F(PostgresStoreTest, LoadScheduledRangeLimitAndOrder) {
  const int64_t q1 = Queue("q1");
  const int64_t q2 = Queue("q2");
  TaskRow prio = Scheduled(1, q2, kBase + kBucket + seconds(3));
  prio.priority = -7;
  InsertCommitted(prio);                                   // bucket 1
  InsertCommitted(Scheduled(2, q1, kBase + kBucket));      // bucket 1
  InsertCommitted(Scheduled(3, q1, kBase + 3 * kBucket));  // bucket 3 == to: excluded
  InsertCommitted(Scheduled(4, q1, kBase));                // bucket 0 == from: included
  InsertCommitted(Scheduled(5, q1, kBase - seconds(1)));   // before from
  InsertCommitted(Scheduled(6, q1, kBase + 2 * kBucket + seconds(60)));  // bucket 2
  InsertCommitted(Row(7, q1, TaskState::kRunning, kBase + kBucket));
  InsertCommitted(Row(8, q1, TaskState::kSucceeded, kBase + kBucket));

  // Bucket order, then seq order within a bucket.
  Result<std::vector<DueEntry>> all = store_->LoadScheduled(kB0, 0, kB0 + 3, 100);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<int64_t> seqs;
  for (const DueEntry& e : *all) seqs.push_back(e.seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{4, 1, 2, 6}));

  ASSERT_EQ(all->size(), 4u);
  const DueEntry& first_of_bucket = (*all)[1];
  EXPECT_EQ(first_of_bucket.qid, q2);
  EXPECT_EQ(first_of_bucket.due, kBase + kBucket + seconds(3));  // the exact due
  EXPECT_EQ(first_of_bucket.priority, -7);

  Result<std::vector<DueEntry>> two = store_->LoadScheduled(kB0, 0, kB0 + 3, 2);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].seq, 4);
  EXPECT_EQ((*two)[1].seq, 1);

  Result<std::vector<DueEntry>> none = store_->LoadScheduled(kB0 + 4, 0, kB0 + 100, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(PostgresStoreTest, NextScheduledBucket) {
  const int64_t q = Queue("q");
  Result<std::optional<int64_t>> empty = store_->NextScheduledBucket(DueBucket(Timestamp()));
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());

  InsertCommitted(Scheduled(1, q, kBase + 2 * kBucket + seconds(20)));
  InsertCommitted(Scheduled(2, q, kBase + kBucket + seconds(10)));
  InsertCommitted(Row(3, q, TaskState::kRunning, kBase));
  InsertCommitted(Row(4, q, TaskState::kSucceeded, kBase));

  Result<std::optional<int64_t>> next = store_->NextScheduledBucket(kB0);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, kB0 + 1);

  Result<std::optional<int64_t>> inclusive = store_->NextScheduledBucket(kB0 + 1);
  ASSERT_TRUE(inclusive.ok());
  EXPECT_EQ(*inclusive, kB0 + 1);

  Result<std::optional<int64_t>> later = store_->NextScheduledBucket(kB0 + 2);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(*later, kB0 + 2);

  Result<std::optional<int64_t>> past = store_->NextScheduledBucket(kB0 + 3);
  ASSERT_TRUE(past.ok());
  EXPECT_FALSE(past->has_value());
}

TEST_F(PostgresStoreTest, LoadRunningReturnsOnlyRunningRows) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(1, q, kNow));
  InsertCommitted(Scheduled(2, q, kNow));
  InsertCommitted(Scheduled(3, q, kNow));
  InsertCommitted(Row(4, q, TaskState::kDead, std::nullopt));
  ASSERT_TRUE(store_->MarkRunning(1, kNow + seconds(30), 11, kNow).ok());
  ASSERT_TRUE(store_->MarkRunning(3, kNow + seconds(40), 12, kNow).ok());

  Result<std::vector<TaskRow>> running = store_->LoadRunning();
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  ASSERT_EQ(running->size(), 2u);
  std::vector<std::pair<int64_t, uint64_t>> got;
  for (const TaskRow& r : *running) {
    EXPECT_EQ(r.state, TaskState::kRunning);
    ASSERT_TRUE(r.token.has_value());
    got.emplace_back(r.seq, *r.token);
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, uint64_t>>{{1, 11}, {3, 12}}));
}

TEST_F(PostgresStoreTest, PurgeFinishedDeletesOnlyDueSucceededAndCancelled) {
  const int64_t q = Queue("q");
  InsertCommitted(Row(1, q, TaskState::kSucceeded, kNow - seconds(1)));
  InsertCommitted(Row(2, q, TaskState::kCancelled, kNow));  // due == before: purged
  InsertCommitted(Row(3, q, TaskState::kSucceeded, kNow + seconds(1)));
  InsertCommitted(Row(4, q, TaskState::kCancelled, kNow + seconds(1)));
  InsertCommitted(Row(5, q, TaskState::kScheduled, kNow - seconds(10)));
  InsertCommitted(Row(6, q, TaskState::kRunning, kNow - seconds(10)));
  InsertCommitted(Row(7, q, TaskState::kDead, std::nullopt));

  Result<Purged> purged = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->rows, 2);
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{3, 4, 5, 6, 7}));

  Result<Purged> again = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->rows, 0);
}

TEST_F(PostgresStoreTest, PurgeFinishedRespectsTheLimit) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 5; ++seq) {
    InsertCommitted(Row(seq, q, TaskState::kSucceeded, kNow - seconds(seq)));
  }
  InsertCommitted(Row(6, q, TaskState::kScheduled, kNow - seconds(100)));

  std::vector<int> counts;
  for (int i = 0; i < 4; ++i) {
    Result<Purged> n = store_->PurgeFinished(kNow, 2);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    counts.push_back(n->rows);
  }
  EXPECT_EQ(counts, (std::vector<int>{2, 2, 1, 0}));
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{6}));
}

TEST_F(PostgresStoreTest, NextPurgeDue) {
  const int64_t q = Queue("q");
  Result<std::optional<Timestamp>> empty = store_->NextPurgeDue();
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());

  InsertCommitted(Row(1, q, TaskState::kScheduled, kNow - seconds(100)));
  InsertCommitted(Row(2, q, TaskState::kRunning, kNow - seconds(90)));
  InsertCommitted(Row(3, q, TaskState::kDead, std::nullopt));
  Result<std::optional<Timestamp>> still_none = store_->NextPurgeDue();
  ASSERT_TRUE(still_none.ok());
  EXPECT_FALSE(still_none->has_value());

  InsertCommitted(Row(4, q, TaskState::kSucceeded, kBase + 2 * kBucket + seconds(5)));
  InsertCommitted(Row(5, q, TaskState::kCancelled, kBase + kBucket + seconds(7)));
  InsertCommitted(Row(6, q, TaskState::kSucceeded, kBase + kBucket + seconds(9)));
  // A lower bound: the start of the earliest bucket holding a purge time.
  Result<std::optional<Timestamp>> next = store_->NextPurgeDue();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, kBase + kBucket);

  ASSERT_TRUE(store_->Delete(5).ok());
  ASSERT_TRUE(store_->Delete(6).ok());
  Result<std::optional<Timestamp>> after = store_->NextPurgeDue();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, kBase + 2 * kBucket);
}

// Scheduled rows whose due order differs from their seq order.
class PostgresStoreListTest : public PostgresStoreTest {
 protected:
  void SetUp() override {
    PostgresStoreTest::SetUp();
    if (HasFatalFailure()) return;
    a_ = Queue("a");
    b_ = Queue("b");
    ASSERT_TRUE(store_->Begin().ok());
    // seq: queue, due (bucket 0-3; seqs 2, 3 and 5 share bucket 1).
    Add(Scheduled(1, a_, kBase + 3 * kBucket));
    Add(Scheduled(2, b_, kBase + kBucket + seconds(10)));
    Add(Scheduled(3, a_, kBase + kBucket + seconds(5)));
    Add(Scheduled(4, a_, kBase + 2 * kBucket));
    Add(Scheduled(5, b_, kBase + kBucket + seconds(1)));
    Add(Scheduled(6, a_, kBase));
    Add(Row(7, a_, TaskState::kDead, std::nullopt));
    Add(Row(8, b_, TaskState::kRunning, kNow + seconds(5)));
    Add(Row(9, a_, TaskState::kDead, std::nullopt));
    Add(Row(10, b_, TaskState::kDead, std::nullopt));
    ASSERT_TRUE(store_->Commit().ok());
  }

  void Add(const TaskRow& row) {
    Result<bool> r = store_->Insert(row);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(*r);
  }

  int64_t a_ = 0;
  int64_t b_ = 0;
};

TEST_F(PostgresStoreListTest, ByStateOrdersByDueBucketThenSeq) {
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{6, 2, 3, 5, 4, 1}));
}

TEST_F(PostgresStoreListTest, ByStatePagesWithAfterBucketAndAfterSeq) {
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  q.limit = 2;
  std::vector<int64_t> all;
  for (int page = 0; page < 10; ++page) {
    Result<std::vector<Store::ReadRow>> rows = store_->List(q);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_LE(rows->size(), 2u);
    if (rows->empty()) break;
    for (const Store::ReadRow& r : *rows) all.push_back(r.row.seq);
    ASSERT_TRUE(rows->back().row.due.has_value());
    q.after_bucket = DueBucket(*rows->back().row.due);
    q.after_seq = rows->back().row.seq;
  }
  EXPECT_EQ(all, (std::vector<int64_t>{6, 2, 3, 5, 4, 1}));
}

TEST_F(PostgresStoreListTest, CursorInsideABucket) {
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  q.after_bucket = kB0 + 1;
  q.after_seq = 2;  // seqs 3 and 5 share that bucket and come after 2
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{3, 5, 4, 1}));
}

TEST_F(PostgresStoreListTest, ByStateAndQueue) {
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  q.queue = "b";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{2, 5}));
  q.queue = "a";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{6, 3, 4, 1}));
  q.queue = "nope";
  EXPECT_TRUE(ListSeqs(q).empty());
}

TEST_F(PostgresStoreListTest, RowsCarryTheirQueueName) {
  Store::ListQuery q;
  q.state = TaskState::kRunning;
  Result<std::vector<Store::ReadRow>> rows = store_->List(q);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].row.seq, 8);
  EXPECT_EQ((*rows)[0].queue, "b");
  EXPECT_EQ((*rows)[0].row.state, TaskState::kRunning);
}

TEST_F(PostgresStoreListTest, DeadIsOrderedBySeqAndPagesBySeq) {
  Store::ListQuery q;
  q.state = TaskState::kDead;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{7, 9, 10}));
  q.limit = 2;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{7, 9}));
  q.after_seq = 9;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{10}));
  q.limit = 100;
  q.after_seq = 0;
  q.queue = "a";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{7, 9}));
}

TEST_F(PostgresStoreListTest, NoStateIsOrderedBySeq) {
  Store::ListQuery q;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  q.limit = 3;
  q.after_seq = 4;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{5, 6, 7}));
  q.limit = 100;
  q.after_seq = 0;
  q.queue = "b";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{2, 5, 8, 10}));
}

TEST_F(PostgresStoreListTest, EmptyState) {
  Store::ListQuery q;
  q.state = TaskState::kSucceeded;
  EXPECT_TRUE(ListSeqs(q).empty());
}

TEST_F(PostgresStoreTest, RollbackToSavepointUndoesOnlyTheSavepoint) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(1, q, kNow)));

  ASSERT_TRUE(store_->Savepoint().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(2, q, kNow)));
  ASSERT_TRUE(store_->SaveNextToken(99).ok());
  EXPECT_TRUE(Find(2).has_value());
  store_->RollbackToSavepoint();
  EXPECT_FALSE(Find(2).has_value());

  // The transaction goes on, and a later savepoint can be kept.
  ASSERT_TRUE(store_->Savepoint().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(3, q, kNow)));
  ASSERT_TRUE(store_->ReleaseSavepoint().ok());
  ASSERT_TRUE(store_->Commit().ok());

  EXPECT_TRUE(Find(1).has_value());
  EXPECT_FALSE(Find(2).has_value());
  EXPECT_TRUE(Find(3).has_value());
  EXPECT_TRUE(Read(1).has_value());
  EXPECT_FALSE(Read(2).has_value());
  EXPECT_TRUE(Read(3).has_value());
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->next_token, 1u);
}

TEST_F(PostgresStoreTest, DeleteRemovesTheRow) {
  const int64_t q = Queue("q");
  TaskRow named = Scheduled(1, q, kNow);
  named.name = "gone";
  InsertCommitted(named);
  InsertCommitted(Scheduled(2, q, kNow));

  ASSERT_TRUE(store_->Delete(1).ok());
  EXPECT_FALSE(Find(1).has_value());
  EXPECT_TRUE(Find(2).has_value());
  EXPECT_FALSE(Read(1).has_value());
  // The name is free again.
  TaskRow reuse = Scheduled(3, q, kNow);
  reuse.name = "gone";
  Result<bool> inserted = store_->Insert(reuse);
  ASSERT_TRUE(inserted.ok());
  EXPECT_TRUE(*inserted);
  // Deleting a missing row is not an error.
  EXPECT_TRUE(store_->Delete(404).ok());
}

TEST_F(PostgresStoreTest, DataSurvivesCloseAndReopen) {
  const int64_t q = Queue("email");
  const TaskRow row = FullRow(77, q);
  InsertCommitted(row);
  InsertCommitted(Scheduled(78, q, kNow + seconds(1)));
  ASSERT_TRUE(store_->MarkRunning(78, kNow + seconds(30), 5, kNow).ok());
  ASSERT_TRUE(store_->SaveNextToken(6).ok());

  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->max_seq, 78);
  EXPECT_EQ(meta->next_token, 6u);

  std::optional<TaskRow> got = Find(77);
  ASSERT_TRUE(got.has_value());
  ExpectSameRow(*got, row);
  std::optional<Store::ReadRow> read = Read(77);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->queue, "email");

  Result<std::vector<TaskRow>> running = store_->LoadRunning();
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].seq, 78);
  EXPECT_EQ((*running)[0].token, 5u);
  EXPECT_EQ(Queue("email"), q);
}

TEST_F(PostgresStoreTest, PurgeFinishedReportsWhatItDeletedPerQueueAndState) {
  const int64_t a = Queue("a");
  const int64_t b = Queue("b");
  InsertCommitted(Row(1, a, TaskState::kSucceeded, kNow - seconds(3)));
  InsertCommitted(Row(2, a, TaskState::kSucceeded, kNow - seconds(2)));
  InsertCommitted(Row(3, a, TaskState::kCancelled, kNow - seconds(1)));
  InsertCommitted(Row(4, b, TaskState::kSucceeded, kNow));
  InsertCommitted(Row(5, b, TaskState::kSucceeded, kNow + seconds(1)));  // not yet

  Result<Purged> purged = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->rows, 4);
  std::vector<std::tuple<int64_t, TaskState, int64_t>> got;
  for (const Purged::Count& c : purged->by_queue) got.emplace_back(c.qid, c.state, c.n);
  std::sort(got.begin(), got.end());
  const std::vector<std::tuple<int64_t, TaskState, int64_t>> want = {
      {a, TaskState::kSucceeded, 2}, {a, TaskState::kCancelled, 1}, {b, TaskState::kSucceeded, 1}};
  EXPECT_EQ(got, want);
}

TEST_F(PostgresStoreTest, QueueSettingsAndCountsPersist) {
  const int64_t a = Queue("a");
  const int64_t b = Queue("b");
  Result<std::vector<QueueRow>> fresh = store_->Queues();
  ASSERT_TRUE(fresh.ok());
  ASSERT_EQ(fresh->size(), 2u);
  // A new queue has no settings, is not paused and counts nothing.
  const QueueRow& q0 = (*fresh)[0];
  EXPECT_FALSE(q0.settings.concurrency || q0.settings.max_attempts || q0.settings.backoff ||
               q0.settings.retention);
  EXPECT_FALSE(q0.paused);
  EXPECT_EQ(q0.counts, (std::array<int64_t, 5>{}));

  QueueSettings settings;
  settings.concurrency = 3;
  settings.max_attempts = 9;
  settings.backoff = Backoff{std::chrono::milliseconds(5), std::chrono::minutes(2)};
  settings.retention = hours(6);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->SaveQueueSettings(a, settings, /*paused=*/true, /*webhooks=*/true).ok());
  ASSERT_TRUE(store_->SaveQueueCounts(a, {1, 2, 3, 4, 5}).ok());
  ASSERT_TRUE(store_->SaveQueueCounts(b, {0, 0, 7, 0, 0}).ok());
  ASSERT_TRUE(store_->Commit().ok());
  // A rolled-back change is not kept.
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->SaveQueueCounts(b, {9, 9, 9, 9, 9}).ok());
  store_->Rollback();

  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<std::vector<QueueRow>> queues = store_->Queues();
  ASSERT_TRUE(queues.ok());
  ASSERT_EQ(queues->size(), 2u);
  const QueueRow& qa = (*queues)[0];
  EXPECT_EQ(qa.qid, a);
  EXPECT_EQ(qa.name, "a");
  EXPECT_TRUE(qa.paused);
  EXPECT_TRUE(qa.webhooks);
  EXPECT_EQ(qa.settings.concurrency, 3);
  EXPECT_EQ(qa.settings.max_attempts, 9);
  EXPECT_EQ(qa.settings.backoff, settings.backoff);
  EXPECT_EQ(qa.settings.retention, hours(6));
  EXPECT_EQ(qa.counts, (std::array<int64_t, 5>{1, 2, 3, 4, 5}));
  const QueueRow& qb = (*queues)[1];
  EXPECT_FALSE(qb.paused);
  EXPECT_FALSE(qb.webhooks);
  EXPECT_FALSE(qb.settings.concurrency.has_value());
  EXPECT_EQ(qb.counts, (std::array<int64_t, 5>{0, 0, 7, 0, 0}));

  // Unsetting goes back to NULL; a zero retention is kept as zero.
  QueueSettings fewer;
  fewer.retention = Duration::zero();
  ASSERT_TRUE(store_->SaveQueueSettings(a, fewer, false, false).ok());
  Result<std::vector<QueueRow>> again = store_->Queues();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)[0].settings.concurrency.has_value());
  EXPECT_FALSE((*again)[0].settings.backoff.has_value());
  EXPECT_EQ((*again)[0].settings.retention, Duration::zero());
  EXPECT_FALSE((*again)[0].paused);
  EXPECT_FALSE((*again)[0].webhooks);
}

// --- schedules -----------------------------------------------------------------

ScheduleRow NewSchedule(const std::string& name, int64_t qid) {
  ScheduleRow r;
  r.name = name;
  r.qid = qid;
  r.spec = R"({"name":")" + name + R"("})";
  r.created = kNow;
  r.updated = kNow;
  return r;
}

TEST_F(PostgresStoreTest, SchedulesSaveAndReadEveryColumn) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  ScheduleRow r = NewSchedule("nightly", q);
  Result<std::optional<int64_t>> sid = store_->InsertSchedule(r);
  ASSERT_TRUE(sid.ok() && sid->has_value()) << sid.status().ToString();
  // A taken name writes nothing.
  Result<std::optional<int64_t>> again = store_->InsertSchedule(r);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  r.sid = **sid;
  r.paused = true;
  r.current_seq = 41;
  r.cursor = kNow + seconds(1);
  r.next_at = kNow + seconds(2);
  r.claimed_at = kNow + seconds(3);
  r.runs = 5;
  r.skipped = 6;
  r.last_task = "nightly@x";
  r.last_for = kNow + seconds(4);
  r.last_state = TaskState::kDead;
  r.last_finished = kNow + seconds(5);
  r.last_error = "boom";
  r.updated = kNow + seconds(6);
  ASSERT_TRUE(store_->SaveSchedule(r).ok());
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());

  Result<std::optional<ScheduleRow>> got = store_->FindScheduleByName("nightly");
  ASSERT_TRUE(got.ok() && got->has_value());
  const ScheduleRow& g = **got;
  EXPECT_EQ(g.sid, r.sid);
  EXPECT_EQ(g.qid, q);
  EXPECT_EQ(g.spec, r.spec);
  EXPECT_TRUE(g.paused);
  EXPECT_EQ(g.current_seq, 41);
  EXPECT_EQ(g.cursor, r.cursor);
  EXPECT_EQ(g.next_at, r.next_at);
  EXPECT_EQ(g.claimed_at, r.claimed_at);
  EXPECT_EQ(g.runs, 5);
  EXPECT_EQ(g.skipped, 6);
  EXPECT_EQ(g.last_task, r.last_task);
  EXPECT_EQ(g.last_for, r.last_for);
  EXPECT_EQ(g.last_state, TaskState::kDead);
  EXPECT_EQ(g.last_finished, r.last_finished);
  EXPECT_EQ(g.last_error, "boom");
  EXPECT_EQ(g.created, kNow);
  EXPECT_EQ(g.updated, r.updated);
  Result<std::optional<ScheduleRow>> by_sid = store_->FindSchedule(r.sid);
  ASSERT_TRUE(by_sid.ok() && by_sid->has_value());
  EXPECT_EQ((*by_sid)->name, "nightly");
}

TEST_F(PostgresStoreTest, DeletedScheduleIdsAreNeverReused) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  const int64_t first = **store_->InsertSchedule(NewSchedule("a", q));
  ASSERT_TRUE(store_->DeleteSchedule(first).ok());
  EXPECT_FALSE(store_->FindSchedule(first)->has_value());
  const int64_t second = **store_->InsertSchedule(NewSchedule("a", q));
  ASSERT_TRUE(store_->Commit().ok());
  // An occurrence of the deleted schedule must not be taken for one of the new.
  EXPECT_GT(second, first);
}

TEST_F(PostgresStoreTest, SchedulesDueBeforeAndListing) {
  const int64_t q = Queue("q");
  const int64_t other = Queue("other");
  ASSERT_TRUE(store_->Begin().ok());
  const std::vector<std::pair<std::string, std::optional<Duration>>> rows = {
      {"d", seconds(5)}, {"b", seconds(-5)}, {"a", std::nullopt}, {"c", seconds(-1)}};
  for (const auto& [name, next] : rows) {
    ScheduleRow r = NewSchedule(name, name == "c" ? other : q);
    if (next) r.next_at = kNow + *next;
    ASSERT_TRUE(store_->InsertSchedule(r)->has_value());
  }
  auto names = [](const Result<std::vector<ScheduleRow>>& r) {
    std::vector<std::string> out;
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const ScheduleRow& s : *r) out.push_back(s.name);
    }
    return out;
  };
  // Due before now: b and c, by sid (insertion order).
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow, 0, 10)), (std::vector<std::string>{"b", "c"}));
  const int64_t b_sid = (*store_->FindScheduleByName("b"))->sid;
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow, b_sid, 10)), std::vector<std::string>{"c"});
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow, 0, 1)), std::vector<std::string>{"b"});
  // Listing: by name, after a cursor, of one queue.
  EXPECT_EQ(names(store_->ListSchedules(std::nullopt, "", 10)),
            (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(names(store_->ListSchedules(std::nullopt, "b", 1)), std::vector<std::string>{"c"});
  EXPECT_EQ(names(store_->ListSchedules(q, "", 10)), (std::vector<std::string>{"a", "b", "d"}));
  ASSERT_TRUE(store_->Commit().ok());
}

// --- keyed locks ---------------------------------------------------------------

TEST_F(PostgresStoreTest, LocksAreSavedReplacedDeletedAndKeptAcrossReopen) {
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_THAT(store_->SaveLock({"a", 7, "worker-1", kNow + seconds(30)}), IsOk());
  ASSERT_THAT(store_->SaveLock({"b", 8, "", kNow + seconds(40)}), IsOk());
  // The same key again replaces its row.
  ASSERT_THAT(store_->SaveLock({"a", 9, "worker-2", kNow + seconds(50)}), IsOk());
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<std::vector<LockRow>> locks = store_->LoadLocks();
  ASSERT_THAT(locks, IsOk());
  std::vector<std::tuple<std::string, uint64_t, std::string, Timestamp>> got;
  for (const LockRow& l : *locks) got.emplace_back(l.key, l.token, l.owner, l.expires);
  std::sort(got.begin(), got.end());
  const std::vector<std::tuple<std::string, uint64_t, std::string, Timestamp>> want = {
      {"a", 9, "worker-2", kNow + seconds(50)}, {"b", 8, "", kNow + seconds(40)}};
  EXPECT_EQ(got, want);
  ASSERT_THAT(store_->DeleteLock("a"), IsOk());
  ASSERT_THAT(store_->DeleteLock("nope"), IsOk());
  Result<std::vector<LockRow>> left = store_->LoadLocks();
  ASSERT_THAT(left, IsOk());
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].key, "b");
}

// --- what only PostgreSQL has -------------------------------------------------

TEST_F(PostgresStoreTest, OpenCreatesTheSchemaItsTablesAndIndexes) {
  EXPECT_EQ(db_.QueryText("SELECT string_agg(table_name, ',' ORDER BY table_name)"
                          " FROM information_schema.tables WHERE table_schema = 'chronoq'"),
            "key_cursors,locks,meta,queues,schedules,tasks");
  EXPECT_EQ(db_.QueryText("SELECT v FROM chronoq.meta WHERE k = 'schema'"), "1");
  EXPECT_EQ(db_.QueryText("SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes"
                          " WHERE schemaname = 'chronoq' AND indexname NOT LIKE '%pkey'"
                          " AND indexname NOT LIKE '%_key'"),
            "schedules_next,tasks_due,tasks_key_retry,tasks_korder,tasks_name");
  // The due index holds the bucket the queries spell.
  EXPECT_NE(db_.QueryText("SELECT indexdef FROM pg_indexes WHERE indexname = 'tasks_due'")
                .find("(due >> 28)"),
            std::string::npos);
  // Opening again changes nothing.
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM information_schema.tables"
                          " WHERE table_schema = 'chronoq'"),
            "6");
}

TEST_F(PostgresStoreTest, ANewerSchemaVersionIsRefused) {
  store_.reset();
  db_.Exec("UPDATE chronoq.meta SET v = 99 WHERE k = 'schema'");
  Result<std::unique_ptr<Store>> store = OpenStore();
  ASSERT_THAT(store, IsOk());
  EXPECT_THAT((*store)->LoadMeta(), StatusIs(StatusCode::kFailedPrecondition));
}

TEST_F(PostgresStoreTest, TheSchemaOptionKeepsStoresApart) {
  // Another schema of the same database is another engine's: it opens while
  // the first is open, and neither sees the other's rows.
  Result<std::unique_ptr<Store>> other = OpenStore("tenant_b");
  ASSERT_THAT(other, IsOk());
  InsertCommitted(Scheduled(1, Queue("q"), kNow));
  Result<int64_t> q = (*other)->QueueId("other-q");
  ASSERT_THAT(q, IsOk());
  TaskRow row = Scheduled(2, *q, kNow);
  row.name = "mine";
  ASSERT_THAT((*other)->Insert(row), IsOkAndHolds(true));
  EXPECT_EQ(ListSeqs({}), std::vector<int64_t>{1});
  Result<std::vector<Store::ReadRow>> theirs = (*other)->List({});
  ASSERT_THAT(theirs, IsOk());
  ASSERT_EQ(theirs->size(), 1u);
  EXPECT_EQ((*theirs)[0].row.seq, 2);
  EXPECT_EQ((*theirs)[0].queue, "other-q");
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM tenant_b.tasks"), "1");
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.tasks"), "1");
  // The name is free in the first schema.
  Result<std::optional<TaskRow>> none = store_->FindByName("mine");
  ASSERT_THAT(none, IsOk());
  EXPECT_FALSE(none->has_value());
}

TEST_F(PostgresStoreTest, BadSchemaNamesAreRefusedBeforeConnecting) {
  for (const std::string& bad : std::vector<std::string>{"", "Chronoq", "1st", "pg_chronoq", "a-b",
                                                         "a b", "a\"b", std::string(64, 'x')}) {
    Result<std::unique_ptr<Store>> store = OpenStore(bad);
    ASSERT_THAT(store, StatusIs(StatusCode::kInvalidArgument)) << bad;
    EXPECT_EQ(store.status().field(), "store") << bad;
  }
  EXPECT_THAT(OpenStore(std::string(63, 'x')), IsOk());
  EXPECT_THAT(OpenStore("_x9"), IsOk());
}

TEST_F(PostgresStoreTest, ASecondOpenOfTheSameSchemaIsRefusedUntilTheFirstCloses) {
  Result<std::unique_ptr<Store>> second = OpenStore();
  ASSERT_THAT(second, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_NE(second.status().message().find("is open in another chronoq engine"), std::string::npos)
      << second.status().ToString();
  store_.reset();
  EXPECT_THAT(OpenStore(), IsOk());
}

TEST_F(PostgresStoreTest, BadOrUnreachableServersAreReportedAsSuch) {
  Result<std::unique_ptr<Store>> malformed =
      OpenPostgresStore({.conninfo = "postgresql://[::1/db"});
  EXPECT_THAT(malformed, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(malformed.status().field(), "store");
  EXPECT_THAT(OpenPostgresStore({.conninfo = ""}), StatusIs(StatusCode::kInvalidArgument));
  // Nothing listens there: Unavailable, with libpq's reason.
  Result<std::unique_ptr<Store>> nobody =
      OpenPostgresStore({.conninfo = "host=/nonexistent-chronoq-dir port=1 dbname=x"});
  ASSERT_THAT(nobody, StatusIs(StatusCode::kUnavailable));
  EXPECT_NE(nobody.status().message().find("nonexistent-chronoq-dir"), std::string::npos)
      << nobody.status().ToString();
}

TEST_F(PostgresStoreTest, ADatabaseThatIsNotUtf8IsRefused) {
  const std::string name = db_.name() + "_ascii";
  db_.Exec("CREATE DATABASE " + name + " TEMPLATE template0 ENCODING 'SQL_ASCII'");
  {
    Result<std::unique_ptr<Store>> store =
        OpenPostgresStore({.conninfo = db_.conninfo() + " dbname=" + name});
    EXPECT_THAT(store, StatusIs(StatusCode::kFailedPrecondition));
    EXPECT_NE(store.status().message().find("UTF8"), std::string::npos)
        << store.status().ToString();
  }
  db_.Exec("DROP DATABASE " + name + " WITH (FORCE)");
}

// A user without CREATE on the database can run chronoq in a schema it owns.
TEST_F(PostgresStoreTest, AnExistingSchemaTheUserOwnsIsEnough) {
  const std::string role = db_.name() + "_user";
  db_.Exec("CREATE ROLE " + role + " LOGIN");
  db_.Exec("CREATE SCHEMA app AUTHORIZATION " + role);
  const std::string as_role = db_.conninfo() + " user=" + role;
  {
    Result<std::unique_ptr<Store>> store =
        OpenPostgresStore({.conninfo = as_role, .schema = "app"});
    ASSERT_THAT(store, IsOk());
    Result<int64_t> q = (*store)->QueueId("q");
    ASSERT_THAT(q, IsOk());
    EXPECT_THAT((*store)->Insert(Scheduled(1, *q, kNow)), IsOkAndHolds(true));
    // It may not create a schema of its own.
    Result<std::unique_ptr<Store>> elsewhere =
        OpenPostgresStore({.conninfo = as_role, .schema = "mine"});
    EXPECT_THAT(elsewhere, StatusIs(StatusCode::kFailedPrecondition));
    EXPECT_NE(elsewhere.status().message().find("permission denied"), std::string::npos)
        << elsewhere.status().ToString();
  }
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM app.tasks"), "1");
  db_.Exec("DROP SCHEMA app CASCADE");
  db_.Exec("DROP ROLE " + role);
}

// Workers' errors and webhook responses are kept byte for byte, NUL bytes
// and invalid UTF-8 included (PostgreSQL's text would refuse both, failing
// the whole commit).
TEST_F(PostgresStoreTest, ErrorsAndResponsesKeepEveryByte) {
  const std::string error("boom\0\xff\xfe tail", 12);
  const std::string response("HTTP 500: \x80\x00{}", 14);
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(1, q, kNow);
  row.last_error = error;
  InsertCommitted(row);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_THAT(store_->SetResponse(1, response), IsOk());
  ASSERT_THAT(store_->Move({.seq = 1,
                            .state = TaskState::kDead,
                            .due = std::nullopt,
                            .last_error = error + "!",
                            .attempt = 3,
                            .now = kNow}),
              IsOk());
  ASSERT_TRUE(store_->Commit().ok());
  std::optional<TaskRow> got = Find(1);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->last_error, error + "!");
  EXPECT_EQ(got->response, response);
  std::optional<Store::ReadRow> read = Read(1);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->row.last_error, error + "!");
  EXPECT_EQ(read->row.response, response);

  ScheduleRow s;
  s.name = "s";
  s.qid = q;
  s.spec = "{}";
  s.last_error = error;
  Result<std::optional<int64_t>> sid = store_->InsertSchedule(s);
  ASSERT_TRUE(sid.ok() && sid->has_value()) << sid.status().ToString();
  Result<std::optional<ScheduleRow>> back = store_->FindSchedule(**sid);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->last_error, error);
}

// PostgreSQL ends a transaction at its first failed statement; the commit
// must say so rather than report success.
TEST_F(PostgresStoreTest, ACommitAfterAFailedStatementFailsAndWritesNothing) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_THAT(store_->Insert(Scheduled(1, q, kNow)), IsOkAndHolds(true));
  TaskRow same_seq = Scheduled(1, q, kNow);
  same_seq.name = "other";
  EXPECT_THAT(store_->Insert(same_seq), StatusIs(StatusCode::kInternal));  // a bug, if ever
  EXPECT_THAT(store_->Commit(), StatusIs(StatusCode::kAborted));
  store_->Rollback();
  EXPECT_FALSE(Find(1).has_value());
  // The store goes on.
  InsertCommitted(Scheduled(2, q, kNow));
  EXPECT_TRUE(Find(2).has_value());
}

// Names compare as bytes, as in SQLite, whatever the database's collation.
TEST_F(PostgresStoreTest, SchedulesListInByteOrder) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  for (const char* name : {"b", "B", "a", "Z", "\xc3\xa9t\xc3\xa9", "_x"}) {
    ScheduleRow s;
    s.name = name;
    s.qid = q;
    s.spec = "{}";
    ASSERT_TRUE(store_->InsertSchedule(s).ok()) << name;
  }
  ASSERT_TRUE(store_->Commit().ok());
  Result<std::vector<ScheduleRow>> list = store_->ListSchedules(std::nullopt, "", 100);
  ASSERT_THAT(list, IsOk());
  std::vector<std::string> names;
  for (const ScheduleRow& s : *list) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"B", "Z", "_x", "a", "b", "\xc3\xa9t\xc3\xa9"}));
}

// A purge drops the cursors of all its keys in one statement: keys with the
// characters an array literal quotes must survive the trip.
TEST_F(PostgresStoreTest, APurgeDropsTheCursorsOfKeysWithAnyCharacters) {
  const int64_t q = Queue("q");
  const std::vector<std::string> keys = {"a\"b", "c\\d", "e,f", "{g}", "h i", "NULL"};
  int64_t seq = 0;
  for (const std::string& key : keys) {
    TaskRow r = Scheduled(++seq, q, kBase);
    r.key = key;
    InsertCommitted(r);
  }
  std::vector<int64_t> seqs;
  for (int64_t s = 1; s <= seq; ++s) seqs.push_back(s);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_THAT(store_->MarkRunningMany(seqs, kNow + seconds(30), 1, kNow), IsOk());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_THAT(
        store_->SaveKeyCursor(q, keys[i], KeyPosition{kBase, 0, static_cast<int64_t>(i + 1)}),
        IsOk());
  }
  ASSERT_THAT(store_->MarkSucceeded(seqs, kNow, kNow), IsOk());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.key_cursors"), "6");
  ASSERT_TRUE(store_->Begin().ok());
  Result<Purged> purged = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_THAT(purged, IsOk());
  EXPECT_EQ(purged->rows, 6);
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.key_cursors"), "0");
}

// A lost reader connection is made again by the next read.
TEST_F(PostgresStoreTest, ALostReaderConnectionIsMadeAgain) {
  InsertCommitted(Scheduled(1, Queue("q"), kNow));
  ASSERT_TRUE(Read(1).has_value());
  const std::string pid = BackendPid("chronoq reader");
  ASSERT_FALSE(pid.empty());
  EXPECT_EQ(db_.QueryText("SELECT pg_terminate_backend(" + pid + ", 10000)"), "t");
  EXPECT_TRUE(Read(1).has_value());
  EXPECT_EQ(ListSeqs({}), std::vector<int64_t>{1});
  EXPECT_NE(BackendPid("chronoq reader"), pid);
  // The writer was not touched.
  EXPECT_THAT(store_->QueueId("q"), IsOk());
}

}  // namespace
}  // namespace chronoq
