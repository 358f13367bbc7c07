// Engine::Open(options): the one place that knows every store
// implementation. The engine itself (core/) knows only the Store contract.
#include <string>

#include "chronoq/engine.h"

#include "core/validate.h"
#include "engine/store_url.h"

namespace chronoq {
namespace {

constexpr std::string_view kSqliteScheme = "sqlite:";

bool IsPostgresScheme(std::string_view scheme) {
  return scheme == "postgres" || scheme == "postgresql";
}

}  // namespace

Result<SqliteOptions> ParseSqliteUrl(std::string_view url) {
  SqliteOptions options;
  if (!url.starts_with(kSqliteScheme)) {
    options.path = std::string(url);  // a bare path, taken whole
  } else {
    url.remove_prefix(kSqliteScheme.size());
    const size_t query = url.find('?');
    options.path = std::string(url.substr(0, query));
    std::string_view params = query == std::string_view::npos ? "" : url.substr(query + 1);
    while (!params.empty()) {
      const size_t amp = params.find('&');
      const std::string_view param = params.substr(0, amp);
      params = amp == std::string_view::npos ? "" : params.substr(amp + 1);
      if (param == "durability=normal") {
        options.durability = Durability::kNormal;
      } else if (param == "durability=full") {
        options.durability = Durability::kFull;
      } else if (param.starts_with("durability=")) {
        return Status::InvalidArgument("store", "durability must be normal or full");
      } else {
        return Status::InvalidArgument(
            "store", "unknown SQLite parameter \"" + std::string(param) + "\" (known: durability)");
      }
    }
  }
  if (options.path.empty()) return Status::InvalidArgument("store", "the SQLite path is empty");
  return options;
}

Result<PostgresOptions> ParsePostgresUrl(std::string_view url) {
  const size_t colon = url.find(':');
  if (colon == std::string_view::npos || !IsPostgresScheme(url.substr(0, colon)) ||
      url.substr(colon, 3) != "://") {
    return Status::InvalidArgument("store", "a PostgreSQL URL starts with postgresql://");
  }
  PostgresOptions options;
  const size_t query = url.find('?');
  options.conninfo = std::string(url.substr(0, query));
  std::string_view params = query == std::string_view::npos ? "" : url.substr(query + 1);
  // Every parameter but `schema` is libpq's, passed on in its order.
  bool schema_seen = false;
  std::string rest;
  while (!params.empty()) {
    const size_t amp = params.find('&');
    const std::string_view param = params.substr(0, amp);
    params = amp == std::string_view::npos ? "" : params.substr(amp + 1);
    if (param.starts_with("schema=")) {
      if (schema_seen) return Status::InvalidArgument("store", "schema is given twice");
      schema_seen = true;
      options.schema = std::string(param.substr(7));
      CHRONOQ_RETURN_IF_ERROR(ValidatePostgresSchema(options.schema));
    } else if (!param.empty()) {
      rest += rest.empty() ? "?" : "&";
      rest += param;
    }
  }
  options.conninfo += rest;
  return options;
}

Result<std::unique_ptr<Store>> OpenStoreUrl(std::string_view url, Clock* clock) {
  if (url.empty()) return Status::InvalidArgument("store", "must not be empty");
  const size_t colon = url.find(':');
  const size_t slashes = url.find("://");
  if (slashes != std::string_view::npos && slashes == colon && !url.starts_with(kSqliteScheme)) {
    const std::string scheme(url.substr(0, colon));
    if (IsPostgresScheme(scheme)) {
      CHRONOQ_ASSIGN_OR_RETURN(PostgresOptions options, ParsePostgresUrl(url));
      options.clock = clock;
      return OpenPostgresStore(options);
    }
    return Status::InvalidArgument("store", "unknown store scheme \"" + scheme +
                                                "\" (known: sqlite:PATH, a plain path, "
                                                "postgresql://...)");
  }
  CHRONOQ_ASSIGN_OR_RETURN(SqliteOptions options, ParseSqliteUrl(url));
  return OpenSqliteStore(options);
}

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  // The options first: a bad one must not leave a new database behind.
  CHRONOQ_RETURN_IF_ERROR(ValidateEngineOptions(options));
  CHRONOQ_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                           OpenStoreUrl(options.store, options.clock));
  return Open(std::move(options), std::move(store));
}

}  // namespace chronoq
