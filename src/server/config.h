// chronoqd's settings: each one has a command-line flag, an environment
// variable and a key of the TOML config file, all three named in one row of
// Settings(), so that they cannot drift apart. Where two sources give a
// setting, the first of these wins: flag > environment > file > default.
//
//   CLI::App app{"chronoqd: ..."};
//   server::CommandLine command_line(app);  // every flag, plus --config,
//   CLI11_PARSE(app, argc, argv);           // --print-config, --check-config
//   server::ResolvedConfig config = command_line.Resolve(server::ProcessEnvironment());
//   if (!config.errors.empty()) ...         // each names its source, key and reason
//   std::cout << server::PrintConfig(config);
//
// Adding a setting: a field of DaemonConfig (its initializer is the default)
// and a row of the table in config.cc, never an add_option in main.cc; then
// its commented default in packaging/chronoqd.toml and its row in
// docs/OPERATIONS.md ("Configuration"), which config_test holds to the table.
//
// The free functions are pure functions of their inputs, but for
// ProcessEnvironment() and the reading of the config file: thread-safe.
// CommandLine is not thread-safe (CLI11 parses into it).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "chronoq/limits.h"
#include "chronoq/result.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace chronoq::server {

// What chronoqd is told to do, once resolved. The initializers are the
// defaults.
struct DaemonConfig {
  std::string listen = "127.0.0.1:7070";
  bool insecure_no_auth = false;
  std::string data = "./data";
  std::string store;
  std::string durability = "normal";
  std::string token_file;
  std::string log_format = "text";
  int threads = 2;
  int webhook_concurrency = 16;
  int webhook_claim_batch = 1;
  std::string webhook_secrets;  // the file
  int webhook_max_per_host = 64;
  int webhook_max_idle_per_host = 64;
  int webhook_idle_timeout_ms = 4'000;
  int header_timeout_ms = 10'000;
  int idle_timeout_ms = 120'000;
  int stats_interval_ms = 10'000;
  int attempt_history = kDefaultAttemptHistory;
  int claim_ahead_ms = 10;
  bool test_clock = false;
  std::string tls_cert;
  std::string tls_key;
  bool cluster = false;
  std::string node_id;
  std::string advertise;
  std::string cluster_token_file;
  int heartbeat_ms = 500;
  int lease_ms = 3000;

  friend bool operator==(const DaemonConfig&, const DaemonConfig&) = default;
};

// One setting: its names in the three sources, where it goes, and what it
// may hold. Flags, variables and file values all pass the same checks.
struct Setting {
  using Field =
      std::variant<std::string DaemonConfig::*, int DaemonConfig::*, bool DaemonConfig::*>;
  std::string_view key;   // in the file: "listen", or "tls.cert" ([tls] cert = ...)
  std::string_view flag;  // "--listen"
  std::string_view env;   // "CHRONOQ_LISTEN"
  Field field;
  std::string_view help;  // one line, for --help and packaging/chronoqd.toml
  // Integers: the inclusive range.
  int min = 0;
  int max = 0;
  // Strings: the values allowed, "text|json"; empty: any.
  std::string_view choices;
  // Strings: a check of the value, its error naming `name`; null: none.
  Status (*check)(std::string_view name, const std::string& value) = nullptr;
  // How the value may be shown (--print-config): with any secret masked;
  // null: as it is.
  std::string (*redact)(std::string value) = nullptr;
};

// Every setting, top-level keys first, then [tls], then [cluster].
std::span<const Setting> Settings();

// The flags that are not settings: --config, --print-config, --check-config
// (and CLI11's --help).
std::span<const std::string_view> MetaFlags();

// Where a setting's value came from.
struct Origin {
  enum class Source { kDefault, kFile, kEnv, kFlag };
  Source source = Source::kDefault;
  int line = 0;  // kFile: where the key is (1-based)
  int column = 0;
};

// The configuration in effect, or every reason it is not valid.
struct ResolvedConfig {
  DaemonConfig values;
  std::vector<Origin> origins;  // one per Settings() row, in its order
  std::string file;             // the config file read; empty: none
  // One line per problem: "WHERE: KEY: REASON", WHERE being "FILE:LINE:COL"
  // for a file's key (or just FILE), nothing for a flag or a variable, whose
  // name is the KEY. Empty: the values are valid, one by one (what needs
  // several of them, such as TLS with a cluster, chronoqd checks after).
  std::vector<std::string> errors;
};

// A variable's value, or nullopt when it is unset.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
// The process's environment (getenv).
Environment ProcessEnvironment();

// The flags given on the command line, by Settings() key, as text ("true"
// or "false" for a boolean).
using FlagValues = std::vector<std::pair<std::string_view, std::string>>;

// Resolves every setting: the default, replaced by the config file's value
// (`config_file`; empty: CHRONOQ_CONFIG's, or none), by the environment's,
// then by the flag's. Empty variables count as unset, as the flags'
// environment always did. A missing or unreadable file, a TOML syntax error,
// an unknown key (with the nearest known one), a value of the wrong type
// and a bad value are errors; every error is reported, not only the first.
ResolvedConfig ResolveConfig(const FlagValues& flags, const Environment& env,
                             std::string config_file);

// The configuration as TOML that chronoqd --config would read back: every
// key, each with a comment "# from: default | file:LINE | env NAME | flag
// --NAME", secrets masked. `env` adds notes on CHRONOQ_TOKEN and
// CHRONOQ_CLUSTER_TOKEN, which hold secrets and have no key.
std::string PrintConfig(const ResolvedConfig& config, const Environment& env);

// "host:port", "[v6]:port" or ":port" (host "0.0.0.0"): the host and the port.
// InvalidArgument naming `name` otherwise.
Status ParseListen(std::string_view name, const std::string& text, std::string& host,
                   uint16_t& port);

// A store URL as it may be printed: without a password, whether in the user
// part ("postgresql://user:secret@host") or a parameter ("password=").
std::string RedactStoreUrl(std::string url);

// chronoqd's command line: registers every setting's flag and the meta
// flags on `app` (which must outlive *this). After app.parse(), Resolve()
// gives the configuration.
class CommandLine {
 public:
  explicit CommandLine(CLI::App& app);
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // The settings the command line gave, then ResolveConfig over `env`.
  ResolvedConfig Resolve(const Environment& env) const;
  bool print_config() const { return print_config_; }
  bool check_config() const { return check_config_; }

 private:
  struct Captured {
    CLI::Option* option = nullptr;
    std::string text;   // strings and integers
    bool flag = false;  // booleans
  };
  std::vector<Captured> captured_;  // one per Settings() row; never resized
  std::string config_file_;
  bool print_config_ = false;
  bool check_config_ = false;
};

}  // namespace chronoq::server
