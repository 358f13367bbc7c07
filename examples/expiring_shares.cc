// expiring_shares: the expiring-share case, end to end, on a real engine.
//
// A file-sharing service lets users share a file for a limited time. Each
// share gets a task "share:<n>" on queue "expire-share", due when the share
// expires; the handler revokes it. Revoking a share early cancels its task,
// extending it replaces the task with a later one. The real service uses days;
// this example uses seconds so it finishes in a few.
//
// Run: ./expiring_shares (uses a fresh directory under the system temp dir).

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include "chronoq/clock.h"
#include "chronoq/engine.h"
#include "chronoq/task.h"
#include "chronoq/time.h"

#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point kStart = Clock::now();

// "[+1.234s]": time since the example started.
std::string Elapsed() {
  char buf[32];
  std::snprintf(buf, sizeof buf, "[+%.3fs]",
                std::chrono::duration<double>(Clock::now() - kStart).count());
  return buf;
}

void Say(const std::string& line) { std::cout << Elapsed() << " " << line << std::endl; }

std::string Describe(const chronoq::Task& t) {
  std::string out = t.id + ": state=" + std::string(chronoq::TaskStateName(t.state)) +
                    " run_at=" + chronoq::FormatTime(t.run_at) +
                    " attempt=" + std::to_string(t.attempt) + "/" + std::to_string(t.max_attempts) +
                    " payload=" + t.payload;
  if (t.last_error) out += " last_error=" + *t.last_error;
  return out;
}

void ShowGet(chronoq::Engine& engine, const std::string& id) {
  chronoq::Result<chronoq::Task> t = engine.Get(id);
  Say("  Get(" + id + ") -> " + (t.ok() ? Describe(*t) : t.status().ToString()));
}

chronoq::TaskSpec Share(int n, chronoq::Duration expires_in) {
  chronoq::TaskSpec spec;
  spec.queue = "expire-share";
  spec.id = "share:" + std::to_string(n);
  spec.delay = expires_in;
  spec.payload = "{\"share\":" + std::to_string(n) + "}";
  return spec;
}

int Fail(const std::string& what, const chronoq::Status& s) {
  std::cerr << "expiring_shares: " << what << ": " << s.ToString() << "\n";
  return 1;
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("chronoq-expiring-shares-" + std::to_string(getpid()));
  fs::remove_all(dir);
  chronoq::EngineOptions options;
  options.store = (dir / "shares.db").string();

  std::mutex mu;
  std::condition_variable cv;
  bool share42_expired = false;

  {
    auto opened = chronoq::Engine::Open(options);
    if (!opened.ok()) return Fail("open " + options.store, opened.status());
    std::unique_ptr<chronoq::Engine> engine = std::move(*opened);
    Say("opened the engine at " + options.store);

    // Two shares, each expiring in 2 s. The client chooses the ids, so it can
    // find the tasks again by share number.
    for (int n : {42, 43}) {
      chronoq::Result<chronoq::Task> t = engine->Enqueue(Share(n, std::chrono::seconds(2)));
      if (!t.ok()) return Fail("enqueue share " + std::to_string(n), t.status());
      Say("shared file as share " + std::to_string(n) + ", expires at " +
          chronoq::FormatTime(t->run_at) + " (in 2 s)");
    }

    // The owner revokes share 43 early: its expiry task is cancelled.
    chronoq::Result<chronoq::Task> cancelled = engine->Cancel("share:43");
    if (!cancelled.ok()) return Fail("cancel share:43", cancelled.status());
    Say("share 43 revoked by its owner: its expiry task is " +
        std::string(chronoq::TaskStateName(cancelled->state)));

    // The owner extends share 42 to 3 s: enqueue the same id again, replacing
    // the scheduled task.
    chronoq::TaskSpec extend = Share(42, std::chrono::seconds(3));
    extend.on_conflict = chronoq::OnConflict::kReplace;
    chronoq::Result<chronoq::Task> extended = engine->Enqueue(extend);
    if (!extended.ok()) return Fail("extend share:42", extended.status());
    Say("share 42 extended: now expires at " + chronoq::FormatTime(extended->run_at) + " (in 3 s)");

    Say("the tasks now:");
    ShowGet(*engine, "share:42");
    ShowGet(*engine, "share:43");

    chronoq::Status registered =
        engine->RegisterHandler("expire-share", {}, [&](const chronoq::Lease& lease) {
          Say("EXPIRED " + lease.id + " (payload " + lease.payload + ", due " +
              chronoq::FormatTime(lease.run_at) + "): revoking the share");
          if (lease.id == "share:42") {
            std::lock_guard lock(mu);
            share42_expired = true;
            cv.notify_all();
          }
          return chronoq::Status::Ok();
        });
    if (!registered.ok()) return Fail("register handler", registered);
    Say("waiting for expiries (share 43 would have expired at +2 s; it was revoked)");

    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return share42_expired; })) {
      std::cerr << "expiring_shares: share:42 did not expire within 10 s\n";
      return 1;
    }
    // Closing the engine lets the handler's acknowledgement commit first.
    Say("closing the engine");
  }

  // Everything is durable: a new engine on the same file sees the outcome.
  auto reopened = chronoq::Engine::Open(options);
  if (!reopened.ok()) return Fail("reopen " + options.store, reopened.status());
  Say("reopened the engine; the tasks now:");
  ShowGet(**reopened, "share:42");
  ShowGet(**reopened, "share:43");
  reopened->reset();

  std::error_code ec;
  fs::remove_all(dir, ec);
  Say("done");
  return 0;
}
