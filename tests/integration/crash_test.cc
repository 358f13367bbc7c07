// Crash safety: a child process enqueues, claims and acknowledges tasks under
// load and reports every acknowledged call through a pipe; the parent kills it
// with SIGKILL mid-stream, reopens the store and checks that every
// acknowledged enqueue is there, every acknowledged completion stayed
// completed, and no task exists twice. Three rounds on the same store. The
// same for schedules and their occurrences.
//
// The child is this test binary started again (posix_spawn of /proc/self/exe
// with --crash-child): a fork() of a process with threads may copy a lock
// held by another thread, and a child that then runs the engine would block
// on it forever.
#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "common/subprocess.h"
#include "support/test_store.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace chronoq {
namespace {

using namespace std::chrono_literals;

// One pipe record: a task id, zero-padded. Writes of at most PIPE_BUF bytes
// are atomic, so records never interleave.
constexpr size_t kRecord = 64;

void Report(int fd, const std::string& id) {
  std::array<char, kRecord> rec{};
  std::memcpy(rec.data(), id.data(), std::min(id.size(), kRecord - 1));
  if (write(fd, rec.data(), rec.size()) != static_cast<ssize_t>(rec.size())) _exit(3);
}

// A worker: claims up to `max` tasks of `queue` at a time, acknowledges them
// and reports every acknowledgement the engine confirmed.
[[noreturn]] void ClaimAndAckForever(Engine& engine, const std::string& queue, int max,
                                     int acked_fd) {
  for (;;) {
    auto leases = engine.Claim(queue, max, 30s, 50ms);
    if (!leases.ok() || leases->empty()) continue;
    std::vector<AckRequest> acks;
    for (const Lease& l : *leases) acks.push_back({l.id, l.token});
    auto res = engine.AckMany(acks);
    if (!res.ok()) continue;
    for (size_t i = 0; i < acks.size(); ++i) {
      if ((*res)[i].ok()) Report(acked_fd, acks[i].id);
    }
  }
}

// The children report on these descriptors (RunAndKill passes them).
constexpr int kFirstFd = 3;
constexpr int kSecondFd = 4;

// A child's engine on the store URL `store`; exits with status 2 if it cannot open.
std::unique_ptr<Engine> OpenOrExit(const std::string& store) {
  EngineOptions o;
  o.store = store;
  auto opened = Engine::Open(o);
  if (!opened.ok()) _exit(2);
  return std::move(*opened);
}

// The child: runs until killed. Never returns.
[[noreturn]] void RunChild(const std::string& store, int round, int enqueued_fd, int acked_fd) {
  const std::unique_ptr<Engine> opened = OpenOrExit(store);
  Engine& engine = *opened;
  std::vector<std::thread> threads;
  // Single enqueues from three threads.
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0;; ++n) {
        TaskSpec s;
        s.queue = "crash";
        s.id = "r" + std::to_string(round) + "-t" + std::to_string(t) + "-" + std::to_string(n);
        s.payload = R"({"n":)" + std::to_string(n) + "}";
        if (engine.Enqueue(s).ok()) Report(enqueued_fd, s.id);
      }
    });
  }
  // Batches of ten.
  threads.emplace_back([&] {
    for (int n = 0;; ++n) {
      std::vector<TaskSpec> batch(10);
      for (int i = 0; i < 10; ++i) {
        batch[i].queue = "crash";
        batch[i].id =
            "r" + std::to_string(round) + "-b" + std::to_string(n) + "-" + std::to_string(i);
      }
      if (engine.EnqueueBatch(batch).ok()) {
        for (const TaskSpec& s : batch) Report(enqueued_fd, s.id);
      }
    }
  });
  // A worker that claims and acknowledges.
  threads.emplace_back([&] { ClaimAndAckForever(engine, "crash", 20, acked_fd); });
  for (std::thread& t : threads) t.join();
  _exit(0);
}

