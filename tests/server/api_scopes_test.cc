// Which scope each endpoint needs (the route table's own column), that
// docs/API.md says the same, and that chronoqd's HTTP layer holds tokens of
// each scope to it: a real HttpServer on a loopback port in front of the
// Api, with a read, a write and an admin token.
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/http_client.h"
#include "cluster/node.h"
#include "server/api.h"
#include "server/api_fixture.h"
#include "server/http_server.h"
#include "server/tokens.h"
#include "support/status_matchers.h"

namespace chronoq::server {
namespace {

using test::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<Route> AllRoutes() {
  std::vector<Route> all = Api::Routes();
  for (const Route& r : cluster::Node::Routes()) all.push_back(r);
  return all;
}

// Reading never needs more than read, and nothing that changes state is
// open to a read token.
TEST(ApiScopesTest, EveryGetNeedsReadAndEveryOtherMethodMore) {
  for (const Route& r : AllRoutes()) {
    const std::string what = std::string(r.method) + " " + std::string(r.pattern);
    if (r.method == "GET") {
      EXPECT_EQ(r.scope, Scope::kRead) << what;
    } else {
      EXPECT_NE(r.scope, Scope::kRead) << what;
    }
  }
}

// docs/API.md's "Scopes" table: "| `METHOD /path` | scope |" for every
// route but the GETs (one row says they all need read).
std::map<std::string, std::string> DocumentedScopes(std::string* rule_for_gets) {
  std::ifstream in(std::string(CHRONOQ_SOURCE_DIR) + "/docs/API.md");
  std::map<std::string, std::string> out;
  static const std::regex kRow(R"(^\| `([A-Z]+ [^`]+)` \| (read|write|admin) \|$)");
  static const std::regex kGets(R"(^\| every `GET` \| (read|write|admin) \|$)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, kRow)) out[m[1]] = m[2];
    if (std::regex_match(line, m, kGets)) *rule_for_gets = m[1];
  }
  return out;
}

// A new endpoint fails here until its scope is written into docs/API.md
// (the route table cannot leave it out: it is a column of its own).
TEST(ApiScopesTest, DocsApiMdListsEveryEndpointsScope) {
  std::string gets;
  std::map<std::string, std::string> documented = DocumentedScopes(&gets);
  ASSERT_FALSE(documented.empty()) << "cannot read docs/API.md's Scopes table";
  EXPECT_EQ(gets, "read");
  for (const Route& r : AllRoutes()) {
    if (r.method == "GET") continue;
    const std::string op = std::string(r.method) + " " + std::string(r.pattern);
    auto it = documented.find(op);
    if (it == documented.end()) {
      ADD_FAILURE() << op << " is not in docs/API.md's Scopes table";
      continue;
    }
    EXPECT_EQ(it->second, ScopeName(r.scope)) << op;
    documented.erase(it);
  }
  for (const auto& [op, scope] : documented) ADD_FAILURE() << op << " is documented, not served";
}

// The lookup the HTTP layer makes finds the route Dispatch would take.
TEST(ApiScopesTest, ScopeOfFindsTheRouteOfARequest) {
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/tasks"), Scope::kWrite);
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/tasks?x=1"), Scope::kWrite);
  EXPECT_EQ(Api::ScopeOf("GET", "/v1/tasks?queue=a"), Scope::kRead);
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/tasks/batch"), Scope::kWrite);
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/tasks/a%2Fb/purge"), Scope::kAdmin);
  EXPECT_EQ(Api::ScopeOf("PUT", "/v1/queues/emails"), Scope::kAdmin);
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/queues/emails/claim"), Scope::kWrite);
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/queues/emails/pause?now"), Scope::kAdmin);
  // No endpoint: a 404 or 405 answers, which changes nothing.
  EXPECT_EQ(Api::ScopeOf("POST", "/v1/nothing"), Scope::kRead);
  EXPECT_EQ(Api::ScopeOf("PUT", "/v1/tasks"), Scope::kRead);
  // A node's own endpoint, then its Api's.
  EXPECT_EQ(cluster::Node::ScopeOf("GET", "/v1/cluster"), Scope::kRead);
  EXPECT_EQ(cluster::Node::ScopeOf("POST", "/v1/queues/q/resume"), Scope::kAdmin);
}

const std::string kReader = "reader-secret-0000000000000000";
const std::string kWriter = "writer-secret-0000000000000000";
const std::string kAdmin = "admin-secret-00000000000000000";

class ScopedHttpTest : public test::ApiFixture {
 protected:
  void SetUp() override {
    ApiFixture::SetUp();
    Result<TokenSet> set = TokenSet::Parse("viewer read " + kReader + "\napp write " + kWriter +
                                               "\nops admin " + kAdmin + "\n",
                                           "tokens");
    ASSERT_THAT(set, IsOk());
    tokens_ = std::make_unique<TokenRegistry>(std::move(*set));
    ServerOptions options;
    options.port = 0;
    options.threads = 1;
    options.tokens = tokens_.get();
    http_ = std::make_unique<HttpServer>(options, *api_);
    ASSERT_THAT(http_->Start(), IsOk());
  }
  void TearDown() override {
    http_.reset();
    ApiFixture::TearDown();
  }

