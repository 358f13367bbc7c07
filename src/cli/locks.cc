// The lock commands: `lock` runs a command while holding a lock (the
// LeaseKeeper extends it meanwhile), `lock-info` shows one.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <thread>

#include "chronoq/lock.h"

#include "cli/cli_common.h"
#include "common/subprocess.h"
#include <signal.h>

namespace chronoq::cli {
namespace {

struct LockArgs {
  std::string key;
  std::string wait = "5s";
  std::string lease = "30s";
  std::string owner;
  std::vector<std::string> command;
};

std::string LockPath(const std::string& key) { return "/v1/locks/" + PercentEncode(key); }

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

// Runs the command under the lock `token` (already acquired) and returns its
// exit status: 128 + the signal that killed it, 127 when it does not exist,
// 126 when it cannot be started.
int RunHolding(Session& s, const LockArgs& a, uint64_t token, int64_t lease_ms, bool& held) {
  const CliIo& io = s.io();
  const IgnoreInterrupts ignore_interrupts;
  io.out.flush();
  io.err.flush();
  SpawnOptions o;
  o.argv = a.command;
  o.search_path = true;
  o.env = {"CHRONOQ_LOCK_KEY=" + a.key, "CHRONOQ_LOCK_TOKEN=" + std::to_string(token)};
  Result<Subprocess> child = Subprocess::Spawn(o);
  if (!child.ok()) {
    const bool missing = child.status().code() == StatusCode::kNotFound;
    io.err << "error: cannot run " << a.command.front() << ": "
           << (missing ? "no such program" : child.status().message()) << "\n";
    return missing ? 127 : 126;  // as shells say "not found", "cannot execute"
  }
  LeaseKeeper keeper(s, a.key, token, lease_ms);
  keeper.Start();
  // No deadline: the command runs as long as it runs, under the lease.
  const Result<int> status = child->Wait(SteadyTime::max());
  held = keeper.Stop();
  return status.ok() ? *status : 128;
}

// chronoq lock KEY [--wait DUR] [--lease DUR] [--owner NAME] -- CMD ARGS...
int RunLocked(Session& s, const LockArgs& a, const CLI::Option* owner) {
  const CliIo& io = s.io();
  CHRONOQ_CLI_ASSIGN_OR_USAGE(
      const int64_t wait_ms,
      ParseMillisIn(a.wait, "--wait", Duration::zero(), kMaxLockWait, "must be between 0 and 1h"),
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
    io.err << "error: " << a.key << " is locked: not acquired within " << a.wait << "; "
           << a.command.front() << " not run\n";
    return kExitLockBusy;
  }
  if (code == kExitServerError) s.ReportError(acquired);
  if (code != kExitOk) return code;
  const uint64_t token = acquired.body.at("token").get<uint64_t>();

  bool held = true;
  const int status = RunHolding(s, a, token, lease_ms, held);
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

}  // namespace

void AddLockCommands(CommandTable& table) {
  LockArgs& a = table.Own<LockArgs>();
  {
    CLI::App* cmd = table.app().add_subcommand(
        "lock", "Run a command while holding a lock: chronoq lock KEY [options] -- CMD ARGS...");
    cmd->add_option("key", a.key, "Lock key")->type_name("KEY")->required();
    cmd->add_option("command", a.command, "The command and its arguments (after --)")
        ->type_name("CMD")
        ->required();
    cmd->add_option("--wait", a.wait, "Wait this long for the lock (0: try once)")
        ->type_name("DUR")
        ->capture_default_str();
    cmd->add_option("--lease", a.lease, "Lease, extended every third of it while CMD runs")
        ->type_name("DUR")
        ->capture_default_str();
    CLI::Option* owner =
        cmd->add_option("--owner", a.owner, "Shown to others by lock-info")->type_name("NAME");
    table.Add(cmd, [&a, owner](Session& s) { return RunLocked(s, a, owner); });
  }
  {
    CLI::App* cmd = table.app().add_subcommand("lock-info", "Show a lock's holder and waiters");
    cmd->add_option("key", a.key, "Lock key")->type_name("KEY")->required();
    table.Add(cmd, [&a](Session& s) {
      return s.Simple("GET", LockPath(a.key), nullptr,
                      [&](const Reply& r) { PrintLock(s.io().out, r.body); });
    });
  }
}

}  // namespace chronoq::cli
