// The SQLite store when the disk fails under it (issue 17), one fault at a
// time, through the faulty VFS (support/faulty_vfs.h): what each call
// answers, and what the file holds afterwards. The sweep over a whole engine
// workload is core/engine_fault_sweep_test.cc.
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "store/sqlite/sqlite_store.h"
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

}  // namespace
}  // namespace chronoq
