#include "core/validate.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "chronoq/task.h"

#include "codec/json_codec.h"

namespace chronoq {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// 2026-11-22T00:00:00Z.
constexpr Timestamp kNow = Timestamp(seconds(1'795'305'600));
constexpr int kDefaultMaxAttempts = 25;

TaskSpec GoodSpec() {
  TaskSpec spec;
  spec.queue = "email.send";
  spec.payload = R"({"to":"a@example.com"})";
  return spec;
}

// Validates `spec` expecting InvalidArgument naming `field`.
void ExpectRejected(const TaskSpec& spec, const std::string& field,
                    const std::string& prefix = "") {
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts, prefix);
  ASSERT_FALSE(r.ok()) << "accepted; expected an error on " << field;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), field) << r.status().ToString();
}

TEST(ValidateTaskSpecTest, MinimalSpecIsDueNowWithDefaults) {
  TaskSpec spec;
  spec.queue = "q";
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->queue, "q");
  EXPECT_EQ(r->payload, "{}");
  EXPECT_EQ(r->due, kNow);
  EXPECT_FALSE(r->name.has_value());
  EXPECT_EQ(r->on_conflict, OnConflict::kReject);
  EXPECT_EQ(r->max_attempts, kDefaultMaxAttempts);
  EXPECT_EQ(r->priority, 0);
  EXPECT_FALSE(r->backoff.has_value());
}

TEST(ValidateTaskSpecTest, MaxAttemptsZeroTakesTheGivenDefault) {
  TaskSpec spec = GoodSpec();
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, 7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_attempts, 7);
}

TEST(ValidateTaskSpecTest, CopiesEveryField) {
  TaskSpec spec = GoodSpec();
  spec.id = "share:42";
  spec.on_conflict = OnConflict::kReplace;
  spec.max_attempts = 3;
  spec.priority = -5;
  spec.backoff = Backoff{seconds(2), seconds(60)};
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->queue, "email.send");
  EXPECT_EQ(r->payload, R"({"to":"a@example.com"})");
  ASSERT_TRUE(r->name.has_value());
  EXPECT_EQ(*r->name, "share:42");
  EXPECT_EQ(r->on_conflict, OnConflict::kReplace);
  EXPECT_EQ(r->max_attempts, 3);
  EXPECT_EQ(r->priority, -5);
  ASSERT_TRUE(r->backoff.has_value());
  EXPECT_EQ(r->backoff->base, seconds(2));
  EXPECT_EQ(r->backoff->cap, seconds(60));
}

TEST(ValidateTaskSpecTest, DelayResolvesToNowPlusDelay) {
  TaskSpec spec = GoodSpec();
  spec.delay = milliseconds(1500);
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->due, kNow + milliseconds(1500));
}

TEST(ValidateTaskSpecTest, ZeroDelayIsNow) {
  TaskSpec spec = GoodSpec();
  spec.delay = Duration::zero();
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->due, kNow);
}

TEST(ValidateTaskSpecTest, DelayOfExactlyOneHundredYearsIsAllowed) {
  TaskSpec spec = GoodSpec();
  spec.delay = kMaxDelay;
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->due, kNow + kMaxDelay);
}

TEST(ValidateTaskSpecTest, RunAtIsKept) {
  TaskSpec spec = GoodSpec();
  spec.run_at = kNow + hours(3);
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->due, kNow + hours(3));
}

TEST(ValidateTaskSpecTest, RunAtInThePastIsAllowed) {
  TaskSpec spec = GoodSpec();
  spec.run_at = Timestamp();  // the epoch itself
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->due, Timestamp());
}

TEST(ValidateTaskSpecTest, RejectsEmptyQueue) {
  TaskSpec spec = GoodSpec();
  spec.queue = "";
  ExpectRejected(spec, "queue");
}

TEST(ValidateTaskSpecTest, QueueNameLengthLimit) {
  TaskSpec spec = GoodSpec();
  spec.queue = std::string(kMaxQueueNameBytes, 'q');
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
  spec.queue = std::string(kMaxQueueNameBytes + 1, 'q');
  ExpectRejected(spec, "queue");
}

