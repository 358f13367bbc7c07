// Per-key ordering through the Engine on a fake clock: one (or N) in flight
// per key, order by run_at then enqueue order, places kept across retries,
// fairness among keys, backpressure, restarts, and a failed commit.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/engine_fixture.h"
#include "support/faulty_engine_fixture.h"
#include "support/raw_sql.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using test::EngineFixture;

class EngineKeyTest : public EngineFixture {
 protected:
  static TaskSpec Keyed(const std::string& key, const std::string& id, Duration delay = 0s) {
    TaskSpec spec;
    spec.queue = "q";
    spec.key = key;
    spec.id = id;
    spec.delay = delay;
    return spec;
  }
  Task AddKeyed(const std::string& key, const std::string& id, Duration delay = 0s,
                int max_attempts = 0) {
    TaskSpec spec = Keyed(key, id, delay);
    spec.max_attempts = max_attempts;
    Result<Task> t = engine_->Enqueue(spec);
    EXPECT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    return t.ok() ? *t : Task{};
  }
  std::vector<Lease> ClaimAll(int max = 100) {
    Result<std::vector<Lease>> got = engine_->Claim("q", max, 30s);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : std::vector<Lease>();
  }
  static std::vector<std::string> Ids(const std::vector<Lease>& leases) {
    std::vector<std::string> ids;
    for (const Lease& l : leases) ids.push_back(l.id);
    return ids;
  }
  void AckAll(const std::vector<Lease>& leases) {
    for (const Lease& l : leases) ASSERT_TRUE(engine_->Ack(l.id, l.token).ok()) << l.id;
  }
  void Configure(const QueueSettings& settings) {
    Result<QueueInfo> info = engine_->ConfigureQueue("q", settings);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
  }
  void Reopen() {
    engine_.reset();
    Open();
  }
  // Enqueues task `id` of key `key` due at `run_at`.
  void AddAt(const std::string& key, const std::string& id, Timestamp run_at,
             OnConflict on_conflict = OnConflict::kReject) {
    TaskSpec spec = Keyed(key, id);
    spec.delay.reset();
    spec.run_at = run_at;
    spec.on_conflict = on_conflict;
    Result<Task> t = engine_->Enqueue(spec);
    ASSERT_TRUE(t.ok()) << id << ": " << t.status().ToString();
  }
  // Claims one at a time, acknowledging each, until nothing is due; returns
  // the ids in the order claimed.
  std::vector<std::string> DrainOneByOne() {
    std::vector<std::string> order;
    for (;;) {
      std::vector<Lease> got = ClaimAll();
      if (got.empty()) return order;
      EXPECT_EQ(got.size(), 1u);
      order.push_back(got.front().id);
      AckAll(got);
    }
  }
};

// The tests that also look at where SQLite keeps the key cursors (raw SQL
// on its file), so they run on SQLite.
class EngineKeySqliteTest : public test::SqliteOnly<EngineKeyTest> {
 protected:
  // Tasks waiting to start that lie at or before their key's saved cursor,
  // where a read from the cursor would never find them: must be none.
  int64_t HiddenByCursors() {
    return std::stoll(test::QueryText(
        SqlitePath(),
        "SELECT count(*) FROM tasks t JOIN key_cursors c ON t.qid = c.qid AND t.key = c.key"
        " WHERE t.state = 0 AND t.attempt = 0"
        " AND (t.korder, t.prio, t.seq) <= (c.korder, c.prio, c.seq)"));
  }
};

TEST_F(EngineKeyTest, OneTaskOfAKeyRunsAtATimeInEnqueueOrder) {
  AddKeyed("a", "a1");
  AddKeyed("a", "a2");
  AddKeyed("a", "a3");
  AddKeyed("b", "b1");
  Add(0s, "plain");

  std::vector<Lease> first = ClaimAll();
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"a1", "b1", "plain"}));
  for (const Lease& l : first) {
    EXPECT_EQ(l.key, l.id == "plain" ? "" : l.id.substr(0, 1));
  }
  EXPECT_TRUE(ClaimAll().empty()) << "a2 must wait for a1";

  AckAll(first);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"a2"});
  EXPECT_EQ(engine_->Get("a2")->key, "a");
  EXPECT_EQ(engine_->Get("plain")->key, "");
}

