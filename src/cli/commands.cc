#include "cli/commands.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_common.h"
#include "cli/http_client.h"
#include <unistd.h>

namespace chronoq::cli {
namespace {

constexpr std::string_view kDefaultUrl = "http://127.0.0.1:7070";

// The global flags; each command group parses its own (CommandTable::Own).
struct GlobalArgs {
  std::string url;
  std::string token_file;
  std::string ca_file;
  std::string timeout = "30s";
  bool json = false;
};

// The token from --token-file, else CHRONOQ_TOKEN, else none.
Result<std::string> LoadToken(const GlobalArgs& a, const CLI::Option* token_file, const CliIo& io) {
  if (Given(token_file)) {
    CHRONOQ_ASSIGN_OR_RETURN(std::string token, ReadFile(a.token_file, "--token-file"));
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (token.empty()) return Status::InvalidArgument("--token-file", a.token_file + " is empty");
    return token;
  }
  return io.getenv("CHRONOQ_TOKEN").value_or("");
}

// The CAs an https server is checked against: --ca-file, else
// CHRONOQ_CA_FILE, else the system's.
TlsOptions LoadTls(const GlobalArgs& a, const CLI::Option* ca_file, const CliIo& io) {
  if (Given(ca_file)) return {.ca_file = a.ca_file, .ca_file_field = "--ca-file"};
  return {.ca_file = io.getenv("CHRONOQ_CA_FILE").value_or(""), .ca_file_field = "CHRONOQ_CA_FILE"};
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const CliIo& io) {
  GlobalArgs a;
  CLI::App app("chronoq: the command-line client of the chronoqd task server", "chronoq");
  app.require_subcommand(1);
  // Global flags may also follow the subcommand.
  app.fallthrough();
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  app.footer(
      "Global options (before or after the command): --url, --token-file, --ca-file, --json,\n"
      "--timeout.\n"
      "Environment: CHRONOQ_URL (default for --url; one URL or a comma-separated list),\n"
      "CHRONOQ_TOKEN (the API token), CHRONOQ_CA_FILE (default for --ca-file).\n"
      "Exit codes: 0 ok, 1 the server answered with an error, 2 bad command line,\n"
      "3 the server could not be reached; `lock` exits with its command's status,\n"
      "or 75 when the lock stayed busy; `import` exits 1 when a line is refused;\n"
      "`bulk` exits 1 when its job failed or was stopped;\n"
      "`work` exits 0 once stopped by SIGTERM or SIGINT.");
  CLI::Option* url =
      app.add_option("--url", a.url,
                     "Server URL, or several comma-separated (cluster nodes, tried in turn; "
                     "default " +
                         std::string(kDefaultUrl) + ")")
          ->type_name("URL[,URL...]");
  CLI::Option* token_file =
      app.add_option("--token-file", a.token_file, "File holding the API token")->type_name("FILE");
  CLI::Option* ca_file =
      app.add_option("--ca-file", a.ca_file,
                     "PEM file of the CA certificates to trust for an https:// server, instead "
                     "of the system's (its certificate and host name are always checked)")
          ->type_name("FILE");
  app.add_flag("--json", a.json, "Print the server's JSON instead of a summary");
  app.add_option("--timeout", a.timeout, "Give up on a request after this long")
      ->type_name("DUR")
      ->capture_default_str();
  CommandTable table(app);
  AddTaskCommands(table);
  AddLockCommands(table);
  AddQueueCommands(table);
  AddScheduleCommands(table);
  AddWorkCommand(table);
  AddImportCommand(table);
  AddBulkCommands(table);
  AddServerCommands(table);
  const std::vector<Command>& commands = table.commands();

  try {
    // CLI11 wants the arguments last first.
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const CLI::ParseError& e) {
    // "chronoq frobnicate" and "chronoq schedule frob" would otherwise read
    // "A subcommand is required".
    const CLI::App* given = &app;  // the innermost command given
    while (!given->get_subcommands().empty()) given = given->get_subcommands().front();
    // Global options fall through, so what no command took ends up at the top.
    const std::vector<std::string> rest = app.remaining(/*recurse=*/true);
    if (e.get_exit_code() != 0 && given->get_require_subcommand_min() > 0 && !rest.empty()) {
      const std::string& first = rest.front();
      io.err << "error: unknown " << (first.starts_with('-') ? "option " : "command ") << first
             << "\nRun with --help for more information.\n";
      return kExitUsage;
    }
    const int code = app.exit(e, io.out, io.err);
    return code == 0 ? kExitOk : kExitUsage;
  }

  for (const Command& c : commands) {
    if (c.local && c.app->parsed()) return c.local(io);
  }

  std::string base = a.url;
  std::string_view url_field = "--url";
  if (!Given(url)) {
    const std::optional<std::string> env = io.getenv("CHRONOQ_URL");
    base = env.has_value() && !env->empty() ? *env : std::string(kDefaultUrl);
    url_field = "CHRONOQ_URL";
  }
  // One URL or several, comma-separated (cluster nodes, with failover:
  // MultiHttpClient). Checked first, as the one URL always was; the timeout
  // comes once --timeout is checked.
  CHRONOQ_CLI_ASSIGN_OR_USAGE(
      std::unique_ptr<MultiHttpClient> client,
      MultiHttpClient::Create(base, Duration::zero(), url_field, LoadTls(a, ca_file, io)), io);
  CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t timeout_ms, ParseMillis(a.timeout, "--timeout"), io);
  if (timeout_ms <= 0) return Usage(io, Status::InvalidArgument("--timeout", "must be positive"));
  client->set_timeout(std::chrono::milliseconds(timeout_ms));
  CHRONOQ_CLI_ASSIGN_OR_USAGE(std::string token, LoadToken(a, token_file, io), io);

  Session session(io, *client, base, std::move(token), a.json);
  for (const Command& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run(session);
    } catch (const json::exception& e) {
      // Only an answer of an unexpected shape gets here.
      io.err << "error: cannot read the server's answer: " << e.what() << "\n";
      return kExitServerError;
    }
  }
  // Unreachable: require_subcommand(1) holds, and `queue` requires `set`.
  io.err << "error: no command\n";
  return kExitUsage;
}

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  const CliIo io{
      .out = out,
      .err = err,
      .in = std::cin,
      .getenv = [](std::string_view name) -> std::optional<std::string> {
        // NOLINTNEXTLINE(concurrency-mt-unsafe): read once, before any thread starts.
        const char* value = std::getenv(std::string(name).c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      },
      .out_is_terminal = isatty(STDOUT_FILENO) == 1,
      .err_is_terminal = isatty(STDERR_FILENO) == 1,
  };
  return RunCli(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc), io);
}

}  // namespace chronoq::cli
