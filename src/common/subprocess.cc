#include "common/subprocess.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace chronoq {
namespace {

std::string ErrnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 128;
}

// Milliseconds left until `deadline` for poll(): at least 0, at most a day.
int MillisLeft(SteadyTime deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 86'400'000));
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The parent's environment with `extra` ("NAME=value") replacing or adding.
std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    const bool replaced = std::any_of(extra.begin(), extra.end(), [&](const std::string& x) {
      return var.starts_with(std::string_view(x).substr(0, x.find('=') + 1));
    });
    if (!replaced) env.emplace_back(var);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Owns the posix_spawn attribute and file-action objects.
struct SpawnPlan {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnPlan() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnPlan() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnPlan(const SpawnPlan&) = delete;
  SpawnPlan& operator=(const SpawnPlan&) = delete;
};

}  // namespace

ssize_t WriteNoSigpipe(int fd, std::string_view data) {
  // Block SIGPIPE in this thread for the write; a SIGPIPE the write raised
  // stays pending, and is taken back before unblocking.
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const ssize_t n = write(fd, data.data(), data.size());
  const int error = errno;
  if (n < 0 && error == EPIPE) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = error;
  return n;
}

Result<Subprocess> Subprocess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("argv", "must not be empty");
  const std::string& program = options.argv.front();
  SpawnPlan plan;
  Subprocess p;
  // The child's ends of the pipes, closed in the parent once spawned.
  int child_ends[3] = {-1, -1, -1};
  auto close_child_ends = [&] {
    for (int& fd : child_ends) CloseFd(fd);
  };
  auto fail = [&](const std::string& what, int error) -> Status {
    close_child_ends();
    p.CloseAll();
    return Status::Unavailable("cannot start " + program + ": " + what + ": " + ErrnoText(error));
  };

  struct Stream {
    Stdio mode;
    const std::string* file;
    int child_fd;
    int* parent_end;
  };
  const Stream streams[3] = {
      {options.stdin_mode, &options.stdin_file, STDIN_FILENO, &p.stdin_fd_},
      {options.stdout_mode, &options.stdout_file, STDOUT_FILENO, &p.stdout_fd_},
      {options.stderr_mode, &options.stderr_file, STDERR_FILENO, &p.stderr_fd_},
  };
  for (const Stream& s : streams) {
    const bool input = s.child_fd == STDIN_FILENO;
    switch (s.mode) {
      case Stdio::kInherit:
        break;
      case Stdio::kPipe: {
        int fds[2];
        // Close-on-exec, so no other child inherits them and holds a pipe open.
        if (pipe2(fds, O_CLOEXEC) != 0) return fail("pipe", errno);
        *s.parent_end = input ? fds[1] : fds[0];
        child_ends[s.child_fd] = input ? fds[0] : fds[1];
        posix_spawn_file_actions_adddup2(&plan.actions, child_ends[s.child_fd], s.child_fd);
        break;
      }
      case Stdio::kNull:
        posix_spawn_file_actions_addopen(&plan.actions, s.child_fd, "/dev/null",
                                         input ? O_RDONLY : O_WRONLY, 0);
        break;
      case Stdio::kFile:
        posix_spawn_file_actions_addopen(&plan.actions, s.child_fd, s.file->c_str(),
                                         input ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC, 0644);
        break;
    }
  }
  for (const auto& [from, to] : options.pass_fds) {
    posix_spawn_file_actions_adddup2(&plan.actions, from, to);
  }

  // Every signal at its default, none blocked: the parent may ignore SIGPIPE
  // or SIGINT, or block signals in the calling thread.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&plan.attr, &all);
  posix_spawnattr_setsigmask(&plan.attr, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (options.new_process_group) {
    posix_spawnattr_setpgroup(&plan.attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&plan.attr, flags);

  std::vector<std::string> argv_strings = options.argv;
  std::vector<std::string> env_strings = MergedEnvironment(options.env);
  std::vector<char*> argv = Pointers(argv_strings);
  std::vector<char*> env = Pointers(env_strings);
  const int rc = options.search_path ? posix_spawnp(&p.pid_, program.c_str(), &plan.actions,
                                                    &plan.attr, argv.data(), env.data())
                                     : posix_spawn(&p.pid_, program.c_str(), &plan.actions,
                                                   &plan.attr, argv.data(), env.data());
  close_child_ends();
  if (rc != 0) {
    p.pid_ = -1;
    p.CloseAll();
    if (rc == ENOENT) return Status::NotFound("cannot start " + program + ": no such program");
    return Status::Unavailable("cannot start " + program + ": " + ErrnoText(rc));
  }
  // Without a pidfd (kernels before 5.3) Wait() polls waitpid instead.
  p.pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, p.pid_, 0));
  return p;
}