TEST(ValidateTaskSpecTest, QueueNameCharacters) {
  TaskSpec spec = GoodSpec();
  spec.queue = "Az09_-.:";
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
  for (const char* bad : {"has space", "slash/queue", "star*", "t\xc3\xa4sks", "tab\t", "a,b"}) {
    SCOPED_TRACE(bad);
    spec.queue = bad;
    ExpectRejected(spec, "queue");
  }
}

TEST(ValidateTaskSpecTest, RejectsPayloadThatIsNotJson) {
  TaskSpec spec = GoodSpec();
  for (const char* bad : {"", "{", "{'a':1}", "not json", "{\"a\":1} trailing"}) {
    SCOPED_TRACE(bad);
    spec.payload = bad;
    ExpectRejected(spec, "payload");
  }
}

TEST(ValidateTaskSpecTest, AnyJsonValueIsAPayload) {
  TaskSpec spec = GoodSpec();
  for (const char* ok : {"{}", "[]", "42", "\"text\"", "null", " {\"a\": [1, 2]} "}) {
    SCOPED_TRACE(ok);
    spec.payload = ok;
    EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
  }
}

// A JSON string literal of exactly `size` bytes.
std::string JsonStringOfSize(size_t size) { return "\"" + std::string(size - 2, 'x') + "\""; }

TEST(ValidateTaskSpecTest, PayloadSizeLimit) {
  TaskSpec spec = GoodSpec();
  spec.payload = JsonStringOfSize(kMaxPayloadBytes);
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
  spec.payload = JsonStringOfSize(kMaxPayloadBytes + 1);
  ExpectRejected(spec, "payload");
}

TEST(ValidateTaskSpecTest, RejectsRunAtAndDelayTogether) {
  TaskSpec spec = GoodSpec();
  spec.run_at = kNow + hours(1);
  spec.delay = hours(1);
  ExpectRejected(spec, "delay_ms");
}

TEST(ValidateTaskSpecTest, RejectsNegativeDelay) {
  TaskSpec spec = GoodSpec();
  spec.delay = Duration(-1);
  ExpectRejected(spec, "delay_ms");
}

TEST(ValidateTaskSpecTest, RejectsDelayOverOneHundredYears) {
  TaskSpec spec = GoodSpec();
  spec.delay = kMaxDelay + Duration(1);
  ExpectRejected(spec, "delay_ms");
}

TEST(ValidateTaskSpecTest, RejectsRunAtBefore1970) {
  TaskSpec spec = GoodSpec();
  spec.run_at = Timestamp() - Duration(1);
  ExpectRejected(spec, "run_at");
}

TEST(ValidateTaskSpecTest, RejectsRunAtMoreThanOneHundredYearsAhead) {
  TaskSpec spec = GoodSpec();
  spec.run_at = kNow + kMaxDelay;
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
  spec.run_at = kNow + kMaxDelay + Duration(1);
  ExpectRejected(spec, "run_at");
}

TEST(ValidateTaskSpecTest, EmptyIdMeansGenerated) {
  TaskSpec spec = GoodSpec();
  spec.id = "";
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->name.has_value());
}

TEST(ValidateTaskSpecTest, IdLengthLimit) {
  TaskSpec spec = GoodSpec();
  spec.id = std::string(kMaxIdBytes, 'i');
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
  spec.id = std::string(kMaxIdBytes + 1, 'i');
  ExpectRejected(spec, "id");
}

TEST(ValidateTaskSpecTest, RejectsIdStartingWithUnderscore) {
  TaskSpec spec = GoodSpec();
  spec.id = "_0000000000000001";
  ExpectRejected(spec, "id");
  spec.id = "a_b";  // only the first byte is reserved
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
}

TEST(ValidateTaskSpecTest, AcceptsMultibyteUtf8Ids) {
  TaskSpec spec = GoodSpec();
  for (const char* ok : {"caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "emoji-\xf0\x9f\x98\x80",
                         "max-\xf4\x8f\xbf\xbf", "spaces are fine"}) {
    SCOPED_TRACE(ok);
    spec.id = ok;
    EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
  }
}

