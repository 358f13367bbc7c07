// chronoq work QUEUE [--concurrency N] [--lease DUR] [--wait DUR] [--quiet] -- CMD ARGS...
//
// A generic worker: CMD runs once per task, with the task's payload (JSON,
// one line) on its stdin and CHRONOQ_TASK_ID, CHRONOQ_ATTEMPT, CHRONOQ_QUEUE
// and CHRONOQ_KEY (empty when the task has none) in its environment. Exit 0
// acknowledges the task; anything else fails it with the exit status and the
// tail of CMD's stderr.
//
// Threads. Each has its own MultiHttpClient, which is not thread-safe:
//
//   the claimer (the calling thread) waits for a free slot, then claims as
//     many tasks as there are free slots with a long poll (wait_ms = --wait),
//     carrying the acknowledgements that are waiting, and queues the tasks;
//   N slot threads each take a queued task and run CMD: one poll() loop
//     writes the payload to its stdin, drains its stderr (so a chatty command
//     never blocks on a full pipe), extends the lease every third of --lease,
//     and waits for the exit on a pidfd; then the slot reports the outcome;
//   a signal thread reads SIGTERM and SIGINT from a signalfd (they are
//     blocked in every other thread): the first stops claiming, the second
//     kills the running commands' process groups.
//
// Acknowledgements ride on the next claim when one is about to be sent: a
// slot that finishes while the claimer waits for a free slot leaves its ack
// for the claim its own slot frees (as the HTTP drain does, one request per
// batch instead of two). Otherwise (the claimer is parked in a long poll,
// backing off, or stopping) the slot sends the acks itself with POST
// /v1/acks, so no ack waits out a long poll while its lease runs down.
// Failures are sent by the slot at once (POST /v1/tasks/{id}/fail).
//
// A claim never asks for more tasks than there are free slots, so at most N
// commands run, and no task is leased before a slot can start it: chronoqd
// hands out a key's next task only after the previous one is acknowledged,
// so claiming ahead would only hold leases idle.
//
// Stopping. After the first signal no claim is sent. One already parked in
// chronoqd returns within --wait (closing its connection instead would leave
// the claim parked there, leasing any task that comes to nobody), and its
// tasks are run like the others. The claimer then waits for the slots to
// finish, sends the acks left with POST /v1/acks, and the command exits 0. On
// a second signal the commands' process groups get SIGKILL (reaching what
// they started too) and their tasks fail as "interrupted"; that stop exits 0
// as well, once every outcome is reported.
//
// Several nodes (--url a,b,c). Each thread's client fails over on its own
// (MultiHttpClient): a claim, ack, extend or fail that one node cannot take
// goes to the next. What fails on every node, or a POST cut off after it
// was sent (not resent: the node may have applied it), is warned about and
// the worker carries on: a claim is sent again after a backoff; acks go back
// to the pending ones and ride on a later claim (one acked twice is refused
// the second time, with a warning); a lost extension is retried at the next
// third of the lease. Nothing else is resent: the acks still unsent when the
// worker stops, a lost fail report, and the tasks of a claim whose answer
// never came are lost to this worker; their leases lapse and chronoqd
// delivers those tasks again (at least once, as after a crash). Only at the
// start, while no node has ever been reached, does an unreachable cluster
// end the command (exit 3): a wrong --url is an error, not something to
// retry forever.
#include "cli/work.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <thread>

#include "chronoq/limits.h"

#include "cli/cli_common.h"
#include "common/subprocess.h"
#include "common/text.h"
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace chronoq::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kMaxConcurrency = 1000;
// Extended every third of it, a lease shorter than a second would be lost to
// one slow answer (a busy machine, a garbage-collecting proxy).
constexpr Duration kMinWorkLease = std::chrono::seconds(1);
constexpr Duration kMaxWorkLease = std::chrono::hours(24 * 7);
// A claim that waits less would turn an idle worker into a busy loop.
constexpr Duration kMinClaimWait = std::chrono::milliseconds(10);
constexpr Duration kMaxClaimWait = std::chrono::hours(1);
// Acknowledgements in one request: chronoqd's limit.
constexpr size_t kMaxAcksPerRequest = 10'000;

