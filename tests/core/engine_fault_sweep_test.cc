// The engine on SQLite when the disk fails under it (issue 17): a small
// workload of every kind of write (opening the engine on a file of 1,000
// tasks, enqueues single, batched and concurrent, keyed tasks, a schedule and
// its firing, claims, acks, a failure with a retry, locks) runs once cleanly
// through the faulty VFS (support/faulty_vfs.h) to count its reads, writes
// and syncs, then once per operation k and fault, with the k-th operation
// failing. For each run:
//  - every call succeeds or answers Unavailable with reason store_unavailable
//    (never another error, never a crash);
//  - once the disk works again, the same engine goes on: everything the store
//    holds as scheduled or running is claimed and acknowledged (so memory did
//    not lose or invent a task), and a new enqueue, claim and ack work;
//  - reopened without the VFS, the file passes PRAGMA integrity_check, every
//    acknowledged write is there, and nothing is half-written (a batch is
//    all or nothing, the queues' counts match their tasks).
// The sweep runs three times: as described; with a checkpoint after every
// commit (so faults land in the background checkpointer's and the writer's
// checkpoints too); and with the fault armed only while the engine closes
// (the last checkpoint, copying the whole WAL into the file).
// CHRONOQ_FAULT_STRIDE=n runs every n-th k (default 5, 10 for the checkpoint
// sweep; 1: all of them, as ctest's sqlite_fault_sweep_full does);
// CHRONOQ_FAULT_DEBUG=1 prints what each run's calls answered.
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "store/sqlite/sqlite_store.h"
#include "support/fake_clock.h"
#include "support/faulty_vfs.h"
#include "support/raw_sql.h"
#include "support/temp_dir.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::FaultyVfs;
using test::VfsFault;
using test::VfsOp;

// One fault of the sweep: which operation, how it fails, and whether the
// disk stays broken (a full disk) or works again at once (a transient EIO).
struct Fault {
  VfsOp op;
  VfsFault fault;
  bool sticky;
};

constexpr Fault kFaults[] = {
    {VfsOp::kRead, VfsFault::kIoError, false},  {VfsOp::kRead, VfsFault::kIoError, true},
    {VfsOp::kWrite, VfsFault::kIoError, false}, {VfsOp::kWrite, VfsFault::kShortWrite, false},
    {VfsOp::kWrite, VfsFault::kDiskFull, true}, {VfsOp::kSync, VfsFault::kIoError, false},
    {VfsOp::kSync, VfsFault::kIoError, true},
};

// "EIO on read", "ENOSPC from write" (sticky).
std::string Describe(const Fault& f) {
  return ToString(f.fault) + (f.sticky ? " from " : " on ") + ToString(f.op);
}
std::string Describe(const Fault& f, int64_t k) { return Describe(f) + " #" + std::to_string(k); }

// What the workload's calls answered.
struct Outcomes {
  std::map<std::string, Status> calls;  // by step name
  std::set<std::string> enqueued;       // ids whose enqueue answered OK
  std::set<std::string> acked;          // ids whose ack answered OK
  std::set<std::string> failed;         // ids whose fail (with a retry) answered OK
  std::optional<uint64_t> lock_l;       // token of L's acquisition, if OK
  bool m_released = false;              // M acquired and released, both OK
  bool schedule_created = false;
  uint64_t max_token = 0;               // the largest fencing token handed out
  std::vector<std::string> unexpected;  // calls that answered anything but OK or Unavailable

  void Note(const std::string& step, const Status& s) {
    calls.emplace(step, s);
    // Unavailable, and for the store: 503 store_unavailable.
    if (!s.ok() &&
        (s.code() != StatusCode::kUnavailable || s.reason() != StatusReason::kStoreUnavailable)) {
      unexpected.push_back(step + ": " + s.ToString());
    }
  }
};

TaskSpec Spec(std::string id, std::string key = "") {
  TaskSpec s;
  s.queue = "q";
  s.id = std::move(id);
  s.key = std::move(key);
  return s;
}

class EngineFaultSweepTest : public ::testing::Test {
 protected:
  std::string Path() const { return dir_.File("faults.db"); }

