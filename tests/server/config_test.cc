// chronoqd's settings (server/config.h): the table against the command line
// and packaging/chronoqd.toml, precedence flag > environment > file >
// default for each type, the errors of each source, and --print-config's
// TOML read back.
#include "server/config.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace chronoq::server {

// A failed comparison shows the two configurations as --print-config would.
void PrintTo(const DaemonConfig& config, std::ostream* out) {
  ResolvedConfig resolved{.values = config};
  resolved.origins.resize(Settings().size());
  *out << "\n" << PrintConfig(resolved, [](const std::string&) { return std::nullopt; });
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Source = Origin::Source;

// An environment of the test's own, never the process's.
Environment Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t IndexOf(std::string_view key) {
  for (size_t i = 0; i < Settings().size(); ++i) {
    if (Settings()[i].key == key) return i;
  }
  ADD_FAILURE() << "no setting " << key;
  return 0;
}

class ConfigTest : public ::testing::Test {
 protected:
  // Writes `text` as the config file and returns its path.
  std::string File(const std::string& text, const std::string& name = "chronoqd.toml") {
    const std::string path = dir_.File(name);
    std::ofstream(path) << text;
    return path;
  }
  Origin OriginOf(const ResolvedConfig& c, std::string_view key) { return c.origins[IndexOf(key)]; }

  test::TempDir dir_;
};

// Every option of chronoqd's command line is a setting of the table or one
// of the few meta flags, and every setting has its flag: nothing can be
// added to one and not the other. (config_e2e_test checks the real binary's
// --help the same way, so main.cc cannot add a flag of its own either.)
TEST_F(ConfigTest, EveryCommandLineOptionIsASettingAndEverySettingAnOption) {
  CLI::App app;
  CommandLine command_line(app);
  std::set<std::string> options;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) options.insert("--" + name);
  }
  std::set<std::string> expected;
  for (const Setting& s : Settings()) expected.emplace(s.flag);
  for (std::string_view meta : MetaFlags()) expected.emplace(meta);
  EXPECT_EQ(options, expected);
}

TEST_F(ConfigTest, NamesAreUniqueAndTablesComeAfterTheTopLevelKeys) {
  std::set<std::string_view> keys, flags, envs;
  std::string_view table;
  std::set<std::string_view> tables_done;
  for (const Setting& s : Settings()) {
    SCOPED_TRACE(s.key);
    EXPECT_TRUE(keys.insert(s.key).second);
    EXPECT_TRUE(flags.insert(s.flag).second);
    EXPECT_TRUE(envs.insert(s.env).second);
    EXPECT_TRUE(s.env.starts_with("CHRONOQ_"));
    EXPECT_TRUE(s.flag.starts_with("--"));
    EXPECT_FALSE(s.help.empty());
    EXPECT_EQ(s.key.find_first_not_of("abcdefghijklmnopqrstuvwxyz-."), std::string_view::npos);
    // Each table's keys together, the top level's first: --print-config
    // says them in this order.
    const size_t dot = s.key.find('.');
    const std::string_view this_table = dot == std::string_view::npos ? "" : s.key.substr(0, dot);
    if (this_table != table) {
      tables_done.insert(table);
      EXPECT_FALSE(tables_done.contains(this_table)) << "table " << this_table << " split";
      table = this_table;
    }
    if (s.field.index() == 1) {
      EXPECT_LT(s.min, s.max);
      const int fallback = DaemonConfig{}.*std::get<int DaemonConfig::*>(s.field);
      EXPECT_TRUE(fallback >= s.min && fallback <= s.max) << "the default is out of range";
    }
  }
}

