// The Store contract (store/store.h), stated once for every store: each test
// runs on each factory of store_factory.h. A test here may use only the Store
// interface; what one store does its own way (SQLite's WAL, lock file, older
// schema versions; PostgreSQL's schemas, engine lock, types) is tested beside
// that store (sqlite_store_test.cc, postgres_store_test.cc).
//
// Sections follow store.h: meta and transactions, queues, tasks, the
// transitions, the window and purge, keyed tasks, locks, schedules, readers.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_factory.h"
#include "store/store_test_util.h"
#include "support/eventually.h"
#include "support/status_matchers.h"

namespace chronoq {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test::ExpectSameRow;
using test::FullRow;
using test::IsOk;
using test::kB0;
using test::kBase;
using test::kBucket;
using test::KeyedScheduled;
using test::kNow;
using test::NewSchedule;
using test::Row;
using test::Scheduled;
using test::StoreFactory;

// A fresh, empty store per test, from the factory the test runs on.
class StoreConformanceTest : public ::testing::TestWithParam<StoreFactory>,
                             protected test::StoreHelpers {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<test::ScratchStore>> scratch = GetParam().fresh();
    ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
    scratch_ = std::move(*scratch);
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }
  // The store goes before its place.
  ~StoreConformanceTest() override { store_.reset(); }

  // Closes the store (if open) and opens it again: a restart.
  void Reopen() {
    store_.reset();
    Result<std::unique_ptr<Store>> s = scratch_->Open();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  // The List tests' rows: scheduled rows whose due order differs from their
  // seq order, and a few in other states. Seqs 2 and 4 have key "k".
  void AddListRows() {
    const int64_t a = Queue("a");
    const int64_t b = Queue("b");
    ASSERT_TRUE(store_->Begin().ok());
    auto keyed = [](TaskRow r) {
      r.key = "k";
      return r;
    };
    // seq: queue, due (bucket 0-3; seqs 2, 3 and 5 share bucket 1).
    AddRow(Scheduled(1, a, kBase + 3 * kBucket));
    AddRow(keyed(Scheduled(2, b, kBase + kBucket + seconds(10))));
    AddRow(Scheduled(3, a, kBase + kBucket + seconds(5)));
    AddRow(keyed(Scheduled(4, a, kBase + 2 * kBucket)));
    AddRow(Scheduled(5, b, kBase + kBucket + seconds(1)));
    AddRow(Scheduled(6, a, kBase));
    AddRow(Row(7, a, TaskState::kDead, std::nullopt));
    AddRow(Row(8, b, TaskState::kRunning, kNow + seconds(5)));
    AddRow(Row(9, a, TaskState::kDead, std::nullopt));
    AddRow(Row(10, b, TaskState::kDead, std::nullopt));
    ASSERT_TRUE(store_->Commit().ok());
  }
  void AddRow(const TaskRow& row) {
    Result<bool> r = store_->Insert(row);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(*r);
  }

  // The seqs of the first `limit` tasks of `key` in queue `qid` waiting to
  // start after `after` (else after the saved cursor).
  std::vector<int64_t> KeyHeadSeqs(int64_t qid, const std::string& key,
                                   const std::optional<KeyPosition>& after = std::nullopt,
                                   int limit = 100) {
    Result<std::vector<DueEntry>> rows = store_->KeyHeads(qid, key, after, limit);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::vector<int64_t> out;
    if (rows.ok()) {
      for (const DueEntry& e : *rows) out.push_back(e.seq);
    }
    return out;
  }

  // Runs `write` in a transaction of its own and commits it.
  template <typename F>
  void Committed(F write) {
    ASSERT_THAT(store_->Begin(), IsOk());
    write();
    ASSERT_THAT(store_->Commit(), IsOk());
  }

  std::unique_ptr<test::ScratchStore> scratch_;
};

// Each store of store_factory.h is one instantiation. ctest runs the
// PostgreSQL one (its tests' names say Postgres) on the test cluster, in a
// run of its own; the SQLite one (at the end of this file) needs nothing.
INSTANTIATE_TEST_SUITE_P(Postgres, StoreConformanceTest,
                         ::testing::Values(test::PostgresStoreFactory()), test::StoreFactoryName);

// --- meta and transactions ---------------------------------------------------------

// A new store opens at its current schema version, and LoadMeta accepts it.
// Migrations from older versions are each store's own (sqlite_store_test.cc);
// DataSurvivesCloseAndReopen shows that opening again changes nothing.
TEST_P(StoreConformanceTest, LoadMetaOnANewStore) {
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->max_seq, 0);
  EXPECT_EQ(meta->next_token, 1u);
}

TEST_P(StoreConformanceTest, LoadMetaReportsTheLargestSeq) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(70, q, kNow));
  InsertCommitted(Scheduled(900, q, kNow));
  InsertCommitted(Scheduled(5, q, kNow));
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->max_seq, 900);
  EXPECT_EQ(meta->next_token, 1u);
}

TEST_P(StoreConformanceTest, SaveNextTokenPersistsAcrossReopen) {
  ASSERT_TRUE(store_->SaveNextToken(4242).ok());
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->next_token, 4242u);

  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->SaveNextToken(5000).ok());
  ASSERT_TRUE(store_->Commit().ok());

  Reopen();
  Result<StoreMeta> reopened = store_->LoadMeta();
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(reopened->next_token, 5000u);
}

// The token ceiling is written in the commit whose claims reach it: if that
// commit fails, the old ceiling stands.
TEST_P(StoreConformanceTest, ATokenCeilingOfARolledBackTransactionIsNotKept) {
  Committed([&] { ASSERT_THAT(store_->SaveNextToken(4097), IsOk()); });
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->SaveNextToken(8193), IsOk());
  store_->Rollback();
  EXPECT_THAT(store_->LoadMeta(),
              test::IsOkAndHolds(::testing::Field(&StoreMeta::next_token, uint64_t{4097})));
  Reopen();
  EXPECT_THAT(store_->LoadMeta(),
              test::IsOkAndHolds(::testing::Field(&StoreMeta::next_token, uint64_t{4097})));
}

TEST_P(StoreConformanceTest, RollbackDiscardsTheTransaction) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(10, q, kNow)));
  store_->Rollback();
  EXPECT_FALSE(Find(10).has_value());
  // Rollback outside a transaction is harmless.
  store_->Rollback();
  InsertCommitted(Scheduled(11, q, kNow));
  EXPECT_TRUE(Find(11).has_value());
}

// A store closed with a transaction open (a crash before COMMIT) comes back
// with what was committed before it, and nothing of it.
TEST_P(StoreConformanceTest, AReopenedStoreHoldsCommittedWritesOnly) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(1, q, kNow));
  Committed([&] { ASSERT_THAT(store_->SaveNextToken(10), IsOk()); });
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->Insert(Scheduled(2, q, kNow)), test::IsOkAndHolds(true));
  ASSERT_THAT(store_->SetPayload(1, R"({"lost":true})"), IsOk());
  ASSERT_THAT(store_->SaveNextToken(20), IsOk());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  std::optional<TaskRow> one = Find(1);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->payload, Scheduled(1, q, kNow).payload);
  EXPECT_FALSE(Find(2).has_value());
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_THAT(meta, IsOk());
  EXPECT_EQ(meta->next_token, 10u);
  EXPECT_EQ(meta->max_seq, 1);
}

// Many rows in one transaction, unnamed ones among named and keyed ones (a
// store may write some behind, in groups): each is there for the next
// statement, a savepoint splits them where they were asked for, a rollback
// takes them all, a commit keeps each as written.
TEST_P(StoreConformanceTest, ManyRowsOfOneTransactionTakeEffectInTheOrderAsked) {
  const int64_t q = Queue("q");
  auto row = [&](int64_t seq) {
    TaskRow r = Scheduled(seq, q, kNow + seconds(seq));
    r.payload = R"({"n":)" + std::to_string(seq) + "}";
    if (seq % 7 == 0) r.name = "named-" + std::to_string(seq);
    if (seq % 11 == 0) r.key = "k";
    return r;
  };
  for (bool commit : {false, true}) {
    ASSERT_THAT(store_->Begin(), IsOk());
    for (int64_t seq = 1; seq <= 3; ++seq)
      ASSERT_THAT(store_->Insert(row(seq)), test::IsOkAndHolds(true));
    EXPECT_TRUE(Find(3).has_value());  // the next statement sees them
    for (int64_t seq = 4; seq <= 20; ++seq) {
      ASSERT_THAT(store_->Insert(row(seq)), test::IsOkAndHolds(true));
    }
    Result<std::vector<TaskRow>> claimed =
        store_->MarkRunningMany({4, 5, 6, 7, 8, 9, 10, 11}, kNow + seconds(30), 1, kNow, "", "");
    ASSERT_THAT(claimed, IsOk());
    EXPECT_EQ(claimed->size(), 8u);
    for (int64_t seq = 21; seq <= 23; ++seq) {
      ASSERT_THAT(store_->Insert(row(seq)), test::IsOkAndHolds(true));
    }
    ASSERT_THAT(store_->Savepoint(), IsOk());  // 21-23 were asked for before it
    for (int64_t seq = 24; seq <= 26; ++seq) {
      ASSERT_THAT(store_->Insert(row(seq)), test::IsOkAndHolds(true));
    }
    store_->RollbackToSavepoint();
    ASSERT_THAT(store_->Insert(row(27)), test::IsOkAndHolds(true));
    if (!commit) {
      store_->Rollback();
      for (int64_t seq = 1; seq <= 27; ++seq) EXPECT_FALSE(Find(seq).has_value()) << seq;
      continue;
    }
    ASSERT_THAT(store_->Commit(), IsOk());
  }
  for (int64_t seq = 1; seq <= 27; ++seq) {
    const std::optional<TaskRow> got = Find(seq);
    if (seq >= 24 && seq <= 26) {
      EXPECT_FALSE(got.has_value()) << seq;
      continue;
    }
    ASSERT_TRUE(got.has_value()) << seq;
    EXPECT_EQ(got->payload, row(seq).payload) << seq;
    EXPECT_EQ(got->name, row(seq).name) << seq;
    EXPECT_EQ(got->key, row(seq).key) << seq;
    const bool claimed = seq >= 4 && seq <= 11;
    EXPECT_EQ(got->state, claimed ? TaskState::kRunning : TaskState::kScheduled) << seq;
    // A claimed row's due is its lease's end; the time it was due moved to run_at.
    EXPECT_EQ(claimed ? got->run_at : got->due, row(seq).due) << seq;
  }
}

TEST_P(StoreConformanceTest, RollbackToSavepointUndoesOnlyTheSavepoint) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(1, q, kNow)));

  ASSERT_TRUE(store_->Savepoint().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(2, q, kNow)));
  ASSERT_TRUE(store_->SaveNextToken(99).ok());
  EXPECT_TRUE(Find(2).has_value());
  store_->RollbackToSavepoint();
  EXPECT_FALSE(Find(2).has_value());

  // The transaction goes on, and a later savepoint can be kept.
  ASSERT_TRUE(store_->Savepoint().ok());
  ASSERT_TRUE(*store_->Insert(Scheduled(3, q, kNow)));
  ASSERT_TRUE(store_->ReleaseSavepoint().ok());
  ASSERT_TRUE(store_->Commit().ok());

  EXPECT_TRUE(Find(1).has_value());
  EXPECT_FALSE(Find(2).has_value());
  EXPECT_TRUE(Find(3).has_value());
  EXPECT_TRUE(Read(1).has_value());
  EXPECT_FALSE(Read(2).has_value());
  EXPECT_TRUE(Read(3).has_value());
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->next_token, 1u);
}

// A released savepoint's writes belong to the transaction: they go if it is
// rolled back.
TEST_P(StoreConformanceTest, AReleasedSavepointGoesWithItsTransaction) {
  const int64_t q = Queue("q");
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->Savepoint(), IsOk());
  ASSERT_THAT(store_->Insert(Scheduled(1, q, kNow)), test::IsOkAndHolds(true));
  ASSERT_THAT(store_->ReleaseSavepoint(), IsOk());
  EXPECT_TRUE(Find(1).has_value());
  store_->Rollback();
  EXPECT_FALSE(Find(1).has_value());
  EXPECT_FALSE(Read(1).has_value());
}

TEST_P(StoreConformanceTest, DataSurvivesCloseAndReopen) {
  const int64_t q = Queue("email");
  const TaskRow row = FullRow(77, q);
  InsertCommitted(row);
  InsertCommitted(Scheduled(78, q, kNow + seconds(1)));
  ASSERT_TRUE(store_->MarkRunning(78, kNow + seconds(30), 5, kNow).ok());
  ASSERT_TRUE(store_->SaveNextToken(6).ok());

  Reopen();
  Result<StoreMeta> meta = store_->LoadMeta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->max_seq, 78);
  EXPECT_EQ(meta->next_token, 6u);

  std::optional<TaskRow> got = Find(77);
  ASSERT_TRUE(got.has_value());
  ExpectSameRow(*got, row);
  std::optional<Store::ReadRow> read = Read(77);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->queue, "email");

  Result<std::vector<TaskRow>> running = store_->LoadRunning();
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].seq, 78);
  EXPECT_EQ((*running)[0].token, 5u);
  EXPECT_EQ(Queue("email"), q);
}

// --- queues ------------------------------------------------------------------------

TEST_P(StoreConformanceTest, QueueIdCreatesOnceAndIsStable) {
  const int64_t b = Queue("beta");
  const int64_t a = Queue("alpha");
  EXPECT_NE(a, b);
  EXPECT_EQ(Queue("alpha"), a);
  EXPECT_EQ(Queue("beta"), b);

  // By qid, not by name.
  Result<std::vector<QueueRow>> queues = store_->Queues();
  ASSERT_TRUE(queues.ok());
  std::vector<std::pair<int64_t, std::string>> got;
  for (const QueueRow& q : *queues) got.emplace_back(q.qid, q.name);
  std::vector<std::pair<int64_t, std::string>> want = {{a, "alpha"}, {b, "beta"}};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);

  Reopen();
  EXPECT_EQ(Queue("beta"), b);
  EXPECT_EQ(Queue("alpha"), a);
  Result<std::vector<QueueRow>> again = store_->Queues();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 2u);
}

