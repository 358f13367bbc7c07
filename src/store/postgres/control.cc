// The cluster's control connection (control.h).
#include "store/postgres/control.h"

#include <spdlog/spdlog.h>

#include "store/postgres/connection.h"
#include "store/postgres/migrate.h"

namespace chronoq {

using pg::Connection;
using pg::Params;
using pg::Rows;

class PostgresControl::Impl {
 public:
  explicit Impl(std::string schema) : schema_(std::move(schema)) {}

  Status Open(const std::string& conninfo) {
    CHRONOQ_RETURN_IF_ERROR(conn_.Connect(conninfo, "chronoq control", pg::SessionSetup(schema_)));
    return pg::MigrateSchema(conn_, schema_);
  }

  Status Heartbeat(const NodeRecord& self) {
    CHRONOQ_RETURN_IF_ERROR(Connected());
    return conn_
        .ExecOnce("INSERT INTO nodes(node_id, beats, seen, started, epoch, address, role, version)"
                  " VALUES($1, 1, " CHRONOQ_PG_MICROS("clock_timestamp()") ", "
                  CHRONOQ_PG_MICROS("clock_timestamp()") ", $2, $3, $4, $5)"
                  " ON CONFLICT (node_id) DO UPDATE SET beats = nodes.beats + 1,"
                  " seen = EXCLUDED.seen, epoch = EXCLUDED.epoch, address = EXCLUDED.address,"
                  " role = EXCLUDED.role, version = EXCLUDED.version,"
                  // A node that starts again under the same id starts again.
                  " started = CASE WHEN $6 THEN EXCLUDED.started ELSE nodes.started END",
                  Params()
                      .Text(self.node_id)
                      .OptInt(self.epoch)
                      .Text(self.address)
                      .Text(self.role)
                      .Text(self.version)
                      .Bool(self.beats == 0),
                  "write the heartbeat")
        .status();
  }

  Result<ClusterView> View() {
    CHRONOQ_RETURN_IF_ERROR(Connected());
    ClusterView view;
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows leader,
        conn_.RunRows(
            "SELECT epoch, node_id, address, writer_pid, writer_start, since, " CHRONOQ_PG_MICROS(
                "clock_timestamp()") " FROM leader",
            "read the leader"));
    if (!leader.empty()) {
      LeaderRecord l;
      l.epoch = leader.Int(0, 0);
      l.node_id = leader.Text(0, 1);
      l.address = leader.Text(0, 2);
      l.writer_pid = static_cast<int>(leader.Int(0, 3));
      l.writer_start = leader.Int(0, 4);
      l.since = pg::FromMicros(leader.Int(0, 5));
      view.leader = std::move(l);
    }
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows nodes,
        conn_.RunRows("SELECT node_id, address, role, version, beats, seen, started, epoch,"
                      " " CHRONOQ_PG_MICROS("clock_timestamp()") " FROM nodes ORDER BY node_id",
                      "read the nodes"));
    for (int i = 0; i < nodes.size(); ++i) {
      NodeRecord n;
      n.node_id = nodes.Text(i, 0);
      n.address = nodes.Text(i, 1);
      n.role = nodes.Text(i, 2);
      n.version = nodes.Text(i, 3);
      n.beats = nodes.Int(i, 4);
      n.seen = pg::FromMicros(nodes.Int(i, 5));
      n.started = pg::FromMicros(nodes.Int(i, 6));
      n.epoch = nodes.OptInt(i, 7);
      view.nodes.push_back(std::move(n));
    }
    // Free if we can take it; then give it back at once.
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows lock,
        conn_.ExecOnce(
            "SELECT pg_try_advisory_lock($1::bigint), " CHRONOQ_PG_MICROS("clock_timestamp()"),
            Params().Int(pg::LockKey("engine", schema_)), "look at the engine lock"));
    view.lock_free = !lock.empty() && lock.Bool(0, 0);
    view.now = pg::FromMicros(lock.Int(0, 1));
    if (view.lock_free) {
      CHRONOQ_RETURN_IF_ERROR(conn_
                                  .ExecOnce("SELECT pg_advisory_unlock($1::bigint)",
                                            Params().Int(pg::LockKey("engine", schema_)),
                                            "release the engine lock")
                                  .status());
    }
    return view;
  }

  Result<bool> Depose(const LeaderRecord& leader) {
    CHRONOQ_RETURN_IF_ERROR(Connected());
    CHRONOQ_ASSIGN_OR_RETURN(
        Rows r,
        conn_.ExecOnce("SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a, leader l"
                       " WHERE a.pid = $1 AND " CHRONOQ_PG_MICROS(
                           "a.backend_start") " = $2"
                                              " AND l.epoch = $3 AND l.writer_pid = $1",
                       Params().Int(leader.writer_pid).Int(leader.writer_start).Int(leader.epoch),
                       "end the silent leader's session"));
    const bool ended = !r.empty() && r.Bool(0, 0);
    if (ended) {
      spdlog::warn("cluster: ended the writer session (pid {}) of silent leader {} (epoch {})",
                   leader.writer_pid, leader.node_id, leader.epoch);
    }
    return ended;
  }

 private:
  // Connects again after a loss: a control call has no state to lose.
  Status Connected() {
    if (!conn_.lost()) return {};
    return conn_.ConnectAgain();
  }

  const std::string schema_;
  Connection conn_;
};

PostgresControl::PostgresControl(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PostgresControl::~PostgresControl() = default;

Result<std::unique_ptr<PostgresControl>> PostgresControl::Open(const PostgresOptions& options) {
  CHRONOQ_RETURN_IF_ERROR(ValidatePostgresSchema(options.schema));
  auto impl = std::make_unique<Impl>(options.schema);
  CHRONOQ_RETURN_IF_ERROR(impl->Open(options.conninfo));
  return std::unique_ptr<PostgresControl>(new PostgresControl(std::move(impl)));
}

Status PostgresControl::Heartbeat(const NodeRecord& self) { return impl_->Heartbeat(self); }
Result<ClusterView> PostgresControl::View() { return impl_->View(); }
Result<bool> PostgresControl::Depose(const LeaderRecord& leader) { return impl_->Depose(leader); }

}  // namespace chronoq