struct WorkArgs {
  std::string queue;
  int concurrency = 1;
  std::string lease = "30s";
  std::string wait = "5s";
  bool quiet = false;
  std::string worker;  // the name its claims give (ClaimRequest::worker); "": HOST:PID
  std::vector<std::string> command;
};

// A claimed task, as the claim answer gives it.
struct Lease {
  std::string id;
  uint64_t token = 0;
  int64_t attempt = 0;
  std::string queue;
  std::string key;      // "" when none
  std::string payload;  // JSON text
};

struct Ack {
  std::string id;
  uint64_t token = 0;
};

json AcksJson(const std::vector<Ack>& acks) {
  json out = json::array();
  for (const Ack& a : acks) out.push_back({{"id", a.id}, {"token", a.token}});
  return out;
}

// How a command ended.
struct Outcome {
  int code = -1;             // Subprocess::Wait's; -1 when it never ran
  bool interrupted = false;  // the second signal stopped it (or it never started for that)
  std::string start_error;   // why it could not start
  std::string stderr_bytes;  // the end of its stderr, as written
};

// Whether `name` can be started: a path to an executable file, or a name
// found as one in $PATH (posix_spawnp's search).
bool CanRun(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts.
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    const size_t colon = dirs.find(':');
    const std::string dir(dirs.substr(0, colon));
    const std::string full = (dir.empty() ? "." : dir) + "/" + name;
    std::error_code ec;
    if (access(full.c_str(), X_OK) == 0 && !std::filesystem::is_directory(full, ec)) return true;
    if (colon == std::string_view::npos) return false;
    dirs.remove_prefix(colon + 1);
  }
}

// Blocks SIGTERM and SIGINT in the calling thread, and so in every thread
// it starts from then on, and reads them from a signalfd instead; restores
// the mask at destruction. Children get every signal back (Subprocess::Spawn).
class StopSignals {
 public:
  StopSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
    signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC);
  }
  ~StopSignals() {
    if (signal_fd_ >= 0) close(signal_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool ok() const { return signal_fd_ >= 0 && wake_fd_ >= 0; }
  // Blocks until a signal comes (its number) or Wake() is called (nullopt).
  std::optional<int> Next() const {
    while (true) {
      pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) continue;  // EINTR
      if (fds[1].revents != 0) return std::nullopt;
      signalfd_siginfo info{};
      if (read(signal_fd_, &info, sizeof info) == sizeof info) {
        return static_cast<int>(info.ssi_signo);
      }
    }
  }
  // Ends Next(), now and for good. Any thread.
  void Wake() const {
    const uint64_t one = 1;
    // An eventfd far from its maximum always takes the write.
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof one);
  }

 private:
  sigset_t old_mask_{};
  int signal_fd_ = -1;
  int wake_fd_ = -1;
};

class Worker {
 public:
  Worker(Session& s, const WorkArgs& a, int64_t lease_ms, int64_t wait_ms)
      : s_(s),
        io_(s.io()),
        a_(a),
        lease_ms_(lease_ms),
        wait_ms_(wait_ms),
        extend_every_(std::max<int64_t>(lease_ms / 3, 1)),
        pids_(static_cast<size_t>(a.concurrency), 0) {}