TEST_P(StoreConformanceTest, QueueSettingsAndCountsPersist) {
  const int64_t a = Queue("a");
  const int64_t b = Queue("b");
  Result<std::vector<QueueRow>> fresh = store_->Queues();
  ASSERT_TRUE(fresh.ok());
  ASSERT_EQ(fresh->size(), 2u);
  // A new queue has no settings, is not paused and counts nothing.
  const QueueRow& q0 = (*fresh)[0];
  EXPECT_FALSE(q0.settings.concurrency || q0.settings.max_attempts || q0.settings.backoff ||
               q0.settings.retention);
  EXPECT_FALSE(q0.paused);
  EXPECT_EQ(q0.counts, (std::array<int64_t, 5>{}));

  QueueSettings settings;
  settings.concurrency = 3;
  settings.max_attempts = 9;
  settings.backoff = Backoff{std::chrono::milliseconds(5), std::chrono::minutes(2)};
  settings.retention = hours(6);
  settings.rate_limit = RateLimit{50, std::chrono::milliseconds(1500)};
  settings.max_in_flight_per_key = 4;
  settings.max_pending_per_key = int64_t{3'000'000'000};
  settings.final_statuses = std::vector<int>{400, 404};
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->SaveQueueSettings(a, settings, /*paused=*/true, /*webhooks=*/true).ok());
  ASSERT_TRUE(store_->SaveQueueCounts(a, {1, 2, 3, 4, 5}).ok());
  ASSERT_TRUE(store_->SaveQueueCounts(b, {0, 0, 7, 0, 0}).ok());
  ASSERT_TRUE(store_->Commit().ok());
  // A rolled-back change is not kept.
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->SaveQueueCounts(b, {9, 9, 9, 9, 9}).ok());
  store_->Rollback();

  Reopen();
  Result<std::vector<QueueRow>> queues = store_->Queues();
  ASSERT_TRUE(queues.ok());
  ASSERT_EQ(queues->size(), 2u);
  const QueueRow& qa = (*queues)[0];
  EXPECT_EQ(qa.qid, a);
  EXPECT_EQ(qa.name, "a");
  EXPECT_TRUE(qa.paused);
  EXPECT_TRUE(qa.webhooks);
  EXPECT_EQ(qa.settings.concurrency, 3);
  EXPECT_EQ(qa.settings.max_attempts, 9);
  EXPECT_EQ(qa.settings.backoff, settings.backoff);
  EXPECT_EQ(qa.settings.retention, hours(6));
  EXPECT_EQ(qa.settings.rate_limit, settings.rate_limit);
  EXPECT_EQ(qa.settings.max_in_flight_per_key, 4);
  EXPECT_EQ(qa.settings.max_pending_per_key, int64_t{3'000'000'000});
  EXPECT_EQ(qa.settings.final_statuses, (std::vector<int>{400, 404}));
  EXPECT_EQ(qa.counts, (std::array<int64_t, 5>{1, 2, 3, 4, 5}));
  const QueueRow& qb = (*queues)[1];
  EXPECT_EQ(qb.settings.final_statuses, std::nullopt);
  EXPECT_FALSE(qb.paused);
  EXPECT_FALSE(qb.webhooks);
  EXPECT_FALSE(qb.settings.concurrency.has_value());
  EXPECT_EQ(qb.counts, (std::array<int64_t, 5>{0, 0, 7, 0, 0}));

  // Unsetting goes back to NULL; a zero retention is kept as zero.
  QueueSettings fewer;
  fewer.retention = Duration::zero();
  ASSERT_TRUE(store_->SaveQueueSettings(a, fewer, false, false).ok());
  Result<std::vector<QueueRow>> again = store_->Queues();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)[0].settings.concurrency.has_value());
  EXPECT_FALSE((*again)[0].settings.backoff.has_value());
  EXPECT_FALSE((*again)[0].settings.rate_limit.has_value());
  EXPECT_FALSE((*again)[0].settings.max_in_flight_per_key.has_value());
  EXPECT_FALSE((*again)[0].settings.max_pending_per_key.has_value());
  EXPECT_EQ((*again)[0].settings.retention, Duration::zero());
  EXPECT_FALSE((*again)[0].paused);
  EXPECT_FALSE((*again)[0].webhooks);
}

// --- tasks -------------------------------------------------------------------------

TEST_P(StoreConformanceTest, InsertThenFindAndReadEveryColumn) {
  ASSERT_TRUE(store_->Begin().ok());
  const int64_t q = Queue("email");
  const TaskRow row = FullRow(1001, q);
  Result<bool> inserted = store_->Insert(row);
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  EXPECT_TRUE(*inserted);
  ASSERT_TRUE(store_->Commit().ok());

  std::optional<TaskRow> by_seq = Find(1001);
  ASSERT_TRUE(by_seq.has_value());
  ExpectSameRow(*by_seq, row);

  Result<std::optional<TaskRow>> by_name = store_->FindByName("share:42");
  ASSERT_TRUE(by_name.ok());
  ASSERT_TRUE(by_name->has_value());
  ExpectSameRow(**by_name, row);

  std::optional<Store::ReadRow> read = Read(1001);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->queue, "email");
  ExpectSameRow(read->row, row);

  Result<std::optional<Store::ReadRow>> read_name = store_->ReadByName("share:42");
  ASSERT_TRUE(read_name.ok());
  ASSERT_TRUE(read_name->has_value());
  EXPECT_EQ((*read_name)->queue, "email");
  ExpectSameRow((*read_name)->row, row);
}

TEST_P(StoreConformanceTest, UnsetOptionalColumnsStayUnset) {
  const int64_t q = Queue("q");
  const TaskRow row = Row(3, q, TaskState::kDead, std::nullopt);
  InsertCommitted(row);
  std::optional<TaskRow> got = Find(3);
  ASSERT_TRUE(got.has_value());
  ExpectSameRow(*got, row);
  EXPECT_FALSE(got->due.has_value());
  EXPECT_FALSE(got->name.has_value());
  EXPECT_FALSE(got->token.has_value());
  EXPECT_FALSE(got->backoff_base.has_value());
  EXPECT_FALSE(got->target.has_value());
}

TEST_P(StoreConformanceTest, MissingRowsAreNotFound) {
  Result<std::optional<TaskRow>> seq = store_->FindBySeq(404);
  ASSERT_TRUE(seq.ok());
  EXPECT_FALSE(seq->has_value());
  Result<std::optional<TaskRow>> name = store_->FindByName("nope");
  ASSERT_TRUE(name.ok());
  EXPECT_FALSE(name->has_value());
  Result<std::optional<Store::ReadRow>> read = store_->ReadBySeq(404);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->has_value());
  Result<std::optional<Store::ReadRow>> read_name = store_->ReadByName("nope");
  ASSERT_TRUE(read_name.ok());
  EXPECT_FALSE(read_name->has_value());
}

TEST_P(StoreConformanceTest, DuplicateNameInsertReturnsFalseAndWritesNothing) {
  const int64_t q = Queue("q");
  TaskRow first = Scheduled(1, q, kNow);
  first.name = "dup";
  InsertCommitted(first);

  ASSERT_TRUE(store_->Begin().ok());
  TaskRow second = Scheduled(9, q, kNow + seconds(1));
  second.name = "dup";
  second.key = "k";
  Result<bool> inserted = store_->Insert(second);
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  EXPECT_FALSE(*inserted);
  // The transaction is still usable.
  TaskRow third = Scheduled(3, q, kNow);
  third.name = "other";
  Result<bool> ok = store_->Insert(third);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(*ok);
  ASSERT_TRUE(store_->Commit().ok());

  EXPECT_FALSE(Find(9).has_value());
  EXPECT_TRUE(Find(3).has_value());
  Result<std::optional<TaskRow>> by_name = store_->FindByName("dup");
  ASSERT_TRUE(by_name.ok());
  ASSERT_TRUE(by_name->has_value());
  EXPECT_EQ((*by_name)->seq, 1);
  EXPECT_EQ((*by_name)->payload, first.payload);
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(store_->LoadMeta()->max_seq, 3);
  EXPECT_TRUE(KeyHeadSeqs(q, "k").empty());
  EXPECT_EQ(*store_->CountKeyPending(q, "k", std::nullopt), 0);
}

TEST_P(StoreConformanceTest, UnnamedRowsNeverConflict) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 3; ++seq) {
    Result<bool> inserted = store_->Insert(Scheduled(seq, q, kNow));
    ASSERT_TRUE(inserted.ok());
    EXPECT_TRUE(*inserted);
  }
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{1, 2, 3}));
}

TEST_P(StoreConformanceTest, SetPayloadAndOverwrite) {
  const int64_t q = Queue("q");
  InsertCommitted(FullRow(10, q));
  ASSERT_TRUE(store_->SetPayload(10, R"({"v":2})").ok());
  std::optional<TaskRow> with_payload = Find(10);
  ASSERT_TRUE(with_payload.has_value());
  TaskRow want = FullRow(10, q);
  want.payload = R"({"v":2})";
  ExpectSameRow(*with_payload, want);

  const int64_t q2 = Queue("q2");
  TaskRow replaced = Row(10, q2, TaskState::kScheduled, kNow + seconds(9));
  replaced.name = "renamed";
  ASSERT_TRUE(store_->Overwrite(replaced).ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  ExpectSameRow(*got, replaced);
}

// Overwrite replaces the row whole: its name, queue, state, due and key
// change wherever the row is found.
TEST_P(StoreConformanceTest, OverwriteMovesTheRowEverywhereItIsFound) {
  const int64_t a = Queue("a");
  const int64_t b = Queue("b");
  TaskRow before = Scheduled(10, a, kBase + seconds(10));
  before.name = "old";
  before.key = "k1";
  InsertCommitted(before);

  TaskRow after = Scheduled(10, b, kBase + 2 * kBucket + seconds(1));
  after.name = "new";
  after.key = "k2";
  after.priority = 4;
  Committed([&] { ASSERT_THAT(store_->Overwrite(after), IsOk()); });
  Result<std::optional<TaskRow>> old_name = store_->FindByName("old");
  ASSERT_THAT(old_name, IsOk());
  EXPECT_FALSE(old_name->has_value());
  Result<std::optional<TaskRow>> new_name = store_->FindByName("new");
  ASSERT_THAT(new_name, IsOk());
  ASSERT_TRUE(new_name->has_value());
  ExpectSameRow(**new_name, after);
  EXPECT_EQ((*store_->ReadByName("new"))->queue, "b");
  EXPECT_TRUE(ListSeqs({.queue = "a"}).empty());
  EXPECT_EQ(ListSeqs({.queue = "b"}), std::vector<int64_t>{10});
  EXPECT_TRUE(store_->LoadScheduled(kB0, 0, kB0 + 1, 10)->empty());
  Result<std::vector<DueEntry>> window = store_->LoadScheduled(kB0 + 2, 0, kB0 + 3, 10);
  ASSERT_THAT(window, IsOk());
  ASSERT_EQ(window->size(), 1u);
  EXPECT_EQ((*window)[0].qid, b);
  EXPECT_EQ((*window)[0].due, *after.due);
  EXPECT_EQ((*window)[0].priority, 4);
  EXPECT_EQ((*window)[0].key, "k2");
  EXPECT_TRUE(KeyHeadSeqs(a, "k1").empty());
  EXPECT_EQ(KeyHeadSeqs(b, "k2"), std::vector<int64_t>{10});
  // The old name is free again.
  TaskRow other = Scheduled(11, a, kNow);
  other.name = "old";
  EXPECT_THAT(store_->Insert(other), test::IsOkAndHolds(true));

  // And out of the window altogether.
  const TaskRow dead = Row(10, b, TaskState::kDead, std::nullopt);
  Committed([&] { ASSERT_THAT(store_->Overwrite(dead), IsOk()); });
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  ExpectSameRow(*got, dead);
  EXPECT_TRUE(store_->LoadScheduled(kB0 + 2, 0, kB0 + 3, 10)->empty());
  EXPECT_TRUE(KeyHeadSeqs(b, "k2").empty());
}

TEST_P(StoreConformanceTest, DeleteRemovesTheRow) {
  const int64_t q = Queue("q");
  TaskRow named = Scheduled(1, q, kNow);
  named.name = "gone";
  InsertCommitted(named);
  InsertCommitted(Scheduled(2, q, kNow));

  ASSERT_TRUE(store_->Delete(1).ok());
  EXPECT_FALSE(Find(1).has_value());
  EXPECT_TRUE(Find(2).has_value());
  EXPECT_FALSE(Read(1).has_value());
  // The name is free again.
  TaskRow reuse = Scheduled(3, q, kNow);
  reuse.name = "gone";
  Result<bool> inserted = store_->Insert(reuse);
  ASSERT_TRUE(inserted.ok());
  EXPECT_TRUE(*inserted);
  // Deleting a missing row is not an error.
  EXPECT_TRUE(store_->Delete(404).ok());
}

// --- transitions -------------------------------------------------------------------

TEST_P(StoreConformanceTest, MarkRunningClaimsAScheduledRow) {
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(10, q, kNow);
  row.attempt = 2;
  row.last_error = "earlier failure";
  InsertCommitted(row);

  const Timestamp lease = kNow + seconds(30);
  const Timestamp now = kNow + seconds(1);
  Result<std::optional<TaskRow>> r = store_->MarkRunning(10, lease, 77, now, "host-9:77");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const TaskRow& got = **r;
  EXPECT_EQ(got.seq, 10);
  EXPECT_EQ(got.state, TaskState::kRunning);
  EXPECT_EQ(got.due, lease);
  EXPECT_EQ(got.run_at, kNow);  // the old due
  EXPECT_EQ(got.token, 77u);
  EXPECT_EQ(got.attempt, 3);
  EXPECT_EQ(got.updated, now);
  EXPECT_EQ(got.last_error, "earlier failure");
  EXPECT_EQ(got.payload, row.payload);
  EXPECT_EQ(got.worker, "host-9:77");

  std::optional<TaskRow> stored = Find(10);
  ASSERT_TRUE(stored.has_value());
  ExpectSameRow(*stored, got);
}

TEST_P(StoreConformanceTest, MarkRunningReturnsNothingUnlessScheduled) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  Result<std::optional<TaskRow>> first = store_->MarkRunning(10, kNow + seconds(30), 1, kNow);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_value());

  // Already running: no second claim, nothing changes.
  Result<std::optional<TaskRow>> second =
      store_->MarkRunning(10, kNow + seconds(90), 2, kNow + seconds(5));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->has_value());
  std::optional<TaskRow> stored = Find(10);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->token, 1u);
  EXPECT_EQ(stored->due, kNow + seconds(30));
  EXPECT_EQ(stored->attempt, 1);
  EXPECT_EQ(stored->worker, std::nullopt);  // the claim named nobody

  for (TaskState st : {TaskState::kSucceeded, TaskState::kCancelled, TaskState::kDead}) {
    const int64_t seq = 20 + static_cast<int64_t>(st);
    InsertCommitted(Row(seq, q, st, kNow));
    Result<std::optional<TaskRow>> r = store_->MarkRunning(seq, kNow + seconds(30), 3, kNow);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value()) << TaskStateName(st);
    std::optional<TaskRow> unchanged = Find(seq);
    ASSERT_TRUE(unchanged.has_value());
    EXPECT_EQ(unchanged->state, st);
    EXPECT_EQ(unchanged->attempt, 0);
    EXPECT_FALSE(unchanged->token.has_value());
  }

  Result<std::optional<TaskRow>> missing = store_->MarkRunning(404, kNow, 4, kNow);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_P(StoreConformanceTest, MarkRunningManyClaimsOnlyScheduledRowsInChunks) {
  const int64_t q = Queue("q");
  std::vector<int64_t> seqs;
  for (int64_t seq = 1; seq <= 150; ++seq) {
    // Every tenth row is already running and must be left alone.
    InsertCommitted(seq % 10 == 0 ? Row(seq, q, TaskState::kRunning, kNow + seconds(5))
                                  : Scheduled(seq, q, kNow - seconds(seq)));
    seqs.push_back(151 - seq);  // asked for in reverse order
  }
  seqs.push_back(999);  // does not exist
  ASSERT_TRUE(store_->Begin().ok());
  Result<std::vector<TaskRow>> rows =
      store_->MarkRunningMany(seqs, kNow + seconds(30), 42, kNow + seconds(1), "w", "");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_EQ(rows->size(), 135u);
  std::set<int64_t> claimed;
  for (const TaskRow& r : *rows) {
    EXPECT_NE(r.seq % 10, 0) << r.seq;
    EXPECT_TRUE(claimed.insert(r.seq).second) << "twice: " << r.seq;
    EXPECT_EQ(r.state, TaskState::kRunning);
    EXPECT_EQ(r.token, 42u);
    EXPECT_EQ(r.worker, "w");
    EXPECT_EQ(r.attempt, 1);
    EXPECT_EQ(r.due, kNow + seconds(30));
    EXPECT_EQ(r.run_at, kNow - seconds(r.seq));
  }
  Result<std::optional<TaskRow>> untouched = store_->FindBySeq(10);
  ASSERT_TRUE(untouched.ok() && untouched->has_value());
  EXPECT_EQ((*untouched)->due, kNow + seconds(5));
  EXPECT_NE((*untouched)->token, 42u);
}

