// chronoqd when its disk fills up, for real (issue 17): the test mounts a
// tmpfs of 8 MiB, starts chronoqd with --data on it and enqueues batches
// until the disk is full. Then every write answers 503 store_unavailable
// saying the disk is full (never 500), reads go on, /healthz says
// "degraded", and chronoqd stays up. Once the tmpfs grows to 64 MiB, writes
// work again without a restart. Finally, with chronoqd stopped, the file
// passes PRAGMA integrity_check and holds every task that was acknowledged.
//
// Mounting needs root (CI runs as root); without it the test fails, saying so.
// The mount is removed whatever happens (TmpfsMount's destructor).
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "cli/http_client.h"
#include "common/subprocess.h"
#include "support/chronoqd_process.h"
#include "support/status_matchers.h"
#include "support/temp_dir.h"
#include <signal.h>
#include <unistd.h>

#ifndef CHRONOQD_PATH
#error "CHRONOQD_PATH (the chronoqd binary) must be defined for the test target"
#endif

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

// Runs mount(8) or umount(8) with `args`.
Status RunMount(const std::string& program, std::vector<std::string> args) {
  SpawnOptions o;
  o.argv = {program};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.search_path = true;
  CHRONOQ_ASSIGN_OR_RETURN(Subprocess::Completed done, Subprocess::Run(o, Deadline(30s)));
  if (done.code != 0) {
    std::string line = program;
    for (const std::string& a : args) line += " " + a;
    return Status::Unavailable(line + " exited " + std::to_string(done.code) + ": " + done.err);
  }
  return {};
}

// A tmpfs of a given size mounted on a directory for the guard's life.
class TmpfsMount {
 public:
  explicit TmpfsMount(std::string dir) : dir_(std::move(dir)) {}
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;
  ~TmpfsMount() {
    if (!mounted_) return;
    // Lazily if something still has a file open there (a failed test's
    // chronoqd is killed first, but be sure the mount goes).
    if (!RunMount("umount", {dir_}).ok()) RunMount("umount", {"-l", dir_}).IgnoreError();
  }

  Status Mount(const std::string& size) {
    std::filesystem::create_directories(dir_);
    CHRONOQ_RETURN_IF_ERROR(
        RunMount("mount", {"-t", "tmpfs", "-o", "size=" + size, "tmpfs", dir_}));
    mounted_ = true;
    return {};
  }
  // More (or less) space, keeping the files.
  Status Resize(const std::string& size) {
    return RunMount("mount", {"-o", "remount,size=" + size, dir_});
  }

 private:
  const std::string dir_;
  bool mounted_ = false;
};

