// `chronoq bulk ...` against a scripted server: the request it builds from
// the flags, the dry run and the confirmation before the job, the polling
// and its progress (a bar on a terminal, a line per change otherwise), the
// exit code by how the job ended, and bad flags refused before anything is
// sent.
#include <atomic>
#include <string>
#include <vector>

#include "cli/cli_fixture.h"

namespace chronoq::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

json Job(const std::string& state, int64_t matched, int64_t applied,
         json skipped = json::object()) {
  return {{"id", "bulk-1-1"},
          {"state", state},
          {"action", "cancel"},
          {"dry_run", false},
          {"filter", {{"queue", "q"}}},
          {"run_at", nullptr},
          {"shift_ms", nullptr},
          {"matched", matched},
          {"applied", applied},
          {"skipped", skipped},
          {"started_at", "2026-11-22T03:00:00.000Z"},
          {"finished_at", nullptr},
          {"error", nullptr},
          {"cursor", nullptr}};
}

class BulkCliTest : public CliTest {
 protected:
  // The server: a dry run counts 3 (one running), the job is running once,
  // then ends as `end`.
  void Script(json end) {
    polls_ = 0;
    server_.SetHandler([this, end](const Request& r) -> Response {
      if (r.method == "POST" && r.target == "/v1/tasks:bulk") {
        json dry = Job("done", 3, 2, {{"running", 1}});
        dry["id"] = nullptr;
        dry["dry_run"] = true;
        if (BodyOf(r).value("dry_run", false)) return Answer(200, dry);
        return Answer(202, Job("running", 0, 0));
      }
      if (r.method == "GET" && r.target == "/v1/bulk/bulk-1-1") {
        if (polls_++ == 0) return Answer(200, Job("running", 1, 1));
        return Answer(200, end);
      }
      return Error(404, "not_found", "no endpoint at " + r.target);
    });
  }
  // The POST requests since the last Mark().
  std::vector<Request> Posts() const {
    std::vector<Request> out;
    const std::vector<Request> all = server_.requests();
    for (size_t i = mark_; i < all.size(); ++i) {
      if (all[i].method == "POST") out.push_back(all[i]);
    }
    return out;
  }
  void Mark() { mark_ = server_.requests().size(); }
  size_t mark_ = 0;
  std::atomic<int> polls_{0};
};

TEST_F(BulkCliTest, CancelDryRunsThenRunsAndFollowsTheJob) {
  json done = Job("done", 3, 2, {{"running", 1}});
  Script(done);
  EXPECT_EQ(Run({"bulk", "cancel", "--queue", "q", "--state", "scheduled", "--key", "k",
                 "--id-prefix", "user:42:", "--run-at-from", "2026-11-22T00:00:00Z", "--run-at-to",
                 "1795406400000", "--yes", "--poll", "1ms"}),
            kExitOk)
      << err();
  const std::vector<Request> posts = Posts();
  ASSERT_EQ(posts.size(), 2u);
  const json filter = {{"queue", "q"},
                       {"state", "scheduled"},
                       {"key", "k"},
                       {"id_prefix", "user:42:"},
                       {"run_at_from", "2026-11-22T00:00:00Z"},
                       {"run_at_to", 1795406400000}};
  EXPECT_EQ(BodyOf(posts[0]), json({{"filter", filter}, {"action", "cancel"}, {"dry_run", true}}));
  EXPECT_EQ(BodyOf(posts[1]), json({{"filter", filter}, {"action", "cancel"}}));
  EXPECT_EQ(out(), "cancelled 2 of 3 matching tasks; skipped 1 (1 running); job bulk-1-1 done\n");
  // Not a terminal: one plain line per change, no escapes.
  EXPECT_THAT(err(), HasSubstr("[######--------------]  33%  1 of 3 tasks  1 cancelled\n"));
  EXPECT_THAT(err(), Not(HasSubstr("\x1b[K")));
}

TEST_F(BulkCliTest, OnATerminalTheProgressBarIsRedrawnThenErased) {
  Script(Job("done", 3, 3));
  err_is_terminal_ = true;
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q", "-y", "--poll", "1ms"}), kExitOk) << err();
  EXPECT_THAT(err(), HasSubstr("\r\x1b[K[######--------------]  33%  1 of 3 tasks"));
  EXPECT_THAT(err(), HasSubstr("\r\x1b[K[####################] 100%  3 of 3 tasks"));
  EXPECT_TRUE(err().ends_with("\r\x1b[K")) << err();
}

TEST_F(BulkCliTest, DryRunOnlyCounts) {
  Script(Job("done", 3, 3));
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q", "--dry-run"}), kExitOk) << err();
  EXPECT_EQ(Posts().size(), 1u);
  EXPECT_EQ(out(),
            "would have cancelled 2 of 3 matching tasks; skipped 1 (1 running) (dry run: nothing "
            "changed)\n");
}