// A claim hands out each row exactly as it now stands in the store, every
// column (but the attempt ones) set to a value of its own: in a run of
// consecutive rows and in scattered ones (the two statements of a store that
// names runs by their ends).
TEST_P(StoreConformanceTest, MarkRunningManyReturnsEachRowAsStored) {
  const int64_t q = Queue("q");
  std::vector<int64_t> seqs;
  for (int64_t seq : {3, 5, 9, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 40}) {
    TaskRow row = FullRow(seq, q);
    row.name = "share:" + std::to_string(seq);
    row.priority = static_cast<int>(-seq);
    row.attempt = static_cast<int>(seq % 3);
    row.max_attempts = static_cast<int>(seq + 5);
    row.payload = R"({"n":)" + std::to_string(seq) + "}";
    row.due = kNow - seconds(seq);
    row.last_error = "error " + std::to_string(seq);
    row.backoff_base = milliseconds(seq);
    row.backoff_cap = seconds(seq);
    row.target = R"({"url":"https://example.com/)" + std::to_string(seq) + R"("})";
    row.sid = seq + 100;
    row.key = "key:" + std::to_string(seq);
    InsertCommitted(row);
    Committed(
        [&] { ASSERT_THAT(store_->SetResponse(seq, "response " + std::to_string(seq)), IsOk()); });
    seqs.push_back(seq);
  }
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> rows =
      store_->MarkRunningMany(seqs, kNow + seconds(30), 42, kNow + seconds(1), "w", "n");
  ASSERT_THAT(rows, IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_EQ(rows->size(), seqs.size());
  std::set<int64_t> seen;
  for (const TaskRow& got : *rows) {
    SCOPED_TRACE("seq " + std::to_string(got.seq));
    EXPECT_TRUE(seen.insert(got.seq).second);
    const std::optional<TaskRow> stored = Find(got.seq);
    ASSERT_TRUE(stored.has_value());
    ExpectSameRow(got, *stored);
    EXPECT_EQ(got.response, stored->response);
    EXPECT_EQ(got.response, "response " + std::to_string(got.seq));
    EXPECT_EQ(got.run_at, kNow - seconds(got.seq));  // the old due
    EXPECT_EQ(got.attempt, static_cast<int>(got.seq % 3) + 1);
    EXPECT_EQ(got.last_error, "error " + std::to_string(got.seq));
  }
}

// A batch names runs of consecutive rows and scattered ones, repeated ones
// too: exactly the rows named are claimed and then acknowledged, never a row
// between or beside them (a store may name a run by its ends).
// A batch of a few long runs (which a store may name by their ends, as
// PostgreSQL's *_ranges statements do), with a running row inside a run.
TEST_P(StoreConformanceTest, BatchesOfAFewLongRunsTouchOnlyTheRowsNamed) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 40; ++seq) {
    InsertCommitted(seq == 15 ? Row(seq, q, TaskState::kRunning, kNow + seconds(5))
                              : Scheduled(seq, q, kNow));
  }
  std::vector<int64_t> asked;
  for (int64_t seq = 1; seq <= 40; ++seq) {
    if (seq != 13 && (seq <= 30 || seq >= 35)) asked.push_back(seq);
  }
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> claimed =
      store_->MarkRunningMany(asked, kNow + seconds(30), 5, kNow, "w", "n");
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_THAT(claimed, IsOk());
  std::set<int64_t> got;
  for (const TaskRow& r : *claimed) got.insert(r.seq);
  std::set<int64_t> expected(asked.begin(), asked.end());
  expected.erase(15);  // already running
  EXPECT_EQ(got, expected);
  EXPECT_EQ(claimed->size(), expected.size());
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkSucceeded(asked, kNow + hours(1), kNow + seconds(2)), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  for (int64_t seq = 1; seq <= 40; ++seq) {
    const std::optional<TaskRow> row = Find(seq);
    ASSERT_TRUE(row.has_value()) << seq;
    const bool acked = seq == 15 || expected.contains(seq);
    EXPECT_EQ(row->state, acked ? TaskState::kSucceeded : TaskState::kScheduled) << seq;
    if (expected.contains(seq)) {
      EXPECT_EQ(row->attempt, 1) << seq;
      EXPECT_EQ(row->worker, "w") << seq;
      EXPECT_EQ(row->run_at, kNow) << seq;
    }
  }
}

TEST_P(StoreConformanceTest, BatchesOfRunsAndScatteredRowsTouchOnlyTheRowsNamed) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 50; ++seq) {
    InsertCommitted(seq == 20 ? Row(seq, q, TaskState::kRunning, kNow + seconds(5))
                              : Scheduled(seq, q, kNow));
  }
  std::vector<int64_t> asked = {44, 13, 42, 40};  // scattered, and 13 twice
  for (int64_t seq = 30; seq >= 12; --seq) asked.push_back(seq);
  for (int64_t seq = 1; seq <= 10; ++seq) asked.push_back(seq);
  std::set<int64_t> expected(asked.begin(), asked.end());
  expected.erase(20);  // already running
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> claimed =
      store_->MarkRunningMany(asked, kNow + seconds(30), 5, kNow + seconds(1), "w", "n");
  ASSERT_THAT(claimed, IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  std::set<int64_t> got;
  for (const TaskRow& r : *claimed) EXPECT_TRUE(got.insert(r.seq).second) << "twice: " << r.seq;
  EXPECT_EQ(got, expected);
  std::vector<int64_t> acks(expected.begin(), expected.end());
  acks.push_back(11);  // scheduled, between two runs: stays so
  acks.push_back(20);  // running under another claim: acknowledged too (the engine checks tokens)
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkSucceeded(acks, kNow + hours(1), kNow + seconds(2)), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  // One run alone, asked for backwards and with a repeat, then acknowledged
  // with a row beside it that is not running (and is left alone).
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> tail =
      store_->MarkRunningMany({50, 49, 48, 47, 46, 46}, kNow + seconds(30), 6, kNow, "w", "n");
  ASSERT_THAT(tail, IsOk());
  EXPECT_EQ(tail->size(), 5u);
  ASSERT_THAT(store_->MarkSucceeded({45, 46, 47, 48, 49, 50}, kNow + hours(1), kNow), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  for (int64_t seq = 1; seq <= 50; ++seq) {
    const std::optional<TaskRow> row = Find(seq);
    ASSERT_TRUE(row.has_value()) << seq;
    const TaskState want = expected.contains(seq) || seq == 20 || seq >= 46 ? TaskState::kSucceeded
                                                                            : TaskState::kScheduled;
    EXPECT_EQ(row->state, want) << seq;
    if (want == TaskState::kScheduled) {
      EXPECT_EQ(row->due, kNow) << seq;
      EXPECT_EQ(row->attempt, 0) << seq;
    }
  }
}

// The rows come back whole, as a read would find them.
TEST_P(StoreConformanceTest, MarkRunningManyReturnsWholeRows) {
  const int64_t q = Queue("q");
  TaskRow row = FullRow(10, q);
  row.due = kNow;
  InsertCommitted(row);
  InsertCommitted(Scheduled(11, q, kNow));
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::vector<TaskRow>> none =
      store_->MarkRunningMany({}, kNow + seconds(30), 7, kNow, "host-2:7", "");
  ASSERT_THAT(none, IsOk());
  EXPECT_TRUE(none->empty());
  Result<std::vector<TaskRow>> claimed = store_->MarkRunningMany(
      {11, 10}, kNow + seconds(30), 7, kNow + seconds(1), "host-2:7", "node-b");
  ASSERT_THAT(claimed, IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  ASSERT_EQ(claimed->size(), 2u);
  for (const TaskRow& got : *claimed) {
    std::optional<TaskRow> stored = Find(got.seq);
    ASSERT_TRUE(stored.has_value());
    ExpectSameRow(got, *stored);
  }
  const TaskRow& full = (*claimed)[0].seq == 10 ? (*claimed)[0] : (*claimed)[1];
  EXPECT_EQ(full.attempt, 3);
  EXPECT_EQ(full.run_at, kNow);
  EXPECT_EQ(full.token, 7u);
  EXPECT_EQ(full.payload, row.payload);
  EXPECT_EQ(full.target, row.target);
  EXPECT_EQ(full.key, row.key);
  EXPECT_EQ(full.sid, row.sid);
  EXPECT_EQ(full.worker, "host-2:7");  // the claimer replaces the last one
  // The attempt columns are written but not returned: the claimer knows
  // them (the history is read when an attempt fails).
  EXPECT_EQ(full.claimed, std::nullopt);
  EXPECT_EQ(full.node, std::nullopt);
  EXPECT_EQ(full.attempts, std::nullopt);
  const std::optional<TaskRow> stored = Find(10);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->claimed, kNow + seconds(1));
  EXPECT_EQ(stored->node, "node-b");
}

// The worker stays with the task after its lease ends (who ran it last, for
// triage), and a replaced task (Overwrite) starts without one.
TEST_P(StoreConformanceTest, TheWorkerOutlivesTheLease) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->MarkRunning(10, kNow + seconds(30), 9, kNow, "billing-3:811"), IsOk());
  ASSERT_THAT(store_->Move({.seq = 10,
                            .state = TaskState::kDead,
                            .due = std::nullopt,
                            .last_error = "boom",
                            .attempt = std::nullopt,
                            .now = kNow + seconds(1)}),
              IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  std::optional<TaskRow> dead = Find(10);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->worker, "billing-3:811");
  EXPECT_FALSE(dead->token.has_value());

  TaskRow replaced = Scheduled(10, q, kNow + seconds(5));
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->Overwrite(replaced), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  std::optional<TaskRow> fresh = Find(10);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->worker, std::nullopt);
}

TEST_P(StoreConformanceTest, MoveRunningBackToScheduledClearsRunAtAndToken) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow).ok());

  const Timestamp retry_at = kNow + seconds(45);
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kScheduled,
                          .due = retry_at,
                          .last_error = "boom",
                          .attempt = std::nullopt,
                          .now = kNow + seconds(2)})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kScheduled);
  EXPECT_EQ(got->due, retry_at);
  EXPECT_FALSE(got->run_at.has_value());
  EXPECT_FALSE(got->token.has_value());
  EXPECT_EQ(got->last_error, "boom");
  EXPECT_EQ(got->attempt, 1);  // kept
  EXPECT_EQ(got->updated, kNow + seconds(2));
}

TEST_P(StoreConformanceTest, MoveLeavingScheduledKeepsTheDueInRunAt) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow + seconds(100)));
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kCancelled,
                          .due = kNow + std::chrono::hours(24),
                          .last_error = std::nullopt,
                          .attempt = std::nullopt,
                          .now = kNow})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kCancelled);
  EXPECT_EQ(got->run_at, kNow + seconds(100));
  EXPECT_EQ(got->due, kNow + std::chrono::hours(24));
  EXPECT_FALSE(got->last_error.has_value());
}

TEST_P(StoreConformanceTest, MoveFromRunningKeepsRunAtClearsTokenAndCoalescesError) {
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(10, q, kNow);
  row.last_error = "first failure";
  InsertCommitted(row);
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow + seconds(1)).ok());

  // No last_error given: the old one is kept.
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kSucceeded,
                          .due = kNow + std::chrono::hours(24),
                          .last_error = std::nullopt,
                          .attempt = std::nullopt,
                          .now = kNow + seconds(3)})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kSucceeded);
  EXPECT_EQ(got->run_at, kNow);  // when it was claimed for, not the lease end
  EXPECT_FALSE(got->token.has_value());
  EXPECT_EQ(got->last_error, "first failure");
  EXPECT_EQ(got->attempt, 1);
}

TEST_P(StoreConformanceTest, MoveToDeadSetsAttemptErrorAndNullDue) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow).ok());
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kDead,
                          .due = std::nullopt,
                          .last_error = "gave up",
                          .attempt = 25,
                          .now = kNow + seconds(4)})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kDead);
  EXPECT_FALSE(got->due.has_value());
  EXPECT_EQ(got->last_error, "gave up");
  EXPECT_EQ(got->attempt, 25);
  EXPECT_EQ(got->run_at, kNow);
  EXPECT_FALSE(got->token.has_value());
}

TEST_P(StoreConformanceTest, MoveDeadBackToScheduledResetsAttempt) {
  const int64_t q = Queue("q");
  TaskRow row = Row(10, q, TaskState::kDead, std::nullopt);
  row.attempt = 25;
  row.run_at = kNow - seconds(60);
  row.last_error = "gave up";
  InsertCommitted(row);
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kScheduled,
                          .due = kNow,
                          .last_error = std::nullopt,
                          .attempt = 0,
                          .now = kNow})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, TaskState::kScheduled);
  EXPECT_EQ(got->due, kNow);
  EXPECT_EQ(got->attempt, 0);
  EXPECT_FALSE(got->run_at.has_value());
  EXPECT_EQ(got->last_error, "gave up");
}

