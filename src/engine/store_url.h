// Store URLs: what EngineOptions::store (and chronoqd's data settings) say
// about where the engine keeps its state.
//
//   "sqlite:data/chronoq.db"                  an embedded SQLite file
//   "data/chronoq.db"                         the same (no scheme: a path)
//   "sqlite:data/chronoq.db?durability=full"  fsync on every commit
//   "postgresql://user@host:5432/db"          a PostgreSQL database, schema "chronoq"
//   "postgres://user@host/db?schema=jobs&sslmode=require"
//                                             schema "jobs"; the other parameters
//                                             are libpq's
//   "host=/run/postgresql dbname=jobs schema=jobs"
//                                             the same as libpq key=value pairs
//
// Errors are InvalidArgument naming the field "store".
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "chronoq/result.h"

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"

namespace chronoq {

// What a SQLite store URL says.
Result<SqliteOptions> ParseSqliteUrl(std::string_view url);

// What a postgres:// or postgresql:// URL says: the schema (its `schema`
// parameter, default "chronoq") and the URL libpq gets, which is the same
// without that parameter.
Result<PostgresOptions> ParsePostgresUrl(std::string_view url);

// What a libpq key=value connection string says ("host=/run/pg dbname=jobs
// schema=jobs"): the schema (its `schema` pair, default "chronoq") and the
// string libpq gets, the same without that pair. OpenStoreUrl takes one for
// PostgreSQL when it starts with one of libpq's usual keywords (host=,
// dbname=, user=, port=, service=, ...).
Result<PostgresOptions> ParsePostgresConninfo(std::string_view conninfo);

// Where a store URL says the store is: exactly one of the two is set.
struct StoreLocation {
  std::optional<SqliteOptions> sqlite;
  std::optional<PostgresOptions> postgres;
};

// What `url` names, without opening anything: the parsing half of
// OpenStoreUrl, with its errors.
Result<StoreLocation> ParseStoreUrl(std::string_view url);

// Opens the store at `location` (OpenStoreUrl's other half).
Result<std::unique_ptr<Store>> OpenStore(StoreLocation location, Clock* clock = nullptr);

// Opens the store `url` names. `clock` (nullptr: the system clock) paces
// what the store does over time: PostgreSQL's reconnection attempts.
Result<std::unique_ptr<Store>> OpenStoreUrl(std::string_view url, Clock* clock = nullptr);

}  // namespace chronoq
