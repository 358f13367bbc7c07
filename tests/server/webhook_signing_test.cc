// Standard Webhooks signing against the specification's published example,
// the secrets file (parsing, per-queue and "*" secrets, reload), and
// Retry-After in each of its forms.
#include "server/webhook_signing.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chronoq/time.h"

#include "support/temp_dir.h"

namespace chronoq::server {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

// The example of the Standard Webhooks specification and its reference
// libraries: a signature that matches it is one their verifiers accept.
constexpr std::string_view kSpecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr std::string_view kSpecId = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kSpecTimestamp = 1614265330;
constexpr std::string_view kSpecBody = R"({"test": 2432232314})";
constexpr std::string_view kSpecSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

// Two more secrets of the right form (24 and 32 bytes).
constexpr std::string_view kSecretB = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
constexpr std::string_view kSecretC = "whsec_3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs=";

std::string Key(std::string_view secret) {
  Result<std::string> key = DecodeWebhookSecret(secret);
  EXPECT_TRUE(key.ok()) << key.status().ToString();
  return key.ok() ? *key : "";
}

TEST(WebhookSigningTest, ReproducesTheSpecificationsExample) {
  EXPECT_EQ(Key(kSpecSecret).size(), 24u);
  EXPECT_EQ(WebhookSignature({Key(kSpecSecret)}, kSpecId, kSpecTimestamp, kSpecBody),
            kSpecSignature);
}

TEST(WebhookSigningTest, SignsWithEverySecretSpaceSeparatedInOrder) {
  const std::string both =
      WebhookSignature({Key(kSpecSecret), Key(kSecretB)}, kSpecId, kSpecTimestamp, kSpecBody);
  EXPECT_EQ(both, std::string(kSpecSignature) + " " +
                      WebhookSignature({Key(kSecretB)}, kSpecId, kSpecTimestamp, kSpecBody));
  // Each part covers the id, the timestamp and the body.
  EXPECT_NE(WebhookSignature({Key(kSpecSecret)}, "msg_other", kSpecTimestamp, kSpecBody),
            kSpecSignature);
  EXPECT_NE(WebhookSignature({Key(kSpecSecret)}, kSpecId, kSpecTimestamp + 1, kSpecBody),
            kSpecSignature);
  EXPECT_NE(WebhookSignature({Key(kSpecSecret)}, kSpecId, kSpecTimestamp, "{}"), kSpecSignature);
  EXPECT_EQ(WebhookSignature({}, kSpecId, kSpecTimestamp, kSpecBody), "");
}

TEST(WebhookSigningTest, SecretsAreWhsecAndBase64Of24To64Bytes) {
  EXPECT_EQ(Key(kSecretC).size(), 32u);
  auto error = [](std::string_view secret) {
    Result<std::string> key = DecodeWebhookSecret(secret);
    return key.ok() ? std::string("accepted") : key.status().ToString();
  };
  EXPECT_THAT(error("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), HasSubstr("does not start with whsec_"));
  EXPECT_THAT(error("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS!"), HasSubstr("is not base64"));
  EXPECT_THAT(error("whsec_"), HasSubstr("is not base64"));
  EXPECT_THAT(error("whsec_AAAAA"), HasSubstr("is not base64"));
  EXPECT_THAT(error("whsec_c2hvcnQ="), HasSubstr("holds 5 bytes"));
  EXPECT_THAT(error("whsec_" + std::string(88, 'A')), HasSubstr("holds 66 bytes"));
  EXPECT_THAT(error("whsec_c2hvcnQ="), HasSubstr("webhook-secrets"));
}

TEST(WebhookSigningTest, MessageIdsAreTheRowNumberInHex) {
  EXPECT_EQ(WebhookMessageId(0x0193a4c5e6f70001), "msg_0193a4c5e6f70001");
  EXPECT_EQ(WebhookMessageId(1), "msg_0000000000000001");
}

TEST(WebhookSecretsTest, AQueueUsesItsOwnLinesElseTheStarLines) {
  const std::string text =
      "# queue secret\n"
      "*        " +
      std::string(kSpecSecret) +
      "\n\n"
      "billing  " +
      std::string(kSecretB) +
      "\n"
      "billing\t" +
      std::string(kSecretC) + "   # rotation\n";
  // A comment after the fields is a third field: refused (below); so the
  // file the test parses has none.
  const std::string clean = text.substr(0, text.find("   # rotation")) + "\n";
  Result<WebhookSecrets> secrets = WebhookSecrets::Parse(clean, "secrets.txt");
  ASSERT_TRUE(secrets.ok()) << secrets.status().ToString();
  EXPECT_EQ(secrets->KeysFor("billing"), (std::vector<std::string>{Key(kSecretB), Key(kSecretC)}));
  EXPECT_EQ(secrets->KeysFor("emails"), std::vector<std::string>{Key(kSpecSecret)});
  EXPECT_EQ(secrets->Describe(), "* (1 secret), billing (2 secrets)");

  Result<WebhookSecrets> only = WebhookSecrets::Parse("billing " + std::string(kSecretB), "f");
  ASSERT_TRUE(only.ok());
  EXPECT_TRUE(only->KeysFor("emails").empty());
  Result<WebhookSecrets> none = WebhookSecrets::Parse("# nothing yet\n", "f");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->KeysFor("billing").empty());
  EXPECT_THAT(none->Describe(), HasSubstr("unsigned"));
}

TEST(WebhookSecretsTest, ABadLineIsRefusedNamingItsLineAndNeverTheSecret) {
  auto error = [](const std::string& text) {
    Result<WebhookSecrets> s = WebhookSecrets::Parse(text, "s.txt");
    return s.ok() ? std::string("accepted") : s.status().ToString();
  };
  EXPECT_THAT(error("# c\nbilling\n"), HasSubstr("s.txt:2: missing secret"));
  EXPECT_THAT(error("billing " + std::string(kSecretB) + " extra"),
              HasSubstr("s.txt:1: more than two fields"));
  EXPECT_THAT(error("bill/ing " + std::string(kSecretB)), HasSubstr("s.txt:1: bad queue name"));
  EXPECT_THAT(error("billing whsec_c2hvcnQ="), HasSubstr("s.txt:1: a secret must be whsec_"));
  const std::string twice = "q " + std::string(kSecretB) + "\nq " + std::string(kSecretB) + "\n";
  EXPECT_THAT(error(twice), HasSubstr("s.txt:2: the same secret is listed twice for q"));
  EXPECT_THAT(error(twice), Not(HasSubstr(kSecretB.substr(6))));
  EXPECT_THAT(error("billing whsec_c2hvcnQ="), HasSubstr("webhook-secrets"));
}

TEST(WebhookSecretsTest, ReloadSwapsInANewFileAndKeepsTheOldOneOnAnError) {
  test::TempDir dir;
  const std::string path = dir.File("secrets");
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("* " + std::string(kSpecSecret) + "\n");
  Result<std::unique_ptr<WebhookSecretRegistry>> registry = WebhookSecretRegistry::FromFile(path);
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  const std::shared_ptr<const WebhookSecrets> before = (*registry)->Current();

  // Rotation: the new secret is added beside the old one...
  write("* " + std::string(kSpecSecret) + "\n* " + std::string(kSecretB) + "\n");
  ASSERT_TRUE((*registry)->Reload().ok());
  EXPECT_EQ((*registry)->Current()->KeysFor("q").size(), 2u);
  // ...a broken file changes nothing...
  write("* not-a-secret\n");
  Result<std::shared_ptr<const WebhookSecrets>> bad = (*registry)->Reload();
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(path + ":1:"));
  EXPECT_EQ((*registry)->Current()->KeysFor("q").size(), 2u);
  // ...and the old one goes once every receiver has the new one.
  write("* " + std::string(kSecretB) + "\n");
  ASSERT_TRUE((*registry)->Reload().ok());
  EXPECT_EQ((*registry)->Current()->KeysFor("q"), std::vector<std::string>{Key(kSecretB)});
  // A caller that held the first set still has it.
  EXPECT_EQ(before->KeysFor("q"), std::vector<std::string>{Key(kSpecSecret)});

  EXPECT_FALSE(WebhookSecretRegistry::FromFile(dir.File("missing")).ok());
  WebhookSecretRegistry fixed(WebhookSecrets{});
  EXPECT_EQ(fixed.Reload().status().code(), StatusCode::kFailedPrecondition);
}

TEST(RetryAfterTest, SecondsOrAnHttpDateInAnyOfItsThreeForms) {
  const Timestamp now = *ParseTime("1994-11-06T08:49:00Z");
  EXPECT_EQ(ParseRetryAfter("120", now), Duration(120s));
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), Duration(0s));
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now), Duration(37s));
  EXPECT_EQ(ParseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now), Duration(37s));
  EXPECT_EQ(ParseRetryAfter("Sun Nov  6 08:49:37 1994", now), Duration(37s));
  EXPECT_EQ(ParseRetryAfter("Mon, 07 Nov 1994 08:49:00 GMT", now), Duration(24h));
  // A date in the past asks for no wait.
  EXPECT_EQ(ParseRetryAfter("Sat, 05 Nov 1994 08:49:37 GMT", now), Duration(0s));
}

TEST(RetryAfterTest, ALongWaitIsCutToTheCapAndGarbageIsNoWait) {
  const Timestamp now = *ParseTime("2026-11-27T00:00:00Z");
  EXPECT_EQ(ParseRetryAfter("86401", now), kMaxRetryAfter);
  EXPECT_EQ(ParseRetryAfter("99999999999999999999", now), kMaxRetryAfter);
  EXPECT_EQ(ParseRetryAfter("Fri, 01 Jan 2100 00:00:00 GMT", now), kMaxRetryAfter);
  for (std::string_view bad : {"", "-1", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 CET",
                               "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
                               "Sun Nov  6 08:49:37 1994 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                               "Sun, 06 Nov 1994 08:49 GMT", "Sun, 1994 Nov 06 08:49:37 GMT"}) {
    EXPECT_EQ(ParseRetryAfter(bad, now), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace chronoq::server
