// The bulk commands: `bulk cancel|reschedule|retry|delete` (one action on
// every task a filter matches, POST /v1/tasks:bulk), `bulk show [ID]` and
// `bulk stop ID`.
//
// An action first asks for a dry run, prints what it would do, and unless
// --yes asks for a "y" on stdin; then it starts the job and polls it until it
// ends, drawing a progress bar on a terminal (a plain line per change
// otherwise). It exits 0 when the job is done, 1 when it failed or was
// stopped.
#include <chrono>
#include <ostream>
#include <string>
#include <thread>

#include "cli/cli_common.h"

namespace chronoq::cli {
namespace {

struct BulkArgs {
  std::string queue;
  std::string state;
  std::string key;
  std::string id_prefix;
  std::string run_at_from;
  std::string run_at_to;
  bool all = false;
  std::string at;
  std::string shift;
  bool dry_run = false;
  bool yes = false;
  std::string poll = "1s";
  std::string id;
};

// The verb for what each action did, for the summary.
std::string Did(const std::string& action) {
  if (action == "cancel") return "cancelled";
  if (action == "reschedule") return "rescheduled";
  if (action == "retry") return "requeued";
  return "deleted";
}

// "3 running, 1 scheduled" from a job's `skipped`.
std::string Skips(const json& skipped) {
  std::string out;
  if (!skipped.is_object()) return out;
  for (const auto& [reason, n] : skipped.items()) {
    if (!out.empty()) out += ", ";
    out += ShowCount(n.get<int64_t>()) + " " + reason;
  }
  return out;
}

// "rescheduled 998 of 1,000 matching tasks; skipped 2 (2 running)".
std::string Summary(const json& job, bool would) {
  const std::string action = Show(job, "action");
  std::string line = (would ? "would have " : "") + Did(action) + " " +
                     ShowCount(job.value("applied", int64_t{0})) + " of " +
                     ShowCount(job.value("matched", int64_t{0})) + " matching tasks";
  const std::string skips = Skips(Member(job, "skipped"));
  if (!skips.empty()) {
    const int64_t skipped = job.value("matched", int64_t{0}) - job.value("applied", int64_t{0});
    line += "; skipped " + ShowCount(skipped) + " (" + skips + ")";
  }
  return line;
}

// "[#####---------------]  25%  250 of 1,000 tasks" (no bar without a total).
std::string BulkProgressLine(const json& job, int64_t total) {
  const int64_t matched = job.value("matched", int64_t{0});
  std::string counts = ShowCount(matched) + (total > 0 ? " of " + ShowCount(total) : "") +
                       " tasks  " + ShowCount(job.value("applied", int64_t{0})) + " " +
                       Did(Show(job, "action"));
  if (total <= 0) return counts;
  return ProgressBar(static_cast<double>(matched) / static_cast<double>(total)) + "  " + counts;
}

// The request body from the flags; errors name the flag.
Result<json> BulkBody(const std::string& action, const BulkArgs& a, const CLI::App& cmd) {
  json filter = json::object();
  auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  if (given("--queue")) filter["queue"] = a.queue;
  if (given("--state")) filter["state"] = a.state;
  if (given("--key")) filter["key"] = a.key;
  if (given("--id-prefix")) filter["id_prefix"] = a.id_prefix;
  if (given("--run-at-from")) {
    CHRONOQ_ASSIGN_OR_RETURN(filter["run_at_from"], ParseRunAt(a.run_at_from, "--run-at-from"));
  }
  if (given("--run-at-to")) {
    CHRONOQ_ASSIGN_OR_RETURN(filter["run_at_to"], ParseRunAt(a.run_at_to, "--run-at-to"));
  }
  if (a.all) filter["all"] = true;
  if (filter.empty()) {
    return Status::InvalidArgument(
        "bulk",
        "give a filter (--queue, --state, --key, --id-prefix, --run-at-from, "
        "--run-at-to), or --all for every task");
  }
  json body = {{"filter", filter}, {"action", action}};
  if (action == "reschedule") {
    if (given("--at") == given("--shift")) {
      return Status::InvalidArgument("bulk reschedule", "give --at or --shift (one of them)");
    }
    if (given("--at")) {
      CHRONOQ_ASSIGN_OR_RETURN(body["run_at"], ParseRunAt(a.at, "--at"));
    } else {
      // A shift may be negative: "-1h" moves every task an hour earlier.
      const bool earlier = a.shift.starts_with('-');
      CHRONOQ_ASSIGN_OR_RETURN(const int64_t ms,
                               ParseMillis(earlier ? a.shift.substr(1) : a.shift, "--shift"));
      body["shift_ms"] = earlier ? -ms : ms;
    }
  }
  return body;
}

// Polls the job until it ends, drawing progress; returns the last answer's
// exit code and the job in `job`.
int Follow(Session& s, json& job, int64_t total, Duration poll) {
  const CliIo& io = s.io();
  const std::string path = "/v1/bulk/" + PercentEncode(Show(job, "id"));
  std::string last_line;
  bool drawn = false;
  for (;;) {
    if (job.value("state", "") != "running") break;
    std::this_thread::sleep_for(poll);  // the job runs in chronoqd; nothing to wake us
    Reply reply;
    if (const int code = s.Call("GET", path, nullptr, reply); code != kExitOk) {
      if (drawn) io.err << "\n";
      return code;
    }
    job = reply.body;
    const std::string line = BulkProgressLine(job, total);
    if (io.err_is_terminal) {
      io.err << "\r\x1b[K" << line << std::flush;
      drawn = true;
    } else if (line != last_line) {
      io.err << line << "\n";
    }
    last_line = line;
  }
  if (drawn) io.err << "\r\x1b[K" << std::flush;
  return kExitOk;
}

int RunAction(Session& s, const std::string& action, const BulkArgs& a, const CLI::App& cmd) {
  const CliIo& io = s.io();
  CHRONOQ_CLI_ASSIGN_OR_USAGE(json body, BulkBody(action, a, cmd), io);
  CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t poll_ms, ParseMillis(a.poll, "--poll"), io);
  if (poll_ms < 1) return Usage(io, Status::InvalidArgument("--poll", "must be positive"));

