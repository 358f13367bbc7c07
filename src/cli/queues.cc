// The queue commands: queues, queue set, pause, resume.
#include <charconv>
#include <map>
#include <ostream>

#include "cli/cli_common.h"

namespace chronoq::cli {
namespace {

struct QueueArgs {
  std::string queue;
  int concurrency = 0;
  int max_in_flight_per_key = 0;
  int64_t max_pending_per_key = 0;
  int max_attempts = 0;
  std::string backoff_base;
  std::string backoff_cap;
  std::string retention;
  std::string rate_limit;
  std::string final_statuses;
  std::vector<std::string> reset;
};

// --reset names a setting as its flag does; the body names it as the API.
const std::map<std::string, std::string>& Resettable() {
  static const auto* const kResettable =
      new std::map<std::string, std::string>{{"concurrency", "concurrency"},
                                             {"max-in-flight", "concurrency"},
                                             {"max-in-flight-per-key", "max_in_flight_per_key"},
                                             {"max-pending-per-key", "max_pending_per_key"},
                                             {"max-attempts", "max_attempts"},
                                             {"backoff", "backoff"},
                                             {"retention", "retention_ms"},
                                             {"rate-limit", "rate_limit"},
                                             {"final-statuses", "final_statuses"}};
  return *kResettable;
}

void AddQueueSet(CommandTable& table, QueueArgs& a) {
  CLI::App* queue = table.app().add_subcommand("queue", "Change a queue's settings");
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
  CLI::Option* final_statuses =
      cmd->add_option("--final-statuses", a.final_statuses,
                      "HTTP statuses that fail a webhook task for good, e.g. 400,404,422")
          ->type_name("LIST");
  cmd->add_option("--reset", a.reset,
                  "Put a setting back to its default (repeatable): concurrency, max-in-flight, "
                  "max-in-flight-per-key, max-pending-per-key, max-attempts, backoff, "
                  "retention, rate-limit, final-statuses")
      ->type_name("SETTING")
      ->check(CLI::IsMember(Resettable()));
  table.Add(cmd, [=, &a](Session& s) {
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
                                  ParseMillis(a.rate_limit.substr(slash + 1), "--rate-limit"), io);
    }
    if (Given(final_statuses)) {
      // The server checks each status (range, 410, how many); here only that
      // the list is a list of numbers.
      json& list = body["final_statuses"] = json::array();
      std::string_view rest = a.final_statuses;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        int status = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), status);
        if (ec != std::errc() || end != item.data() + item.size()) {
          return Usage(io, Status::InvalidArgument("--final-statuses",
                                                   "expected HTTP statuses separated by commas, "
                                                   "e.g. 400,404,422, not '" +
                                                       a.final_statuses + "'"));
        }
        list.push_back(status);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    }
    for (const std::string& name : a.reset) {
      const std::string& field = Resettable().at(name);
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

}  // namespace

void PrintQueueTable(std::ostream& out, const json& queues) {
  if (!queues.is_array() || queues.empty()) {
    out << "no queues\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"QUEUE", "PAUSED", "SCHEDULED", "RUNNING", "SUCCEEDED", "CANCELLED", "DEAD", "LATE"}};
  for (const json& q : queues) {
    const json counts = Member(q, "counts");
    rows.push_back({Show(q, "name"), Member(q, "paused") == true ? "yes" : "no",
                    Show(counts, "scheduled"), Show(counts, "running"), Show(counts, "succeeded"),
                    Show(counts, "cancelled"), Show(counts, "dead"),
                    ShowMillis(Member(q, "oldest_due_lateness_ms"))});
  }
  PrintTable(out, rows);
}

void AddQueueCommands(CommandTable& table) {
  QueueArgs& a = table.Own<QueueArgs>();
  {
    CLI::App* cmd = table.app().add_subcommand("queues", "List queues with task counts");
    table.Add(cmd, [](Session& s) {
      return s.Simple("GET", "/v1/queues", nullptr, [&](const Reply& r) {
        PrintQueueTable(s.io().out, Member(r.body, "queues"));
      });
    });
  }
  AddQueueSet(table, a);
  for (const std::string_view verb : {"pause", "resume"}) {
    const bool pause = verb == "pause";
    CLI::App* cmd = table.app().add_subcommand(
        std::string(verb), pause ? "Stop handing out a queue's tasks" : "Resume a paused queue");
    cmd->add_option("queue", a.queue, "Queue name")->type_name("")->required();
    table.Add(cmd, [&a, pause](Session& s) {
      const json body = json::object();
      return s.Simple(
          "POST", QueuePath(a.queue) + (pause ? "/pause" : "/resume"), &body,
          [&](const Reply&) { s.io().out << (pause ? "paused " : "resumed ") << a.queue << "\n"; });
    });
  }
}

}  // namespace chronoq::cli
