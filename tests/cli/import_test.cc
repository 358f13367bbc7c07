// chronoq import against a scripted server: how lines become batch bodies,
// how a bad line or a refused batch is reported by line number, and --skip.
#include "cli/import.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_fixture.h"
#include "support/test_http_server.h"

namespace chronoq::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// What chronoqd answers to a stored batch (the tasks themselves do not matter here).
Response Stored() { return Answer(201, {{"tasks", json::array()}}); }

// The lines of the input, each ending in a newline.
std::string Lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

std::vector<std::string> Bodies(const std::vector<Request>& requests) {
  std::vector<std::string> bodies;
  for (const Request& r : requests) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/v1/tasks/batch");
    bodies.push_back(r.body);
  }
  return bodies;
}

class ImportTest : public CliTest {
 protected:
  ImportTest() { AnswerAll(Stored()); }
};

TEST_F(ImportTest, LinesAreSplicedIntoBatchesAsWritten) {
  const TempFile file(Lines({R"({"queue":"q","id":"a"})", R"( {"queue": "q", "payload": [1, 2]} )",
                             R"({"queue":"q","delay_ms":5000})"}));
  ASSERT_EQ(Run({"import", file.path(), "--batch", "2"}), kExitOk) << err();
  EXPECT_THAT(
      Bodies(server_.requests()),
      ::testing::ElementsAre(
          R"({"tasks":[{"queue":"q","id":"a"}, {"queue": "q", "payload": [1, 2]} ],"return":"ids"})",
          R"({"tasks":[{"queue":"q","delay_ms":5000}],"return":"ids"})"));
  EXPECT_THAT(out(), StartsWith("created 3 tasks from 3 lines in "));
  EXPECT_THAT(out(), HasSubstr(" tasks/s\n"));
  EXPECT_THAT(err(), IsEmpty());
}

// A chronoqd from before "return": "ids" refuses the field and stores
// nothing of the batch: it gets that batch again, and the rest, without.
TEST_F(ImportTest, AnOlderChronoqdGetsBatchesWithoutReturn) {
  server_.SetHandler([](const Request& r) {
    if (r.body.find("\"return\"") != std::string::npos) {
      return Error(400, "invalid_argument", "return: unknown field", "return");
    }
    return Stored();
  });
  const TempFile file(Lines(
      {R"({"queue":"q","id":"a"})", R"({"queue":"q","id":"b"})", R"({"queue":"q","id":"c"})"}));
  ASSERT_EQ(Run({"import", file.path(), "--batch", "2"}), kExitOk) << err();
  EXPECT_THAT(Bodies(server_.requests()),
              ::testing::ElementsAre(
                  R"({"tasks":[{"queue":"q","id":"a"},{"queue":"q","id":"b"}],"return":"ids"})",
                  R"({"tasks":[{"queue":"q","id":"a"},{"queue":"q","id":"b"}]})",
                  R"({"tasks":[{"queue":"q","id":"c"}]})"));
  EXPECT_THAT(out(), StartsWith("created 3 tasks from 3 lines in "));
}