TEST_F(BulkCliTest, WithoutYesItAsksAndANoChangesNothing) {
  Script(Job("done", 3, 3));
  in_.str("n\n");
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q", "--poll", "1ms"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("would have cancelled 2 of 3 matching tasks"));
  EXPECT_THAT(err(), HasSubstr("Apply? [y/N]"));
  EXPECT_THAT(err(), HasSubstr("not confirmed: nothing changed"));
  EXPECT_EQ(Posts().size(), 1u);  // the dry run only
  // No answer at all (stdin closed) is a no too.
  Mark();
  in_.clear();
  in_.str("");
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q"}), kExitUsage);
  EXPECT_EQ(Posts().size(), 1u);
  Mark();
  in_.clear();
  in_.str("y\n");
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q", "--poll", "1ms"}), kExitOk) << err();
  EXPECT_EQ(Posts().size(), 2u);
}

TEST_F(BulkCliTest, AFailedOrStoppedJobExitsOne) {
  json failed = Job("failed", 1, 1);
  failed["error"] = "unavailable: the engine is stopping";
  Script(failed);
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q", "-y", "--poll", "1ms"}), kExitServerError);
  EXPECT_THAT(err(), HasSubstr("error: bulk job failed: unavailable: the engine is stopping"));
  Script(Job("cancelled", 1, 1));
  Mark();
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q", "-y", "--poll", "1ms"}), kExitServerError);
  EXPECT_THAT(err(), HasSubstr("stopped before the end"));
}

TEST_F(BulkCliTest, RescheduleSendsTheInstantOrTheShift) {
  Script(Job("done", 3, 3));
  EXPECT_EQ(Run({"bulk", "reschedule", "-q", "q", "--shift", "-1h", "--dry-run"}), kExitOk)
      << err();
  EXPECT_EQ(BodyOf(Posts().back()).value("shift_ms", 0), -3'600'000);
  Mark();
  EXPECT_EQ(Run({"bulk", "reschedule", "-q", "q", "--at", "2026-12-01T00:00:00Z", "--dry-run"}),
            kExitOk);
  EXPECT_EQ(BodyOf(Posts().back())["run_at"], "2026-12-01T00:00:00Z");
  Mark();
  EXPECT_EQ(Run({"bulk", "delete", "--all", "--dry-run"}), kExitOk);
  EXPECT_EQ(BodyOf(Posts().back())["filter"], json({{"all", true}}));
}

TEST_F(BulkCliTest, BadFlagsAreRefusedBeforeAnythingIsSent) {
  ExpectUsageError({"bulk", "cancel", "--yes"}, "give a filter");
  ExpectUsageError({"bulk", "reschedule", "-q", "q"}, "give --at or --shift");
  ExpectUsageError(
      {"bulk", "reschedule", "-q", "q", "--at", "2026-12-01T00:00:00Z", "--shift", "1h"},
      "give --at or --shift");
  ExpectUsageError({"bulk", "reschedule", "-q", "q", "--shift", "soon"}, "--shift");
  ExpectUsageError({"bulk", "cancel", "-q", "q", "--run-at-to", "tomorrow"}, "--run-at-to");
  ExpectUsageError({"bulk", "cancel", "--state", "sleeping"}, "--state");
  ExpectUsageError({"bulk", "cancel", "-q", "q", "--poll", "0"}, "--poll");
}

TEST_F(BulkCliTest, ServerErrorsArePrintedWithTheirField) {
  AnswerAll(Error(400, "invalid_argument", "filter.run_at_to: must be after filter.run_at_from",
                  "filter.run_at_to"));
  EXPECT_EQ(Run({"bulk", "cancel", "-q", "q", "-y"}), kExitServerError);
  EXPECT_THAT(err(), HasSubstr("invalid_argument: filter.run_at_to: must be after"));
  EXPECT_EQ(Posts().size(), 1u);
}

TEST_F(BulkCliTest, ShowAndStop) {
  server_.SetHandler([](const Request& r) -> Response {
    if (r.target == "/v1/bulk") return Answer(200, {{"jobs", json::array({Job("done", 3, 3)})}});
    if (r.target == "/v1/bulk/bulk-1-1") return Answer(200, Job("running", 2, 1));
    if (r.target == "/v1/bulk/bulk-1-1/cancel") return Answer(200, Job("running", 2, 1));
    return Error(404, "not_found", "nothing");
  });
  EXPECT_EQ(Run({"bulk", "show"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr("bulk-1-1  cancel"));
  EXPECT_EQ(Run({"bulk", "show", "bulk-1-1"}), kExitOk);
  EXPECT_EQ(out(), "bulk-1-1 running: cancelled 1 of 2 matching tasks\n");
  EXPECT_EQ(Run({"bulk", "stop", "bulk-1-1"}), kExitOk);
  EXPECT_EQ(out(), "stopping bulk-1-1 (running)\n");
  EXPECT_EQ(server_.requests().back().method, "POST");
}

}  // namespace
}  // namespace chronoq::cli
