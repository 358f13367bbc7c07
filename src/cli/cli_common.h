// cli/cli_common.h: what the command groups of the chronoq CLI share. Internal
// to src/cli and its tests.
//
// Each group of commands lives in a file of its own (tasks.cc, queues.cc,
// schedules.cc, locks.cc, work.cc, import.cc, stats.cc) and registers its
// subcommands on a CommandTable:
//
//   void AddQueueCommands(CommandTable& table) {
//     QueueArgs& a = table.Own<QueueArgs>();   // CLI11 parses into it
//     CLI::App* cmd = table.app().add_subcommand("pause", "...");
//     cmd->add_option("queue", a.queue, "Queue name")->required();
//     table.Add(cmd, [&a](Session& s) { return s.Simple("POST", QueuePath(a.queue) + ..., ...); });
//   }
//
// RunCli (commands.cc) parses the command line, then runs the one command
// whose subcommand was given: with a Session (a connection to chronoqd) or,
// for AddLocal() commands, without.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "chronoq/clock.h"
#include "chronoq/result.h"

#include "cli/commands.h"
#include "cli/http_client.h"

namespace chronoq::cli {

using json = nlohmann::json;

// ---------------------------------------------------------------------------
// Local validation. Errors are InvalidArgument naming the flag, so the message
// reads "--delay: not a duration (...)".

// A duration flag in whole milliseconds, as the wire wants it.
Result<int64_t> ParseMillis(std::string_view text, std::string_view flag);
// A duration flag in milliseconds between `min` and `max` (`range` says so).
Result<int64_t> ParseMillisIn(std::string_view text, std::string_view flag, Duration min,
                              Duration max, std::string_view range);
// A time flag: RFC 3339 (sent as written, a JSON string) or integer epoch
// milliseconds (a JSON number).
Result<json> ParseRunAt(std::string_view text, std::string_view flag);
// A lease token: a positive integer.
Result<uint64_t> ParseToken(std::string_view text);
// JSON text; the error names `flag` and the position ("(at line 1, column 2)").
Result<json> ParseJson(const std::string& text, std::string_view flag);
// The rest of `in`; `what` names it in the error.
Result<std::string> ReadAll(std::istream& in, std::string_view what);
// A whole file; the error names `flag`, the path and the reason.
Result<std::string> ReadFile(const std::string& path, std::string_view flag);

// A payload flag (--payload) and, for some commands, --payload-file.
struct PayloadFlags {
  std::string text;                 // --payload: JSON, '-' (stdin) or @FILE (@-: stdin)
  std::string file;                 // --payload-file: a path or '-'
  CLI::Option* text_opt = nullptr;  // set by the command that adds --payload
  CLI::Option* file_opt = nullptr;  // set when the command has --payload-file
};
// The payload the flags give, parsed, or nullopt when neither was given.
// Errors name the flag: "--payload: not valid JSON (at line 1, column 2)".
Result<std::optional<json>> ReadPayload(const PayloadFlags& flags, const CliIo& io);

// ---------------------------------------------------------------------------
// Output helpers.

// A field for display: strings as they are, other JSON compact, "-" for
// null or missing.
std::string Show(const json& j, const std::string& key);
// j[key], or null when `j` is not an object or has no such member.
json Member(const json& j, const std::string& key);
// "850ms", "12.3s", "4m05s", "2h10m", "3d4h"; "-" when `ms` is not a number.
std::string ShowMillis(const json& ms);
// 1234567 as "1,234,567".
std::string ShowCount(int64_t n);
// "[#####---------------]  25%" for `done` from 0 to 1 (clamped): the progress
// bars of `import` and `bulk`.
std::string ProgressBar(double done);
// The task states, as the API names them (for --state flags).
extern const std::vector<std::string> kTaskStates;
// Seconds as "850ms", "4.82s", "3m05s" (ShowMillis of the rounded milliseconds).
std::string ShowSeconds(double seconds);
// Prints rows[0] as the header and pads every column but the last.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);
// Whether a task (or lease) has a key.
bool HasKey(const json& t);
// The `queues` table of GET /v1/queues' array (queues.cc); "no queues" when empty.
void PrintQueueTable(std::ostream& out, const json& queues);

// ---------------------------------------------------------------------------
// Talking to the server.

struct Reply {
  int status = 0;
  std::string raw;  // the body as received
  json body;        // parsed; an empty body reads as {}
};

// "not_found: task share:42 does not exist (field id)", or for a body that
// is not chronoq's error shape, "HTTP 502: <first line>".
std::string DescribeError(const Reply& reply);
// The code of a chronoq error answer ("stale_token"), or "".
std::string ErrorCodeOf(const Reply& reply);
// The `error` object of a chronoq error answer ({code, message, field?}), or null.
json ErrorOf(const std::string& raw);

// One invocation's connection (to one chronoqd node or several, with
// failover: MultiHttpClient), credentials and output mode. Not thread-safe; a
// thread of its own makes its own Session (WithClient()).
class Session {
 public:
  // `base_url` is what `client` was created from (one URL or a comma-separated
  // list); NewClient() reuses it.
  Session(const CliIo& io, MultiHttpClient& client, std::string base_url, std::string token,
          bool json_output)
      : io_(io),
        client_(client),
        base_url_(std::move(base_url)),
        token_(std::move(token)),
        json_output_(json_output) {}

  const CliIo& io() const { return io_; }
  bool json_output() const { return json_output_; }
  MultiHttpClient& client() { return client_; }

