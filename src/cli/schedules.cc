// The schedule commands (schedule add, list, get, rm, pause, resume, next)
// and the cron calculator (cron next), which needs no server.
#include <chrono>
#include <ostream>

#include "chronoq/cron.h"
#include "chronoq/time.h"

#include "cli/cli_common.h"

namespace chronoq::cli {
namespace {

struct ScheduleArgs {
  std::string name;
  std::string queue;
  std::string cron;
  std::string every;
  std::string fixed_delay;
  std::string tz = "UTC";
  std::string dst_gap;
  std::string dst_repeat;
  std::string start;
  PayloadFlags payload;
  std::string misfire;
  int max_catchup = 0;
  std::string overlap;
  int priority = 0;
  int max_attempts = 0;
  int limit = 0;
  std::string cursor;
  bool all = false;
  int count = 1;
  std::string from;
};

std::string SchedulePath(const std::string& name) { return "/v1/schedules/" + PercentEncode(name); }

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

void AddScheduleAdd(CommandTable& table, CLI::App* schedule, ScheduleArgs& a) {
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
  a.payload.text_opt =
      cmd->add_option("--payload", a.payload.text,
                      "A JSON object, or @FILE to read it from FILE ('-' or @-: stdin)")
          ->type_name("JSON");
  CLI::Option* misfire = cmd->add_option("--misfire", a.misfire, "Missed runs (default run_once)")
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
  table.Add(cmd, [=, &a](Session& s) {
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
    CHRONOQ_CLI_ASSIGN_OR_USAGE(std::optional<json> p, ReadPayload(a.payload, io), io);
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

// schedule list, get, rm, pause, resume, next.
void AddScheduleQueries(CommandTable& table, CLI::App* schedule, ScheduleArgs& a) {
  {
    CLI::App* cmd = schedule->add_subcommand("list", "List schedules")->alias("ls");
    CLI::Option* queue =
        cmd->add_option("--queue,-q", a.queue, "Only this queue")->type_name("QUEUE");
    CLI::Option* limit = cmd->add_option("--limit", a.limit, "Schedules per page")->type_name("N");
    CLI::Option* cursor =
        cmd->add_option("--cursor", a.cursor, "Start from this page cursor")->type_name("CURSOR");
    cmd->add_flag("--all", a.all, "Follow the cursor to the last page")->excludes(cursor);
    table.Add(cmd, [=, &a](Session& s) {
      std::string query;
      if (Given(queue)) AddParam(query, "queue", a.queue);
      if (Given(limit)) AddParam(query, "limit", std::to_string(a.limit));
      return ListPages(s, "/v1/schedules", query, "schedules", a.cursor, a.all, PrintScheduleTable);
    });
  }
  {
    CLI::App* cmd = schedule->add_subcommand("get", "Show a schedule");
    cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
    table.Add(cmd, [&a](Session& s) {
      return s.Simple("GET", SchedulePath(a.name), nullptr,
                      [&](const Reply& r) { PrintSchedule(s.io().out, r.body); });
    });
  }
  {
    CLI::App* cmd = schedule->add_subcommand("rm", "Delete a schedule and its next run");
    cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
    table.Add(cmd, [&a](Session& s) {
      return s.Simple("DELETE", SchedulePath(a.name), nullptr,
                      [&](const Reply&) { s.io().out << "deleted schedule " << a.name << "\n"; });
    });
  }
  for (const std::string_view verb : {"pause", "resume"}) {
    const bool pause = verb == "pause";
    CLI::App* cmd = schedule->add_subcommand(
        std::string(verb), pause ? "Stop a schedule's runs" : "Resume a paused schedule");
    cmd->add_option("name", a.name, "Schedule name")->type_name("")->required();
    table.Add(cmd, [&a, pause](Session& s) {
      const json body = json::object();
      return s.Simple("POST", SchedulePath(a.name) + (pause ? "/pause" : "/resume"), &body,
                      [&](const Reply& r) {
                        s.io().out << (pause ? "paused schedule " : "resumed schedule ") << a.name;
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
    table.Add(cmd, [=, &a](Session& s) {
      std::string query;
      if (Given(count)) {
        if (a.count < 1 || a.count > 1000) {
          return Usage(s.io(), Status::InvalidArgument("--count", "must be 1-1000"));
        }
        AddParam(query, "count", std::to_string(a.count));
      }
      return s.Simple("GET", SchedulePath(a.name) + "/next" + query, nullptr, [&](const Reply& r) {
        const json next = Member(r.body, "next");
        if (!next.is_array()) return;
        for (const json& t : next) s.io().out << t.get<std::string>() << "\n";
      });
    });
  }
}

// The cron calculator: no server needed.
void AddCronNext(CommandTable& table, ScheduleArgs& a) {
  CLI::App* cron =
      table.app().add_subcommand("cron", "Work with cron expressions (no server needed)");
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
  table.AddLocal(cmd, [&a, from](const CliIo& io) {
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
    CHRONOQ_CLI_ASSIGN_OR_USAGE(const CronExpr expr, CronExpr::Parse(a.cron, {.tz = a.tz}), io);
    for (int i = 0; i < a.count; ++i) {
      const std::optional<Timestamp> next = expr.Next(t);
      if (!next) break;
      io.out << FormatTime(*next) << "\n";
      t = *next;
    }
    return kExitOk;
  });
}

}  // namespace

void AddScheduleCommands(CommandTable& table) {
  ScheduleArgs& a = table.Own<ScheduleArgs>();
  CLI::App* schedule = table.app().add_subcommand("schedule", "Manage recurring schedules");
  schedule->require_subcommand(1);
  AddScheduleAdd(table, schedule, a);
  AddScheduleQueries(table, schedule, a);
  AddCronNext(table, a);
}

}  // namespace chronoq::cli