// Reads whole records from `fd` into `out`; false at end of file.
bool ReadRecords(int fd, std::string& buffer, std::vector<std::string>& out) {
  char chunk[4096];
  const ssize_t n = read(fd, chunk, sizeof chunk);
  if (n <= 0) return false;
  buffer.append(chunk, static_cast<size_t>(n));
  while (buffer.size() >= kRecord) {
    out.emplace_back(buffer.c_str());  // stops at the padding
    buffer.erase(0, kRecord);
  }
  return true;
}

// What a killed child reported on its two pipes.
struct Reports {
  std::vector<std::string> first, second;
};

// How long RunAndKill waits for the child's reports before failing.
constexpr auto kChildGiveUp = std::chrono::seconds(120);

// Starts this binary again as a child (`--crash-child KIND URL ROUND`) that
// runs on `store`, reports on descriptors kFirstFd and kSecondFd and never
// exits; reads what it reports until enough(reports), kills it with SIGKILL
// wherever it is, reads what it had reported before dying, and waits until
// the store may be opened again. Use inside ASSERT_NO_FATAL_FAILURE.
void RunAndKill(const test::TestStore& store, const std::string& kind, int round,
                const std::function<bool(const Reports&)>& enough, Reports& out) {
  int first[2], second[2];
  ASSERT_EQ(pipe2(first, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(second, O_CLOEXEC), 0);
  SpawnOptions o;
  o.argv = {"/proc/self/exe", "--crash-child", kind, store.url(), std::to_string(round)};
  o.stdin_mode = Stdio::kNull;
  o.pass_fds = {{first[1], kFirstFd}, {second[1], kSecondFd}};
  Result<Subprocess> child = Subprocess::Spawn(o);
  close(first[1]);
  close(second[1]);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  std::string first_buf, second_buf;
  bool alive = true;
  const auto give_up = Deadline(kChildGiveUp);
  while (!enough(out) && alive) {
    pollfd fds[2] = {{first[0], POLLIN, 0}, {second[0], POLLIN, 0}};
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          give_up - std::chrono::steady_clock::now())
                                          .count());
    ASSERT_GT(left, 0) << "gave up after " << kChildGiveUp.count()
                       << " s waiting for the child's reports (" << out.first.size() << " and "
                       << out.second.size() << " so far)";
    const int ready = poll(fds, 2, left);
    ASSERT_GE(ready, 0) << std::strerror(errno);
    if (fds[0].revents) alive = ReadRecords(first[0], first_buf, out.first);
    if (fds[1].revents) ReadRecords(second[0], second_buf, out.second);
  }
  ASSERT_TRUE(alive) << "the child exited early: " << Subprocess::DescribeExit(child->Kill());
  ASSERT_EQ(child->Kill(), 128 + SIGKILL);
  // Whatever the child reported before dying is still in the pipes.
  while (ReadRecords(first[0], first_buf, out.first)) {
  }
  while (ReadRecords(second[0], second_buf, out.second)) {
  }
  close(first[0]);
  close(second[0]);
  ASSERT_TRUE(store.AwaitNoSessions());
}

