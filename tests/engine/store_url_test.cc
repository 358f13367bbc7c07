// Store URLs (EngineOptions::store): what they open, and errors that name
// the field "store" and change nothing.
#include "engine/store_url.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "support/engine_fixture.h"
#include "support/pg_test_db.h"
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
                          "sqlite:x.db?cache=big", "mysql://db/x", "postgresql://[::1/db",
                          "postgres://u@h/db?schema=Jobs",
                          "postgres://u@h/db?schema=", "postgresql://u@h/db?schema=a&schema=b"}) {
    Result<std::unique_ptr<Store>> store = OpenStoreUrl(bad);
    ASSERT_THAT(store, StatusIs(StatusCode::kInvalidArgument)) << bad;
    EXPECT_EQ(store.status().field(), "store") << bad;
  }
}

TEST(StoreUrlTest, APostgresUrlGoesToLibpqWithoutItsSchema) {
  Result<PostgresOptions> plain = ParsePostgresUrl("postgresql://u@db.example:5433/jobs");
  ASSERT_THAT(plain, IsOk());
  EXPECT_EQ(plain->conninfo, "postgresql://u@db.example:5433/jobs");
  EXPECT_EQ(plain->schema, "chronoq");

  Result<PostgresOptions> first =
      ParsePostgresUrl("postgres://u:pw@h/db?schema=tenant_7&sslmode=require");
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->conninfo, "postgres://u:pw@h/db?sslmode=require");
  EXPECT_EQ(first->schema, "tenant_7");

  Result<PostgresOptions> middle =
      ParsePostgresUrl("postgresql:///db?host=/run/pg&schema=s&port=5432");
  ASSERT_THAT(middle, IsOk());
  EXPECT_EQ(middle->conninfo, "postgresql:///db?host=/run/pg&port=5432");
  EXPECT_EQ(middle->schema, "s");

  Result<PostgresOptions> only = ParsePostgresUrl("postgresql://h/db?schema=x");
  ASSERT_THAT(only, IsOk());
  EXPECT_EQ(only->conninfo, "postgresql://h/db");

  EXPECT_THAT(ParsePostgresUrl("sqlite:x.db"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParsePostgresUrl("postgresql:x"), StatusIs(StatusCode::kInvalidArgument));
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

TEST(StoreUrlTest, AKeyValueConninfoGoesToLibpqWithoutItsSchema) {
  Result<PostgresOptions> plain = ParsePostgresConninfo("host=/run/pg dbname=jobs port=5432");
  ASSERT_THAT(plain, IsOk());
  EXPECT_EQ(plain->conninfo, "host=/run/pg dbname=jobs port=5432");
  EXPECT_EQ(plain->schema, "chronoq");

  Result<PostgresOptions> quoted =
      ParsePostgresConninfo("host='/a b\\'c' schema = tenant_7 password='x y'");
  ASSERT_THAT(quoted, IsOk());
  EXPECT_EQ(quoted->conninfo, "host='/a b\\'c' password='x y'");
  EXPECT_EQ(quoted->schema, "tenant_7");

  for (const char* bad :
       {"host=h schema=Bad", "host=h schema=a schema=b", "host='open", "host=h dbname"}) {
    Result<PostgresOptions> r = ParsePostgresConninfo(bad);
    EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument)) << bad;
    EXPECT_EQ(r.status().field(), "store") << bad;
  }
}

// (Its name says Postgres: it runs in the PostgreSQL run, on the test cluster.)
TEST(StoreUrlPostgresTest, AKeyValueConninfoOpensThePostgresStore) {
  test::PgTestDatabase db;
  ASSERT_TRUE(db.ok());
  Result<std::unique_ptr<Store>> store = OpenStoreUrl(db.conninfo() + " schema=kv");
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ(db.QueryText("SELECT count(*) FROM pg_namespace WHERE nspname = 'kv'"), "1");
}

}  // namespace
}  // namespace chronoq