  // Runs until stopped; returns the exit code.
  int Run() {
    StopSignals signals_in;
    if (!signals_in.ok()) {
      io_.err << "error: cannot watch for signals: " << std::strerror(errno) << "\n";
      return kExitServerError;
    }
    // One connection per slot, made here: the claimer changes its own
    // client's timeout once it runs.
    std::vector<std::unique_ptr<MultiHttpClient>> clients;
    for (int i = 0; i < a_.concurrency; ++i) {
      Result<std::unique_ptr<MultiHttpClient>> c = s_.NewClient();
      if (!c.ok()) return Usage(io_, c.status());
      clients.push_back(std::move(*c));
    }
    std::thread signals([this, &signals_in] { SignalLoop(signals_in); });
    std::vector<std::thread> slots;
    for (int i = 0; i < a_.concurrency; ++i) {
      slots.emplace_back([this, i, &clients] { SlotLoop(i, *clients[static_cast<size_t>(i)]); });
    }

    const int code = ClaimLoop();

    {
      std::unique_lock lock(mu_);
      stopping_ = true;
      claimer_cv_.wait(lock, [this] { return busy_ == 0; });
      shutdown_ = true;
    }
    slots_cv_.notify_all();
    for (std::thread& t : slots) t.join();
    FlushAcks();
    signals_in.Wake();
    signals.join();
    return code;
  }

 private:
  // --- output ----------------------------------------------------------------

  // One whole line on stderr, from any thread.
  void Say(const std::string& line) {
    std::lock_guard lock(print_mu_);
    io_.err << line << "\n";
    io_.err.flush();
  }

  // --- the claimer ------------------------------------------------------------

  int ClaimLoop() {
    const std::string target = QueuePath(a_.queue) + "/claim";
    // The server holds a claim for up to the wait.
    s_.client().set_timeout(s_.client().timeout() + milliseconds(wait_ms_));
    // An unreachable server at the start is an error. Reached means any
    // answer (a 503 too) or a claim that got through before its connection
    // failed (a node that went down while the claim waited in it).
    bool reached_once = false;
    Duration backoff = std::chrono::seconds(1);
    while (true) {
      std::vector<Ack> acks;
      int free = 0;
      {
        std::unique_lock lock(mu_);
        claimer_waiting_ = true;
        claimer_cv_.wait(lock, [this] { return stopping_ || busy_ < a_.concurrency; });
        claimer_waiting_ = false;
        if (stopping_) return kExitOk;
        free = a_.concurrency - busy_;
        const size_t n = std::min(pending_acks_.size(), kMaxAcksPerRequest);
        acks.assign(pending_acks_.begin(), pending_acks_.begin() + static_cast<ptrdiff_t>(n));
        pending_acks_.erase(pending_acks_.begin(),
                            pending_acks_.begin() + static_cast<ptrdiff_t>(n));
      }
      json body = {
          {"max", free}, {"lease_ms", lease_ms_}, {"wait_ms", wait_ms_}, {"worker", a_.worker}};
      if (!acks.empty()) body["acks"] = AcksJson(acks);
      Result<HttpResponse> r = s_.Send("POST", target, &body);
      reached_once = reached_once || s_.client().last_reached_node();
      if (r.ok() && r->status >= 200 && r->status <= 299) {
        backoff = std::chrono::seconds(1);
        TakeClaimAnswer(r->body, !acks.empty());
        continue;
      }
      // The acks may have been applied if the claim got through; sent again,
      // they are refused (and warned about) rather than lost.
      Requeue(std::move(acks));
      std::string why;
      if (!r.ok()) {
        if (!reached_once) {
          Say("error: " + r.status().message());
          return kExitUnreachable;
        }
        why = r.status().message();
      } else {
        const Reply reply{.status = r->status, .raw = std::move(r->body)};
        // 429 and 5xx pass (chronoqd stopping, a failed commit); any other
        // answer (a bad queue name, a wrong token) will not change.
        if (reply.status != 429 && reply.status < 500) {
          Say("error: " + DescribeError(reply));
          return kExitServerError;
        }
        why = DescribeError(reply);
      }
      Say("warning: cannot claim from " + a_.queue + ": " + why + " (retrying in " +
          ShowMillis(json(std::chrono::duration_cast<milliseconds>(backoff).count())) + ")");
      std::unique_lock lock(mu_);
      claimer_cv_.wait_for(lock, backoff, [this] { return stopping_; });
      backoff = std::min<Duration>(backoff * 2, std::chrono::seconds(30));
    }
  }

