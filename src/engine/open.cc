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

// Whether `url` is a libpq key=value connection string ("host=/run/pg
// dbname=jobs"): it starts with one of libpq's usual keywords and '='. A
// SQLite path never does (it would be "host=..." as a file name: write it
// as sqlite:host=... then).
bool LooksLikeConninfo(std::string_view url) {
  static constexpr std::string_view kKeywords[] = {"host",
                                                   "hostaddr",
                                                   "port",
                                                   "dbname",
                                                   "user",
                                                   "password",
                                                   "passfile",
                                                   "service",
                                                   "sslmode",
                                                   "connect_timeout",
                                                   "application_name",
                                                   "options",
                                                   "target_session_attrs",
                                                   "schema"};
  const size_t start = url.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  url.remove_prefix(start);
  const size_t eq = url.find('=');
  if (eq == std::string_view::npos) return false;
  std::string_view key = url.substr(0, eq);
  while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
  for (std::string_view k : kKeywords) {
    if (key == k) return true;
  }
  return false;
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

Result<PostgresOptions> ParsePostgresConninfo(std::string_view conninfo) {
  PostgresOptions options;
  bool schema_seen = false;
  std::string rest;
  size_t i = 0;
  while (i < conninfo.size()) {
    if (conninfo[i] == ' ' || conninfo[i] == '\t' || conninfo[i] == '\n') {
      ++i;
      continue;
    }
    // key [spaces] = [spaces] value, the value bare or 'quoted' with \' and \\.
    const size_t begin = i;
    const size_t eq = conninfo.find('=', i);
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("store", "not a PostgreSQL connection string: \"" +
                                                  std::string(conninfo.substr(begin)) +
                                                  "\" is not key=value");
    }
    std::string_view key = conninfo.substr(begin, eq - begin);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
    i = eq + 1;
    while (i < conninfo.size() && (conninfo[i] == ' ' || conninfo[i] == '\t')) ++i;
    std::string value;
    if (i < conninfo.size() && conninfo[i] == '\'') {
      for (++i; i < conninfo.size() && conninfo[i] != '\''; ++i) {
        if (conninfo[i] == '\\' && i + 1 < conninfo.size()) ++i;
        value += conninfo[i];
      }
      if (i >= conninfo.size()) {
        return Status::InvalidArgument("store",
                                       "an unterminated quoted value in the connection string");
      }
      ++i;
    } else {
      while (i < conninfo.size() && conninfo[i] != ' ' && conninfo[i] != '\t' &&
             conninfo[i] != '\n') {
        value += conninfo[i++];
      }
    }
    if (key == "schema") {
      if (schema_seen) return Status::InvalidArgument("store", "schema is given twice");
      schema_seen = true;
      options.schema = value;
      CHRONOQ_RETURN_IF_ERROR(ValidatePostgresSchema(options.schema));
    } else {
      if (!rest.empty()) rest += ' ';
      rest += conninfo.substr(begin, i - begin);
    }
  }
  options.conninfo = std::move(rest);
  return options;
}

Result<StoreLocation> ParseStoreUrl(std::string_view url) {
  if (url.empty()) return Status::InvalidArgument("store", "must not be empty");
  StoreLocation location;
  if (LooksLikeConninfo(url)) {
    CHRONOQ_ASSIGN_OR_RETURN(location.postgres, ParsePostgresConninfo(url));
    return location;
  }
  const size_t colon = url.find(':');
  const size_t slashes = url.find("://");
  if (slashes != std::string_view::npos && slashes == colon && !url.starts_with(kSqliteScheme)) {
    const std::string scheme(url.substr(0, colon));
    if (IsPostgresScheme(scheme)) {
      CHRONOQ_ASSIGN_OR_RETURN(location.postgres, ParsePostgresUrl(url));
      return location;
    }
    return Status::InvalidArgument("store", "unknown store scheme \"" + scheme +
                                                "\" (known: sqlite:PATH, a plain path, "
                                                "postgresql://...)");
  }
  CHRONOQ_ASSIGN_OR_RETURN(location.sqlite, ParseSqliteUrl(url));
  return location;
}

Result<std::unique_ptr<Store>> OpenStore(StoreLocation location, Clock* clock) {
  if (location.postgres.has_value()) {
    location.postgres->clock = clock;
    return OpenPostgresStore(*location.postgres);
  }
  if (!location.sqlite.has_value()) return Status::InvalidArgument("store", "must not be empty");
  return OpenSqliteStore(*location.sqlite);
}

Result<std::unique_ptr<Store>> OpenStoreUrl(std::string_view url, Clock* clock) {
  CHRONOQ_ASSIGN_OR_RETURN(StoreLocation location, ParseStoreUrl(url));
  return OpenStore(std::move(location), clock);
}

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  // The options first: a bad one must not leave a new database behind.
  CHRONOQ_RETURN_IF_ERROR(ValidateEngineOptions(options));
  CHRONOQ_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                           OpenStoreUrl(options.store, options.clock));
  return Open(std::move(options), std::move(store));
}

}  // namespace chronoq
