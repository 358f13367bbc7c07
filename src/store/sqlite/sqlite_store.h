// SqliteStore: the embedded default Store, one SQLite file in WAL mode.
//
// Two connections: the writer (engine loop thread only) and a reader guarded
// by a mutex for client reads, which see committed data only (WAL snapshot).
#pragma once

#include <memory>
#include <string>

#include "chronoq/engine.h"

#include "store/store.h"

namespace chronoq {

// Opens (creating, migrating) the database at `path`. Its directory is
// created when missing.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, Durability durability);

}  // namespace chronoq
