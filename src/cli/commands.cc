#include "cli/commands.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "chronoq/cron.h"
#include "chronoq/lock.h"
#include "chronoq/time.h"

#include "cli/http_client.h"
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CHRONOQ_VERSION
#define CHRONOQ_VERSION "unknown"
#endif

namespace chronoq::cli {
namespace {

using json = nlohmann::json;

constexpr std::string_view kDefaultUrl = "http://127.0.0.1:7070";
const std::vector<std::string> kStates = {"scheduled", "running", "succeeded", "cancelled", "dead"};

// ---------------------------------------------------------------------------
// Local validation. Errors are InvalidArgument naming the flag, so the message
// reads "--delay: not a duration (...)".

// A duration flag in whole milliseconds, as the wire wants it.
Result<int64_t> ParseMillis(std::string_view text, std::string_view flag) {
  CHRONOQ_ASSIGN_OR_RETURN(Duration d, ParseDuration(text, flag));
  if (d % std::chrono::milliseconds(1) != Duration::zero()) {
    return Status::InvalidArgument(flag, "use whole milliseconds");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// A time flag: RFC 3339 (sent as written) or integer epoch milliseconds.
Result<json> ParseRunAt(std::string_view text, std::string_view flag) {
  int64_t ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return json(ms);
  const Result<Timestamp> t = ParseTime(text, flag);
  if (!t.ok()) {
    return Status::InvalidArgument(flag, "not an RFC 3339 time (2026-11-22T03:00:00Z) or epoch ms");
  }
  return json(std::string(text));
}

// A lease token: a positive integer.
Result<uint64_t> ParseToken(std::string_view text) {
  uint64_t token = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), token);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return Status::InvalidArgument("--token", "not a lease token (a positive integer)");
  }
  return token;
}

Result<json> ParseJson(const std::string& text, std::string_view flag) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    const std::string what = e.what();
    const size_t at = what.find("at line ");
    const std::string where =
        at == std::string::npos ? "" : " (" + what.substr(at, what.find(':', at) - at) + ")";
    return Status::InvalidArgument(flag, "not valid JSON" + where);
  }
}

Result<std::string> ReadAll(std::istream& in, std::string_view what) {
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::InvalidArgument(what, "cannot read");
  return text;
}

Result<std::string> ReadFile(const std::string& path, std::string_view flag) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return Status::InvalidArgument(
        flag,
        "cannot read " + path + ": " + std::error_code(errno, std::generic_category()).message());
  }
  return ReadAll(file, flag);
}

// ---------------------------------------------------------------------------
// Output helpers.

// A task field for display: strings as they are, other JSON compact, "-" for
// null or missing.
std::string Show(const json& j, const std::string& key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

// j[key], or null when `j` is not an object or has no such member.
json Member(const json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? json() : *it;
}

// "850ms", "12.3s", "4m05s", "2h10m", "3d4h".
std::string ShowMillis(const json& ms) {
  if (!ms.is_number()) return "-";
  const int64_t v = ms.get<int64_t>();
  char buf[48];
  if (v < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(v));
  } else if (v < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(v) / 1000);
  } else if (v < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(v / 60'000),
                  static_cast<long long>(v / 1000 % 60));
  } else if (v < 86'400'000) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(v / 3'600'000),
                  static_cast<long long>(v / 60'000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%lldh", static_cast<long long>(v / 86'400'000),
                  static_cast<long long>(v / 3'600'000 % 24));
  }
  return buf;
}

// Prints rows[0] as the header and pads every column but the last.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

// Whether a task (or lease) has a key.
bool HasKey(const json& t) { return Member(t, "key").is_string(); }

// A KEY column appears when some task has a key.
void PrintTaskTable(std::ostream& out, const json& tasks) {
  if (!tasks.is_array() || tasks.empty()) {
    out << "no tasks\n";
    return;
  }
  const bool keys = std::any_of(tasks.begin(), tasks.end(), HasKey);
  std::vector<std::vector<std::string>> rows = {{"ID", "QUEUE", "STATE", "RUN_AT", "ATTEMPT"}};
  if (keys) rows[0].insert(rows[0].begin() + 2, "KEY");
  for (const json& t : tasks) {
    rows.push_back({Show(t, "id"), Show(t, "queue"), Show(t, "state"), Show(t, "run_at"),
                    Show(t, "attempt") + "/" + Show(t, "max_attempts")});
    if (keys) rows.back().insert(rows.back().begin() + 2, Show(t, "key"));
  }
  PrintTable(out, rows);
}

void PrintTask(std::ostream& out, const json& t) {
  std::vector<std::vector<std::string>> rows = {
      {"id", Show(t, "id")},
      {"queue", Show(t, "queue")},
      {"state", Show(t, "state")},
      {"run_at", Show(t, "run_at")},
      {"attempt", Show(t, "attempt") + "/" + Show(t, "max_attempts")},
      {"priority", Show(t, "priority")},
      {"last_error", Show(t, "last_error")},
      {"created_at", Show(t, "created_at")},
      {"updated_at", Show(t, "updated_at")},
  };
  if (HasKey(t)) rows.insert(rows.begin() + 2, {"key", Show(t, "key")});
  if (t.contains("token")) rows.push_back({"token", Show(t, "token")});
  if (t.contains("lease_until")) rows.push_back({"lease_until", Show(t, "lease_until")});
  rows.push_back({"payload", t.contains("payload") ? t["payload"].dump() : "-"});
  for (auto& row : rows) row[0] += ":";
  PrintTable(out, rows);
}

// A schedule's rule: "cron '0 0 3 * * *' Asia/Seoul", "every 30.0s",
// "fixed delay 5m00s".
std::string ShowRule(const json& s) {
  if (Member(s, "cron").is_string()) return "cron '" + Show(s, "cron") + "' " + Show(s, "tz");
  if (Member(s, "every_ms").is_number()) return "every " + ShowMillis(s["every_ms"]);
  if (Member(s, "fixed_delay_ms").is_number()) {
    return "fixed delay " + ShowMillis(s["fixed_delay_ms"]);
  }
  return "-";
}

std::string ShowPaused(const json& s) { return Member(s, "paused") == true ? "yes" : "no"; }

