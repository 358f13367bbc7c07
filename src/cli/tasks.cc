// The task commands: enqueue, get, cancel, reschedule, retry, list (ls), and
// the worker's claim, ack, fail and extend.
#include <algorithm>
#include <ostream>

#include "cli/cli_common.h"
#include "common/text.h"

namespace chronoq::cli {
namespace {

// Every flag's value of this group.
struct TaskArgs {
  std::string id;
  std::string queue;
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
  std::string key;
  bool attempts = false;
};

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
  if (t.contains("lease_until")) rows.push_back({"lease_until", Show(t, "lease_until")});
  if (t.contains("lease_token")) rows.push_back({"lease_token", Show(t, "lease_token")});
  // The lease holder while it runs; who ran it last afterwards.
  if (t.contains("worker")) rows.push_back({"worker", Show(t, "worker")});
  rows.push_back({"payload", t.contains("payload") ? t["payload"].dump() : "-"});
  for (auto& row : rows) row[0] += ":";
  PrintTable(out, rows);
}

// The `attempts` of GET /v1/tasks/{id}?attempts=true, one row each, oldest
// first; the error (else the response) is its first line, cut to 60 bytes.
void PrintAttempts(std::ostream& out, const json& attempts) {
  if (!attempts.is_array() || attempts.empty()) {
    out << "attempts: none\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"#", "OUTCOME", "STARTED_AT", "DURATION", "NODE", "WORKER", "ERROR/RESPONSE"}};
  for (const json& a : attempts) {
    std::string detail = Member(a, "error").is_string() ? Show(a, "error") : Show(a, "response");
    detail = detail.substr(0, detail.find('\n'));
    if (detail.size() > 60) detail = TruncateUtf8(detail, 57) + "...";
    rows.push_back({Show(a, "attempt"), Show(a, "outcome"), Show(a, "started_at"),
                    ShowMillis(Member(a, "duration_ms")), Show(a, "node"), Show(a, "worker"),
                    detail});
  }
  out << "attempts:\n";
  PrintTable(out, rows);
}

// The --run-at (alias --at) and --delay (alias --in) flags of a command (mutually exclusive).
struct When {
  CLI::Option* run_at;
  CLI::Option* delay;
};

When AddWhen(CLI::App* cmd, TaskArgs& a) {
  CLI::Option* run_at =
      cmd->add_option("--run-at,--at", a.run_at, "When to run: RFC 3339 time or epoch ms")
          ->type_name("TIME");
  CLI::Option* delay =
      cmd->add_option("--delay,--in", a.delay, "When to run: after this long (90s, 5m, 7d)")
          ->type_name("DUR");
  delay->excludes(run_at);
  return {run_at, delay};
}

// Sets body.run_at or body.delay_ms from the flags, if given.
Status PutWhen(const TaskArgs& a, When when, json& body) {
  if (Given(when.run_at)) {
    CHRONOQ_ASSIGN_OR_RETURN(body["run_at"], ParseRunAt(a.run_at, "--run-at"));
  }
  if (Given(when.delay)) {
    CHRONOQ_ASSIGN_OR_RETURN(body["delay_ms"], ParseMillis(a.delay, "--delay"));
  }
  return Status::Ok();
}

void AddEnqueue(CommandTable& table, TaskArgs& a) {
  CLI::App* cmd = table.app().add_subcommand("enqueue", "Schedule a task");
  cmd->add_option("--queue,-q", a.queue, "Queue name")->type_name("QUEUE")->required();
  PayloadFlags& payload = table.Own<PayloadFlags>();
  payload.text_opt =
      cmd->add_option("--payload", payload.text,
                      "Payload as JSON text, @FILE to read it from FILE ('-' or @-: stdin)")
          ->type_name("JSON");
  payload.file_opt = cmd->add_option("--payload-file", payload.file,
                                     "File holding the JSON payload ('-' is stdin)")
                         ->type_name("FILE");
  payload.file_opt->excludes(payload.text_opt);
  const When when = AddWhen(cmd, a);
  CLI::Option* id = cmd->add_option("--id", a.id, "Task id (default: generated)")->type_name("ID");
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
  table.Add(cmd, [=, &a, &payload](Session& s) {
    const CliIo& io = s.io();
    json body = {{"queue", a.queue}};
    CHRONOQ_CLI_ASSIGN_OR_USAGE(std::optional<json> p, ReadPayload(payload, io), io);
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

// get, cancel, reschedule, retry: one task id each.
void AddOneTaskCommands(CommandTable& table, TaskArgs& a) {
  CLI::App& app = table.app();
  {
    CLI::App* cmd = app.add_subcommand("get", "Show a task");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    cmd->add_flag("--attempts", a.attempts, "Also show its last attempts");
    table.Add(cmd, [&a](Session& s) {
      const std::string path = TaskPath(a.id) + (a.attempts ? "?attempts=true" : "");
      return s.Simple("GET", path, nullptr, [&](const Reply& r) {
        PrintTask(s.io().out, r.body);
        if (a.attempts) PrintAttempts(s.io().out, Member(r.body, "attempts"));
      });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("cancel", "Cancel a scheduled task");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    table.Add(cmd, [&a](Session& s) {
      return s.Simple("DELETE", TaskPath(a.id), nullptr, [&](const Reply& r) {
        s.io().out << "cancelled " << Show(r.body, "id") << "\n";
      });
    });
  }
  {
    CLI::App* cmd = app.add_subcommand("reschedule", "Move a scheduled task");
    cmd->add_option("id", a.id, "Task id")->type_name("")->required();
    const When when = AddWhen(cmd, a);
    PayloadFlags& payload = table.Own<PayloadFlags>();
    payload.text_opt =
        cmd->add_option("--payload", payload.text, "New payload as JSON text, or @FILE")
            ->type_name("JSON");
    table.Add(cmd, [=, &a, &payload](Session& s) {
      const CliIo& io = s.io();
      if (!Given(when.run_at) && !Given(when.delay)) {
        return Usage(io, Status::InvalidArgument("reschedule", "give --run-at or --delay"));
      }
      json body = json::object();
      if (Status st = PutWhen(a, when, body); !st.ok()) return Usage(io, st);
      CHRONOQ_CLI_ASSIGN_OR_USAGE(std::optional<json> p, ReadPayload(payload, io), io);
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
    table.Add(cmd, [&a](Session& s) {
      const json body = json::object();
      return s.Simple("POST", TaskPath(a.id) + "/retry", &body, [&](const Reply& r) {
        s.io().out << "requeued " << Show(r.body, "id") << ", due " << Show(r.body, "run_at")
                   << "\n";
      });
    });
  }
}

void AddList(CommandTable& table, TaskArgs& a) {
  CLI::App* cmd = table.app().add_subcommand("list", "List tasks")->alias("ls");
  CLI::Option* queue =
      cmd->add_option("--queue,-q", a.queue, "Only this queue")->type_name("QUEUE");
  CLI::Option* state =
      cmd->add_option("--state", a.state, "Only this state")->check(CLI::IsMember(kTaskStates));
  CLI::Option* key = cmd->add_option("--key", a.key, "Only this key")->type_name("KEY");
  CLI::Option* limit = cmd->add_option("--limit", a.limit, "Tasks per page")->type_name("N");
  CLI::Option* cursor =
      cmd->add_option("--cursor", a.cursor, "Start from this page cursor")->type_name("CURSOR");
  CLI::Option* all = cmd->add_flag("--all", a.all, "Follow the cursor to the last page");
  all->excludes(cursor);
  table.Add(cmd, [=, &a](Session& s) {
    std::string query;
    if (Given(queue)) AddParam(query, "queue", a.queue);
    if (Given(state)) AddParam(query, "state", a.state);
    if (Given(key)) AddParam(query, "key", a.key);
    if (Given(limit)) AddParam(query, "limit", std::to_string(a.limit));
    return ListPages(s, "/v1/tasks", query, "tasks", a.cursor, a.all, PrintTaskTable);
  });
}

// Workers by hand: claim, ack, fail, extend.
void AddWorkerCommands(CommandTable& table, TaskArgs& a) {
  CLI::App& app = table.app();
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
    table.Add(cmd, [&a](Session& s) {
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
    table.Add(cmd, [&a](Session& s) {
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
    table.Add(cmd, [=, &a](Session& s) {
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
    table.Add(cmd, [&a](Session& s) {
      const CliIo& io = s.io();
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const uint64_t token, ParseToken(a.token), io);
      CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t lease_ms, ParseMillis(a.lease, "--lease"), io);
      const json body = {{"token", token}, {"lease_ms", lease_ms}};
      return s.Simple("POST", TaskPath(a.id) + "/extend", &body, [&](const Reply& r) {
        io.out << "extended " << a.id << ", lease until " << Show(r.body, "lease_until") << "\n";
      });
    });
  }
}

}  // namespace

void AddTaskCommands(CommandTable& table) {
  TaskArgs& a = table.Own<TaskArgs>();
  AddEnqueue(table, a);
  AddOneTaskCommands(table, a);
  AddList(table, a);
  AddWorkerCommands(table, a);
}

}  // namespace chronoq::cli