TEST_P(StoreConformanceTest, MoveToRunningKeepsTheToken) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->MarkRunning(10, kNow + seconds(30), 9, kNow).ok());
  ASSERT_TRUE(store_
                  ->Move({.seq = 10,
                          .state = TaskState::kRunning,
                          .due = kNow + seconds(60),
                          .last_error = std::nullopt,
                          .attempt = std::nullopt,
                          .now = kNow})
                  .ok());
  std::optional<TaskRow> got = Find(10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->token, 9u);
  EXPECT_EQ(got->run_at, kNow);
  EXPECT_EQ(got->due, kNow + seconds(60));
}

TEST_P(StoreConformanceTest, MarkSucceededMovesOnlyRunningRowsInChunks) {
  const int64_t q = Queue("q");
  // 150 running rows: more than two statements' worth (64 per statement),
  // claimed through node "n1", the odd ones with an earlier attempt in their
  // history: an acknowledgement keeps all of that (the last attempt is read
  // from it).
  std::vector<int64_t> seqs;
  for (int64_t seq = 1; seq <= 150; ++seq) {
    InsertCommitted(Scheduled(seq, q, kNow));
    seqs.push_back(seq);
  }
  InsertCommitted(Scheduled(151, q, kNow));
  ASSERT_THAT(store_->Begin(), IsOk());
  for (int64_t seq = 1; seq <= 150; seq += 2) {
    ASSERT_THAT(store_->Move({.seq = seq,
                              .state = TaskState::kScheduled,
                              .due = kNow,
                              .now = kNow,
                              .attempts = "[[1,0,5,1]]"}),
                IsOk());
  }
  ASSERT_THAT(store_->MarkRunningMany(seqs, kNow + seconds(30), 9, kNow, "w", "n1"), IsOk());
  seqs.push_back(151);  // not running: must stay as it is
  ASSERT_THAT(store_->MarkSucceeded(seqs, kNow + hours(24), kNow + seconds(1)), IsOk());
  ASSERT_THAT(store_->Commit(), IsOk());
  for (int64_t seq : {int64_t{1}, int64_t{64}, int64_t{65}, int64_t{129}, int64_t{150}}) {
    Result<std::optional<TaskRow>> row = store_->FindBySeq(seq);
    ASSERT_TRUE(row.ok() && row->has_value()) << seq;
    EXPECT_EQ((*row)->state, TaskState::kSucceeded) << seq;
    EXPECT_EQ((*row)->due, kNow + hours(24)) << seq;
    EXPECT_EQ((*row)->updated, kNow + seconds(1)) << seq;
    EXPECT_FALSE((*row)->token.has_value()) << seq;
    EXPECT_EQ((*row)->claimed, kNow) << seq;
    EXPECT_EQ((*row)->node, "n1") << seq;
    EXPECT_EQ((*row)->attempts,
              seq % 2 == 0 ? std::nullopt : std::optional<std::string>("[[1,0,5,1]]"))
        << seq;
  }
  Result<std::optional<TaskRow>> scheduled = store_->FindBySeq(151);
  ASSERT_TRUE(scheduled.ok() && scheduled->has_value());
  EXPECT_EQ((*scheduled)->state, TaskState::kScheduled);
  EXPECT_EQ((*scheduled)->due, kNow);
  EXPECT_EQ((*scheduled)->attempts, std::nullopt);
}

// Move writes the attempt history only when given one; an empty one clears it.
TEST_P(StoreConformanceTest, MoveSetsKeepsOrClearsTheAttemptHistory) {
  const int64_t q = Queue("q");
  InsertCommitted(Row(1, q, TaskState::kRunning, kNow + seconds(30)));
  const auto attempts = [&] { return Find(1).value().attempts; };
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_
                  ->Move({.seq = 1,
                          .state = TaskState::kScheduled,
                          .due = kNow,
                          .now = kNow,
                          .attempts = R"([{"attempt":1}])"})
                  .ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(attempts(), R"([{"attempt":1}])");
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->Move({.seq = 1, .state = TaskState::kDead, .now = kNow}).ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(attempts(), R"([{"attempt":1}])");
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(
      store_->Move({.seq = 1, .state = TaskState::kDead, .now = kNow, .attempts = ""}).ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(attempts(), std::nullopt);
}

TEST_P(StoreConformanceTest, SetDueChangesOnlyDueAndUpdated) {
  const int64_t q = Queue("q");
  InsertCommitted(FullRow(10, q));
  std::optional<TaskRow> before = Find(10);
  ASSERT_TRUE(before.has_value());

  ASSERT_TRUE(store_->SetDue(10, kNow + seconds(500), kNow + seconds(7)).ok());
  std::optional<TaskRow> after = Find(10);
  ASSERT_TRUE(after.has_value());
  TaskRow want = *before;
  want.due = kNow + seconds(500);
  want.updated = kNow + seconds(7);
  ExpectSameRow(*after, want);
}

TEST_P(StoreConformanceTest, SetResponseChangesOnlyTheResponse) {
  const int64_t q = Queue("q");
  InsertCommitted(FullRow(10, q));
  std::optional<TaskRow> before = Find(10);
  ASSERT_TRUE(before.has_value());
  EXPECT_FALSE(before->response.has_value());

  Committed([&] { ASSERT_THAT(store_->SetResponse(10, "HTTP 503: try later"), IsOk()); });
  std::optional<TaskRow> after = Find(10);
  ASSERT_TRUE(after.has_value());
  ExpectSameRow(*after, *before);
  EXPECT_EQ(after->response, "HTTP 503: try later");
  std::optional<Store::ReadRow> read = Read(10);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->row.response, "HTTP 503: try later");
  // A later response replaces it.
  Committed([&] { ASSERT_THAT(store_->SetResponse(10, "HTTP 200"), IsOk()); });
  EXPECT_EQ(Find(10)->response, "HTTP 200");
}

// Workers' errors and webhook responses are kept byte for byte, NUL bytes
// and invalid UTF-8 included: they come from outside, and a store that
// refused them would fail the whole commit.
TEST_P(StoreConformanceTest, ErrorsAndResponsesKeepEveryByte) {
  const std::string error("boom\0\xff\xfe tail", 12);
  const std::string response("HTTP 500: \x80\x00{}", 14);
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(1, q, kNow);
  row.last_error = error;
  InsertCommitted(row);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_THAT(store_->SetResponse(1, response), IsOk());
  ASSERT_THAT(store_->Move({.seq = 1,
                            .state = TaskState::kDead,
                            .due = std::nullopt,
                            .last_error = error + "!",
                            .attempt = 3,
                            .now = kNow}),
              IsOk());
  ASSERT_TRUE(store_->Commit().ok());
  std::optional<TaskRow> got = Find(1);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->last_error, error + "!");
  EXPECT_EQ(got->response, response);
  std::optional<Store::ReadRow> read = Read(1);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->row.last_error, error + "!");
  EXPECT_EQ(read->row.response, response);

  ScheduleRow s;
  s.name = "s";
  s.qid = q;
  s.spec = "{}";
  s.last_error = error;
  Result<std::optional<int64_t>> sid = store_->InsertSchedule(s);
  ASSERT_TRUE(sid.ok() && sid->has_value()) << sid.status().ToString();
  Result<std::optional<ScheduleRow>> back = store_->FindSchedule(**sid);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->last_error, error);
}

// --- the window and purge ----------------------------------------------------------

TEST_P(StoreConformanceTest, LoadScheduledRangeLimitAndOrder) {
  const int64_t q1 = Queue("q1");
  const int64_t q2 = Queue("q2");
  TaskRow prio = Scheduled(1, q2, kBase + kBucket + seconds(3));
  prio.priority = -7;
  InsertCommitted(prio);                                   // bucket 1
  InsertCommitted(Scheduled(2, q1, kBase + kBucket));      // bucket 1
  InsertCommitted(Scheduled(3, q1, kBase + 3 * kBucket));  // bucket 3 == to: excluded
  InsertCommitted(Scheduled(4, q1, kBase));                // bucket 0 == from: included
  InsertCommitted(Scheduled(5, q1, kBase - seconds(1)));   // before from
  InsertCommitted(Scheduled(6, q1, kBase + 2 * kBucket + seconds(60)));  // bucket 2
  InsertCommitted(Row(7, q1, TaskState::kRunning, kBase + kBucket));
  InsertCommitted(Row(8, q1, TaskState::kSucceeded, kBase + kBucket));

  // Bucket order, then seq order within a bucket.
  Result<std::vector<DueEntry>> all = store_->LoadScheduled(kB0, 0, kB0 + 3, 100);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<int64_t> seqs;
  for (const DueEntry& e : *all) seqs.push_back(e.seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{4, 1, 2, 6}));

  ASSERT_EQ(all->size(), 4u);
  const DueEntry& first_of_bucket = (*all)[1];
  EXPECT_EQ(first_of_bucket.qid, q2);
  EXPECT_EQ(first_of_bucket.due, kBase + kBucket + seconds(3));  // the exact due
  EXPECT_EQ(first_of_bucket.priority, -7);

  Result<std::vector<DueEntry>> two = store_->LoadScheduled(kB0, 0, kB0 + 3, 2);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].seq, 4);
  EXPECT_EQ((*two)[1].seq, 1);

  Result<std::vector<DueEntry>> none = store_->LoadScheduled(kB0 + 4, 0, kB0 + 100, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// after_seq is where the previous read stopped inside from_bucket: it skips
// rows of that bucket only, whatever the seqs of later buckets.
TEST_P(StoreConformanceTest, LoadScheduledSkipsOnlyTheReadPartOfTheFirstBucket) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(5, q, kBase + kBucket + seconds(1)));        // bucket 1, small seq
  InsertCommitted(Scheduled(10, q, kBase + seconds(30)));                // bucket 0
  InsertCommitted(Scheduled(20, q, kBase + seconds(1)));                 // bucket 0
  InsertCommitted(Scheduled(30, q, kBase + kBucket));                    // bucket 1
  InsertCommitted(Scheduled(40, q, kBase + 2 * kBucket - Duration(1)));  // bucket 1, its end
  auto seqs = [&](int64_t from, int64_t after_seq, int64_t to, int limit = 100) {
    std::vector<int64_t> out;
    Result<std::vector<DueEntry>> rows = store_->LoadScheduled(from, after_seq, to, limit);
    EXPECT_THAT(rows, IsOk());
    if (rows.ok()) {
      for (const DueEntry& e : *rows) out.push_back(e.seq);
    }
    return out;
  };
  EXPECT_EQ(seqs(kB0, 0, kB0 + 2), (std::vector<int64_t>{10, 20, 5, 30, 40}));
  EXPECT_EQ(seqs(kB0, 10, kB0 + 2), (std::vector<int64_t>{20, 5, 30, 40}));
  EXPECT_EQ(seqs(kB0, 20, kB0 + 2), (std::vector<int64_t>{5, 30, 40}));
  EXPECT_EQ(seqs(kB0, 20, kB0 + 2, 2), (std::vector<int64_t>{5, 30}));
  EXPECT_EQ(seqs(kB0 + 1, 5, kB0 + 2), (std::vector<int64_t>{30, 40}));
  EXPECT_EQ(seqs(kB0 + 1, 40, kB0 + 2), std::vector<int64_t>{});
  EXPECT_EQ(seqs(kB0, 0, kB0 + 1), (std::vector<int64_t>{10, 20}));
}

TEST_P(StoreConformanceTest, NextScheduledBucket) {
  const int64_t q = Queue("q");
  Result<std::optional<int64_t>> empty = store_->NextScheduledBucket(DueBucket(Timestamp()));
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());

  InsertCommitted(Scheduled(1, q, kBase + 2 * kBucket + seconds(20)));
  InsertCommitted(Scheduled(2, q, kBase + kBucket + seconds(10)));
  InsertCommitted(Row(3, q, TaskState::kRunning, kBase));
  InsertCommitted(Row(4, q, TaskState::kSucceeded, kBase));

  Result<std::optional<int64_t>> next = store_->NextScheduledBucket(kB0);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, kB0 + 1);

  Result<std::optional<int64_t>> inclusive = store_->NextScheduledBucket(kB0 + 1);
  ASSERT_TRUE(inclusive.ok());
  EXPECT_EQ(*inclusive, kB0 + 1);

  Result<std::optional<int64_t>> later = store_->NextScheduledBucket(kB0 + 2);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(*later, kB0 + 2);

  Result<std::optional<int64_t>> past = store_->NextScheduledBucket(kB0 + 3);
  ASSERT_TRUE(past.ok());
  EXPECT_FALSE(past->has_value());
}

TEST_P(StoreConformanceTest, LoadRunningReturnsOnlyRunningRows) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(1, q, kNow));
  InsertCommitted(Scheduled(2, q, kNow));
  InsertCommitted(Scheduled(3, q, kNow));
  InsertCommitted(Row(4, q, TaskState::kDead, std::nullopt));
  ASSERT_TRUE(store_->MarkRunning(1, kNow + seconds(30), 11, kNow).ok());
  ASSERT_TRUE(store_->MarkRunning(3, kNow + seconds(40), 12, kNow).ok());

  Result<std::vector<TaskRow>> running = store_->LoadRunning();
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  ASSERT_EQ(running->size(), 2u);
  std::vector<std::pair<int64_t, uint64_t>> got;
  for (const TaskRow& r : *running) {
    EXPECT_EQ(r.state, TaskState::kRunning);
    ASSERT_TRUE(r.token.has_value());
    got.emplace_back(r.seq, *r.token);
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, uint64_t>>{{1, 11}, {3, 12}}));
}

TEST_P(StoreConformanceTest, PurgeFinishedDeletesOnlyDueSucceededAndCancelled) {
  const int64_t q = Queue("q");
  InsertCommitted(Row(1, q, TaskState::kSucceeded, kNow - seconds(1)));
  InsertCommitted(Row(2, q, TaskState::kCancelled, kNow));  // due == before: purged
  InsertCommitted(Row(3, q, TaskState::kSucceeded, kNow + seconds(1)));
  InsertCommitted(Row(4, q, TaskState::kCancelled, kNow + seconds(1)));
  InsertCommitted(Row(5, q, TaskState::kScheduled, kNow - seconds(10)));
  InsertCommitted(Row(6, q, TaskState::kRunning, kNow - seconds(10)));
  InsertCommitted(Row(7, q, TaskState::kDead, std::nullopt));
  TaskRow old = Row(8, q, TaskState::kSucceeded, kNow - 3 * kBucket);  // an earlier bucket
  old.name = "old";
  InsertCommitted(old);

  Result<Purged> purged = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->rows, 3);
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{3, 4, 5, 6, 7}));
  EXPECT_FALSE(Find(8).has_value());
  // Its name is free.
  TaskRow reuse = Scheduled(9, q, kNow);
  reuse.name = "old";
  EXPECT_THAT(store_->Insert(reuse), test::IsOkAndHolds(true));

  Result<Purged> again = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->rows, 0);
}

