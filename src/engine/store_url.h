// Store URLs: what EngineOptions::store (and chronoqd's data settings) say
// about where the engine keeps its state.
//
//   "sqlite:data/chronoq.db"                  an embedded SQLite file
//   "data/chronoq.db"                         the same (no scheme: a path)
//   "sqlite:data/chronoq.db?durability=full"  fsync on every commit
//
// Errors are InvalidArgument naming the field "store".
#pragma once

#include <memory>
#include <string_view>

#include "chronoq/result.h"

#include "store/sqlite/sqlite_store.h"
#include "store/store.h"

namespace chronoq {

// What a SQLite store URL says. (PostgreSQL URLs come with the PostgreSQL store.)
Result<SqliteOptions> ParseSqliteUrl(std::string_view url);

// Opens the store `url` names.
Result<std::unique_ptr<Store>> OpenStoreUrl(std::string_view url);

}  // namespace chronoq