TEST_F(EngineKeyTest, OrderIsRunAtThenPriorityThenEnqueueOrder) {
  AddKeyed("k", "later", 20s);
  AddKeyed("k", "sooner", 10s);
  TaskSpec urgent = Keyed("k", "urgent", 20s);
  urgent.priority = -1;
  ASSERT_TRUE(engine_->Enqueue(urgent).ok());
  AddKeyed("k", "also-later", 20s);

  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(20s);
    std::vector<Lease> got = ClaimAll();
    ASSERT_EQ(got.size(), 1u) << "round " << i;
    order.push_back(got[0].id);
    AckAll(got);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"sooner", "urgent", "later", "also-later"}));
}

TEST_F(EngineKeyTest, AFailingTaskKeepsItsPlaceWhileItRetries) {
  AddKeyed("k", "k1");
  AddKeyed("k", "k2");
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k1"});
  ASSERT_TRUE(engine_->Fail("k1", got[0].token, "boom", 10s).ok());

  EXPECT_TRUE(ClaimAll().empty()) << "k2 must not overtake k1's retry";
  clock_.Advance(9s);
  EXPECT_TRUE(ClaimAll().empty());
  clock_.Advance(1s);
  got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k1"});
  EXPECT_EQ(got[0].attempt, 2);
  EXPECT_TRUE(ClaimAll().empty());
  AckAll(got);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k2"});
}

TEST_F(EngineKeyTest, ALapsedLeaseRetriesInPlace) {
  AddKeyed("k", "k1");
  AddKeyed("k", "k2");
  ASSERT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k1"});
  clock_.Advance(31s);  // the lease lapses: k1 is due again at once
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k1"});
  EXPECT_EQ(got[0].attempt, 2);
}

TEST_F(EngineKeyTest, DyingOrCancellingReleasesTheKey) {
  AddKeyed("k", "k1", 0s, /*max_attempts=*/1);
  AddKeyed("k", "k2", 0s, /*max_attempts=*/2);
  AddKeyed("k", "k3");
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k1"});
  ASSERT_TRUE(engine_->Fail("k1", got[0].token, "fatal").ok());
  EXPECT_EQ(StateOf("k1"), TaskState::kDead);

  got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k2"});
  ASSERT_TRUE(engine_->Fail("k2", got[0].token, "again", 1h).ok());
  EXPECT_TRUE(ClaimAll().empty());
  // Cancelling the retry frees the place.
  ASSERT_TRUE(engine_->Cancel("k2").ok());
  got = ClaimAll();
  EXPECT_EQ(Ids(got), std::vector<std::string>{"k3"});

  // A dead task retried by hand joins the back of its key's line.
  AddKeyed("k", "k4");
  clock_.Advance(1s);
  ASSERT_TRUE(engine_->Retry("k1").ok());
  AckAll(got);
  got = ClaimAll();
  EXPECT_EQ(Ids(got), std::vector<std::string>{"k4"});
  AckAll(got);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k1"});
}

TEST_F(EngineKeyTest, CancellingOrReschedulingWaitingTasksMovesTheHead) {
  AddKeyed("k", "k1", 10s);
  AddKeyed("k", "k2", 20s);
  AddKeyed("k", "k3", 30s);
  ASSERT_TRUE(engine_->Cancel("k1").ok());
  // k3 moves before k2.
  ASSERT_TRUE(engine_->Reschedule("k3", clock_.Now() + 15s, std::nullopt).ok());
  clock_.Advance(15s);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k3"});
  clock_.Advance(10s);
  EXPECT_TRUE(ClaimAll().empty()) << "k3 still runs";
}

TEST_F(EngineKeyTest, ReplacingAWaitingTaskKeepsOrder) {
  AddKeyed("k", "k1", 10s);
  AddKeyed("k", "k2", 20s);
  TaskSpec spec = Keyed("k", "k1", 30s);
  spec.on_conflict = OnConflict::kReplace;
  ASSERT_TRUE(engine_->Enqueue(spec).ok());
  clock_.Advance(30s);
  std::vector<Lease> got = ClaimAll();
  EXPECT_EQ(Ids(got), std::vector<std::string>{"k2"});
  AckAll(got);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k1"});
}