TEST_P(StoreConformanceTest, PurgeFinishedRespectsTheLimit) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 5; ++seq) {
    InsertCommitted(Row(seq, q, TaskState::kSucceeded, kNow - seconds(seq)));
  }
  InsertCommitted(Row(6, q, TaskState::kScheduled, kNow - seconds(100)));

  std::vector<int> counts;
  for (int i = 0; i < 4; ++i) {
    Result<Purged> n = store_->PurgeFinished(kNow, 2);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    counts.push_back(n->rows);
  }
  EXPECT_EQ(counts, (std::vector<int>{2, 2, 1, 0}));
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{6}));
}

TEST_P(StoreConformanceTest, PurgeFinishedReportsWhatItDeletedPerQueueAndState) {
  const int64_t a = Queue("a");
  const int64_t b = Queue("b");
  InsertCommitted(Row(1, a, TaskState::kSucceeded, kNow - seconds(3)));
  InsertCommitted(Row(2, a, TaskState::kSucceeded, kNow - seconds(2)));
  InsertCommitted(Row(3, a, TaskState::kCancelled, kNow - seconds(1)));
  InsertCommitted(Row(4, b, TaskState::kSucceeded, kNow));
  InsertCommitted(Row(5, b, TaskState::kSucceeded, kNow + seconds(1)));  // not yet

  Result<Purged> purged = store_->PurgeFinished(kNow, 100);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->rows, 4);
  std::vector<std::tuple<int64_t, TaskState, int64_t>> got;
  for (const Purged::Count& c : purged->by_queue) got.emplace_back(c.qid, c.state, c.n);
  std::sort(got.begin(), got.end());
  const std::vector<std::tuple<int64_t, TaskState, int64_t>> want = {
      {a, TaskState::kSucceeded, 2}, {a, TaskState::kCancelled, 1}, {b, TaskState::kSucceeded, 1}};
  EXPECT_EQ(got, want);
}

TEST_P(StoreConformanceTest, NextPurgeDue) {
  const int64_t q = Queue("q");
  Result<std::optional<Timestamp>> empty = store_->NextPurgeDue();
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());

  InsertCommitted(Row(1, q, TaskState::kScheduled, kNow - seconds(100)));
  InsertCommitted(Row(2, q, TaskState::kRunning, kNow - seconds(90)));
  InsertCommitted(Row(3, q, TaskState::kDead, std::nullopt));
  Result<std::optional<Timestamp>> still_none = store_->NextPurgeDue();
  ASSERT_TRUE(still_none.ok());
  EXPECT_FALSE(still_none->has_value());

  InsertCommitted(Row(4, q, TaskState::kSucceeded, kBase + 2 * kBucket + seconds(5)));
  InsertCommitted(Row(5, q, TaskState::kCancelled, kBase + kBucket + seconds(7)));
  InsertCommitted(Row(6, q, TaskState::kSucceeded, kBase + kBucket + seconds(9)));
  // A lower bound: the start of the earliest bucket holding a purge time.
  Result<std::optional<Timestamp>> next = store_->NextPurgeDue();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, kBase + kBucket);

  ASSERT_TRUE(store_->Delete(5).ok());
  ASSERT_TRUE(store_->Delete(6).ok());
  Result<std::optional<Timestamp>> after = store_->NextPurgeDue();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, kBase + 2 * kBucket);

  // A cancelled row alone in the earliest bucket counts as much.
  InsertCommitted(Row(7, q, TaskState::kCancelled, kBase + seconds(3)));
  EXPECT_THAT(store_->NextPurgeDue(), test::IsOkAndHolds(std::optional<Timestamp>(kBase)));
}

// --- keyed tasks -------------------------------------------------------------------

TEST_P(StoreConformanceTest, KeyedTasksWaitingToStartAreFoundByKeyInOrder) {
  const int64_t q = Queue("q");
  auto keyed = [&](int64_t seq, Timestamp due, int attempt = 0, int prio = 0) {
    TaskRow r = Scheduled(seq, q, due);
    r.key = "k";
    r.attempt = attempt;
    r.priority = prio;
    return r;
  };
  InsertCommitted(keyed(1, kBase + seconds(20)));
  InsertCommitted(keyed(2, kBase + seconds(10)));
  InsertCommitted(keyed(3, kBase + seconds(10)));
  InsertCommitted(keyed(4, kBase + seconds(10), 0, -1));
  InsertCommitted(keyed(5, kBase, /*attempt=*/2));  // waiting to retry: not waiting to start
  TaskRow other = keyed(6, kBase);
  other.key = "other";
  InsertCommitted(other);
  InsertCommitted(Scheduled(7, q, kBase));  // no key

  // (due, priority, seq) order; `after` steps past a position.
  std::vector<int64_t> order;
  std::vector<int64_t> counts;  // waiting after each position
  std::optional<KeyPosition> after;
  for (;;) {
    Result<std::vector<DueEntry>> head = store_->KeyHeads(q, "k", after, 1);
    ASSERT_TRUE(head.ok()) << head.status().ToString();
    Result<int64_t> count = store_->CountKeyPending(q, "k", after);
    ASSERT_TRUE(count.ok()) << count.status().ToString();
    counts.push_back(*count);
    if (head->empty()) break;
    const DueEntry& h = head->front();
    order.push_back(h.seq);
    after = KeyPosition{h.due, h.priority, h.seq};
  }
  EXPECT_EQ(order, (std::vector<int64_t>{4, 2, 3, 1}));
  EXPECT_EQ(counts, (std::vector<int64_t>{4, 3, 2, 1, 0}));
  // Several at once: the same order, across equal and greater (due, priority).
  auto seqs = [&](const std::optional<KeyPosition>& from, int limit) {
    std::vector<int64_t> out;
    Result<std::vector<DueEntry>> rows = store_->KeyHeads(q, "k", from, limit);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (rows.ok()) {
      for (const DueEntry& e : *rows) out.push_back(e.seq);
    }
    return out;
  };
  EXPECT_EQ(seqs(std::nullopt, 10), (std::vector<int64_t>{4, 2, 3, 1}));
  EXPECT_EQ(seqs(std::nullopt, 2), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(seqs(KeyPosition{kBase + seconds(10), 0, 2}, 2), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(*store_->CountKeyPending(q, "other", std::nullopt), 1);
  EXPECT_EQ(*store_->CountKeyPending(q + 1, "k", std::nullopt), 0);
  Result<std::vector<std::pair<int64_t, std::string>>> retries = store_->LoadKeyRetries();
  ASSERT_TRUE(retries.ok());
  EXPECT_EQ(*retries, (std::vector<std::pair<int64_t, std::string>>{{q, "k"}}));

  // The window's load says which rows are keyed and which started.
  Result<std::vector<DueEntry>> loaded = store_->LoadScheduled(kB0, 0, kB0 + 1, 100);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->size(), 7u);
  EXPECT_EQ((*loaded)[4].key, "k");
  EXPECT_TRUE((*loaded)[4].started);
  EXPECT_FALSE((*loaded)[0].started);
  EXPECT_EQ((*loaded)[6].key, std::nullopt);
  // Going on after seq 5 within the first bucket.
  Result<std::vector<DueEntry>> rest = store_->LoadScheduled(kB0, 5, kB0 + 1, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].seq, 6);
}

// The saved cursor of a key (store.h), through what it serves: a search
// without `after` starts after it, so it must never hide a task waiting to
// start. Saved only at tasks that started (as the engine does), it is moved
// back by every write that makes a task wait to start at or before it, and
// a key whose tasks were all purged or deleted starts afresh. (Where the
// cursor lies, and that it never moves backwards and is dropped, changes no
// answer: each store's own tests look at its table for those, with
// StoreHelpers::ExpectSavedKeyCursorRules.)
TEST_P(StoreConformanceTest, AKeysSavedCursorNeverHidesATaskWaitingToStart) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 5; ++seq) InsertCommitted(KeyedScheduled(seq, q, kBase));
  // What a search from the saved cursor finds, checked against the count.
  auto waiting = [&] {
    std::vector<int64_t> heads = KeyHeadSeqs(q, "k");
    Result<int64_t> count = store_->CountKeyPending(q, "k", std::nullopt);
    EXPECT_THAT(count, test::IsOkAndHolds(static_cast<int64_t>(heads.size())));
    return heads;
  };
  auto save = [&](int64_t seq, Timestamp at = kBase) {
    Committed([&] { ASSERT_THAT(store_->SaveKeyCursor(q, "k", KeyPosition{at, 0, seq}), IsOk()); });
  };
  auto start = [&](std::vector<int64_t> seqs) {
    Committed([&] {
      Result<std::vector<TaskRow>> rows =
          store_->MarkRunningMany(seqs, kNow + seconds(30), 1, kNow, "", "");
      ASSERT_THAT(rows, IsOk());
      ASSERT_EQ(rows->size(), seqs.size());
    });
  };
  auto move = [&](int64_t seq, TaskState state, std::optional<Timestamp> due,
                  std::optional<int> attempt) {
    Committed([&] {
      ASSERT_THAT(store_->Move({seq, state, due, {}, attempt, kNow, /*keyed=*/true}), IsOk());
    });
  };
  EXPECT_EQ(waiting(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  start({1, 2});
  save(2);
  EXPECT_EQ(waiting(), (std::vector<int64_t>{3, 4, 5}));
  start({3});
  save(3);
  save(1);  // behind the saved one: changes nothing
  EXPECT_EQ(waiting(), (std::vector<int64_t>{4, 5}));

  // Enqueued earlier in the line than the cursor.
  InsertCommitted(KeyedScheduled(6, q, kBase - seconds(1)));
  EXPECT_EQ(waiting(), (std::vector<int64_t>{6, 4, 5}));
  start({6});
  save(6, kBase - seconds(1));
  EXPECT_EQ(waiting(), (std::vector<int64_t>{4, 5}));
  // Rescheduled to wait earlier.
  move(5, TaskState::kScheduled, kBase - seconds(5), 0);
  EXPECT_EQ(waiting(), (std::vector<int64_t>{5, 4}));
  // A task waiting to retry has started: it does not wait to start.
  move(1, TaskState::kScheduled, kBase - seconds(9), std::nullopt);
  EXPECT_EQ(waiting(), (std::vector<int64_t>{5, 4}));
  // Replaced (Overwrite) to wait earlier.
  Committed(
      [&] { ASSERT_THAT(store_->Overwrite(KeyedScheduled(1, q, kBase - seconds(7))), IsOk()); });
  EXPECT_EQ(waiting(), (std::vector<int64_t>{1, 5, 4}));
  // Retried by hand: dead, then scheduled again with attempt 0.
  move(6, TaskState::kDead, std::nullopt, 25);
  move(6, TaskState::kScheduled, kBase - seconds(30), 0);
  EXPECT_EQ(waiting(), (std::vector<int64_t>{6, 1, 5, 4}));

  // Every task started, the cursor at the last: nothing waits.
  start({6, 1, 5, 4});
  save(4);
  EXPECT_EQ(waiting(), std::vector<int64_t>{});
  // Gone (deleted, purged); new tasks of the key, before and after where the
  // cursor was, are all found.
  Committed([&] {
    for (int64_t seq : {1, 2, 5, 6}) ASSERT_THAT(store_->Delete(seq), IsOk());
    ASSERT_THAT(store_->MarkSucceeded({3, 4}, kNow, kNow), IsOk());
    Result<Purged> purged = store_->PurgeFinished(kNow, 100);
    ASSERT_THAT(purged, IsOk());
    EXPECT_EQ(purged->rows, 2);
  });
  InsertCommitted(KeyedScheduled(7, q, kBase + hours(1)));
  InsertCommitted(KeyedScheduled(8, q, kBase - hours(1)));
  EXPECT_EQ(waiting(), (std::vector<int64_t>{8, 7}));
}

// A search from `after` starts right after it, wherever the saved cursor
// is; KeyPosition::Before(task) is the place just before that task.
TEST_P(StoreConformanceTest, KeyHeadsAfterAPlaceStartRightAfterIt) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 4; ++seq) {
    InsertCommitted(KeyedScheduled(seq, q, kBase + seconds(seq % 2)));  // 2 and 4, then 1 and 3
  }
  Committed([&] {
    ASSERT_THAT(store_->SaveKeyCursor(q, "k", KeyPosition{kBase - seconds(1), 0, 0}), IsOk());
  });
  EXPECT_EQ(KeyHeadSeqs(q, "k"), (std::vector<int64_t>{2, 4, 1, 3}));
  EXPECT_EQ(KeyHeadSeqs(q, "k", KeyPosition::Before(kBase, 0, 4)), (std::vector<int64_t>{4, 1, 3}));
  EXPECT_EQ(KeyHeadSeqs(q, "k", KeyPosition{kBase, 0, 4}), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(KeyHeadSeqs(q, "k", KeyPosition{kBase, 0, 4}, 1), std::vector<int64_t>{1});
  EXPECT_EQ(KeyHeadSeqs(q, "k", KeyPosition{kBase + seconds(1), 0, 3}), std::vector<int64_t>{});
  EXPECT_THAT(store_->CountKeyPending(q, "k", KeyPosition::Before(kBase, 0, 4)),
              test::IsOkAndHolds(3));
  EXPECT_THAT(store_->CountKeyPending(q, "k", KeyPosition{kBase + seconds(1), 0, 3}),
              test::IsOkAndHolds(0));
  // Of another key or queue: none.
  EXPECT_TRUE(KeyHeadSeqs(q, "K").empty());
  EXPECT_TRUE(KeyHeadSeqs(Queue("other"), "k").empty());
}

// Tasks of a key that a claim took are not waiting to start, wherever
// they lie in the key's line and however many of them a read meets: a read
// of `limit` finds the first `limit` that wait, in the claim's transaction,
// after it committed and after a restart. (PostgreSQL's claims leave their
// rows scheduled, in its journal: its KeyHeads leaves them out from memory
// and reads on past them.)
TEST_P(StoreConformanceTest, KeyHeadsReadPastTasksThatStarted) {
  const int64_t q = Queue("q");
  for (int64_t seq = 1; seq <= 7; ++seq) InsertCommitted(KeyedScheduled(seq, q, kBase));
  auto claim = [&](std::vector<int64_t> seqs) {
    Result<std::vector<TaskRow>> rows =
        store_->MarkRunningMany(seqs, kNow + seconds(30), 1, kNow, "w", "");
    ASSERT_THAT(rows, IsOk());
    ASSERT_EQ(rows->size(), seqs.size());
  };
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    EXPECT_EQ(KeyHeadSeqs(q, "k", std::nullopt, 1), std::vector<int64_t>{1});
    EXPECT_EQ(KeyHeadSeqs(q, "k", std::nullopt, 2), (std::vector<int64_t>{1, 5}));
    EXPECT_EQ(KeyHeadSeqs(q, "k", std::nullopt, 3), (std::vector<int64_t>{1, 5, 7}));
    EXPECT_EQ(KeyHeadSeqs(q, "k", std::nullopt, 10), (std::vector<int64_t>{1, 5, 7}));
    EXPECT_EQ(KeyHeadSeqs(q, "k", KeyPosition{kBase, 0, 1}, 1), std::vector<int64_t>{5});
    EXPECT_EQ(KeyHeadSeqs(q, "k", KeyPosition{kBase, 0, 5}, 5), std::vector<int64_t>{7});
    EXPECT_THAT(store_->CountKeyPending(q, "k", std::nullopt), test::IsOkAndHolds(3));
  };
  ASSERT_THAT(store_->Begin(), IsOk());
  claim({2, 3, 4});
  claim({6});
  check("in the claims' transaction");
  ASSERT_THAT(store_->Commit(), IsOk());
  check("after the commit");
  Reopen();
  check("after a restart");
  // Finished: still not waiting.
  Committed([&] { ASSERT_THAT(store_->MarkSucceeded({2, 3, 4, 6}, kNow, kNow), IsOk()); });
  check("after their acknowledgement");
}

