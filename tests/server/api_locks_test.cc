// The keyed lock endpoints driven directly on a real engine and a fake clock:
// grants and fencing tokens, try-locks, waiters served on release and on a
// lapsed lease, stale tokens, the read, what uses the blocking pool, and every class of
// bad input.
#include <deque>
#include <functional>
#include <future>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chronoq/time.h"

#include "server/api.h"
#include "server/api_fixture.h"
#include "support/eventually.h"

namespace chronoq::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ApiLocksTest : public test::ApiFixture {
 protected:
  static json AcquireBody(int64_t wait_ms, int64_t lease_ms, const std::string& owner = "") {
    json body = {{"wait_ms", wait_ms}, {"lease_ms", lease_ms}};
    if (!owner.empty()) body["owner"] = owner;
    return body;
  }
  std::future<ApiResponse> StartAcquire(const std::string& key, int64_t wait_ms,
                                        int64_t lease_ms = 30000, const std::string& owner = "") {
    return Start("POST", "/v1/locks/" + key + "/acquire",
                 AcquireBody(wait_ms, lease_ms, owner).dump());
  }
  // Acquires `key` at once; expects 200 and returns the grant.
  json Acquire(const std::string& key, int64_t lease_ms = 30000, const std::string& owner = "") {
    ApiResponse r = test::GetWithin(StartAcquire(key, 0, lease_ms, owner), "a try-lock's answer");
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  ApiResponse Release(const std::string& key, const json& token) {
    return Call("POST", "/v1/locks/" + key + "/release", json({{"token", token}}).dump());
  }
  json Info(const std::string& key) {
    ApiResponse r = Call("GET", "/v1/locks/" + key);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  // Blocks until `key` has `n` waiters (the engine queued the acquisitions).
  void AwaitWaiters(const std::string& key, int n) {
    ASSERT_TRUE(test::Eventually([&] { return Info(key)["waiters"] == n; })) << Info(key).dump();
  }
  // Expects `answer` to have arrived (the real-time bound only turns a hang
  // into a failure).
  static ApiResponse Answered(std::future<ApiResponse>& answer) {
    EXPECT_EQ(answer.wait_for(60s), std::future_status::ready);
    return answer.wait_for(0s) == std::future_status::ready ? answer.get() : ApiResponse{};
  }
};

TEST_F(ApiLocksTest, AcquireGrantsATokenAndATryLockOnAHeldKeyTimesOut) {
  const json grant = Acquire("invoice:42", 30000, "worker-3");
  EXPECT_EQ(grant["key"], "invoice:42");
  ASSERT_TRUE(grant["token"].is_number_unsigned()) << grant.dump();
  EXPECT_GT(grant["token"].get<uint64_t>(), 0u);
  EXPECT_EQ(grant["expires_at"], FormatTime(clock_.Now() + 30s));
  EXPECT_EQ(grant.size(), 3u) << grant.dump();

  ApiResponse busy = test::GetWithin(StartAcquire("invoice:42", 0), "a try-lock's answer");
  ExpectError(busy, 409, "lock_wait_timeout", "wait_ms");
  // Another key is independent.
  const json other = Acquire("invoice:43");
  EXPECT_GT(other["token"].get<uint64_t>(), grant["token"].get<uint64_t>());
}

TEST_F(ApiLocksTest, GetShowsHolderOwnerExpiryAndWaiters) {
  EXPECT_EQ(Info("k"), json({{"key", "k"},
                             {"held", false},
                             {"owner", nullptr},
                             {"token", nullptr},
                             {"expires_at", nullptr},
                             {"waiters", 0}}));
  const json grant = Acquire("k", 60000, "worker-3");
  auto waiter = StartAcquire("k", 3600000);
  AwaitWaiters("k", 1);
  const json held = {{"key", "k"},
                     {"held", true},
                     {"owner", "worker-3"},
                     {"token", grant["token"]},
                     {"expires_at", FormatTime(clock_.Now() + 60s)},
                     {"waiters", 1}};
  EXPECT_EQ(Info("k"), held);
  // GET /v1/locks lists it the same way, and pages by key.
  Acquire("j");
  json list = Json(Call("GET", "/v1/locks"));
  ASSERT_EQ(list["locks"].size(), 2u) << list.dump();
  EXPECT_EQ(list["locks"][0]["key"], "j");
  EXPECT_EQ(list["locks"][1], held);
  EXPECT_FALSE(list.contains("next_after")) << list.dump();
  list = Json(Call("GET", "/v1/locks?limit=1"));
  EXPECT_EQ(list["locks"].size(), 1u);
  EXPECT_EQ(list["next_after"], "j");
  list = Json(Call("GET", "/v1/locks?limit=1&after=j"));
  EXPECT_EQ(list["locks"][0]["key"], "k");
  ExpectError(Call("GET", "/v1/locks?limit=0"), 400, "invalid_argument", "limit");
  ExpectError(Call("GET", "/v1/locks?color=red"), 400, "invalid_argument", "color");
  ASSERT_EQ(Release("k", grant["token"]).status, 200);
  ASSERT_EQ(Answered(waiter).status, 200);
  // The new holder gave no owner.
  const json info = Info("k");
  EXPECT_EQ(info["held"], true);
  EXPECT_TRUE(info["owner"].is_null()) << info.dump();
  EXPECT_EQ(info["waiters"], 0);
}

TEST_F(ApiLocksTest, AWaiterIsServedWhenTheHolderReleases) {
  const json first = Acquire("k");
  auto waiter = StartAcquire("k", 60000, 30000, "second");
  AwaitWaiters("k", 1);
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout);

  ApiResponse released = Release("k", first["token"]);
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(released.body, "{}");
  ApiResponse r = Answered(waiter);
  ASSERT_EQ(r.status, 200) << r.body;
  const json second = Json(r);
  EXPECT_EQ(second["key"], "k");
  EXPECT_GT(second["token"].get<uint64_t>(), first["token"].get<uint64_t>());
  EXPECT_EQ(Info("k")["owner"], "second");
}

TEST_F(ApiLocksTest, WaitersAreServedInArrivalOrder) {
  const json first = Acquire("k");
  auto a = StartAcquire("k", 60000, 30000, "a");
  AwaitWaiters("k", 1);
  auto b = StartAcquire("k", 60000, 30000, "b");
  AwaitWaiters("k", 2);
  ASSERT_EQ(Release("k", first["token"]).status, 200);
  const json granted_a = Json(Answered(a));
  EXPECT_EQ(b.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(Info("k")["owner"], "a");
  ASSERT_EQ(Release("k", granted_a["token"]).status, 200);
  EXPECT_EQ(Answered(b).status, 200);
  EXPECT_EQ(Info("k")["owner"], "b");
}

TEST_F(ApiLocksTest, AWaitThatRunsOutIsALockWaitTimeout) {
  Acquire("k");
  auto waiter = StartAcquire("k", 1000);
  AwaitWaiters("k", 1);
  clock_.Advance(1s);
  engine_->Sync();
  ExpectError(Answered(waiter), 409, "lock_wait_timeout", "wait_ms");
  EXPECT_EQ(Info("k")["waiters"], 0);
}

TEST_F(ApiLocksTest, ALapsedLeaseHandsTheLockToTheWaiter) {
  const json first = Acquire("k", 1000);
  auto waiter = StartAcquire("k", 60000, 30000, "next");
  AwaitWaiters("k", 1);
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout);
  clock_.Advance(1s);
  engine_->Sync();
  ApiResponse r = Answered(waiter);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GT(Json(r)["token"].get<uint64_t>(), first["token"].get<uint64_t>());
  EXPECT_EQ(Json(r)["expires_at"], FormatTime(clock_.Now() + 30s));
  EXPECT_EQ(Info("k")["owner"], "next");
  // The lapsed holder's token is stale now.
  ExpectError(Release("k", first["token"]), 409, "stale_token", "token");
}

TEST_F(ApiLocksTest, ReleaseAndExtendWithAStaleTokenAreRefused) {
  const json grant = Acquire("k");
  const uint64_t token = grant["token"];
  ExpectError(Release("k", token + 1), 409, "stale_token", "token");
  ExpectError(
      Call("POST", "/v1/locks/k/extend", json({{"token", token + 1}, {"lease_ms", 1000}}).dump()),
      409, "stale_token", "token");
  // A wrong token changed nothing.
  EXPECT_EQ(Info("k")["held"], true);
  ASSERT_EQ(Release("k", token).status, 200);
  EXPECT_EQ(Info("k")["held"], false);
  // Released: the token is stale for both.
  ExpectError(Release("k", token), 409, "stale_token", "token");
  ExpectError(
      Call("POST", "/v1/locks/k/extend", json({{"token", token}, {"lease_ms", 1000}}).dump()), 409,
      "stale_token", "token");
}

TEST_F(ApiLocksTest, ExtendMovesTheLeaseEndFromNow) {
  const json grant = Acquire("k", 1000);
  clock_.Advance(900ms);
  ApiResponse r = Call("POST", "/v1/locks/k/extend",
                       json({{"token", grant["token"]}, {"lease_ms", 5000}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r), json({{"key", "k"},
                           {"token", grant["token"]},
                           {"expires_at", FormatTime(clock_.Now() + 5s)}}));
  EXPECT_EQ(Info("k")["expires_at"], FormatTime(clock_.Now() + 5s));
  // Past the original lease end the lock is still held.
  clock_.Advance(1s);
  engine_->Sync();
  EXPECT_EQ(Info("k")["held"], true);
  EXPECT_EQ(Release("k", grant["token"]).status, 200);
}

TEST_F(ApiLocksTest, KeysArePercentDecodedPathSegments) {
  const json grant = Acquire("invoice%3A42%2Fa%20b");
  EXPECT_EQ(grant["key"], "invoice:42/a b");
  EXPECT_EQ(Info("invoice:42%2Fa b")["held"], true);
  EXPECT_EQ(Info("invoice%3A42%2Fa%20b")["key"], "invoice:42/a b");
  EXPECT_EQ(Release("invoice%3a42%2fa%20b", grant["token"]).status, 200);
}

TEST_F(ApiLocksTest, ShutdownAnswersWaitingAcquisitionsWithUnavailable) {
  Acquire("k");
  auto waiter = StartAcquire("k", 3600000);
  AwaitWaiters("k", 1);
  engine_->ReleaseWaitingClaims();
  ExpectError(Answered(waiter), 503, "unavailable");
}

TEST_F(ApiLocksTest, OnlyTheReadRunsOnTheBlockingPool) {
  std::deque<std::function<void()>> pool;
  MakeApi([&](std::function<void()> fn) { pool.push_back(std::move(fn)); });
  // Acquire, extend and release go through the engine's asynchronous calls
  // (a long wait, or a commit, holds no thread); only the read uses the pool.
  auto granted = StartAcquire("k", 0);
  EXPECT_TRUE(pool.empty());
  const json grant = Json(Answered(granted));
  auto waiting = StartAcquire("k", 3600000);
  EXPECT_TRUE(pool.empty());

  auto read = Start("GET", "/v1/locks/k", "");
  ASSERT_EQ(pool.size(), 1u);
  EXPECT_EQ(read.wait_for(0s), std::future_status::timeout);
  pool.front()();
  pool.pop_front();
  EXPECT_EQ(Answered(read).status, 200);

  const std::vector<std::pair<std::string, std::string>> requests = {
      {"/v1/locks/k/extend", json({{"token", grant["token"]}, {"lease_ms", 60000}}).dump()},
      {"/v1/locks/k/release", json({{"token", grant["token"]}}).dump()},
  };
  for (const auto& [target, body] : requests) {
    SCOPED_TRACE(target);
    auto answer = Start("POST", target, body);
    ApiResponse r = Answered(answer);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(pool.empty());
  }
  // The release served the waiter.
  EXPECT_EQ(Answered(waiting).status, 200);
  // A bad request is answered at once.
  ExpectError(Call("POST", "/v1/locks/k/release", "{}"), 400, "invalid_argument", "token");
  EXPECT_TRUE(pool.empty());
}

TEST_F(ApiLocksTest, BadInputIsRejectedByFieldAndChangesNothing) {
  const std::string long_owner(201, 'o');
  const std::string long_key(201, 'k');
  const std::vector<ErrorCase> cases = {
      {"POST", "/v1/locks/k/acquire", "{", 400, "invalid_argument", "body"},
      {"POST", "/v1/locks/k/acquire", "[]", 400, "invalid_argument", "body"},
      {"POST", "/v1/locks/k/acquire", "", 400, "invalid_argument", "body"},
      {"POST", "/v1/locks/k/acquire", R"({"lease_ms":1000})", 400, "invalid_argument", "wait_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":0})", 400, "invalid_argument", "lease_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":-1,"lease_ms":1000})", 400, "invalid_argument",
       "wait_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":3600001,"lease_ms":1000})", 400,
       "invalid_argument", "wait_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":"5","lease_ms":1000})", 400, "invalid_argument",
       "wait_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":1.5,"lease_ms":1000})", 400, "invalid_argument",
       "wait_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":0})", 400, "invalid_argument",
       "lease_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":604800001})", 400,
       "invalid_argument", "lease_ms"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":1000,"owner":7})", 400,
       "invalid_argument", "owner"},
      {"POST", "/v1/locks/k/acquire",
       json({{"wait_ms", 0}, {"lease_ms", 1000}, {"owner", long_owner}}).dump(), 400,
       "invalid_argument", "owner"},
      {"POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":1000,"ttl":5})", 400,
       "invalid_argument", "ttl"},
      {"POST", "/v1/locks/k%zz/acquire", R"({"wait_ms":0,"lease_ms":1000})", 400,
       "invalid_argument", "key"},
      {"POST", "/v1/locks/" + long_key + "/acquire", R"({"wait_ms":0,"lease_ms":1000})", 400,
       "invalid_argument", "key"},
      {"POST", "/v1/locks/a%0Ab/acquire", R"({"wait_ms":0,"lease_ms":1000})", 400,
       "invalid_argument", "key"},
      {"POST", "/v1/locks/k/release", "{}", 400, "invalid_argument", "token"},
      {"POST", "/v1/locks/k/release", R"({"token":0})", 400, "invalid_argument", "token"},
      {"POST", "/v1/locks/k/release", R"({"token":"1"})", 400, "invalid_argument", "token"},
      {"POST", "/v1/locks/k/release", R"({"token":1,"force":true})", 400, "invalid_argument",
       "force"},
      {"POST", "/v1/locks/k%zz/release", R"({"token":1})", 400, "invalid_argument", "key"},
      {"POST", "/v1/locks/k/extend", R"({"token":1})", 400, "invalid_argument", "lease_ms"},
      {"POST", "/v1/locks/k/extend", R"({"lease_ms":1000})", 400, "invalid_argument", "token"},
      {"POST", "/v1/locks/k/extend", R"({"token":1,"lease_ms":0})", 400, "invalid_argument",
       "lease_ms"},
      {"POST", "/v1/locks/k/extend", R"({"token":1,"lease_ms":604800001})", 400, "invalid_argument",
       "lease_ms"},
      {"POST", "/v1/locks/k/extend", R"({"token":1,"lease_ms":1000,"wait_ms":1})", 400,
       "invalid_argument", "wait_ms"},
      {"GET", "/v1/locks/k%zz", "", 400, "invalid_argument", "key"},
      {"GET", "/v1/locks/" + long_key, "", 400, "invalid_argument", "key"},
      {"GET", "/v1/locks/k/acquire", "", 405, "method_not_allowed", ""},
      {"POST", "/v1/locks/k", "{}", 405, "method_not_allowed", ""},
      {"POST", "/v1/locks", "{}", 405, "method_not_allowed", ""},
      {"POST", "/v1/locks/k/steal", "{}", 404, "not_found", ""},
      {"GET", "/v1/locks/k/a/b", "", 404, "not_found", ""},
  };
  ExpectErrors(cases);
  EXPECT_EQ(Info("k")["held"], false);
  EXPECT_EQ(Info("k")["waiters"], 0);
}

TEST_F(ApiLocksTest, MethodNotAllowedNamesTheAllowedMethods) {
  EXPECT_EQ(Call("DELETE", "/v1/locks/k").allow, "GET");
  EXPECT_EQ(Call("GET", "/v1/locks/k/acquire").allow, "POST");
  EXPECT_EQ(Call("PUT", "/v1/locks/k/release").allow, "POST");
  EXPECT_EQ(Call("GET", "/v1/locks/k/extend").allow, "POST");
}

TEST(ApiLocksErrorsTest, ALockWaitTimeoutIsA409OfItsOwn) {
  const Status timeout(StatusCode::kDeadlineExceeded, "still held", "wait_ms",
                       StatusReason::kLockWaitTimeout);
  EXPECT_EQ(HttpStatusOf(timeout), 409);
  EXPECT_EQ(WireCodeOf(timeout), "lock_wait_timeout");
  // Another deadline is still a 503.
  const Status other(StatusCode::kDeadlineExceeded, "slow");
  EXPECT_EQ(HttpStatusOf(other), 503);
  EXPECT_EQ(WireCodeOf(other), "deadline_exceeded");
}

}  // namespace
}  // namespace chronoq::server
