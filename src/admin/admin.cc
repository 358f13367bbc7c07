#include "admin/admin.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "admin/copy.h"
#include "admin/progress.h"
#include "engine/store_url.h"

namespace chronoq::admin {
namespace {

// A store named on the command line: where it is, and the flag that named it.
struct NamedStore {
  std::string flag;  // "--from", "--to"
  std::string url;
  StoreLocation location;
};

Result<NamedStore> ParseNamed(std::string flag, std::string url) {
  Result<StoreLocation> location = ParseStoreUrl(url);
  if (!location.ok()) {
    // The store's field is "store": the user wrote it as this flag.
    return Status::InvalidArgument(flag, std::string(location.status().message()));
  }
  return NamedStore{std::move(flag), std::move(url), std::move(*location)};
}

// What emptying the store takes, for the messages that ask for it.
std::string EmptyHint(const NamedStore& s) {
  if (s.location.postgres.has_value()) {
    return "run DROP SCHEMA \"" + s.location.postgres->schema +
           "\" CASCADE; on that database (psql), which removes chronoq's tables there";
  }
  const std::string& path = s.location.sqlite->path;
  return "remove " + path + " and its " + path + "-wal, " + path + "-shm and " + path +
         ".lock files";
}

// Opens a store as its writer, which fails while an engine has it open.
Result<std::unique_ptr<Store>> OpenNamed(const NamedStore& s, bool must_exist) {
  // Opening a SQLite path creates a database: a mistyped source must not
  // turn into an empty copy.
  if (must_exist && s.location.sqlite.has_value() &&
      !std::filesystem::exists(s.location.sqlite->path)) {
    return Status::NotFound(s.flag + ": " + s.location.sqlite->path + " does not exist");
  }
  Result<std::unique_ptr<Store>> store = OpenStore(s.location);
  if (!store.ok()) {
    const Status& e = store.status();
    if (e.code() == StatusCode::kFailedPrecondition) {
      // The writer's lock is taken: an engine (chronoqd) has the store open.
      return Status::FailedPrecondition(s.flag + " " + s.url +
                                        " is in use: " + std::string(e.message()) +
                                        ". Stop chronoqd (every node) before copying");
    }
    return Status(e.code(), s.flag + " " + s.url + ": " + std::string(e.message()));
  }
  return store;
}

// The counts of both stores side by side, and the meta.
void PrintSummary(const CopyReport& r, const NamedStore& from, const NamedStore& to,
                  std::ostream& out) {
  out << "copied " << from.url << "\n    to " << to.url << "\n";
  char line[160];
  auto row = [&](const std::string& what, int64_t source, int64_t target) {
    std::snprintf(line, sizeof line, "  %-18s %14s %14s  %s\n", what.c_str(),
                  WithCommas(source).c_str(), WithCommas(target).c_str(),
                  source == target ? "ok" : "MISMATCH");
    out << line;
  };
  std::snprintf(line, sizeof line, "  %-18s %14s %14s\n", "", "source", "target");
  out << line;
  row("tasks", r.source.total_tasks(), r.target.total_tasks());
  constexpr const char* kStates[] = {"scheduled", "running", "succeeded", "cancelled", "dead"};
  for (size_t i = 0; i < r.source.tasks.size(); ++i) {
    row(std::string("  ") + kStates[i], r.source.tasks[i], r.target.tasks[i]);
  }
  row("queues", r.source.queues, r.target.queues);
  row("schedules", r.source.schedules, r.target.schedules);
  row("held locks", r.source.locks, r.target.locks);
  row("key cursors", r.source.key_cursors, r.target.key_cursors);
  auto at_least = [&](const std::string& what, int64_t source, int64_t target) {
    std::snprintf(line, sizeof line, "  %-18s %14s %14s  %s\n", what.c_str(),
                  WithCommas(source).c_str(), WithCommas(target).c_str(),
                  target >= source ? "ok" : "MISMATCH");
    out << line;
  };
  at_least("next token", static_cast<int64_t>(r.source_meta.next_token),
           static_cast<int64_t>(r.target_meta.next_token));
  at_least("last schedule id", r.source_meta.last_sid, r.target_meta.last_sid);
  const double rate = r.seconds > 0 ? static_cast<double>(r.rows) / r.seconds : 0;
  std::snprintf(line, sizeof line, "%s rows in %.1f s (%s rows/s)\n", WithCommas(r.rows).c_str(),
                r.seconds, WithCommas(static_cast<int64_t>(rate)).c_str());
  out << line;
}

int Copy(const std::string& from_url, const std::string& to_url, int batch_rows,
         const AdminIo& io) {
  auto usage = [&](const Status& s) {
    io.err << "error: " << s.ToString() << "\n";
    return kExitUsage;
  };
  Result<NamedStore> from = ParseNamed("--from", from_url);
  if (!from.ok()) return usage(from.status());
  Result<NamedStore> to = ParseNamed("--to", to_url);
  if (!to.ok()) return usage(to.status());
  if (from->url == to->url) {
    return usage(Status::InvalidArgument("--to", "names the same store as --from"));
  }
  auto fail = [&](const Status& s) {
    io.err << "error: " << s.message() << "\n";
    return kExitFailed;
  };
  Result<std::unique_ptr<Store>> source = OpenNamed(*from, /*must_exist=*/true);
  if (!source.ok()) return fail(source.status());
  Result<std::unique_ptr<Store>> target = OpenNamed(*to, /*must_exist=*/false);
  if (!target.ok()) return fail(target.status());

  Progress progress(io.err, io.err_is_terminal);
  CopyOptions options;
  options.batch_rows = batch_rows;
  options.empty_target_hint = EmptyHint(*to);
  Result<CopyReport> report = CopyStore(**source, **target, options, progress);
  if (!report.ok()) return fail(report.status());
  PrintSummary(*report, *from, *to, io.out);
  if (!report->verified()) {
    io.err << "error: the target's counts differ from the source's (MISMATCH above); do not "
              "start chronoqd on it. Empty it ("
           << options.empty_target_hint << ") and copy again\n";
    return kExitFailed;
  }
  io.out << "verified: the target holds what the source holds\n";
  return kExitOk;
}

}  // namespace

int RunAdmin(const std::vector<std::string>& args, const AdminIo& io) {
  CLI::App app("chronoq-admin: operations on a stopped chronoq's store", "chronoq-admin");
  app.require_subcommand(1);
  app.footer("Exit codes: 0 ok, 1 the operation failed or was refused, 2 bad command line.");
  std::string from, to;
  int batch_rows = 10'000;
  CLI::App* copy = app.add_subcommand(
      "copy",
      "Copy everything a store holds (tasks, queues, schedules, key cursors, held locks, the "
      "fencing-token ceiling) into an empty store, then compare their row counts. Stop chronoqd "
      "first: a store in use is refused.");
  copy->add_option("--from", from, "The store to copy: sqlite:PATH, PATH or postgresql://...")
      ->type_name("URL")
      ->required();
  copy->add_option("--to", to, "The empty store to copy into (created when missing)")
      ->type_name("URL")
      ->required();
  copy->add_option("--batch-rows", batch_rows, "Rows per transaction of the target")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, io.out, io.err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (copy->parsed()) return Copy(from, to, batch_rows, io);
  return kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace chronoq::admin
