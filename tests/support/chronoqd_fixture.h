// ChronoqdFixture: the fixture of the end-to-end tests. Each test starts the
// real chronoqd (CHRONOQD_PATH, a compile definition of the test binary) on a
// data directory and a store of its own (the one CHRONOQ_TEST_STORE names,
// support/test_store.h) and talks to it over HTTP:
//
//   using WebhookE2eTest = test::ChronoqdFixture;
//   TEST_F(WebhookE2eTest, Something) {
//     Launch({"--webhook-concurrency", "1"});
//     EXPECT_EQ(Send("POST", "/v1/tasks", R"({"queue":"q"})").status, 201);
//     EXPECT_EQ(Json(Send("GET", "/v1/queues/q"))["counts"]["scheduled"], 1);
//   }
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/http_client.h"
#include "support/chronoqd_process.h"
#include "support/status_matchers.h"
#include "support/test_store.h"

#ifndef CHRONOQD_PATH
#error "CHRONOQD_PATH (the chronoqd binary) must be defined for the test target"
#endif

namespace chronoq::test {

class ChronoqdFixture : public ::testing::Test {
 protected:
  // Starts chronoqd on the test's data directory and store (again, after a
  // Stop: on the same data, at a new port).
  void Launch(std::vector<std::string> args = {}, std::vector<std::string> env = {}) {
    server_.reset();
    if (!store_) {
      Result<TestStore> store = FreshStore(dir_);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      store_.emplace(std::move(*store));
    }
    ASSERT_TRUE(store_->AwaitNoSessions());
    const std::vector<std::string> store_args = store_->ChronoqdArgs();
    args.insert(args.begin(), store_args.begin(), store_args.end());
    server_ = std::make_unique<ChronoqdProcess>(ChronoqdOptions{
        .binary = CHRONOQD_PATH,
        .data_dir = dir_.File("data"),
        .args = std::move(args),
        .env = std::move(env),
    });
    ASSERT_THAT(server_->Start(), IsOk());
  }
  // A new connection to the running chronoqd (trusting tls_ over https).
  std::unique_ptr<cli::HttpClient> Client() {
    auto c = cli::HttpClient::Create(server_->url(), std::chrono::seconds(60), tls_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // Sends one request on the test's own connection; fails the test when no
  // response arrives. After a restart, reset client_ first.
  cli::HttpResponse Send(std::string_view method, std::string_view target,
                         std::string_view body = "", const cli::HttpHeaders& headers = {}) {
    if (!client_) client_ = Client();
    auto r = client_->Send(method, target, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : cli::HttpResponse{};
  }
  // The body as JSON; a discarded value (not an exception) when it is not JSON.
  static nlohmann::json Json(const cli::HttpResponse& r) {
    return nlohmann::json::parse(r.body, nullptr, false);
  }

  TempDir dir_;
  std::optional<TestStore> store_;  // outlives server_
  std::unique_ptr<ChronoqdProcess> server_;
  std::unique_ptr<cli::HttpClient> client_;
  cli::TlsOptions tls_;  // the CAs Client() trusts when chronoqd serves TLS
};

}  // namespace chronoq::test
