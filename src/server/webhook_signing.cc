#include "server/webhook_signing.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace chronoq::server {
namespace {

constexpr std::string_view kField = "webhook-secrets";
constexpr std::string_view kPrefix = "whsec_";
constexpr std::string_view kLineForm = "a line is <queue or *> <whsec_...>";
// Standard Webhooks: secrets of 24 to 64 bytes.
constexpr size_t kMinKeyBytes = 24;
constexpr size_t kMaxKeyBytes = 64;

bool IsBase64Char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
}

bool IsQueueChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
         c == '-';
}

std::string Base64(const unsigned char* data, size_t size) {
  std::string out(4 * ((size + 2) / 3), '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Plural(size_t n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

}  // namespace

Result<std::string> DecodeWebhookSecret(std::string_view secret, std::string_view field) {
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(field, "a secret must be whsec_ and the base64 of " +
                                              std::to_string(kMinKeyBytes) + " to " +
                                              std::to_string(kMaxKeyBytes) +
                                              " random bytes (e.g. echo whsec_$(openssl rand "
                                              "-base64 32)); this one " +
                                              std::string(why));
  };
  if (secret.substr(0, kPrefix.size()) != kPrefix) return bad("does not start with whsec_");
  std::string_view b64 = secret.substr(kPrefix.size());
  size_t padding = 0;
  while (!b64.empty() && b64.back() == '=' && padding < 2) {
    b64.remove_suffix(1);
    ++padding;
  }
  if (b64.empty() || !std::all_of(b64.begin(), b64.end(), IsBase64Char) ||
      (b64.size() + padding) % 4 == 1 || (padding > 0 && (b64.size() + padding) % 4 != 0)) {
    return bad("is not base64");
  }
  // EVP_DecodeBlock wants whole groups of four: pad them back.
  std::string padded(b64);
  padded.append((4 - padded.size() % 4) % 4, '=');
  std::string key(padded.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(key.data()),
                                reinterpret_cast<const unsigned char*>(padded.data()),
                                static_cast<int>(padded.size()));
  if (n < 0) return bad("is not base64");
  key.resize(static_cast<size_t>(n) - (padded.size() - b64.size()));
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    return bad("holds " + Plural(key.size(), "byte"));
  }
  return key;
}

std::string WebhookSignature(const std::vector<std::string>& keys, std::string_view id,
                             int64_t timestamp, std::string_view body) {
  std::string content;
  content.reserve(id.size() + 24 + body.size());
  content.append(id).append(".").append(std::to_string(timestamp)).append(".").append(body);
  std::string out;
  for (const std::string& key : keys) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
    unsigned int size = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char*>(content.data()), content.size(), mac.data(), &size);
    if (!out.empty()) out += ' ';
    out += "v1," + Base64(mac.data(), size);
  }
  return out;
}

std::string WebhookMessageId(int64_t seq) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(seq));
  return "msg_" + std::string(hex);
}

Result<WebhookSecrets> WebhookSecrets::Parse(std::string_view text, std::string_view source) {
  WebhookSecrets set;
  CHRONOQ_RETURN_IF_ERROR(ForEachConfigLine(
      text, source, kField,
      [&](const std::vector<std::string_view>& f, int, const ConfigLineError& error) -> Status {
        if (f.size() != 2) {
          return error(std::string(f.size() == 1 ? "missing secret" : "more than two fields") +
                       " (" + std::string(kLineForm) + ")");
        }
        const std::string queue(f[0]);
        if (queue != "*" &&
            (queue.size() > 100 || !std::all_of(queue.begin(), queue.end(), IsQueueChar))) {
          return error("bad queue name (1-100 of [A-Za-z0-9_.:-], or * for every other queue)");
        }
        Result<std::string> key = DecodeWebhookSecret(f[1], kField);
        if (!key.ok()) {
          const std::string why = key.status().message();
          return error(why.substr(why.find(':') + 2));
        }
        std::vector<std::string>& keys = set.keys_[queue];
        if (std::find(keys.begin(), keys.end(), *key) != keys.end()) {
          return error("the same secret is listed twice for " + queue);
        }
        keys.push_back(*std::move(key));
        return {};
      }));
  return set;
}

const std::vector<std::string>& WebhookSecrets::KeysFor(std::string_view queue) const {
  static const std::vector<std::string> kNone;
  if (auto it = keys_.find(queue); it != keys_.end()) return it->second;
  if (auto it = keys_.find("*"); it != keys_.end()) return it->second;
  return kNone;
}

std::string WebhookSecrets::Describe() const {
  if (keys_.empty()) return "none: deliveries go unsigned";
  std::string out;
  for (const auto& [queue, keys] : keys_) {
    if (!out.empty()) out += ", ";
    out += queue + " (" + Plural(keys.size(), "secret") + ")";
  }
  return out;
}