// The names of the tasks in the SQLite file at `path`, and its integrity check.
struct FileCheck {
  std::string integrity;
  std::set<std::string> names;
};
FileCheck CheckFile(const std::string& path) {
  FileCheck out;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr), SQLITE_OK);
  if (sqlite3_step(s) == SQLITE_ROW) {
    out.integrity = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  }
  sqlite3_finalize(s);
  EXPECT_EQ(
      sqlite3_prepare_v2(db, "SELECT name FROM tasks WHERE name IS NOT NULL", -1, &s, nullptr),
      SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW) {
    out.names.insert(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

class DiskFullTest : public ::testing::Test {
 protected:
  // A batch of 100 tasks of ~1 KiB each, ids "<prefix>-<n>".
  std::string Batch(const std::string& prefix, int n, std::vector<std::string>& ids) {
    json tasks = json::array();
    const std::string filler(1000, 'x');
    for (int i = 0; i < 100; ++i) {
      ids.push_back(prefix + "-" + std::to_string(n * 100 + i));
      tasks.push_back({{"queue", "q"}, {"id", ids.back()}, {"payload", {{"fill", filler}}}});
    }
    return json{{"tasks", tasks}}.dump();
  }
  cli::HttpResponse Send(std::string_view method, std::string_view target,
                         std::string_view body = "") {
    Result<cli::HttpResponse> r = client_->Send(method, target, body, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : cli::HttpResponse{};
  }

  test::TempDir dir_;
  std::unique_ptr<cli::HttpClient> client_;
};

TEST_F(DiskFullTest, WritesAnswer503UntilThereIsSpaceAndNothingAcknowledgedIsLost) {
  ASSERT_EQ(geteuid(), 0u) << "this test mounts a tmpfs of 8 MiB to fill it up, which needs "
                              "root (CI runs as root): run it as root";
  const std::string disk = dir_.File("disk");
  TmpfsMount mount(disk);  // after dir_: unmounted before the directory goes
  ASSERT_THAT(mount.Mount("8m"), test::IsOk());
  test::ChronoqdProcess server({
      .binary = CHRONOQD_PATH,
      .data_dir = disk + "/data",
      .log = dir_.File("chronoqd.log"),  // not on the full disk
  });
  ASSERT_THAT(server.Start(), test::IsOk());
  Result<std::unique_ptr<cli::HttpClient>> client = cli::HttpClient::Create(server.url(), 60s);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  client_ = std::move(*client);

  // Fill it: 8 MiB hold fewer than 80 batches of 100 KiB; then single
  // tasks, until not even one fits.
  std::vector<std::string> acknowledged;
  auto enqueue = [&](const std::string& target, const std::string& body,
                     const std::vector<std::string>& ids) {
    cli::HttpResponse r = Send("POST", target, body);
    if (r.status / 100 == 2) acknowledged.insert(acknowledged.end(), ids.begin(), ids.end());
    return r;
  };
  auto single = [&](int n) {
    const std::string id = "s-" + std::to_string(n);
    return enqueue("/v1/tasks", json{{"queue", "q"}, {"id", id}}.dump(), {id});
  };
  int batches = 0;
  cli::HttpResponse refused;
  for (; batches < 200; ++batches) {
    std::vector<std::string> ids;
    const std::string body = Batch("t", batches, ids);
    refused = enqueue("/v1/tasks/batch", body, ids);
    if (refused.status / 100 != 2) break;
  }
  ASSERT_LT(batches, 200) << "8 MiB never filled up";
  int singles = 0;
  for (; singles < 2000 && refused.status / 100 != 5; ++singles) refused = single(singles);
  ASSERT_EQ(refused.status / 100, 5) << "a single task still fits after 2,000";
  ASSERT_GT(acknowledged.size(), 0u) << refused.body;
  // A clear answer: 503 store_unavailable, the disk is full.
  EXPECT_EQ(refused.status, 503) << refused.body;
  json error = json::parse(refused.body, nullptr, false);
  EXPECT_EQ(error["error"]["code"], "store_unavailable") << refused.body;
  EXPECT_THAT(error["error"].value("message", ""), HasSubstr("disk is full")) << refused.body;

  // Meanwhile: /healthz says the store is degraded, reads are served, more
  // writes get the same answer (or, one that still fits, 2xx; never 500),
  // and chronoqd stays up.
  cli::HttpResponse health = Send("GET", "/healthz");
  EXPECT_EQ(health.status, 503) << health.body;
  json h = json::parse(health.body, nullptr, false);
  EXPECT_EQ(h.value("store", ""), "degraded") << health.body;
  EXPECT_THAT(h["error"].value("message", ""), HasSubstr("disk is full")) << health.body;
  cli::HttpResponse read = Send("GET", "/v1/tasks/" + acknowledged.front());
  EXPECT_EQ(read.status, 200) << read.body;
  int unavailable = 0;
  for (int i = 0; i < 5; ++i) {
    std::vector<std::string> ids;
    const std::string body = Batch("late", i, ids);
    for (const cli::HttpResponse& r : {enqueue("/v1/tasks/batch", body, ids), single(singles++)}) {
      if (r.status / 100 == 2) continue;
      EXPECT_EQ(r.status, 503) << r.body;
      EXPECT_THAT(r.body, HasSubstr("store_unavailable"));
      ++unavailable;
    }
  }
  EXPECT_GT(unavailable, 0);
  EXPECT_TRUE(server.running());

  // Space comes back: writes work again, without a restart.
  ASSERT_THAT(mount.Resize("64m"), test::IsOk());
  std::vector<std::string> more;
  const std::string after_body = Batch("after", 0, more);
  cli::HttpResponse after = enqueue("/v1/tasks/batch", after_body, more);
  EXPECT_EQ(after.status, 201) << after.body;
  health = Send("GET", "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;

  // Stopped, the file is whole and holds every acknowledged task.
  EXPECT_THAT(server.Stop(SIGTERM), test::IsOkAndHolds(0));
  const FileCheck file = CheckFile(disk + "/data/chronoq.db");
  EXPECT_EQ(file.integrity, "ok");
  int lost = 0;
  for (const std::string& id : acknowledged) lost += file.names.contains(id) ? 0 : 1;
  EXPECT_EQ(lost, 0) << "of " << acknowledged.size() << " acknowledged tasks";
  std::printf("8 MiB full after %d batches of 100 tasks and %d single ones\n", batches, singles);
}

}  // namespace
}  // namespace chronoq