TEST(CrashTest, NothingAcknowledgedIsLostAfterSigkill) {
  test::TempDir dir;
  Result<test::TestStore> test_store = test::FreshStore(dir);
  ASSERT_TRUE(test_store.ok()) << test_store.status().ToString();
  const std::string store = test_store->url();
  std::set<std::string> enqueued, acked;

  for (int round = 0; round < 3; ++round) {
    // Let the child acknowledge a few hundred writes (a different number each
    // round), then kill it wherever it is.
    const size_t target = 400 + 150 * static_cast<size_t>(round);
    Reports r;
    ASSERT_NO_FATAL_FAILURE(RunAndKill(
        *test_store, "tasks", round, [&](const Reports& got) { return got.first.size() >= target; },
        r));
    enqueued.insert(r.first.begin(), r.first.end());
    acked.insert(r.second.begin(), r.second.end());

    // Restart and count.
    EngineOptions o;
    o.store = store;
    auto engine = Engine::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    size_t missing = 0, reverted = 0;
    for (const std::string& id : enqueued) {
      auto t = (*engine)->Get(id);
      if (!t.ok()) {
        ++missing;
        ADD_FAILURE() << "acknowledged enqueue lost: " << id << " " << t.status().ToString();
      }
    }
    for (const std::string& id : acked) {
      auto t = (*engine)->Get(id);
      if (!t.ok() || t->state != TaskState::kSucceeded) {
        ++reverted;
        ADD_FAILURE() << "acknowledged completion lost: " << id;
      }
    }
    std::map<std::string, int> seen;
    ListRequest req{.queue = "crash", .limit = 1000};
    for (;;) {
      auto page = (*engine)->List(req);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      for (const Task& t : page->tasks) ++seen[t.id];
      if (page->next_cursor.empty()) break;
      req.cursor = page->next_cursor;
    }
    for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
    EXPECT_GE(seen.size(), enqueued.size());
    std::printf(
        "round %d: %zu acknowledged enqueues, %zu acknowledged completions, %zu stored;"
        " %zu lost, %zu reverted\n",
        round, enqueued.size(), acked.size(), seen.size(), missing, reverted);
  }
  EXPECT_GE(enqueued.size(), 1350u);
  EXPECT_GT(acked.size(), 0u);
}

// Schedules under SIGKILL: a child creates schedules firing every few
// milliseconds while a worker runs their occurrences. After each kill every
// acknowledged schedule exists, every acknowledged run stayed succeeded, and
// no schedule has more than its one occurrence in flight (overlap skip).
[[noreturn]] void RunScheduleChild(const std::string& store, int round, int created_fd,
                                   int acked_fd) {
  const std::unique_ptr<Engine> opened = OpenOrExit(store);
  Engine& engine = *opened;
  std::thread creator([&] {
    for (int n = 0;; ++n) {
      ScheduleSpec s;
      s.name = "r" + std::to_string(round) + "-s" + std::to_string(n);
      s.queue = "sched";
      s.every = std::chrono::milliseconds(2 + n % 7);
      if (engine.CreateSchedule(s).ok()) Report(created_fd, s.name);
      std::this_thread::sleep_for(2ms);  // pacing the load, not waiting for time
    }
  });
  std::thread worker([&] { ClaimAndAckForever(engine, "sched", 50, acked_fd); });
  creator.join();
  _exit(0);
}

TEST(CrashTest, SchedulesKeepOneOccurrenceInFlightAcrossSigkill) {
  test::TempDir dir;
  Result<test::TestStore> test_store = test::FreshStore(dir);
  ASSERT_TRUE(test_store.ok()) << test_store.status().ToString();
  const std::string store = test_store->url();
  std::set<std::string> created, acked;
  for (int round = 0; round < 3; ++round) {
    // Kill it once it acknowledged some creations and some runs.
    const size_t target_created = 40 + 20 * static_cast<size_t>(round);
    Reports r;
    ASSERT_NO_FATAL_FAILURE(RunAndKill(
        *test_store, "schedules", round,
        [&](const Reports& got) {
          return got.first.size() >= target_created && got.second.size() >= 100;
        },
        r));
    created.insert(r.first.begin(), r.first.end());
    acked.insert(r.second.begin(), r.second.end());

    EngineOptions o;
    o.store = store;
    auto engine = Engine::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    for (const std::string& name : created) {
      EXPECT_TRUE((*engine)->GetSchedule(name).ok()) << "acknowledged schedule lost: " << name;
    }
    for (const std::string& id : acked) {
      auto t = (*engine)->Get(id);
      EXPECT_TRUE(t.ok() && t->state == TaskState::kSucceeded) << "acknowledged run lost: " << id;
    }
    // Occurrences in flight (scheduled or running), per schedule.
    std::map<std::string, int> in_flight;
    for (TaskState state : {TaskState::kScheduled, TaskState::kRunning}) {
      ListRequest req{.queue = "sched", .state = state, .limit = 1000};
      for (;;) {
        auto page = (*engine)->List(req);
        ASSERT_TRUE(page.ok()) << page.status().ToString();
        for (const Task& t : page->tasks) ++in_flight[t.id.substr(0, t.id.rfind('@'))];
        if (page->next_cursor.empty()) break;
        req.cursor = page->next_cursor;
      }
    }
    for (const auto& [name, n] : in_flight) EXPECT_EQ(n, 1) << name;
    // And every schedule that is not waiting for a running occurrence has
    // its next one as a task.
    for (const std::string& name : created) {
      auto s = (*engine)->GetSchedule(name);
      ASSERT_TRUE(s.ok());
      if (s->next_task_id) {
        auto t = (*engine)->Get(*s->next_task_id);
        EXPECT_TRUE(t.ok() && t->state == TaskState::kScheduled) << *s->next_task_id;
      } else {
        EXPECT_EQ(in_flight[name], 1) << name << " has neither a next nor a running occurrence";
      }
    }
    std::printf("round %d: %zu acknowledged schedules, %zu acknowledged runs\n", round,
                created.size(), acked.size());
  }
}

