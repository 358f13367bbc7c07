// What makes a webhook delivery verifiable and tells a receiver how to treat
// the answer: Standard Webhooks signatures (https://www.standardwebhooks.com),
// the per-queue secrets that sign them, and the Retry-After header.
//
// A delivery carries
//
//   webhook-id: msg_0193a4c5e6f70001       stable across the task's retries
//   webhook-timestamp: 1732694400          seconds since 1970, of this attempt
//   webhook-signature: v1,<base64>[ v1,<base64>...]   one per active secret
//
// where each signature is base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>"))
// and key is the base64-decoded part of a secret "whsec_<base64>". A receiver
// accepts the delivery when any one signature matches one of its secrets, so
// while a secret is rotated both the old and the new one sign.
//
// The secrets file (chronoqd --webhook-secrets FILE, read again on SIGHUP):
//
//   # queue   secret
//   *         whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
//   billing   whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD
//   billing   whsec_WUoNTgeKnoEgKyE6e4nArqBTLS7sq9nk
//
// A queue with lines of its own is signed with every secret on them (the two
// billing lines are both active: a rotation in progress); any other queue
// with the "*" lines'; a queue with neither is delivered unsigned.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chronoq/clock.h"
#include "chronoq/result.h"

#include "server/config_file.h"

namespace chronoq::server {

// The key of a secret "whsec_<base64>": 24 to 64 bytes once decoded.
// InvalidArgument naming `field` otherwise.
Result<std::string> DecodeWebhookSecret(std::string_view secret,
                                        std::string_view field = "webhook-secrets");

// The value of webhook-signature for a message signed with each of `keys`
// (raw keys, DecodeWebhookSecret's): "v1,<sig>" for each, space-separated.
std::string WebhookSignature(const std::vector<std::string>& keys, std::string_view id,
                             int64_t timestamp, std::string_view body);

// The webhook-id of a task's deliveries: "msg_" and the task's row number in
// 16 hex digits. Stable across the task's retries and unique to the task: an
// id used again for a new task after the first finished gets a new one.
std::string WebhookMessageId(int64_t seq);

// The parsed secrets file. Immutable, so thread-safe. Never shown: Describe()
// names queues and counts only.
class WebhookSecrets {
 public:
  // Parses a secrets file's text: lines "<queue or *> <whsec_...>", `#`
  // comments, blank lines. InvalidArgument (field webhook-secrets)
  // "<source>:<line>: <reason>": a missing or extra field, a bad queue
  // name, a secret that is not whsec_ and base64 of 24-64 bytes, the same
  // secret twice for one queue. An empty file is valid: nothing is signed.
  static Result<WebhookSecrets> Parse(std::string_view text, std::string_view source);

  // The keys that sign `queue`'s deliveries, in file order: its own lines'
  // if it has any, else the "*" lines'; empty: deliveries go unsigned.
  const std::vector<std::string>& KeysFor(std::string_view queue) const;
  // "billing (2 secrets), * (1 secret)": for the log.
  std::string Describe() const;

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> keys_;  // queue or "*"
};

// Reads and parses a secrets file; errors name the path and line.
Result<WebhookSecrets> LoadWebhookSecrets(const std::string& path);

// The secrets in force, swapped on SIGHUP (Reloadable's rules).
class WebhookSecretRegistry : public Reloadable<WebhookSecrets> {
 public:
  static Result<std::unique_ptr<WebhookSecretRegistry>> FromFile(const std::string& path);
  // Fixed secrets (tests): Reload() has nothing to read.
  explicit WebhookSecretRegistry(WebhookSecrets secrets, std::string path = "");
};

// The longest wait a Retry-After header may ask for; a longer one is cut to it.
inline constexpr Duration kMaxRetryAfter = std::chrono::hours(24);

// The wait a Retry-After header's value asks for (RFC 9110 10.2.3): a number
// of seconds, or an HTTP-date (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT",
// or the obsolete RFC 850 and asctime forms) taken from `now`; a date in the
// past is no wait. At most kMaxRetryAfter. nullopt when the value is neither.
std::optional<Duration> ParseRetryAfter(std::string_view value, Timestamp now);

}  // namespace chronoq::server
