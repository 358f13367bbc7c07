// The copy (store.h, "copying a whole store") carries every table, column
// and meta field the stores have today. These tests list what each store's
// schema really holds and fail when it holds something the copy was not
// taught: a new table, column or meta key must be added to StoredTask,
// CopyMeta or the import methods (and to the lists here) before a copy can
// silently drop it.
#include <string>

#include <gtest/gtest.h>

#include "chronoq/engine.h"

#include "support/fake_clock.h"
#include "support/pg_test_db.h"
#include "support/raw_sql.h"
#include "support/status_matchers.h"
#include "support/temp_dir.h"

namespace chronoq {
namespace {

using test::IsOk;

// Every table with its columns, sorted: "table(col,col,...) ", what the copy knows.
constexpr const char* kCopiedSchema =
    "key_cursors(key,korder,prio,qid,seq) "
    "locks(expires,key,owner,token) "
    "meta(k,v) "
    "queues(backoff_base,backoff_cap,concurrency,final_statuses,key_in_flight,key_pending,"
    "max_attempts,n_cancelled,"
    "n_dead,n_running,n_scheduled,n_succeeded,name,paused,qid,rate_count,rate_period,retention,"
    "webhooks) "
    "schedules(claimed_at,created,current_seq,cursor,last_error,last_finished,last_for,last_state,"
    "last_task,name,next_at,paused,qid,runs,sid,skipped,spec,updated) "
    "tasks(attempt,attempts,backoff_base,backoff_cap,claimed,due,key,korder,last_error,"
    "max_attempts,name,node,payload,prio,qid,response,run_at,seq,sid,state,target,token,updated,"
    "worker) ";
// The meta keys: "schema" is each store's own; next_token is CopyMeta's.
constexpr const char* kCopiedMeta = "next_token,schema";

void OpenEngineOn(const std::string& url) {
  test::FakeClock clock;
  EngineOptions o;
  o.store = url;
  o.clock = &clock;
  ASSERT_THAT(Engine::Open(o), IsOk());
}

TEST(CopySchemaTest, TheCopyKnowsEverySqliteTableColumnAndMetaKey) {
  test::TempDir dir;
  const std::string path = dir.File("chronoq.db");
  ASSERT_NO_FATAL_FAILURE(OpenEngineOn(path));
  // sqlite_sequence is AUTOINCREMENT's: CopyMeta::last_sid.
  EXPECT_EQ(
      test::QueryText(
          path,
          "SELECT group_concat(t, '') FROM (SELECT m.name || '(' ||"
          " (SELECT group_concat(name, ',') FROM (SELECT p.name FROM pragma_table_info(m.name)"
          " AS p ORDER BY p.name)) || ') ' AS t FROM sqlite_master m WHERE m.type = 'table'"
          " AND m.name <> 'sqlite_sequence' ORDER BY m.name)"),
      kCopiedSchema);
  EXPECT_EQ(
      test::QueryText(path, "SELECT group_concat(k, ',') FROM (SELECT k FROM meta ORDER BY k)"),
      kCopiedMeta);
}

TEST(CopySchemaTest, TheCopyKnowsEveryPostgresTableColumnAndMetaKey) {
  test::PgTestDatabase db;
  ASSERT_TRUE(db.ok());
  ASSERT_NO_FATAL_FAILURE(OpenEngineOn(db.Url()));
  // leader and nodes are a cluster's coordination (who leads now), not
  // state: a copy is opened by a new engine, which writes its own. claims,
  // the claim journal, is copied as what it means: its tasks are exported
  // as running (ExportTasks reads them as readers do).
  EXPECT_EQ(
      db.QueryText("SELECT string_agg(t, '' ORDER BY table_name) FROM ("
                   " SELECT table_name, table_name || '(' || string_agg(column_name::text, ','"
                   " ORDER BY column_name::text COLLATE \"C\") || ') ' AS t"
                   " FROM information_schema.columns WHERE table_schema = 'chronoq'"
                   " AND table_name NOT IN ('leader', 'nodes', 'claims')"
                   " GROUP BY table_name) x"),
      kCopiedSchema);
  EXPECT_EQ(db.QueryText("SELECT string_agg(k, ',' ORDER BY k) FROM chronoq.meta"), kCopiedMeta);
  // Sequences: the identity columns' (queues.qid: above the imported ids;
  // schedules.sid: CopyMeta::last_sid).
  EXPECT_EQ(db.QueryText("SELECT string_agg(c.relname::text, ',' ORDER BY c.relname::text)"
                         " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                         " WHERE n.nspname = 'chronoq' AND c.relkind = 'S'"),
            "queues_qid_seq,schedules_sid_seq");
}

}  // namespace
}  // namespace chronoq
