#include "store/sqlite/sqlite_store.h"

// What SQLite does its own way: the file and its directory, the lock file,
// the WAL, and migrations from the older schema versions of its file
// (written with raw SQL). The Store contract itself is stated for every store
// in store_conformance_test.cc.
#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_util.h"
#include "support/raw_sql.h"
#include "support/schema_v1.h"
#include "support/temp_dir.h"

namespace chronoq {
namespace {

using std::chrono::seconds;
using test::ExecRaw;
using test::kBase;
using test::KeyedScheduled;
using test::kNow;
using test::QueryText;
using test::Scheduled;

// A store in a fresh directory per test.
class SqliteStoreTest : public ::testing::Test, protected test::StoreHelpers {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Reopen()); }
  // The store goes before its directory.
  ~SqliteStoreTest() override { store_.reset(); }

  // Closes the store (if open) and opens the same file again.
  void Reopen() {
    store_.reset();
    Result<std::unique_ptr<Store>> s = OpenSqliteStore({.path = path_});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  test::TempDir dir_;
  const std::string path_ = dir_.File("db/chronoq.db");  // "db" does not exist yet
};

TEST_F(SqliteStoreTest, OpenCreatesTheDirectory) { EXPECT_TRUE(std::filesystem::exists(path_)); }

TEST_F(SqliteStoreTest, ASecondWriterOnTheSameFileIsRefusedUntilTheFirstCloses) {
  Result<std::unique_ptr<Store>> second = OpenSqliteStore({.path = path_});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another chronoq engine"), std::string::npos)
      << second.status().ToString();
  store_.reset();
  second = OpenSqliteStore({.path = path_});
  EXPECT_TRUE(second.ok()) << second.status().ToString();
}

// The saved cursor of a key (store.h) where SQLite keeps it, in key_cursors.
// (What the interface shows of it is stated in store_conformance_test.cc.)
TEST_F(SqliteStoreTest, AKeysSavedCursorStaysBeforeEveryTaskWaitingToStart) {
  ExpectSavedKeyCursorRules(
      [&](int64_t qid) {
        return QueryText(
            path_, "SELECT seq FROM key_cursors WHERE qid=" + std::to_string(qid) + " AND key='k'");
      },
      /*started_tasks_hold_it=*/true);
}

TEST(SqliteStoreMigrationTest, MigratesASchema1DatabaseAndCountsItsTasks) {
  test::TempDir dir;
  const std::string path = dir.File("old.db");
  ExecRaw(path, test::kSchemaV1);
  // Queue 1 has tasks in every state, queue 2 only dead ones, queue 3 none.
  ExecRaw(path, R"sql(
    INSERT INTO queues(qid, name) VALUES(1, 'mail'), (2, 'sms'), (3, 'idle');
    INSERT INTO tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, name) VALUES
      (1, 1, 0, 100, 0, 0, 25, '{}', NULL), (2, 1, 0, 200, 0, 0, 25, '{}', 'x'),
      (3, 1, 1, 300, 0, 1, 25, '{}', NULL), (4, 1, 2, 400, 0, 1, 25, '{}', NULL),
      (5, 1, 2, 500, 0, 1, 25, '{}', NULL), (6, 1, 2, 600, 0, 1, 25, '{}', NULL),
      (7, 1, 3, 700, 0, 0, 25, '{}', NULL), (8, 1, 4, NULL, 0, 25, 25, '{}', NULL),
      (9, 2, 4, NULL, 0, 3, 3, '{}', NULL), (10, 2, 4, NULL, 0, 3, 3, '{}', NULL);
  )sql");

  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Result<StoreMeta> meta = (*store)->LoadMeta();
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();  // the version is current now
    EXPECT_EQ(meta->next_token, 42u);
    EXPECT_EQ(meta->max_seq, 10);