TEST(ValidateTaskSpecTest, RejectsInvalidUtf8Ids) {
  TaskSpec spec = GoodSpec();
  for (const char* bad : {
           "\xff",              // never valid
           "a\x80",             // lone continuation byte
           "caf\xc3",           // truncated sequence
           "\xc3\x28",          // bad continuation
           "\xc0\xaf",          // overlong '/'
           "\xe0\x80\xaf",      // overlong
           "\xed\xa0\x80",      // surrogate U+D800
           "\xf4\x90\x80\x80",  // past U+10FFFF
           "\xf8\x88\x80\x80\x80",
       }) {
    SCOPED_TRACE(testing::PrintToString(std::string(bad)));
    spec.id = bad;
    ExpectRejected(spec, "id");
  }
}

TEST(ValidateTaskSpecTest, RejectsControlCharactersInIds) {
  TaskSpec spec = GoodSpec();
  for (const std::string& bad : {std::string("a\nb"), std::string("a\tb"), std::string("a\x7f"),
                                 std::string("a\x1f"), std::string("a\0b", 3)}) {
    SCOPED_TRACE(testing::PrintToString(bad));
    spec.id = bad;
    ExpectRejected(spec, "id");
  }
}

TEST(ValidateTaskSpecTest, RejectsC1ControlCharactersInIds) {
  // U+0080..U+009F are control characters too (Unicode category Cc); U+0085
  // (NEL) is a line break. They are valid UTF-8, so only the control check
  // can catch them.
  TaskSpec spec = GoodSpec();
  for (const char* bad : {"a\xc2\x80", "a\xc2\x85", "\xc2\x9f-x"}) {
    SCOPED_TRACE(testing::PrintToString(std::string(bad)));
    spec.id = bad;
    ExpectRejected(spec, "id");
  }
  spec.id = "a\xc2\xa0-b";  // U+00A0 (no-break space) is not a control character
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
}

TEST(ValidateTaskSpecTest, MaxAttemptsRange) {
  TaskSpec spec = GoodSpec();
  spec.max_attempts = -1;
  ExpectRejected(spec, "max_attempts");
  spec.max_attempts = kMaxAttemptsLimit + 1;
  ExpectRejected(spec, "max_attempts");

  spec.max_attempts = 1;
  Result<ValidTask> one = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->max_attempts, 1);
  spec.max_attempts = kMaxAttemptsLimit;
  Result<ValidTask> most = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->max_attempts, kMaxAttemptsLimit);
}

TEST(ValidateTaskSpecTest, RejectsNonPositiveBackoffBase) {
  TaskSpec spec = GoodSpec();
  spec.backoff = Backoff{Duration::zero(), seconds(10)};
  ExpectRejected(spec, "backoff.base_ms");
  spec.backoff = Backoff{Duration(-1), seconds(10)};
  ExpectRejected(spec, "backoff.base_ms");
}

TEST(ValidateTaskSpecTest, RejectsBackoffCapBelowBase) {
  TaskSpec spec = GoodSpec();
  spec.backoff = Backoff{seconds(10), seconds(9)};
  ExpectRejected(spec, "backoff.cap_ms");
  spec.backoff = Backoff{seconds(10), seconds(10)};  // equal is fine
  EXPECT_TRUE(ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts).ok());
}

TEST(ValidateTaskSpecTest, RejectsBackoffCapOverOneHundredYears) {
  TaskSpec spec = GoodSpec();
  spec.backoff = Backoff{seconds(1), kMaxDelay + Duration(1)};
  ExpectRejected(spec, "backoff.cap_ms");
}

TEST(ValidateTaskSpecTest, PrefixIsPrependedToEveryField) {
  const std::string prefix = "tasks[3].";
  TaskSpec spec = GoodSpec();
  spec.queue = "";
  ExpectRejected(spec, "tasks[3].queue", prefix);

  spec = GoodSpec();
  spec.payload = "{";
  ExpectRejected(spec, "tasks[3].payload", prefix);

  spec = GoodSpec();
  spec.delay = Duration(-1);
  ExpectRejected(spec, "tasks[3].delay_ms", prefix);

  spec = GoodSpec();
  spec.run_at = Timestamp() - seconds(1);
  ExpectRejected(spec, "tasks[3].run_at", prefix);

  spec = GoodSpec();
  spec.id = "_x";
  ExpectRejected(spec, "tasks[3].id", prefix);

  spec = GoodSpec();
  spec.max_attempts = 1001;
  ExpectRejected(spec, "tasks[3].max_attempts", prefix);

  spec = GoodSpec();
  spec.backoff = Backoff{Duration::zero(), seconds(1)};
  ExpectRejected(spec, "tasks[3].backoff.base_ms", prefix);

  spec = GoodSpec();
  spec.backoff = Backoff{seconds(2), seconds(1)};
  ExpectRejected(spec, "tasks[3].backoff.cap_ms", prefix);
}

