// The wire format: strict reading (types, ranges, unknown fields, nesting)
// and hand-written output that must be valid JSON.
#include "codec/json_codec.h"

#include <random>

#include <gtest/gtest.h>

#include "chronoq/time.h"

namespace chronoq {
namespace {

TEST(JsonCodecTest, BodyMustBeAnObjectOfBoundedDepth) {
  EXPECT_TRUE(ParseBody(R"({"a":[[[1]]]})").ok());
  EXPECT_EQ(ParseBody("[1]").status().field(), "body");
  EXPECT_EQ(ParseBody("{").status().field(), "body");
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_EQ(ParseBody(R"({"a":)" + deep + "}").status().field(), "body");
  // Brackets inside strings, escaped quotes included, do not count.
  const std::string text = R"({"a":"[[[[\"[[[[)" + std::string(100, '[') + R"("})";
  EXPECT_TRUE(ParseBody(text).ok());
}

TEST(JsonCodecTest, ReaderChecksTypesRepresentabilityAndUnknownFields) {
  Json j = Json::parse(R"({"n":5,"s":"hi","t":"2026-11-22T03:00:00Z","x":1})");
  ObjectReader r(j, "tasks[2].");
  std::optional<int64_t> n;
  std::optional<std::string> s;
  std::optional<Timestamp> t;
  EXPECT_EQ(r.Int("n", n, 6, 9).field(), "tasks[2].n");
  EXPECT_FALSE(n.has_value());
  EXPECT_TRUE(r.String("s", s).ok());
  EXPECT_EQ(*s, "hi");
  EXPECT_TRUE(r.Time("t", t).ok());
  EXPECT_EQ(FormatTime(*t), "2026-11-22T03:00:00.000Z");
  EXPECT_EQ(r.Finish().field(), "tasks[2].x");
  EXPECT_EQ(r.Required("missing").field(), "tasks[2].missing");
  // An int field takes what an int holds; its rules are the engine's.
  Json big = Json::parse(R"({"i":2147483648,"ms":9223372036854776,"neg":-5})");
  ObjectReader b(big);
  std::optional<int> i;
  std::optional<Duration> ms, neg;
  EXPECT_EQ(b.Int("i", i).field(), "i");
  EXPECT_EQ(b.Millis("ms", ms).field(), "ms");
  EXPECT_TRUE(b.Millis("neg", neg).ok());
  EXPECT_EQ(*neg, std::chrono::milliseconds(-5));
}

TEST(JsonCodecTest, AGivenZeroCannotStandForTheDefault) {
  // 0 max_attempts means "not given" to the engine.
  Result<TaskSpec> zero = ParseTaskSpec(Json::parse(R"({"queue":"q","max_attempts":0})"), "");
  EXPECT_EQ(zero.status().field(), "max_attempts");
  // Ranges are left to the engine: a huge one passes through.
  Result<TaskSpec> huge = ParseTaskSpec(Json::parse(R"({"queue":"q","max_attempts":5000})"), "");
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_EQ(huge->max_attempts, 5000);
}

TEST(JsonCodecTest, StringsAreEscaped) {
  std::string out;
  AppendString(out, "a\"b\\c\n\x01é");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001é\"");
  EXPECT_EQ(Json::parse(out).get<std::string>(), "a\"b\\c\n\x01é");
}

// Plain runs are appended whole: whatever mix of plain and escaped bytes,
// valid UTF-8 reads back as it was.
TEST(JsonCodecTest, AnyMixOfPlainAndEscapedBytesReadsBack) {
  std::mt19937 rng(19);
  const std::vector<std::string> pieces = {
      "a",        "plain run ",       "\"", "\\", "\n", "\x01", "\x7f",
      "\xc3\xa9", "\xf0\x9f\x98\x80", "\t", "/",  ""};
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (int k = static_cast<int>(rng() % 8); k > 0; --k) text += pieces[rng() % pieces.size()];
    std::string out = "x";
    AppendString(out, text);
    ASSERT_EQ(out.substr(0, 2), "x\"");
    EXPECT_EQ(Json::parse(out.substr(1)).get<std::string>(), text);
  }
}

// Found by tests/fuzz/fuzz_http_request: GET /v1/tasks/%FF answered 404 with
// the id's byte 0xFF inside the message, a body no JSON parser accepts.
TEST(JsonCodecTest, StringsThatAreNotUtf8StillMakeJson) {
  std::string out;
  AppendString(out, "task \xff\xc3 \xed\xa0\x80 \xf0\x9f\x98\x80 \xc3\xa9");
  EXPECT_EQ(out, "\"task \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \xf0\x9f\x98\x80 \xc3\xa9\"");
  EXPECT_EQ(Json::parse(out).get<std::string>(),
            "task \ufffd\ufffd \ufffd\ufffd\ufffd \U0001F600 \u00e9");
  std::string error = ErrorBody("not_found", Status::NotFound("task \xff does not exist"));
  EXPECT_TRUE(Json::accept(error)) << error;
}

TEST(JsonCodecTest, TasksAndLeasesAreValidJson) {
  Task t;
  t.id = "share:\"42\"";
  t.queue = "q";
  t.payload = R"({"k":[1,2]})";
  t.last_error = "bad\nthing";
  t.lease_until = Timestamp(std::chrono::seconds(10));
  std::string out;
  AppendArray(out, std::vector<Task>{t, t}, AppendTask);
  Json j = Json::parse(out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["id"], "share:\"42\"");
  EXPECT_EQ(j[0]["payload"]["k"][1], 2);
  EXPECT_EQ(j[0]["last_error"], "bad\nthing");
  EXPECT_EQ(j[0]["lease_until"], "1970-01-01T00:00:10.000Z");

  Lease l;
  l.id = "x";
  l.payload = "null";
  l.token = 18446744073709551615u;
  out.clear();
  AppendLease(out, l);
  EXPECT_EQ(Json::parse(out)["token"].get<uint64_t>(), 18446744073709551615u);
}

TEST(JsonCodecTest, TasksAndLeasesShowTheirKeyOrNull) {
  Task t;
  t.id = "a";
  t.payload = "{}";
  std::string out;
  AppendTask(out, t);
  EXPECT_TRUE(Json::parse(out).at("key").is_null()) << out;
  t.key = "user:\"7\"";
  out.clear();
  AppendTask(out, t);
  EXPECT_EQ(Json::parse(out).at("key"), "user:\"7\"");

  Lease l;
  l.id = "a";
  l.payload = "{}";
  out.clear();
  AppendLease(out, l);
  EXPECT_TRUE(Json::parse(out).at("key").is_null()) << out;
  l.key = "k";
  out.clear();
  AppendLease(out, l);
  EXPECT_EQ(Json::parse(out).at("key"), "k");
}

TEST(JsonCodecTest, TaskSpecReadsTheKey) {
  Result<TaskSpec> spec = ParseTaskSpec(Json::parse(R"({"queue":"q","key":"user:7"})"), "");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->key, "user:7");
  spec = ParseTaskSpec(Json::parse(R"({"queue":"q","key":null})"), "");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->key, "");
  EXPECT_EQ(ParseTaskSpec(Json::parse(R"({"queue":"q","key":""})"), "tasks[2].").status().field(),
            "tasks[2].key");
  EXPECT_EQ(ParseTaskSpec(Json::parse(R"({"queue":"q","key":1})"), "").status().field(), "key");
}