    Result<std::vector<QueueRow>> queues = (*store)->Queues();
    ASSERT_TRUE(queues.ok()) << queues.status().ToString();
    ASSERT_EQ(queues->size(), 3u);
    EXPECT_EQ((*queues)[0].counts, (std::array<int64_t, 5>{2, 1, 3, 1, 1}));
    EXPECT_EQ((*queues)[1].counts, (std::array<int64_t, 5>{0, 0, 0, 0, 2}));
    EXPECT_EQ((*queues)[2].counts, (std::array<int64_t, 5>{}));
    EXPECT_FALSE((*queues)[0].paused);
    EXPECT_FALSE((*queues)[0].settings.concurrency.has_value());

    // Old rows have no target; new ones store one.
    Result<std::optional<TaskRow>> old = (*store)->FindByName("x");
    ASSERT_TRUE(old.ok() && old->has_value());
    EXPECT_FALSE((*old)->target.has_value());
    TaskRow row = Scheduled(11, 1, kNow);
    row.target = R"({"url":"http://h/"})";
    ASSERT_TRUE((*store)->Begin().ok());
    ASSERT_TRUE((*store)->Insert(row).ok());
    ASSERT_TRUE((*store)->SaveQueueSettings(3, QueueSettings{.concurrency = 2}, true, false).ok());
    ASSERT_TRUE((*store)->Commit().ok());
    Result<std::optional<Store::ReadRow>> read = (*store)->ReadBySeq(11);
    ASSERT_TRUE(read.ok() && read->has_value());
    EXPECT_EQ((*read)->row.target, row.target);
    EXPECT_EQ((*read)->queue, "mail");
  }
  // Opening again migrates nothing twice and keeps what was written.
  Result<std::unique_ptr<Store>> again = OpenSqliteStore({.path = path});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  Result<std::vector<QueueRow>> queues = (*again)->Queues();
  ASSERT_TRUE(queues.ok());
  EXPECT_EQ((*queues)[0].counts, (std::array<int64_t, 5>{2, 1, 3, 1, 1}));
  EXPECT_TRUE((*queues)[2].paused);
  EXPECT_EQ((*queues)[2].settings.concurrency, 2);
  again->reset();
}

// The SQL of the due index, as stored in the database at `path`.
std::string DueIndexSql(const std::string& path) {
  return QueryText(path, "SELECT sql FROM sqlite_master WHERE name='tasks_due'");
}

