// The fixture of the CLI tests: RunCli against a scripted HTTP server
// (support/test_http_server.h), with helpers to build the server's answers.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "support/test_http_server.h"
#include <unistd.h>

namespace chronoq::cli {

using json = nlohmann::json;
using Request = test::TestHttpServer::Request;
using Response = test::TestHttpServer::Response;

// A task as the server shows it.
inline json Task(const std::string& id, const std::string& state = "scheduled") {
  return {
      {"id", id},
      {"queue", "expire-share"},
      {"state", state},
      {"payload", {{"share", 42}}},
      {"run_at", "2026-11-22T03:00:00.000Z"},
      {"attempt", 0},
      {"max_attempts", 25},
      {"priority", 0},
      {"last_error", nullptr},
      {"created_at", "2026-11-15T03:00:00.000Z"},
      {"updated_at", "2026-11-15T03:00:00.000Z"},
  };
}

// A file holding `content`, removed when this goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("chronoq-cli-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::ofstream(path_) << content;
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline Response Answer(int status, const json& body) {
  return {.status = status, .body = body.dump()};
}

// The error body chronoqd sends.
inline Response Error(int status, const std::string& code, const std::string& message,
                      const std::string& field = "") {
  json error = {{"code", code}, {"message", message}};
  if (!field.empty()) error["field"] = field;
  return Answer(status, {{"error", error}});
}

class CliTest : public ::testing::Test {
 protected:
  CliTest() { env_["CHRONOQ_URL"] = server_.url(); }

  // Every request gets `response`.
  void AnswerAll(Response response) {
    server_.SetHandler([response](const Request&) { return response; });
  }

  // Runs `chronoq <args>`; out() and err() hold what it printed.
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    const CliIo io{
        .out = out_,
        .err = err_,
        .in = in_,
        .getenv = [this](std::string_view name) -> std::optional<std::string> {
          const auto it = env_.find(std::string(name));
          if (it == env_.end()) return std::nullopt;
          return it->second;
        },
        .out_is_terminal = out_is_terminal_,
        .err_is_terminal = err_is_terminal_,
    };
    return RunCli(args, io);
  }

  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }

  // The one request the server received.
  Request OnlyRequest() const {
    const std::vector<Request> requests = server_.requests();
    EXPECT_EQ(requests.size(), 1u);
    return requests.empty() ? Request{} : requests.front();
  }

  // Expects a usage error: exit 2, a message containing `message`, nothing sent.
  void ExpectUsageError(std::vector<std::string> args, const std::string& message) {
    SCOPED_TRACE(::testing::PrintToString(args));
    EXPECT_EQ(Run(std::move(args)), kExitUsage);
    EXPECT_THAT(err(), ::testing::HasSubstr(message));
    EXPECT_THAT(out(), ::testing::IsEmpty());
    EXPECT_THAT(server_.requests(), ::testing::IsEmpty());
  }

  test::TestHttpServer server_;
  std::map<std::string, std::string> env_;
  std::istringstream in_;
  bool out_is_terminal_ = false;  // what the command is told of its streams
  bool err_is_terminal_ = false;
  std::ostringstream out_;
  std::ostringstream err_;
};

inline json BodyOf(const Request& r) { return json::parse(r.body); }

}  // namespace chronoq::cli
