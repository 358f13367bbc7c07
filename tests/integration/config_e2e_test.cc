// The real chronoqd binary with a config file: --print-config for the
// precedence of flag > environment > file > default on one key of each type,
// --check-config on the Debian package's file and on bad ones, the exit code
// and messages of a bad configuration, and --help against the settings table
// (so that main.cc cannot grow a flag without a key); and one start that
// serves from a config file. Each run has a deadline.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "server/config.h"
#include "support/temp_dir.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ConfigE2eTest : public ::testing::Test {
 protected:
  // chronoqd with `args` and `env` ("NAME=value"), every other setting's
  // variable (and CHRONOQ_CONFIG) empty, which chronoqd takes as unset: the
  // environment the test runs in cannot leak in.
  static SpawnOptions Chronoqd(std::vector<std::string> args, std::vector<std::string> env) {
    SpawnOptions o;
    o.argv = {CHRONOQD_PATH};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    std::vector<std::string> names = {"CHRONOQ_CONFIG", "CHRONOQ_TOKEN", "CHRONOQ_CLUSTER_TOKEN"};
    for (const server::Setting& s : server::Settings()) names.emplace_back(s.env);
    o.env = env;
    for (const std::string& name : names) {
      const bool given = std::any_of(
          env.begin(), env.end(), [&](const std::string& e) { return e.starts_with(name + "="); });
      if (!given) o.env.push_back(name + "=");
    }
    return o;
  }

  // Runs chronoqd to its end.
  Subprocess::Completed Run(std::vector<std::string> args, std::vector<std::string> env = {}) {
    Result<Subprocess::Completed> done =
        Subprocess::Run(Chronoqd(std::move(args), std::move(env)), Deadline(60s));
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    return done.ok() ? *done : Subprocess::Completed{};
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.File(name);
    std::ofstream(path) << text;
    return path;
  }

  test::TempDir dir_;
};

// A string (listen), an integer (threads) and a boolean (insecure-no-auth),
// each through the four layers.
TEST_F(ConfigE2eTest, PrintConfigShowsEachValueAndWhereItCameFrom) {
  const std::string file =
      Write("chronoqd.toml",
            "# a comment\nlisten = \"127.0.0.1:7001\"\nthreads = 3\ninsecure-no-auth = true\n");
  struct Layer {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::vector<std::string> lines;
  };
  const std::vector<Layer> layers = {
      {{},
       {},
       {"listen = \"127.0.0.1:7070\"  # from: default", "threads = 2  # from: default",
        "insecure-no-auth = false  # from: default"}},
      {{"--config", file},
       {},
       {"listen = \"127.0.0.1:7001\"  # from: file:2", "threads = 3  # from: file:3",
        "insecure-no-auth = true  # from: file:4"}},
      {{},
       {"CHRONOQ_CONFIG=" + file, "CHRONOQ_LISTEN=127.0.0.1:7002", "CHRONOQ_THREADS=4",
        "CHRONOQ_INSECURE_NO_AUTH=false"},
       {"listen = \"127.0.0.1:7002\"  # from: env CHRONOQ_LISTEN",
        "threads = 4  # from: env CHRONOQ_THREADS",
        "insecure-no-auth = false  # from: env CHRONOQ_INSECURE_NO_AUTH"}},
      {{"--config", file, "--listen", "127.0.0.1:7003", "--threads", "5", "--insecure-no-auth"},
       {"CHRONOQ_LISTEN=127.0.0.1:7002", "CHRONOQ_THREADS=4", "CHRONOQ_INSECURE_NO_AUTH=false"},
       {"listen = \"127.0.0.1:7003\"  # from: flag --listen", "threads = 5  # from: flag --threads",
        "insecure-no-auth = true  # from: flag --insecure-no-auth"}},
  };
  for (const Layer& layer : layers) {
    std::vector<std::string> args = layer.args;
    args.push_back("--print-config");
    const Subprocess::Completed done = Run(args, layer.env);
    SCOPED_TRACE(done.out);
    EXPECT_EQ(done.code, 0) << done.err;
    for (const std::string& line : layer.lines)
      EXPECT_THAT(done.out, HasSubstr("\n" + line + "\n"));
  }
}

// chronoqd serves with what a config file says: its address, data directory
// and token file reach the server, and it stops on SIGTERM as ever.
TEST_F(ConfigE2eTest, ChronoqdStartsFromAConfigFile) {
  const std::string tokens = Write("tokens", "0123456789abcdef0123456789abcdef\n");
  const std::string file =
      Write("serve.toml", "listen = \"127.0.0.1:0\"\ndata = \"" + dir_.File("data") +
                              "\"\ntoken-file = \"" + tokens + "\"\n");
  SpawnOptions o = Chronoqd({"--config", file}, {});
  o.stdin_mode = Stdio::kNull;
  o.stdout_mode = Stdio::kPipe;
  o.stderr_mode = Stdio::kFile;
  o.stderr_file = dir_.File("log");
  Result<Subprocess> p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Result<std::string> line = p->ReadLine(Deadline(60s), "chronoqd's \"listening on\" line");
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_THAT(*line, ::testing::MatchesRegex("chronoqd listening on http://127\\.0\\.0\\.1:[0-9]+ "
                                             "\\(data in .*/data, bearer token required\\)"));
  EXPECT_TRUE(std::filesystem::exists(dir_.File("data") + "/chronoq.db"));
  p->Signal(SIGTERM);
  Result<int> code = p->Wait(Deadline(60s));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
}

