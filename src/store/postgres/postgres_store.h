// PostgresStore: the Store on a PostgreSQL database (15 tested; 12 or later).
//
// Everything lives in one schema of the database (default "chronoq"),
// created and migrated when the store opens. Two connections, as in the
// SQLite store: the writer (engine loop thread only) and a reader guarded by
// a mutex for client reads, which see committed data only.
//
// One engine per schema: the writer holds a session-level advisory lock for
// the store's life, so a second Open of the same schema fails with
// FailedPrecondition. PostgreSQL releases the lock when the session ends,
// crash or not; a writer that lost its session takes the lock again before
// it writes again (OpenPostgresStore below), so a write only ever reaches
// the database through a session that holds the lock.
//
//   Result<std::unique_ptr<Store>> store = OpenPostgresStore(
//       {.conninfo = "postgresql://chronoq@db.example/jobs", .schema = "chronoq"});
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "chronoq/clock.h"

#include "store/store.h"

namespace chronoq {

// Cluster mode: the store of the node that leads several chronoqd nodes on
// one schema (docs/ARCHITECTURE.md, "Leadership and the fence"). Opening
// takes the schema's engine lock (as always), then bumps the schema's
// leader epoch and records this node as the leader; every transaction then
// starts by reading the epoch under a share lock and refuses to go on if it
// changed. The writer never reconnects: a lost writer session, like a
// changed epoch, means another node may lead now, and the store fails every
// later call with Unavailable (reason kNotLeader) after calling on_deposed.
struct PostgresLeadership {
  std::string node_id;  // recorded in the leader row
  std::string address;  // where other nodes forward to ("http://host:port")
  // Called once, on the thread that found out (the engine's loop thread),
  // with why; the node then steps down. May be empty.
  std::function<void(const Status&)> on_deposed;
  // How long opening waits for the engine lock: long enough for the session
  // of a leader just deposed to end, none when the lock was seen free.
  Duration lock_patience = std::chrono::seconds(2);
};

struct PostgresOptions {
  // A libpq connection string: a URI ("postgresql://user@host:5432/db?...")
  // or key=value pairs ("host=/run/pg dbname=jobs"), passed to libpq as is.
  std::string conninfo;
  // The schema holding chronoq's tables: 1-63 lower-case ASCII letters,
  // digits and underscores, not starting with a digit nor "pg_".
  std::string schema = "chronoq";
  // Paces the writer's reconnection attempts (see OpenPostgresStore); must
  // outlive the store. nullptr: the system clock.
  Clock* clock = nullptr;
  // Set: open as a cluster's leader (PostgresLeadership).
  std::optional<PostgresLeadership> leadership;
};

// Checks a schema name (PostgresOptions::schema): InvalidArgument naming the
// field "store" when it is not one chronoq accepts.
Status ValidatePostgresSchema(std::string_view schema);

// Connects, takes the schema's engine lock, creates or migrates the schema.
// Errors: InvalidArgument (a bad schema name), Unavailable (the server cannot
// be reached, with libpq's message), FailedPrecondition (the schema is open
// in another engine; the database is not UTF8; the server is too old).
//
// Once open, a lost writer connection (a server restart, a failover,
// pg_terminate_backend, the network) makes writes fail with Unavailable and
// reason kStoreUnavailable, and Begin() connects again and takes the
// schema's lock again: at once the first time, then no more often than a
// backoff that doubles from 100 ms to 5 s (on options.clock), failing at
// once in between. A transaction cut off by the loss is gone; whether its
// COMMIT had been applied cannot be known (the caller reports Unavailable,
// and the engine reloads its memory from the store).
Result<std::unique_ptr<Store>> OpenPostgresStore(const PostgresOptions& options);

}  // namespace chronoq