  // Queues the tasks of a claim answer for the slots; reports acks that
  // rode on it and were refused.
  void TakeClaimAnswer(const std::string& raw, bool had_acks) {
    std::vector<Lease> leases;
    json answer = json::parse(raw, nullptr, /*allow_exceptions=*/false);
    try {
      for (const json& t : Member(answer, "tasks")) {
        Lease l;
        l.id = t.at("id").get<std::string>();
        l.token = t.at("token").get<uint64_t>();
        l.attempt = t.value("attempt", int64_t{0});
        l.queue = t.value("queue", a_.queue);
        const json key = Member(t, "key");
        l.key = key.is_string() ? key.get<std::string>() : "";
        l.payload = t.contains("payload") ? t["payload"].dump() : "null";
        leases.push_back(std::move(l));
      }
    } catch (const json::exception& e) {
      // Tasks it did lease come back when their lease lapses.
      Say(std::string("warning: cannot read a claim answer: ") + e.what());
    }
    if (had_acks) ReportAckResults(Member(answer, "acks"));
    if (leases.empty()) return;
    {
      std::lock_guard lock(mu_);
      busy_ += static_cast<int>(leases.size());
      for (Lease& l : leases) queue_.push_back(std::move(l));
    }
    slots_cv_.notify_all();
  }

  // --- acknowledgements --------------------------------------------------------

  void Requeue(std::vector<Ack> acks) {
    if (acks.empty()) return;
    std::lock_guard lock(mu_);
    pending_acks_.insert(pending_acks_.end(), std::make_move_iterator(acks.begin()),
                         std::make_move_iterator(acks.end()));
  }

  // [{id, ok:true} | {id, ok:false, error}] of a claim or of POST /v1/acks.
  void ReportAckResults(const json& results) {
    if (!results.is_array()) return;
    for (const json& r : results) {
      if (Member(r, "ok") == true) continue;
      const Reply reply{.status = 409, .raw = json{{"error", Member(r, "error")}}.dump()};
      Say("warning: the acknowledgement of task " + Show(r, "id") +
          " was refused: " + DescribeError(reply) + "; it may run again");
    }
  }

  // POST /v1/acks on `session`. Acks that got no answer go back to the
  // pending ones, for the next claim or the final flush.
  void SendAcks(Session& session, std::vector<Ack> acks) {
    while (!acks.empty()) {
      const size_t n = std::min(acks.size(), kMaxAcksPerRequest);
      std::vector<Ack> part(acks.begin(), acks.begin() + static_cast<ptrdiff_t>(n));
      acks.erase(acks.begin(), acks.begin() + static_cast<ptrdiff_t>(n));
      const json body = {{"acks", AcksJson(part)}};
      Result<HttpResponse> r = session.Send("POST", "/v1/acks", &body);
      if (r.ok() && r->status >= 200 && r->status <= 299) {
        ReportAckResults(Member(json::parse(r->body, nullptr, false), "results"));
        continue;
      }
      const std::string why =
          r.ok() ? DescribeError(Reply{.status = r->status, .raw = r->body}) : r.status().message();
      Say("warning: cannot acknowledge " + std::to_string(part.size()) + " task(s): " + why +
          " (will try again)");
      Requeue(std::move(part));
      Requeue(std::move(acks));
      return;
    }
  }

  // The acks left at the end, on the claimer's connection.
  void FlushAcks() {
    std::vector<Ack> acks;
    {
      std::lock_guard lock(mu_);
      acks.swap(pending_acks_);
    }
    if (acks.empty()) return;
    SendAcks(s_, std::move(acks));
    std::lock_guard lock(mu_);
    if (!pending_acks_.empty()) {
      Say("warning: " + std::to_string(pending_acks_.size()) +
          " task(s) succeeded but could not be acknowledged; they run again when their lease "
          "ends");
    }
  }