void PrintScheduleTable(std::ostream& out, const json& schedules) {
  if (!schedules.is_array() || schedules.empty()) {
    out << "no schedules\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "QUEUE", "RULE", "NEXT_RUN", "LAST", "PAUSED"}};
  for (const json& s : schedules) {
    rows.push_back({Show(s, "name"), Show(s, "queue"), ShowRule(s), Show(s, "next_run"),
                    Show(Member(s, "last_run"), "state"), ShowPaused(s)});
  }
  PrintTable(out, rows);
}

void PrintSchedule(std::ostream& out, const json& s) {
  const json last = Member(s, "last_run");
  std::vector<std::vector<std::string>> rows = {
      {"name", Show(s, "name")},
      {"queue", Show(s, "queue")},
      {"rule", ShowRule(s)},
      {"start", Show(s, "start")},
      {"paused", ShowPaused(s)},
      {"next_run", Show(s, "next_run")},
      {"next_task_id", Show(s, "next_task_id")},
      {"last_run", last.is_object() ? Show(last, "state") + " " + Show(last, "task_id") +
                                          ", finished " + Show(last, "finished_at")
                                    : "-"},
  };
  if (Member(last, "error").is_string()) rows.push_back({"last_error", Show(last, "error")});
  rows.push_back({"runs", Show(s, "runs")});
  rows.push_back({"skipped", Show(s, "skipped")});
  rows.push_back({"misfire", Show(s, "misfire")});
  rows.push_back({"max_catchup", Show(s, "max_catchup")});
  rows.push_back({"overlap", Show(s, "overlap")});
  if (Member(s, "cron").is_string()) {
    rows.push_back({"dst_gap", Show(s, "dst_gap")});
    rows.push_back({"dst_repeat", Show(s, "dst_repeat")});
  }
  rows.push_back({"priority", Show(s, "priority")});
  rows.push_back({"max_attempts", Show(s, "max_attempts")});
  if (const json target = Member(s, "target"); target.is_object()) {
    rows.push_back({"target", Show(target, "method") + " " + Show(target, "url")});
  }
  rows.push_back({"created_at", Show(s, "created_at")});
  rows.push_back({"updated_at", Show(s, "updated_at")});
  rows.push_back({"payload", s.contains("payload") ? s["payload"].dump() : "-"});
  for (auto& row : rows) row[0] += ":";
  PrintTable(out, rows);
}

// ---------------------------------------------------------------------------
// Talking to the server.

struct Reply {
  int status = 0;
  std::string raw;  // the body as received
  json body;        // parsed; an empty body reads as {}
};

// The `error` object of a chronoq error answer, or null.
json ErrorOf(const std::string& raw) {
  const json body = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  const json error = Member(body, "error");
  return error.is_object() ? error : json();
}

// "not_found: task share:42 does not exist (field id)", or for a body that
// is not chronoq's error shape, "HTTP 502: <first line>".
std::string DescribeError(const Reply& reply) {
  if (const json e = ErrorOf(reply.raw); !e.is_null()) {
    std::string text = Show(e, "code") + ": " + Show(e, "message");
    if (const json field = Member(e, "field");
        field.is_string() && !field.get<std::string>().empty()) {
      text += " (field " + field.get<std::string>() + ")";
    }
    return text;
  }
  std::string line = reply.raw.substr(0, reply.raw.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return "HTTP " + std::to_string(reply.status) + (line.empty() ? "" : ": " + line);
}

// The code of a chronoq error answer ("stale_token"), or "".
std::string ErrorCodeOf(const Reply& reply) {
  const json code = Member(ErrorOf(reply.raw), "code");
  return code.is_string() ? code.get<std::string>() : "";
}

// One invocation's connection, credentials and output mode.
class Session {
 public:
  Session(const CliIo& io, HttpClient& client, std::string token, bool json_output)
      : io_(io), client_(client), token_(std::move(token)), json_output_(json_output) {}

  const CliIo& io() const { return io_; }
  bool json_output() const { return json_output_; }
  HttpClient& client() { return client_; }

  // Sends a request with the session's headers and credentials; prints
  // nothing. Errors: InvalidArgument when `body` is not valid UTF-8, else
  // those of HttpClient::Send (no answer arrived).
  Result<HttpResponse> Send(std::string_view method, const std::string& target, const json* body) {
    HttpHeaders headers = {{"Accept", "application/json"},
                           {"User-Agent", "chronoq/" CHRONOQ_VERSION}};
    std::string text;
    if (body != nullptr) {
      headers.emplace_back("Content-Type", "application/json");
      try {
        text = body->dump();
      } catch (const json::type_error&) {
        return Status(StatusCode::kInvalidArgument, "arguments must be valid UTF-8");
      }
    }
    if (!token_.empty()) headers.emplace_back("Authorization", "Bearer " + token_);
    return client_.Send(method, target, text, headers);
  }

  // Sends a request. On success (2xx with a JSON body) fills `reply` and
  // returns kExitOk; otherwise prints the error and returns the exit code.
  // With `report_errors` false an error answer (kExitServerError) is left to
  // the caller, in `reply`, unprinted (see ReportError()).
  int Call(std::string_view method, const std::string& target, const json* body, Reply& reply,
           bool report_errors = true) {
    Result<HttpResponse> r = Send(method, target, body);
    if (!r.ok()) {
      io_.err << "error: " << r.status().message() << "\n";
      return r.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitUnreachable;
    }
    reply.status = r->status;
    reply.raw = std::move(r->body);
    if (reply.status < 200 || reply.status > 299) {
      if (report_errors) ReportError(reply);
      return kExitServerError;
    }
    if (reply.raw.empty()) {
      reply.body = json::object();
      return kExitOk;
    }
    reply.body = json::parse(reply.raw, nullptr, /*allow_exceptions=*/false);
    if (reply.body.is_discarded()) {
      io_.err << "error: the server's answer (HTTP " << reply.status << ") is not JSON\n";
      return kExitServerError;
    }
    return kExitOk;
  }

  // Call(), then prints either the raw JSON (--json) or `human(body)`.
  int Simple(std::string_view method, const std::string& target, const json* body,
             const std::function<void(const Reply&)>& human) {
    Reply reply;
    if (const int code = Call(method, target, body, reply); code != kExitOk) return code;
    if (json_output_) {
      PrintRaw(reply.raw);
    } else {
      human(reply);
    }
    return kExitOk;
  }

  // The body as received; nothing for an empty one (204 No Content).
  void PrintRaw(const std::string& raw) {
    if (raw.empty()) return;
    io_.out << raw;
    if (raw.back() != '\n') io_.out << "\n";
  }

  // "error: " and DescribeError(reply).
  void ReportError(const Reply& reply) { io_.err << "error: " << DescribeError(reply) << "\n"; }

 private:
  const CliIo& io_;
  HttpClient& client_;
  const std::string token_;
  const bool json_output_;
};

std::string TaskPath(const std::string& id) { return "/v1/tasks/" + PercentEncode(id); }
std::string QueuePath(const std::string& queue) { return "/v1/queues/" + PercentEncode(queue); }
std::string SchedulePath(const std::string& name) { return "/v1/schedules/" + PercentEncode(name); }

// Appends `name=value` to a query string ("" or "?a=b...").
void AddParam(std::string& query, std::string_view name, const std::string& value) {
  query += (query.empty() ? "?" : "&") + std::string(name) + "=" + PercentEncode(value);
}

// GET `path` + `query` (built by AddParam): one page from `cursor` (empty:
// the first), or with `all` every page, following next_cursor. `key` names
// the array in the answer ("tasks"); `table` prints it. With --json, --all
// prints {key: [every item], next_cursor: null}.
int ListPages(Session& s, const std::string& path, const std::string& query, const std::string& key,
              const std::string& cursor, bool all,
              const std::function<void(std::ostream&, const json&)>& table) {
  const CliIo& io = s.io();
  const auto target = [&](const std::string& from) {
    if (from.empty()) return path + query;
    return path + query + (query.empty() ? "?" : "&") + "cursor=" + PercentEncode(from);
  };
  if (!all) {
    return s.Simple("GET", target(cursor), nullptr, [&](const Reply& r) {
      table(io.out, Member(r.body, key));
      const json next = Member(r.body, "next_cursor");
      if (next.is_string() && !next.get<std::string>().empty()) {
        io.err << "more: --cursor " << next.get<std::string>() << " (or --all)\n";
      }
    });
  }
  json items = json::array();
  std::string next;
  while (true) {
    Reply r;
    if (const int code = s.Call("GET", target(next), nullptr, r); code != kExitOk) return code;
    const json page = Member(r.body, key);
    if (page.is_array()) items.insert(items.end(), page.begin(), page.end());
    const json cur = Member(r.body, "next_cursor");
    if (!cur.is_string() || cur.get<std::string>().empty()) break;
    if (cur.get<std::string>() == next) {
      io.err << "error: the server returned the same cursor twice\n";
      return kExitServerError;
    }
    next = cur.get<std::string>();
  }
  if (s.json_output()) {
    io.out << json{{key, items}, {"next_cursor", nullptr}}.dump() << "\n";
  } else {
    table(io.out, items);
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// The command line.

// Every flag's value. CLI11 writes here while parsing.
struct Args {
  std::string url;
  std::string token_file;
  std::string timeout = "30s";
  bool json = false;

  std::string id;
  std::string queue;
  std::string payload;
  std::string payload_file;
  std::string run_at;
  std::string delay;
  std::string on_conflict;
  int max_attempts = 0;
  int priority = 0;
  std::string state;
  int limit = 0;
  std::string cursor;
  bool all = false;
  int max = 1;
  std::string lease = "30s";
  std::string wait = "0";
  std::string token;
  std::string error;
  std::string retry_in;
  int concurrency = 0;
  int max_in_flight_per_key = 0;
  int64_t max_pending_per_key = 0;
  std::string backoff_base;
  std::string backoff_cap;
  std::string retention;
  std::string rate_limit;
  std::vector<std::string> reset;  // queue set --reset
  std::string cron;
  std::string tz = "UTC";
  std::string from;
  int count = 1;
  std::string name;
  std::string every;
  std::string fixed_delay;
  std::string start;
  std::string dst_gap;
  std::string dst_repeat;
  std::string misfire;
  int max_catchup = 0;
  std::string overlap;
  std::string key;  // a lock's, or a task's (enqueue, list)
  std::string lock_wait = "5s";
  std::string owner;
  std::vector<std::string> command;
};

bool Given(const CLI::Option* opt) { return opt != nullptr && opt->count() > 0; }

// A subcommand and what it does once the command line parsed: `run` talks
// to the server; `local` (set instead) needs none.
struct Command {
  CLI::App* app;
  std::function<int(Session&)> run;
  std::function<int(const CliIo&)> local;
};

// Reports a local validation error: exit 2, nothing sent.
int Usage(const CliIo& io, const Status& s) {
  io.err << "error: " << s.message() << "\n";
  return kExitUsage;
}

// Unwraps a Result inside a command, or returns exit 2 from it.
#define CHRONOQ_CLI_ASSIGN_OR_USAGE(lhs, expr, io) \
  CHRONOQ_CLI_ASSIGN_OR_USAGE_IMPL_(CHRONOQ_CONCAT_(cli_result_, __LINE__), lhs, expr, io)
#define CHRONOQ_CLI_ASSIGN_OR_USAGE_IMPL_(tmp, lhs, expr, io) \
  auto tmp = (expr);                                          \
  if (!tmp.ok()) return Usage(io, tmp.status());              \
  lhs = std::move(tmp).value()

// The payload from --payload or --payload-file ('-': stdin), if given.
Result<std::optional<json>> ReadPayload(const Args& a, const CLI::Option* payload,
                                        const CLI::Option* payload_file, const CliIo& io) {
  std::string text;
  std::string_view flag;
  if (Given(payload)) {
    flag = "--payload";
    if (a.payload == "-") {
      CHRONOQ_ASSIGN_OR_RETURN(text, ReadAll(io.in, "stdin"));
    } else {
      text = a.payload;
    }
  } else if (Given(payload_file)) {
    flag = "--payload-file";
    if (a.payload_file == "-") {
      CHRONOQ_ASSIGN_OR_RETURN(text, ReadAll(io.in, "stdin"));
    } else {
      CHRONOQ_ASSIGN_OR_RETURN(text, ReadFile(a.payload_file, flag));
    }
  } else {
    return std::optional<json>();
  }
  CHRONOQ_ASSIGN_OR_RETURN(json parsed, ParseJson(text, flag));
  return std::optional<json>(std::move(parsed));
}

// The --run-at and --delay flags of a command (mutually exclusive).
struct When {
  CLI::Option* run_at;
  CLI::Option* delay;
};

When AddWhen(CLI::App* cmd, Args& a) {
  CLI::Option* run_at =
      cmd->add_option("--run-at", a.run_at, "When to run: RFC 3339 time or epoch ms")
          ->type_name("TIME");
  CLI::Option* delay =
      cmd->add_option("--delay", a.delay, "When to run: after this long (90s, 5m, 7d)")
          ->type_name("DUR");
  delay->excludes(run_at);
  return {run_at, delay};
}

// Sets body.run_at or body.delay_ms from the flags, if given.
Status PutWhen(const Args& a, When when, json& body) {
  if (Given(when.run_at)) {
    CHRONOQ_ASSIGN_OR_RETURN(body["run_at"], ParseRunAt(a.run_at, "--run-at"));
  }
  if (Given(when.delay)) {
    CHRONOQ_ASSIGN_OR_RETURN(body["delay_ms"], ParseMillis(a.delay, "--delay"));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// chronoq lock: runs a command while holding a lock.

std::string LockPath(const std::string& key) { return "/v1/locks/" + PercentEncode(key); }

// A duration flag in milliseconds between `min` and `max` (`range` says so).
Result<int64_t> ParseMillisIn(std::string_view text, std::string_view flag, Duration min,
                              Duration max, std::string_view range) {
  CHRONOQ_ASSIGN_OR_RETURN(const int64_t ms, ParseMillis(text, flag));
  if (std::chrono::milliseconds(ms) < min || std::chrono::milliseconds(ms) > max) {
    return Status::InvalidArgument(flag, range);
  }
  return ms;
}

// Ignores SIGINT and SIGQUIT for its lifetime, as system(3) does while its
// command runs: a Ctrl-C in the terminal reaches the command (it is in the
// same process group), which ends, and chronoq lives on to release the lock.
class IgnoreInterrupts {
 public:
  IgnoreInterrupts() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGINT, &ignore, &old_int_);
    sigaction(SIGQUIT, &ignore, &old_quit_);
  }
  ~IgnoreInterrupts() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGQUIT, &old_quit_, nullptr);
  }
  IgnoreInterrupts(const IgnoreInterrupts&) = delete;
  IgnoreInterrupts& operator=(const IgnoreInterrupts&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_quit_ {};
};

// Starts `argv` (looked up in PATH) with chronoq's stdio, its environment plus
// `extra_env` ("NAME=value", replacing a variable of that name), and SIGINT
// and SIGQUIT at their defaults. Returns 0 and sets `pid`, or an errno value.
int Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
          pid_t& pid) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    const bool replaced = std::any_of(extra_env.begin(), extra_env.end(), [&](const auto& x) {
      return var.starts_with(std::string_view(x).substr(0, x.find('=') + 1));
    });
    if (!replaced) env.push_back(*e);
  }
  for (const std::string& e : extra_env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGQUIT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  const int rc = posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), env.data());
  posix_spawnattr_destroy(&attr);
  return rc;
}