  // Another client to the same servers with the same timeout: one per
  // thread, since MultiHttpClient is not thread-safe. It starts at the first
  // URL and keeps to the node that answers it, independently of this one.
  Result<std::unique_ptr<MultiHttpClient>> NewClient() const;
  // The same credentials and output mode over `client` (which must outlive it).
  Session WithClient(MultiHttpClient& client) const {
    return Session(io_, client, base_url_, token_, json_output_);
  }

  // Sends a request with the session's headers and credentials; prints
  // nothing. Errors: InvalidArgument when `body` is not valid UTF-8, else
  // those of MultiHttpClient::Send (no usable answer arrived).
  Result<HttpResponse> Send(std::string_view method, const std::string& target, const json* body);
  // The same with a body already serialised (`text` must be JSON).
  Result<HttpResponse> SendText(std::string_view method, const std::string& target,
                                std::string_view text);

  // Sends a request. On success (2xx with a JSON body) fills `reply` and
  // returns kExitOk; otherwise prints the error and returns the exit code.
  // With `report_errors` false an error answer (kExitServerError) is left to
  // the caller, in `reply`, unprinted (see ReportError()).
  int Call(std::string_view method, const std::string& target, const json* body, Reply& reply,
           bool report_errors = true);

  // Call(), then prints either the raw JSON (--json) or `human(body)`.
  int Simple(std::string_view method, const std::string& target, const json* body,
             const std::function<void(const Reply&)>& human);

  // The body as received; nothing for an empty one (204 No Content).
  void PrintRaw(const std::string& raw);

  // "error: " and DescribeError(reply).
  void ReportError(const Reply& reply);

 private:
  HttpHeaders Headers(bool with_body) const;

  const CliIo& io_;
  MultiHttpClient& client_;
  const std::string base_url_;
  const std::string token_;
  const bool json_output_;
};

std::string TaskPath(const std::string& id);
std::string QueuePath(const std::string& queue);

// Appends `name=value` to a query string ("" or "?a=b...").
void AddParam(std::string& query, std::string_view name, const std::string& value);

// GET `path` + `query` (built by AddParam): one page from `cursor` (empty:
// the first), or with `all` every page, following next_cursor. `key` names
// the array in the answer ("tasks"); `table` prints it. With --json, --all
// prints {key: [every item], next_cursor: null}.
int ListPages(Session& s, const std::string& path, const std::string& query, const std::string& key,
              const std::string& cursor, bool all,
              const std::function<void(std::ostream&, const json&)>& table);

// ---------------------------------------------------------------------------
// The command line.

inline bool Given(const CLI::Option* opt) { return opt != nullptr && opt->count() > 0; }

// A subcommand and what it does once the command line parsed: `run` talks
// to the server; `local` (set instead) needs none.
struct Command {
  CLI::App* app;
  std::function<int(Session&)> run;
  std::function<int(const CliIo&)> local;
};

// The subcommands registered on one App, and the flag values they parse
// into. Lives for the whole RunCli. Not thread-safe.
class CommandTable {
 public:
  explicit CommandTable(CLI::App& app) : app_(app) {}
  CommandTable(const CommandTable&) = delete;
  CommandTable& operator=(const CommandTable&) = delete;

  CLI::App& app() { return app_; }
  const std::vector<Command>& commands() const { return commands_; }

  // A default-constructed T owned by the table, for a group's flags: CLI11
  // writes into it while parsing, and the commands read it when they run.
  template <typename T>
  T& Own() {
    auto owned = std::make_shared<T>();
    T& ref = *owned;
    owned_.push_back(std::move(owned));
    return ref;
  }
  // `cmd` talks to the server.
  void Add(CLI::App* cmd, std::function<int(Session&)> run) {
    commands_.push_back({cmd, std::move(run), nullptr});
  }
  // `cmd` needs no server (cron next).
  void AddLocal(CLI::App* cmd, std::function<int(const CliIo&)> local) {
    commands_.push_back({cmd, nullptr, std::move(local)});
  }

 private:
  CLI::App& app_;
  std::vector<Command> commands_;
  // shared_ptr<void> keeps each group's own type and deleter without a
  // common base class.
  std::vector<std::shared_ptr<void>> owned_;
};

// Reports a local validation error: exit 2, nothing sent.
int Usage(const CliIo& io, const Status& s);

// Unwraps a Result inside a command, or returns exit 2 from it.
#define CHRONOQ_CLI_ASSIGN_OR_USAGE(lhs, expr, io) \
  CHRONOQ_CLI_ASSIGN_OR_USAGE_IMPL_(CHRONOQ_CONCAT_(cli_result_, __LINE__), lhs, expr, io)
#define CHRONOQ_CLI_ASSIGN_OR_USAGE_IMPL_(tmp, lhs, expr, io) \
  auto tmp = (expr);                                          \
  if (!tmp.ok()) return Usage(io, tmp.status());              \
  lhs = std::move(tmp).value()

// ---------------------------------------------------------------------------
// The groups, in the order `chronoq --help` lists them.

void AddTaskCommands(CommandTable& table);      // tasks.cc: enqueue ... extend
void AddLockCommands(CommandTable& table);      // locks.cc: lock, lock-info
void AddQueueCommands(CommandTable& table);     // queues.cc: queues, queue set, pause, resume
void AddScheduleCommands(CommandTable& table);  // schedules.cc: schedule ..., cron next
void AddWorkCommand(CommandTable& table);       // work.cc: work
void AddImportCommand(CommandTable& table);     // import.cc: import
void AddBulkCommands(
    CommandTable& table);  // bulk.cc: bulk cancel|reschedule|retry|delete|show|stop
void AddServerCommands(CommandTable& table);  // stats.cc: stats, health, version

}  // namespace chronoq::cli