// KeyHeadsOf answers each read as KeyHeads would, in the reads' order:
// reads from a place and from the saved cursor, of several keys and queues,
// the same key twice, a key with nothing waiting, and reads that claimed
// tasks shorten (PostgreSQL reads on past them).
TEST_P(StoreConformanceTest, KeyHeadsOfAnswersEachReadAsKeyHeads) {
  const int64_t q = Queue("q");
  const int64_t other = Queue("other");
  auto keyed = [&](int64_t seq, int64_t qid, const std::string& key, Timestamp due) {
    TaskRow r = KeyedScheduled(seq, qid, due);
    r.key = key;
    return r;
  };
  for (int64_t i = 0; i < 6; ++i) {
    InsertCommitted(keyed(1 + i, q, "a", kBase + seconds(i)));
    InsertCommitted(keyed(11 + i, q, "b", kBase + seconds(10 - i)));  // in reverse of seq
    InsertCommitted(keyed(21 + i, other, "a", kBase + seconds(i)));
  }
  Committed([&] {
    ASSERT_THAT(store_->SaveKeyCursor(q, "b", KeyPosition{kBase + seconds(8), 0, 13}), IsOk());
    // Claimed: a's 2 and 3, other's 22.
    ASSERT_THAT(store_->MarkRunningMany({2, 3, 22}, kNow + seconds(30), 1, kNow, "w", ""), IsOk());
  });
  const std::string a = "a", b = "b", none = "none";
  const KeyPosition start{Timestamp::min(), std::numeric_limits<int>::min(), 0};
  const std::vector<Store::KeyRead> reads = {
      {q, &a, start, 2},                          // 1, then past 2 and 3: 4
      {q, &b, std::nullopt, 10},                  // from the saved cursor: 12, 11
      {other, &a, KeyPosition{kBase, 0, 21}, 3},  // past 22: 23, 24, 25
      {q, &none, start, 5},
      {q, &a, KeyPosition{kBase + seconds(3), 0, 4}, 1},  // 5
      {q, &b, start, 1},                                  // 16
  };
  Result<std::vector<std::vector<DueEntry>>> got = store_->KeyHeadsOf(reads);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->size(), reads.size());
  const std::vector<std::vector<int64_t>> want = {{1, 4}, {12, 11}, {23, 24, 25}, {}, {5}, {16}};
  for (size_t i = 0; i < reads.size(); ++i) {
    std::vector<int64_t> seqs;
    for (const DueEntry& e : (*got)[i]) seqs.push_back(e.seq);
    EXPECT_EQ(seqs, want[i]) << "read " << i;
    EXPECT_EQ(seqs, KeyHeadSeqs(reads[i].qid, *reads[i].key, reads[i].after, reads[i].limit))
        << "read " << i;
  }
  EXPECT_EQ((*got)[0][1].due, kBase + seconds(3));
  EXPECT_EQ((*got)[0][1].qid, q);
  Result<std::vector<std::vector<DueEntry>>> no_reads = store_->KeyHeadsOf({});
  ASSERT_THAT(no_reads, IsOk());
  EXPECT_TRUE(no_reads->empty());
}

// One (queue, key) per keyed task waiting to retry: scheduled with
// attempt > 0. Not the ones waiting to start, running or finished, nor
// unkeyed ones.
TEST_P(StoreConformanceTest, LoadKeyRetriesNamesEachKeyedTaskWaitingToRetry) {
  const int64_t a = Queue("a");
  const int64_t b = Queue("b");
  auto task = [&](int64_t seq, int64_t qid, TaskState state, std::optional<std::string> key,
                  int attempt) {
    TaskRow r = Row(seq, qid, state,
                    state == TaskState::kDead ? std::nullopt : std::optional<Timestamp>(kNow));
    r.key = std::move(key);
    r.attempt = attempt;
    InsertCommitted(r);
  };
  Result<std::vector<std::pair<int64_t, std::string>>> none = store_->LoadKeyRetries();
  ASSERT_THAT(none, IsOk());
  EXPECT_TRUE(none->empty());
  task(1, a, TaskState::kScheduled, "k", 1);
  task(2, a, TaskState::kScheduled, "k", 3);
  task(3, b, TaskState::kScheduled, "k", 2);
  task(4, a, TaskState::kScheduled, "j", 1);
  task(5, a, TaskState::kScheduled, "k", 0);           // waits to start
  task(6, a, TaskState::kRunning, "k", 2);             // running
  task(7, a, TaskState::kDead, "k", 25);               // finished
  task(8, a, TaskState::kScheduled, std::nullopt, 4);  // no key
  Result<std::vector<std::pair<int64_t, std::string>>> retries = store_->LoadKeyRetries();
  ASSERT_THAT(retries, IsOk());
  std::vector<std::pair<int64_t, std::string>> got = *retries;
  std::sort(got.begin(), got.end());
  std::vector<std::pair<int64_t, std::string>> want = {{a, "j"}, {a, "k"}, {a, "k"}, {b, "k"}};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  // Claimed again: no longer waiting.
  Committed([&] {
    ASSERT_THAT(store_->MarkRunningMany({1, 3, 4}, kNow, 2, kNow, "", ""), IsOk());
  });
  EXPECT_THAT(store_->LoadKeyRetries(),
              test::IsOkAndHolds(std::vector<std::pair<int64_t, std::string>>{{a, "k"}}));
}

// --- keyed locks -------------------------------------------------------------------

TEST_P(StoreConformanceTest, LocksAreSavedReplacedAndDeleted) {
  using Lock = std::tuple<std::string, uint64_t, std::string, Timestamp>;
  auto locks = [&] {
    std::vector<Lock> out;
    Result<std::vector<LockRow>> rows = store_->LoadLocks();
    EXPECT_THAT(rows, IsOk());
    if (rows.ok()) {
      for (const LockRow& r : *rows) out.emplace_back(r.key, r.token, r.owner, r.expires);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_TRUE(locks().empty());
  Committed([&] {
    ASSERT_THAT(store_->SaveLock({"a", 1, "worker-1", kNow + seconds(30)}), IsOk());
    ASSERT_THAT(store_->SaveLock({"b", 2, "worker-2", kNow + Duration(40'000'001)}), IsOk());
  });
  EXPECT_EQ(locks(), (std::vector<Lock>{{"a", 1, "worker-1", kNow + seconds(30)},
                                        {"b", 2, "worker-2", kNow + Duration(40'000'001)}}));
  // Granted anew (or extended): the row of its key is replaced.
  Committed([&] {
    ASSERT_THAT(store_->SaveLock({"a", 3, "worker-3", kNow + seconds(50)}), IsOk());
    ASSERT_THAT(store_->DeleteLock("b"), IsOk());
    ASSERT_THAT(store_->DeleteLock("never-held"), IsOk());
  });
  EXPECT_EQ(locks(), (std::vector<Lock>{{"a", 3, "worker-3", kNow + seconds(50)}}));
  // Saved twice in one transaction, the last one stands; an owner may be empty.
  Committed([&] {
    ASSERT_THAT(store_->SaveLock({"d", 5, "worker-5", kNow}), IsOk());
    ASSERT_THAT(store_->SaveLock({"d", 6, "", kNow + seconds(60)}), IsOk());
  });
  const std::vector<Lock> held = {{"a", 3, "worker-3", kNow + seconds(50)},
                                  {"d", 6, "", kNow + seconds(60)}};
  EXPECT_EQ(locks(), held);
  ASSERT_THAT(store_->Begin(), IsOk());
  ASSERT_THAT(store_->SaveLock({"c", 4, "worker-4", kNow}), IsOk());
  ASSERT_THAT(store_->DeleteLock("a"), IsOk());
  store_->Rollback();
  Reopen();
  EXPECT_EQ(locks(), held);
}

// --- schedules ---------------------------------------------------------------------

TEST_P(StoreConformanceTest, SchedulesSaveAndReadEveryColumn) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  ScheduleRow r = NewSchedule("nightly", q);
  Result<std::optional<int64_t>> sid = store_->InsertSchedule(r);
  ASSERT_TRUE(sid.ok() && sid->has_value()) << sid.status().ToString();
  // A taken name writes nothing.
  Result<std::optional<int64_t>> again = store_->InsertSchedule(r);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  r.sid = **sid;
  r.paused = true;
  r.current_seq = 41;
  r.cursor = kNow + seconds(1);
  r.next_at = kNow + seconds(2);
  r.claimed_at = kNow + seconds(3);
  r.runs = 5;
  r.skipped = 6;
  r.last_task = "nightly@x";
  r.last_for = kNow + seconds(4);
  r.last_state = TaskState::kDead;
  r.last_finished = kNow + seconds(5);
  r.last_error = "boom";
  r.updated = kNow + seconds(6);
  ASSERT_TRUE(store_->SaveSchedule(r).ok());
  ASSERT_TRUE(store_->Commit().ok());
  Reopen();

  Result<std::optional<ScheduleRow>> got = store_->FindScheduleByName("nightly");
  ASSERT_TRUE(got.ok() && got->has_value());
  const ScheduleRow& g = **got;
  EXPECT_EQ(g.sid, r.sid);
  EXPECT_EQ(g.qid, q);
  EXPECT_EQ(g.spec, r.spec);
  EXPECT_TRUE(g.paused);
  EXPECT_EQ(g.current_seq, 41);
  EXPECT_EQ(g.cursor, r.cursor);
  EXPECT_EQ(g.next_at, r.next_at);
  EXPECT_EQ(g.claimed_at, r.claimed_at);
  EXPECT_EQ(g.runs, 5);
  EXPECT_EQ(g.skipped, 6);
  EXPECT_EQ(g.last_task, r.last_task);
  EXPECT_EQ(g.last_for, r.last_for);
  EXPECT_EQ(g.last_state, TaskState::kDead);
  EXPECT_EQ(g.last_finished, r.last_finished);
  EXPECT_EQ(g.last_error, "boom");
  EXPECT_EQ(g.created, kNow);
  EXPECT_EQ(g.updated, r.updated);
  Result<std::optional<ScheduleRow>> by_sid = store_->FindSchedule(r.sid);
  ASSERT_TRUE(by_sid.ok() && by_sid->has_value());
  EXPECT_EQ((*by_sid)->name, "nightly");
}

// SaveSchedule writes every column, unset ones included.
TEST_P(StoreConformanceTest, SaveScheduleClearsWhatIsUnset) {
  const int64_t q = Queue("q");
  ScheduleRow r = NewSchedule("nightly", q);
  r.current_seq = 41;
  r.cursor = kNow + seconds(1);
  r.next_at = kNow + seconds(2);
  r.claimed_at = kNow + seconds(3);
  r.last_task = "nightly@x";
  r.last_for = kNow + seconds(4);
  r.last_state = TaskState::kSucceeded;
  r.last_finished = kNow + seconds(5);
  r.last_error = "boom";
  Committed([&] {
    Result<std::optional<int64_t>> sid = store_->InsertSchedule(r);
    ASSERT_THAT(sid, IsOk());
    ASSERT_TRUE(sid->has_value());
    r.sid = **sid;
  });
  Result<std::optional<ScheduleRow>> inserted = store_->FindSchedule(r.sid);
  ASSERT_THAT(inserted, IsOk());
  ASSERT_TRUE(inserted->has_value());
  EXPECT_EQ((*inserted)->last_state, TaskState::kSucceeded);
  EXPECT_EQ((*inserted)->next_at, r.next_at);

  ScheduleRow cleared = NewSchedule("renamed", Queue("other"));
  cleared.sid = r.sid;
  cleared.spec = R"({"v":2})";
  cleared.created = kNow - seconds(1);
  Committed([&] { ASSERT_THAT(store_->SaveSchedule(cleared), IsOk()); });
  Result<std::optional<ScheduleRow>> got = store_->FindSchedule(r.sid);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  const ScheduleRow& g = **got;
  EXPECT_EQ(g.name, "renamed");
  EXPECT_EQ(g.qid, cleared.qid);
  EXPECT_EQ(g.spec, cleared.spec);
  EXPECT_FALSE(g.paused);
  EXPECT_FALSE(g.current_seq.has_value());
  EXPECT_FALSE(g.cursor.has_value());
  EXPECT_FALSE(g.next_at.has_value());
  EXPECT_FALSE(g.claimed_at.has_value());
  EXPECT_EQ(g.runs, 0);
  EXPECT_EQ(g.skipped, 0);
  EXPECT_FALSE(g.last_task.has_value());
  EXPECT_FALSE(g.last_for.has_value());
  EXPECT_FALSE(g.last_state.has_value());
  EXPECT_FALSE(g.last_finished.has_value());
  EXPECT_FALSE(g.last_error.has_value());
  EXPECT_EQ(g.created, kNow - seconds(1));
  // Found by its new name only; no longer due.
  EXPECT_FALSE(store_->FindScheduleByName("nightly")->has_value());
  EXPECT_TRUE(store_->FindScheduleByName("renamed")->has_value());
  EXPECT_TRUE(store_->SchedulesDueBefore(kNow + hours(1), 0, 10)->empty());
}

TEST_P(StoreConformanceTest, DeletedScheduleIdsAreNeverReused) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  const int64_t first = **store_->InsertSchedule(NewSchedule("a", q));
  ASSERT_TRUE(store_->DeleteSchedule(first).ok());
  EXPECT_FALSE(store_->FindSchedule(first)->has_value());
  const int64_t second = **store_->InsertSchedule(NewSchedule("a", q));
  ASSERT_TRUE(store_->Commit().ok());
  // An occurrence of the deleted schedule must not be taken for one of the new.
  EXPECT_GT(second, first);
}

TEST_P(StoreConformanceTest, MissingSchedulesAreNotFound) {
  Result<std::optional<ScheduleRow>> by_sid = store_->FindSchedule(404);
  ASSERT_THAT(by_sid, IsOk());
  EXPECT_FALSE(by_sid->has_value());
  Result<std::optional<ScheduleRow>> by_name = store_->FindScheduleByName("nope");
  ASSERT_THAT(by_name, IsOk());
  EXPECT_FALSE(by_name->has_value());
  // Deleting a missing schedule is not an error.
  Committed([&] { EXPECT_THAT(store_->DeleteSchedule(404), IsOk()); });
}