TEST_F(EngineKeyTest, MaxInFlightPerKeyAllowsThatManyInOrder) {
  QueueSettings s;
  s.max_in_flight_per_key = 2;
  Configure(s);
  for (int i = 1; i <= 4; ++i) AddKeyed("k", "k" + std::to_string(i));
  std::vector<Lease> got = ClaimAll();
  EXPECT_EQ(Ids(got), (std::vector<std::string>{"k1", "k2"}));
  EXPECT_TRUE(ClaimAll().empty());
  ASSERT_TRUE(engine_->Ack("k2", got[1].token).ok());
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k3"});

  // Lowering the limit holds k4 back until two tasks finish.
  s.max_in_flight_per_key = 1;
  Configure(s);
  ASSERT_TRUE(engine_->Ack("k1", got[0].token).ok());
  EXPECT_TRUE(ClaimAll().empty());
  s.max_in_flight_per_key = 3;
  Configure(s);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k4"});
}

// A key with many due tasks delays a key with one by at most one round,
// and one key never takes every worker.
TEST_F(EngineKeyTest, ClaimsRotateAmongKeys) {
  QueueSettings s;
  s.max_in_flight_per_key = 1000;
  Configure(s);
  for (int i = 0; i < 500; ++i) AddKeyed("hot", "hot" + std::to_string(i));
  clock_.Advance(1s);
  AddKeyed("cold", "cold");
  AddKeyed("warm", "warm0");
  AddKeyed("warm", "warm1");

  // One at a time, as one busy worker would claim: every key gets a turn
  // before any key gets a second one.
  // Workers take time: each claim comes a millisecond after the last.
  std::vector<std::string> order;
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(1ms);
    std::vector<Lease> got = ClaimAll(1);
    ASSERT_EQ(got.size(), 1u);
    order.push_back(got[0].id);
  }
  // hot0 was due first; then each key in turn.
  EXPECT_EQ(order, (std::vector<std::string>{"hot0", "cold", "warm0", "hot1", "warm1"}));

  // A batch claim takes one task per key per round, too.
  AddKeyed("late", "late0");
  clock_.Advance(1ms);
  std::vector<Lease> batch = ClaimAll(3);
  EXPECT_EQ(Ids(batch), (std::vector<std::string>{"hot2", "late0", "hot3"}));
}

TEST_F(EngineKeyTest, BlockedKeysCostTheClaimNothing) {
  // 200 keys each with 50 waiting tasks: only the 200 heads are claimable,
  // and the window holds one entry per key (not 10,000).
  for (int k = 0; k < 200; ++k) {
    std::vector<TaskSpec> specs(50);
    for (int i = 0; i < 50; ++i) {
      specs[i].queue = "q";
      specs[i].key = "key" + std::to_string(k);
    }
    ASSERT_TRUE(engine_->EnqueueBatch(specs).ok());
  }
  std::vector<Lease> got = ClaimAll(1000);
  EXPECT_EQ(got.size(), 200u);
  std::set<std::string> keys;
  for (const Lease& l : got) keys.insert(l.key);
  EXPECT_EQ(keys.size(), 200u);
  EXPECT_TRUE(ClaimAll(1000).empty());
}