// Locks under SIGKILL: a child takes locks on fresh keys (never releasing
// them) while other threads churn acquire+release on keys of their own; it
// reports every grant it got acknowledged. After the kill every acknowledged
// grant is still held, with its token, and a new grant's token is larger.
[[noreturn]] void RunLockChild(const std::string& store, int events_fd) {
  const std::unique_ptr<Engine> opened = OpenOrExit(store);
  Engine& engine = *opened;
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (int n = 0;; ++n) {
      const std::string key = "held-" + std::to_string(n);
      auto g = engine.AcquireLock(key, {Duration::zero(), std::chrono::hours(1), ""});
      if (g.ok()) Report(events_fd, key + " " + std::to_string(g->token));
    }
  });
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "churn-" + std::to_string(t);
      for (;;) {
        auto g = engine.AcquireLock(key, {std::chrono::hours(1), std::chrono::hours(1), ""});
        if (g.ok()) engine.ReleaseLock(key, g->token).IgnoreError();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  _exit(0);
}

TEST(CrashTest, AcknowledgedLockGrantsSurviveSigkill) {
  test::TempDir dir;
  Result<test::TestStore> test_store = test::FreshStore(dir);
  ASSERT_TRUE(test_store.ok()) << test_store.status().ToString();
  const std::string store = test_store->url();
  Reports r;
  ASSERT_NO_FATAL_FAILURE(RunAndKill(
      *test_store, "locks", 0, [](const Reports& got) { return got.first.size() >= 500; }, r));
  const std::vector<std::string>& grants = r.first;

  EngineOptions o;
  o.store = store;
  auto engine = Engine::Open(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  uint64_t largest = 0;
  for (const std::string& g : grants) {
    const size_t space = g.find(' ');
    const std::string key = g.substr(0, space);
    const uint64_t token = std::stoull(g.substr(space + 1));
    largest = std::max(largest, token);
    // Held with exactly that token: releasing with it works.
    EXPECT_TRUE((*engine)->ReleaseLock(key, token).ok()) << "acknowledged grant lost: " << g;
  }
  auto fresh = (*engine)->AcquireLock("fresh", {});
  ASSERT_TRUE(fresh.ok());
  EXPECT_GT(fresh->token, largest);
  std::printf("%zu acknowledged grants survived\n", grants.size());
}

// The child side of RunAndKill: `--crash-child KIND PATH ROUND`.
[[noreturn]] void RunCrashChild(const std::string& kind, const std::string& store, int round) {
  if (kind == "tasks") RunChild(store, round, kFirstFd, kSecondFd);
  if (kind == "schedules") RunScheduleChild(store, round, kFirstFd, kSecondFd);
  if (kind == "locks") RunLockChild(store, kFirstFd);
  _exit(4);
}

}  // namespace
}  // namespace chronoq

int main(int argc, char** argv) {
  if (argc == 5 && std::string_view(argv[1]) == "--crash-child") {
    chronoq::RunCrashChild(argv[2], argv[3], std::atoi(argv[4]));
  }
  ::testing::InitGoogleMock(&argc, argv);
  return RUN_ALL_TESTS();
}
