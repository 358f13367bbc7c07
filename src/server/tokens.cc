#include "server/tokens.h"

#include <algorithm>
#include <unordered_map>

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace chronoq::server {
namespace {

constexpr std::string_view kLineForm = "a line is <name> <scope> <secret>";

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '@';
}

// What may be sent in an Authorization header, after "Bearer ".
bool IsSecretChar(char c) { return c > ' ' && c < 0x7f; }

Result<TokenSet> LoadTokens(const std::string& path) { return LoadTokenFile(path); }

}  // namespace

std::string_view ScopeName(Scope scope) {
  switch (scope) {
    case Scope::kRead:
      return "read";
    case Scope::kWrite:
      return "write";
    case Scope::kAdmin:
      return "admin";
  }
  return "admin";
}

std::optional<Scope> ParseScope(std::string_view name) {
  for (Scope s : {Scope::kRead, Scope::kWrite, Scope::kAdmin}) {
    if (ScopeName(s) == name) return s;
  }
  return std::nullopt;
}

TokenDigest DigestOf(std::string_view secret) {
  TokenDigest d;
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), d.data());
  return d;
}

bool DigestsEqual(const TokenDigest& a, const TokenDigest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<TokenSet> TokenSet::Parse(std::string_view text, std::string_view source,
                                 std::string_view field) {
  std::string_view trimmed = text;
  while (!trimmed.empty() && IsConfigBlank(trimmed.back())) trimmed.remove_suffix(1);
  while (!trimmed.empty() && IsConfigBlank(trimmed.front())) trimmed.remove_prefix(1);
  if (trimmed.empty()) return Status::InvalidArgument(field, std::string(source) + " is empty");
  // The first form: the whole file is one secret (blanks around it aside).
  // Recognised by having no blank inside, so that even a secret starting
  // with '#' still reads as before.
  if (std::none_of(trimmed.begin(), trimmed.end(), IsConfigBlank)) return Single(trimmed);

  TokenSet set;
  std::unordered_map<std::string, int> names;  // name -> line
  std::unordered_map<std::string, const Token*> digests;
  set.tokens_.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  CHRONOQ_RETURN_IF_ERROR(ForEachConfigLine(
      text, source, field,
      [&](const std::vector<std::string_view>& f, int number,
          const ConfigLineError& error) -> Status {
        if (f.size() == 1) {
          return error("missing scope and secret (" + std::string(kLineForm) + ")");
        }
        if (f.size() == 2) return error("missing secret (" + std::string(kLineForm) + ")");
        if (f.size() > 3) {
          return error("more than three fields (" + std::string(kLineForm) +
                       "; a secret holds no blanks)");
        }
        const std::string name(f[0]);
        if (name.size() > 64 || !std::all_of(name.begin(), name.end(), IsNameChar)) {
          return error("bad name '" + (name.size() > 64 ? name.substr(0, 64) + "..." : name) +
                       "' (up to 64 letters, digits and . _ - : @)");
        }
        const std::optional<Scope> scope = ParseScope(f[1]);
        if (!scope) {
          return error("unknown scope '" + std::string(f[1]) + "' of '" + name +
                       "' (read, write or admin)");
        }
        const std::string_view secret = f[2];
        if (!std::all_of(secret.begin(), secret.end(), IsSecretChar)) {
          return error("the secret of '" + name +
                       "' holds a character an HTTP header cannot carry (printable ASCII only)");
        }
        if (secret.size() < kMinSecretBytes) {
          return error("the secret of '" + name + "' has " + std::to_string(secret.size()) +
                       " characters; at least " + std::to_string(kMinSecretBytes) +
                       " are needed (e.g. openssl rand -hex 32)");
        }
        if (auto [it, added] = names.emplace(name, number); !added) {
          return error("duplicate name '" + name + "' (also on line " + std::to_string(it->second) +
                       ")");
        }
        Token token{name, *scope, DigestOf(secret), number};
        const std::string key(token.digest.begin(), token.digest.end());
        if (auto it = digests.find(key); it != digests.end()) {
          return error("the secret of '" + name + "' is also that of '" + it->second->name +
                       "' (line " + std::to_string(it->second->line) +
                       "): each token needs its own");
        }
        set.tokens_.push_back(std::move(token));
        digests.emplace(key, &set.tokens_.back());  // reserved above: no reallocation
        return {};
      }));
  if (set.tokens_.empty()) {
    return Status::InvalidArgument(
        field, std::string(source) + ": no token in it (" + std::string(kLineForm) + ")");
  }
  return set;
}

TokenSet TokenSet::Single(std::string_view secret, std::string name) {
  TokenSet set;
  set.tokens_.push_back({std::move(name), Scope::kAdmin, DigestOf(secret), 0});
  set.single_secret_ = true;
  return set;
}

const TokenSet::Token* TokenSet::Match(std::string_view presented) const {
  return Match(DigestOf(presented));
}

const TokenSet::Token* TokenSet::Match(const TokenDigest& presented, size_t* compared) const {
  // Every digest is compared, and the match is picked without a branch on
  // the comparison, so the time depends only on how many tokens there are.
  size_t found = tokens_.size();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const size_t equal = DigestsEqual(presented, tokens_[i].digest) ? 1 : 0;
    found = (found & (equal - 1)) | (i & (0 - equal));
    if (compared != nullptr) ++*compared;
  }
  return found < tokens_.size() ? &tokens_[found] : nullptr;
}

std::string TokenSet::Describe() const {
  std::string out;
  for (const Token& t : tokens_) {
    if (!out.empty()) out += ", ";
    out += t.name + " (" + std::string(ScopeName(t.scope)) + ")";
  }
  return out;
}

Result<TokenSet> LoadTokenFile(const std::string& path, std::string_view field) {
  CHRONOQ_ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path, field));
  return TokenSet::Parse(text, path, field);
}

Result<std::unique_ptr<TokenRegistry>> TokenRegistry::FromFile(const std::string& path) {
  CHRONOQ_ASSIGN_OR_RETURN(TokenSet tokens, LoadTokenFile(path));
  return std::make_unique<TokenRegistry>(std::move(tokens), path);
}

TokenRegistry::TokenRegistry(TokenSet tokens, std::string path)
    : Reloadable(std::move(tokens), std::move(path), LoadTokens,
                 "the tokens come from CHRONOQ_TOKEN, not a file: nothing to reload") {}

std::optional<Grant> Authenticate(std::string_view authorization, const TokenSet& tokens,
                                  const std::optional<TokenDigest>& cluster_token) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  const TokenDigest presented = DigestOf(authorization.substr(kBearer.size()));
  // Both compared, always: the time taken does not tell which one matched.
  const TokenSet::Token* token = tokens.Match(presented);
  const bool cluster = cluster_token.has_value() && DigestsEqual(presented, *cluster_token);
  if (cluster) return Grant{"cluster", Scope::kAdmin};
  if (token == nullptr) return std::nullopt;
  return Grant{token->name, token->scope};
}

std::string ScopeRefusal(const Grant& grant, Scope needed, std::string_view method,
                         std::string_view path) {
  if (grant.scope >= needed) return {};
  return std::string(method) + " " + std::string(path) + " needs a token with scope " +
         std::string(ScopeName(needed)) + "; token '" + grant.name + "' has scope " +
         std::string(ScopeName(grant.scope));
}

}  // namespace chronoq::server