TEST_F(EngineKeyTest, MaxPendingPerKeyRefusesAndWritesNothing) {
  QueueSettings s;
  s.max_pending_per_key = 2;
  Configure(s);
  AddKeyed("k", "k1");
  AddKeyed("k", "k2");
  TaskSpec spec = Keyed("k", "k3");
  Result<Task> refused = engine_->Enqueue(spec);
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().field(), "key");
  EXPECT_NE(refused.status().message().find("key k"), std::string::npos);
  EXPECT_EQ(engine_->Get("k3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->GetQueue("q")->counts[0], 2);

  // Other keys are not affected; an idempotent retry of a waiting task is
  // not refused.
  AddKeyed("other", "o1");
  spec.id = "k1";
  spec.on_conflict = OnConflict::kIgnore;
  Result<Task> again = engine_->Enqueue(spec);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->existed);

  // A batch past the limit writes none of its tasks, and names the task.
  std::vector<TaskSpec> batch(2);
  for (auto& b : batch) {
    b.queue = "q";
    b.key = "other";
  }
  batch.push_back(batch[0]);
  Result<std::vector<Task>> refused_batch = engine_->EnqueueBatch(batch);
  ASSERT_EQ(refused_batch.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused_batch.status().field(), "tasks[1].key");
  EXPECT_EQ(engine_->GetQueue("q")->counts[0], 3);

  // Claiming the head makes room (started tasks are not waiting).
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(got.size(), 2u);
  spec.id = "k3";
  spec.on_conflict = OnConflict::kReject;
  EXPECT_TRUE(engine_->Enqueue(spec).ok());
  EXPECT_EQ(engine_->Enqueue(TaskSpec{.queue = "q", .key = "k"}).status().code(),
            StatusCode::kResourceExhausted);
  // And the count survives a restart (it is read from the store).
  Reopen();
  EXPECT_EQ(engine_->Enqueue(TaskSpec{.queue = "q", .key = "k"}).status().code(),
            StatusCode::kResourceExhausted);
  ASSERT_TRUE(engine_->Cancel("k2").ok());
  EXPECT_TRUE(engine_->Enqueue(TaskSpec{.queue = "q", .key = "k"}).ok());
}

TEST_F(EngineKeyTest, PlacesAndOrderSurviveARestart) {
  AddKeyed("k", "k1");
  AddKeyed("k", "k2");
  AddKeyed("r", "r1");
  AddKeyed("r", "r2");
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(Ids(got), (std::vector<std::string>{"k1", "r1"}));
  ASSERT_TRUE(engine_->Fail("r1", got[1].token, "later", 1h).ok());

  Reopen();
  // k1 is still running (its lease continues), r1 waits to retry: both keys
  // are blocked.
  EXPECT_TRUE(ClaimAll().empty());
  ASSERT_TRUE(engine_->Ack("k1", got[0].token).ok());
  got = ClaimAll();
  EXPECT_EQ(Ids(got), std::vector<std::string>{"k2"});
  AckAll(got);
  clock_.Advance(1h);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"r1"});
}

TEST_F(EngineKeyTest, KeysBeyondTheLookaheadComeIntoMemoryInOrder) {
  // Due in two hours: on disk only, then refilled.
  AddKeyed("k", "k2", 2h + 10s);
  AddKeyed("k", "k1", 2h);
  AddKeyed("k", "k0", 30s);  // near: in memory
  clock_.Advance(30s);
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k0"});
  AckAll(got);
  clock_.Advance(2h);
  got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k1"});
  clock_.Advance(10s);
  EXPECT_TRUE(ClaimAll().empty());
  AckAll(got);
  EXPECT_EQ(Ids(ClaimAll()), std::vector<std::string>{"k2"});
}

// The index keeps a key's started tasks, so a search for its head starts at
// its cursor (store.h): saved as its tasks start and when it is forgotten, so
// that after a restart the search skips what started before; moved back by a
// task enqueued earlier in the line.
TEST_F(EngineKeySqliteTest, AKeysCursorIsSavedAndServesAfterARestart) {
  for (int i = 0; i < 150; ++i) AddKeyed("k", "t" + std::to_string(i));
  const std::string db = SqlitePath();
  auto saved = [&] { return test::QueryText(db, "SELECT seq FROM key_cursors WHERE key='k'"); };
  auto seq_of = [&](const std::string& id) {
    return test::QueryText(db, "SELECT seq FROM tasks WHERE name='" + id + "'");
  };
  for (int i = 0; i < 140; ++i) {
    std::vector<Lease> got = ClaimAll();
    ASSERT_EQ(Ids(got), std::vector<std::string>{"t" + std::to_string(i)});
    AckAll(got);
  }
  // Saved after every 64 heads taken: at the 128th (t127), just before it
  // (it was still waiting to start when the claim saved).
  ASSERT_FALSE(saved().empty());
  EXPECT_EQ(std::stoll(saved()), std::stoll(seq_of("t127")) - 1);

  // t140 runs across two restarts: each looks for the key's head from the
  // saved cursor.
  std::vector<Lease> running = ClaimAll();
  ASSERT_EQ(Ids(running), std::vector<std::string>{"t140"});
  Reopen();
  TaskSpec early = Keyed("k", "early");
  early.delay.reset();
  early.run_at = clock_.Now() - 1h;  // ahead of everything in the line
  Result<Task> enqueued = engine_->Enqueue(early);
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  Reopen();
  EXPECT_TRUE(ClaimAll().empty()) << "t140 still runs";
  AckAll(running);
  for (const std::string want : {"early", "t141"}) {
    std::vector<Lease> got = ClaimAll();
    ASSERT_EQ(Ids(got), std::vector<std::string>{want});
    AckAll(got);
  }
  for (int i = 142; i < 150; ++i) {
    std::vector<Lease> got = ClaimAll();
    ASSERT_EQ(Ids(got), std::vector<std::string>{"t" + std::to_string(i)});
    AckAll(got);
  }
  engine_->Sync();
  // Drained and forgotten: the cursor was saved at the last head taken.
  EXPECT_EQ(saved(), seq_of("t149"));
  // A task rescheduled to wait before it moves it back.
  AddKeyed("k", "later", 1h);
  ASSERT_TRUE(engine_->Reschedule("later", clock_.Now() - 2h, std::nullopt).ok());
  engine_->Sync();
  EXPECT_EQ(HiddenByCursors(), 0);
  EXPECT_EQ(DrainOneByOne(), std::vector<std::string>{"later"});
}

