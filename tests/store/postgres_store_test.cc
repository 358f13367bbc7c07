// What the PostgreSQL store does its own way: the schema it creates and
// migrates, the schema option, the engine lock on a schema, the servers,
// databases and roles it accepts, a transaction that a failed statement
// ended, its key cursors' table, and lost connections. Each test runs on a fresh database of the
// cluster ctest's `postgres` fixture starts. The Store contract itself is stated for every store in
// store_conformance_test.cc.
#include "store/postgres/postgres_store.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_util.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using std::chrono::seconds;
using test::IsOk;
using test::IsOkAndHolds;
using test::kBase;
using test::kNow;
using test::Scheduled;
using test::StatusIs;

// A fresh database per test, dropped afterwards; the store on its default
// schema.
class PostgresStoreTest : public ::testing::Test, protected test::StoreHelpers {
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

  // Writes every claim of the journal into its tasks' rows, as opening the
  // store does (LoadRunning), and as claims were written before schema 5.
  void SettleClaims() {
    ASSERT_THAT(store_->Begin(), IsOk());
    ASSERT_THAT(store_->LoadRunning(), IsOk());
    ASSERT_THAT(store_->Commit(), IsOk());
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
};

// The saved cursor of a key (store.h) where PostgreSQL keeps it, in
// key_cursors. (What the interface shows of it is stated in
// store_conformance_test.cc.)
TEST_F(PostgresStoreTest, AKeysSavedCursorStaysBeforeEveryTaskWaitingToStart) {
  ExpectSavedKeyCursorRules(
      [&](int64_t qid) {
        return db_.QueryText("SELECT seq FROM chronoq.key_cursors WHERE qid=" +
                             std::to_string(qid) + " AND key='k'");
      },
      /*started_tasks_hold_it=*/false);
}

// --- what only PostgreSQL has -------------------------------------------------

TEST_F(PostgresStoreTest, OpenCreatesTheSchemaItsTablesAndIndexes) {
  EXPECT_EQ(db_.QueryText("SELECT string_agg(table_name, ',' ORDER BY table_name)"
                          " FROM information_schema.tables WHERE table_schema = 'chronoq'"),
            "claims,key_cursors,leader,locks,meta,nodes,queues,schedules,tasks");
  EXPECT_EQ(db_.QueryText("SELECT v FROM chronoq.meta WHERE k = 'schema'"), "5");
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
            "9");
}