TEST(ValidateTaskSpecTest, PrefixedMessageStartsWithTheFullField) {
  TaskSpec spec = GoodSpec();
  spec.max_attempts = -1;
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts, "tasks[3].");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("tasks[3].max_attempts: ", 0), 0u) << r.status().message();
}

TEST(ValidateFieldsTest, DefaultFieldNames) {
  EXPECT_EQ(ValidateQueueName("").field(), "queue");
  EXPECT_EQ(ValidateTaskId("").field(), "id");
  EXPECT_EQ(ValidateTaskId("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePayload("{").field(), "payload");
  EXPECT_EQ(ValidateDue(Timestamp() - Duration(1), kNow).field(), "run_at");
  EXPECT_EQ(ValidateLease(Duration::zero()).field(), "lease_ms");
}

TEST(ValidateFieldsTest, ValidInputsPass) {
  EXPECT_TRUE(ValidateQueueName("jobs:high-priority.v2").ok());
  EXPECT_TRUE(ValidateTaskId("share:42").ok());
  EXPECT_TRUE(ValidatePayload(R"({"a":[1,2,3]})").ok());
  EXPECT_TRUE(ValidateDue(kNow, kNow).ok());
  EXPECT_TRUE(ValidateDue(Timestamp(), kNow).ok());
}

TEST(ValidateFieldsTest, ValidateDueUpperBoundIsRelativeToNow) {
  EXPECT_TRUE(ValidateDue(kNow + kMaxDelay, kNow).ok());
  const Status s = ValidateDue(kNow + kMaxDelay + Duration(1), kNow, "when");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "when");
}

TEST(ValidateLeaseTest, Bounds) {
  const Status zero = ValidateLease(Duration::zero());
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.field(), "lease_ms");

  const Status below = ValidateLease(milliseconds(1) - Duration(1), "claim.lease");
  EXPECT_EQ(below.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(below.field(), "claim.lease");

  EXPECT_TRUE(ValidateLease(milliseconds(1)).ok());
  EXPECT_TRUE(ValidateLease(seconds(30)).ok());
  EXPECT_TRUE(ValidateLease(hours(24 * 7)).ok());

  const Status above = ValidateLease(hours(24 * 7) + Duration(1));
  EXPECT_EQ(above.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(above.field(), "lease_ms");

  const Status negative = ValidateLease(seconds(-5));
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument);
}

TEST(TruncateUtf8Test, ShortTextIsUnchanged) {
  EXPECT_EQ(TruncateUtf8("hello", 5), "hello");
  EXPECT_EQ(TruncateUtf8("hello", 100), "hello");
  EXPECT_EQ(TruncateUtf8("", 0), "");
}

TEST(TruncateUtf8Test, CutsAsciiAtTheLimit) {
  EXPECT_EQ(TruncateUtf8("hello", 3), "hel");
  EXPECT_EQ(TruncateUtf8("hello", 0), "");
}

TEST(TruncateUtf8Test, NeverSplitsAMultibyteSequence) {
  // "a" + U+00E9 (2 bytes) + U+65E5 (3 bytes) + U+1F600 (4 bytes) + "z".
  const std::string text = "a\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80z";
  ASSERT_EQ(text.size(), 11u);
  const std::string want[] = {
      "",                                       // 0
      "a",                                      // 1
      "a",                                      // 2: would split U+00E9
      "a\xc3\xa9",                              // 3
      "a\xc3\xa9",                              // 4
      "a\xc3\xa9",                              // 5
      "a\xc3\xa9\xe6\x97\xa5",                  // 6
      "a\xc3\xa9\xe6\x97\xa5",                  // 7
      "a\xc3\xa9\xe6\x97\xa5",                  // 8
      "a\xc3\xa9\xe6\x97\xa5",                  // 9
      "a\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80",  // 10
      text,                                     // 11
  };
  for (size_t max = 0; max <= text.size(); ++max) {
    EXPECT_EQ(TruncateUtf8(text, max), want[max]) << "max=" << max;
  }
}

TEST(TruncateUtf8Test, ResultIsAlwaysValidAndWithinTheLimit) {
  const std::string text = "\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5";  // 4 x 3 bytes
  for (size_t max = 0; max <= text.size() + 1; ++max) {
    const std::string cut = TruncateUtf8(text, max);
    EXPECT_LE(cut.size(), max);
    EXPECT_EQ(cut.size() % 3, 0u) << "max=" << max;
    EXPECT_EQ(text.compare(0, cut.size(), cut), 0);
    EXPECT_GE(cut.size() + 2, std::min(max, text.size())) << "cut more than needed";
  }
}

// --- webhook targets ---------------------------------------------------------

WebhookTarget GoodTarget() {
  WebhookTarget t;
  t.url = "https://hooks.example.com/expire?share=42";
  return t;
}

void ExpectTargetRejected(const WebhookTarget& t, const std::string& field) {
  Status s = ValidateTarget(t);
  ASSERT_FALSE(s.ok()) << "accepted; expected an error on " << field;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), field) << s.ToString();
}