  // First what it would do: for the confirmation, and the progress bar's total.
  json dry_body = body;
  dry_body["dry_run"] = true;
  Reply dry;
  if (const int code = s.Call("POST", "/v1/tasks:bulk", &dry_body, dry); code != kExitOk) {
    return code;
  }
  if (a.dry_run) {
    if (s.json_output()) {
      s.PrintRaw(dry.raw);
    } else {
      io.out << Summary(dry.body, /*would=*/true) << " (dry run: nothing changed)\n";
    }
    return kExitOk;
  }
  const int64_t total = dry.body.value("matched", int64_t{0});
  if (!a.yes) {
    io.err << Summary(dry.body, /*would=*/true) << ".\nApply? [y/N] " << std::flush;
    std::string answer;
    std::getline(io.in, answer);
    if (answer != "y" && answer != "yes") {
      io.err << "error: not confirmed: nothing changed (--yes applies without asking)\n";
      return kExitUsage;
    }
  }
  Reply started;
  if (const int code = s.Call("POST", "/v1/tasks:bulk", &body, started); code != kExitOk) {
    return code;
  }
  json job = started.body;
  if (const int code = Follow(s, job, total, std::chrono::milliseconds(poll_ms)); code != kExitOk) {
    return code;
  }
  const std::string state = job.value("state", "");
  if (s.json_output()) {
    s.PrintRaw(job.dump());
  } else {
    io.out << Summary(job, /*would=*/false) << "; job " << Show(job, "id") << " " << state << "\n";
  }
  if (state == "done") return kExitOk;
  if (state == "failed") io.err << "error: bulk job failed: " << Show(job, "error") << "\n";
  if (state == "cancelled") io.err << "error: bulk job was stopped before the end\n";
  return kExitServerError;
}

void PrintJobTable(std::ostream& out, const json& jobs) {
  if (!jobs.is_array() || jobs.empty()) {
    out << "no bulk jobs\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "ACTION", "STATE", "MATCHED", "APPLIED", "STARTED_AT"}};
  for (const json& j : jobs) {
    rows.push_back({Show(j, "id"), Show(j, "action"), Show(j, "state"), Show(j, "matched"),
                    Show(j, "applied"), Show(j, "started_at")});
  }
  PrintTable(out, rows);
}

}  // namespace

void AddBulkCommands(CommandTable& table) {
  BulkArgs& a = table.Own<BulkArgs>();
  CLI::App* bulk = table.app().add_subcommand(
      "bulk", "One action on every task a filter matches (POST /v1/tasks:bulk), and its jobs");
  bulk->require_subcommand(1);
  for (const char* action : {"cancel", "reschedule", "retry", "delete"}) {
    const std::string name = action;
    const std::string what =
        name == "cancel"       ? "Cancel the scheduled tasks a filter matches"
        : name == "reschedule" ? "Move the scheduled tasks a filter matches (--at or --shift)"
        : name == "retry"      ? "Schedule the dead tasks a filter matches again, now"
                               : "Delete the finished tasks a filter matches";
    CLI::App* cmd = bulk->add_subcommand(name, what);
    cmd->add_option("--queue,-q", a.queue, "Only this queue")->type_name("QUEUE");
    cmd->add_option("--state", a.state, "Only this state")->check(CLI::IsMember(kTaskStates));
    cmd->add_option("--key", a.key, "Only this ordering key")->type_name("KEY");
    cmd->add_option("--id-prefix", a.id_prefix, "Only ids starting with this")->type_name("P");
    cmd->add_option("--run-at-from", a.run_at_from, "Only run_at at or after this")
        ->type_name("TIME");
    cmd->add_option("--run-at-to", a.run_at_to, "Only run_at before this")->type_name("TIME");
    cmd->add_flag("--all", a.all, "Every task (instead of a filter)");
    if (name == "reschedule") {
      cmd->add_option("--at,--run-at", a.at, "Move each task to this time")->type_name("TIME");
      cmd->add_option("--shift", a.shift, "Move each task's run_at by this (-1h: earlier)")
          ->type_name("DUR");
    }
    cmd->add_flag("--dry-run", a.dry_run, "Only count what it would do");
    cmd->add_flag("--yes,-y", a.yes, "Do not ask for confirmation");
    cmd->add_option("--poll", a.poll, "How often to read the job's progress")
        ->type_name("DUR")
        ->capture_default_str();
    table.Add(cmd, [&a, name, cmd](Session& s) { return RunAction(s, name, a, *cmd); });
  }
  {
    CLI::App* cmd = bulk->add_subcommand("show", "Show a bulk job, or list them");
    CLI::Option* id = cmd->add_option("id", a.id, "Job id")->type_name("");
    table.Add(cmd, [&a, id](Session& s) {
      if (!Given(id)) {
        return s.Simple("GET", "/v1/bulk", nullptr,
                        [&](const Reply& r) { PrintJobTable(s.io().out, r.body["jobs"]); });
      }
      return s.Simple("GET", "/v1/bulk/" + PercentEncode(a.id), nullptr, [&](const Reply& r) {
        s.io().out << Show(r.body, "id") << " " << Show(r.body, "state") << ": "
                   << Summary(r.body, /*would=*/false) << "\n";
        if (!Member(r.body, "error").is_null()) {
          s.io().out << "error: " << Show(r.body, "error") << "\n";
        }
      });
    });
  }
  {
    CLI::App* cmd = bulk->add_subcommand("stop", "Stop a running bulk job after its chunk");
    cmd->add_option("id", a.id, "Job id")->type_name("")->required();
    table.Add(cmd, [&a](Session& s) {
      const json body = json::object();
      return s.Simple("POST", "/v1/bulk/" + PercentEncode(a.id) + "/cancel", &body,
                      [&](const Reply& r) {
                        s.io().out << "stopping " << Show(r.body, "id") << " ("
                                   << Show(r.body, "state") << ")\n";
                      });
    });
  }
}

}  // namespace chronoq::cli
