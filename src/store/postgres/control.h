// PostgresControl: a cluster node's own connection to the schema, for what
// coordinates the nodes (docs/ARCHITECTURE.md, "Leadership and the fence"):
// each node's heartbeat row, the leader row, whether the schema's engine lock
// is free, and ending the session of a leader that went silent.
//
// The leader itself is made by opening the store with
// PostgresOptions::leadership, which takes the engine lock and the next
// epoch; this class never writes the leader row.
//
//   auto control = PostgresControl::Open(options);
//   CHRONOQ_RETURN_IF_ERROR((*control)->Heartbeat(self));
//   CHRONOQ_ASSIGN_OR_RETURN(ClusterView view, (*control)->View());
//
// Not thread-safe. A lost connection is made again by the next call.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chronoq/result.h"

#include "store/postgres/postgres_store.h"

namespace chronoq {

// One node's row: what it said in its last heartbeat.
struct NodeRecord {
  std::string node_id;
  std::string address;  // where the others forward to
  std::string role;     // "leader" or "standby"
  std::string version;
  int64_t beats = 0;             // heartbeats so far; a silent node's stops growing
  Timestamp seen;                // its last heartbeat, on PostgreSQL's clock
  Timestamp started;             // when it started, on PostgreSQL's clock
  std::optional<int64_t> epoch;  // the epoch it leads with, if it leads
};

// The leader row: who took the leadership last, with which epoch and which
// writer session.
struct LeaderRecord {
  int64_t epoch = 0;
  std::string node_id;
  std::string address;
  int writer_pid = 0;
  int64_t writer_start = 0;  // the session's start, microseconds (tells a reused pid apart)
  Timestamp since;
};

struct ClusterView {
  std::optional<LeaderRecord> leader;  // none before the first leader
  std::vector<NodeRecord> nodes;       // by node_id
  // Nobody holds the schema's engine lock: no engine (leader or single
  // node) runs on it now.
  bool lock_free = false;
  Timestamp now;  // PostgreSQL's clock
};

class PostgresControl {
 public:
  // Connects and creates or migrates the schema (as the store does).
  // Errors as OpenPostgresStore's.
  static Result<std::unique_ptr<PostgresControl>> Open(const PostgresOptions& options);
  ~PostgresControl();

  // Writes this node's row: beats + 1, seen = now, and the rest as given.
  Status Heartbeat(const NodeRecord& self);
  // The leader row, every node's row, and whether the engine lock is free.
  Result<ClusterView> View();
  // Ends the writer session of `leader` (pg_terminate_backend), if it is
  // still that session and the leader row still names it: a standby's way
  // to fence a leader that stopped beating but kept its session (a paused
  // process, a lost machine whose TCP connection the server has not noticed
  // yet). Returns whether a session was ended. Needs the same role as the
  // leader's, or pg_signal_backend (docs/OPERATIONS.md).
  Result<bool> Depose(const LeaderRecord& leader);

 private:
  class Impl;
  explicit PostgresControl(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace chronoq