TEST(ValidateTargetTest, AcceptsGoodTargetsAndTheLimits) {
  EXPECT_TRUE(ValidateTarget(GoodTarget()).ok());
  WebhookTarget t = GoodTarget();
  t.url = "HTTP://h:8080/" + std::string(2048 - 14, 'a');
  ASSERT_EQ(t.url.size(), 2048u);
  for (const char* m : {"POST", "PUT", "PATCH", "GET", "DELETE"}) {
    t.method = m;
    EXPECT_TRUE(ValidateTarget(t).ok()) << m;
  }
  for (int i = 0; i < 32; ++i) t.headers.emplace_back("X-H" + std::to_string(i), "v\tw é");
  t.headers.back().first = "!#$%&'*+-.^_`|~";  // every token character
  t.timeout = milliseconds(1);
  EXPECT_TRUE(ValidateTarget(t).ok()) << ValidateTarget(t).ToString();
  t.timeout = std::chrono::minutes(5);
  EXPECT_TRUE(ValidateTarget(t).ok());
}

TEST(ValidateTargetTest, RejectsBadUrls) {
  for (const std::string& url :
       {std::string(), std::string("ftp://h/"), std::string("example.com/x"),
        std::string("https://"), std::string("https:///path"), std::string("http://h/a b"),
        std::string("http://h/\r\nX: 1"), std::string("http://h/caf\xc3\xa9"),
        "http://h/" + std::string(2040, 'a')}) {
    WebhookTarget t = GoodTarget();
    t.url = url;
    ExpectTargetRejected(t, "target.url");
  }
}

TEST(ValidateTargetTest, RejectsOtherMethods) {
  for (const char* m : {"post", "OPTIONS", "", "POST "}) {
    WebhookTarget t = GoodTarget();
    t.method = m;
    ExpectTargetRejected(t, "target.method");
  }
}

TEST(ValidateTargetTest, RejectsBadHeadersByIndex) {
  WebhookTarget t = GoodTarget();
  for (int i = 0; i < 33; ++i) t.headers.emplace_back("X-H", "v");
  ExpectTargetRejected(t, "target.headers");

  for (const char* name : {"", "Bad Name", "X:Y", "X\r\nY", "Caf\xc3\xa9"}) {
    WebhookTarget h = GoodTarget();
    h.headers = {{"Ok", "1"}, {"Ok-Too", "2"}, {name, "3"}};
    ExpectTargetRejected(h, "target.headers[2].name");
  }
  for (const std::string& value :
       {std::string("a\r\nX-Injected: 1"), std::string("a\nb"), std::string("a\rb"),
        std::string("a\0b", 3), std::string("\xff"), std::string(8193, 'v')}) {
    WebhookTarget h = GoodTarget();
    h.headers = {{"X-V", value}};
    ExpectTargetRejected(h, "target.headers[0].value");
  }
}

TEST(ValidateTargetTest, TimeoutBounds) {
  // 1500 µs: the stored (API) form counts whole milliseconds.
  for (Duration d :
       {Duration::zero(), Duration(999), std::chrono::minutes(5) + Duration(1), Duration(1500)}) {
    WebhookTarget t = GoodTarget();
    t.timeout = d;
    ExpectTargetRejected(t, "target.timeout_ms");
  }
}

