// Store URLs (EngineOptions::store): what they open, and errors that name
// the field "store" and change nothing.
#include "engine/store_url.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "support/engine_fixture.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using test::IsOk;
using test::StatusIs;

TEST(StoreUrlTest, APathOrASqliteUrlNamesASqliteFile) {
  Result<SqliteOptions> bare = ParseSqliteUrl("data/chronoq.db");
  ASSERT_THAT(bare, IsOk());
  EXPECT_EQ(bare->path, "data/chronoq.db");
  EXPECT_EQ(bare->durability, Durability::kNormal);

  Result<SqliteOptions> url = ParseSqliteUrl("sqlite:/var/lib/chronoq/chronoq.db");
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->path, "/var/lib/chronoq/chronoq.db");

  Result<SqliteOptions> full = ParseSqliteUrl("sqlite:x.db?durability=full");
  ASSERT_THAT(full, IsOk());
  EXPECT_EQ(full->path, "x.db");
  EXPECT_EQ(full->durability, Durability::kFull);
  EXPECT_EQ(ParseSqliteUrl("sqlite:x.db?durability=normal")->durability, Durability::kNormal);
}

TEST(StoreUrlTest, BadUrlsNameTheStoreField) {
  for (const char* bad : {"", "sqlite:", "sqlite:?durability=full", "sqlite:x.db?durability=max",
                          "sqlite:x.db?cache=big", "mysql://db/x", "postgres://u@h/db"}) {
    Result<std::unique_ptr<Store>> store = OpenStoreUrl(bad);
    ASSERT_THAT(store, StatusIs(StatusCode::kInvalidArgument)) << bad;
    EXPECT_EQ(store.status().field(), "store") << bad;
  }
}

TEST(StoreUrlTest, EngineOpenUsesTheUrlAndBadOptionsWriteNothing) {
  test::TempDir dir;
  EngineOptions bad;
  bad.store = "sqlite:" + dir.File("bad/chronoq.db");
  bad.purge_chunk = 0;
  Result<std::unique_ptr<Engine>> refused = Engine::Open(bad);
  ASSERT_THAT(refused, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(refused.status().field(), "purge_chunk");
  EXPECT_FALSE(std::filesystem::exists(dir.File("bad")));

  EngineOptions good;
  good.store = "sqlite:" + dir.File("good/chronoq.db") + "?durability=full";
  Result<std::unique_ptr<Engine>> opened = Engine::Open(good);
  ASSERT_THAT(opened, IsOk());
  EXPECT_TRUE(std::filesystem::exists(dir.File("good/chronoq.db")));
}

TEST(StoreUrlTest, OpenWithAStoreOfOurOwnNeedsOne) {
  EXPECT_THAT(Engine::Open(EngineOptions{}, nullptr), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace chronoq