// Waits for `pid` to end; returns its exit status, or 128 + the signal that
// killed it (as shells report it).
int AwaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 128;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Extends a lock every third of its lease on a thread of its own until
// Stop(). A failed extension is retried at the next turn; a stale token means
// the lock is lost, which is reported and ends the extending.
// Uses the session (its client and io.err) alone while it runs: the caller
// must not touch either between Start() and Stop().
class LeaseKeeper {
 public:
  LeaseKeeper(Session& session, std::string key, uint64_t token, int64_t lease_ms)
      : session_(session),
        key_(std::move(key)),
        body_({{"token", token}, {"lease_ms", lease_ms}}),
        interval_(std::max<int64_t>(lease_ms / 3, 1)) {}
  ~LeaseKeeper() { Stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  // Stops extending; returns false when the lock was lost meanwhile.
  bool Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return !lost_;
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
      lock.unlock();
      const bool held = ExtendOnce();
      lock.lock();
      if (!held) {
        lost_ = true;
        return;
      }
    }
  }

  // Returns false when the lock is lost.
  bool ExtendOnce() {
    std::ostream& err = session_.io().err;
    Result<HttpResponse> r = session_.Send("POST", LockPath(key_) + "/extend", &body_);
    if (!r.ok()) {
      err << "warning: cannot extend the lock on " << key_ << ": " << r.status().message()
          << " (retrying)\n";
      return true;
    }
    if (r->status >= 200 && r->status <= 299) return true;
    const Reply reply{.status = r->status, .raw = std::move(r->body)};
    if (reply.status == 409 && ErrorCodeOf(reply) == "stale_token") {
      err << "warning: lost the lock on " << key_ << " (" << DescribeError(reply)
          << "); the command keeps running without it\n";
      return false;
    }
    err << "warning: cannot extend the lock on " << key_ << ": " << DescribeError(reply)
        << " (retrying)\n";
    return true;
  }

  Session& session_;
  const std::string key_;
  const json body_;
  const std::chrono::milliseconds interval_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  bool lost_ = false;  // written by the thread; read after join
};

