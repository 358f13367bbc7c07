// Bearer tokens: who may call chronoqd's API, and what each may do.
//
// A token file (chronoqd --token-file) holds one token a line, as
//
//   # name      scope  secret
//   dashboard   read   3f1c0e5b9a0d4c7e8b2a61d95f0e4c3a
//   billing     write  b7d2a9c4e1f08a6d3c5b7e9f2a4c6d8e
//   ops         admin  9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b
//
// with `#` comments and blank lines. Scopes nest: read ⊂ write ⊂ admin
// (Scope). A file that is one bare secret (no whitespace in it: the format
// before names and scopes) is one token named "default" with scope admin.
//
// Secrets are kept only as SHA-256 digests, and a presented token is
// compared with every configured one in constant time (TokenSet::Match).
//
// TokenRegistry holds the set chronoqd uses now and swaps in a new one on
// reload (SIGHUP): a request sees the old set or the new, never a mix.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/result.h"

#include "common/mutex.h"
#include "server/config_file.h"

namespace chronoq::server {

// What a token may do; each scope includes the ones before it.
//   read:  every GET (tasks, queues, schedules, locks, stats, metrics)
//   write: what applications do (enqueue, claim, ack, cancel, locks, schedules)
//   admin: operator actions (queue settings, pause, purge)
// Each route of the API names the scope it needs (server::Route).
enum class Scope : uint8_t { kRead = 0, kWrite = 1, kAdmin = 2 };

std::string_view ScopeName(Scope scope);  // "read", "write", "admin"
std::optional<Scope> ParseScope(std::string_view name);

// The shortest secret of the named-token format (bytes): 128 bits of
// entropy when random hex, more when base64. Not enforced on the bare
// single-secret form, which existed before it and must keep working.
inline constexpr size_t kMinSecretBytes = 16;

using TokenDigest = std::array<unsigned char, 32>;  // SHA-256
TokenDigest DigestOf(std::string_view secret);

// Whether two digests are equal, in time that does not depend on where
// they differ.
bool DigestsEqual(const TokenDigest& a, const TokenDigest& b);

// Who presented a token, and what it allows.
struct Grant {
  std::string name;
  Scope scope = Scope::kRead;
};

// An immutable set of named tokens. Thread-safe (const).
class TokenSet {
 public:
  struct Token {
    std::string name;
    Scope scope;
    TokenDigest digest;  // of the secret; the secret itself is not kept
    int line = 0;        // in the file it came from (0: not from a file)
  };

  // Parses a token file's text. `source` (the file's path) starts every
  // error: InvalidArgument with field `field`, "<source>:<line>: <reason>"
  // (a missing secret or scope, an unknown scope, a duplicate name or
  // secret, a secret shorter than kMinSecretBytes, a bad name), or
  // "<source>: ..." when the file holds no token at all.
  static Result<TokenSet> Parse(std::string_view text, std::string_view source,
                                std::string_view field = "token-file");
  // One admin token (CHRONOQ_TOKEN, or a test's).
  static TokenSet Single(std::string_view secret, std::string name = "default");

  // The token whose secret is `presented`, or nullptr. Every token's digest
  // is compared, whichever matches and whatever the lengths, so the time
  // taken tells nothing about the secrets. `compared` (tests) counts the
  // comparisons made.
  const Token* Match(std::string_view presented) const;
  const Token* Match(const TokenDigest& presented, size_t* compared = nullptr) const;

  const std::vector<Token>& tokens() const { return tokens_; }
  // Whether the set is one bare secret (the old file form, CHRONOQ_TOKEN).
  bool single_secret() const { return single_secret_; }
  // "ci (write), ops (admin)": for the log.
  std::string Describe() const;

 private:
  std::vector<Token> tokens_;
  bool single_secret_ = false;
};

// Reads and parses a token file; errors name `field` and the path.
Result<TokenSet> LoadTokenFile(const std::string& path, std::string_view field = "token-file");

// The token set chronoqd checks requests against now, and where it came
// from. Thread-safe: Current() from the I/O threads, Reload() from the
// signal-waiting thread. Reload() reads the file again: on success the new
// set replaces the old one at once (for every request checked from then on);
// on an error (naming the line) the old set stays; FailedPrecondition when
// the tokens did not come from a file.
class TokenRegistry : public Reloadable<TokenSet> {
 public:
  // Tokens read from `path`, which Reload() reads again.
  static Result<std::unique_ptr<TokenRegistry>> FromFile(const std::string& path);
  // Fixed tokens (CHRONOQ_TOKEN): Reload() has nothing to read.
  explicit TokenRegistry(TokenSet tokens, std::string path = "");
};

// The request's token, from its Authorization header's value ("Bearer
// <secret>"), checked against `tokens` and, when given, the cluster's token
// (a Grant named "cluster" with scope admin: nodes forward any request).
// Both are always compared. nullopt: no such token (a 401).
std::optional<Grant> Authenticate(std::string_view authorization, const TokenSet& tokens,
                                  const std::optional<TokenDigest>& cluster_token);

// Why `grant` may not make the request (`method` on `path`) that needs
// `needed`: the message of a 403 insufficient_scope, naming the token and
// the scope needed (never the secret); empty when it may.
std::string ScopeRefusal(const Grant& grant, Scope needed, std::string_view method,
                         std::string_view path);

}  // namespace chronoq::server
