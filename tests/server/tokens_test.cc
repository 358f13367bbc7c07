// The token file format, the constant-time matcher over several tokens,
// and the registry's reload (server/tokens.h).
#include "server/tokens.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/status_matchers.h"
#include "support/temp_dir.h"

namespace chronoq::server {
namespace {

using test::IsOk;
using test::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kRead = "r0000000000000000000000000000000";
const std::string kWrite = "w0000000000000000000000000000000";
const std::string kAdmin = "a0000000000000000000000000000000";

// Three tokens, with a comment, a blank line, tabs and a CRLF among them.
std::string Named() {
  std::string text = "# who   scope  secret\n";
  text += "dashboard read  " + kRead + "\n";
  text += "\n";
  text += "  billing\twrite " + kWrite + "\r\n";
  text += "ops admin " + kAdmin + "\n";
  return text;
}

TEST(TokenSetTest, ReadsNamedTokensWithTheirScopes) {
  Result<TokenSet> set = TokenSet::Parse(Named(), "/etc/tokens");
  ASSERT_THAT(set, IsOk());
  ASSERT_EQ(set->tokens().size(), 3u);
  EXPECT_EQ(set->tokens()[0].name, "dashboard");
  EXPECT_EQ(set->tokens()[0].scope, Scope::kRead);
  EXPECT_EQ(set->tokens()[0].line, 2);
  EXPECT_EQ(set->tokens()[1].name, "billing");
  EXPECT_EQ(set->tokens()[1].scope, Scope::kWrite);
  EXPECT_EQ(set->tokens()[1].line, 4);
  EXPECT_EQ(set->tokens()[2].scope, Scope::kAdmin);
  EXPECT_FALSE(set->single_secret());
  EXPECT_EQ(set->Describe(), "dashboard (read), billing (write), ops (admin)");
}

// The file of one bare secret (the only form before names and scopes):
// one admin token named "default", whatever the secret's length or first
// character, with blanks (an editor's newline) around it.
TEST(TokenSetTest, ABareSecretIsTheAdminTokenDefault) {
  for (std::string_view text :
       {"s3cret\n", "s3cret", "s3cret \r\n\n", "\n s3cret\n", "#s3cret\n"}) {
    Result<TokenSet> set = TokenSet::Parse(text, "/etc/token");
    ASSERT_THAT(set, IsOk()) << text;
    ASSERT_EQ(set->tokens().size(), 1u);
    EXPECT_EQ(set->tokens()[0].name, "default");
    EXPECT_EQ(set->tokens()[0].scope, Scope::kAdmin);
    EXPECT_TRUE(set->single_secret());
    const std::string secret(text[0] == '#' ? "#s3cret" : "s3cret");
    EXPECT_NE(set->Match(secret), nullptr) << text;
    EXPECT_EQ(set->Match(secret + "\n"), nullptr) << text;
  }
}

// Every error names the file, the line and the reason; none shows a secret.
TEST(TokenSetTest, EachErrorNamesTheFileTheLineAndTheReason) {
  const std::string s = kRead;
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"# ops\nops\nci write " + s + "\n",
       "/t:2: missing scope and secret (a line is <name> <scope> <secret>)"},
      {"ci write\n", "/t:1: missing secret"},
      {"ci write " + s + " extra\n", "/t:1: more than three fields"},
      {"ci wrte " + s + "\n", "/t:1: unknown scope 'wrte' of 'ci' (read, write or admin)"},
      {"ci Read " + s + "\n", "/t:1: unknown scope 'Read'"},
      {"a read " + s + "\n\n# b\na write " + kWrite + "\n",
       "/t:4: duplicate name 'a' (also on line 1)"},
      {"a read " + s + "\nb admin " + s + "\n",
       "/t:2: the secret of 'b' is also that of 'a' (line 1): each token needs its own"},
      {"ci write short-secret\n",
       "/t:1: the secret of 'ci' has 12 characters; at least 16 are needed"},
      {"ci/x write " + s + "\n", "/t:1: bad name 'ci/x'"},
      {"ci write " + s + "\x01\n", "/t:1: the secret of 'ci' holds a character"},
      {"# only comments\n\n# here\n", "/t: no token in it"},
      {"", "/t is empty"},
      {" \n\n", "/t is empty"},
  };
  for (const Case& c : cases) {
    Result<TokenSet> set = TokenSet::Parse(c.text, "/t");
    ASSERT_THAT(set, StatusIs(StatusCode::kInvalidArgument)) << c.text;
    EXPECT_EQ(set.status().field(), "token-file");
    EXPECT_THAT(set.status().message(), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(set.status().message(), Not(HasSubstr(s))) << "a secret in the error";
  }
}

TEST(TokenSetTest, ScopesNest) {
  EXPECT_LT(Scope::kRead, Scope::kWrite);
  EXPECT_LT(Scope::kWrite, Scope::kAdmin);
  for (Scope s : {Scope::kRead, Scope::kWrite, Scope::kAdmin}) {
    EXPECT_EQ(ParseScope(ScopeName(s)), s);
  }
  EXPECT_EQ(ParseScope("ADMIN"), std::nullopt);
}

// Each secret finds its own token, wherever it is in the set, and nothing
// else finds one: a prefix, an extension, another length, the empty one.
TEST(TokenSetTest, MatchFindsEachTokenAndNoOther) {
  Result<TokenSet> set = TokenSet::Parse(Named(), "/t");
  ASSERT_THAT(set, IsOk());
  ASSERT_NE(set->Match(kRead), nullptr);
  EXPECT_EQ(set->Match(kRead)->name, "dashboard");
  ASSERT_NE(set->Match(kWrite), nullptr);
  EXPECT_EQ(set->Match(kWrite)->name, "billing");
  ASSERT_NE(set->Match(kAdmin), nullptr);
  EXPECT_EQ(set->Match(kAdmin)->name, "ops");
  for (std::string wrong :
       {kAdmin.substr(0, 31), kAdmin + "0", std::string(), std::string("a"),
        std::string(kAdmin.size(), '0'), std::string("dashboard"), std::string("read")}) {
    EXPECT_EQ(set->Match(wrong), nullptr) << wrong;
  }
}

// The matcher compares the presented digest with every token's, whether
// the first matches, the last, or none: the work does not tell which.
TEST(TokenSetTest, MatchComparesEveryTokenWhicheverMatches) {
  Result<TokenSet> set = TokenSet::Parse(Named(), "/t");
  ASSERT_THAT(set, IsOk());
  for (const std::string& presented : {kRead, kWrite, kAdmin, std::string("nope")}) {
    size_t compared = 0;
    const TokenSet::Token* found = set->Match(DigestOf(presented), &compared);
    EXPECT_EQ(compared, 3u) << presented;
    EXPECT_EQ(found, set->Match(presented)) << presented;
  }
  EXPECT_TRUE(DigestsEqual(DigestOf("x"), DigestOf("x")));
  EXPECT_FALSE(DigestsEqual(DigestOf("x"), DigestOf("y")));
}

TEST(AuthenticateTest, NamesTheTokenAndItsScope) {
  Result<TokenSet> set = TokenSet::Parse(Named(), "/t");
  ASSERT_THAT(set, IsOk());
  std::optional<Grant> g = Authenticate("Bearer " + kWrite, *set, std::nullopt);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->name, "billing");
  EXPECT_EQ(g->scope, Scope::kWrite);
  EXPECT_EQ(Authenticate("Bearer nope", *set, std::nullopt), std::nullopt);
  EXPECT_EQ(Authenticate("Basic " + kWrite, *set, std::nullopt), std::nullopt);
  EXPECT_EQ(Authenticate(kWrite, *set, std::nullopt), std::nullopt);
  EXPECT_EQ(Authenticate("", *set, std::nullopt), std::nullopt);
}

