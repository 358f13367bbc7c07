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

#include <memory>
#include <string>
#include <string_view>

#include "chronoq/clock.h"

#include "store/store.h"

namespace chronoq {

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