Result<Subprocess::Completed> Subprocess::Run(SpawnOptions options, SteadyTime deadline,
                                              std::string_view input) {
  options.stdin_mode = Stdio::kPipe;
  options.stdout_mode = Stdio::kPipe;
  options.stderr_mode = Stdio::kPipe;
  CHRONOQ_ASSIGN_OR_RETURN(Subprocess p, Spawn(options));
  // Non-blocking writes, so a child that stops reading cannot block us past
  // the deadline.
  fcntl(p.stdin_fd_, F_SETFL, fcntl(p.stdin_fd_, F_GETFL) | O_NONBLOCK);
  if (input.empty()) p.CloseStdin();
  Completed done;
  std::string* sinks[2] = {&done.out, &done.err};
  int* sources[2] = {&p.stdout_fd_, &p.stderr_fd_};
  while (p.stdin_fd_ >= 0 || p.stdout_fd_ >= 0 || p.stderr_fd_ >= 0) {
    pollfd fds[3] = {
        {p.stdin_fd_, POLLOUT, 0}, {p.stdout_fd_, POLLIN, 0}, {p.stderr_fd_, POLLIN, 0}};
    const int ready = poll(fds, 3, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      const std::string tail =
          done.err.size() > 500 ? done.err.substr(done.err.size() - 500) : done.err;
      p.Kill();
      return Status(
          StatusCode::kDeadlineExceeded,
          options.argv.front() + " did not finish in time; its stderr ends with: " + tail);
    }
    if (fds[0].revents != 0) {
      const ssize_t n = WriteNoSigpipe(p.stdin_fd_, input);
      if (n > 0) input.remove_prefix(static_cast<size_t>(n));
      // EPIPE: the child closed its stdin; what is left is not wanted.
      if (input.empty() || (n < 0 && errno != EAGAIN && errno != EINTR)) p.CloseStdin();
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i + 1].revents == 0) continue;
      char chunk[8192];
      const ssize_t n = read(*sources[i], chunk, sizeof chunk);
      if (n > 0) {
        sinks[i]->append(chunk, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        CloseFd(*sources[i]);
      }
    }
  }
  CHRONOQ_ASSIGN_OR_RETURN(done.code, p.Wait(deadline));
  return done;
}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    if (running()) Kill();
    CloseAll();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::exchange(other.pidfd_, -1);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    stderr_fd_ = std::exchange(other.stderr_fd_, -1);
    stdout_buffer_ = std::move(other.stdout_buffer_);
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (running()) Kill();
  CloseAll();
}

void Subprocess::CloseAll() {
  CloseFd(pidfd_);
  CloseFd(stdin_fd_);
  CloseFd(stdout_fd_);
  CloseFd(stderr_fd_);
}

void Subprocess::CloseStdin() { CloseFd(stdin_fd_); }

Result<std::string> Subprocess::ReadLine(SteadyTime deadline, std::string_view what) {
  if (stdout_fd_ < 0) return Status::FailedPrecondition("stdout is not a pipe");
  for (;;) {
    if (const size_t nl = stdout_buffer_.find('\n'); nl != std::string::npos) {
      std::string line = stdout_buffer_.substr(0, nl);
      stdout_buffer_.erase(0, nl + 1);
      return line;
    }
    const std::string got =
        stdout_buffer_.empty() ? "nothing" : "only \"" + stdout_buffer_.substr(0, 200) + "\"";
    pollfd fd{stdout_fd_, POLLIN, 0};
    const int ready = poll(&fd, 1, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      return Status(StatusCode::kDeadlineExceeded, "gave up waiting for " + std::string(what) +
                                                       " from " + std::to_string(pid_) + " (got " +
                                                       got + ")");
    }
    char chunk[4096];
    const ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::Unavailable("stdout of " + std::to_string(pid_) + " ended before " +
                                 std::string(what) + " (got " + got + ")");
    }
    stdout_buffer_.append(chunk, static_cast<size_t>(n));
  }
}

bool Subprocess::Signal(int sig, bool group) {
  if (!running()) return false;
  return (group ? kill(-pid_, sig) : kill(pid_, sig)) == 0;
}

std::optional<int> Subprocess::Reap() {
  int status = 0;
  pid_t done;
  do {
    done = waitpid(pid_, &status, WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done == 0) return std::nullopt;
  pid_ = -1;
  CloseFd(pidfd_);
  return done < 0 ? 128 : ExitCodeOf(status);
}

std::optional<int> Subprocess::Poll() {
  if (!running()) return std::nullopt;
  return Reap();
}

Result<int> Subprocess::Wait(SteadyTime deadline) {
  if (!running()) return Status::FailedPrecondition("no child to wait for");
  for (;;) {
    if (std::optional<int> code = Reap()) return *code;
    const int left = MillisLeft(deadline);
    if (left == 0) {
      return Status(StatusCode::kDeadlineExceeded,
                    "process " + std::to_string(pid_) + " is still running");
    }
    if (pidfd_ >= 0) {
      pollfd fd{pidfd_, POLLIN, 0};
      poll(&fd, 1, left);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(left, 5)));
    }
  }
}

int Subprocess::Kill() {
  if (!running()) return -1;
  if (std::optional<int> code = Reap()) return *code;
  kill(pid_, SIGKILL);
  int status = 0;
  pid_t done;
  do {
    done = waitpid(pid_, &status, 0);
  } while (done < 0 && errno == EINTR);
  pid_ = -1;
  CloseFd(pidfd_);
  return done < 0 ? 128 : ExitCodeOf(status);
}

std::string Subprocess::DescribeExit(int code) {
  if (code < 0) return "was not started";
  if (code > 128) {
    const char* name = sigdescr_np(code - 128);
    return "was killed by signal " + std::to_string(code - 128) +
           (name != nullptr ? std::string(" (") + name + ")" : "");
  }
  return "exited with status " + std::to_string(code);
}

}  // namespace chronoq
