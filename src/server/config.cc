#include "server/config.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <CLI/CLI.hpp>

#include <toml++/toml.h>

namespace chronoq::server {
namespace {

constexpr std::string_view kConfigEnv = "CHRONOQ_CONFIG";

// --listen's check, as a setting's.
Status CheckListen(std::string_view name, const std::string& value) {
  std::string host;
  uint16_t port = 0;
  return ParseListen(name, value, host, port);
}

// The table. A row's key is its flag's name, except that the TLS and the
// cluster flags sit in [tls] and [cluster] without their prefix (and
// --cluster itself is [cluster] enabled). Top-level keys come first: the
// printed configuration must say them before any [table]. A new row also
// needs its field in DaemonConfig, its line in packaging/chronoqd.toml and
// its row in docs/OPERATIONS.md: config_test fails until all four agree.
const std::vector<Setting>& Table() {
  using C = DaemonConfig;
  static const std::vector<Setting> table = {
      {.key = "listen",
       .flag = "--listen",
       .env = "CHRONOQ_LISTEN",
       .field = &C::listen,
       .help = "address to listen on, host:port, [v6]:port or :port (port 0: any free port); "
               "other than loopback only with a token or insecure-no-auth",
       .check = CheckListen},
      {.key = "insecure-no-auth",
       .flag = "--insecure-no-auth",
       .env = "CHRONOQ_INSECURE_NO_AUTH",
       .field = &C::insecure_no_auth,
       .help = "serve a non-loopback listen address without a token (anyone who reaches it can "
               "do anything)"},
      {.key = "data",
       .flag = "--data",
       .env = "CHRONOQ_DATA",
       .field = &C::data,
       .help = "data directory: the SQLite store is DATA/chronoq.db"},
      {.key = "store",
       .flag = "--store",
       .env = "CHRONOQ_STORE",
       .field = &C::store,
       .help = "store URL, overriding data and durability: postgresql://USER@HOST/DB"
               "[?schema=NAME&...] or sqlite:PATH[?durability=full]",
       .redact = RedactStoreUrl},
      {.key = "durability",
       .flag = "--durability",
       .env = "CHRONOQ_DURABILITY",
       .field = &C::durability,
       .help = "normal (survives a crash of the process) or full (fsync: survives power loss)",
       .choices = "normal|full"},
      {.key = "token-file",
       .flag = "--token-file",
       .env = "CHRONOQ_TOKEN_FILE",
       .field = &C::token_file,
       .help = "file of the bearer tokens (one secret, or lines of NAME SCOPE SECRET with scope "
               "read, write or admin) every request but /healthz needs; read again on SIGHUP "
               "(without one: CHRONOQ_TOKEN, one admin secret)"},
      {.key = "log-format",
       .flag = "--log-format",
       .env = "CHRONOQ_LOG_FORMAT",
       .field = &C::log_format,
       .help = "text or json",
       .choices = "text|json"},
      {.key = "threads",
       .flag = "--threads",
       .env = "CHRONOQ_THREADS",
       .field = &C::threads,
       .help = "I/O threads",
       .min = 1,
       .max = 64},
      {.key = "webhook-concurrency",
       .flag = "--webhook-concurrency",
       .env = "CHRONOQ_WEBHOOK_CONCURRENCY",
       .field = &C::webhook_concurrency,
       .help = "webhook deliveries in flight per queue",
       .min = 1,
       .max = 1024},
      {.key = "webhook-claim-batch",
       .flag = "--webhook-claim-batch",
       .env = "CHRONOQ_WEBHOOK_CLAIM_BATCH",
       .field = &C::webhook_claim_batch,
       .help = "webhook tasks claimed together (a claim loop claims again once all of them "
               "are delivered; fewer engine operations per delivery)",
       .min = 1,
       .max = 64},
      {.key = "webhook-secrets",
       .flag = "--webhook-secrets",
       .env = "CHRONOQ_WEBHOOK_SECRETS",
       .field = &C::webhook_secrets,
       .help = "file of the secrets that sign webhook deliveries (lines of QUEUE-or-* "
               "whsec_BASE64; several lines for a queue: all sign, for rotation); read again "
               "on SIGHUP"},
      {.key = "webhook-max-per-host",
       .flag = "--webhook-max-per-host",
       .env = "CHRONOQ_WEBHOOK_MAX_PER_HOST",
       .field = &C::webhook_max_per_host,
       .help = "webhook requests in flight to one host (scheme, host and port), all queues "
               "together",
       .min = 1,
       .max = 10'000},
      {.key = "webhook-max-idle-per-host",
       .flag = "--webhook-max-idle-per-host",
       .env = "CHRONOQ_WEBHOOK_MAX_IDLE_PER_HOST",
       .field = &C::webhook_max_idle_per_host,
       .help = "idle keep-alive connections kept per webhook host (0: a new connection for "
               "every delivery)",
       .min = 0,
       .max = 10'000},
      {.key = "webhook-idle-timeout-ms",
       .flag = "--webhook-idle-timeout-ms",
       .env = "CHRONOQ_WEBHOOK_IDLE_TIMEOUT_MS",
       .field = &C::webhook_idle_timeout_ms,
       .help = "an idle webhook connection is closed after this",
       .min = 1,
       .max = 3'600'000},
      {.key = "header-timeout-ms",
       .flag = "--header-timeout-ms",
       .env = "CHRONOQ_HEADER_TIMEOUT_MS",
       .field = &C::header_timeout_ms,
       .help = "a client that started a request must send its headers within this",
       .min = 1,
       .max = 3'600'000},
      {.key = "idle-timeout-ms",
       .flag = "--idle-timeout-ms",
       .env = "CHRONOQ_IDLE_TIMEOUT_MS",
       .field = &C::idle_timeout_ms,
       .help = "idle keep-alive connections close after this",
       .min = 1,
       .max = 86'400'000},
      {.key = "stats-interval-ms",
       .flag = "--stats-interval-ms",
       .env = "CHRONOQ_STATS_INTERVAL_MS",
       .field = &C::stats_interval_ms,
       .help = "how often the statistics behind GET /v1/stats/history (the dashboard's charts) "
               "are sampled; an hour of samples is kept",
       .min = 100,
       .max = 600'000},
      {.key = "attempt-history",
       .flag = "--attempt-history",
       .env = "CHRONOQ_ATTEMPT_HISTORY",
       .field = &C::attempt_history,
       .help = "finished attempts kept per task (GET /v1/tasks/{id}?attempts=true); 0 keeps "
               "none",
       .min = 0,
       .max = kMaxAttemptHistory},
      {.key = "claim-ahead-ms",
       .flag = "--claim-ahead-ms",
       .env = "CHRONOQ_CLAIM_AHEAD_MS",
       .field = &C::claim_ahead_ms,
       .help = "a waiting claim takes a task this long before it is due and answers at the "
               "due time, so a slow disk flush delays no task (the task shows as running "
               "meanwhile); 0 takes tasks only once due",
       .min = 0,
       .max = 1000},
      {.key = "test-clock",
       .flag = "--test-clock",
       .env = "CHRONOQ_TEST_CLOCK",
       .field = &C::test_clock,
       .help = "for tests only: time stands still from start-up and moves only when "
               "POST /v1/test/clock says (leases, due times, waits); never in production"},
      {.key = "tls.cert",
       .flag = "--tls-cert",
       .env = "CHRONOQ_TLS_CERT",
       .field = &C::tls_cert,
       .help = "PEM file of the server's certificate (and any intermediates): serve TLS 1.2+ "
               "(https://) instead of plain HTTP; needs the key"},
      {.key = "tls.key",
       .flag = "--tls-key",
       .env = "CHRONOQ_TLS_KEY",
       .field = &C::tls_key,
       .help = "PEM file of the certificate's private key, unencrypted; needs the cert"},
      {.key = "cluster.enabled",
       .flag = "--cluster",
       .env = "CHRONOQ_CLUSTER",
       .field = &C::cluster,
       .help = "run as one node of several on the store's PostgreSQL schema: lead or stand by"},
      {.key = "cluster.node-id",
       .flag = "--node-id",
       .env = "CHRONOQ_NODE_ID",
       .field = &C::node_id,
       .help = "this node's name in the cluster (default there: HOST:PORT), and in the "
               "attempt histories of tasks (default outside a cluster: none)"},
      {.key = "cluster.advertise",
       .flag = "--advertise",
       .env = "CHRONOQ_ADVERTISE",
       .field = &C::advertise,
       .help = "where the other nodes reach this one, http://HOST:PORT (default: the listen "
               "address, the host name if it listens on all interfaces)"},
      {.key = "cluster.token-file",
       .flag = "--cluster-token-file",
       .env = "CHRONOQ_CLUSTER_TOKEN_FILE",
       .field = &C::cluster_token_file,
       .help = "file holding the token nodes send each other (or CHRONOQ_CLUSTER_TOKEN; "
               "default: the API token)"},
      {.key = "cluster.heartbeat-ms",
       .flag = "--heartbeat-ms",
       .env = "CHRONOQ_HEARTBEAT_MS",
       .field = &C::heartbeat_ms,
       .help = "how often each node writes its heartbeat",
       .min = 10,
       .max = 60'000},
      {.key = "cluster.lease-ms",
       .flag = "--lease-ms",
       .env = "CHRONOQ_LEASE_MS",
       .field = &C::lease_ms,
       .help = "a leader whose heartbeat stopped this long is replaced (at least twice "
               "heartbeat-ms)",
       .min = 20,
       .max = 600'000},
  };
  return table;
}

constexpr std::array<std::string_view, 4> kMetaFlags = {"--config", "--print-config",
                                                        "--check-config", "--help"};

// A value of one of the three types, before it is stored.
using Value = std::variant<std::string, int, bool>;

// "tls" for "tls.cert"; "" for a top-level key.
std::string_view TableOf(std::string_view key) {
  const size_t dot = key.find('.');
  return dot == std::string_view::npos ? std::string_view() : key.substr(0, dot);
}
std::string_view LeafOf(std::string_view key) {
  const size_t dot = key.find('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

// "an integer", "a string", "true or false": what a setting holds.
std::string_view TypeWords(const Setting& s) {
  switch (s.field.index()) {
    case 0:
      return "a string";
    case 1:
      return "an integer";
    default:
      return "true or false";
  }
}

Status OutOfRange(const Setting& s, std::string_view name, int64_t n) {
  return Status::InvalidArgument(name, "must be " + std::to_string(s.min) + "-" +
                                           std::to_string(s.max) + ", not " + std::to_string(n));
}

// An integer as a setting's value; beyond int's range is beyond every
// setting's range too.
Result<Value> IntValue(const Setting& s, std::string_view name, int64_t n) {
  if (n < INT32_MIN || n > INT32_MAX) return OutOfRange(s, name, n);
  return Value(static_cast<int>(n));
}

// The checks every source's value goes through: the range of an integer,
// the choices and the check of a string.
Status Validate(const Setting& s, std::string_view name, const Value& value) {
  if (const int* n = std::get_if<int>(&value)) {
    if (*n < s.min || *n > s.max) return OutOfRange(s, name, *n);
  } else if (const std::string* text = std::get_if<std::string>(&value)) {
    if (!s.choices.empty()) {
      std::string_view rest = s.choices;
      bool found = false;
      while (!found) {
        const size_t bar = rest.find('|');
        found = rest.substr(0, bar) == *text;
        if (bar == std::string_view::npos) break;
        rest.remove_prefix(bar + 1);
      }
      if (!found) {
        std::string allowed(s.choices);
        std::replace(allowed.begin(), allowed.end(), '|', ' ');
        return Status::InvalidArgument(name, "must be one of " + allowed + ", not '" + *text + "'");
      }
    }
    if (s.check != nullptr) return s.check(name, *text);
  }
  return {};
}

// A flag's or a variable's text as the setting's type.
Result<Value> FromText(const Setting& s, std::string_view name, const std::string& text) {
  switch (s.field.index()) {
    case 0:
      return Value(text);
    case 1: {
      int64_t n = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (error != std::errc() || end != text.data() + text.size()) {
        return Status::InvalidArgument(name, "must be an integer, not '" + text + "'");
      }
      return IntValue(s, name, n);
    }
    default: {
      std::string lower = text;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      for (std::string_view yes : {"1", "true", "yes", "on"}) {
        if (lower == yes) return Value(true);
      }
      for (std::string_view no : {"0", "false", "no", "off"}) {
        if (lower == no) return Value(false);
      }
      return Status::InvalidArgument(
          name, "must be true or false (1, 0, yes, no, on, off), not '" + text + "'");
    }
  }
}

// A TOML node as the setting's type.
Result<Value> FromToml(const Setting& s, std::string_view name, const toml::node& node) {
  switch (s.field.index()) {
    case 0:
      if (const auto* v = node.as_string()) return Value(v->get());
      break;
    case 1:
      if (const auto* v = node.as_integer()) return IntValue(s, name, v->get());
      break;
    default:
      if (const auto* v = node.as_boolean()) return Value(v->get());
      break;
  }
  std::ostringstream type;
  type << node.type();  // "string", "integer", "array", "table", "date-time", ...
  const bool vowel = std::string_view("aeiou").find(type.str().front()) != std::string_view::npos;
  return Status::InvalidArgument(name, "must be " + std::string(TypeWords(s)) + ", not " +
                                           (vowel ? "an " : "a ") + type.str());
}

// The row of `key` in Table(), or npos.
size_t FindSetting(std::string_view key) {
  const auto& settings = Table();
  for (size_t i = 0; i < settings.size(); ++i) {
    if (settings[i].key == key) return i;
  }
  return std::string::npos;
}

void Store(const Setting& s, Value value, DaemonConfig& config) {
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(config.*member)>;
        config.*member = std::get<T>(std::move(value));
      },
      s.field);
}

Value Load(const Setting& s, const DaemonConfig& config) {
  return std::visit([&](auto member) { return Value(config.*member); }, s.field);
}

// Checks a value of row `index` of Table(), from any source, and takes it
// with its origin; the error names `name`.
Status Take(size_t index, std::string_view name, Result<Value> value, Origin origin,
            ResolvedConfig& config) {
  const Setting& s = Table()[index];
  CHRONOQ_RETURN_IF_ERROR(value.status());
  CHRONOQ_RETURN_IF_ERROR(Validate(s, name, *value));
  Store(s, std::move(*value), config.values);
  config.origins[index] = origin;
  return {};
}

// Levenshtein distance, for "did you mean".
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known key nearest to `key` (a dotted path): a near spelling of the
// whole path, or the same name in another table ("heartbeat-ms" at the top
// for "cluster.heartbeat-ms"). Empty when nothing is near.
std::string Suggest(std::string_view key) {
  std::string best;
  size_t best_distance = 3;  // at most 2 edits
  const auto consider = [&](std::string_view candidate, size_t distance) {
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  };
  for (const Setting& s : Table()) {
    consider(s.key, Distance(key, s.key));
    consider(s.key, Distance(LeafOf(key), LeafOf(s.key)) + (key == LeafOf(key) ? 0 : 1));
    if (!TableOf(s.key).empty()) {
      consider(TableOf(s.key), Distance(key, TableOf(s.key)));
    }
  }
  return best;
}

std::string ErrnoText() { return std::error_code(errno, std::generic_category()).message(); }

std::string Where(const std::string& file, const toml::source_region& at) {
  return file + ":" + std::to_string(at.begin.line) + ":" + std::to_string(at.begin.column);
}

// Reads the config file into `config`, adding an error per problem.
void ReadFile(const std::string& path, ResolvedConfig& config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    config.errors.push_back(path + ": cannot read: " + ErrnoText());
    return;
  }
  // A directory opens, and reads as an empty file: a valid, empty config.
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    config.errors.push_back(
        path + ": cannot read: " + std::make_error_code(std::errc::is_a_directory).message());
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    config.errors.push_back(path + ": cannot read: " + ErrnoText());
    return;
  }
  toml::table root;
  try {
    root = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {
    config.errors.push_back(Where(path, e.source()) +
                            ": TOML syntax error: " + std::string(e.description()));
    return;
  }
  // Walks a table: each key is a setting, a table of settings, or an error.
  // toml++ keeps a table's keys sorted: the errors are put in the file's
  // order after.
  std::vector<std::pair<toml::source_position, std::string>> errors;
  const auto error = [&](const toml::source_region& at, const std::string& message) {
    errors.emplace_back(at.begin, Where(path, at) + ": " + message);
  };
  const auto walk = [&](const auto& self, const toml::table& table,
                        const std::string& prefix) -> void {
    for (const auto& [name, node] : table) {
      const std::string key = prefix + std::string(name.str());
      const auto& settings = Table();
      const bool is_table = std::any_of(settings.begin(), settings.end(),
                                        [&](const Setting& s) { return TableOf(s.key) == key; });
      if (const size_t index = FindSetting(key); index != std::string::npos) {
        const Origin origin{Origin::Source::kFile, static_cast<int>(node.source().begin.line),
                            static_cast<int>(node.source().begin.column)};
        Status taken = Take(index, key, FromToml(settings[index], key, node), origin, config);
        if (!taken.ok()) error(node.source(), taken.message());
      } else if (is_table) {
        if (const toml::table* inner = node.as_table()) {
          self(self, *inner, key + ".");
        } else {
          error(node.source(), key + ": must be a table ([" + key + "]) of settings");
        }
      } else {
        const std::string near = Suggest(key);
        error(name.source(),
              key + ": unknown key" + (near.empty() ? "" : " (did you mean " + near + "?)"));
      }
    }
  };
  walk(walk, root, "");
  std::stable_sort(errors.begin(), errors.end(), [](const auto& a, const auto& b) {
    return std::pair(a.first.line, a.first.column) < std::pair(b.first.line, b.first.column);
  });
  for (auto& e : errors) config.errors.push_back(std::move(e.second));
}

// A value as TOML.
std::string ValueText(const Value& value) {
  if (const int* n = std::get_if<int>(&value)) return std::to_string(*n);
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  // A basic string, as most TOML is written (toml++ would print 'literal' ones).
  std::string out = "\"";
  for (const char c : std::get<std::string>(value)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      std::array<char, 8> escaped{};
      std::snprintf(escaped.data(), escaped.size(), "\\u%04X", static_cast<unsigned char>(c));
      out += escaped.data();
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string OriginText(const Setting& s, const Origin& origin) {
  switch (origin.source) {
    case Origin::Source::kDefault:
      return "default";
    case Origin::Source::kFile:
      return "file:" + std::to_string(origin.line);
    case Origin::Source::kEnv:
      return "env " + std::string(s.env);
    case Origin::Source::kFlag:
      return "flag " + std::string(s.flag);
  }
  return "";
}

}  // namespace

std::span<const Setting> Settings() { return Table(); }

std::span<const std::string_view> MetaFlags() { return kMetaFlags; }

Environment ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up, before any thread
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

ResolvedConfig ResolveConfig(const FlagValues& flags, const Environment& env,
                             std::string config_file) {
  ResolvedConfig config;
  const auto& settings = Table();
  config.origins.resize(settings.size());
  const auto nonempty = [&env](const std::string& name) -> std::optional<std::string> {
    std::optional<std::string> value = env(name);
    if (value.has_value() && value->empty()) return std::nullopt;
    return value;
  };
  if (config_file.empty()) config_file = nonempty(std::string(kConfigEnv)).value_or("");
  if (!config_file.empty()) {
    config.file = config_file;
    ReadFile(config_file, config);
  }
  // Then the environment, then the flags: each replaces what came before.
  const auto apply = [&](size_t index, std::string_view name, const std::string& text,
                         Origin::Source source) {
    Status taken = Take(index, name, FromText(settings[index], name, text), {source}, config);
    if (!taken.ok()) config.errors.push_back(taken.message());
  };
  for (size_t i = 0; i < settings.size(); ++i) {
    if (std::optional<std::string> value = nonempty(std::string(settings[i].env))) {
      apply(i, settings[i].env, *value, Origin::Source::kEnv);
    }
  }
  for (const auto& [key, text] : flags) {
    const size_t index = FindSetting(key);
    if (index == std::string::npos) {
      config.errors.push_back(std::string(key) + ": not a setting");  // a caller's bug
      continue;
    }
    apply(index, settings[index].flag, text, Origin::Source::kFlag);
  }
  return config;
}

std::string PrintConfig(const ResolvedConfig& config, const Environment& env) {
  std::string out =
      "# chronoqd's configuration in effect (chronoqd --print-config); after each value, where\n"
      "# it came from: flag > environment (env) > config file (file:LINE) > default.\n";
  out += config.file.empty() ? "# No config file (--config or CHRONOQ_CONFIG).\n"
                             : "# Config file: " + config.file + "\n";
  for (const auto& [name, what] :
       {std::pair{"CHRONOQ_TOKEN", "one admin token, used when no token-file is set"},
        std::pair{"CHRONOQ_CLUSTER_TOKEN",
                  "the cluster's token, used when no cluster.token-file is set"}}) {
    if (std::optional<std::string> value = env(name); value.has_value() && !value->empty()) {
      out += "# " + std::string(name) + " is set (not shown): " + what + ".\n";
    }
  }
  const auto& settings = Table();
  std::string_view table;
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    if (TableOf(s.key) != table) {
      table = TableOf(s.key);
      out += "\n[" + std::string(table) + "]\n";
    }
    const Value value = Load(s, config.values);
    std::string text = ValueText(value);
    bool masked = false;
    if (s.redact != nullptr) {
      std::string shown = s.redact(std::get<std::string>(value));
      masked = shown != std::get<std::string>(value);
      text = ValueText(Value(std::move(shown)));
    }
    out += std::string(LeafOf(s.key)) + " = " + text +
           "  # from: " + OriginText(s, config.origins[i]) + (masked ? " (secret masked)" : "") +
           "\n";
  }
  return out;
}

Status ParseListen(std::string_view name, const std::string& text, std::string& host,
                   uint16_t& port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument(name,
                                   "must be host:port, e.g. 127.0.0.1:7070, not '" + text + "'");
  }
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string digits = text.substr(colon + 1);
  int value = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size() || value < 0 || value > 65535) {
    return Status::InvalidArgument(name, "port must be 0-65535, not '" + digits + "'");
  }
  host = h.empty() ? "0.0.0.0" : h;
  port = static_cast<uint16_t>(value);
  return {};
}

std::string RedactStoreUrl(std::string url) {
  const size_t scheme = url.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t at = url.find('@', start);
    const size_t slash = url.find('/', start);
    const size_t colon = url.find(':', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash) &&
        colon != std::string::npos && colon < at) {
      url.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t p = url.find("password="); p != std::string::npos; p = url.find("password=", p)) {
    p += 9;
    const size_t end = url.find_first_of("& ", p);
    url.replace(p, (end == std::string::npos ? url.size() : end) - p, "***");
  }
  return url;
}

CommandLine::CommandLine(CLI::App& app) : captured_(Table().size()) {
  app.footer(
      "Every setting has a flag, an environment variable and a key of the --config file (TOML), "
      "as each option says; a flag wins over its variable, which wins over the file, which wins "
      "over the default. --print-config shows the result and where each value came from "
      "(docs/OPERATIONS.md, \"Configuration\").");
  app.add_option("--config", config_file_,
                 "TOML file of settings (keys as each option says; env CHRONOQ_CONFIG)");
  app.add_flag("--print-config", print_config_,
               "print the configuration in effect as TOML, with where each value came from, "
               "and exit");
  app.add_flag("--check-config", check_config_,
               "check the configuration as start-up does, without listening or opening the "
               "store; print ok and exit 0, or the errors and exit 2");
  const auto& settings = Table();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    std::string help(s.help);
    const Value fallback = Load(s, DaemonConfig{});
    help += " [env " + std::string(s.env) + ", key " + std::string(s.key) + "]";
    const std::string flag(s.flag);
    if (s.field.index() == 2) {
      captured_[i].option = app.add_flag(flag, captured_[i].flag, help);
      continue;
    }
    CLI::Option* option = app.add_option(flag, captured_[i].text, help);
    if (!s.choices.empty()) option->type_name(std::string(s.choices));
    if (s.field.index() == 1) {
      option->type_name("INT")->default_str(std::to_string(std::get<int>(fallback)));
    } else if (!std::get<std::string>(fallback).empty()) {
      option->default_str(std::get<std::string>(fallback));
    }
    captured_[i].option = option;
  }
}

ResolvedConfig CommandLine::Resolve(const Environment& env) const {
  FlagValues flags;
  const auto& settings = Table();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Captured& c = captured_[i];
    if (c.option->count() == 0) continue;
    flags.emplace_back(settings[i].key,
                       settings[i].field.index() == 2 ? (c.flag ? "true" : "false") : c.text);
  }
  return ResolveConfig(flags, env, config_file_);
}

}  // namespace chronoq::server