TEST(SqliteStoreMigrationTest, ASchema2DatabaseGetsTheCoarserDueIndex) {
  test::TempDir dir;
  const std::string path = dir.File("v2.db");
  const Timestamp due = kBase + std::chrono::minutes(30);
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok());
    Result<int64_t> q = (*store)->QueueId("q");
    ASSERT_TRUE((*store)->Begin().ok());
    TaskRow row;
    row.seq = 1;
    row.qid = *q;
    row.due = due;
    row.payload = "{}";
    row.max_attempts = 3;
    ASSERT_TRUE((*store)->Insert(row).ok());
    ASSERT_TRUE((*store)->Commit().ok());
  }
  // Turn it back into a schema-2 database: the old index, no response or sid
  // column, no schedules, the old version.
  ExecRaw(
      path,
      "DROP INDEX tasks_due; CREATE INDEX tasks_due ON tasks(state, (due >> 26));"
      "ALTER TABLE tasks DROP COLUMN sid; ALTER TABLE tasks DROP COLUMN response;"
      "DROP TABLE schedules; ALTER TABLE queues DROP COLUMN rate_count;"
      "ALTER TABLE queues DROP COLUMN rate_period; DROP INDEX tasks_korder;"
      "DROP INDEX tasks_key_retry; DROP TABLE key_cursors; ALTER TABLE tasks DROP COLUMN korder;"
      "ALTER TABLE tasks DROP COLUMN key;"
      "ALTER TABLE queues DROP COLUMN key_in_flight; ALTER TABLE queues DROP COLUMN key_pending;"
      "ALTER TABLE tasks DROP COLUMN worker; ALTER TABLE queues DROP COLUMN final_statuses;"
      " ALTER TABLE tasks DROP COLUMN claimed; ALTER TABLE tasks DROP COLUMN node;"
      " ALTER TABLE tasks DROP COLUMN attempts;"
      "UPDATE meta SET v=2 WHERE k='schema';");
  EXPECT_NE(DueIndexSql(path).find("due >> 26"), std::string::npos);

  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->LoadMeta().ok());
  EXPECT_NE(DueIndexSql(path).find("due >> 28"), std::string::npos);
  // The row is found through the new index.
  Result<std::vector<DueEntry>> rows =
      (*store)->LoadScheduled(DueBucket(due), 0, DueBucket(due) + 1, 10);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].seq, 1);
  // And the new columns and table are there (schemas 3 and 4).
  ASSERT_TRUE((*store)->Begin().ok());
  EXPECT_TRUE((*store)->SetResponse(1, "HTTP 200").ok());
  TaskRow occurrence = (*(*store)->FindBySeq(1)).value();
  occurrence.seq = 2;
  occurrence.sid = 7;
  EXPECT_TRUE((*store)->Insert(occurrence).ok());
  ScheduleRow schedule;
  schedule.name = "nightly";
  schedule.spec = "{}";
  EXPECT_TRUE((*store)->InsertSchedule(schedule).ok());
  // Schema 6: keyed tasks and their index.
  TaskRow keyed = occurrence;
  keyed.seq = 3;
  keyed.key = "customer:1";
  EXPECT_TRUE((*store)->Insert(keyed).ok());
  Result<std::vector<DueEntry>> head = (*store)->KeyHeads(keyed.qid, "customer:1", std::nullopt, 1);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  ASSERT_EQ(head->size(), 1u);
  EXPECT_EQ(head->front().seq, 3);
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_EQ((*(*store)->ReadBySeq(1))->row.response, "HTTP 200");
  EXPECT_EQ((*(*store)->ReadBySeq(1))->row.sid, std::nullopt);
  EXPECT_EQ((*(*store)->ReadBySeq(2))->row.sid, 7);
  store->reset();
}

TEST(SqliteStoreMigrationTest, ASchema6DatabaseGetsTheKeyOrderIndexAndCursors) {
  test::TempDir dir;
  const std::string path = dir.File("v6.db");
  int64_t qid = 0;
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok());
    qid = *(*store)->QueueId("q");
    ASSERT_TRUE((*store)->Begin().ok());
    for (int64_t seq = 1; seq <= 3; ++seq) {
      TaskRow row;
      row.seq = seq;
      row.qid = qid;
      row.due = kBase + seconds(10 - seq);  // 3 is due first
      row.payload = "{}";
      row.max_attempts = 3;
      row.key = "k";
      ASSERT_TRUE((*store)->Insert(row).ok());
    }
    ASSERT_TRUE((*store)->MarkRunningMany({3}, kNow + seconds(30), 1, kNow, "", "").ok());
    ASSERT_TRUE((*store)->Commit().ok());
  }
  // Back to schema 6: the index of tasks waiting to start, no korder, no
  // cursors.
  ExecRaw(path,
          "DROP INDEX tasks_korder; DROP TABLE key_cursors; ALTER TABLE tasks DROP COLUMN korder;"
          "CREATE INDEX tasks_key ON tasks(qid, key, due, prio)"
          "  WHERE key IS NOT NULL AND state = 0 AND attempt = 0;"
          "ALTER TABLE tasks DROP COLUMN worker; ALTER TABLE queues DROP COLUMN final_statuses;"
          " ALTER TABLE tasks DROP COLUMN claimed; ALTER TABLE tasks DROP COLUMN node;"
          " ALTER TABLE tasks DROP COLUMN attempts;"
          "UPDATE meta SET v=6 WHERE k='schema';");

  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(QueryText(path, "SELECT v FROM meta WHERE k='schema'"), "12");
  EXPECT_EQ(QueryText(path, "SELECT count(*) FROM sqlite_master WHERE name='tasks_key'"), "0");
  // The waiting tasks are in line by their due; the started one is not.
  Result<std::vector<DueEntry>> head = (*store)->KeyHeads(qid, "k", std::nullopt, 5);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  ASSERT_EQ(head->size(), 2u);
  EXPECT_EQ((*head)[0].seq, 2);
  EXPECT_EQ((*head)[1].seq, 1);
  EXPECT_EQ(*(*store)->CountKeyPending(qid, "k", std::nullopt), 2);
  ASSERT_TRUE((*store)->Begin().ok());
  EXPECT_TRUE((*store)->SaveKeyCursor(qid, "k", KeyPosition{kBase + seconds(7), 0, 3}).ok());
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_EQ(QueryText(path, "SELECT seq FROM key_cursors"), "3");
  store->reset();
}