// The tasks read ahead of a key's head stay exactly its next ones as tasks
// arrive among them, before them and after them, and leave.
TEST_F(EngineKeySqliteTest, TasksReadAheadStayInLineAsTasksComeAndGo) {
  const Timestamp base = clock_.Now() - 100s;
  for (int i = 0; i < 20; ++i) AddAt("k", "t" + std::to_string(i), base + i * 1s);
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"t0"});
  AckAll(got);  // t1 is the head now, t2..t9 read ahead of it
  ASSERT_TRUE(engine_->Cancel("t3").ok());
  AddAt("k", "mid", base + 4500ms);                                       // between t4 and t5
  ASSERT_TRUE(engine_->Reschedule("t6", base + 30s, std::nullopt).ok());  // to the back
  AddAt("k", "early", base - 1s);                                         // ahead of everything
  AddAt("k", "t8", base + 40s, OnConflict::kReplace);                     // to the back, after t6
  EXPECT_EQ(DrainOneByOne(),
            (std::vector<std::string>{"early", "t1",  "t2",  "t4",  "mid", "t5",  "t7",
                                      "t9",    "t10", "t11", "t12", "t13", "t14", "t15",
                                      "t16",   "t17", "t18", "t19", "t6",  "t8"}));
  engine_->Sync();
  EXPECT_EQ(HiddenByCursors(), 0);
}