  Result<std::unique_ptr<Engine>> OpenEngine(bool through_vfs) {
    SqliteOptions o;
    o.path = Path();
    // Every commit syncs, so syncs are part of the sweep.
    o.durability = Durability::kFull;
    o.tuning = tuning_;
    if (through_vfs) o.vfs = FaultyVfs::kName;
    CHRONOQ_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenSqliteStore(o));
    EngineOptions eo;
    eo.clock = &clock_;
    eo.random_seed = 42;
    return Engine::Open(std::move(eo), std::move(store));
  }

  // The workload: every kind of write the engine makes, a few times each.
  static Outcomes Workload(Engine& e, test::FakeClock& clock) {
    Outcomes out;
    auto note_lease = [&](const Lease& l) { out.max_token = std::max(out.max_token, l.token); };
    auto enqueue = [&](const std::string& step, const TaskSpec& spec) {
      Result<Task> t = e.Enqueue(spec);
      out.Note(step, t.status());
      if (t.ok()) out.enqueued.insert(spec.id);
    };
    // Reads (on the store's reader connection) answer too.
    auto read = [&](const std::string& id) {
      Result<Task> t = e.Get(id);
      out.Note("get " + id, t.status().code() == StatusCode::kNotFound ? Status() : t.status());
    };
    enqueue("enqueue a", Spec("a"));
    read("a");
    Result<std::vector<Task>> batch = e.EnqueueBatch({Spec("b1"), Spec("b2"), Spec("b3")});
    out.Note("enqueue batch", batch.status());
    if (batch.ok()) out.enqueued.insert({"b1", "b2", "b3"});
    read("b2");
    enqueue("enqueue k1", Spec("k1", "cust"));
    enqueue("enqueue k2", Spec("k2", "cust"));

    // Three enqueues at once: they share a cycle (or two), so a fault in one
    // operation meets the others of its transaction.
    {
      std::mutex mu;
      std::condition_variable cv;
      int answered = 0;
      std::map<std::string, Status> answers;
      for (const std::string id : {"c1", "c2", "c3"}) {
        e.EnqueueAsync(Spec(id), [&, id](Result<Task> t) {
          std::lock_guard lock(mu);
          answers.emplace(id, t.status());
          ++answered;
          cv.notify_one();
        });
      }
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return answered == 3; });
      for (const auto& [id, s] : answers) {
        out.Note("enqueue " + id, s);
        if (s.ok()) out.enqueued.insert(id);
      }
    }

    ScheduleSpec every;
    every.name = "tick";
    every.queue = "s";
    every.every = 1min;
    Result<Schedule> schedule = e.CreateSchedule(every);
    out.Note("create schedule", schedule.status());
    out.schedule_created = schedule.ok();

    // Claim: a, b2 and k1 are acknowledged, b1 fails with a retry, b3 stays
    // leased.
    auto settle = [&](const std::string& round, const std::vector<Lease>& leases) {
      for (const Lease& l : leases) {
        note_lease(l);
        if (l.id == "b3") continue;
        if (l.id == "b1" && !out.failed.contains("b1")) {
          Status s = e.Fail(l.id, l.token, "boom", 10s);
          out.Note(round + " fail " + l.id, s);
          if (s.ok()) out.failed.insert(l.id);
          continue;
        }
        Status s = e.Ack(l.id, l.token);
        out.Note(round + " ack " + l.id, s);
        if (s.ok()) out.acked.insert(l.id);
      }
    };
    Result<std::vector<Lease>> first = e.Claim("q", 10, 30min, Duration::zero());
    out.Note("claim 1", first.status());
    if (first.ok()) settle("1", *first);
    read("a");

    LockRequest lock;
    lock.lease = 24h;
    lock.owner = "w";
    Result<LockGrant> l = e.AcquireLock("L", lock);
    out.Note("acquire L", l.status());
    if (l.ok()) {
      out.lock_l = l->token;
      out.max_token = std::max(out.max_token, l->token);
    }
    Result<LockGrant> m = e.AcquireLock("M", lock);
    out.Note("acquire M", m.status());
    if (m.ok()) {
      out.max_token = std::max(out.max_token, m->token);
      Status s = e.ReleaseLock("M", m->token);
      out.Note("release M", s);
      out.m_released = s.ok();
    }

    // A minute on: the schedule's second occurrence, b1's retry.
    clock.Advance(1min);
    e.Sync();
    Result<std::vector<Lease>> second = e.Claim("q", 10, 30min, Duration::zero());
    out.Note("claim 2", second.status());
    if (second.ok()) settle("2", *second);
    read("k2");
    return out;
  }

  // After the fault: memory and store agree (everything the store holds as
  // scheduled or running in q is delivered and can be acknowledged), and
  // fencing tokens still only grow.
  void GoesOn(Engine& e, test::FakeClock& clock, const Outcomes& out, const std::string& what) {
    // The locks memory holds are the ones the file holds (their 24 h
    // leases outlast the test).
    for (const std::string key : {"L", "M"}) {
      Result<LockInfo> lock = e.GetLock(key);
      ASSERT_TRUE(lock.ok()) << what << ": " << lock.status().ToString();
      const std::string stored =
          test::QueryText(Path(), "SELECT count(*) FROM locks WHERE key = '" + key + "'");
      EXPECT_EQ(lock->held, stored == "1") << what << ": lock " << key << " in memory and on disk";
    }
    // Past every lease (30 min) and retry: all of q is due.
    clock.Advance(1h);
    e.Sync();
    for (int round = 0; round < 10; ++round) {
      Result<std::vector<Lease>> leases = e.Claim("q", 100, 30min, Duration::zero());
      ASSERT_TRUE(leases.ok()) << what << ": claim after the fault: " << leases.status().ToString();
      if (leases->empty()) break;
      for (const Lease& l : *leases) {
        EXPECT_GT(l.token, out.max_token) << what << ": a fencing token went back";
        Status s = e.Ack(l.id, l.token);
        ASSERT_TRUE(s.ok()) << what << ": ack " << l.id << " after the fault: " << s.ToString();
      }
    }
    Result<Task> t = e.Enqueue([] {
      TaskSpec s;
      s.queue = "after";
      s.id = "after";
      return s;
    }());
    ASSERT_TRUE(t.ok()) << what << ": enqueue after the fault: " << t.status().ToString();
    Result<std::vector<Lease>> leases = e.Claim("after", 10, 30s, Duration::zero());
    ASSERT_TRUE(leases.ok()) << what << ": " << leases.status().ToString();
    ASSERT_EQ(leases->size(), 1u) << what;
    EXPECT_TRUE(e.Ack("after", leases->front().token).ok()) << what;
  }

  // The file, reopened without the VFS after the engine closed.
  void CheckFile(const Outcomes& out, const std::string& what) {
    const std::string path = Path();
    EXPECT_EQ(test::QueryText(path, "PRAGMA integrity_check"), "ok") << what;
    auto count = [&](const std::string& where) {
      return std::stoll(test::QueryText(path, "SELECT count(*) FROM tasks WHERE " + where));
    };
    auto state_of = [&](const std::string& id) {
      return test::QueryText(path, "SELECT state FROM tasks WHERE name = '" + id + "'");
    };
    for (const std::string& id : out.enqueued) {
      EXPECT_NE(state_of(id), "") << what << ": acknowledged enqueue of " << id << " lost";
    }
    for (const std::string& id : out.acked) {
      EXPECT_EQ(state_of(id), "2") << what << ": acknowledged ack of " << id << " lost";
    }
    for (const std::string& id : out.failed) {
      EXPECT_NE(test::QueryText(path, "SELECT attempt FROM tasks WHERE name = '" + id + "'"), "1")
          << what << ": acknowledged failure of " << id << " lost";
    }
    const int64_t batch = count("name IN ('b1', 'b2', 'b3')");
    EXPECT_TRUE(batch == 0 || batch == 3) << what << ": " << batch << " of the batch's 3 tasks";
    // GoesOn acknowledged everything in q: nothing may have come back.
    EXPECT_EQ(count("qid = (SELECT qid FROM queues WHERE name = 'q') AND state != 2"), 0)
        << what << ": a task of q is not done after the engine acknowledged all of them";
    EXPECT_EQ(state_of("after"), "2") << what;
    EXPECT_EQ(count("name LIKE 'f%'"), kPreloaded) << what << ": tasks from before the run lost";
    // Every queue's counts match its tasks.
    EXPECT_EQ(test::QueryText(path,
                              "SELECT group_concat(name) FROM queues q WHERE"
                              " n_scheduled != (SELECT count(*) FROM tasks WHERE qid = q.qid AND "
                              "state = 0) OR"
                              " n_running != (SELECT count(*) FROM tasks WHERE qid = q.qid AND "
                              "state = 1) OR"
                              " n_succeeded != (SELECT count(*) FROM tasks WHERE qid = q.qid AND "
                              "state = 2)"),
              "")
        << what << ": queue counts that do not match their tasks";
    if (out.lock_l.has_value()) {
      EXPECT_EQ(test::QueryText(path, "SELECT token FROM locks WHERE key = 'L'"),
                std::to_string(*out.lock_l))
          << what << ": acknowledged lock L lost";
    }
    if (out.m_released) {
      EXPECT_EQ(test::QueryText(path, "SELECT count(*) FROM locks WHERE key = 'M'"), "0")
          << what << ": acknowledged release of M lost";
    }
    if (out.schedule_created) {
      EXPECT_EQ(test::QueryText(path, "SELECT count(*) FROM schedules WHERE name = 'tick'"), "1")
          << what << ": acknowledged schedule lost";
    }
  }

  // Starts every run from the same file holding kPreloaded tasks due in a
  // month, made once: the engine opens it with a cold cache, so its cycles
  // read pages from the disk as they would in production, where the
  // database is larger than the cache (on a fresh file, everything the
  // workload touches stays in the cache it was written from).
  void Preload() {
    const std::string tmpl = dir_.File("template.db");
    if (!std::filesystem::exists(tmpl)) {
      std::filesystem::remove(Path());
      Result<std::unique_ptr<Engine>> e = OpenEngine(/*through_vfs=*/false);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      std::vector<TaskSpec> specs;
      for (int i = 0; i < kPreloaded; ++i) {
        TaskSpec s = Spec("f" + std::to_string(i));
        s.queue = "future";
        s.delay = 24h * 30;
        specs.push_back(std::move(s));
      }
      ASSERT_TRUE((*e)->EnqueueBatch(specs).ok());
      e->reset();  // checkpoints: the template is one file
      std::filesystem::rename(Path(), tmpl);
    }
    std::filesystem::remove(Path() + "-wal");
    std::filesystem::remove(Path() + "-shm");
    std::filesystem::copy_file(tmpl, Path(), std::filesystem::copy_options::overwrite_existing);
  }
  static constexpr int kPreloaded = 1000;

  // Where a run's fault is armed: from the engine's opening through the
  // workload, or only for closing the engine (its last checkpoint).
  enum class Phase { kWorkload, kClose };

  // One run of the workload with `fault` armed at the k-th operation of
  // `phase` (k = 0: none); returns the operations it counted in that phase.
  std::array<int64_t, 3> Run(const Fault* fault, int64_t k, Phase phase = Phase::kWorkload) {
    const std::string what = (fault != nullptr ? Describe(*fault, k) : "clean run") +
                             (phase == Phase::kClose ? " while closing" : "");
    clock_.Set(Timestamp(std::chrono::hours(24 * 365 * 56)));
    Preload();
    if (HasFailure()) return {};
    FaultyVfs& vfs = FaultyVfs::Get();
    vfs.ResetCounts();
    if (fault != nullptr && phase == Phase::kWorkload) {
      vfs.Arm(fault->op, k, fault->fault, fault->sticky);
    }
    // Opening (creating the schema, recovering) is part of the workload.
    Result<std::unique_ptr<Engine>> opened = OpenEngine(/*through_vfs=*/true);
    if (!opened.ok()) {
      EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable)
          << what << ": open: " << opened.status().ToString();
      // A restart once the disk works again.
      vfs.Disarm();
      opened = OpenEngine(/*through_vfs=*/true);
      if (!opened.ok()) {
        ADD_FAILURE() << what << ": reopening after a failed open: " << opened.status().ToString();
        return {};
      }
    }
    std::unique_ptr<Engine> engine = std::move(*opened);
    const Outcomes out = Workload(*engine, clock_);
    vfs.Disarm();
    if (std::getenv("CHRONOQ_FAULT_DEBUG") != nullptr) {
      std::string failed;
      for (const auto& [step, s] : out.calls) {
        if (!s.ok()) failed += "\n  " + step + ": " + s.ToString();
      }
      std::printf("%s:%s\n", what.c_str(), failed.c_str());
    }
    std::array<int64_t, 3> counts = CountsOf(vfs);
    EXPECT_TRUE(out.unexpected.empty())
        << what
        << ": answers other than OK or Unavailable: " << ::testing::PrintToString(out.unexpected);
    if (fault == nullptr || phase == Phase::kClose) {
      for (const auto& [step, s] : out.calls) EXPECT_TRUE(s.ok()) << step << ": " << s.ToString();
    }
    GoesOn(*engine, clock_, out, what);
    if (phase == Phase::kClose) {
      // Closing checkpoints the WAL into the file; a failure there must
      // leave the WAL to recover from at the next opening.
      vfs.ResetCounts();
      if (fault != nullptr) vfs.Arm(fault->op, k, fault->fault, fault->sticky);
      engine.reset();
      vfs.Disarm();
      counts = CountsOf(vfs);
    } else {
      engine.reset();
    }
    if (fault != nullptr && vfs.faults() == 0) {
      // Only when this run did fewer operations than the clean one (the
      // concurrent enqueues share one cycle or two, as they come, and the
      // background checkpointer runs when it gets to).
      EXPECT_LT(counts[static_cast<size_t>(fault->op)], k) << what << ": the fault never fired";
    }
    CheckFile(out, what);
    // The engine opens the file again and finds what it acknowledged.
    Result<std::unique_ptr<Engine>> reopened = OpenEngine(/*through_vfs=*/true);
    if (!reopened.ok()) {
      ADD_FAILURE() << what << ": reopening: " << reopened.status().ToString();
      return counts;
    }
    Result<Task> after = (*reopened)->Get("after");
    EXPECT_TRUE(after.ok() && after->state == TaskState::kSucceeded)
        << what << ": task 'after' on reopening: "
        << (after.ok() ? std::string(TaskStateName(after->state)) : after.status().ToString());
    return counts;
  }

  static std::array<int64_t, 3> CountsOf(const FaultyVfs& vfs) {
    return {vfs.count(VfsOp::kRead), vfs.count(VfsOp::kWrite), vfs.count(VfsOp::kSync)};
  }

  // Runs `phase` of the workload once per fault of kFaults and every
  // stride-th k up to the operations of its kind a clean run counts.
  void Sweep(Phase phase, int64_t default_stride = 5) {
    const std::array<int64_t, 3> n = Run(nullptr, 0, phase);
    ASSERT_FALSE(HasFailure());
    // A phase without writes and syncs would make the sweep pass vacuously.
    ASSERT_GT(n[1], 0) << "the clean run wrote nothing";
    ASSERT_GT(n[2], 0) << "the clean run synced nothing";
    // The whole of the three sweeps is ~1,800 runs, minutes under ASan on a
    // loaded 2-core machine: the default suite runs every fifth (or tenth)
    // operation, and ctest's sqlite_fault_sweep_full (label stress) all.
    int64_t stride = default_stride;
    if (const char* env = std::getenv("CHRONOQ_FAULT_STRIDE"); env != nullptr) {
      stride = std::max<int64_t>(1, std::atoll(env));
    }
    int runs = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const Fault& f : kFaults) {
      const int64_t total = n[static_cast<size_t>(f.op)];
      const auto fault_start = std::chrono::steady_clock::now();
      for (int64_t k = 1; k <= total; k += stride) {
        Run(&f, k, phase);
        ++runs;
        if (HasFailure()) return;
      }
      std::printf("  %s, k = 1..%lld: %lld ms\n", Describe(f).c_str(),
                  static_cast<long long>(total), static_cast<long long>(MillisSince(fault_start)));
    }
    std::printf(
        "sweep: %lld reads, %lld writes, %lld syncs per run; stride %lld; %d runs in %lld ms\n",
        static_cast<long long>(n[0]), static_cast<long long>(n[1]), static_cast<long long>(n[2]),
        static_cast<long long>(stride), runs, static_cast<long long>(MillisSince(start)));
  }

  static int64_t MillisSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  }

  // Checkpoints after every commit, by the background checkpointer and (past
  // two pages of WAL) by the writer itself, so that the sweep's faults land
  // in them too: with the default tuning this small workload never
  // checkpoints before the engine closes.
  void CheckpointOften() {
    tuning_.checkpoint_pages = 1;
    tuning_.wal_limit_pages = 2;
  }

  // On tmpfs when there is one: every commit syncs, and the sweep runs the
  // workload hundreds of times (on a disk, 20 times slower).
  test::TempDir dir_{std::filesystem::exists("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                         : std::filesystem::temp_directory_path()};
  test::FakeClock clock_;
  SqliteTuning tuning_;
};

TEST_F(EngineFaultSweepTest, EveryCallSucceedsDurablyOrAnswersUnavailable) {
  Sweep(Phase::kWorkload);
}

// The same promise when the faults hit checkpoints: those of the background
// checkpointer and the writer's during the workload (their failures are
// only logged: the WAL keeps what they did not copy).
TEST_F(EngineFaultSweepTest, CheckpointFaultsLoseNothing) {
  CheckpointOften();
  Sweep(Phase::kWorkload, /*default_stride=*/10);
}

// ... and the last checkpoint, at closing, which copies the whole WAL (with
// the default tuning nothing was checkpointed before).
TEST_F(EngineFaultSweepTest, FaultsWhileClosingLoseNothing) { Sweep(Phase::kClose); }

}  // namespace
}  // namespace chronoq
