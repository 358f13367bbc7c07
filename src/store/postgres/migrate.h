// The schema's creation and migration, shared by the store's writer and the
// cluster's control connection (both may be the first to open a schema).
#pragma once

#include <string>

#include "chronoq/status.h"

#include "store/postgres/connection.h"

namespace chronoq::pg {

// The SET statements every chronoq session starts with: search_path set to
// `schema`, hex BYTEA output, UTF8, read committed (each statement sees what
// committed before it, whatever the database's default).
std::string SessionSetup(const std::string& schema);

// Creates `schema` and its tables, or brings them up to the store's version,
// in one transaction on `conn` (idle, search_path set to the schema). A newer
// version is left alone (the store's LoadMeta refuses it).
Status MigrateSchema(Connection& conn, const std::string& schema);

}  // namespace chronoq::pg
