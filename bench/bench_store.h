// bench_store.h: where one workload run keeps its state.
//
// Without --store, a SQLite file of its own, DIR/<name>.db (the embedded
// default). With --store postgresql://USER@HOST:PORT/DB, a schema of its own
// in that database, bench_<name> (lower case, '-' as '_'), so that runs never
// see each other's tasks and Bytes() can measure one run's tables.
//
//   BenchStore store(o, "W1-batch");
//   store.Reset();                      // empty: the next open creates it
//   options.store = store.url();        // EngineOptions::store, chronoqd --store
//   uint64_t bytes = store.Bytes();     // on disk, indexes included
#pragma once

#include <cstdint>
#include <string>

#include "bench_common.h"

namespace chronoq::bench {

class BenchStore {
 public:
  // Throws BenchError when --store is not a postgres:// or postgresql:// URL
  // without a schema parameter (the bench picks the schema).
  BenchStore(const Options& o, const std::string& name);

  // The store URL an engine or chronoqd opens.
  const std::string& url() const { return url_; }
  bool postgres() const { return !pg_url_.empty(); }
  // What the store is, for progress lines: a file or a schema.
  std::string Describe() const;

  // Removes the file (and its WAL) or drops the schema with everything in it.
  void Reset() const;
  // Bytes on disk: the SQLite file and its WAL, or the schema's tables with
  // their indexes and TOAST (pg_total_relation_size).
  uint64_t Bytes() const;

 private:
  std::string url_;
  std::string file_;    // SQLite
  std::string pg_url_;  // PostgreSQL: the URL without the schema
  std::string schema_;  // PostgreSQL
};

}  // namespace chronoq::bench