// A key drained one task at a time reads more tasks ahead each time a read
// comes back full (16, 32, 64, then 128): through every size, tasks that
// arrive among, before and after those read, and tasks cancelled, leave the
// order exactly that of a model (run_at, then enqueue order).
TEST_F(EngineKeyTest, ReadsThatGrowKeepTheOrderAsTasksComeAndGo) {
  const Timestamp base = clock_.Now() - 1000s;
  std::map<std::pair<Timestamp, int>, std::string> model;  // (run_at, enqueue order) -> id
  int enqueued = 0;
  auto add = [&](Timestamp at) {
    const std::string id = "t" + std::to_string(enqueued);
    AddAt("k", id, at);
    model.emplace(std::make_pair(at, enqueued++), id);
  };
  for (int i = 0; i < 400; ++i) add(base + i * 1s);
  std::mt19937 rng(20261127);
  std::uniform_int_distribution<int> ms(0, 420'000);
  std::uniform_int_distribution<int> what(0, 9);
  int steps = 0;
  while (!model.empty()) {
    std::vector<Lease> got = ClaimAll();
    ASSERT_EQ(got.size(), 1u) << "step " << steps;
    ASSERT_EQ(got.front().id, model.begin()->second) << "step " << steps;
    model.erase(model.begin());
    AckAll(got);
    ++steps;
    const int w = what(rng);
    if (w < 3) add(base + std::chrono::milliseconds(ms(rng)));  // anywhere in the line
    if (w == 3 && model.size() > 1) {                           // one waiting task goes
      auto victim = std::next(model.begin(), static_cast<long>(rng() % model.size()));
      ASSERT_TRUE(engine_->Cancel(victim->second).ok()) << victim->second;
      model.erase(victim);
    }
  }
  EXPECT_TRUE(ClaimAll().empty());
  EXPECT_GT(steps, 400);
}

// Keys drained in step use up what they read ahead in the same claim, which
// then reads all their next tasks at once (Core::RefetchHeads; one
// statement on PostgreSQL). Each claim must still hand out the first tasks
// of every key, as many as it has places, in order, as tasks come and go:
// with one place per key (the claim reads for full keys together) and with
// two (the first take of a key reads at once, for the second to join).
TEST_F(EngineKeyTest, KeysDrainedInStepReadTheirNextTasksTogether) {
  const Timestamp base = clock_.Now() - 1000s;
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  // key -> (run_at, enqueue order) -> id
  std::map<std::string, std::map<std::pair<Timestamp, int>, std::string>> model;
  int enqueued = 0;
  auto add = [&](const std::string& key, Timestamp at) {
    const std::string id = key + std::to_string(enqueued);
    AddAt(key, id, at);
    model[key].emplace(std::make_pair(at, enqueued++), id);
  };
  std::mt19937 rng(20261207);
  std::uniform_int_distribution<int> ms(0, 200'000);
  std::uniform_int_distribution<int> what(0, 9);
  for (const int places : {1, 2}) {
    SCOPED_TRACE("max_in_flight_per_key " + std::to_string(places));
    QueueSettings settings;
    settings.max_in_flight_per_key = places;
    Configure(settings);
    for (int i = 0; i < 70; ++i) {
      for (size_t k = 0; k < names.size(); ++k)
        add(names[k], base + (i * 6 + static_cast<int>(k)) * 1s);
    }
    int steps = 0;
    for (;;) {
      std::vector<Lease> got = ClaimAll();
      std::map<std::string, std::vector<std::string>> by_key;
      for (const Lease& l : got) by_key[l.key].push_back(l.id);
      for (auto& [key, line] : model) {
        std::vector<std::string> first;
        for (auto it = line.begin(); it != line.end() && static_cast<int>(first.size()) < places;
             ++it) {
          first.push_back(it->second);
        }
        ASSERT_EQ(by_key[key], first) << "key " << key << ", step " << steps;
        for (size_t i = 0; i < first.size(); ++i) line.erase(line.begin());
      }
      AckAll(got);
      ++steps;
      const int w = what(rng);
      const std::string& key = names[rng() % names.size()];
      if (w < 3) add(key, base + std::chrono::milliseconds(ms(rng)));  // anywhere in the line
      if (w == 3 && model[key].size() > 1) {                           // one waiting task goes
        auto victim = std::next(model[key].begin(), static_cast<long>(rng() % model[key].size()));
        ASSERT_TRUE(engine_->Cancel(victim->second).ok()) << victim->second;
        model[key].erase(victim);
      }
      if (got.empty()) break;
    }
    for (const auto& [key, line] : model) EXPECT_TRUE(line.empty()) << key;
    EXPECT_GT(steps, 70 / places);
  }
}

// A key read after a restart has no cursor in memory (its reads start from
// the saved one): a task arriving behind its head must not give it one past
// the tasks in between.
TEST_F(EngineKeySqliteTest, ATaskArrivingBehindTheHeadAfterARestartSkipsNothing) {
  // Due in two hours: beyond what the window loads, so only the key's own
  // read (at the restart, for t0's place) knows them.
  const Timestamp base = clock_.Now() + 2h;
  AddKeyed("k", "t0");
  for (int i = 1; i <= 20; ++i) AddAt("k", "t" + std::to_string(i), base + i * 1s);
  std::vector<Lease> running = ClaimAll();
  ASSERT_EQ(Ids(running), std::vector<std::string>{"t0"});
  Reopen();  // t0 still runs; t1 is the head, t2..t9 read ahead
  AddAt("k", "late", base + 50s);
  for (int i = 1; i <= 10; ++i) ASSERT_TRUE(engine_->Cancel("t" + std::to_string(i)).ok());
  AckAll(running);
  clock_.Advance(2h + 60s);
  EXPECT_EQ(DrainOneByOne(), (std::vector<std::string>{"t11", "t12", "t13", "t14", "t15", "t16",
                                                       "t17", "t18", "t19", "t20", "late"}));
  engine_->Sync();
  EXPECT_EQ(HiddenByCursors(), 0);
}

// A key forgotten in the middle of an operation whose task then arrives
// before the key's cursor: the cursor saved at the end of the cycle is
// before it, so a read after a restart finds it.
TEST_F(EngineKeySqliteTest, ACursorSavedAsAKeyIsForgottenStaysBeforeItsTasks) {
  const Timestamp base = clock_.Now() - 10s;
  AddAt("k", "k0", base);
  AddAt("k", "k1", base + 5s);
  std::vector<Lease> got = ClaimAll();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"k0"});
  AckAll(got);  // the cursor is at k0 now, k1 is the head
  // Replacing k1 takes the key's head away (nothing left: the key is
  // forgotten and its cursor queued to save) and then puts it back, before
  // the cursor.
  AddAt("k", "k1", base - 5s, OnConflict::kReplace);
  engine_->Sync();
  EXPECT_EQ(HiddenByCursors(), 0);
  EXPECT_EQ(DrainOneByOne(), std::vector<std::string>{"k1"});
}