  // --- the slots ----------------------------------------------------------------

  void SlotLoop(int slot, MultiHttpClient& client) {
    Session session = s_.WithClient(client);
    while (true) {
      Lease lease;
      {
        std::unique_lock lock(mu_);
        slots_cv_.wait(lock, [this] { return shutdown_ || !queue_.empty(); });
        if (queue_.empty()) return;
        lease = std::move(queue_.front());
        queue_.pop_front();
      }
      const SteadyClock::time_point start = SteadyClock::now();
      const Outcome outcome = RunCommand(slot, session, lease);
      Finished(session, lease, outcome,
               std::chrono::duration<double>(SteadyClock::now() - start).count());
    }
  }

  Outcome RunCommand(int slot, Session& session, const Lease& lease) {
    Outcome o;
    {
      std::lock_guard lock(mu_);
      if (killing_) {
        // Brought by a claim that returned after the second signal.
        o.interrupted = true;
        o.start_error = "interrupted: chronoq work was stopped before it started";
        return o;
      }
    }
    SpawnOptions options;
    options.argv = a_.command;
    options.search_path = true;
    options.env = {"CHRONOQ_TASK_ID=" + lease.id,
                   "CHRONOQ_ATTEMPT=" + std::to_string(lease.attempt),
                   "CHRONOQ_QUEUE=" + lease.queue, "CHRONOQ_KEY=" + lease.key};
    options.stdin_mode = Stdio::kPipe;
    options.stderr_mode = Stdio::kPipe;
    // Its own group: a Ctrl-C at the terminal reaches chronoq alone (which
    // then stops gracefully), and a kill of the group reaches grandchildren.
    options.new_process_group = true;
    Result<Subprocess> spawned = Subprocess::Spawn(options);
    if (!spawned.ok()) {
      o.start_error = spawned.status().message();
      return o;
    }
    Subprocess& child = *spawned;
    {
      std::lock_guard lock(mu_);
      pids_[static_cast<size_t>(slot)] = child.pid();
      if (killing_) child.Signal(SIGKILL, /*group=*/true);
    }
    fcntl(child.stdin_fd(), F_SETFL, fcntl(child.stdin_fd(), F_GETFL) | O_NONBLOCK);
    fcntl(child.stderr_fd(), F_SETFL, fcntl(child.stderr_fd(), F_GETFL) | O_NONBLOCK);
    std::string_view input;
    const std::string payload = lease.payload + "\n";
    input = payload;
    if (input.empty()) child.CloseStdin();
    bool stderr_open = true;
    bool extending = true;
    std::string line;  // stderr since its last newline
    SteadyClock::time_point next_extend = SteadyClock::now() + extend_every_;
    while (true) {
      pollfd fds[3];
      nfds_t n = 0;
      int in = -1, err = -1, exit = -1;
      if (child.stdin_fd() >= 0) fds[in = static_cast<int>(n++)] = {child.stdin_fd(), POLLOUT, 0};
      if (stderr_open) fds[err = static_cast<int>(n++)] = {child.stderr_fd(), POLLIN, 0};
      if (child.exit_fd() >= 0) fds[exit = static_cast<int>(n++)] = {child.exit_fd(), POLLIN, 0};
      auto wait = std::chrono::duration_cast<milliseconds>(next_extend - SteadyClock::now());
      // Without a pidfd the exit is looked for every 20 ms.
      if (exit < 0) wait = std::min(wait, milliseconds(20));
      const int ready = poll(fds, n, static_cast<int>(std::max<int64_t>(wait.count(), 0)));
      if (ready < 0 && errno != EINTR) {
        Say(std::string("warning: poll: ") + std::strerror(errno));
      }
      if (in >= 0 && fds[in].revents != 0) {
        const ssize_t w = WriteNoSigpipe(child.stdin_fd(), input);
        if (w > 0) input.remove_prefix(static_cast<size_t>(w));
        // EPIPE: CMD closed its stdin; the rest is not wanted.
        if (input.empty() || (w < 0 && errno != EAGAIN && errno != EINTR)) child.CloseStdin();
      }
      if (err >= 0 && fds[err].revents != 0) {
        stderr_open = ReadStderr(child.stderr_fd(), o.stderr_bytes, line);
      }
      if (Exited(child, exit >= 0 && fds[exit].revents != 0)) {
        {
          // Forgotten before the reap, so a kill can never reach a reused pid.
          std::lock_guard lock(mu_);
          pids_[static_cast<size_t>(slot)] = 0;
          o.interrupted = killing_;
        }
        o.code = child.Poll().value_or(-1);
        // What it wrote before it ended is in the pipe; a grandchild that
        // keeps the pipe open is not waited for.
        if (stderr_open) ReadStderr(child.stderr_fd(), o.stderr_bytes, line);
        if (!line.empty()) Say(line);
        o.interrupted = o.interrupted && o.code != 0;
        return o;
      }
      if (extending && SteadyClock::now() >= next_extend) {
        extending = Extend(session, lease);
        next_extend = SteadyClock::now() + extend_every_;
      }
    }
  }

