// The SQLite schema of chronoq's first release (schema version 1), for tests
// that migrate a database written by it.
#pragma once

namespace chronoq::test {

inline constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE queues(qid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE tasks(
  seq INTEGER PRIMARY KEY,
  qid INTEGER NOT NULL,
  state INTEGER NOT NULL,
  due INTEGER,
  prio INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  payload TEXT NOT NULL,
  name TEXT,
  run_at INTEGER,
  token INTEGER,
  last_error TEXT,
  updated INTEGER,
  backoff_base INTEGER,
  backoff_cap INTEGER);
CREATE INDEX tasks_due ON tasks(state, (due >> 26));
CREATE UNIQUE INDEX tasks_name ON tasks(name) WHERE name IS NOT NULL;
INSERT INTO meta(k, v) VALUES('schema', 1), ('next_token', 42);
)sql";

}  // namespace chronoq::test
