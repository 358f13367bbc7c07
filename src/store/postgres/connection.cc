// The libpq toolkit's functions (connection.h).
#include "store/postgres/connection.h"

#include <spdlog/spdlog.h>

namespace chronoq::pg {

// 64-bit FNV-1a: advisory lock keys from schema names. Stable across
// processes and versions (PostgreSQL's hashtext is neither promised).
int64_t LockKey(std::string_view purpose, std::string_view schema) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::string_view s) {
    for (const char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
  };
  mix("chronoq ");
  mix(purpose);
  mix(" ");
  mix(schema);
  return static_cast<int64_t>(h);
}

// One line: libpq's messages end in newlines and indent their hints.
std::string OneLine(std::string_view text) {
  std::string out;
  bool space = false;
  for (const char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// Unavailable with reason kStoreUnavailable: the server cannot be reached
// (chronoqd answers 503 store_unavailable).
Status StoreUnavailable(std::string message) {
  return {StatusCode::kUnavailable, std::move(message), {}, StatusReason::kStoreUnavailable};
}

// Whether a failed call means the connection is gone: libpq says so, or the
// error is libpq's own (no SQLSTATE: "server closed the connection
// unexpectedly", which libpq reports before it marks the connection bad),
// or the server ended the session (class 08, 57P01-57P03: shutdown, crash).
bool ConnectionFailed(PGconn* conn, const PGresult* res) {
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) return true;
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (state == nullptr) return true;
  const std::string_view code = state;
  return code.starts_with("08") || code == "57P01" || code == "57P02" || code == "57P03";
}

// A status for a failed libpq call. Lost connections, shutdowns, full disks,
// conflicts and I/O errors are Unavailable (retry later), as SQLite's BUSY,
// FULL and IOERR are; missing privileges FailedPrecondition; corruption
// DataLoss; the rest are bugs.
Status PgError(PGconn* conn, const PGresult* res, std::string_view what) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const char* primary = res != nullptr ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string msg = std::string(what) + ": ";
  if (primary != nullptr) {
    msg += OneLine(primary);
  } else if (res != nullptr && *PQresultErrorMessage(res) != '\0') {
    msg += OneLine(PQresultErrorMessage(res));
  } else {
    msg += conn != nullptr ? OneLine(PQerrorMessage(conn)) : "out of memory";
  }
  if (state != nullptr) msg += std::string(" (SQLSTATE ") + state + ")";
  if (ConnectionFailed(conn, res)) {
    return StoreUnavailable(msg + "; the connection to PostgreSQL is lost");
  }
  const std::string_view code = state != nullptr ? state : "";
  const std::string_view cls = code.substr(0, 2);
  if (cls == "08" || cls == "40" || cls == "53" || cls == "57" || cls == "58") {
    return StoreUnavailable(msg);
  }
  // Missing privileges are the operator's to grant (docs/OPERATIONS.md).
  if (code == "42501") return Status::FailedPrecondition(msg);
  if (code == "XX001" || code == "XX002") return {StatusCode::kDataLoss, msg};
  return Status::Internal(msg);
}

// A quoted identifier (the schema name, already validated).
std::string Quoted(std::string_view name) { return "\"" + std::string(name) + "\""; }

// Two lower-case hex digits per byte of `v`: BYTEA's hex input form, after
// its "\\x".
void AppendHex(std::string& out, std::string_view v) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + 2 * v.size());
  for (const char c : v) {
    const auto b = static_cast<unsigned char>(c);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
}

void OnNotice(void*, const char* message) { spdlog::warn("postgres: {}", OneLine(message)); }

}  // namespace chronoq::pg