// What cluster nodes send each other has every right, beside the API's
// tokens.
TEST(AuthenticateTest, TheClusterTokenIsAnAdmin) {
  Result<TokenSet> set = TokenSet::Parse(Named(), "/t");
  ASSERT_THAT(set, IsOk());
  const std::optional<TokenDigest> cluster = DigestOf("between-the-nodes");
  std::optional<Grant> g = Authenticate("Bearer between-the-nodes", *set, cluster);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->name, "cluster");
  EXPECT_EQ(g->scope, Scope::kAdmin);
  EXPECT_EQ(Authenticate("Bearer " + kRead, *set, cluster)->scope, Scope::kRead);
  EXPECT_EQ(Authenticate("Bearer between-the-nodes", *set, std::nullopt), std::nullopt);
}

TEST(ScopeRefusalTest, NamesTheScopeNeededAndTheToken) {
  const Grant reader{"dashboard", Scope::kRead};
  EXPECT_EQ(ScopeRefusal(reader, Scope::kRead, "GET", "/v1/tasks"), "");
  EXPECT_EQ(ScopeRefusal(reader, Scope::kWrite, "POST", "/v1/tasks"),
            "POST /v1/tasks needs a token with scope write; token 'dashboard' has scope read");
  const Grant writer{"billing", Scope::kWrite};
  EXPECT_EQ(ScopeRefusal(writer, Scope::kWrite, "POST", "/v1/tasks"), "");
  EXPECT_THAT(ScopeRefusal(writer, Scope::kAdmin, "PUT", "/v1/queues/q"),
              HasSubstr("needs a token with scope admin; token 'billing' has scope write"));
  EXPECT_EQ(ScopeRefusal({"ops", Scope::kAdmin}, Scope::kAdmin, "PUT", "/v1/queues/q"), "");
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

TEST(TokenRegistryTest, ReloadSwapsInTheNewSetAndKeepsTheOldOnAnError) {
  test::TempDir dir;
  const std::string path = dir.File("tokens");
  Write(path, "old read " + kRead + "\n");
  Result<std::unique_ptr<TokenRegistry>> registry = TokenRegistry::FromFile(path);
  ASSERT_THAT(registry, IsOk());
  std::shared_ptr<const TokenSet> before = (*registry)->Current();
  EXPECT_NE(before->Match(kRead), nullptr);

  Write(path, "new write " + kWrite + "\n");
  Result<std::shared_ptr<const TokenSet>> reloaded = (*registry)->Reload();
  ASSERT_THAT(reloaded, IsOk());
  EXPECT_EQ((*registry)->Current(), *reloaded);
  EXPECT_EQ((*registry)->Current()->Match(kRead), nullptr);
  EXPECT_EQ((*registry)->Current()->Match(kWrite)->name, "new");
  // Who got the old set before the reload still checks against it.
  EXPECT_NE(before->Match(kRead), nullptr);

  Write(path, "new write " + kWrite + "\nbad wrte " + kAdmin + "\n");
  reloaded = (*registry)->Reload();
  EXPECT_THAT(reloaded, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(reloaded.status().message(), HasSubstr(path + ":2: unknown scope 'wrte'"));
  EXPECT_EQ((*registry)->Current()->Match(kWrite)->name, "new");

  std::filesystem::remove(path);
  reloaded = (*registry)->Reload();
  EXPECT_THAT(reloaded.status().message(), HasSubstr("cannot read " + path));
  EXPECT_EQ((*registry)->Current()->Match(kWrite)->name, "new");
}

TEST(TokenRegistryTest, TokensFromTheEnvironmentHaveNothingToReload) {
  TokenRegistry registry(TokenSet::Single("s3cret"));
  EXPECT_THAT(registry.Reload(), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(registry.Current()->Match("s3cret")->scope, Scope::kAdmin);
}

}  // namespace
}  // namespace chronoq::server