TEST_F(ImportTest, BlankLinesAndCarriageReturnsAreSkipped) {
  in_.str(
      "\n"
      R"({"queue":"q"})"
      "\r\n  \t\n"
      R"({"queue":"r"})");  // no final newline
  ASSERT_EQ(Run({"import", "-"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().body, R"({"tasks":[{"queue":"q"},{"queue":"r"}],"return":"ids"})");
  EXPECT_THAT(out(), StartsWith("created 2 tasks from 4 lines (2 blank) in "));
}

TEST_F(ImportTest, OnConflictGoesIntoLinesThatDoNotSayTheirOwn) {
  const TempFile file(
      Lines({R"({"queue":"q","id":"a"})", R"({"queue":"q","id":"b","on_conflict":"reject"})",
             R"({ })", R"({"queue":"q","payload":{"on_conflict":1}})"}));
  ASSERT_EQ(Run({"import", file.path(), "--on-conflict", "ignore"}), kExitOk) << err();
  const json tasks = BodyOf(OnlyRequest())["tasks"];
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_EQ(tasks[0], json::parse(R"({"queue":"q","id":"a","on_conflict":"ignore"})"));
  EXPECT_EQ(tasks[1], json::parse(R"({"queue":"q","id":"b","on_conflict":"reject"})"));
  EXPECT_EQ(tasks[2], json::parse(R"({"on_conflict":"ignore"})"));
  EXPECT_EQ(tasks[3],
            json::parse(R"({"queue":"q","payload":{"on_conflict":1},"on_conflict":"ignore"})"));
  // The batch answer does not say which tasks were already there.
  EXPECT_THAT(out(), StartsWith("stored 4 tasks from 4 lines in "));
  EXPECT_THAT(out(), HasSubstr("does not tell which"));
}

TEST_F(ImportTest, ABadLineStopsTheImportBeforeItsBatchIsSent) {
  const TempFile file(
      Lines({R"({"queue":"q"})", R"({"queue":"q"})", R"({"queue":"q"})", R"({"queue":"q"})",
             R"({"queue":"q"})", R"({"queue": q})", R"({"queue":"q"})"}));
  EXPECT_EQ(Run({"import", file.path(), "--batch", "2"}), kExitServerError);
  // Lines 1-4 went in two batches; line 5 waited for line 6 in the third.
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(err(),
            "error: line 6: not valid JSON (at column 11)\n"
            "stored: lines 1-4 (4 tasks in 2 batches); nothing from line 5 on (its batch was not "
            "sent)\n"
            "to go on once line 6 is fixed: chronoq import " +
                file.path() + " --skip 4\n");
  EXPECT_THAT(out(), IsEmpty());
}

TEST_F(ImportTest, ALineMustBeAnObject) {
  in_.str(Lines({"[1]"}));
  EXPECT_EQ(Run({"import", "-"}), kExitServerError);
  EXPECT_THAT(err(), StartsWith("error: line 1: not a JSON object"));
  EXPECT_THAT(err(), HasSubstr("stored: nothing"));
  EXPECT_THAT(err(), HasSubstr("to go on once line 1 is fixed: chronoq import -\n"));
  EXPECT_THAT(server_.requests(), IsEmpty());
}

TEST_F(ImportTest, ARefusedBatchNamesTheLineAndField) {
  int batches = 0;
  server_.SetHandler([&batches](const Request&) {
    if (++batches == 1) return Stored();
    return Error(400, "invalid_argument", "tasks[1].priority: must be an integer, not a string",
                 "tasks[1].priority");
  });
  // Batch 1: lines 1-2; batch 2: lines 4 and 5 (line 3 is blank).
  const TempFile file(Lines({R"({"queue":"q"})", R"({"queue":"q"})", "", R"({"queue":"q"})",
                             R"({"queue":"q","priority":"high"})", R"({"queue":"q"})"}));
  EXPECT_EQ(Run({"import", file.path(), "--batch", "2"}), kExitServerError);
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(err(),
            "error: line 5: invalid_argument: priority: must be an integer, not a string "
            "(field priority)\n"
            "stored: lines 1-2 (2 tasks in 1 batch); nothing from line 4 on (chronoqd refused its "
            "batch, lines 4-5, as a whole)\n"
            "to go on once line 5 is fixed: chronoq import " +
                file.path() + " --skip 3\n");
}

TEST_F(ImportTest, ARefusalWithoutATaskFieldNamesTheBatch) {
  AnswerAll(Error(503, "unavailable", "chronoqd is stopping"));
  in_.str(Lines({R"({"queue":"q"})"}));
  EXPECT_EQ(Run({"import", "-"}), kExitServerError);
  EXPECT_THAT(err(),
              StartsWith("error: chronoqd refused line 1: unavailable: chronoqd is stopping\n"));
}

TEST_F(ImportTest, SkipLeavesOutTheFirstLines) {
  const TempFile file(
      Lines({R"({"queue":"a"})", "not even JSON", R"({"queue":"c"})", R"({"queue":"d"})"}));
  ASSERT_EQ(Run({"import", file.path(), "--skip", "2"}), kExitOk) << err();
  EXPECT_EQ(OnlyRequest().body, R"({"tasks":[{"queue":"c"},{"queue":"d"}],"return":"ids"})");
  EXPECT_THAT(out(), StartsWith("created 2 tasks from 4 lines (first 2 skipped) in "));
}

TEST_F(ImportTest, ErrorsAfterASkipCountFromTheStartOfTheFile) {
  int batches = 0;
  server_.SetHandler([&batches](const Request&) {
    if (++batches == 1) return Stored();
    return Error(409, "conflict", "task x already exists and is scheduled", "tasks[0].id");
  });
  const TempFile file(Lines({"skipped", R"({"queue":"q"})", R"({"queue":"q","id":"x"})"}));
  EXPECT_EQ(Run({"import", file.path(), "--skip", "1", "--batch", "1"}), kExitServerError);
  EXPECT_EQ(err(),
            "error: line 3: conflict: task x already exists and is scheduled (field id)\n"
            "stored: line 2 (1 task in 1 batch); nothing from line 3 on (chronoqd refused its "
            "batch, line 3, as a whole)\n"
            "to go on once line 3 is fixed: chronoq import " +
                file.path() + " --skip 2\n");
}

TEST_F(ImportTest, JsonPrintsASummaryObject) {
  in_.str(Lines({R"({"queue":"q"})", "", R"({"queue":"q"})"}));
  ASSERT_EQ(Run({"--json", "import", "-"}), kExitOk) << err();
  const json summary = json::parse(out());
  EXPECT_EQ(summary["lines_read"], 3);
  EXPECT_EQ(summary["blank"], 1);
  EXPECT_EQ(summary["skipped"], 0);
  EXPECT_EQ(summary["tasks"], 2);
  EXPECT_EQ(summary["created"], 2);
  EXPECT_EQ(summary["batches"], 1);
  EXPECT_TRUE(summary["seconds"].is_number());
  EXPECT_TRUE(summary["per_s"].is_number());

  in_.clear();
  in_.str(Lines({R"({"queue":"q"})", "{"}));
  EXPECT_EQ(Run({"--json", "import", "-", "--batch", "1"}), kExitServerError);
  const json failed = json::parse(out());
  EXPECT_EQ(failed["tasks"], 1);
  EXPECT_EQ(failed["resume_skip"], 1);
}

TEST_F(ImportTest, BatchesStayUnderTheServersBodyLimit) {
  // Seven 300 KB lines: three fit in 1 MiB.
  const std::string big = R"({"queue":"q","payload":")" + std::string(300'000, 'x') + "\"}";
  in_.str(Lines(std::vector<std::string>(7, big)));
  ASSERT_EQ(Run({"import", "-"}), kExitOk) << err();
  const std::vector<Request> requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  size_t tasks = 0;
  for (const Request& r : requests) {
    EXPECT_LE(r.body.size(), size_t{1} << 20);
    tasks += BodyOf(r)["tasks"].size();
  }
  EXPECT_EQ(tasks, 7u);
}

TEST_F(ImportTest, ALineAboveTheBodyLimitIsRefused) {
  in_.str(Lines({R"({"queue":"q","payload":")" + std::string(1 << 20, 'x') + "\"}"}));
  EXPECT_EQ(Run({"import", "-"}), kExitServerError);
  EXPECT_THAT(err(), StartsWith("error: line 1: longer than chronoqd's 1 MiB request limit"));
  EXPECT_THAT(server_.requests(), IsEmpty());
}

