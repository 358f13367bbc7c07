// What the store tests share: an instant and its due buckets, rows to write,
// and helpers over an open store that fail the test on an error. Used by the
// conformance suite (every store) and by each store's own tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.h"

namespace chronoq::test {

// 2026-11-22T00:00:00Z.
inline constexpr Timestamp kNow = Timestamp(std::chrono::seconds(1'795'305'600));
// Due buckets (store.h): kBase starts the bucket holding kNow; kBucket is one
// bucket long, kB0 its number.
inline constexpr int64_t kB0 = DueBucket(kNow);
inline constexpr Timestamp kBase = BucketStart(kB0);
inline constexpr Duration kBucket = Duration(int64_t{1} << kDueBucketShift);

inline TaskRow Row(int64_t seq, int64_t qid, TaskState state, std::optional<Timestamp> due) {
  TaskRow r;
  r.seq = seq;
  r.qid = qid;
  r.state = state;
  r.due = due;
  r.max_attempts = 25;
  r.payload = R"({"n":)" + std::to_string(seq) + "}";
  r.updated = kNow;
  return r;
}

inline TaskRow Scheduled(int64_t seq, int64_t qid, Timestamp due) {
  return Row(seq, qid, TaskState::kScheduled, due);
}

// Scheduled, of key `key`: waiting to start (attempt 0).
inline TaskRow KeyedScheduled(int64_t seq, int64_t qid, Timestamp due,
                              const std::string& key = "k") {
  TaskRow r = Scheduled(seq, qid, due);
  r.key = key;
  return r;
}

// Every column but `response`, which only SetResponse writes (Insert and
// Overwrite leave it alone).
inline void ExpectSameRow(const TaskRow& got, const TaskRow& want) {
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.qid, want.qid);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.due, want.due);
  EXPECT_EQ(got.priority, want.priority);
  EXPECT_EQ(got.attempt, want.attempt);
  EXPECT_EQ(got.max_attempts, want.max_attempts);
  EXPECT_EQ(got.payload, want.payload);
  EXPECT_EQ(got.run_at, want.run_at);
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.last_error, want.last_error);
  EXPECT_EQ(got.updated, want.updated);
  EXPECT_EQ(got.backoff_base, want.backoff_base);
  EXPECT_EQ(got.backoff_cap, want.backoff_cap);
  EXPECT_EQ(got.target, want.target);
  EXPECT_EQ(got.sid, want.sid);
  EXPECT_EQ(got.key, want.key);
  EXPECT_EQ(got.worker, want.worker);
}

// A row with every optional column set (but `response`).
inline TaskRow FullRow(int64_t seq, int64_t qid) {
  TaskRow r = Row(seq, qid, TaskState::kScheduled, kNow + std::chrono::seconds(30));
  r.name = "share:42";
  r.priority = -3;
  r.attempt = 2;
  r.max_attempts = 7;
  r.payload = R"({"to":"a@example.com","body":"caf\u00e9"})";
  r.run_at = kNow - std::chrono::seconds(5);
  r.token = 123456789012ull;
  r.last_error = "smtp: 451 try again";
  r.updated = kNow + Duration(17);
  r.backoff_base = std::chrono::milliseconds(250);
  r.backoff_cap = std::chrono::minutes(10);
  r.target = R"({"url":"https://example.com/hook"})";
  r.sid = 12;
  r.key = "customer:7";
  r.worker = "host-1:4242";
  return r;
}

inline ScheduleRow NewSchedule(const std::string& name, int64_t qid) {
  ScheduleRow r;
  r.name = name;
  r.qid = qid;
  r.spec = R"({"name":")" + name + R"("})";
  r.created = kNow;
  r.updated = kNow;
  return r;
}

// Helpers over store_, which the fixture deriving from this opens.
class StoreHelpers {
 protected:
  int64_t Queue(const std::string& name) {
    Result<int64_t> qid = store_->QueueId(name);
    EXPECT_TRUE(qid.ok()) << qid.status().ToString();
    return qid.ok() ? *qid : -1;
  }

  // Inserts `row` in its own transaction.
  void InsertCommitted(const TaskRow& row) {
    ASSERT_TRUE(store_->Begin().ok());
    Result<bool> inserted = store_->Insert(row);
    ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
    ASSERT_TRUE(*inserted) << "seq " << row.seq;
    ASSERT_TRUE(store_->Commit().ok());
  }

  std::optional<TaskRow> Find(int64_t seq) {
    Result<std::optional<TaskRow>> r = store_->FindBySeq(seq);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::nullopt;
  }

  std::optional<Store::ReadRow> Read(int64_t seq) {
    Result<std::optional<Store::ReadRow>> r = store_->ReadBySeq(seq);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::nullopt;
  }