Result<WebhookSecrets> LoadWebhookSecrets(const std::string& path) {
  CHRONOQ_ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path, kField));
  return WebhookSecrets::Parse(text, path);
}

Result<std::unique_ptr<WebhookSecretRegistry>> WebhookSecretRegistry::FromFile(
    const std::string& path) {
  CHRONOQ_ASSIGN_OR_RETURN(WebhookSecrets secrets, LoadWebhookSecrets(path));
  return std::make_unique<WebhookSecretRegistry>(std::move(secrets), path);
}

WebhookSecretRegistry::WebhookSecretRegistry(WebhookSecrets secrets, std::string path)
    : Reloadable(std::move(secrets), std::move(path), LoadWebhookSecrets,
                 "the webhook secrets come from no file (no --webhook-secrets): nothing to "
                 "reload") {}

// --- Retry-After ---------------------------------------------------------------

namespace {

std::optional<int> Month(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (size_t i = 0; i < kMonths.size(); ++i) {
    if (name == kMonths[i]) return static_cast<int>(i) + 1;
  }
  return std::nullopt;
}

// Decimal digits only (no sign), at most 10 of them.
std::optional<int64_t> Number(std::string_view digits) {
  if (digits.empty() || digits.size() > 10 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return n;
}

// An HTTP-date in any of its three forms (RFC 9110 5.6.7), as an instant:
//   IMF-fixdate  Sun, 06 Nov 1994 08:49:37 GMT
//   RFC 850      Sunday, 06-Nov-94 08:49:37 GMT
//   asctime      Sun Nov  6 08:49:37 1994
// Split at blanks, commas and dashes, the first two are the weekday, the
// day, the month, the year, the time and "GMT"; asctime has the weekday,
// the month, the day, the time and the year.
std::optional<Timestamp> ParseHttpDate(std::string_view value) {
  std::vector<std::string_view> t;
  size_t i = 0;
  while (i < value.size()) {
    while (i < value.size() && (value[i] == ' ' || value[i] == ',' || value[i] == '-')) ++i;
    const size_t start = i;
    while (i < value.size() && value[i] != ' ' && value[i] != ',' && value[i] != '-') ++i;
    if (i > start) t.push_back(value.substr(start, i - start));
  }
  std::string_view day, month, year, time;
  if (t.size() == 6 && t[5] == "GMT") {
    day = t[1], month = t[2], year = t[3], time = t[4];
  } else if (t.size() == 5) {
    month = t[1], day = t[2], time = t[3], year = t[4];
  } else {
    return std::nullopt;
  }
  const std::optional<int> m = Month(month);
  std::optional<int64_t> d = Number(day), y = Number(year), hh, mm, ss;
  if (time.size() == 8 && time[2] == ':' && time[5] == ':') {
    hh = Number(time.substr(0, 2));
    mm = Number(time.substr(3, 2));
    ss = Number(time.substr(6, 2));
  }
  if (!m || !d || !y || !hh || !mm || !ss || day.size() > 2) return std::nullopt;
  if (year.size() == 2) *y += *y >= 70 ? 1900 : 2000;  // RFC 850's two digits
  const std::chrono::year_month_day date{std::chrono::year(static_cast<int>(*y)),
                                         std::chrono::month(static_cast<unsigned>(*m)),
                                         std::chrono::day(static_cast<unsigned>(*d))};
  if (!date.ok() || *hh > 23 || *mm > 59 || *ss > 60) return std::nullopt;
  const auto since_epoch = std::chrono::sys_days(date).time_since_epoch() +
                           std::chrono::hours(*hh) + std::chrono::minutes(*mm) +
                           std::chrono::seconds(*ss);
  return Timestamp(std::chrono::duration_cast<Duration>(since_epoch));
}

}  // namespace

std::optional<Duration> ParseRetryAfter(std::string_view value, Timestamp now) {
  while (!value.empty() && IsConfigBlank(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsConfigBlank(value.back())) value.remove_suffix(1);
  Duration wait;
  const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    // More than 10 digits is more than 300 years: the cap, whatever it says.
    const std::optional<int64_t> seconds = Number(value);
    wait = seconds ? Duration(std::chrono::seconds(*seconds)) : Duration(kMaxRetryAfter);
  } else if (std::optional<Timestamp> at = ParseHttpDate(value)) {
    wait = std::max(Duration::zero(), *at - now);
  } else {
    return std::nullopt;
  }
  return std::min(wait, Duration(kMaxRetryAfter));
}

}  // namespace chronoq::server