TEST(JsonCodecTest, ErrorBodyOmitsAnEmptyField) {
  EXPECT_EQ(ErrorBody("not_found", Status::NotFound("no task")),
            R"({"error":{"code":"not_found","message":"no task"}})");
  EXPECT_EQ(Json::parse(ErrorBody("invalid_argument",
                                  Status::InvalidArgument("run_at", "bad")))["error"]["field"],
            "run_at");
}

TEST(StoredFormTest, AScheduleDefinitionRoundTrips) {
  ScheduleSpec s;
  s.name = "purge";
  s.queue = "maintenance";
  s.cron = "0 0 3 * * *";
  s.tz = "Asia/Seoul";
  s.dst_gap = DstGap::kSkip;
  s.dst_repeat = DstRepeat::kTwice;
  s.start = *ParseTime("2026-11-22T00:00:00Z") + std::chrono::hours(1);
  s.payload = R"({"rows":1000})";
  s.misfire = Misfire::kRunAll;
  s.max_catchup = 7;
  s.overlap = Overlap::kQueueOne;
  s.priority = -2;
  s.max_attempts = 9;
  s.target =
      WebhookTarget{"https://example.com/x", "PUT", {{"X-Key", "v"}}, std::chrono::seconds(3)};
  Result<ScheduleSpec> back = DecodeScheduleSpec(EncodeScheduleSpec(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, s.name);
  EXPECT_EQ(back->queue, s.queue);
  EXPECT_EQ(back->cron, s.cron);
  EXPECT_EQ(back->tz, s.tz);
  EXPECT_EQ(back->dst_gap, s.dst_gap);
  EXPECT_EQ(back->dst_repeat, s.dst_repeat);
  EXPECT_EQ(back->start, s.start);
  EXPECT_EQ(back->payload, s.payload);
  EXPECT_EQ(back->misfire, s.misfire);
  EXPECT_EQ(back->max_catchup, s.max_catchup);
  EXPECT_EQ(back->overlap, s.overlap);
  EXPECT_EQ(back->priority, s.priority);
  EXPECT_EQ(back->max_attempts, s.max_attempts);
  EXPECT_EQ(back->target, s.target);

  ScheduleSpec d;
  d.name = "d";
  d.queue = "q";
  d.fixed_delay = std::chrono::milliseconds(1500);
  back = DecodeScheduleSpec(EncodeScheduleSpec(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->fixed_delay, d.fixed_delay);
  EXPECT_FALSE(back->every.has_value());
  EXPECT_FALSE(back->target.has_value());

  EXPECT_EQ(DecodeScheduleSpec("{\"name\":1}").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeScheduleSpec("not json").status().code(), StatusCode::kDataLoss);
}

TEST(StoredFormTest, AWebhookTargetIsKeptInItsWireFormAndRoundTrips) {
  const WebhookTarget plain{"https://hooks.example.com/expire?share=42"};
  EXPECT_EQ(EncodeTarget(plain),
            R"({"url":"https://hooks.example.com/expire?share=42","method":"POST","headers":{},)"
            R"("timeout_ms":10000})");
  WebhookTarget t = plain;
  t.method = "DELETE";
  t.headers = {{"Authorization", "Bearer \"x\""}, {"X-Tab", "a\tb"}, {"X-Utf8", "caf\xc3\xa9"}};
  t.timeout = std::chrono::milliseconds(1500);
  Result<WebhookTarget> back = DecodeTarget(EncodeTarget(t));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, t);
}

// The attempt history is stored compact: trailing empty texts left out,
// inner ones null; it reads back as it was (to the millisecond).
TEST(StoredFormTest, AttemptsRoundTripCompactly) {
  TaskAttempt first;
  first.number = 1;
  first.started_at = Timestamp(std::chrono::milliseconds(1795305600012));
  first.ended_at = first.started_at + std::chrono::milliseconds(178);
  first.node = "local";
  TaskAttempt second = first;
  second.number = 2;
  second.outcome = AttemptOutcome::kFailed;
  second.response = "HTTP 500: \"down\"\n";
  TaskAttempt third = first;
  third.number = 3;
  third.outcome = AttemptOutcome::kLeaseExpired;
  third.worker = "w";
  third.error = "lease expired during attempt 3";
  const std::vector<TaskAttempt> attempts = {first, second, third};
  const std::string stored = EncodeAttempts(attempts);
  EXPECT_EQ(stored, R"([[1,1795305600012,178,0,"local"],)"
                    R"([2,1795305600012,178,1,"local",null,null,"HTTP 500: \"down\"\n"],)"
                    R"([3,1795305600012,178,2,"local","w","lease expired during attempt 3"]])");
  Result<std::vector<TaskAttempt>> back = DecodeAttempts(stored);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, attempts);
  for (const char* bad :
       {"", "{}", "[{}]", R"([[1,2,3,7,"n"]])", R"([[1,2,3,0]])", R"([[1,2,3,0,"n",5]])"}) {
    EXPECT_EQ(DecodeAttempts(bad).status().code(), StatusCode::kDataLoss) << bad;
  }
}

TEST(StoredFormTest, GarbageIsDataLoss) {
  for (const char* bad :
       {"", "{", R"({"method":"PUT"})", R"({"url":"http://h","headers":[["n"]]})"}) {
    EXPECT_EQ(DecodeTarget(bad).status().code(), StatusCode::kDataLoss) << bad;
  }
}

}  // namespace
}  // namespace chronoq