// Version 1 -> 2: tasks gain the worker that claimed them last; old rows
// have none, new claims record theirs.
TEST_F(PostgresStoreTest, AVersion1SchemaGainsTheWorkerColumn) {
  const int64_t q = Queue("q");
  ASSERT_THAT(store_->Begin(), IsOk());
  for (int64_t seq : {1, 2}) ASSERT_THAT(store_->Insert(Scheduled(seq, q, kNow)), IsOk());
  ASSERT_THAT(store_->MarkRunningMany({1}, kNow + seconds(30), 1, kNow, "", ""), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_NO_FATAL_FAILURE(SettleClaims());
  store_.reset();
  db_.Exec(
      "ALTER TABLE chronoq.tasks DROP COLUMN worker, DROP COLUMN claimed, DROP COLUMN node,"
      " DROP COLUMN attempts; ALTER TABLE chronoq.queues DROP COLUMN final_statuses;"
      " DROP TABLE chronoq.claims; UPDATE chronoq.meta SET v = 1 WHERE k = 'schema'");

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(db_.QueryText("SELECT v FROM chronoq.meta WHERE k = 'schema'"), "5");
  Result<std::optional<TaskRow>> old = store_->FindBySeq(1);
  ASSERT_THAT(old, IsOk());
  ASSERT_TRUE(old->has_value());
  EXPECT_EQ((*old)->worker, std::nullopt);
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> claimed =
      store_->MarkRunningMany({2}, kNow + seconds(30), 2, kNow, "host-1:99", "");
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_THAT(claimed, IsOk());
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ(claimed->front().worker, "host-1:99");
  ASSERT_NO_FATAL_FAILURE(SettleClaims());
  EXPECT_EQ(db_.QueryText("SELECT worker FROM chronoq.tasks WHERE seq = 2"), "host-1:99");
}

// Version 2 -> 3: queues gain their final statuses; old queues have none,
// and keep the settings they had.
TEST_F(PostgresStoreTest, AVersion2SchemaGainsFinalStatuses) {
  const int64_t q = Queue("q");
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->SaveQueueSettings(q, {.concurrency = 3}, false, true), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  store_.reset();
  db_.Exec(
      "ALTER TABLE chronoq.queues DROP COLUMN final_statuses;"
      "ALTER TABLE chronoq.tasks DROP COLUMN claimed, DROP COLUMN node, DROP COLUMN attempts;"
      " DROP TABLE chronoq.claims; UPDATE chronoq.meta SET v = 2 WHERE k = 'schema'");

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(db_.QueryText("SELECT v FROM chronoq.meta WHERE k = 'schema'"), "5");
  Result<std::vector<QueueRow>> queues = store_->Queues();
  ASSERT_THAT(queues, IsOk());
  ASSERT_EQ(queues->size(), 1u);
  EXPECT_EQ(queues->front().settings.concurrency, 3);
  EXPECT_EQ(queues->front().settings.final_statuses, std::nullopt);
  QueueSettings settings = queues->front().settings;
  settings.final_statuses = std::vector<int>{404, 422};
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->SaveQueueSettings(q, settings, false, true), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(db_.QueryText("SELECT final_statuses FROM chronoq.queues"), "404,422");
  EXPECT_EQ(store_->Queues()->front().settings.final_statuses, (std::vector<int>{404, 422}));
}

// Version 3 -> 4: tasks gain their claim's time and node and their attempt
// history; old rows have none, a new claim records its own, a failure its
// history.
TEST_F(PostgresStoreTest, AVersion3SchemaGainsTheAttemptColumns) {
  const int64_t q = Queue("q");
  ASSERT_THAT(store_->Begin(), IsOk());
  for (int64_t seq : {1, 2}) ASSERT_THAT(store_->Insert(Scheduled(seq, q, kNow)), IsOk());
  ASSERT_THAT(store_->MarkRunningMany({1}, kNow + seconds(30), 1, kNow, "w", "n"), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_NO_FATAL_FAILURE(SettleClaims());
  store_.reset();
  db_.Exec(
      "ALTER TABLE chronoq.tasks DROP COLUMN claimed, DROP COLUMN node, DROP COLUMN attempts;"
      " DROP TABLE chronoq.claims; UPDATE chronoq.meta SET v = 3 WHERE k = 'schema'");

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(db_.QueryText("SELECT v FROM chronoq.meta WHERE k = 'schema'"), "5");
  Result<std::optional<TaskRow>> old = store_->FindBySeq(1);
  ASSERT_THAT(old, IsOk());
  ASSERT_TRUE(old->has_value());
  EXPECT_EQ((*old)->worker, "w");
  EXPECT_EQ((*old)->claimed, std::nullopt);
  EXPECT_EQ((*old)->node, std::nullopt);
  EXPECT_EQ((*old)->attempts, std::nullopt);
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkRunningMany({2}, kNow + seconds(30), 2, kNow, "w", "n"), IsOk());
  ASSERT_THAT(store_->Move({.seq = 1,
                            .state = TaskState::kScheduled,
                            .due = kNow,
                            .now = kNow,
                            .attempts = "[[1,0,5,1]]"}),
              IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_NO_FATAL_FAILURE(SettleClaims());
  EXPECT_EQ(db_.QueryText("SELECT node FROM chronoq.tasks WHERE seq = 2"), "n");
  EXPECT_EQ(store_->FindBySeq(2)->value().claimed, kNow);
  EXPECT_EQ(db_.QueryText("SELECT attempts FROM chronoq.tasks WHERE seq = 1"), "[[1,0,5,1]]");
}

// Version 4 -> 5: the claim journal.
TEST_F(PostgresStoreTest, AVersion4SchemaGainsTheClaimJournal) {
  store_.reset();
  db_.Exec("DROP TABLE chronoq.claims; UPDATE chronoq.meta SET v = 4 WHERE k = 'schema'");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(db_.QueryText("SELECT v FROM chronoq.meta WHERE k = 'schema'"), "5");
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.claims"), "0");
}

// The claim journal (postgres_store.cc, CHRONOQ_PG_JOURNAL_JOIN) where it
// lives: a claim writes one record and no task row; each task's row is
// written once, at its acknowledgement; a write to one task, and opening,
// settle claims into rows. What every store shows of claims is stated in
// store_conformance_test.cc, which this store passes through the journal.
TEST_F(PostgresStoreTest, AClaimWritesOneJournalRecordAndEachRowIsWrittenOnce) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 6; ++seq) InsertCommitted(Scheduled(seq, q, kNow));
  auto versions = [&](int64_t seq) {  // the row's transaction id: a new one per write
    return db_.QueryText("SELECT xmin FROM chronoq.tasks WHERE seq = " + std::to_string(seq));
  };
  const std::string inserted = versions(1);
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> claimed =
      store_->MarkRunningMany({1, 2, 3, 4, 5}, kNow + seconds(30), 7, kNow, "w", "n1");
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_THAT(claimed, IsOk());
  ASSERT_EQ(claimed->size(), 5u);
  EXPECT_EQ(claimed->front().state, TaskState::kRunning);
  EXPECT_EQ(claimed->front().attempt, 1);
  EXPECT_EQ(claimed->front().token, 7u);
  EXPECT_EQ(
      db_.QueryText("SELECT count(*) || ' ' || min(token) || ' ' || min(worker) || ' ' ||"
                    " min(node) || ' ' || min(array_to_string(seqs, ',')) FROM chronoq.claims"),
      "1 7 w n1 1,2,3,4,5");
  EXPECT_EQ(versions(1), inserted);
  EXPECT_EQ(db_.QueryText("SELECT string_agg(state::text, '' ORDER BY seq) FROM chronoq.tasks"),
            "000000");
  // Readers see the claim.
  std::optional<Store::ReadRow> read = Read(2);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->row.state, TaskState::kRunning);
  EXPECT_EQ(read->row.due, kNow + seconds(30));
  EXPECT_EQ(read->row.run_at, kNow);
  EXPECT_EQ(read->row.token, 7u);
  EXPECT_EQ(read->row.worker, "w");
  EXPECT_EQ(read->row.node, "n1");
  EXPECT_EQ(read->row.claimed, kNow);
  Store::ListQuery running;
  running.state = TaskState::kRunning;
  EXPECT_EQ(ListSeqs(running), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  Store::ListQuery scheduled;
  scheduled.state = TaskState::kScheduled;
  EXPECT_EQ(ListSeqs(scheduled), std::vector<int64_t>{6});
  // A claimed task is not claimed again.
  ASSERT_THAT(store_->Begin(), IsOk());
  EXPECT_THAT(store_->MarkRunningMany({1, 6}, kNow + seconds(30), 8, kNow, "", ""),
              IsOkAndHolds(testing::SizeIs(1)));
  ASSERT_THAT(store_->Commit(), IsOk());

  // Acknowledged: one write of each row, scheduled to succeeded; the record
  // stays while a task of it runs.
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkSucceeded({1, 2}, kNow + seconds(60), kNow + seconds(1)), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  const std::string acked = versions(1);
  const std::string micros = std::to_string(kNow.time_since_epoch().count());
  EXPECT_NE(acked, inserted);
  EXPECT_EQ(db_.QueryText("SELECT state || ' ' || attempt || ' ' || worker || ' ' || node || ' '"
                          " || claimed || ' ' || run_at FROM chronoq.tasks WHERE seq = 1"),
            "2 1 w n1 " + micros + " " + micros);
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.claims WHERE token = 7"), "1");
  // A write to one task settles its claim: its running tasks' rows say so.
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->SetDue(3, kNow + seconds(90), kNow), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.claims WHERE token = 7"), "0");
  EXPECT_EQ(db_.QueryText("SELECT string_agg(state || ':' || token, ',' ORDER BY seq)"
                          " FROM chronoq.tasks WHERE seq IN (3, 4, 5)"),
            "1:7,1:7,1:7");
  EXPECT_EQ(Find(3)->due, kNow + seconds(90));
  EXPECT_EQ(Find(4)->due, kNow + seconds(30));
  EXPECT_EQ(versions(1), acked);  // finished rows are left alone
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkSucceeded({3, 4, 5}, kNow + seconds(60), kNow), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());

  // Opening settles what a crash left in the journal (task 6, token 8).
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.claims"), "1");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> after = store_->LoadRunning();
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_THAT(after, IsOk());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(after->front().seq, 6);
  EXPECT_EQ(after->front().token, 8u);
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.claims"), "0");
  EXPECT_EQ(db_.QueryText("SELECT state FROM chronoq.tasks WHERE seq = 6"), "1");
}

