// chronoq-admin, the real binary: the command line a person types to move
// a stopped chronoq from SQLite to PostgreSQL, its output and exit codes.
#include <chrono>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "common/subprocess.h"
#include "support/fake_clock.h"
#include "support/pg_test_db.h"
#include "support/status_matchers.h"
#include "support/temp_dir.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::IsOk;
using ::testing::HasSubstr;

Subprocess::Completed Admin(const std::vector<std::string>& args) {
  SpawnOptions o;
  o.argv = {CHRONOQ_ADMIN_PATH};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  Result<Subprocess::Completed> done = Subprocess::Run(o, Deadline(120s));
  EXPECT_THAT(done, IsOk());
  return done.ok() ? *done : Subprocess::Completed{};
}

TEST(AdminE2eTest, CopiesSqliteToPostgresThenRefusesToCopyAgain) {
  test::TempDir dir;
  test::PgTestDatabase db;
  ASSERT_TRUE(db.ok());
  const std::string from = "sqlite:" + dir.File("data/chronoq.db");
  {
    test::FakeClock clock;
    EngineOptions o;
    o.store = from;
    o.clock = &clock;
    Result<std::unique_ptr<Engine>> engine = Engine::Open(o);
    ASSERT_THAT(engine, IsOk());
    for (int i = 0; i < 25; ++i) {
      TaskSpec spec;
      spec.queue = i % 2 ? "odd" : "even";
      spec.delay = std::chrono::minutes(i);
      ASSERT_THAT((*engine)->Enqueue(spec), IsOk());
    }
  }
  const Subprocess::Completed copied =
      Admin({"copy", "--from", from, "--to", db.Url(), "--batch-rows", "4"});
  EXPECT_EQ(copied.code, 0) << copied.err;
  EXPECT_THAT(copied.out, HasSubstr("copied " + from + "\n    to " + db.Url()));
  EXPECT_THAT(copied.out, HasSubstr("tasks                          25             25  ok"));
  EXPECT_THAT(copied.out, HasSubstr("queues                          2              2  ok"));
  EXPECT_THAT(copied.out, HasSubstr("verified: the target holds what the source holds"));
  EXPECT_THAT(copied.out, ::testing::Not(HasSubstr("MISMATCH")));
  // Not a terminal: a line per tenth, no bar.
  EXPECT_THAT(copied.err, HasSubstr("copied 100% 27/27 rows"));
  EXPECT_THAT(copied.err, ::testing::Not(HasSubstr("\r")));
  EXPECT_EQ(db.QueryText("SELECT count(*) FROM chronoq.tasks"), "25");

  const Subprocess::Completed again = Admin({"copy", "--from", from, "--to", db.Url()});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err, HasSubstr("the target is not empty: it holds 25 tasks (25 scheduled), "
                                   "2 queues"));
  EXPECT_EQ(db.QueryText("SELECT count(*) FROM chronoq.tasks"), "25");

  // And back: PostgreSQL to a new SQLite file.
  const std::string back = "sqlite:" + dir.File("back/chronoq.db");
  const Subprocess::Completed returned = Admin({"copy", "--from", db.Url(), "--to", back});
  EXPECT_EQ(returned.code, 0) << returned.err;
  EXPECT_THAT(returned.out, HasSubstr("verified"));
}

TEST(AdminE2eTest, UsageErrorsExitTwoAndNameTheFlag) {
  const Subprocess::Completed bad = Admin({"copy", "--from", "mysql://x/y", "--to", "a.db"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--from"));
  const Subprocess::Completed none = Admin({});
  EXPECT_EQ(none.code, 2);
  const Subprocess::Completed help = Admin({"copy", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_THAT(help.out, HasSubstr("--batch-rows"));
}

}  // namespace
}  // namespace chronoq