TEST(ValidateTargetTest, SpecErrorsCarryThePrefix) {
  TaskSpec spec = GoodSpec();
  spec.target = GoodTarget();
  spec.target->headers = {{"A B", "x"}};
  ExpectRejected(spec, "tasks[4].target.headers[0].name", "tasks[4].");
}

TEST(ValidateTargetTest, ValidSpecStoresTheEncodedTarget) {
  TaskSpec spec = GoodSpec();
  Result<ValidTask> none = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->target.has_value());
  spec.target = GoodTarget();
  Result<ValidTask> r = ValidateTaskSpec(spec, kNow, kDefaultMaxAttempts);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->target.has_value());
  Result<WebhookTarget> stored = DecodeTarget(*r->target);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, spec.target);
}

// --- queue settings ------------------------------------------------------------

TEST(ValidateQueueSettingsTest, UnsetIsValid) { EXPECT_TRUE(ValidateQueueSettings({}).ok()); }

TEST(ValidateQueueSettingsTest, BoundsNameTheirField) {
  struct Case {
    QueueSettings settings;
    const char* field;  // nullptr: valid
  };
  const Case cases[] = {
      {{.concurrency = 1}, nullptr},
      {{.concurrency = 100'000}, nullptr},
      {{.concurrency = 0}, "concurrency"},
      {{.concurrency = -5}, "concurrency"},
      {{.concurrency = 100'001}, "concurrency"},
      {{.max_attempts = 1}, nullptr},
      {{.max_attempts = 1000}, nullptr},
      {{.max_attempts = 0}, "max_attempts"},
      {{.max_attempts = 1001}, "max_attempts"},
      {{.backoff = Backoff{milliseconds(1), milliseconds(1)}}, nullptr},
      {{.backoff = Backoff{seconds(1), hours(24 * 7)}}, nullptr},
      {{.backoff = Backoff{Duration(999), seconds(1)}}, "backoff.base_ms"},
      {{.backoff = Backoff{seconds(2), seconds(1)}}, "backoff.cap_ms"},
      {{.backoff = Backoff{seconds(1), hours(24 * 7) + Duration(1)}}, "backoff.cap_ms"},
      {{.retention = Duration::zero()}, nullptr},
      {{.retention = hours(24 * 3650)}, nullptr},
      {{.retention = Duration(-1)}, "retention_ms"},
      {{.retention = hours(24 * 3650) + Duration(1)}, "retention_ms"},
  };
  for (const Case& c : cases) {
    Status s = ValidateQueueSettings(c.settings);
    if (c.field == nullptr) {
      EXPECT_TRUE(s.ok()) << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
      EXPECT_EQ(s.field(), c.field) << s.ToString();
    }
  }
}

TEST(ValidateScheduleSpecTest, TimesAreWholeMilliseconds) {
  ScheduleSpec every;
  every.name = "tick";
  every.queue = "q";
  every.every = std::chrono::microseconds(1500);
  EXPECT_EQ(ValidateScheduleSpec(every, kNow).status().field(), "every_ms");
  every.every = std::chrono::milliseconds(2);
  every.start = kNow + std::chrono::microseconds(1);
  EXPECT_EQ(ValidateScheduleSpec(every, kNow).status().field(), "start");
  every.start = kNow + std::chrono::milliseconds(1);
  EXPECT_TRUE(ValidateScheduleSpec(every, kNow).ok());
}

TEST(ValidateScheduleSpecTest, NormalisesPayloadAndZone) {
  ScheduleSpec s;
  s.name = "nightly";
  s.queue = "q";
  s.cron = "0 3 * * *";
  s.payload = R"( { "b" : 1, "a" : [ 2 ] } )";
  Result<ScheduleSpec> v = ValidateScheduleSpec(s, kNow);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->tz, "UTC");
  EXPECT_EQ(v->payload, R"({"b":1,"a":[2]})");  // compact, order kept
  EXPECT_FALSE(v->start.has_value());

  ScheduleSpec every;
  every.name = "tick";
  every.queue = "q";
  every.every = std::chrono::seconds(30);
  v = ValidateScheduleSpec(every, kNow);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->start.has_value());  // the engine loop anchors it when saving
}

}  // namespace
}  // namespace chronoq