// Schema 8 -> 9: tasks gain the worker that claimed them last; old rows
// have none, new claims record theirs.
TEST(SqliteStoreMigrationTest, ASchema8DatabaseGainsTheWorkerColumn) {
  test::TempDir dir;
  const std::string path = dir.File("v8.db");
  int64_t qid = 0;
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok());
    qid = *(*store)->QueueId("q");
    ASSERT_TRUE((*store)->Begin().ok());
    for (int64_t seq : {1, 2}) ASSERT_TRUE((*store)->Insert(Scheduled(seq, qid, kNow)).ok());
    ASSERT_TRUE((*store)->MarkRunningMany({1}, kNow + seconds(30), 1, kNow, "", "").ok());
    ASSERT_TRUE((*store)->Commit().ok());
  }
  ExecRaw(path,
          "ALTER TABLE tasks DROP COLUMN worker; ALTER TABLE queues DROP COLUMN final_statuses;"
          " ALTER TABLE tasks DROP COLUMN claimed; ALTER TABLE tasks DROP COLUMN node;"
          " ALTER TABLE tasks DROP COLUMN attempts;"
          "UPDATE meta SET v=8 WHERE k='schema';");

  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(QueryText(path, "SELECT v FROM meta WHERE k='schema'"), "12");
  Result<std::optional<TaskRow>> old = (*store)->FindBySeq(1);
  ASSERT_TRUE(old.ok() && old->has_value());
  EXPECT_EQ((*old)->state, TaskState::kRunning);
  EXPECT_EQ((*old)->worker, std::nullopt);
  ASSERT_TRUE((*store)->Begin().ok());
  Result<std::vector<TaskRow>> claimed =
      (*store)->MarkRunningMany({2}, kNow + seconds(30), 2, kNow, "host-1:99", "");
  ASSERT_TRUE((*store)->Commit().ok());
  ASSERT_TRUE(claimed.ok() && claimed->size() == 1u);
  EXPECT_EQ(claimed->front().worker, "host-1:99");
  Result<std::optional<Store::ReadRow>> read = (*store)->ReadBySeq(2);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->row.worker, "host-1:99");
  EXPECT_EQ((*read)->queue, "q");
  store->reset();
}

// Schema 9 -> 10: queues gain their final statuses; old queues have none,
// and keep the settings they had.
TEST(SqliteStoreMigrationTest, ASchema9DatabaseGainsFinalStatuses) {
  test::TempDir dir;
  const std::string path = dir.File("v9.db");
  int64_t qid = 0;
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok());
    qid = *(*store)->QueueId("q");
    ASSERT_TRUE((*store)->Begin().ok());
    ASSERT_TRUE((*store)->SaveQueueSettings(qid, {.concurrency = 3}, false, true).ok());
    ASSERT_TRUE((*store)->Commit().ok());
  }
  ExecRaw(path,
          "ALTER TABLE queues DROP COLUMN final_statuses; ALTER TABLE tasks DROP COLUMN claimed;"
          " ALTER TABLE tasks DROP COLUMN node; ALTER TABLE tasks DROP COLUMN attempts;"
          " UPDATE meta SET v=9 WHERE k='schema';");

  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(QueryText(path, "SELECT v FROM meta WHERE k='schema'"), "12");
  Result<std::vector<QueueRow>> queues = (*store)->Queues();
  ASSERT_TRUE(queues.ok() && queues->size() == 1u);
  EXPECT_EQ(queues->front().settings.concurrency, 3);
  EXPECT_EQ(queues->front().settings.final_statuses, std::nullopt);
  EXPECT_TRUE(queues->front().webhooks);
  QueueSettings settings = queues->front().settings;
  settings.final_statuses = std::vector<int>{404, 422};
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE((*store)->SaveQueueSettings(qid, settings, false, true).ok());
  ASSERT_TRUE((*store)->Commit().ok());
  EXPECT_EQ(QueryText(path, "SELECT final_statuses FROM queues"), "404,422");
  EXPECT_EQ((*(*store)->Queues()).front().settings.final_statuses, (std::vector<int>{404, 422}));
  store->reset();
}