TEST_F(ImportTest, AnUnreachableServerMayHaveStoredTheBatch) {
  {
    test::TestHttpServer gone;
    env_["CHRONOQ_URL"] = gone.url();
  }
  in_.str(Lines({R"({"queue":"q"})"}));
  EXPECT_EQ(Run({"import", "-"}), kExitUnreachable);
  EXPECT_THAT(err(), HasSubstr("error: sending line 1: cannot connect to "));
  EXPECT_THAT(err(), HasSubstr("may or may not be stored"));
}

TEST_F(ImportTest, ShowsProgressOnlyOnATerminal) {
  const TempFile file(Lines(std::vector<std::string>(4, R"({"queue":"q"})")));
  ASSERT_EQ(Run({"import", file.path(), "--batch", "2"}), kExitOk) << err();
  EXPECT_THAT(err(), IsEmpty());

  err_is_terminal_ = true;
  ASSERT_EQ(Run({"import", file.path(), "--batch", "2"}), kExitOk) << err();
  // Redrawn in place as batches go (how far they got depends on the sending
  // thread: see ProgressLineTest), then erased before the summary.
  EXPECT_THAT(err(), StartsWith("\r\x1b[K["));
  EXPECT_THAT(err(), HasSubstr(" tasks  "));
  EXPECT_THAT(err(), ::testing::EndsWith("s\r\x1b[K"));  // ".../s" or "ETA 5ms"
  EXPECT_THAT(out(), StartsWith("created 4 tasks from 4 lines in "));
}

TEST(ProgressLineTest, ShowsABarPercentRateAndEta) {
  EXPECT_EQ(ProgressLine(0, 0.5, 0, 1000), "[--------------------]   0%  0 tasks  0/s");
  // A quarter of the input in 2 s: the other three quarters take 6 s more.
  EXPECT_EQ(ProgressLine(250'000, 2.0, 250, 1000),
            "[#####---------------]  25%  250,000 tasks  125,000/s  ETA 6.00s");
  EXPECT_EQ(ProgressLine(1'000'000, 4.0, 1000, 1000),
            "[####################] 100%  1,000,000 tasks  250,000/s");
}

TEST(ProgressLineTest, WithoutASizeShowsCountAndRate) {
  EXPECT_EQ(ProgressLine(30'000, 0.25, 123, std::nullopt), "30,000 tasks  120,000/s");
}

TEST_F(ImportTest, BadCommandLinesExitTwoAndSendNothing) {
  ExpectUsageError({"import"}, "file is required");
  ExpectUsageError({"import", "-", "--batch", "0"}, "error: --batch: must be 1-10000");
  ExpectUsageError({"import", "-", "--batch", "10001"}, "error: --batch: must be 1-10000");
  ExpectUsageError({"import", "-", "--skip", "-1"}, "error: --skip: must not be negative");
  ExpectUsageError({"import", "-", "--on-conflict", "overwrite"}, "--on-conflict");
  ExpectUsageError({"import", "/nonexistent/chronoq-import"},
                   "error: import: cannot read /nonexistent/chronoq-import: ");
}

}  // namespace
}  // namespace chronoq::cli