// chronoq lock KEY [--wait DUR] [--lease DUR] [--owner NAME] -- CMD ARGS...
int RunLocked(Session& s, const Args& a, const CLI::Option* owner) {
  const CliIo& io = s.io();
  CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t wait_ms,
                              ParseMillisIn(a.lock_wait, "--wait", Duration::zero(), kMaxLockWait,
                                            "must be between 0 and 1h"),
                              io);
  CHRONOQ_CLI_ASSIGN_OR_USAGE(
      const int64_t lease_ms,
      ParseMillisIn(a.lease, "--lease", kMinLockLease, kMaxLockLease, "must be between 1ms and 7d"),
      io);
  json body = {{"wait_ms", wait_ms}, {"lease_ms", lease_ms}};
  if (Given(owner)) body["owner"] = a.owner;

  // The server holds the request for up to the whole wait.
  const Duration timeout = s.client().timeout();
  s.client().set_timeout(timeout + std::chrono::milliseconds(wait_ms));
  Reply acquired;
  const int code =
      s.Call("POST", LockPath(a.key) + "/acquire", &body, acquired, /*report_errors=*/false);
  s.client().set_timeout(timeout);
  if (code == kExitServerError && acquired.status == 409 &&
      ErrorCodeOf(acquired) == "lock_wait_timeout") {
    io.err << "error: " << a.key << " is locked: not acquired within " << a.lock_wait << "; "
           << a.command.front() << " not run\n";
    return kExitLockBusy;
  }
  if (code == kExitServerError) s.ReportError(acquired);
  if (code != kExitOk) return code;
  const uint64_t token = acquired.body.at("token").get<uint64_t>();

  int status = 0;
  bool held = true;
  {
    const IgnoreInterrupts ignore_interrupts;
    io.out.flush();
    io.err.flush();
    pid_t pid = 0;
    const int spawn_error =
        Spawn(a.command,
              {"CHRONOQ_LOCK_KEY=" + a.key, "CHRONOQ_LOCK_TOKEN=" + std::to_string(token)}, pid);
    if (spawn_error != 0) {
      io.err << "error: cannot run " << a.command.front() << ": "
             << std::error_code(spawn_error, std::generic_category()).message() << "\n";
      status = spawn_error == ENOENT ? 127 : 126;  // as shells say "not found", "cannot execute"
    } else {
      LeaseKeeper keeper(s, a.key, token, lease_ms);
      keeper.Start();
      status = AwaitExit(pid);
      held = keeper.Stop();
    }
  }
  if (held) {
    const json release = {{"token", token}};
    Reply released;
    if (s.Call("POST", LockPath(a.key) + "/release", &release, released,
               /*report_errors=*/false) == kExitServerError) {
      io.err << "warning: cannot release the lock on " << a.key << ": " << DescribeError(released)
             << "\n";
    }
  }
  return status;
}

void PrintLock(std::ostream& out, const json& l) {
  const bool held = Member(l, "held") == true;
  std::vector<std::vector<std::string>> rows = {{"key", Show(l, "key")},
                                                {"held", held ? "yes" : "no"}};
  if (held) {
    rows.push_back({"owner", Show(l, "owner")});
    rows.push_back({"expires_at", Show(l, "expires_at")});
  }
  rows.push_back({"waiters", Show(l, "waiters")});
  for (auto& row : rows) row[0] += ":";
  PrintTable(out, rows);
}