// A window smaller than one key's backlog: the refill reads on past rows it
// leaves on disk, and order holds.
TEST_F(EngineKeyTest, ASmallWindowStillServesEveryKeyInOrder) {
  engine_.reset();
  EngineOptions o = Options();
  o.max_window_tasks = 8;
  Open(o);
  for (int i = 0; i < 30; ++i) AddKeyed("k" + std::to_string(i % 3), "t" + std::to_string(i));
  Reopen();  // the refill at start reads in pages of 8
  engine_.reset();
  Open(o);
  std::map<std::string, std::vector<int>> seen;
  for (int round = 0; round < 20; ++round) {
    std::vector<Lease> got = ClaimAll();
    for (const Lease& l : got) seen[l.key].push_back(std::stoi(l.id.substr(1)));
    AckAll(got);
    engine_->Sync();
  }
  ASSERT_EQ(seen.size(), 3u);
  for (const auto& [key, ids] : seen) {
    EXPECT_EQ(ids.size(), 10u) << key;
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end())) << key;
  }
}

using EngineKeyFailureTest = test::FaultyEngineFixture;

// After a failed claim a key reads from the saved cursor (it has none in
// memory); a task then arriving behind its head must not make the next read
// start past the tasks in between.
TEST_F(EngineKeyFailureTest, ATaskArrivingBehindTheHeadAfterAFailedClaimSkipsNothing) {
  auto add = [&](const std::string& id, Duration delay) {
    TaskSpec spec;
    spec.queue = "q";
    spec.key = "k";
    spec.id = id;
    spec.delay = delay;
    ASSERT_TRUE(engine_->Enqueue(spec).ok()) << id;
  };
  for (int i = 1; i <= 20; ++i) add("h" + std::to_string(i), 0s);
  store_->FailNextClaims(1);
  EXPECT_FALSE(engine_->Claim("q", 10, 30s).ok());  // h1 is read again, h2..h9 ahead
  add("late", 1s);
  for (int i = 1; i <= 9; ++i) ASSERT_TRUE(engine_->Cancel("h" + std::to_string(i)).ok());
  clock_.Advance(1s);
  Result<std::vector<Lease>> got = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, "h10");
}

TEST_F(EngineKeyFailureTest, AFailedClaimStatementOrCommitLosesNoKeyPlace) {
  for (const char* id : {"k1", "k2"}) {
    TaskSpec spec;
    spec.queue = "q";
    spec.key = "k";
    spec.id = id;
    ASSERT_TRUE(engine_->Enqueue(spec).ok());
  }
  store_->FailNextClaims(1);
  EXPECT_FALSE(engine_->Claim("q", 10, 30s).ok());
  store_->FailNextCommits(1);
  EXPECT_FALSE(engine_->Claim("q", 10, 30s).ok());
  Result<std::vector<Lease>> got = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, "k1");
  ASSERT_TRUE(engine_->Ack("k1", (*got)[0].token).ok());
  got = engine_->Claim("q", 10, 30s);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, "k2");
}

}  // namespace
}  // namespace chronoq
