// chronoq work, import, stats and bulk end to end: the real chronoq binary against
// the real chronoqd on a free loopback port. The worker is stopped with real
// signals; commands that must stay running wait on a FIFO the test writes,
// so nothing here waits for time to pass, and every wait has a deadline and
// says what it waited for.
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chronoq/time.h"

#include "cli/http_client.h"
#include "common/subprocess.h"
#include "support/chronoqd_process.h"
#include "support/eventually.h"
#include "support/status_matchers.h"
#include "support/test_store.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Whether process `pid` is gone (or a zombie nobody reaps: dead all the same).
bool Dead(pid_t pid) {
  const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

class CliE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<test::TestStore> store = test::FreshStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_.emplace(std::move(*store));
    server_ = std::make_unique<test::ChronoqdProcess>(test::ChronoqdOptions{
        .binary = CHRONOQD_PATH,
        .data_dir = dir_.File("data"),
        .args = store_->ChronoqdArgs(),
        .log = dir_.File("chronoqd.log"),
    });
    ASSERT_THAT(server_->Start(), test::IsOk());
    auto c = cli::HttpClient::Create(server_->url(), 60s);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }
  void TearDown() override {
    if (worker_.running()) {
      worker_.Kill();
      ADD_FAILURE() << "the worker was still running; its stderr:\n" << WorkerErr();
    }
  }

  // One request on the test's own connection.
  json Call(std::string_view method, const std::string& target, const std::string& body = "") {
    auto r = client_->Send(method, target, body, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return json();
    EXPECT_GE(r->status, 200) << method << " " << target << ": " << r->body;
    EXPECT_LE(r->status, 299) << method << " " << target << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  json Task(const std::string& id) { return Call("GET", "/v1/tasks/" + cli::PercentEncode(id)); }
  void Enqueue(const json& task) { Call("POST", "/v1/tasks", task.dump()); }
  int64_t Count(const std::string& queue, const std::string& state) {
    const json q = Call("GET", "/v1/queues/" + queue);
    return q.contains("counts") ? q["counts"].value(state, int64_t{-1}) : -1;
  }

  std::vector<std::string> Cli(std::vector<std::string> args) const {
    std::vector<std::string> argv = {CHRONOQ_CLI_PATH, "--url", server_->url()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  // Runs chronoq to its end.
  Subprocess::Completed RunCli(std::vector<std::string> args) const {
    SpawnOptions o;
    o.argv = Cli(std::move(args));
    Result<Subprocess::Completed> done = Subprocess::Run(o, Deadline(120s));
    EXPECT_THAT(done, test::IsOk());
    return done.ok() ? *done : Subprocess::Completed{};
  }
  // Starts `chronoq work ...`; its stdout and stderr go to files.
  void StartWorker(std::vector<std::string> args) {
    SpawnOptions o;
    o.argv = Cli(std::move(args));
    o.stdin_mode = Stdio::kNull;
    o.stdout_mode = Stdio::kFile;
    o.stdout_file = dir_.File("worker.out");
    o.stderr_mode = Stdio::kFile;
    o.stderr_file = dir_.File("worker.err");
    Result<Subprocess> p = Subprocess::Spawn(o);
    ASSERT_THAT(p, test::IsOk());
    worker_ = std::move(*p);
  }
  std::string WorkerErr() const { return ReadText(dir_.File("worker.err")); }
  // Waits for the worker to exit; its exit code.
  int WorkerExit() {
    Result<int> code = worker_.Wait(Deadline(test::kGiveUpAfter));
    EXPECT_THAT(code, test::IsOk()) << "the worker did not exit; its stderr:\n" << WorkerErr();
    return code.ok() ? *code : -1;
  }
  // Sends `sig` to the worker, then waits for the line saying it stopped claiming.
  void StopWorker(int sig) {
    worker_.Signal(sig);
    ASSERT_TRUE(
        test::Eventually([&] { return WorkerErr().find("no more claims") != std::string::npos; },
                         "the worker to say it stopped claiming"));
  }

  // A FIFO the commands read from: they block until the test writes a line.
  std::string MakeFifo() {
    const std::string path = dir_.File("fifo");
    EXPECT_EQ(mkfifo(path.c_str(), 0600), 0);
    return path;
  }
  // Writes a line to the FIFO once a reader has it open (never blocks).
  static bool WakeReader(const std::string& fifo) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd < 0) return false;  // ENXIO: nobody reads yet
    const bool wrote = ::write(fd, "go\n", 3) == 3;
    ::close(fd);
    return wrote;
  }

  bool TaskIs(const std::string& id, const std::string& state) {
    return Task(id)["state"] == state;
  }

  test::TempDir dir_;
  std::optional<test::TestStore> store_;  // the one CHRONOQ_TEST_STORE names; outlives server_
  std::unique_ptr<test::ChronoqdProcess> server_;
  std::unique_ptr<cli::HttpClient> client_;
  Subprocess worker_;
};

TEST_F(CliE2eTest, WorkRunsTheCommandWithThePayloadAndEnvironment) {
  const std::string out = dir_.File("seen");
  std::filesystem::create_directory(out);
  const std::string script = dir_.File("cmd.sh");
  WriteText(script,
            "#!/bin/sh\n"
            "p=$(cat)\n"
            "printf '%s' \"$p\" > " +
                out +
                "/$CHRONOQ_TASK_ID.payload\n"
                "printf '%s|%s|%s|%s' \"$CHRONOQ_TASK_ID\" \"$CHRONOQ_ATTEMPT\" \"$CHRONOQ_QUEUE\" "
                "\"${CHRONOQ_KEY-unset}\" > " +
                out +
                "/$CHRONOQ_TASK_ID.env\n"
                "case \"$p\" in *fail*) echo 'first line' >&2; echo 'boom: disk full' >&2; exit "
                "3;; esac\n"
                "echo \"done $CHRONOQ_TASK_ID\"\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  Enqueue({{"queue", "jobs"}, {"id", "keyed"}, {"key", "cust:7"}, {"payload", {{"to", "a"}}}});
  Enqueue({{"queue", "jobs"}, {"id", "plain"}, {"payload", {1, "two"}}});
  Enqueue({{"queue", "jobs"}, {"id", "bad"}, {"payload", {{"fail", true}}}, {"max_attempts", 1}});

  StartWorker({"work", "jobs", "--concurrency", "2", "--wait", "100ms", "--", script});
  ASSERT_TRUE(test::Eventually(
      [&] {
        return TaskIs("keyed", "succeeded") && TaskIs("plain", "succeeded") &&
               TaskIs("bad", "dead");
      },
      "keyed and plain to succeed and bad to fail"));
  worker_.Signal(SIGTERM);
  EXPECT_EQ(WorkerExit(), 0);

  EXPECT_EQ(ReadText(out + "/keyed.payload"), R"({"to":"a"})");
  EXPECT_EQ(ReadText(out + "/keyed.env"), "keyed|1|jobs|cust:7");
  EXPECT_EQ(ReadText(out + "/plain.payload"), R"([1,"two"])");
  EXPECT_EQ(ReadText(out + "/plain.env"), "plain|1|jobs|");  // set, and empty
  const json bad = Task("bad");
  EXPECT_EQ(bad["last_error"], "exited with status 3: first line\nboom: disk full");
  EXPECT_EQ(bad["attempt"], 1);
  EXPECT_EQ(Task("keyed")["attempt"], 1);
  // CMD's stdout is the worker's; its stderr is passed on line by line.
  const std::string said = WorkerErr();
  EXPECT_THAT(ReadText(dir_.File("worker.out")), HasSubstr("done keyed\n"));
  EXPECT_THAT(said, HasSubstr("task keyed attempt 1: succeeded in "));
  EXPECT_THAT(said, HasSubstr("task bad attempt 1: failed in "));
  EXPECT_THAT(said, HasSubstr("(exited with status 3)\n"));
  EXPECT_THAT(said, HasSubstr("boom: disk full\n"));
}

TEST_F(CliE2eTest, WorkExtendsTheLeaseWhileTheCommandRuns) {
  const std::string fifo = MakeFifo();
  Enqueue({{"queue", "slow"}, {"id", "long"}});
  StartWorker(
      {"work", "slow", "--lease", "1s", "--wait", "100ms", "--", "sh", "-c", "read x < " + fifo});
  ASSERT_TRUE(
      test::Eventually([&] { return TaskIs("long", "running"); }, "the task to be claimed"));
  const json first = Task("long");
  ASSERT_TRUE(first["lease_until"].is_string()) << first.dump();
  const Result<Timestamp> first_lease_end = ParseTime(first["lease_until"].get<std::string>());
  ASSERT_TRUE(first_lease_end.ok());
  // Extended at least a whole lease past the first one: it was still running,
  // and held, after its first lease had ended.
  ASSERT_TRUE(test::Eventually(
      [&] {
        const json t = Task("long");
        const Result<Timestamp> until = t["lease_until"].is_string()
                                            ? ParseTime(t["lease_until"].get<std::string>())
                                            : Result<Timestamp>(Status::NotFound("no lease"));
        return until.ok() && *until >= *first_lease_end + 1s;
      },
      "the lease to be extended a second past its first end"));
  ASSERT_TRUE(test::Eventually([&] { return WakeReader(fifo); }, "the command to read the FIFO"));
  ASSERT_TRUE(test::Eventually([&] { return TaskIs("long", "succeeded"); }, "the task to succeed"));
  // Claimed once, never redelivered.
  EXPECT_EQ(Task("long")["attempt"], 1);
  EXPECT_EQ(Task("long")["last_error"], nullptr);
  worker_.Signal(SIGTERM);
  EXPECT_EQ(WorkerExit(), 0);
  EXPECT_THAT(WorkerErr(), ::testing::Not(HasSubstr("warning")));
}

TEST_F(CliE2eTest, SigtermStopsClaimingAndLetsTheRunningCommandFinish) {
  const std::string fifo = MakeFifo();
  Enqueue({{"queue", "q"}, {"id", "first"}});
  StartWorker({"work", "q", "--wait", "100ms", "--", "sh", "-c", "read x < " + fifo});
  ASSERT_TRUE(test::Eventually([&] { return TaskIs("first", "running"); }, "first to be claimed"));
  StopWorker(SIGTERM);
  Enqueue({{"queue", "q"}, {"id", "second"}});
  ASSERT_TRUE(test::Eventually([&] { return WakeReader(fifo); }, "the command to read the FIFO"));
  EXPECT_EQ(WorkerExit(), 0);
  EXPECT_EQ(Task("first")["state"], "succeeded");  // acknowledged before the exit
  const json second = Task("second");
  EXPECT_EQ(second["state"], "scheduled");
  EXPECT_EQ(second["attempt"], 0);
}

TEST_F(CliE2eTest, ASecondSigtermKillsTheCommandsGroupAndFailsItsTask) {
  const std::string fifo = MakeFifo();
  const std::string pid_file = dir_.File("grandchild.pid");
  Enqueue({{"queue", "q"}, {"id", "doomed"}, {"max_attempts", 1}});
  // The command waits for a grandchild that blocks on the FIFO (no one writes
  // to it); its stderr is written before the pid file, so it is in the pipe
  // by the time the test sees the pid.
  StartWorker(
      {"work", "q", "--wait", "100ms", "--", "sh", "-c",
       "echo 'half done' >&2; cat " + fifo + " > /dev/null & echo $! > " + pid_file + "; wait"});
  ASSERT_TRUE(test::Eventually([&] { return !ReadText(pid_file).empty(); },
                               "the command to start its grandchild"));
  const pid_t grandchild = std::stoi(ReadText(pid_file));
  StopWorker(SIGTERM);
  worker_.Signal(SIGTERM);
  EXPECT_EQ(WorkerExit(), 0);
  const json doomed = Task("doomed");
  EXPECT_EQ(doomed["state"], "dead");
  EXPECT_THAT(doomed["last_error"].get<std::string>(),
              StartsWith("interrupted: chronoq work was stopped and killed it"));
  EXPECT_THAT(doomed["last_error"].get<std::string>(), HasSubstr("half done"));
  EXPECT_THAT(WorkerErr(), HasSubstr("task doomed attempt 1: interrupted in "));
  EXPECT_TRUE(test::Eventually([&] { return Dead(grandchild); }, "the grandchild to be killed"));
}

// 10,000 lines in batches of 1,000; line 5,555 is not JSON and line 7,500
// has a bad field.
TEST_F(CliE2eTest, ImportStopsAtABadLineAndResumesWithSkip) {
  std::vector<std::string> lines;
  for (int i = 1; i <= 10'000; ++i) {
    // Ids make a line sent twice a conflict (409), so 10,000 stored means each once.
    lines.push_back(R"({"queue":"imp","id":"t)" + std::to_string(i) + R"("})");
  }
  const std::string file = dir_.File("tasks.jsonl");
  const auto write_file = [&] {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    WriteText(file, text);
  };
  lines[5'554] = R"({"queue":"imp", oops})";
  lines[7'499] = R"({"queue":"imp","priority":"high"})";
  write_file();

  Subprocess::Completed run = RunCli({"import", file, "--batch", "1000"});
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_THAT(run.err, StartsWith("error: line 5555: not valid JSON (at column 17)\n"));
  EXPECT_THAT(run.err, HasSubstr("stored: lines 1-5000 (5,000 tasks in 5 batches)"));
  EXPECT_THAT(run.err, HasSubstr("chronoq import " + file + " --skip 5000\n"));
  EXPECT_EQ(Count("imp", "scheduled"), 5'000);

  lines[5'554] = R"({"queue":"imp","id":"t5555"})";
  write_file();
  run = RunCli({"import", file, "--batch", "1000", "--skip", "5000"});
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_THAT(run.err, StartsWith("error: line 7500: invalid_argument: priority: "));
  EXPECT_THAT(run.err, HasSubstr("(field priority)\n"));
  EXPECT_THAT(run.err, HasSubstr("stored: lines 5001-7000 (2,000 tasks in 2 batches)"));
  EXPECT_THAT(run.err, HasSubstr(" --skip 7000\n"));
  EXPECT_EQ(Count("imp", "scheduled"), 7'000);

  lines[7'499] = R"({"queue":"imp","id":"t7500"})";
  write_file();
  run = RunCli({"import", file, "--batch", "1000", "--skip", "7000"});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out,
              StartsWith("created 3,000 tasks from 10,000 lines (first 7,000 skipped) in "));
  EXPECT_EQ(Count("imp", "scheduled"), 10'000);
}

TEST_F(CliE2eTest, StatsShowsTheQueueAndTotals) {
  for (const std::string id : {"m1", "m2", "m3"}) Enqueue({{"queue", "mail"}, {"id", id}});
  const json claimed = Call("POST", "/v1/queues/mail/claim", R"({"max":1})");
  ASSERT_EQ(claimed["tasks"].size(), 1u) << claimed.dump();
  Call("POST",
       "/v1/tasks/" + cli::PercentEncode(claimed["tasks"][0]["id"].get<std::string>()) + "/ack",
       json({{"token", claimed["tasks"][0]["token"]}}).dump());

  Subprocess::Completed run = RunCli({"stats", "--interval", "100ms"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out,
              HasSubstr("\nmail   no      2          0        1          0          0     "));
  EXPECT_THAT(run.out, HasSubstr("\nenqueued  3      "));
  EXPECT_THAT(run.out, HasSubstr("\nacked     1      "));
  EXPECT_THAT(run.out, HasSubstr("dispatch lateness (run_at to claim): p50 "));
  EXPECT_THAT(run.out, HasSubstr("over 1 claim since chronoqd started\n"));

  run = RunCli({"--json", "stats", "--interval", "0"});
  ASSERT_EQ(run.code, 0) << run.err;
  const json j = json::parse(run.out, nullptr, false);
  EXPECT_EQ(j["totals"], json::parse(R"({"enqueued":3,"acked":1,"failed":0,"dead":0})")) << run.out;
  ASSERT_EQ(j["queues"].size(), 1u) << run.out;
  EXPECT_EQ(j["queues"][0]["name"], "mail");
  EXPECT_EQ(j["dispatch_lateness_s"]["claims"], 1);
}

// chronoq bulk on the real server: a dry run, then a job over more tasks
// than one chunk (chronoqd's chunk is 1,000), followed to its end.
TEST_F(CliE2eTest, BulkCancelsAUsersPendingWorkAndLeavesTheRest) {
  std::vector<json> tasks;
  for (int i = 0; i < 1'500; ++i) {
    tasks.push_back(
        {{"queue", "shares"}, {"id", "user:7:" + std::to_string(i)}, {"delay_ms", 3'600'000}});
  }
  Call("POST", "/v1/tasks/batch", json({{"tasks", tasks}}).dump());
  Enqueue({{"queue", "shares"}, {"id", "user:8:0"}, {"delay_ms", 3'600'000}});

  Subprocess::Completed run =
      RunCli({"bulk", "cancel", "--id-prefix", "user:7:", "--state", "scheduled", "--dry-run"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out,
            "would have cancelled 1,500 of 1,500 matching tasks (dry run: nothing changed)\n");
  EXPECT_EQ(Count("shares", "scheduled"), 1'501);

  run = RunCli({"bulk", "cancel", "--id-prefix", "user:7:", "--state", "scheduled", "--yes",
                "--poll", "10ms"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("cancelled 1,500 of 1,500 matching tasks; job bulk-"));
  EXPECT_THAT(run.out, HasSubstr(" done\n"));
  EXPECT_EQ(Count("shares", "cancelled"), 1'500);
  EXPECT_TRUE(TaskIs("user:8:0", "scheduled"));

  run = RunCli({"--json", "bulk", "show"});
  ASSERT_EQ(run.code, 0) << run.err;
  const json jobs = json::parse(run.out, nullptr, false);
  ASSERT_EQ(jobs["jobs"].size(), 1u) << run.out;
  EXPECT_EQ(jobs["jobs"][0]["applied"], 1'500);
  // The last one created, not the last by name: the walk is in creation order.
  EXPECT_EQ(jobs["jobs"][0]["cursor"], "user:7:1499");

  // Nothing left to cancel: a second run changes nothing and says so.
  run = RunCli({"bulk", "cancel", "--id-prefix", "user:7:", "--state", "scheduled", "--yes"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("cancelled 0 of 0 matching tasks; job bulk-"));
}

}  // namespace
}  // namespace chronoq
