// Engine::Open(options): the one place that knows every store
// implementation. The engine itself (core/) knows only the Store contract.
#include <string>

#include "chronoq/engine.h"

#include "core/validate.h"
#include "engine/store_url.h"

namespace chronoq {
namespace {

constexpr std::string_view kSqliteScheme = "sqlite:";

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

Result<std::unique_ptr<Store>> OpenStoreUrl(std::string_view url) {
  if (url.empty()) return Status::InvalidArgument("store", "must not be empty");
  const size_t colon = url.find(':');
  const size_t slashes = url.find("://");
  if (slashes != std::string_view::npos && slashes == colon && !url.starts_with(kSqliteScheme)) {
    const std::string scheme(url.substr(0, colon));
    if (scheme == "postgres" || scheme == "postgresql") {
      return Status::InvalidArgument("store",
                                     "PostgreSQL stores are not available in this build yet");
    }
    return Status::InvalidArgument(
        "store", "unknown store scheme \"" + scheme + "\" (known: sqlite:PATH, or a plain path)");
  }
  CHRONOQ_ASSIGN_OR_RETURN(SqliteOptions options, ParseSqliteUrl(url));
  return OpenSqliteStore(options);
}

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  // The options first: a bad one must not leave a new database behind.
  CHRONOQ_RETURN_IF_ERROR(ValidateEngineOptions(options));
  CHRONOQ_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStoreUrl(options.store));
  return Open(std::move(options), std::move(store));
}

}  // namespace chronoq
