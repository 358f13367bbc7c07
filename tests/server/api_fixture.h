// ApiFixture: the HTTP/JSON API driven directly (no sockets) on a real engine
// and a fake clock. Blocking calls run inline, so every answer has arrived
// when Call() returns.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api.h"
#include "support/engine_fixture.h"
#include "support/eventually.h"

namespace chronoq::test {

class ApiFixture : public EngineFixture {
 protected:
  using RunBlocking = std::function<void(std::function<void()>)>;

  void SetUp() override {
    EngineFixture::SetUp();
    MakeApi();
  }
  // Replaces the API with one whose blocking calls go to `run_blocking`
  // (default: run at once). The queues it reports for webhook delivery are
  // recorded in webhook_queues_.
  void MakeApi(RunBlocking run_blocking = [](std::function<void()> fn) { fn(); }) {
    api_ = std::make_unique<server::Api>(
        *engine_, clock_, std::move(run_blocking),
        [this](const std::string& queue) { webhook_queues_.push_back(queue); });
  }
  void TearDown() override {
    api_.reset();
    engine_.reset();
  }

  // Starts a request; the future completes when the API answers.
  std::future<server::ApiResponse> Start(std::string method, std::string target,
                                         std::string body = "") {
    auto promise = std::make_shared<std::promise<server::ApiResponse>>();
    auto future = promise->get_future();
    api_->Handle({std::move(method), std::move(target), std::move(body)},
                 [promise](server::ApiResponse r) {
                   r.Render();
                   promise->set_value(std::move(r));
                 });
    return future;
  }
  server::ApiResponse Call(std::string method, std::string target, std::string body = "") {
    const std::string what = "the answer to " + method + " " + target;
    return test::GetWithin(Start(std::move(method), std::move(target), std::move(body)), what);
  }
  nlohmann::json Json(const server::ApiResponse& r) { return nlohmann::json::parse(r.body); }

  // Expects a 4xx error with `code` naming `field`.
  void ExpectError(const server::ApiResponse& r, int status, std::string_view code,
                   std::string_view field = "") {
    EXPECT_EQ(r.status, status) << r.body;
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["error"]["code"], code) << r.body;
    if (!field.empty()) {
      EXPECT_EQ(j["error"].value("field", ""), field) << r.body;
    }
    EXPECT_FALSE(j["error"].value("message", "").empty()) << r.body;
  }

  // One bad request and the error it must get (ExpectError's arguments).
  struct ErrorCase {
    std::string method, target, body;
    int status;
    std::string code, field;
  };
  // Sends each case and expects its error.
  void ExpectErrors(const std::vector<ErrorCase>& cases) {
    for (const ErrorCase& c : cases) {
      SCOPED_TRACE(c.method + " " + c.target + " " + c.body.substr(0, 80));
      ExpectError(Call(c.method, c.target, c.body), c.status, c.code, c.field);
    }
  }

  std::unique_ptr<server::Api> api_;
  std::vector<std::string> webhook_queues_;
};

}  // namespace chronoq::test
