// chronoqd against hostile HTTP, over raw sockets: the shapes of request
// smuggling (two Content-Lengths, Content-Length with Transfer-Encoding),
// a chunk size beyond any limit, a header flood, pipelined requests, many
// idle connections, and a flood of connections past chronoqd's limit. Each bad request
// gets a 4xx or a closed connection, never reaches the engine, and chronoqd
// goes on answering everyone else. Reads wait for chronoqd's answer or close
// (its idle timeout is cut to 1 s so that a kept-alive connection ends).
#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/chronoqd_fixture.h"
#include "support/eventually.h"
#include "support/raw_connection.h"
#include <sys/resource.h>
#include <unistd.h>

namespace chronoq {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kIdleTimeout = "1000";  // --idle-timeout-ms

// The status lines of the HTTP answers in `bytes`, in order.
std::vector<std::string> StatusLines(const std::string& bytes) {
  std::vector<std::string> out;
  for (size_t at = bytes.find("HTTP/1.1 "); at != std::string::npos;
       at = bytes.find("HTTP/1.1 ", at + 1)) {
    out.push_back(bytes.substr(at, bytes.find("\r\n", at) - at));
  }
  return out;
}

class HttpAbuseTest : public test::ChronoqdFixture {
 protected:
  // Sends `bytes` on a new connection; returns all chronoqd answers before
  // it closes the connection.
  std::string Exchange(std::string_view bytes) {
    test::RawConnection c(server_->port());
    EXPECT_TRUE(c.connected());
    EXPECT_TRUE(c.Write(bytes));
    return c.ReadToClose();
  }
  // A refused request: one 4xx answer at most (none when chronoqd just
  // closed), and nothing it carried reached the engine.
  void ExpectRefused(const std::string& answer) {
    const std::vector<std::string> lines = StatusLines(answer);
    EXPECT_LE(lines.size(), 1u) << answer;
    for (const std::string& line : lines) EXPECT_THAT(line, StartsWith("HTTP/1.1 4")) << answer;
    EXPECT_EQ(Json(Send("GET", "/v1/tasks"))["tasks"].size(), 0u) << "a refused request ran";
    EXPECT_EQ(Send("GET", "/healthz").status, 200);
  }
};

TEST_F(HttpAbuseTest, TwoDifferentContentLengthsAreRefused) {
  Launch({"--idle-timeout-ms", kIdleTimeout});
  ExpectRefused(Exchange(
      "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\nContent-Length: 60\r\n\r\n"
      R"({"queue":"q"})"
      "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n"
      R"({"queue":"smuggled"})"));
}

TEST_F(HttpAbuseTest, ContentLengthWithTransferEncodingIsRefused) {
  Launch({"--idle-timeout-ms", kIdleTimeout});
  // A front end going by Content-Length would see one request; one going by
  // the chunks, two. chronoqd takes neither.
  const std::string smuggled =
      "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n"
      R"({"queue":"smuggled"})";
  ExpectRefused(
      Exchange("POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
               "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
               smuggled));
  ExpectRefused(
      Exchange("POST /v1/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               "Content-Length: 4\r\n\r\n0\r\n\r\n" +
               smuggled));
}

TEST_F(HttpAbuseTest, AChunkLargerThanAnyBodyIsRefused) {
  Launch({"--idle-timeout-ms", kIdleTimeout});
  ExpectRefused(
      Exchange("POST /v1/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "fffffffffffffffff\r\n{\"queue\":\"q\"}\r\n0\r\n\r\n"));
  ExpectRefused(
      Exchange("POST /v1/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "200000\r\n" +
               std::string(1000, 'x')));
}

TEST_F(HttpAbuseTest, AHeaderFloodGets431) {
  Launch({"--idle-timeout-ms", kIdleTimeout});
  std::string flood = "GET /v1/tasks HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10'000; ++i) flood += "X-Flood-" + std::to_string(i) + ": y\r\n";
  flood += "\r\n";
  const std::string answer = Exchange(flood);
  ASSERT_EQ(StatusLines(answer).size(), 1u) << answer;
  EXPECT_THAT(StatusLines(answer)[0], StartsWith("HTTP/1.1 431"));
  EXPECT_THAT(answer, HasSubstr("request_header_fields_too_large"));
  ExpectRefused(answer);
}

TEST_F(HttpAbuseTest, PipelinedRequestsAreAnsweredInOrder) {
  Launch({"--idle-timeout-ms", kIdleTimeout});
  const std::string body = R"({"queue":"q","id":"piped"})";
  const std::string answer = Exchange(
      "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body +
      "GET /v1/tasks/piped HTTP/1.1\r\nHost: x\r\n\r\n"
      "DELETE /v1/tasks/piped HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(StatusLines(answer),
              ::testing::ElementsAre(StartsWith("HTTP/1.1 201"), StartsWith("HTTP/1.1 200"),
                                     StartsWith("HTTP/1.1 200")))
      << answer;
  EXPECT_EQ(Json(Send("GET", "/v1/tasks/piped"))["state"], "cancelled");
}

// Raises this process's open-file limit as far as it goes (chronoqd, started
// after, inherits it); returns the limit.
rlim_t RaiseFileLimit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

TEST_F(HttpAbuseTest, TenThousandIdleConnectionsLeaveOthersServed) {
  // Each connection costs this process one descriptor and chronoqd one: both
  // must fit (a machine whose hard limit is lower holds fewer, said below).
  const rlim_t limit = RaiseFileLimit();
  const int wanted = static_cast<int>(std::min<rlim_t>(10'000, limit > 200 ? limit - 200 : 0));
  ASSERT_GE(wanted, 1000) << "the open-file limit (" << limit << ") is too low for this test";
  Launch();  // the default idle timeout (120 s): they stay open throughout
  std::vector<std::unique_ptr<test::RawConnection>> idle;
  idle.reserve(static_cast<size_t>(wanted));
  for (int i = 0; i < wanted; ++i) {
    idle.push_back(std::make_unique<test::RawConnection>(server_->port()));
    ASSERT_TRUE(idle.back()->connected()) << "connection " << i;
  }
  // A new client is served, and one of the idle ones too.
  EXPECT_EQ(Send("POST", "/v1/tasks", R"({"queue":"q","id":"still"})").status, 201);
  ASSERT_TRUE(
      idle[wanted / 2]->Write("GET /v1/tasks/still HTTP/1.1\r\nHost: x\r\n"
                              "Connection: close\r\n\r\n"));
  EXPECT_THAT(idle[wanted / 2]->ReadToClose(), StartsWith("HTTP/1.1 200"));
  idle.clear();
  EXPECT_EQ(Send("GET", "/healthz").status, 200);
}

// A flood of connections meets chronoqd's connection limit (its open-file
// limit less what it keeps for its store and webhooks): the rest wait in the
// backlog, chronoqd says so a few times instead of once per try, never runs
// out of descriptors, and goes on serving the connections it has; new ones
// are served once the flood is gone.
TEST_F(HttpAbuseTest, AFloodOfConnectionsWaitsAtTheLimit) {
  const std::string log = dir_.File("chronoqd.log");
  server_ = std::make_unique<test::ChronoqdProcess>(test::ChronoqdOptions{
      .binary = CHRONOQD_PATH,
      .data_dir = dir_.File("data"),
      .args = {},
      .env = {},
      .log = log,
      .wrapper = {"prlimit", "--nofile=128:128", "--"},  // 64 connections at once
  });
  ASSERT_THAT(server_->Start(), test::IsOk());
  auto before = Client();  // opened before the flood
  ASSERT_EQ(before->Send("GET", "/healthz", "", {})->status, 200);
  std::vector<std::unique_ptr<test::RawConnection>> flood;
  for (int i = 0; i < 300; ++i)
    flood.push_back(std::make_unique<test::RawConnection>(server_->port()));
  EXPECT_TRUE(test::Eventually(
      [&] { return server_->LogTail(100'000).find("at the limit of 64") != std::string::npos; },
      "chronoqd to log that it reached its connection limit"));
  // The open connection is still answered while the backlog waits.
  for (int i = 0; i < 3; ++i) {
    Result<cli::HttpResponse> r = before->Send("GET", "/healthz", "", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
  flood.clear();
  EXPECT_EQ(Send("GET", "/healthz").status, 200);
  // A few lines, not one per try; and never out of descriptors.
  const std::string tail = server_->LogTail(1'000'000);
  size_t lines = 0;
  for (size_t at = tail.find("accept:"); at != std::string::npos;
       at = tail.find("accept:", at + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, 5u) << tail.substr(0, 2000);
  EXPECT_EQ(tail.find("Too many open files"), std::string::npos) << tail.substr(0, 2000);
}

}  // namespace
}  // namespace chronoq