std::vector<Command> AddCommands(CLI::App& app, Args& a) {
  std::vector<Command> commands;
  const auto add = [&](CLI::App* cmd, std::function<int(Session&)> run) {
    commands.push_back({cmd, std::move(run)});
  };

  // enqueue
  {
    CLI::App* cmd = app.add_subcommand("enqueue", "Schedule a task");
    cmd->add_option("--queue,-q", a.queue, "Queue name")->type_name("QUEUE")->required();
    CLI::Option* payload =
        cmd->add_option("--payload", a.payload, "Payload as JSON text ('-' reads stdin)")
            ->type_name("JSON");
    CLI::Option* payload_file = cmd->add_option("--payload-file", a.payload_file,
                                                "File holding the JSON payload ('-' is stdin)")
                                    ->type_name("FILE");
    payload_file->excludes(payload);
    const When when = AddWhen(cmd, a);
    CLI::Option* id =
        cmd->add_option("--id", a.id, "Task id (default: generated)")->type_name("ID");
    CLI::Option* on_conflict =
        cmd->add_option("--on-conflict", a.on_conflict, "When --id names an unfinished task")
            ->check(CLI::IsMember({"reject", "ignore", "replace"}));
    CLI::Option* max_attempts =
        cmd->add_option("--max-attempts", a.max_attempts, "Attempt limit")->type_name("N");
    CLI::Option* priority =
        cmd->add_option("--priority", a.priority, "Lower runs first among equally due tasks")
            ->type_name("N");
    CLI::Option* key =
        cmd->add_option("--key", a.key, "Ordering key: tasks with one key start in order")
            ->type_name("KEY");
    add(cmd, [=, &a](Session& s) {
      const CliIo& io = s.io();
      json body = {{"queue", a.queue}};
      CHRONOQ_CLI_ASSIGN_OR_USAGE(std::optional<json> p, ReadPayload(a, payload, payload_file, io),
                                  io);
      if (p.has_value()) body["payload"] = std::move(*p);
      if (Status st = PutWhen(a, when, body); !st.ok()) return Usage(io, st);
      if (Given(id)) body["id"] = a.id;
      if (Given(on_conflict)) body["on_conflict"] = a.on_conflict;
      if (Given(max_attempts)) body["max_attempts"] = a.max_attempts;
      if (Given(priority)) body["priority"] = a.priority;
      if (Given(key)) body["key"] = a.key;
      return s.Simple("POST", "/v1/tasks", &body, [&](const Reply& r) {
        const std::string key_part = HasKey(r.body) ? ", key " + Show(r.body, "key") : "";
        if (r.status == 201) {
          io.out << "enqueued " << Show(r.body, "id") << key_part << ", due "
                 << Show(r.body, "run_at") << "\n";
        } else {
          io.out << "kept " << Show(r.body, "id") << " (already " << Show(r.body, "state") << ")"
                 << key_part << ", due " << Show(r.body, "run_at") << "\n";
        }
      });
    });
  }

  // get / cancel / retry: one task id.
  {
    CLI::App* cmd = app.add_subcommand("get", "Show a task");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    add(cmd, [&a](Session& s) {
      return s.Simple("GET", TaskPath(a.id), nullptr,
                      [&](const Reply& r) { PrintTask(s.io().out, r.body); });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("cancel", "Cancel a scheduled task");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    add(cmd, [&a](Session& s) {
      return s.Simple("DELETE", TaskPath(a.id), nullptr, [&](const Reply& r) {
        s.io().out << "cancelled " << Show(r.body, "id") << "\n";
      });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("reschedule", "Move a scheduled task");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    const When when = AddWhen(cmd, a);
    CLI::Option* payload =
        cmd->add_option("--payload", a.payload, "New payload as JSON text")->type_name("JSON");
    add(cmd, [=, &a](Session& s) {
      const CliIo& io = s.io();
      if (!Given(when.run_at) && !Given(when.delay)) {
        return Usage(io, Status::InvalidArgument("reschedule", "give --run-at or --delay"));
      }
      json body = json::object();
      if (Status st = PutWhen(a, when, body); !st.ok()) return Usage(io, st);
      CHRONOQ_CLI_ASSIGN_OR_USAGE(std::optional<json> p, ReadPayload(a, payload, nullptr, io), io);
      if (p.has_value()) body["payload"] = std::move(*p);
      return s.Simple("PATCH", TaskPath(a.id), &body, [&](const Reply& r) {
        io.out << "rescheduled " << Show(r.body, "id") << ", due " << Show(r.body, "run_at")
               << "\n";
      });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("retry", "Schedule a dead task again, now");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    add(cmd, [&a](Session& s) {
      const json body = json::object();
      return s.Simple("POST", TaskPath(a.id) + "/retry", &body, [&](const Reply& r) {
        s.io().out << "requeued " << Show(r.body, "id") << ", due " << Show(r.body, "run_at")
                   << "\n";
      });
    });
  }

  // list
  {
    CLI::App* cmd = app.add_subcommand("list", "List tasks");
    CLI::Option* queue =
        cmd->add_option("--queue,-q", a.queue, "Only this queue")->type_name("QUEUE");
    CLI::Option* state =
        cmd->add_option("--state", a.state, "Only this state")->check(CLI::IsMember(kStates));
    CLI::Option* key = cmd->add_option("--key", a.key, "Only this key")->type_name("KEY");
    CLI::Option* limit = cmd->add_option("--limit", a.limit, "Tasks per page")->type_name("N");
    CLI::Option* cursor =
        cmd->add_option("--cursor", a.cursor, "Start from this page cursor")->type_name("CURSOR");
    CLI::Option* all = cmd->add_flag("--all", a.all, "Follow the cursor to the last page");
    all->excludes(cursor);
    add(cmd, [=, &a](Session& s) {
      std::string query;
      if (Given(queue)) AddParam(query, "queue", a.queue);
      if (Given(state)) AddParam(query, "state", a.state);
      if (Given(key)) AddParam(query, "key", a.key);
      if (Given(limit)) AddParam(query, "limit", std::to_string(a.limit));
      return ListPages(s, "/v1/tasks", query, "tasks", a.cursor, a.all, PrintTaskTable);
    });
  }

  // Workers: claim, ack, fail, extend.
  {
    CLI::App* cmd = app.add_subcommand("claim", "Lease due tasks of a queue");
    cmd->add_option("queue", a.queue, "Queue name")->type_name("")->required();
    cmd->add_option("--max", a.max, "At most this many tasks")
        ->type_name("N")
        ->capture_default_str();
    cmd->add_option("--lease", a.lease, "Lease length")->type_name("DUR")->capture_default_str();
    cmd->add_option("--wait", a.wait, "Wait this long for a due task")
        ->type_name("DUR")
        ->capture_default_str();
    add(cmd, [&a](Session& s) {
      const CliIo& io = s.io();
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t lease_ms, ParseMillis(a.lease, "--lease"), io);
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t wait_ms, ParseMillis(a.wait, "--wait"), io);
      const json body = {{"max", a.max}, {"lease_ms", lease_ms}, {"wait_ms", wait_ms}};
      // The server may hold the request for the whole wait.
      s.client().set_timeout(s.client().timeout() + std::chrono::milliseconds(wait_ms));
      return s.Simple("POST", QueuePath(a.queue) + "/claim", &body, [&](const Reply& r) {
        const json tasks = Member(r.body, "tasks");
        if (!tasks.is_array() || tasks.empty()) {
          io.err << "no tasks claimed\n";
          return;
        }
        for (const json& t : tasks) {
          io.out << Show(t, "id") << " " << Show(t, "token") << " " << Show(t, "attempt") << " "
                 << (t.contains("payload") ? t["payload"].dump() : "null") << "\n";
        }
      });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("ack", "Report a claimed task done");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    cmd->add_option("--token", a.token, "Lease token from claim")->type_name("N")->required();
    add(cmd, [&a](Session& s) {
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const uint64_t token, ParseToken(a.token), s.io());
      const json body = {{"token", token}};
      return s.Simple("POST", TaskPath(a.id) + "/ack", &body,
                      [&](const Reply&) { s.io().out << "acked " << a.id << "\n"; });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("fail", "Report a claimed task failed");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    cmd->add_option("--token", a.token, "Lease token from claim")->type_name("N")->required();
    cmd->add_option("--error", a.error, "What went wrong")->type_name("TEXT")->required();
    CLI::Option* retry_in =
        cmd->add_option("--retry-in", a.retry_in, "Retry after this long (default: backoff)")
            ->type_name("DUR");
    add(cmd, [=, &a](Session& s) {
      const CliIo& io = s.io();
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const uint64_t token, ParseToken(a.token), io);
      json body = {{"token", token}, {"error", a.error}};
      if (Given(retry_in)) {
        CHRONOQ_CLI_ASSIGN_OR_USAGE(body["retry_in_ms"], ParseMillis(a.retry_in, "--retry-in"), io);
      }
      return s.Simple("POST", TaskPath(a.id) + "/fail", &body, [&](const Reply& r) {
        io.out << "failed " << a.id;
        if (r.body.contains("state")) {
          io.out << ": " << Show(r.body, "state");
          if (Show(r.body, "state") == "scheduled") io.out << ", due " << Show(r.body, "run_at");
        }
        io.out << "\n";
      });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("extend", "Extend the lease on a claimed task");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    cmd->add_option("--token", a.token, "Lease token from claim")->type_name("N")->required();
    cmd->add_option("--lease", a.lease, "New lease length, from now")->type_name("DUR")->required();
    add(cmd, [&a](Session& s) {
      const CliIo& io = s.io();
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const uint64_t token, ParseToken(a.token), io);
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t lease_ms, ParseMillis(a.lease, "--lease"), io);
      const json body = {{"token", token}, {"lease_ms", lease_ms}};
      return s.Simple("POST", TaskPath(a.id) + "/extend", &body, [&](const Reply& r) {
        io.out << "extended " << a.id << ", lease until " << Show(r.body, "lease_until") << "\n";
      });
    });
  }

  // Locks.
  {
    CLI::App* cmd = app.add_subcommand(
        "lock", "Run a command while holding a lock: chronoq lock KEY [options] -- CMD ARGS...");
    cmd->add_option("key", a.key, "Lock key")->type_name("KEY")->required();
    cmd->add_option("command", a.command, "The command and its arguments (after --)")
        ->type_name("CMD")
        ->required();
    cmd->add_option("--wait", a.lock_wait, "Wait this long for the lock (0: try once)")
        ->type_name("DUR")
        ->capture_default_str();
    cmd->add_option("--lease", a.lease, "Lease, extended every third of it while CMD runs")
        ->type_name("DUR")
        ->capture_default_str();
    CLI::Option* owner =
        cmd->add_option("--owner", a.owner, "Shown to others by lock-info")->type_name("NAME");
    add(cmd, [&a, owner](Session& s) { return RunLocked(s, a, owner); });
  }
  {
    CLI::App* cmd = app.add_subcommand("lock-info", "Show a lock's holder and waiters");
    cmd->add_option("key", a.key, "Lock key")->type_name("KEY")->required();
    add(cmd, [&a](Session& s) {
      return s.Simple("GET", LockPath(a.key), nullptr,
                      [&](const Reply& r) { PrintLock(s.io().out, r.body); });
    });
  }

  // Queues.
  {
    CLI::App* cmd = app.add_subcommand("queues", "List queues with task counts");
    add(cmd, [](Session& s) {
      return s.Simple("GET", "/v1/queues", nullptr, [&](const Reply& r) {
        const json queues = Member(r.body, "queues");
        if (!queues.is_array() || queues.empty()) {
          s.io().out << "no queues\n";
          return;
        }
        std::vector<std::vector<std::string>> rows = {
            {"QUEUE", "PAUSED", "SCHEDULED", "RUNNING", "SUCCEEDED", "CANCELLED", "DEAD", "LATE"}};
        for (const json& q : queues) {
          const json counts = Member(q, "counts");
          rows.push_back({Show(q, "name"), Member(q, "paused") == true ? "yes" : "no",
                          Show(counts, "scheduled"), Show(counts, "running"),
                          Show(counts, "succeeded"), Show(counts, "cancelled"),
                          Show(counts, "dead"), ShowMillis(Member(q, "oldest_due_lateness_ms"))});
        }
        PrintTable(s.io().out, rows);
      });
    });
  }
  {
    CLI::App* queue = app.add_subcommand("queue", "Change a queue's settings");
    queue->require_subcommand(1);
    CLI::App* cmd = queue->add_subcommand("set", "Change a queue's settings");
    cmd->add_option("queue", a.queue, "Queue name")->type_name("")->required();
    CLI::Option* concurrency =
        cmd->add_option("--concurrency", a.concurrency, "Tasks running at once")->type_name("N");
    CLI::Option* max_in_flight =
        cmd->add_option("--max-in-flight", a.concurrency, "Another name for --concurrency")
            ->type_name("N")
            ->excludes(concurrency);
    CLI::Option* in_flight_per_key =
        cmd->add_option("--max-in-flight-per-key", a.max_in_flight_per_key,
                        "Tasks of one key started and unfinished at once (default 1)")
            ->type_name("N");
    CLI::Option* pending_per_key =
        cmd->add_option("--max-pending-per-key", a.max_pending_per_key,
                        "Tasks of one key waiting to start; enqueues past it fail")
            ->type_name("N");
    CLI::Option* max_attempts =
        cmd->add_option("--max-attempts", a.max_attempts, "Default attempt limit")->type_name("N");
    CLI::Option* base =
        cmd->add_option("--backoff-base", a.backoff_base, "First retry delay")->type_name("DUR");
    CLI::Option* cap =
        cmd->add_option("--backoff-cap", a.backoff_cap, "Longest retry delay")->type_name("DUR");
    cap->needs(base);  // the server wants a base with any backoff
    CLI::Option* retention =
        cmd->add_option("--retention", a.retention, "How long finished tasks stay visible")
            ->type_name("DUR");
    CLI::Option* rate_limit = cmd->add_option("--rate-limit", a.rate_limit,
                                              "At most N claims per sliding period, e.g. 100/1s")
                                  ->type_name("N/DUR");
    // --reset names a setting as its flag does; the body names it as the API.
    static const std::map<std::string, std::string> kResettable = {
        {"concurrency", "concurrency"},
        {"max-in-flight", "concurrency"},
        {"max-in-flight-per-key", "max_in_flight_per_key"},
        {"max-pending-per-key", "max_pending_per_key"},
        {"max-attempts", "max_attempts"},
        {"backoff", "backoff"},
        {"retention", "retention_ms"},
        {"rate-limit", "rate_limit"}};
    cmd->add_option("--reset", a.reset,
                    "Put a setting back to its default (repeatable): concurrency, max-in-flight, "
                    "max-in-flight-per-key, max-pending-per-key, max-attempts, backoff, "
                    "retention, rate-limit")
        ->type_name("SETTING")
        ->check(CLI::IsMember(kResettable));
    add(cmd, [=, &a](Session& s) {
      const CliIo& io = s.io();
      json body = json::object();
      if (Given(concurrency) || Given(max_in_flight)) body["concurrency"] = a.concurrency;
      if (Given(in_flight_per_key)) body["max_in_flight_per_key"] = a.max_in_flight_per_key;
      if (Given(pending_per_key)) body["max_pending_per_key"] = a.max_pending_per_key;
      if (Given(max_attempts)) body["max_attempts"] = a.max_attempts;
      if (Given(base)) {
        CHRONOQ_CLI_ASSIGN_OR_USAGE(body["backoff"]["base_ms"],
                                    ParseMillis(a.backoff_base, "--backoff-base"), io);
      }
      if (Given(cap)) {
        CHRONOQ_CLI_ASSIGN_OR_USAGE(body["backoff"]["cap_ms"],
                                    ParseMillis(a.backoff_cap, "--backoff-cap"), io);
      }
      if (Given(retention)) {
        CHRONOQ_CLI_ASSIGN_OR_USAGE(body["retention_ms"], ParseMillis(a.retention, "--retention"),
                                    io);
      }
      if (Given(rate_limit)) {
        const size_t slash = a.rate_limit.find('/');
        int64_t count = 0;
        const std::string_view n = std::string_view(a.rate_limit).substr(0, slash);
        const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
        if (slash == std::string::npos || ec != std::errc() || end != n.data() + n.size()) {
          return Usage(io,
                       Status::InvalidArgument("--rate-limit", "expected N/DURATION, e.g. 100/1s"));
        }
        body["rate_limit"]["count"] = count;
        CHRONOQ_CLI_ASSIGN_OR_USAGE(body["rate_limit"]["period_ms"],
                                    ParseMillis(a.rate_limit.substr(slash + 1), "--rate-limit"),
                                    io);
      }
      for (const std::string& name : a.reset) {
        const std::string& field = kResettable.at(name);
        if (body.contains(field) && !body[field].is_null()) {
          return Usage(io, Status::InvalidArgument("--reset", name + " is also given a value"));
        }
        body[field] = nullptr;
      }
      if (body.empty()) {
        return Usage(io, Status::InvalidArgument("queue set", "nothing to change"));
      }
      return s.Simple("PUT", QueuePath(a.queue), &body,
                      [&](const Reply&) { io.out << "updated queue " << a.queue << "\n"; });
    });
  }
  for (const std::string_view verb : {"pause", "resume"}) {
    const bool pause = verb == "pause";
    CLI::App* cmd = app.add_subcommand(
        std::string(verb), pause ? "Stop handing out a queue's tasks" : "Resume a paused queue");
    cmd->add_option("queue", a.queue, "Queue name")->type_name("")->required();
    add(cmd, [&a, pause](Session& s) {
      const json body = json::object();
      return s.Simple(
          "POST", QueuePath(a.queue) + (pause ? "/pause" : "/resume"), &body,
          [&](const Reply&) { s.io().out << (pause ? "paused " : "resumed ") << a.queue << "\n"; });
    });
  }

  // Schedules.
  {
    CLI::App* schedule = app.add_subcommand("schedule", "Manage recurring schedules");
    schedule->require_subcommand(1);
    {
      CLI::App* cmd = schedule->add_subcommand("add", "Create a recurring schedule");
      cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
      cmd->add_option("--queue,-q", a.queue, "Queue of its tasks")->type_name("QUEUE")->required();
      CLI::Option* cron =
          cmd->add_option("--cron", a.cron, "Cron expression: 5 or 6 fields, or a macro")
              ->type_name("EXPR");
      CLI::Option* every =
          cmd->add_option("--every", a.every, "Fixed rate: a run every DUR")->type_name("DUR");
      CLI::Option* fixed_delay =
          cmd->add_option("--fixed-delay", a.fixed_delay, "A run DUR after the previous finished")
              ->type_name("DUR");
      every->excludes(cron);
      fixed_delay->excludes(cron)->excludes(every);
      CLI::Option* tz = cmd->add_option("--tz", a.tz, "IANA zone of the cron fields (default UTC)")
                            ->type_name("ZONE")
                            ->needs(cron);
      CLI::Option* dst_gap =
          cmd->add_option("--dst-gap", a.dst_gap, "Fixed-time cron rule in a DST gap")
              ->check(CLI::IsMember({"run_after", "skip"}))
              ->needs(cron);
      CLI::Option* dst_repeat =
          cmd->add_option("--dst-repeat", a.dst_repeat, "Fixed-time cron rule in a DST repeat")
              ->check(CLI::IsMember({"once", "twice"}))
              ->needs(cron);
      CLI::Option* start =
          cmd->add_option("--start", a.start,
                          "every: the anchor; fixed delay: the first run; cron: none before it")
              ->type_name("TIME");
      CLI::Option* payload =
          cmd->add_option("--payload", a.payload, "A JSON object ('-' reads stdin)")
              ->type_name("JSON");
      CLI::Option* misfire =
          cmd->add_option("--misfire", a.misfire, "Missed runs (default run_once)")
              ->check(CLI::IsMember({"skip", "run_once", "run_all"}));
      CLI::Option* max_catchup =
          cmd->add_option("--max-catchup", a.max_catchup, "run_all: at most this many missed runs")
              ->type_name("N");
      CLI::Option* overlap =
          cmd->add_option("--overlap", a.overlap, "Runs due while one still runs (default skip)")
              ->check(CLI::IsMember({"allow", "skip", "queue_one"}));
      CLI::Option* priority =
          cmd->add_option("--priority", a.priority, "Priority of its tasks")->type_name("N");
      CLI::Option* max_attempts =
          cmd->add_option("--max-attempts", a.max_attempts, "Attempt limit of its tasks")
              ->type_name("N");
      add(cmd, [=, &a](Session& s) {
        const CliIo& io = s.io();
        if (!Given(cron) && !Given(every) && !Given(fixed_delay)) {
          return Usage(
              io, Status::InvalidArgument("schedule add", "give --cron, --every or --fixed-delay"));
        }
        json body = {{"name", a.name}, {"queue", a.queue}};
        if (Given(cron)) body["cron"] = a.cron;
        if (Given(every)) {
          CHRONOQ_CLI_ASSIGN_OR_USAGE(body["every_ms"], ParseMillis(a.every, "--every"), io);
        }
        if (Given(fixed_delay)) {
          CHRONOQ_CLI_ASSIGN_OR_USAGE(body["fixed_delay_ms"],
                                      ParseMillis(a.fixed_delay, "--fixed-delay"), io);
        }
        if (Given(tz)) body["tz"] = a.tz;
        if (Given(dst_gap)) body["dst_gap"] = a.dst_gap;
        if (Given(dst_repeat)) body["dst_repeat"] = a.dst_repeat;
        if (Given(start)) {
          CHRONOQ_CLI_ASSIGN_OR_USAGE(body["start"], ParseRunAt(a.start, "--start"), io);
        }
        CHRONOQ_CLI_ASSIGN_OR_USAGE(std::optional<json> p, ReadPayload(a, payload, nullptr, io),
                                    io);
        if (p.has_value()) body["payload"] = std::move(*p);
        if (Given(misfire)) body["misfire"] = a.misfire;
        if (Given(max_catchup)) body["max_catchup"] = a.max_catchup;
        if (Given(overlap)) body["overlap"] = a.overlap;
        if (Given(priority)) body["priority"] = a.priority;
        if (Given(max_attempts)) body["max_attempts"] = a.max_attempts;
        return s.Simple("POST", "/v1/schedules", &body, [&](const Reply& r) {
          io.out << "created schedule " << Show(r.body, "name") << ", next run "
                 << Show(r.body, "next_run") << "\n";
        });
      });
    }
    {
      CLI::App* cmd = schedule->add_subcommand("list", "List schedules")->alias("ls");
      CLI::Option* queue =
          cmd->add_option("--queue,-q", a.queue, "Only this queue")->type_name("QUEUE");
      CLI::Option* limit =
          cmd->add_option("--limit", a.limit, "Schedules per page")->type_name("N");
      CLI::Option* cursor =
          cmd->add_option("--cursor", a.cursor, "Start from this page cursor")->type_name("CURSOR");
      cmd->add_flag("--all", a.all, "Follow the cursor to the last page")->excludes(cursor);
      add(cmd, [=, &a](Session& s) {
        std::string query;
        if (Given(queue)) AddParam(query, "queue", a.queue);
        if (Given(limit)) AddParam(query, "limit", std::to_string(a.limit));
        return ListPages(s, "/v1/schedules", query, "schedules", a.cursor, a.all,
                         PrintScheduleTable);
      });
    }
    {
      CLI::App* cmd = schedule->add_subcommand("get", "Show a schedule");
      cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
      add(cmd, [&a](Session& s) {
        return s.Simple("GET", SchedulePath(a.name), nullptr,
                        [&](const Reply& r) { PrintSchedule(s.io().out, r.body); });
      });
    }
    {
      CLI::App* cmd = schedule->add_subcommand("rm", "Delete a schedule and its next run");
      cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
      add(cmd, [&a](Session& s) {
        return s.Simple("DELETE", SchedulePath(a.name), nullptr,
                        [&](const Reply&) { s.io().out << "deleted schedule " << a.name << "\n"; });
      });
    }
    for (const std::string_view verb : {"pause", "resume"}) {
      const bool pause = verb == "pause";
      CLI::App* cmd = schedule->add_subcommand(
          std::string(verb), pause ? "Stop a schedule's runs" : "Resume a paused schedule");
      cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
      add(cmd, [&a, pause](Session& s) {
        const json body = json::object();
        return s.Simple("POST", SchedulePath(a.name) + (pause ? "/pause" : "/resume"), &body,
                        [&](const Reply& r) {
                          s.io().out << (pause ? "paused schedule " : "resumed schedule ")
                                     << a.name;
                          if (!pause) s.io().out << ", next run " << Show(r.body, "next_run");
                          s.io().out << "\n";
                        });
      });
    }
    {
      CLI::App* cmd = schedule->add_subcommand("next", "Print a schedule's coming run times");
      cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
      CLI::Option* count =
          cmd->add_option("--count", a.count, "How many run times (1-1000, default 10)")
              ->type_name("N");
      add(cmd, [=, &a](Session& s) {
        std::string query;
        if (Given(count)) {
          if (a.count < 1 || a.count > 1000) {
            return Usage(s.io(), Status::InvalidArgument("--count", "must be 1-1000"));
          }
          AddParam(query, "count", std::to_string(a.count));
        }
        return s.Simple("GET", SchedulePath(a.name) + "/next" + query, nullptr,
                        [&](const Reply& r) {
                          const json next = Member(r.body, "next");
                          if (!next.is_array()) return;
                          for (const json& t : next) s.io().out << t.get<std::string>() << "\n";
                        });
      });
    }
  }

  // The cron calculator: no server needed.
  {
    CLI::App* cron = app.add_subcommand("cron", "Work with cron expressions (no server needed)");
    cron->require_subcommand(1);
    CLI::App* cmd = cron->add_subcommand("next", "Print the next fire times of a cron expression");
    cmd->add_option("expression", a.cron, "5 or 6 fields, or a macro such as @daily")
        ->type_name("EXPR")
        ->required();
    cmd->add_option("--tz", a.tz, "IANA time zone the fields are read in")
        ->type_name("ZONE")
        ->capture_default_str();
    CLI::Option* from =
        cmd->add_option("--from", a.from,
                        "Start after this instant (RFC 3339 or epoch ms; default now)")
            ->type_name("TIME");
    cmd->add_option("--count", a.count, "How many fire times (1-1000)")->capture_default_str();
    commands.push_back(
        {cmd, nullptr, [&a, from](const CliIo& io) {
           if (a.count < 1 || a.count > 1000) {
             return Usage(io, Status::InvalidArgument("--count", "must be 1-1000"));
           }
           Timestamp t = std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
           if (Given(from)) {
             CHRONOQ_CLI_ASSIGN_OR_USAGE(const json at, ParseRunAt(a.from, "--from"), io);
             if (at.is_string()) {
               CHRONOQ_CLI_ASSIGN_OR_USAGE(t, ParseTime(at.get<std::string>(), "--from"), io);
             } else {
               t = Timestamp(std::chrono::milliseconds(at.get<int64_t>()));
             }
           }
           CHRONOQ_CLI_ASSIGN_OR_USAGE(const CronExpr expr, CronExpr::Parse(a.cron, {.tz = a.tz}),
                                       io);
           for (int i = 0; i < a.count; ++i) {
             const std::optional<Timestamp> next = expr.Next(t);
             if (!next) break;
             io.out << FormatTime(*next) << "\n";
             t = *next;
           }
           return kExitOk;
         }});
  }

  // Server.
  {
    CLI::App* cmd = app.add_subcommand("health", "Check that the server is up");
    add(cmd, [](Session& s) {
      return s.Simple("GET", "/healthz", nullptr,
                      [&](const Reply& r) { s.io().out << Show(r.body, "status") << "\n"; });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("version", "Show the client and server versions");
    add(cmd, [](Session& s) {
      if (!s.json_output()) s.io().out << "client " << CHRONOQ_VERSION << "\n";
      return s.Simple("GET", "/v1/version", nullptr, [&](const Reply& r) {
        s.io().out << "server " << Show(r.body, "version") << "\n";
      });
    });
  }
  return commands;
}

// The token from --token-file, else CHRONOQ_TOKEN, else none.
Result<std::string> LoadToken(const Args& a, const CLI::Option* token_file, const CliIo& io) {
  if (Given(token_file)) {
    CHRONOQ_ASSIGN_OR_RETURN(std::string token, ReadFile(a.token_file, "--token-file"));
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (token.empty()) return Status::InvalidArgument("--token-file", a.token_file + " is empty");
    return token;
  }
  return io.getenv("CHRONOQ_TOKEN").value_or("");
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const CliIo& io) {
  Args a;
  CLI::App app("chronoq: the command-line client of the chronoqd task server", "chronoq");
  app.require_subcommand(1);
  // Global flags may also follow the subcommand.
  app.fallthrough();
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  app.footer(
      "Global options (before or after the command): --url, --token-file, --json, --timeout.\n"
      "Environment: CHRONOQ_URL (default for --url), CHRONOQ_TOKEN (the API token).\n"
      "Exit codes: 0 ok, 1 the server answered with an error, 2 bad command line,\n"
      "3 the server could not be reached; `lock` exits with its command's status,\n"
      "or 75 when the lock stayed busy.");
  CLI::Option* url =
      app.add_option("--url", a.url, "Server URL (default " + std::string(kDefaultUrl) + ")")
          ->type_name("URL");
  CLI::Option* token_file =
      app.add_option("--token-file", a.token_file, "File holding the API token")->type_name("FILE");
  app.add_flag("--json", a.json, "Print the server's JSON instead of a summary");
  app.add_option("--timeout", a.timeout, "Give up on a request after this long")
      ->type_name("DUR")
      ->capture_default_str();
  const std::vector<Command> commands = AddCommands(app, a);

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
  if (Result<BaseUrl> parsed = ParseBaseUrl(base, url_field); !parsed.ok()) {
    return Usage(io, parsed.status());
  }
  CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t timeout_ms, ParseMillis(a.timeout, "--timeout"), io);
  if (timeout_ms <= 0) return Usage(io, Status::InvalidArgument("--timeout", "must be positive"));
  CHRONOQ_CLI_ASSIGN_OR_USAGE(std::string token, LoadToken(a, token_file, io), io);
  CHRONOQ_CLI_ASSIGN_OR_USAGE(std::unique_ptr<HttpClient> client,
                              HttpClient::Create(base, std::chrono::milliseconds(timeout_ms)), io);

  Session session(io, *client, std::move(token), a.json);
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
  };
  return RunCli(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc), io);
}

}  // namespace chronoq::cli
