// CopyStore: copies everything one store holds into another, empty one, so
// that an engine on the copy behaves exactly as one on the original would
// have: SQLite to PostgreSQL when a deployment grows to several nodes, and
// back. chronoq-admin copy (admin.h) is its command line.
//
// What is copied (store.h, "copying a whole store"): every task row with
// every column and its seq; the queues with their ids, settings, pause flag
// and counts; the schedules with their ids and the last schedule id handed
// out; the keys' saved cursors; the held locks; and the fencing-token
// ceiling, so that tokens only grow across the move.
//
// How: the queues, locks and meta in one transaction of the target, then
// the schedules, key cursors and tasks in pages of `batch_rows`, one
// transaction per page, then the row counts of both stores compared. The
// caller opens both stores as their writer, which no running engine allows
// (SQLite's lock file, PostgreSQL's schema lock): neither changes while the
// copy runs. A copy that fails part way leaves the target partly filled;
// the error says so, and that it must be emptied before a second attempt
// (CopyOptions::empty_target_hint says how).
#pragma once

#include <cstdint>
#include <string>

#include "chronoq/result.h"

#include "admin/progress.h"
#include "store/store.h"

namespace chronoq::admin {

struct CopyOptions {
  // Rows per page and per target transaction. 10,000 tasks are ~5 MB in
  // memory and one COPY statement on PostgreSQL.
  int batch_rows = 10'000;
  // How to empty the target, for the error messages that ask for it
  // ("drop schema chronoq: psql ... -c 'DROP SCHEMA ...'").
  std::string empty_target_hint;
};

// What the copy found at the end.
struct CopyReport {
  Store::RowCounts source;
  Store::RowCounts target;
  Store::CopyMeta source_meta;
  Store::CopyMeta target_meta;
  int64_t rows = 0;  // rows written in all
  double seconds = 0;
  // Every count equal, and the target's meta at or above the source's.
  bool verified() const {
    return source == target && target_meta.next_token >= source_meta.next_token &&
           target_meta.last_sid >= source_meta.last_sid;
  }
};

// "12 tasks (3 scheduled, 9 dead), 2 queues, 1 schedule": what `counts` holds.
std::string DescribeRows(const Store::RowCounts& counts);

// Copies `from` into `to`. Errors: FailedPrecondition when `to` is not empty
// (nothing written; the message says what it holds) or `from` is (nothing to
// copy); any error of either store, after which `to` holds a partial copy
// (the message says so and how to retry). A copy that completes returns its
// report even when the counts differ: the caller checks verified().
Result<CopyReport> CopyStore(Store& from, Store& to, const CopyOptions& options,
                             Progress& progress);

}  // namespace chronoq::admin