// One key of each type, through the four layers.
TEST_F(ConfigTest, AFlagBeatsTheEnvironmentWhichBeatsTheFileWhichBeatsTheDefault) {
  struct Case {
    std::string key, env, file_line, file_text, env_text, flag_text;
    std::function<std::string(const DaemonConfig&)> get;
    std::string fallback, from_file, from_env, from_flag;
  };
  const std::vector<Case> cases = {
      {"data", "CHRONOQ_DATA", "data = \"/srv/file\"", "", "/srv/env", "/srv/flag",
       [](const DaemonConfig& c) { return c.data; }, "./data", "/srv/file", "/srv/env",
       "/srv/flag"},
      {"threads", "CHRONOQ_THREADS", "threads = 3", "", "4", "5",
       [](const DaemonConfig& c) { return std::to_string(c.threads); }, "2", "3", "4", "5"},
      {"cluster.enabled", "CHRONOQ_CLUSTER", "[cluster]\nenabled = true", "", "0", "true",
       [](const DaemonConfig& c) { return c.cluster ? "on" : "off"; }, "off", "on", "off", "on"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    const std::string file = File("# settings\n" + c.file_line + "\n");
    const FlagValues flag = {{c.key, c.flag_text}};
    const Environment env = Env({{c.env, c.env_text}});

    ResolvedConfig none = ResolveConfig({}, Env({}), "");
    ASSERT_THAT(none.errors, IsEmpty());
    EXPECT_EQ(c.get(none.values), c.fallback);
    EXPECT_EQ(OriginOf(none, c.key).source, Source::kDefault);

    ResolvedConfig from_file = ResolveConfig({}, Env({}), file);
    ASSERT_THAT(from_file.errors, IsEmpty());
    EXPECT_EQ(c.get(from_file.values), c.from_file);
    EXPECT_EQ(OriginOf(from_file, c.key).source, Source::kFile);
    EXPECT_EQ(OriginOf(from_file, c.key).line, c.key == "cluster.enabled" ? 3 : 2);

    ResolvedConfig from_env = ResolveConfig({}, env, file);
    ASSERT_THAT(from_env.errors, IsEmpty());
    EXPECT_EQ(c.get(from_env.values), c.from_env);
    EXPECT_EQ(OriginOf(from_env, c.key).source, Source::kEnv);

    ResolvedConfig from_flag = ResolveConfig(flag, env, file);
    ASSERT_THAT(from_flag.errors, IsEmpty());
    EXPECT_EQ(c.get(from_flag.values), c.from_flag);
    EXPECT_EQ(OriginOf(from_flag, c.key).source, Source::kFlag);
  }
}

TEST_F(ConfigTest, AnEmptyVariableIsUnset) {
  const std::string file = File("threads = 3\n");
  ResolvedConfig c = ResolveConfig({}, Env({{"CHRONOQ_THREADS", ""}}), file);
  ASSERT_THAT(c.errors, IsEmpty());
  EXPECT_EQ(c.values.threads, 3);
}

TEST_F(ConfigTest, TheFileIsNamedByTheFlagOrElseByChronoqConfig) {
  const std::string by_env = File("threads = 3\n", "env.toml");
  const std::string by_flag = File("threads = 4\n", "flag.toml");
  ResolvedConfig c = ResolveConfig({}, Env({{"CHRONOQ_CONFIG", by_env}}), "");
  ASSERT_THAT(c.errors, IsEmpty());
  EXPECT_EQ(c.values.threads, 3);
  EXPECT_EQ(c.file, by_env);
  c = ResolveConfig({}, Env({{"CHRONOQ_CONFIG", by_env}}), by_flag);
  ASSERT_THAT(c.errors, IsEmpty());
  EXPECT_EQ(c.values.threads, 4);
  EXPECT_EQ(c.file, by_flag);
}

TEST_F(ConfigTest, TablesMayBeWrittenAsDottedKeys) {
  ResolvedConfig c =
      ResolveConfig({}, Env({}), File("tls.cert = \"/c.pem\"\ncluster.lease-ms = 4000\n"));
  ASSERT_THAT(c.errors, IsEmpty());
  EXPECT_EQ(c.values.tls_cert, "/c.pem");
  EXPECT_EQ(c.values.lease_ms, 4000);
}

// Each error names where (file, line and column), the key and the reason;
// all of them are reported, in the file's order.
TEST_F(ConfigTest, TheFilesErrorsNameTheLineTheKeyAndTheReason) {
  const std::string file = File(
      "listne = \"127.0.0.1:1\"\n"     // 1: unknown, near listen
      "threads = \"4\"\n"              // 2: wrong type
      "log-format = \"xml\"\n"         // 3: not a choice
      "listen = \"localhost\"\n"       // 4: the flag's own check
      "heartbeat-ms = 100\n"           // 5: in another table
      "webhook-concurrency = 99999\n"  // 6: out of range
      "tls = \"yes\"\n"                // 7: a table of settings, not a value
      "[cluster]\n"
      "enabled = \"true\"\n"     // 9: wrong type
      "lease-ms = 5000000000\n"  // 10: beyond an int
      "[tsl]\n"                  // 11: unknown table, near tls
      "zzz = 1\n");
  ResolvedConfig c = ResolveConfig({}, Env({}), file);
  EXPECT_THAT(
      c.errors,
      ElementsAre(file + ":1:1: listne: unknown key (did you mean listen?)",
                  file + ":2:11: threads: must be an integer, not a string",
                  file + ":3:14: log-format: must be one of text json, not 'xml'",
                  file + ":4:10: listen: must be host:port, e.g. 127.0.0.1:7070, not 'localhost'",
                  file + ":5:1: heartbeat-ms: unknown key (did you mean cluster.heartbeat-ms?)",
                  file + ":6:23: webhook-concurrency: must be 1-1024, not 99999",
                  file + ":7:7: tls: must be a table ([tls]) of settings",
                  file + ":9:11: cluster.enabled: must be true or false, not a string",
                  file + ":10:12: cluster.lease-ms: must be 20-600000, not 5000000000",
                  file + ":11:2: tsl: unknown key (did you mean tls?)"));
}

TEST_F(ConfigTest, AWrongTypeSaysWhatWasWritten) {
  const std::string file = File(
      "durability = [\"full\"]\nthreads = 2.5\ninsecure-no-auth = 1\n[cluster]\nnode-id = {}\n");
  ResolvedConfig c = ResolveConfig({}, Env({}), file);
  EXPECT_THAT(c.errors,
              ElementsAre(file + ":1:14: durability: must be a string, not an array",
                          file + ":2:11: threads: must be an integer, not a floating-point",
                          file + ":3:20: insecure-no-auth: must be true or false, not an integer",
                          file + ":5:11: cluster.node-id: must be a string, not a table"));
}

TEST_F(ConfigTest, ASyntaxErrorNamesItsLineAndColumn) {
  const std::string file = File("threads = 3\nlisten = \"127.0.0.1:1\n");
  ResolvedConfig c = ResolveConfig({}, Env({}), file);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_THAT(c.errors[0], HasSubstr(file + ":2:"));
  EXPECT_THAT(c.errors[0], HasSubstr("TOML syntax error: "));
  EXPECT_EQ(c.values, DaemonConfig{});  // nothing of a broken file is taken
}

TEST_F(ConfigTest, AMissingFileIsAnError) {
  const std::string missing = dir_.File("missing.toml");
  ResolvedConfig c = ResolveConfig({}, Env({}), missing);
  EXPECT_THAT(c.errors, ElementsAre(missing + ": cannot read: No such file or directory"));
  // A directory opens, but is no config file.
  c = ResolveConfig({}, Env({}), dir_.File(""));
  EXPECT_THAT(c.errors, ElementsAre(dir_.File("") + ": cannot read: Is a directory"));
}

TEST_F(ConfigTest, FlagsAndVariablesGetTheSameChecksAsTheFile) {
  ResolvedConfig c =
      ResolveConfig({{"threads", "0"},
                     {"listen", "nowhere"},
                     {"cluster.enabled", "maybe"},
                     {"webhook-concurrency", "99999999999"}},
                    Env({{"CHRONOQ_DURABILITY", "sometimes"}, {"CHRONOQ_HEARTBEAT_MS", "5x"}}), "");
  EXPECT_THAT(c.errors,
              ElementsAre("CHRONOQ_DURABILITY: must be one of normal full, not 'sometimes'",
                          "CHRONOQ_HEARTBEAT_MS: must be an integer, not '5x'",
                          "--threads: must be 1-64, not 0",
                          "--listen: must be host:port, e.g. 127.0.0.1:7070, not 'nowhere'",
                          "--cluster: must be true or false (1, 0, yes, no, on, off), not "
                          "'maybe'",
                          "--webhook-concurrency: must be 1-1024, not 99999999999"));
}

TEST_F(ConfigTest, TheCommandLineOverridesAFilesTrueWithFalse) {
  CLI::App app;
  CommandLine command_line(app);
  const std::string file = File("insecure-no-auth = true\n[cluster]\nenabled = true\n");
  std::vector<std::string> args = {"--cluster=false", "--config", file,
                                   "--threads",       "7",        "--print-config"};
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  EXPECT_TRUE(command_line.print_config());
  EXPECT_FALSE(command_line.check_config());
  ResolvedConfig c = command_line.Resolve(Env({}));
  ASSERT_THAT(c.errors, IsEmpty());
  EXPECT_FALSE(c.values.cluster);
  EXPECT_EQ(OriginOf(c, "cluster.enabled").source, Source::kFlag);
  EXPECT_TRUE(c.values.insecure_no_auth);
  EXPECT_EQ(OriginOf(c, "insecure-no-auth").source, Source::kFile);
  EXPECT_EQ(c.values.threads, 7);
}

TEST_F(ConfigTest, PrintedConfigReadsBackAsTheSameConfig) {
  const std::string file = File("threads = 3\n[tls]\ncert = \"/etc/a \\\"b\\\".pem\"\n");
  ResolvedConfig c = ResolveConfig({{"listen", ":0"}}, Env({{"CHRONOQ_DATA", "/srv/q"}}), file);
  ASSERT_THAT(c.errors, IsEmpty());
  const std::string printed = PrintConfig(c, Env({}));
  EXPECT_THAT(printed, HasSubstr("# Config file: " + file + "\n"));
  EXPECT_THAT(printed, HasSubstr("\nlisten = \":0\"  # from: flag --listen\n"));
  EXPECT_THAT(printed, HasSubstr("\ndata = \"/srv/q\"  # from: env CHRONOQ_DATA\n"));
  EXPECT_THAT(printed, HasSubstr("\nthreads = 3  # from: file:1\n"));
  EXPECT_THAT(printed, HasSubstr("\n[tls]\ncert = \"/etc/a \\\"b\\\".pem\"  # from: file:3\n"));
  EXPECT_THAT(printed, HasSubstr("\nlease-ms = 3000  # from: default\n"));

  ResolvedConfig again = ResolveConfig({}, Env({}), File(printed, "printed.toml"));
  ASSERT_THAT(again.errors, IsEmpty());
  EXPECT_EQ(again.values, c.values);
}

TEST_F(ConfigTest, PrintingMasksSecrets) {
  ResolvedConfig c = ResolveConfig(
      {{"store", "postgresql://chronoq:hunter2@db/jobs?password=hunter3"}}, Env({}), "");
  ASSERT_THAT(c.errors, IsEmpty());
  const std::string printed =
      PrintConfig(c, Env({{"CHRONOQ_TOKEN", "hunter4"}, {"CHRONOQ_CLUSTER_TOKEN", "hunter5"}}));
  EXPECT_THAT(printed, HasSubstr("store = \"postgresql://chronoq:***@db/jobs?password=***\"  # "
                                 "from: flag --store (secret masked)\n"));
  EXPECT_THAT(printed, HasSubstr("# CHRONOQ_TOKEN is set (not shown)"));
  EXPECT_THAT(printed, HasSubstr("# CHRONOQ_CLUSTER_TOKEN is set (not shown)"));
  EXPECT_THAT(printed, ::testing::Not(HasSubstr("hunter")));
  EXPECT_EQ(RedactStoreUrl("host=db password=hunter2 dbname=jobs"),
            "host=db password=*** dbname=jobs");
}

// packaging/chronoqd.toml, the Debian package's /etc/chronoq/chronoqd.toml,
// lists every key once: set, or commented out with its default. With every
// "# key = value" line uncommented it is the defaults but for what the
// package sets.
TEST_F(ConfigTest, ThePackagesConfigListsEveryKeyWithItsDefault) {
  const std::string path = std::string(CHRONOQ_SOURCE_DIR) + "/packaging/chronoqd.toml";
  const std::string text = ReadAll(path);
  ASSERT_FALSE(text.empty()) << path;

  ResolvedConfig as_shipped = ResolveConfig({}, Env({}), path);
  ASSERT_THAT(as_shipped.errors, IsEmpty());
  EXPECT_EQ(as_shipped.values.data, "/var/lib/chronoq");
  EXPECT_EQ(as_shipped.values.listen, "127.0.0.1:7070");

  // Each key, set or commented out, in its table.
  const std::regex table_line(R"(^\[([a-z-]+)\]$)");
  const std::regex key_line(R"(^(# )?([a-z][a-z-]*) = .*$)");
  std::multiset<std::string> listed;
  std::string uncommented;
  std::string table;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, table_line)) {
      table = m[1].str() + ".";
    } else if (std::regex_match(line, m, key_line)) {
      listed.insert(table + m[2].str());
      if (m[1].matched) line = line.substr(2);
    }
    uncommented += line + "\n";
  }
  std::multiset<std::string> keys;
  for (const Setting& s : Settings()) keys.emplace(s.key);
  EXPECT_EQ(listed, keys);

  ResolvedConfig defaults = ResolveConfig({}, Env({}), File(uncommented, "uncommented.toml"));
  ASSERT_THAT(defaults.errors, IsEmpty());
  DaemonConfig expected;
  expected.data = "/var/lib/chronoq";
  EXPECT_EQ(defaults.values, expected);
}

// docs/OPERATIONS.md ("Configuration") has a row per setting naming its
// key, flag and variable, and for an integer its range and default, as the
// table does.
TEST_F(ConfigTest, TheOperationsGuideListsEverySetting) {
  const std::string guide = ReadAll(std::string(CHRONOQ_SOURCE_DIR) + "/docs/OPERATIONS.md");
  ASSERT_FALSE(guide.empty());
  for (const Setting& s : Settings()) {
    std::string key(s.key);
    if (const size_t dot = key.find('.'); dot != std::string::npos) {
      key = "[" + key.substr(0, dot) + "] " + key.substr(dot + 1);
    }
    std::string row =
        "\n| `" + key + "` | `" + std::string(s.flag) + "` | `" + std::string(s.env) + "` | ";
    if (s.field.index() == 1) {
      const int fallback = DaemonConfig{}.*std::get<int DaemonConfig::*>(s.field);
      row += "integer, " + std::to_string(s.min) + "-" + std::to_string(s.max) + " | `" +
             std::to_string(fallback) + "` |";
    }
    EXPECT_THAT(guide, HasSubstr(row));
  }
}

}  // namespace
}  // namespace chronoq::server
