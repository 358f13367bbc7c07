// What an operator browses, on the fake clock: listing by id prefix and
// creation time, the lease token and worker and the schedule a task came from, purging
// a finished task, a queue's due backlog and its keys with the most tasks.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chronoq/engine.h"
#include "chronoq/time.h"

#include "support/engine_fixture.h"

namespace chronoq {
namespace {

using namespace std::chrono_literals;

class EngineBrowseTest : public test::EngineFixture {
 protected:
  std::set<std::string> Ids(const ListRequest& request) {
    std::set<std::string> out;
    ListRequest r = request;
    for (int pages = 0; pages < 100; ++pages) {
      Result<TaskPage> page = engine_->List(r);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      for (const Task& t : page->tasks) out.insert(t.id);
      if (page->next_cursor.empty()) break;
      r.cursor = page->next_cursor;
    }
    return out;
  }

  Task Dead(const std::string& id) {
    TaskSpec spec;
    spec.queue = "q";
    spec.id = id;
    spec.max_attempts = 1;
    EXPECT_TRUE(engine_->Enqueue(spec).ok());
    Result<std::vector<Lease>> l = engine_->Claim("q", 1, 30s);
    EXPECT_TRUE(l.ok() && l->size() == 1);
    if (l.ok() && l->size() == 1) {
      EXPECT_TRUE(engine_->Fail(id, l->front().token, "boom").ok());
    }
    return *engine_->Get(id);
  }
};

TEST_F(EngineBrowseTest, IdPrefixFindsClientAndGeneratedIds) {
  Add(1h, "share:1");
  Add(1h, "share:10");
  Add(1h, "sharp");
  Add(1h, "invoice:1");
  const Task generated = Add(1h);
  const Task other = Add(1h);
  EXPECT_EQ(Ids({.id_prefix = "share:1"}), (std::set<std::string>{"share:1", "share:10"}));
  EXPECT_EQ(Ids({.id_prefix = "shar"}), (std::set<std::string>{"share:1", "share:10", "sharp"}));
  EXPECT_EQ(Ids({.id_prefix = "share:10"}), (std::set<std::string>{"share:10"}));
  EXPECT_TRUE(Ids({.id_prefix = "share:100"}).empty());
  // With the state filter too (listed in due order).
  EXPECT_EQ(Ids({.state = TaskState::kScheduled, .id_prefix = "inv"}),
            (std::set<std::string>{"invoice:1"}));
  // A generated id's prefix is a range of seqs: the whole id, or most of it.
  EXPECT_EQ(Ids({.id_prefix = generated.id}), (std::set<std::string>{generated.id}));
  const std::set<std::string> both = Ids({.id_prefix = generated.id.substr(0, 8)});
  EXPECT_TRUE(both.contains(generated.id));
  EXPECT_TRUE(both.contains(other.id));
  EXPECT_FALSE(both.contains("share:1"));
  EXPECT_EQ(Ids({.id_prefix = "_"}), (std::set<std::string>{generated.id, other.id}));
  EXPECT_TRUE(Ids({.id_prefix = "_ffff"}).empty());
  // Not a generated id's start: refused, naming the field.
  EXPECT_EQ(engine_->List({.id_prefix = "_xyz"}).status().field(), "id_prefix");
  EXPECT_EQ(engine_->List({.id_prefix = std::string(201, 'a')}).status().field(), "id_prefix");
}

TEST_F(EngineBrowseTest, CreationRangeIsHalfOpen) {
  const Timestamp t0 = clock_.Now();
  Add(1h, "a");
  clock_.Advance(10s);
  Add(1h, "b");
  clock_.Advance(10s);
  Add(1h, "c");
  EXPECT_EQ(Ids({.created_after = t0 + 10s}), (std::set<std::string>{"b", "c"}));
  EXPECT_EQ(Ids({.created_before = t0 + 10s}), (std::set<std::string>{"a"}));
  EXPECT_EQ(Ids({.created_after = t0 + 5s, .created_before = t0 + 15s}),
            (std::set<std::string>{"b"}));
  EXPECT_TRUE(Ids({.created_after = t0 + 15s, .created_before = t0 + 15s}).empty());
  EXPECT_EQ(Ids({.state = TaskState::kScheduled, .created_after = t0 + 20s}),
            (std::set<std::string>{"c"}));
}

TEST_F(EngineBrowseTest, ARunningTaskShowsItsLeaseToken) {
  const Task t = Add();
  EXPECT_FALSE(engine_->Get(t.id)->lease_token.has_value());
  Result<std::vector<Lease>> l = engine_->Claim("q", 1, 30s);
  ASSERT_TRUE(l.ok() && l->size() == 1);
  EXPECT_EQ(engine_->Get(t.id)->lease_token, l->front().token);
  EXPECT_EQ(engine_->List({.state = TaskState::kRunning})->tasks.at(0).lease_token,
            l->front().token);
  ASSERT_TRUE(engine_->Ack(t.id, l->front().token).ok());
  EXPECT_FALSE(engine_->Get(t.id)->lease_token.has_value());
}

// The worker a claim names is the task's lease holder, kept after it ends;
// the next claim's replaces it, a claim naming nobody leaves none.
TEST_F(EngineBrowseTest, ATaskShowsTheWorkerThatClaimedItLast) {
  const Task t = Add();
  EXPECT_EQ(engine_->Get(t.id)->worker, "");
  Result<ClaimAnswer> first =
      engine_->Claim({.queue = "q", .max = 1, .lease = 30s, .worker = "mail-1:311"});
  ASSERT_TRUE(first.ok() && first->leases.size() == 1) << first.status().ToString();
  EXPECT_EQ(engine_->Get(t.id)->worker, "mail-1:311");
  EXPECT_EQ(engine_->List({.state = TaskState::kRunning})->tasks.at(0).worker, "mail-1:311");
  ASSERT_TRUE(engine_->Fail(t.id, first->leases[0].token, "try again", 0s).ok());
  EXPECT_EQ(engine_->Get(t.id)->worker, "mail-1:311");
  // The second claim, acknowledging nothing, names another worker.
  Result<ClaimAnswer> second =
      engine_->Claim({.queue = "q", .max = 1, .lease = 30s, .worker = "mail-2:12"});
  ASSERT_TRUE(second.ok() && second->leases.size() == 1);
  EXPECT_EQ(engine_->Get(t.id)->worker, "mail-2:12");
  // Acknowledged with the next claim, which names nobody.
  Result<ClaimAnswer> third = engine_->Claim(
      {.queue = "q", .max = 1, .lease = 30s, .acks = {{t.id, second->leases[0].token}}});
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  ASSERT_EQ(third->acks.size(), 1u);
  EXPECT_TRUE(third->acks[0].ok());
  EXPECT_EQ(engine_->Get(t.id)->state, TaskState::kSucceeded);
  EXPECT_EQ(engine_->Get(t.id)->worker, "mail-2:12");
  const Task other = Add();
  ASSERT_TRUE(engine_->Claim("q", 1, 30s).ok());
  EXPECT_EQ(engine_->Get(other.id)->worker, "");
  // A bad name is refused before anything is claimed.
  const Task third_task = Add();
  EXPECT_EQ(engine_->Claim({.queue = "q", .worker = "a\tb"}).status().field(), "worker");
  EXPECT_EQ(engine_->Get(third_task.id)->state, TaskState::kScheduled);
}

TEST_F(EngineBrowseTest, AnOccurrenceNamesItsScheduleWhileItExists) {
  ScheduleSpec spec;
  spec.name = "refresh";
  spec.queue = "q";
  spec.every = 1min;
  ASSERT_TRUE(engine_->CreateSchedule(spec).ok());
  Result<TaskPage> page = engine_->List({.queue = "q"});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->tasks.size(), 1u);
  const std::string id = page->tasks[0].id;
  EXPECT_EQ(page->tasks[0].schedule, "refresh");
  EXPECT_EQ(engine_->Get(id)->schedule, "refresh");
  EXPECT_EQ(Add().schedule, "");
  // Claimed and kept running, then the schedule goes: its task stays, unnamed.
  ASSERT_TRUE(engine_->Claim("q", 1, 1h).ok());
  ASSERT_TRUE(engine_->DeleteSchedule("refresh").ok());
  EXPECT_EQ(engine_->Get(id)->schedule, "");
}

TEST_F(EngineBrowseTest, PurgeDeletesOnlyFinishedTasks) {
  const Task scheduled = Add(1h, "waiting");
  Result<Task> refused = engine_->Purge(scheduled.id);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateOf("waiting"), TaskState::kScheduled);
  const Task dead = Dead("dead-1");
  ASSERT_EQ(dead.state, TaskState::kDead);
  EXPECT_EQ(engine_->GetQueue("q")->counts[static_cast<int>(TaskState::kDead)], 1);
  Result<Task> purged = engine_->Purge("dead-1");
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->state, TaskState::kDead);
  EXPECT_EQ(purged->last_error, "boom");
  EXPECT_EQ(engine_->Get("dead-1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->GetQueue("q")->counts[static_cast<int>(TaskState::kDead)], 0);
  EXPECT_EQ(engine_->Purge("dead-1").status().code(), StatusCode::kNotFound);
  // Cancelled, then purged; the id is free again.
  ASSERT_TRUE(engine_->Cancel("waiting").ok());
  ASSERT_TRUE(engine_->Purge("waiting").ok());
  EXPECT_EQ(engine_->GetQueue("q")->counts[static_cast<int>(TaskState::kCancelled)], 0);
  EXPECT_EQ(Add(1h, "waiting").state, TaskState::kScheduled);
  EXPECT_EQ(engine_->Purge("").status().field(), "id");
}

TEST_F(EngineBrowseTest, DueCountsWhatAClaimCouldTakeNow) {
  Add();
  Add();
  Add(30s);
  Add(2h);
  engine_->Sync();
  EXPECT_EQ(engine_->GetQueue("q")->due, 2);
  clock_.Advance(31s);
  engine_->Sync();
  EXPECT_EQ(engine_->GetQueue("q")->due, 3);
  ASSERT_TRUE(engine_->Claim("q", 2, 30s).ok());
  EXPECT_EQ(engine_->GetQueue("q")->due, 1);
}

TEST_F(EngineBrowseTest, KeyBacklogsListTheLongestFirst) {
  for (const char* key : {"a", "b", "b", "c", "c", "c"}) {
    TaskSpec spec;
    spec.queue = "q";
    spec.key = key;
    spec.delay = 1h;
    ASSERT_TRUE(engine_->Enqueue(spec).ok());
  }
  Add(1h);  // no key: not counted
  Result<std::vector<KeyBacklog>> keys = engine_->KeyBacklogs("q", 2);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].key, "c");
  EXPECT_EQ((*keys)[0].backlog, 3);
  EXPECT_EQ((*keys)[1].key, "b");
  EXPECT_EQ((*keys)[1].backlog, 2);
  EXPECT_TRUE(engine_->KeyBacklogs("nobody", 10)->empty());
  EXPECT_EQ(engine_->KeyBacklogs("q", 0).status().field(), "limit");
  EXPECT_EQ(engine_->KeyBacklogs("bad queue!", 10).status().field(), "queue");
}

}  // namespace
}  // namespace chronoq