  // The seqs of a List page.
  std::vector<int64_t> ListSeqs(const Store::ListQuery& q) {
    Result<std::vector<Store::ReadRow>> r = store_->List(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<int64_t> out;
    if (r.ok()) {
      for (const Store::ReadRow& row : *r) out.push_back(row.row.seq);
    }
    return out;
  }

  // The rules of a key's saved cursor (store.h) where the store keeps it:
  // where reads start; never backwards, moved back to just before a task
  // that comes to wait before it, dropped when nothing lies before it.
  // saved_seq(qid) reads the seq of the saved cursor of key "k" in queue
  // qid from the store's own table ("" when there is none).
  // started_tasks_hold_it: whether tasks that started stay in the store's key
  // index (SQLite's), so that a cursor stays while one lies at or before it;
  // PostgreSQL's index holds only tasks waiting to start, and a delete or
  // purge of the key drops the cursor once none of those lies before it.
  void ExpectSavedKeyCursorRules(const std::function<std::string(int64_t qid)>& saved_seq,
                                 bool started_tasks_hold_it) {
    const int64_t q = Queue("q");
    for (int64_t seq = 1; seq <= 5; ++seq) InsertCommitted(KeyedScheduled(seq, q, kBase));
    auto saved = [&] { return saved_seq(q); };
    auto head = [&]() -> int64_t {
      Result<std::vector<DueEntry>> h = store_->KeyHeads(q, "k", std::nullopt, 1);
      EXPECT_TRUE(h.ok()) << h.status().ToString();
      return h.ok() && !h->empty() ? h->front().seq : 0;
    };
    // Only ever at a task that started (as the engine does).
    auto save = [&](int64_t seq, Timestamp at = kBase) {
      ASSERT_TRUE(store_->Begin().ok());
      ASSERT_TRUE(store_->SaveKeyCursor(q, "k", KeyPosition{at, 0, seq}).ok());
      ASSERT_TRUE(store_->Commit().ok());
    };
    auto start = [&](std::vector<int64_t> seqs) {
      ASSERT_TRUE(store_->Begin().ok());
      ASSERT_TRUE(
          store_->MarkRunningMany(seqs, kNow + std::chrono::seconds(30), 1, kNow, "", "").ok());
      ASSERT_TRUE(store_->Commit().ok());
    };
    EXPECT_EQ(saved(), "");  // none yet: reads start at the beginning
    start({1, 2});
    EXPECT_EQ(head(), 3);
    save(2);
    EXPECT_EQ(saved(), "2");
    EXPECT_EQ(head(), 3);
    EXPECT_EQ(*store_->CountKeyPending(q, "k", std::nullopt), 3);
    start({3});
    save(3);
    EXPECT_EQ(saved(), "3");
    EXPECT_EQ(head(), 4);
    save(1);  // never backwards
    EXPECT_EQ(saved(), "3");

    // A task enqueued earlier in the line moves the cursor back.
    InsertCommitted(KeyedScheduled(6, q, kBase - std::chrono::seconds(1)));
    EXPECT_EQ(saved(), "5");  // just before seq 6, at its earlier due
    EXPECT_EQ(head(), 6);
    start({6});
    save(6, kBase - std::chrono::seconds(1));
    EXPECT_EQ(saved(), "6");
    // ... and so does a task rescheduled to wait earlier, or retried by hand.
    ASSERT_TRUE(store_->Begin().ok());
    ASSERT_TRUE(
        store_->Move({5, TaskState::kScheduled, kBase - std::chrono::seconds(5), {}, 0, kNow, true})
            .ok());
    ASSERT_TRUE(store_->Commit().ok());
    EXPECT_EQ(saved(), "4");
    EXPECT_EQ(head(), 5);
    // A task waiting to retry has started: it moves nothing.
    ASSERT_TRUE(store_->Begin().ok());
    ASSERT_TRUE(
        store_
            ->Move({1, TaskState::kScheduled, kBase - std::chrono::seconds(9), {}, {}, kNow, true})
            .ok());
    ASSERT_TRUE(store_->Commit().ok());
    EXPECT_EQ(saved(), "4");
    EXPECT_EQ(head(), 5);

    // Once no task of the key lies at or before it, the cursor is dropped.
    start({5, 4});
    save(4);
    EXPECT_EQ(saved(), "4");
    EXPECT_EQ(head(), 0);
    ASSERT_TRUE(store_->Begin().ok());
    for (int64_t seq : {1, 2, 3, 5, 6}) ASSERT_TRUE(store_->Delete(seq).ok());
    ASSERT_TRUE(store_->Commit().ok());
    // Task 4 still runs: in an index of started tasks too, it holds the cursor.
    EXPECT_EQ(saved(), started_tasks_hold_it ? "4" : "");
    EXPECT_EQ(head(), 0);
    ASSERT_TRUE(store_->Begin().ok());
    ASSERT_TRUE(store_->MarkSucceeded({4}, kNow, kNow).ok());
    Result<Purged> purged = store_->PurgeFinished(kNow, 100);
    ASSERT_TRUE(purged.ok()) << purged.status().ToString();
    ASSERT_TRUE(store_->Commit().ok());
    EXPECT_EQ(purged->rows, 1);
    EXPECT_EQ(saved(), "");
  }

  std::unique_ptr<Store> store_;
};

}  // namespace chronoq::test