TEST_P(StoreConformanceTest, SchedulesDueBeforeAndListing) {
  const int64_t q = Queue("q");
  const int64_t other = Queue("other");
  ASSERT_TRUE(store_->Begin().ok());
  const std::vector<std::pair<std::string, std::optional<Duration>>> rows = {
      {"d", seconds(5)}, {"b", seconds(-5)}, {"a", std::nullopt}, {"c", seconds(-1)}};
  for (const auto& [name, next] : rows) {
    ScheduleRow r = NewSchedule(name, name == "c" ? other : q);
    if (next) r.next_at = kNow + *next;
    ASSERT_TRUE(store_->InsertSchedule(r)->has_value());
  }
  auto names = [](const Result<std::vector<ScheduleRow>>& r) {
    std::vector<std::string> out;
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const ScheduleRow& s : *r) out.push_back(s.name);
    }
    return out;
  };
  // Due before now: b and c, by sid (insertion order).
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow, 0, 10)), (std::vector<std::string>{"b", "c"}));
  const int64_t b_sid = (*store_->FindScheduleByName("b"))->sid;
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow, b_sid, 10)), std::vector<std::string>{"c"});
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow, 0, 1)), std::vector<std::string>{"b"});
  // Listing: by name, after a cursor, of one queue.
  EXPECT_EQ(names(store_->ListSchedules(std::nullopt, "", 10)),
            (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(names(store_->ListSchedules(std::nullopt, "b", 1)), std::vector<std::string>{"c"});
  EXPECT_EQ(names(store_->ListSchedules(q, "", 10)), (std::vector<std::string>{"a", "b", "d"}));
  ASSERT_TRUE(store_->Commit().ok());
}

// "Before" is strict; a schedule without an unclaimed occurrence (next_at
// unset) is never due; listing one queue pages by name too.
TEST_P(StoreConformanceTest, SchedulesDueBeforeIsStrictAndListingPagesWithinAQueue) {
  const int64_t q = Queue("q");
  const int64_t other = Queue("other");
  auto names = [](const Result<std::vector<ScheduleRow>>& r) {
    std::vector<std::string> out;
    EXPECT_THAT(r, IsOk());
    if (r.ok()) {
      for (const ScheduleRow& s : *r) out.push_back(s.name);
    }
    return out;
  };
  Committed([&] {
    for (const std::string name : {"e", "a", "d", "b", "c"}) {
      ScheduleRow r = NewSchedule(name, name == "b" ? other : q);
      if (name != "c") r.next_at = kNow + (name == "e" ? seconds(0) : -seconds(1));
      ASSERT_THAT(store_->InsertSchedule(r), IsOk());
    }
  });
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow, 0, 10)),
            (std::vector<std::string>{"a", "d", "b"}));
  EXPECT_EQ(names(store_->SchedulesDueBefore(kNow + Duration(1), 0, 10)),
            (std::vector<std::string>{"e", "a", "d", "b"}));
  EXPECT_EQ(names(store_->ListSchedules(q, "a", 2)), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(names(store_->ListSchedules(q, "d", 2)), std::vector<std::string>{"e"});
  EXPECT_EQ(names(store_->ListSchedules(other, "", 10)), std::vector<std::string>{"b"});
  EXPECT_EQ(names(store_->ListSchedules(Queue("empty"), "", 10)), std::vector<std::string>{});
}

// Schedule names compare as bytes, whatever a database's collation says.
TEST_P(StoreConformanceTest, SchedulesListInByteOrder) {
  const int64_t q = Queue("q");
  ASSERT_TRUE(store_->Begin().ok());
  for (const char* name : {"b", "B", "a", "Z", "\xc3\xa9t\xc3\xa9", "_x"}) {
    ScheduleRow s;
    s.name = name;
    s.qid = q;
    s.spec = "{}";
    ASSERT_TRUE(store_->InsertSchedule(s).ok()) << name;
  }
  ASSERT_TRUE(store_->Commit().ok());
  Result<std::vector<ScheduleRow>> list = store_->ListSchedules(std::nullopt, "", 100);
  ASSERT_THAT(list, IsOk());
  std::vector<std::string> names;
  for (const ScheduleRow& s : *list) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"B", "Z", "_x", "a", "b", "\xc3\xa9t\xc3\xa9"}));
  // Pages go on in the same order.
  Result<std::vector<ScheduleRow>> after = store_->ListSchedules(std::nullopt, "Z", 2);
  ASSERT_THAT(after, IsOk());
  names.clear();
  for (const ScheduleRow& s : *after) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"_x", "a"}));
}

// --- readers -----------------------------------------------------------------------

TEST_P(StoreConformanceTest, ReaderSeesOnlyCommittedData) {
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(10, q, kNow);
  row.name = "visible-later";

  ASSERT_TRUE(store_->Begin().ok());
  Result<bool> inserted = store_->Insert(row);
  ASSERT_TRUE(inserted.ok());
  ASSERT_TRUE(*inserted);
  // The writer sees its own transaction...
  EXPECT_TRUE(Find(10).has_value());
  // ...the reader does not.
  EXPECT_FALSE(Read(10).has_value());
  Result<std::optional<Store::ReadRow>> by_name = store_->ReadByName("visible-later");
  ASSERT_TRUE(by_name.ok());
  EXPECT_FALSE(by_name->has_value());
  EXPECT_TRUE(ListSeqs({}).empty());

  ASSERT_TRUE(store_->Commit().ok());
  std::optional<Store::ReadRow> read = Read(10);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->row.seq, 10);
  EXPECT_EQ(read->queue, "q");
  EXPECT_EQ(ListSeqs({}), (std::vector<int64_t>{10}));
}

TEST_P(StoreConformanceTest, ReaderDoesNotSeeUncommittedUpdates) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(10, q, kNow));
  ASSERT_TRUE(store_->Begin().ok());
  Result<std::optional<TaskRow>> running =
      store_->MarkRunning(10, kNow + seconds(30), 5, kNow + seconds(1));
  ASSERT_TRUE(running.ok());
  ASSERT_TRUE(running->has_value());
  std::optional<Store::ReadRow> before = Read(10);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->row.state, TaskState::kScheduled);
  ASSERT_TRUE(store_->Commit().ok());
  std::optional<Store::ReadRow> after = Read(10);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->row.state, TaskState::kRunning);
}

// Readers run on any thread while the writer works, and see committed states
// only. The writer holds each transaction open until a read has started
// after its uncommitted write.
TEST_P(StoreConformanceTest, ReadersOnAnotherThreadSeeOnlyCommittedStates) {
  const int64_t q = Queue("q");
  TaskRow row = Scheduled(1, q, kNow);
  row.name = "watched";
  row.payload = "0";
  InsertCommitted(row);

  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::atomic<int> uncommitted_seen{0};
  std::atomic<int> went_back{0};
  std::atomic<int> errors{0};
  std::thread reader([&] {
    int last = 0;
    for (int i = 0; !done.load(); ++i) {
      std::optional<std::string> payload;
      if (i % 3 == 0) {
        Result<std::optional<Store::ReadRow>> r = store_->ReadBySeq(1);
        if (r.ok() && r->has_value()) payload = (*r)->row.payload;
      } else if (i % 3 == 1) {
        Result<std::optional<Store::ReadRow>> r = store_->ReadByName("watched");
        if (r.ok() && r->has_value()) payload = (*r)->row.payload;
      } else {
        Result<std::vector<Store::ReadRow>> r = store_->List({.queue = "q"});
        if (r.ok() && r->size() == 1) payload = (*r)[0].row.payload;
      }
      if (!payload) {
        ++errors;
      } else if (*payload == "\"uncommitted\"") {
        ++uncommitted_seen;
      } else {
        const int v = std::stoi(*payload);
        if (v < last) ++went_back;
        last = v;
      }
      ++reads;
    }
  });
  // No ASSERT until the reader is joined: returning would leave it running.
  for (int i = 1; i <= 100; ++i) {
    EXPECT_THAT(store_->Begin(), IsOk());
    EXPECT_THAT(store_->SetPayload(1, "\"uncommitted\""), IsOk());
    const int before = reads.load();
    // Two more reads: the second started after the write.
    const bool read = test::Eventually([&] { return reads.load() >= before + 2; },
                                       "a read while a transaction is open");
    EXPECT_TRUE(read);
    EXPECT_THAT(store_->SetPayload(1, std::to_string(i)), IsOk());
    const Status committed = store_->Commit();
    EXPECT_THAT(committed, IsOk());
    if (!read || !committed.ok()) break;
  }
  done = true;
  reader.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(uncommitted_seen.load(), 0);
  EXPECT_EQ(went_back.load(), 0);
  EXPECT_EQ(Read(1)->row.payload, "100");
}

TEST_P(StoreConformanceTest, ListByStateOrdersByDueBucketThenSeq) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{6, 2, 3, 5, 4, 1}));
}

TEST_P(StoreConformanceTest, ListByStatePagesWithAfterBucketAndAfterSeq) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  q.limit = 2;
  std::vector<int64_t> all;
  for (int page = 0; page < 10; ++page) {
    Result<std::vector<Store::ReadRow>> rows = store_->List(q);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_LE(rows->size(), 2u);
    if (rows->empty()) break;
    for (const Store::ReadRow& r : *rows) all.push_back(r.row.seq);
    ASSERT_TRUE(rows->back().row.due.has_value());
    q.after_bucket = DueBucket(*rows->back().row.due);
    q.after_seq = rows->back().row.seq;
  }
  EXPECT_EQ(all, (std::vector<int64_t>{6, 2, 3, 5, 4, 1}));
}

TEST_P(StoreConformanceTest, ListCursorInsideABucket) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  q.after_bucket = kB0 + 1;
  q.after_seq = 2;  // seqs 3 and 5 share that bucket and come after 2
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{3, 5, 4, 1}));
}

TEST_P(StoreConformanceTest, ListByStateAndQueue) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.state = TaskState::kScheduled;
  q.queue = "b";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{2, 5}));
  q.queue = "a";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{6, 3, 4, 1}));
  q.queue = "nope";
  EXPECT_TRUE(ListSeqs(q).empty());
}

TEST_P(StoreConformanceTest, ListRowsCarryTheirQueueName) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.state = TaskState::kRunning;
  Result<std::vector<Store::ReadRow>> rows = store_->List(q);
  ASSERT_THAT(rows, IsOk());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].row.seq, 8);
  EXPECT_EQ((*rows)[0].queue, "b");
  EXPECT_EQ((*rows)[0].row.state, TaskState::kRunning);
}

TEST_P(StoreConformanceTest, ListDeadIsOrderedBySeqAndPagesBySeq) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.state = TaskState::kDead;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{7, 9, 10}));
  q.limit = 2;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{7, 9}));
  q.after_seq = 9;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{10}));
  q.limit = 100;
  q.after_seq = 0;
  q.queue = "a";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{7, 9}));
}

TEST_P(StoreConformanceTest, ListNoStateIsOrderedBySeq) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  q.limit = 3;
  q.after_seq = 4;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{5, 6, 7}));
  q.limit = 100;
  q.after_seq = 0;
  q.queue = "b";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{2, 5, 8, 10}));
}

TEST_P(StoreConformanceTest, ListEmptyState) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.state = TaskState::kSucceeded;
  EXPECT_TRUE(ListSeqs(q).empty());
}

TEST_P(StoreConformanceTest, ListFiltersByKey) {
  ASSERT_NO_FATAL_FAILURE(AddListRows());
  Store::ListQuery q;
  q.key = "k";
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{2, 4}));
  q.state = TaskState::kScheduled;
  EXPECT_EQ(ListSeqs(q), (std::vector<int64_t>{2, 4}));
  q.queue = "a";
  EXPECT_EQ(ListSeqs(q), std::vector<int64_t>{4});
  q.queue.reset();
  q.state = TaskState::kDead;
  EXPECT_TRUE(ListSeqs(q).empty());
  q.state.reset();
  q.key = "none";
  EXPECT_TRUE(ListSeqs(q).empty());
}

// Another store is one more line: INSTANTIATE_TEST_SUITE_P(Postgres, ...).
INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformanceTest,
                         ::testing::Values(test::SqliteStoreFactory()), test::StoreFactoryName);

// --- copying a whole store (chronoq-admin copy) -------------------------------------
// A copy goes from one store into another, empty one: each test here copies
// between two stores of the factory it runs on (chronoq-admin's tests copy
// across kinds).

class StoreCopyConformanceTest : public StoreConformanceTest {
 protected:
  // The target of a copy: another fresh store of the same kind.
  void OpenTarget() {
    Result<std::unique_ptr<test::ScratchStore>> scratch = GetParam().fresh();
    ASSERT_THAT(scratch, IsOk());
    target_scratch_ = std::move(*scratch);
    Result<std::unique_ptr<Store>> s = target_scratch_->Open();
    ASSERT_THAT(s, IsOk());
    target_ = std::move(s).value();
  }
  ~StoreCopyConformanceTest() override { target_.reset(); }

  static std::vector<Store::StoredTask> AllTasks(Store& store) {
    Result<std::vector<Store::StoredTask>> rows = store.ExportTasks(0, 1000);
    EXPECT_THAT(rows, IsOk());
    return rows.ok() ? *rows : std::vector<Store::StoredTask>();
  }
  static void ExpectSameTasks(const std::vector<Store::StoredTask>& got,
                              const std::vector<Store::StoredTask>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("seq " + std::to_string(want[i].row.seq));
      ExpectSameRow(got[i].row, want[i].row);
      EXPECT_EQ(got[i].row.response, want[i].row.response);
      EXPECT_EQ(got[i].korder, want[i].korder);
    }
  }

  std::unique_ptr<test::ScratchStore> target_scratch_;
  std::unique_ptr<Store> target_;
};

TEST_P(StoreCopyConformanceTest, ANewStoreIsEmptyAndItsMetaIsTheStart) {
  Result<Store::RowCounts> counts = store_->CountRows();
  ASSERT_THAT(counts, IsOk());
  EXPECT_TRUE(counts->empty());
  Result<Store::CopyMeta> meta = store_->ExportMeta();
  ASSERT_THAT(meta, IsOk());
  EXPECT_EQ(*meta, (Store::CopyMeta{.next_token = 1, .last_sid = 0}));
}