  // One request on a connection of its own (a refusal closes it).
  cli::HttpResponse Send(const std::string& secret, std::string_view method,
                         std::string_view target, std::string_view body = "") {
    auto client =
        cli::HttpClient::Create("http://127.0.0.1:" + std::to_string(http_->port()), kTimeout);
    EXPECT_THAT(client, IsOk());
    if (!client.ok()) return {};
    cli::HttpHeaders headers;
    if (!secret.empty()) headers.push_back({"Authorization", "Bearer " + secret});
    auto r = (*client)->Send(method, target, body, headers);
    EXPECT_THAT(r, IsOk()) << method << " " << target;
    return r.ok() ? *r : cli::HttpResponse{};
  }

  static constexpr std::chrono::seconds kTimeout{30};
  std::unique_ptr<TokenRegistry> tokens_;
  std::unique_ptr<HttpServer> http_;
};

TEST_F(ScopedHttpTest, EachScopeGetsWhatItCoversAnd403ForTheRest) {
  const std::string task = R"({"queue":"q","id":"t1"})";
  // Unknown or missing token: 401 as always; /healthz needs none.
  EXPECT_EQ(Send("", "GET", "/v1/queues").status, 401);
  EXPECT_EQ(Send("nope", "GET", "/v1/queues").status, 401);
  EXPECT_EQ(Send("", "GET", "/healthz").status, 200);

  // read: every GET, nothing else; the refusal names the scope and the token.
  EXPECT_EQ(Send(kReader, "GET", "/v1/queues").status, 200);
  EXPECT_EQ(Send(kReader, "GET", "/metrics").status, 200);
  cli::HttpResponse refused = Send(kReader, "POST", "/v1/tasks", task);
  EXPECT_EQ(refused.status, 403);
  const nlohmann::json error = nlohmann::json::parse(refused.body)["error"];
  EXPECT_EQ(error["code"], "insufficient_scope");
  EXPECT_EQ(error["message"],
            "POST /v1/tasks needs a token with scope write; token 'viewer' has scope read");
  EXPECT_THAT(refused.body, Not(HasSubstr(kReader)));
  EXPECT_EQ(refused.Header("WWW-Authenticate"),
            R"(Bearer error="insufficient_scope", scope="write")");
  // ... and changed nothing.
  EXPECT_EQ(engine_->Get("t1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Send(kReader, "PUT", "/v1/queues/q", "{}").status, 403);

  // write: what an application does, not an operator's queue actions.
  EXPECT_EQ(Send(kWriter, "POST", "/v1/tasks", task).status, 201);
  EXPECT_EQ(Send(kWriter, "POST", "/v1/queues/q/claim", R"({"max":1})").status, 200);
  EXPECT_EQ(Send(kWriter, "POST", "/v1/locks/k/acquire", R"({"wait_ms":0,"lease_ms":1000})").status, 200);
  cli::HttpResponse pause = Send(kWriter, "POST", "/v1/queues/q/pause");
  EXPECT_EQ(pause.status, 403);
  EXPECT_THAT(pause.body, HasSubstr("needs a token with scope admin; token 'app' has scope write"));
  EXPECT_EQ(Send(kWriter, "POST", "/v1/tasks/t1/purge", "{}").status, 403);
  EXPECT_EQ(Send(kWriter, "GET", "/v1/tasks/t1").status, 200);

  // admin: everything.
  EXPECT_EQ(Send(kAdmin, "POST", "/v1/queues/q/pause").status, 200);
  EXPECT_EQ(Send(kAdmin, "PUT", "/v1/queues/q", R"({"max_in_flight":3})").status, 200);
  EXPECT_EQ(Send(kAdmin, "GET", "/v1/queues/q").status, 200);
}

}  // namespace
}  // namespace chronoq::server
