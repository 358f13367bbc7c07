// chronoq-demo: what `make run` runs until the server exists.
//
//   chronoq-demo [--data DIR]      (default ./data)
//
// Opens the engine at DIR/chronoq.db and shows, in real time:
//   - three tasks on queue "demo", due in 1, 2 and 3 seconds, printing when
//     they fire and how late;
//   - one task on queue "flaky" whose handler fails twice and succeeds on the
//     third attempt, retried with backoff;
// then a summary of this run's tasks, read back with List.
//
// Re-running on the same directory is fine: every run enqueues new tasks with
// generated ids; tasks of earlier runs stay listed for the retention period.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "chronoq/clock.h"
#include "chronoq/engine.h"
#include "chronoq/status.h"
#include "chronoq/task.h"
#include "chronoq/time.h"

namespace {

chronoq::Timestamp Now() {
  return std::chrono::time_point_cast<chronoq::Duration>(std::chrono::system_clock::now());
}

std::string Ms(chronoq::Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::chrono::duration<double, std::milli>(d).count());
  return buf;
}

// Prints whole lines from any thread without interleaving.
std::mutex print_mu;
void Print(const std::string& line) {
  std::lock_guard lock(print_mu);
  std::cout << line << std::endl;
}

int Fail(const std::string& what, const chronoq::Status& s) {
  std::cerr << "chronoq-demo: " << what << ": " << s.ToString() << "\n";
  return 1;
}

// Counts this run's tasks as they succeed.
class Countdown {
 public:
  explicit Countdown(int n) : left_(n) {}
  void Done() {
    std::lock_guard lock(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  bool Wait(std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

// Prints this run's tasks of `queue` (paging through List); returns how many
// tasks of earlier runs it skipped.
chronoq::Result<int> PrintSummary(chronoq::Engine& engine, const std::string& queue,
                                  const std::set<std::string>& ours) {
  chronoq::ListRequest req;
  req.queue = queue;
  req.limit = 1000;
  int others = 0;
  while (true) {
    chronoq::Result<chronoq::TaskPage> page = engine.List(req);
    if (!page.ok()) return page.status();
    for (const chronoq::Task& t : page->tasks) {
      if (!ours.contains(t.id)) {
        ++others;
        continue;
      }
      std::string line = "  " + queue + "  " + t.id + "  " +
                         std::string(chronoq::TaskStateName(t.state)) + "  attempts " +
                         std::to_string(t.attempt) + "/" + std::to_string(t.max_attempts) +
                         "  run_at " + chronoq::FormatTime(t.run_at) + "  payload " + t.payload;
      if (t.last_error) line += "  last_error \"" + *t.last_error + "\"";
      Print(line);
    }
    if (page->next_cursor.empty()) return others;
    req.cursor = page->next_cursor;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "./data";
  CLI::App app{"chronoq demo: a few timed tasks and a flaky one, in real time"};
  app.add_option("--data", data, "data directory")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  chronoq::EngineOptions options;
  options.store = (std::filesystem::path(data) / "chronoq.db").string();

  std::set<std::string> ours;  // this run's task ids; written before handlers start
  Countdown countdown(4);
  {
    auto opened = chronoq::Engine::Open(options);
    if (!opened.ok()) return Fail("open " + options.store, opened.status());
    std::unique_ptr<chronoq::Engine> engine = std::move(*opened);
    chronoq::Engine& e = *engine;
    Print("chronoq demo: engine open at " + options.store + ", now " + chronoq::FormatTime(Now()));

    for (int i = 1; i <= 3; ++i) {
      chronoq::TaskSpec spec;
      spec.queue = "demo";
      spec.delay = std::chrono::seconds(i);
      spec.payload = "{\"greeting\":\"hello " + std::to_string(i) + "\"}";
      chronoq::Result<chronoq::Task> t = e.Enqueue(spec);
      if (!t.ok()) return Fail("enqueue", t.status());
      ours.insert(t->id);
      Print("enqueued " + t->id + " on queue demo, due " + chronoq::FormatTime(t->run_at) +
            " (in " + std::to_string(i) + " s)");
    }

    chronoq::TaskSpec flaky;
    flaky.queue = "flaky";
    flaky.payload = R"({"job":"flaky"})";
    flaky.max_attempts = 5;
    flaky.backoff = chronoq::Backoff{std::chrono::milliseconds(200), std::chrono::seconds(1)};
    chronoq::Result<chronoq::Task> f = e.Enqueue(flaky);
    if (!f.ok()) return Fail("enqueue", f.status());
    ours.insert(f->id);
    Print(
        "enqueued " + f->id +
        " on queue flaky, due now: fails twice, then succeeds (max 5 attempts, backoff 200ms..1s)");

    // Handlers start after every id is known, so they can tell this run's
    // tasks from leftovers of an interrupted earlier run.
    chronoq::Status s = e.RegisterHandler("demo", {}, [&](const chronoq::Lease& lease) {
      const chronoq::Timestamp now = Now();
      Print("fired " + lease.id + " at " + chronoq::FormatTime(now) + " (due " +
            chronoq::FormatTime(lease.run_at) + ", late " + Ms(now - lease.run_at) +
            " ms): " + lease.payload);
      if (ours.contains(lease.id)) countdown.Done();
      return chronoq::Status::Ok();
    });
    if (!s.ok()) return Fail("register demo handler", s);

    s = e.RegisterHandler("flaky", {}, [&](const chronoq::Lease& lease) {
      std::string line = "flaky " + lease.id + " attempt " + std::to_string(lease.attempt) + "/" +
                         std::to_string(lease.max_attempts) + " at " + chronoq::FormatTime(Now());
      if (lease.attempt > 1) {
        // The previous attempt's error is kept on the task.
        chronoq::Result<chronoq::Task> t = e.Get(lease.id);
        if (t.ok() && t->last_error) line += " (previous error: \"" + *t->last_error + "\")";
      }
      if (lease.attempt < 3) {
        const std::string error = "simulated failure on attempt " + std::to_string(lease.attempt);
        Print(line + ": failing with \"" + error + "\"");
        return chronoq::Status(chronoq::StatusCode::kUnavailable, error);
      }
      Print(line + ": succeeded");
      if (ours.contains(lease.id)) countdown.Done();
      return chronoq::Status::Ok();
    });
    if (!s.ok()) return Fail("register flaky handler", s);

    if (!countdown.Wait(std::chrono::seconds(30))) {
      std::cerr << "chronoq-demo: the tasks did not all finish within 30 s\n";
      return 1;
    }
    // Closing the engine waits for the handlers' acknowledgements to commit.
    Print("all done; closing the engine");
  }

  // A new engine on the same file reads back what was committed.
  auto reopened = chronoq::Engine::Open(options);
  if (!reopened.ok()) return Fail("reopen " + options.store, reopened.status());
  Print("summary of this run (engine reopened, read with List):");
  int others = 0;
  for (const char* queue : {"demo", "flaky"}) {
    chronoq::Result<int> skipped = PrintSummary(**reopened, queue, ours);
    if (!skipped.ok()) return Fail("list", skipped.status());
    others += *skipped;
  }
  if (others > 0) {
    Print("(" + std::to_string(others) + " tasks of earlier runs are kept in " + data +
          " for the retention period)");
  }
  return 0;
}