// The file the Debian package installs as /etc/chronoq/chronoqd.toml.
TEST_F(ConfigE2eTest, ThePackagesConfigPassesCheckConfig) {
  const Subprocess::Completed done =
      Run({"--config", CHRONOQ_SOURCE_DIR "/packaging/chronoqd.toml", "--check-config"});
  EXPECT_EQ(done.code, 0) << done.err;
  EXPECT_EQ(done.out, "ok\n");
}

// --check-config runs start-up's checks, which look at more than one value,
// without listening or opening the store: the data directory is never made.
TEST_F(ConfigE2eTest, CheckConfigChecksWhatStartUpChecksAndStartsNothing) {
  const std::string data = dir_.File("data");
  Subprocess::Completed done = Run({"--data", data, "--check-config"});
  EXPECT_EQ(done.code, 0) << done.err;
  EXPECT_EQ(done.out, "ok\n");

  const std::string file = Write("exposed.toml", "listen = \"0.0.0.0:7070\"\n");
  done = Run({"--config", file, "--data", data, "--check-config"});
  EXPECT_EQ(done.code, 2);
  EXPECT_THAT(done.err, HasSubstr("chronoqd: invalid_argument: listen: 0.0.0.0 is not a loopback "
                                  "address and no token is set"));
  EXPECT_THAT(done.out, IsEmpty());

  done = Run({"--data", data, "--token-file", dir_.File("no-tokens"), "--check-config"});
  EXPECT_EQ(done.code, 2);
  EXPECT_THAT(done.err, HasSubstr(dir_.File("no-tokens")));

  done =
      Run({"--data", data, "--cluster", "--store", "sqlite:" + data + "/x.db", "--check-config"});
  EXPECT_EQ(done.code, 2);
  EXPECT_THAT(done.err, HasSubstr("cluster: the nodes of a cluster share a PostgreSQL store"));

  done = Run({"--cluster", "--store", "postgresql://chronoq@db.invalid/jobs", "--heartbeat-ms",
              "1000", "--lease-ms", "1500", "--check-config"});
  EXPECT_EQ(done.code, 2);
  EXPECT_THAT(done.err, HasSubstr("lease-ms: must be at least twice the heartbeat"));

  done = Run({"--cluster", "--store", "postgresql://chronoq@db.invalid/jobs", "--test-clock",
              "--check-config"});
  EXPECT_EQ(done.code, 2);
  EXPECT_THAT(done.err, HasSubstr("test-clock: cannot be used with --cluster"));
  EXPECT_FALSE(std::filesystem::exists(data));
}

// A bad configuration: exit 2, every error on stderr naming the file, line,
// key and reason, and nothing started (no "listening on" line).
TEST_F(ConfigE2eTest, ABadConfigExitsTwoAndNamesEveryError) {
  const std::string file = Write("bad.toml",
                                 "listen = \"127.0.0.1:0\"\n"
                                 "thread = 4\n"
                                 "[cluster]\n"
                                 "lease-ms = \"3s\"\n");
  Subprocess::Completed done = Run({"--config", file, "--data", dir_.File("data")});
  EXPECT_EQ(done.code, 2);
  EXPECT_EQ(done.err, "chronoqd: " + file + ":2:1: thread: unknown key (did you mean threads?)\n" +
                          "chronoqd: " + file +
                          ":4:12: cluster.lease-ms: must be an integer, not a string\n");
  EXPECT_THAT(done.out, IsEmpty());

  done = Run({"--check-config"}, {"CHRONOQ_THREADS=many"});
  EXPECT_EQ(done.code, 2);
  EXPECT_EQ(done.err, "chronoqd: CHRONOQ_THREADS: must be an integer, not 'many'\n");

  done = Run({"--check-config", "--log-format", "xml"});
  EXPECT_EQ(done.code, 2);
  EXPECT_EQ(done.err, "chronoqd: --log-format: must be one of text json, not 'xml'\n");

  done = Run({"--config", dir_.File("missing.toml"), "--print-config"});
  EXPECT_EQ(done.code, 2);
  EXPECT_EQ(done.err, "chronoqd: " + dir_.File("missing.toml") +
                          ": cannot read: No such file or directory\n");
  EXPECT_THAT(done.out, IsEmpty());

  const std::string broken = Write("broken.toml", "threads = 3\n[cluster\n");
  done = Run({"--config", broken, "--check-config"});
  EXPECT_EQ(done.code, 2);
  EXPECT_THAT(done.err, HasSubstr("chronoqd: " + broken + ":2:"));
  EXPECT_THAT(done.err, HasSubstr(": TOML syntax error: "));

  done = Run({"--no-such-flag"});
  EXPECT_EQ(done.code, 2);
}

// Every option chronoqd's --help lists is a setting of the table or a meta
// flag, and the reverse: a flag added in main.cc outside the table fails here.
TEST_F(ConfigE2eTest, HelpListsExactlyTheSettingsAndTheMetaFlags) {
  const Subprocess::Completed done = Run({"--help"});
  ASSERT_EQ(done.code, 0) << done.err;
  std::set<std::string> listed;
  const std::regex option(R"((?:^|\n)\s+(?:-[a-zA-Z],)?(--[a-z][a-z-]*))");
  for (auto it = std::sregex_iterator(done.out.begin(), done.out.end(), option);
       it != std::sregex_iterator(); ++it) {
    listed.insert((*it)[1].str());
  }
  std::set<std::string> expected;
  for (const server::Setting& s : server::Settings()) {
    expected.emplace(s.flag);
    // Each option's help names its variable and its key.
    EXPECT_THAT(done.out,
                HasSubstr("[env " + std::string(s.env) + ", key " + std::string(s.key) + "]"));
  }
  for (std::string_view meta : server::MetaFlags()) expected.emplace(meta);
  EXPECT_EQ(listed, expected);
}

}  // namespace
}  // namespace chronoq