// Schema 10 -> 11: tasks gain their claim's time and node and their attempt
// history; old rows have none, a new claim records its own, a failure its
// history.
TEST(SqliteStoreMigrationTest, ASchema10DatabaseGainsTheAttemptColumns) {
  test::TempDir dir;
  const std::string path = dir.File("v10.db");
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok());
    const int64_t qid = *(*store)->QueueId("q");
    ASSERT_TRUE((*store)->Begin().ok());
    for (int64_t seq : {1, 2}) ASSERT_TRUE((*store)->Insert(Scheduled(seq, qid, kNow)).ok());
    ASSERT_TRUE((*store)->MarkRunningMany({1}, kNow + seconds(30), 1, kNow, "w", "n").ok());
    ASSERT_TRUE((*store)->Commit().ok());
  }
  ExecRaw(path,
          "ALTER TABLE tasks DROP COLUMN claimed; ALTER TABLE tasks DROP COLUMN node;"
          " ALTER TABLE tasks DROP COLUMN attempts; UPDATE meta SET v=10 WHERE k='schema';");

  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(QueryText(path, "SELECT v FROM meta WHERE k='schema'"), "12");
  Result<std::optional<TaskRow>> old = (*store)->FindBySeq(1);
  ASSERT_TRUE(old.ok() && old->has_value());
  EXPECT_EQ((*old)->state, TaskState::kRunning);
  EXPECT_EQ((*old)->worker, "w");
  EXPECT_EQ((*old)->claimed, std::nullopt);
  EXPECT_EQ((*old)->node, std::nullopt);
  EXPECT_EQ((*old)->attempts, std::nullopt);
  ASSERT_TRUE((*store)->Begin().ok());
  ASSERT_TRUE((*store)->MarkRunningMany({2}, kNow + seconds(30), 2, kNow, "w", "n").ok());
  ASSERT_TRUE((*store)
                  ->Move({.seq = 1,
                          .state = TaskState::kScheduled,
                          .due = kNow,
                          .now = kNow,
                          .attempts = "[[1,0,5,1]]"})
                  .ok());
  ASSERT_TRUE((*store)->Commit().ok());
  Result<std::optional<TaskRow>> claimed = (*store)->FindBySeq(2);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  EXPECT_EQ((*claimed)->claimed, kNow);
  EXPECT_EQ((*claimed)->node, "n");
  EXPECT_EQ(QueryText(path, "SELECT attempts FROM tasks WHERE seq=1"), "[[1,0,5,1]]");
  store->reset();
}

