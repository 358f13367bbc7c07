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

// When the WAL is copied into the database file. The defaults suit
// production; tests lower them to exercise both paths.
struct SqliteTuning {
  // The background checkpointer runs each time the WAL grew by this many pages.
  int checkpoint_pages = 4096;  // 16 MiB
  // Past this many pages the writer checkpoints itself before its next
  // commit, so the WAL stays bounded when the checkpointer falls behind.
  int wal_limit_pages = 16384;  // 64 MiB
};

// Opens (creating, migrating) the database at `path`. Its directory is
// created when missing.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, Durability durability,
                                               SqliteTuning tuning = {});

}  // namespace chronoq
