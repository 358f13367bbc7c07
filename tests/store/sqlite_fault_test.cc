// The SQLite store when the disk fails under it (issue 17), one fault at a
// time, through the faulty VFS (support/faulty_vfs.h): what each call
// answers, and what the file holds afterwards. The sweep over a whole engine
// workload is core/engine_fault_sweep_test.cc.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "store/sqlite/sqlite_store.h"
#include "store/store_test_util.h"
#include "support/faulty_vfs.h"
#include "support/raw_sql.h"
#include "support/temp_dir.h"

namespace chronoq {
namespace {

using test::FaultyVfs;
using test::VfsFault;
using test::VfsOp;

class SqliteFaultTest : public ::testing::Test {
 protected:
  SqliteFaultTest() { FaultyVfs::Get().ResetCounts(); }  // registers the VFS
  ~SqliteFaultTest() override { FaultyVfs::Get().Disarm(); }

  Result<std::unique_ptr<Store>> Open(bool through_vfs) {
    SqliteOptions o;
    o.path = path_;
    if (through_vfs) o.vfs = FaultyVfs::kName;
    return OpenSqliteStore(o);
  }

  test::TempDir dir_;
  const std::string path_ = dir_.File("chronoq.db");
};

TEST_F(SqliteFaultTest, ADiskThatFailsWhileTheStoreOpensIsUnavailable) {
  ASSERT_TRUE(Open(/*through_vfs=*/false).ok());  // the file exists: opening reads it
  FaultyVfs& vfs = FaultyVfs::Get();
  vfs.ResetCounts();
  ASSERT_TRUE(Open(/*through_vfs=*/true).ok());
  const int64_t reads = vfs.count(VfsOp::kRead);
  ASSERT_GT(reads, 1);
  // Each read of the open fails in turn (the first, sqlite3_open_v2's own,
  // was always Unavailable; the later ones, in the PRAGMAs, were Internal).
  for (int64_t k = 1; k <= reads; ++k) {
    vfs.ResetCounts();
    vfs.Arm(VfsOp::kRead, k, VfsFault::kIoError, /*sticky=*/true);
    Result<std::unique_ptr<Store>> store = Open(/*through_vfs=*/true);
    ASSERT_EQ(vfs.faults(), 1) << "read #" << k;
    ASSERT_FALSE(store.ok()) << "read #" << k;
    // Not Internal (500): the disk may work again, and a restart then succeeds.
    EXPECT_EQ(store.status().code(), StatusCode::kUnavailable)
        << "read #" << k << ": " << store.status().ToString();
    EXPECT_NE(store.status().message().find("disk I/O error"), std::string::npos)
        << store.status().ToString();
    vfs.Disarm();
    store = Open(/*through_vfs=*/true);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
  }
}

// SQLite rolls a transaction back by itself when a statement in it fails
// with an I/O error; the statements after it must not commit one by one.
TEST_F(SqliteFaultTest, AStatementAfterSQLiteRolledTheTransactionBackIsRefused) {
  // A file larger than what one statement reads, opened cold: the inserts
  // below read index pages from the disk.
  {
    Result<std::unique_ptr<Store>> store = Open(/*through_vfs=*/false);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Store& s = **store;
    ASSERT_TRUE(s.Begin().ok());
    Result<int64_t> qid = s.QueueId("q");
    ASSERT_TRUE(qid.ok()) << qid.status().ToString();
    for (int64_t seq = 1; seq <= 2000; ++seq) {
      TaskRow row = test::Scheduled(seq, *qid, test::kNow);
      row.name = "task:" + std::to_string(seq * 7919 % 2000);
      ASSERT_TRUE(s.Insert(row).ok());
    }
    ASSERT_TRUE(s.Commit().ok());
  }
  Result<std::unique_ptr<Store>> store = Open(/*through_vfs=*/true);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Store& s = **store;
  Result<int64_t> qid = s.QueueId("q");
  ASSERT_TRUE(qid.ok());
  auto row = [&](int64_t seq, const std::string& name) {
    TaskRow r = test::Scheduled(seq, *qid, test::kNow);
    r.name = name;
    return r;
  };
  ASSERT_TRUE(s.Begin().ok());
  ASSERT_TRUE(s.Insert(row(3001, "before")).ok());
  FaultyVfs& vfs = FaultyVfs::Get();
  vfs.ResetCounts();
  vfs.Arm(VfsOp::kRead, 1, VfsFault::kIoError, /*sticky=*/false);
  Result<bool> failed = s.Insert(row(3002, "task:999x"));
  ASSERT_EQ(vfs.faults(), 1) << "the insert read nothing from the disk";
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable) << failed.status().ToString();
  // The disk works again, but the transaction is gone: what follows in it
  // must fail too, and not commit on its own.
  Result<bool> after = s.Insert(row(3003, "after"));
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable) << after.status().ToString();
  Status commit = s.Commit();
  EXPECT_EQ(commit.code(), StatusCode::kUnavailable) << commit.ToString();
  EXPECT_NE(commit.message().find("disk I/O error"), std::string::npos) << commit.ToString();
  EXPECT_EQ(commit.reason(), StatusReason::kStoreUnavailable) << commit.ToString();
  s.Rollback();
  // The next transaction works.
  ASSERT_TRUE(s.Begin().ok());
  ASSERT_TRUE(s.Insert(row(3004, "next")).ok());
  ASSERT_TRUE(s.Commit().ok());
  store->reset();
  const std::string names =
      test::QueryText(path_, "SELECT group_concat(name) FROM tasks WHERE seq > 3000 ORDER BY seq");
  EXPECT_EQ(names, "next") << "nothing of the failed transaction is visible";
  EXPECT_EQ(test::QueryText(path_, "PRAGMA integrity_check"), "ok");
}

// chronoqd answers it 503 store_unavailable (not 503 unavailable, which
// means it is stopping), with SQLite's words for it.
TEST_F(SqliteFaultTest, AFullDiskIsAStoreThatIsUnavailableUntilItHasSpaceAgain) {
  Result<std::unique_ptr<Store>> store = Open(/*through_vfs=*/true);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Store& s = **store;
  ASSERT_TRUE(s.Begin().ok());
  Result<int64_t> qid = s.QueueId("q");
  ASSERT_TRUE(qid.ok());
  ASSERT_TRUE(s.Insert(test::Scheduled(1, *qid, test::kNow)).ok());
  FaultyVfs& vfs = FaultyVfs::Get();
  vfs.ResetCounts();
  vfs.Arm(VfsOp::kWrite, 1, VfsFault::kDiskFull, /*sticky=*/true);
  Status commit = s.Commit();
  EXPECT_EQ(commit.code(), StatusCode::kUnavailable) << commit.ToString();
  EXPECT_EQ(commit.reason(), StatusReason::kStoreUnavailable) << commit.ToString();
  EXPECT_NE(commit.message().find("disk is full"), std::string::npos) << commit.ToString();
  s.Rollback();
  vfs.Disarm();
  ASSERT_TRUE(s.Begin().ok());
  ASSERT_TRUE(s.Insert(test::Scheduled(2, *qid, test::kNow)).ok());
  EXPECT_TRUE(s.Commit().ok());
  store->reset();
  EXPECT_EQ(test::QueryText(path_, "SELECT group_concat(seq) FROM tasks"), "2");
}

}  // namespace
}  // namespace chronoq
