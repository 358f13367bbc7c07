// SqliteStore: the embedded default Store, one SQLite file in WAL mode.
//
// Two connections: the writer (engine loop thread only) and a reader guarded
// by a mutex for client reads, which see committed data only (WAL snapshot).
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace chronoq {

// How much a commit survives: kNormal survives a crash of the process (the
// write is in the OS before the call returns: synchronous=NORMAL in WAL
// mode); kFull also survives power loss (fsync on every commit; slower).
enum class Durability { kNormal, kFull };

// When the WAL is copied into the database file. The defaults suit
// production; tests lower them to exercise both paths.
struct SqliteTuning {
  // The background checkpointer runs each time the WAL grew by this many pages.
  int checkpoint_pages = 4096;  // 16 MiB
  // Past this many pages the writer checkpoints itself before its next
  // commit, so the WAL stays bounded when the checkpointer falls behind.
  int wal_limit_pages = 16384;  // 64 MiB
};

struct SqliteOptions {
  std::string path;  // the database file
  Durability durability = Durability::kNormal;
  SqliteTuning tuning;
  // For tests only: the name of a registered SQLite VFS to open the file
  // through (tests/support/faulty_vfs.h injects I/O errors); empty, the
  // default VFS, as in production. Not reachable from a store URL.
  std::string vfs;
};

// Opens (creating, migrating) the database at options.path. Its directory is
// created when missing.
Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options);

}  // namespace chronoq