// A task acknowledged through the journal stays in its claim's record while
// the claim's other tasks run. Scheduled again under the same seq (retried
// by hand, replaced), it must not be taken for one of the claim's own when
// the claim is settled later (here by opening the store): a write to any
// task within a claim's bounds settles that claim first.
TEST_F(PostgresStoreTest, AFinishedTaskScheduledAgainIsNotTakenByItsOldClaim) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 3; ++seq) InsertCommitted(Scheduled(seq, q, kNow));
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkRunningMany({1, 2, 3}, kNow + seconds(30), 7, kNow, "w", ""),
              IsOkAndHolds(testing::SizeIs(3)));
  ASSERT_THAT(store_->MarkSucceeded({1}, kNow + seconds(60), kNow), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->Move({.seq = 1,
                            .state = TaskState::kScheduled,
                            .due = kNow + seconds(5),
                            .attempt = 0,
                            .now = kNow + seconds(1)}),
              IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> running = store_->LoadRunning();
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_THAT(running, IsOk());
  std::vector<int64_t> seqs;
  for (const TaskRow& r : *running) seqs.push_back(r.seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Find(1)->state, TaskState::kScheduled);
  EXPECT_FALSE(Find(1)->token.has_value());
}

// A claim rolled back, whole or to a savepoint, leaves no journal record,
// and the store's memory of the journal follows.
TEST_F(PostgresStoreTest, RolledBackClaimsLeaveNoJournal) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 3; ++seq) InsertCommitted(Scheduled(seq, q, kNow));
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkRunningMany({1, 2}, kNow + seconds(30), 1, kNow, "", ""), IsOk());
  store_->Rollback();
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkRunningMany({1}, kNow + seconds(30), 2, kNow, "", ""),
              IsOkAndHolds(testing::SizeIs(1)));
  ASSERT_THAT(store_->Savepoint(), IsOk());
  ASSERT_THAT(store_->MarkRunningMany({2, 3}, kNow + seconds(30), 3, kNow, "", ""),
              IsOkAndHolds(testing::SizeIs(2)));
  store_->RollbackToSavepoint();
  // 2 and 3 are scheduled again, 1 is not.
  EXPECT_THAT(store_->MarkRunningMany({1, 2, 3}, kNow + seconds(30), 4, kNow, "", ""),
              IsOkAndHolds(testing::SizeIs(2)));
  ASSERT_THAT(store_->MarkSucceeded({1, 2, 3}, kNow + seconds(60), kNow), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(db_.QueryText("SELECT count(*) FROM chronoq.claims"), "0");
  EXPECT_EQ(db_.QueryText("SELECT string_agg(state || ':' || attempt, ',' ORDER BY seq)"
                          " FROM chronoq.tasks"),
            "2:1,2:1,2:1");
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
  ASSERT_THAT(store_->MarkRunningMany(seqs, kNow + seconds(30), 1, kNow, "", ""), IsOk());
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