// Schema 12 keeps running tasks out of tasks_due (tasks_running holds them):
// opening a schema-11 database rebuilds the index, and every task is found
// where it was before, through the index its state now uses.
TEST(SqliteStoreMigrationTest, ASchema11DatabaseMovesRunningTasksOutOfTheDueIndex) {
  test::TempDir dir;
  const std::string path = dir.File("v11.db");
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok());
    const int64_t qid = *(*store)->QueueId("q");
    ASSERT_TRUE((*store)->Begin().ok());
    for (int64_t seq : {1, 2, 3}) ASSERT_TRUE((*store)->Insert(Scheduled(seq, qid, kNow)).ok());
    ASSERT_TRUE((*store)->MarkRunningMany({2, 3}, kNow + seconds(30), 1, kNow, "w", "n").ok());
    ASSERT_TRUE((*store)->MarkSucceeded({3}, kNow + seconds(60), kNow).ok());
    ASSERT_TRUE((*store)->Commit().ok());
  }
  ExecRaw(path,
          "DROP INDEX tasks_due; DROP INDEX tasks_running;"
          " CREATE INDEX tasks_due ON tasks(state, (due >> 28));"
          " UPDATE meta SET v=11 WHERE k='schema';");
  EXPECT_EQ(DueIndexSql(path).find("WHERE"), std::string::npos);

  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->LoadMeta().ok());
  EXPECT_EQ(QueryText(path, "SELECT v FROM meta WHERE k='schema'"), "12");
  EXPECT_NE(DueIndexSql(path).find("WHERE state <> 1"), std::string::npos);
  // What each index holds (INDEXED BY fails the query if the index cannot
  // answer it).
  EXPECT_EQ(QueryText(path,
                      "SELECT group_concat(seq) FROM tasks INDEXED BY tasks_due"
                      " WHERE state <> 1 AND state >= 0"),
            "1,3");
  EXPECT_EQ(QueryText(path,
                      "SELECT group_concat(seq) FROM tasks INDEXED BY tasks_running"
                      " WHERE state = 1"),
            "2");
  Result<std::vector<DueEntry>> scheduled =
      (*store)->LoadScheduled(DueBucket(kNow), 0, DueBucket(kNow) + 1, 10);
  ASSERT_TRUE(scheduled.ok());
  ASSERT_EQ(scheduled->size(), 1u);
  EXPECT_EQ((*scheduled)[0].seq, 1);
  Result<std::vector<TaskRow>> running = (*store)->LoadRunning();
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].seq, 2);
  Result<std::optional<Timestamp>> purge = (*store)->NextPurgeDue();
  ASSERT_TRUE(purge.ok());
  EXPECT_TRUE(purge->has_value());
  store->reset();
}

TEST(SqliteStoreMigrationTest, RefusesANewerSchema) {
  test::TempDir dir;
  const std::string path = dir.File("new.db");
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok());
  }
  ExecRaw(path, "UPDATE meta SET v=99 WHERE k='schema'");
  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->LoadMeta().status().code(), StatusCode::kFailedPrecondition);
  store->reset();
}

// The WAL must not grow without bound while the store is written to: past
// wal_limit_pages the writer checkpoints before its next commit, and the WAL
// restarts from its beginning. (A checkpoint run on a connection that has not
// read the database yet silently does nothing; this caught that.)
TEST(SqliteStoreWalTest, WalStaysBoundedUnderContinuousWrites) {
  test::TempDir dir;
  const std::string path = dir.File("wal.db");
  // The background checkpointer is kept out of the way so the writer's own
  // checkpoint is what is tested.
  auto store = OpenSqliteStore(
      {.path = path, .tuning = {.checkpoint_pages = 1 << 30, .wal_limit_pages = 64}});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<int64_t> q = (*store)->QueueId("q");
  ASSERT_TRUE(q.ok());
  const std::string payload = "\"" + std::string(1000, 'x') + "\"";
  int64_t seq = 0;
  uintmax_t max_wal = 0;
  for (int commit = 0; commit < 100; ++commit) {
    ASSERT_TRUE((*store)->Begin().ok());
    for (int i = 0; i < 20; ++i) {
      TaskRow row = Scheduled(++seq, *q, kNow);
      row.payload = payload;
      ASSERT_TRUE((*store)->Insert(row).ok());
    }
    ASSERT_TRUE((*store)->Commit().ok());
    max_wal = std::max(max_wal, std::filesystem::file_size(path + "-wal"));
  }
  // About 2 MB were written; the WAL never held much more than 64 pages plus
  // one commit, and the rows reached the database file while it was open.
  EXPECT_LT(max_wal, 1'000'000u);
  EXPECT_GT(std::filesystem::file_size(path), 1'000'000u);
  store->reset();
}

}  // namespace
}  // namespace chronoq