TEST_P(StoreCopyConformanceTest, CountRowsCountsEveryTableAndTasksByState) {
  const int64_t q = Queue("q");
  Queue("other");
  Committed([&] {
    ASSERT_TRUE(*store_->Insert(Scheduled(1, q, kNow)));
    ASSERT_TRUE(*store_->Insert(KeyedScheduled(2, q, kNow)));
    ASSERT_TRUE(*store_->Insert(Row(3, q, TaskState::kRunning, kNow)));
    ASSERT_TRUE(*store_->Insert(Row(4, q, TaskState::kDead, std::nullopt)));
    ASSERT_TRUE(*store_->Insert(Row(5, q, TaskState::kDead, std::nullopt)));
    ASSERT_TRUE(*store_->Insert(Row(6, q, TaskState::kCancelled, kNow)));
    ASSERT_THAT(store_->InsertSchedule(NewSchedule("nightly", q)), IsOk());
    ASSERT_THAT(store_->SaveLock({"k1", 5, "me", kNow}), IsOk());
    ASSERT_THAT(store_->SaveKeyCursor(q, "k", KeyPosition::Before(kNow, 0, 2)), IsOk());
  });
  Result<Store::RowCounts> counts = store_->CountRows();
  ASSERT_THAT(counts, IsOk());
  EXPECT_EQ(counts->tasks, (std::array<int64_t, 5>{2, 1, 0, 1, 2}));
  EXPECT_EQ(counts->total_tasks(), 6);
  EXPECT_EQ(counts->queues, 2);
  EXPECT_EQ(counts->schedules, 1);
  EXPECT_EQ(counts->locks, 1);
  EXPECT_EQ(counts->key_cursors, 1);
  EXPECT_FALSE(counts->empty());
}

// Every column, korder and response included, read back by ExportTasks and
// written as they are by ImportTasks; pages by seq.
TEST_P(StoreCopyConformanceTest, TasksExportAndImportWithEveryColumnBySeqPages) {
  const int64_t q = Queue("q");
  Committed([&] {
    ASSERT_TRUE(*store_->Insert(FullRow(10, q)));
    ASSERT_THAT(store_->SetResponse(10, std::string("500 \0\xff\n\\\t", 9)), IsOk());
    // Keyed, claimed: korder keeps the due it waited to start at.
    ASSERT_TRUE(*store_->Insert(KeyedScheduled(20, q, kNow + seconds(1))));
    ASSERT_THAT(store_->MarkRunning(20, kNow + seconds(31), 9, kNow), IsOk());
    ASSERT_TRUE(*store_->Insert(Row(30, q, TaskState::kDead, std::nullopt)));
    ASSERT_THAT(store_->Move({.seq = 30,
                              .state = TaskState::kDead,
                              .last_error = std::string("tab\there\nnul\0!", 14),
                              .now = kNow}),
                IsOk());
  });
  const std::vector<Store::StoredTask> all = AllTasks(*store_);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].row.response, std::string("500 \0\xff\n\\\t", 9));
  EXPECT_EQ(all[1].row.state, TaskState::kRunning);
  EXPECT_EQ(all[1].korder, kNow + seconds(1));
  EXPECT_EQ(all[2].korder, std::nullopt);
  Result<std::vector<Store::StoredTask>> page = store_->ExportTasks(10, 1);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].row.seq, 20);
  EXPECT_TRUE(store_->ExportTasks(30, 10)->empty());

  ASSERT_NO_FATAL_FAILURE(OpenTarget());
  ASSERT_THAT(target_->ImportQueues(*store_->Queues()), IsOk());
  ASSERT_THAT(target_->Begin(), IsOk());
  ASSERT_THAT(target_->ImportTasks(all), IsOk());
  ASSERT_THAT(target_->Commit(), IsOk());
  ExpectSameTasks(AllTasks(*target_), all);
  // What the engine reads finds them as it would in the original.
  EXPECT_EQ(target_->LoadRunning()->size(), 1u);
  EXPECT_EQ(target_->FindByName("share:42")->value().seq, 10);
  EXPECT_EQ(target_->LoadMeta()->max_seq, 30);
}

TEST_P(StoreCopyConformanceTest, ImportingATakenSeqFails) {
  const int64_t q = Queue("q");
  InsertCommitted(Scheduled(1, q, kNow));
  ASSERT_THAT(store_->Begin(), IsOk());
  EXPECT_FALSE(store_->ImportTasks({{Scheduled(1, q, kNow), std::nullopt}}).ok());
  store_->Rollback();
  EXPECT_EQ(AllTasks(*store_).size(), 1u);
}

TEST_P(StoreCopyConformanceTest, QueuesImportWithTheirIdsSettingsFlagsAndCounts) {
  Queue("a");
  const int64_t b = Queue("b");
  QueueSettings settings;
  settings.concurrency = 3;
  settings.max_attempts = 4;
  settings.backoff = Backoff{seconds(1), seconds(60)};
  settings.retention = hours(2);
  settings.rate_limit = RateLimit{10, seconds(1)};
  settings.max_in_flight_per_key = 2;
  settings.max_pending_per_key = 100;
  settings.final_statuses = std::vector<int>{};  // empty is kept apart from unset
  Committed([&] {
    ASSERT_THAT(store_->SaveQueueSettings(b, settings, /*paused=*/true, /*webhooks=*/true), IsOk());
    ASSERT_THAT(store_->SaveQueueCounts(b, {1, 2, 3, 4, 5}), IsOk());
  });
  const std::vector<QueueRow> queues = *store_->Queues();

  ASSERT_NO_FATAL_FAILURE(OpenTarget());
  ASSERT_THAT(target_->Begin(), IsOk());
  ASSERT_THAT(target_->ImportQueues(queues), IsOk());
  ASSERT_THAT(target_->Commit(), IsOk());
  const std::vector<QueueRow> got = *target_->Queues();
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].qid, queues[i].qid);
    EXPECT_EQ(got[i].name, queues[i].name);
    EXPECT_EQ(got[i].paused, queues[i].paused);
    EXPECT_EQ(got[i].webhooks, queues[i].webhooks);
    EXPECT_EQ(got[i].counts, queues[i].counts);
  }
  EXPECT_EQ(got[1].settings.concurrency, 3);
  EXPECT_EQ(got[1].settings.max_attempts, 4);
  ASSERT_TRUE(got[1].settings.backoff.has_value());
  EXPECT_EQ(got[1].settings.backoff->cap, seconds(60));
  EXPECT_EQ(got[1].settings.retention, hours(2));
  ASSERT_TRUE(got[1].settings.rate_limit.has_value());
  EXPECT_EQ(got[1].settings.rate_limit->count, 10);
  EXPECT_EQ(got[1].settings.max_in_flight_per_key, 2);
  EXPECT_EQ(got[1].settings.max_pending_per_key, 100);
  EXPECT_EQ(got[1].settings.final_statuses, std::vector<int>{});
  // A queue created afterwards gets an id of its own.
  Result<int64_t> next = target_->QueueId("c");
  ASSERT_THAT(next, IsOk());
  EXPECT_GT(*next, b);
}

TEST_P(StoreCopyConformanceTest, SchedulesImportWithTheirIdsAndDeletedIdsStayUsed) {
  const int64_t q = Queue("q");
  ScheduleRow full = NewSchedule("full", q);
  full.paused = true;
  full.current_seq = 77;
  full.cursor = kNow;
  full.next_at = kNow + seconds(60);
  full.claimed_at = kNow - seconds(1);
  full.runs = 5;
  full.skipped = 2;
  full.last_task = "_0001";
  full.last_for = kNow - seconds(60);
  full.last_state = TaskState::kDead;
  full.last_finished = kNow - seconds(30);
  full.last_error = std::string("boom\0\n", 6);
  int64_t deleted = 0;
  Committed([&] {
    ASSERT_THAT(store_->InsertSchedule(full), IsOk());
    ASSERT_THAT(store_->InsertSchedule(NewSchedule("plain", q)), IsOk());
    deleted = **store_->InsertSchedule(NewSchedule("gone", q));
    ASSERT_THAT(store_->DeleteSchedule(deleted), IsOk());
  });
  Result<std::vector<ScheduleRow>> rows = store_->ListSchedules(std::nullopt, "", 100);
  ASSERT_THAT(rows, IsOk());
  ASSERT_EQ(rows->size(), 2u);
  Result<Store::CopyMeta> meta = store_->ExportMeta();
  ASSERT_THAT(meta, IsOk());
  EXPECT_GE(meta->last_sid, deleted);

  ASSERT_NO_FATAL_FAILURE(OpenTarget());
  ASSERT_THAT(target_->ImportQueues(*store_->Queues()), IsOk());
  ASSERT_THAT(target_->Begin(), IsOk());
  ASSERT_THAT(target_->ImportSchedules(*rows), IsOk());
  ASSERT_THAT(target_->ImportMeta(*meta), IsOk());
  ASSERT_THAT(target_->Commit(), IsOk());
  for (const ScheduleRow& want : *rows) {
    Result<std::optional<ScheduleRow>> got = target_->FindSchedule(want.sid);
    ASSERT_THAT(got, IsOk());
    ASSERT_TRUE(got->has_value()) << want.name;
    const ScheduleRow& g = **got;
    EXPECT_EQ(g.name, want.name);
    EXPECT_EQ(g.qid, want.qid);
    EXPECT_EQ(g.spec, want.spec);
    EXPECT_EQ(g.paused, want.paused);
    EXPECT_EQ(g.current_seq, want.current_seq);
    EXPECT_EQ(g.cursor, want.cursor);
    EXPECT_EQ(g.next_at, want.next_at);
    EXPECT_EQ(g.claimed_at, want.claimed_at);
    EXPECT_EQ(g.runs, want.runs);
    EXPECT_EQ(g.skipped, want.skipped);
    EXPECT_EQ(g.last_task, want.last_task);
    EXPECT_EQ(g.last_for, want.last_for);
    EXPECT_EQ(g.last_state, want.last_state);
    EXPECT_EQ(g.last_finished, want.last_finished);
    EXPECT_EQ(g.last_error, want.last_error);
    EXPECT_EQ(g.created, want.created);
    EXPECT_EQ(g.updated, want.updated);
  }
  EXPECT_EQ(*target_->ExportMeta(), *meta);
  // The deleted schedule's id is not handed out again in the copy either.
  ASSERT_THAT(target_->Begin(), IsOk());
  Result<std::optional<int64_t>> next = target_->InsertSchedule(NewSchedule("new", q));
  ASSERT_THAT(target_->Commit(), IsOk());
  ASSERT_THAT(next, IsOk());
  EXPECT_GT(next->value(), deleted);
}

TEST_P(StoreCopyConformanceTest, ImportMetaRaisesAndNeverLowers) {
  Committed([&] { ASSERT_THAT(store_->ImportMeta({.next_token = 500, .last_sid = 40}), IsOk()); });
  EXPECT_EQ(*store_->ExportMeta(), (Store::CopyMeta{.next_token = 500, .last_sid = 40}));
  EXPECT_EQ(store_->LoadMeta()->next_token, 500u);
  Committed([&] { ASSERT_THAT(store_->ImportMeta({.next_token = 7, .last_sid = 3}), IsOk()); });
  EXPECT_EQ(*store_->ExportMeta(), (Store::CopyMeta{.next_token = 500, .last_sid = 40}));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(*store_->ExportMeta(), (Store::CopyMeta{.next_token = 500, .last_sid = 40}));
  ASSERT_THAT(store_->Begin(), IsOk());
  Result<std::optional<int64_t>> sid = store_->InsertSchedule(NewSchedule("s", Queue("q")));
  ASSERT_THAT(store_->Commit(), IsOk());
  EXPECT_EQ(sid->value(), 41);
}

// A copied key cursor still hides the tasks of its key that started before.
TEST_P(StoreCopyConformanceTest, KeyCursorsExportByQueueAndKeyAndImportAsTheyAre) {
  const int64_t q = Queue("q");
  const int64_t r = Queue("r");
  Committed([&] {
    for (int64_t seq = 1; seq <= 3; ++seq) {
      ASSERT_TRUE(*store_->Insert(KeyedScheduled(seq, q, kNow + seconds(seq), "k")));
    }
    ASSERT_TRUE(*store_->Insert(KeyedScheduled(4, r, kNow, "b")));
    ASSERT_TRUE(*store_->Insert(KeyedScheduled(5, r, kNow, "a")));
    ASSERT_THAT(store_->MarkRunning(1, kNow + seconds(30), 3, kNow), IsOk());
    ASSERT_THAT(store_->SaveKeyCursor(q, "k", {kNow + seconds(1), 0, 1}), IsOk());
    ASSERT_THAT(store_->SaveKeyCursor(r, "b", KeyPosition::Before(kNow, 0, 4)), IsOk());
    ASSERT_THAT(store_->SaveKeyCursor(r, "a", KeyPosition::Before(kNow, 0, 5)), IsOk());
  });
  Result<std::vector<Store::KeyCursorRow>> first = store_->ExportKeyCursors(0, "", 2);
  ASSERT_THAT(first, IsOk());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].qid, q);
  EXPECT_EQ((*first)[0].key, "k");
  EXPECT_EQ((*first)[0].at, (KeyPosition{kNow + seconds(1), 0, 1}));
  EXPECT_EQ((*first)[1].key, "a");
  Result<std::vector<Store::KeyCursorRow>> rest = store_->ExportKeyCursors(r, "a", 10);
  ASSERT_THAT(rest, IsOk());
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].key, "b");

  ASSERT_NO_FATAL_FAILURE(OpenTarget());
  std::vector<Store::KeyCursorRow> all = *first;
  all.insert(all.end(), rest->begin(), rest->end());
  ASSERT_THAT(target_->ImportQueues(*store_->Queues()), IsOk());
  ASSERT_THAT(target_->Begin(), IsOk());
  ASSERT_THAT(target_->ImportTasks(AllTasks(*store_)), IsOk());
  ASSERT_THAT(target_->ImportKeyCursors(all), IsOk());
  ASSERT_THAT(target_->Commit(), IsOk());
  Result<std::vector<Store::KeyCursorRow>> copied = target_->ExportKeyCursors(0, "", 10);
  ASSERT_THAT(copied, IsOk());
  ASSERT_EQ(copied->size(), 3u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ((*copied)[i].qid, all[i].qid);
    EXPECT_EQ((*copied)[i].key, all[i].key);
    EXPECT_EQ((*copied)[i].at, all[i].at);
  }
  Result<std::vector<DueEntry>> heads = target_->KeyHeads(q, "k", std::nullopt, 10);
  ASSERT_THAT(heads, IsOk());
  ASSERT_EQ(heads->size(), 2u);
  EXPECT_EQ((*heads)[0].seq, 2);
  EXPECT_EQ(*target_->CountRows(), *store_->CountRows());
}

INSTANTIATE_TEST_SUITE_P(Postgres, StoreCopyConformanceTest,
                         ::testing::Values(test::PostgresStoreFactory()), test::StoreFactoryName);
INSTANTIATE_TEST_SUITE_P(Sqlite, StoreCopyConformanceTest,
                         ::testing::Values(test::SqliteStoreFactory()), test::StoreFactoryName);

}  // namespace
}  // namespace chronoq