  // Whether the child has ended, without reaping it. `exit_fd_ready`: its
  // pidfd polled readable.
  static bool Exited(const Subprocess& child, bool exit_fd_ready) {
    if (child.exit_fd() >= 0) return exit_fd_ready;
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid != 0;
  }

  // Reads what CMD wrote to stderr: keeps its end in `tail`, and passes whole
  // lines on to chronoq's stderr. Returns false at end of file.
  bool ReadStderr(int fd, std::string& tail, std::string& line) {
    char chunk[8192];
    while (true) {
      const ssize_t n = read(fd, chunk, sizeof chunk);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      const std::string_view got(chunk, static_cast<size_t>(n));
      tail.append(got);
      // Twice what is kept, so Utf8Tail can start at a character boundary.
      if (tail.size() > 4 * kStderrTailBytes) tail.erase(0, tail.size() - 2 * kStderrTailBytes);
      line.append(got);
      for (size_t nl; (nl = line.find('\n')) != std::string::npos;) {
        Say(line.substr(0, nl));
        line.erase(0, nl + 1);
      }
      // A line without end is passed on in pieces rather than held.
      if (line.size() > 65536) {
        Say(line);
        line.clear();
      }
    }
  }

  // Extends the lease; false when it is lost (another worker may have the
  // task now): then the command runs on, and its outcome will be refused.
  bool Extend(Session& session, const Lease& lease) {
    const json body = {{"token", lease.token}, {"lease_ms", lease_ms_}};
    Result<HttpResponse> r = session.Send("POST", TaskPath(lease.id) + "/extend", &body);
    if (r.ok() && r->status >= 200 && r->status <= 299) return true;
    if (!r.ok()) {
      Say("warning: cannot extend the lease of task " + lease.id + ": " + r.status().message() +
          " (retrying)");
      return true;
    }
    const Reply reply{.status = r->status, .raw = std::move(r->body)};
    if (reply.status == 409 && ErrorCodeOf(reply) == "stale_token") {
      Say("warning: lost the lease of task " + lease.id + " (" + DescribeError(reply) +
          "); it may run elsewhere too");
      return false;
    }
    Say("warning: cannot extend the lease of task " + lease.id + ": " + DescribeError(reply) +
        " (retrying)");
    return true;
  }

