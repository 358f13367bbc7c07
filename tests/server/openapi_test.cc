// docs/openapi.yaml and the router cannot drift apart: every endpoint the
// Api and a cluster node serve is in the spec, and every operation in the
// spec is an endpoint; the spec chronoqd serves is the file in docs/. Nor
// can docs/API.md's table of the scope each endpoint needs (ApiScopesTest;
// that chronoqd holds tokens to it: tests/integration/tokens_e2e_test.cc).
// (tests/openapi/test_openapi.py checks the bodies against the schemas, on a
// real chronoqd.)
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cluster/node.h"
#include "server/api.h"
#include "server/api_fixture.h"
#include "server/tokens.h"

#ifndef CHRONOQ_SOURCE_DIR
#error "CHRONOQ_SOURCE_DIR (for docs/openapi.yaml) must be defined for the test target"
#endif

namespace chronoq::server {
namespace {

std::string ReadSpec() {
  std::ifstream in(CHRONOQ_SOURCE_DIR "/docs/openapi.yaml");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "GET /v1/tasks/{id}" for each operation under `paths:`. The spec is kept in
// one layout (2-space indents; a path a key at indent 2, its operations keys
// at indent 4), which this reads line by line; a line there that fits neither
// shape fails the test rather than being skipped.
std::set<std::string> SpecOperations(const std::string& spec, std::string* bad_line) {
  static const std::regex kPath(R"re(^  ['"]?(/[^'"]*)['"]?:\s*$)re");
  static const std::regex kMethod(R"(^    (get|put|post|delete|patch|head|options|trace):)");
  static const std::regex kOtherKey(R"(^    [a-zA-Z$][a-zA-Z0-9_-]*:)");
  std::set<std::string> out;
  std::istringstream in(spec);
  std::string line, path;
  bool in_paths = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      in_paths = line.rfind("paths:", 0) == 0;
      continue;
    }
    if (!in_paths) continue;
    std::smatch m;
    if (std::regex_match(line, m, kPath)) {
      path = m[1];
    } else if (std::regex_search(line, m, kMethod)) {
      std::string method = m[1];
      for (char& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out.insert(method + " " + path);
    } else if (line.size() > 2 && line[2] != ' ' && line[2] != '#') {
      *bad_line = line;  // at indent 2 but not a path
    } else if (line.size() > 4 && line[4] != ' ' && line[4] != '#' &&
               !std::regex_search(line, kOtherKey)) {
      *bad_line = line;
    }
  }
  return out;
}

std::set<std::string> Served() {
  std::set<std::string> out;
  for (const Route& r : Api::Routes())
    out.insert(std::string(r.method) + " " + std::string(r.pattern));
  for (const Route& r : cluster::Node::Routes()) {
    out.insert(std::string(r.method) + " " + std::string(r.pattern));
  }
  return out;
}

TEST(OpenApiTest, EveryEndpointIsInTheSpecAndEveryOperationIsServed) {
  const std::string spec = ReadSpec();
  ASSERT_FALSE(spec.empty()) << "cannot read docs/openapi.yaml";
  std::string bad_line;
  const std::set<std::string> documented = SpecOperations(spec, &bad_line);
  EXPECT_EQ(bad_line, "") << "a line under paths: this test cannot read";
  const std::set<std::string> served = Served();
  std::vector<std::string> undocumented, unserved;
  for (const std::string& op : served) {
    if (documented.count(op) == 0) undocumented.push_back(op);
  }
  for (const std::string& op : documented) {
    if (served.count(op) == 0) unserved.push_back(op);
  }
  EXPECT_THAT(undocumented, ::testing::IsEmpty()) << "served, but not in docs/openapi.yaml";
  EXPECT_THAT(unserved, ::testing::IsEmpty()) << "in docs/openapi.yaml, but not served";
  EXPECT_GE(served.size(), 30u);
}

class OpenApiServedTest : public test::ApiFixture {};

TEST_F(OpenApiServedTest, ChronoqdServesTheSpecInDocs) {
  ApiResponse r = Call("GET", "/v1/openapi.yaml");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/yaml");
  EXPECT_EQ(r.Render(), ReadSpec());
}

// The route table: a literal segment wins over a `{name}` at the same place
// for its method only; other methods at a path answer 405 listing those it
// accepts; a path nothing fits answers 404.
TEST_F(OpenApiServedTest, RoutesMatchLiteralsFirstAndAnswer405WithAllow) {
  ApiResponse batch = Call("GET", "/v1/tasks/batch");  // the task whose id is "batch"
  EXPECT_EQ(batch.status, 404) << batch.Render();
  ApiResponse put = Call("PUT", "/v1/tasks/x");
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.allow, "GET, DELETE, PATCH");
  ApiResponse tasks = Call("DELETE", "/v1/tasks");
  EXPECT_EQ(tasks.status, 405);
  EXPECT_EQ(tasks.allow, "GET, POST");
  EXPECT_EQ(Call("GET", "/v1/nothing/here").status, 404);
  EXPECT_EQ(Call("GET", "/v1/tasks/x/ack").status, 405);
  ApiResponse bad = Call("GET", "/v1/locks/%zz");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.Render().find("\"field\":\"key\""), std::string::npos) << bad.body;
}

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

}  // namespace
}  // namespace chronoq::server