  // Reports the outcome: an ack (riding on the next claim when one is about
  // to go) or a fail, and a line on stderr.
  void Finished(Session& session, const Lease& lease, const Outcome& o, double seconds) {
    const std::string what = "task " + lease.id + " attempt " + std::to_string(lease.attempt);
    if (o.code == 0) {
      if (!a_.quiet) Say(what + ": succeeded in " + ShowSeconds(seconds));
      std::vector<Ack> acks;
      {
        std::lock_guard lock(mu_);
        --busy_;
        pending_acks_.push_back({lease.id, lease.token});
        if (claimer_waiting_ && !stopping_) {
          // The claimer wakes for the slot just freed and takes the ack along.
          claimer_cv_.notify_all();
          return;
        }
        acks.swap(pending_acks_);
      }
      claimer_cv_.notify_all();
      SendAcks(session, std::move(acks));
      return;
    }
    std::string error;
    if (!o.start_error.empty()) {
      error = o.start_error;
    } else {
      error = FailureMessage(o.code, o.interrupted, Utf8Tail(o.stderr_bytes, kStderrTailBytes));
    }
    const json body = {{"token", lease.token}, {"error", error}};
    Result<HttpResponse> r = session.Send("POST", TaskPath(lease.id) + "/fail", &body);
    if (!r.ok()) {
      Say("warning: cannot report task " + lease.id + " failed: " + r.status().message() +
          "; it runs again when its lease ends");
    } else if (r->status < 200 || r->status > 299) {
      Say("warning: cannot report task " + lease.id +
          " failed: " + DescribeError(Reply{.status = r->status, .raw = r->body}));
    }
    if (!a_.quiet) {
      Say(what + (o.interrupted ? ": interrupted in " + ShowSeconds(seconds)
                                : ": failed in " + ShowSeconds(seconds) + " (" +
                                      error.substr(0, error.find(':')) + ")"));
    }
    {
      std::lock_guard lock(mu_);
      --busy_;
    }
    claimer_cv_.notify_all();
  }

  // --- signals ----------------------------------------------------------------------

  // Until `in` is woken: the first signal stops claiming, the second kills.
  void SignalLoop(const StopSignals& in) {
    int received = 0;
    while (true) {
      const std::optional<int> signo = in.Next();
      if (!signo) return;
      const std::string name = sigabbrev_np(*signo);
      std::lock_guard lock(mu_);
      if (++received == 1) {
        stopping_ = true;
        Say("chronoq work: SIG" + name + ": no more claims; waiting for " + std::to_string(busy_) +
            " running command(s); signal again to kill them");
        claimer_cv_.notify_all();
        continue;
      }
      killing_ = true;
      int killed = 0;
      for (const pid_t pid : pids_) {
        if (pid > 0 && kill(-pid, SIGKILL) == 0) ++killed;
      }
      Say("chronoq work: SIG" + name + " again: killed " + std::to_string(killed) +
          " running command(s); their tasks fail as interrupted");
    }
  }

  Session& s_;
  const CliIo& io_;
  const WorkArgs& a_;
  const int64_t lease_ms_;
  const int64_t wait_ms_;
  const milliseconds extend_every_;

  std::mutex print_mu_;  // io_.err; taken inside mu_, never the other way

  std::mutex mu_;
  std::condition_variable claimer_cv_;  // busy_ fell, or stopping_
  std::condition_variable slots_cv_;    // a task was queued, or shutdown_
  // Guarded by mu_:
  std::deque<Lease> queue_;        // claimed, not yet taken by a slot
  int busy_ = 0;                   // tasks queued or running
  std::vector<Ack> pending_acks_;  // succeeded, not yet sent
  bool claimer_waiting_ = false;   // the claimer waits for a free slot
  bool stopping_ = false;          // no more claims
  bool killing_ = false;           // the second signal came
  bool shutdown_ = false;          // the slots end
  std::vector<pid_t> pids_;        // per slot: its running command, or 0
};

}  // namespace

std::string Utf8Tail(std::string_view bytes, size_t max_bytes) {
  // Valid UTF-8 first, then the cut.
  std::string valid;
  valid.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    if (const size_t n = Utf8SequenceLength(bytes, i); n > 0) {
      valid.append(bytes.substr(i, n));
      i += n;
    } else {
      valid += "\xEF\xBF\xBD";  // U+FFFD for the byte that starts no character
      ++i;
    }
  }
  while (!valid.empty() && std::isspace(static_cast<unsigned char>(valid.back()))) valid.pop_back();
  if (valid.size() <= max_bytes) return valid;
  size_t from = valid.size() - max_bytes;
  while (from < valid.size() && (static_cast<unsigned char>(valid[from]) & 0xC0) == 0x80) ++from;
  return valid.substr(from);
}

std::string FailureMessage(int code, bool interrupted, std::string_view stderr_tail) {
  std::string out;
  if (interrupted) {
    out = "interrupted: chronoq work was stopped and killed it";
  } else if (code > 128) {
    const char* name = sigdescr_np(code - 128);
    out = "killed by signal " + std::to_string(code - 128) +
          (name != nullptr ? std::string(" (") + name + ")" : "");
  } else {
    out = "exited with status " + std::to_string(code);
  }
  if (!stderr_tail.empty()) out += ": " + std::string(stderr_tail);
  return out;
}

// HOST:PID, what a worker is called unless told otherwise.
std::string DefaultWorkerName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  return std::string(host) + ":" + std::to_string(getpid());
}

// chronoqd's rule for a worker's name, checked before anything is claimed.
Status ValidateWorkerFlag(std::string_view worker) {
  if (worker.size() > kMaxWorkerNameBytes) {
    return Status::InvalidArgument("--worker", "longer than 200 bytes");
  }
  return ValidateText(worker, "--worker");
}

void AddWorkCommand(CommandTable& table) {
  WorkArgs& a = table.Own<WorkArgs>();
  CLI::App* cmd = table.app().add_subcommand(
      "work",
      "Run a command for each task of a queue: chronoq work QUEUE [options] -- CMD ARGS...");
  cmd->add_option("queue", a.queue, "Queue name")->type_name("QUEUE")->required();
  cmd->add_option("command", a.command, "The command and its arguments (after --)")
      ->type_name("CMD")
      ->required();
  cmd->add_option("--concurrency,-c", a.concurrency, "Commands running at once (1-1000)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--lease", a.lease, "Lease of a task, extended every third of it while CMD runs")
      ->type_name("DUR")
      ->capture_default_str();
  cmd->add_option("--wait", a.wait,
                  "How long one claim waits for a task; a stop takes up to this long when idle")
      ->type_name("DUR")
      ->capture_default_str();
  cmd->add_flag("--quiet", a.quiet, "No line per finished task");
  cmd->add_option("--worker", a.worker,
                  "This worker's name, shown as the lease holder of its tasks (default HOST:PID)")
      ->type_name("NAME");
  table.Add(cmd, [&a](Session& s) {
    const CliIo& io = s.io();
    if (a.worker.empty()) a.worker = DefaultWorkerName();
    if (Status valid = ValidateWorkerFlag(a.worker); !valid.ok()) return Usage(io, valid);
    if (a.concurrency < 1 || a.concurrency > kMaxConcurrency) {
      return Usage(io, Status::InvalidArgument("--concurrency", "must be 1-1000"));
    }
    CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t lease_ms,
                                ParseMillisIn(a.lease, "--lease", kMinWorkLease, kMaxWorkLease,
                                              "must be between 1s and 7d"),
                                io);
    CHRONOQ_CLI_ASSIGN_OR_USAGE(const int64_t wait_ms,
                                ParseMillisIn(a.wait, "--wait", kMinClaimWait, kMaxClaimWait,
                                              "must be between 10ms and 1h"),
                                io);
    if (!CanRun(a.command.front())) {
      return Usage(io, Status::InvalidArgument(
                           "work", "cannot run " + a.command.front() + ": no such program"));
    }
    Worker worker(s, a, lease_ms, wait_ms);
    return worker.Run();
  });
}

}  // namespace chronoq::cli
