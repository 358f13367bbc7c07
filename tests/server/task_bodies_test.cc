// The two readings of task bodies (server/task_bodies.h): wherever the fast
// one answers, its answer is the reference's; where it does not, the body
// gets the reference's answer, error and all. Checked on hand-picked bodies
// and on thousands of generated ones, valid and not.
#include "server/task_bodies.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace chronoq::server {
namespace {

using task_bodies::ReadBatchFast;
using task_bodies::ReadBatchReference;
using task_bodies::ReadTaskFast;
using task_bodies::ReadTaskReference;

template <typename T>
bool SameResult(const Result<T>& a, const Result<T>& b) {
  if (a.ok() != b.ok()) return false;
  if (a.ok()) return *a == *b;
  return a.status().code() == b.status().code() && a.status().field() == b.status().field() &&
         a.status().message() == b.status().message();
}

// The property, for one body and one pair of readings (and the reading
// chronoqd uses, `used`). Returns whether the fast reading took it.
template <typename T>
bool Check(const std::string& body, std::optional<T> (*fast_reading)(std::string_view),
           Result<T> (*reference_reading)(std::string_view), Result<T> (*used)(std::string_view)) {
  const Result<T> reference = reference_reading(body);
  const std::optional<T> fast = fast_reading(body);
  if (fast) {
    EXPECT_TRUE(reference.ok()) << "the fast reading took a body the reference refuses ("
                                << reference.status().message() << "): " << body;
    if (reference.ok()) {
      EXPECT_TRUE(*fast == *reference) << "readings differ: " << body;
    }
  }
  EXPECT_TRUE(SameResult(used(body), reference)) << body;
  return fast.has_value();
}

bool CheckBatch(const std::string& body) {
  return Check(body, ReadBatchFast, ReadBatchReference, ReadTaskBatchBody);
}
bool CheckTask(const std::string& body) {
  return Check(body, ReadTaskFast, ReadTaskReference, ReadTaskBody);
}
bool CheckClaim(const std::string& body) {
  return Check(body, task_bodies::ReadClaimFast, task_bodies::ReadClaimReference, ReadClaimBody);
}
bool CheckAcks(const std::string& body) {
  return Check(body, task_bodies::ReadAcksFast, task_bodies::ReadAcksReference, ReadAcksBody);
}

TEST(TaskBodiesTest, TheFastReadingTakesTheCommonBodies) {
  const std::vector<std::string> bodies = {
      R"({"tasks":[]})",
      R"({"tasks":[{"queue":"q"}]})",
      R"({"tasks":[{"queue":"q","payload":{"a":1,"b":[true,false,null,"x"]}}],"return":"ids"})",
      R"( { "return" : "tasks" , "tasks" : [ { "queue" : "q" , "payload" : { "a" : -7 } } ] } )",
      R"({"tasks":[{"queue":"q","run_at":"2026-11-27T10:00:00.250+01:00","id":"order-1",)"
      R"("on_conflict":"ignore","max_attempts":3,"priority":-2,"key":"user:7"}]})",
      R"({"tasks":[{"queue":"q","run_at":1798000000000,"delay_ms":null,"payload":"text"}]})",
      R"({"tasks":[{"queue":"q","delay_ms":-1500,"payload":18446744073709551615}]})",
      R"({"tasks":[{"queue":"q","payload":-9223372036854775808}],"return":null})",
      "{\"tasks\":[{\"queue\":\"q\",\"payload\":\"caf\xc3\xa9 \xe2\x9c\x93\"}]}\n",
      R"({"tasks":[{"queue":"q","payload":{"":0,"A":1,"a":{"b":{"c":[[],{}]}}}}],"return":null})",
      // escapes are read as the reference reads them, and written back as it does
      R"({"tasks":[{"queue":"q\/1","payload":{"say":"\"hi\"\n\t\/\\"}}]})",
      R"({"tasks":[{"queue":"q","payload":-0}]})",
  };
  for (const std::string& body : bodies) {
    EXPECT_TRUE(CheckBatch(body)) << "left to the reference: " << body;
  }
  EXPECT_TRUE(CheckTask(R"({"queue":"q","payload":{"n":1}})"));
  EXPECT_TRUE(CheckTask(R"({"payload":[1,2],"queue":"q","run_at":"2026-11-27T10:00:00Z"})"));
}

TEST(TaskBodiesTest, ValidBodiesItLeavesAreReadByTheReference) {
  const std::vector<std::string> bodies = {
      // written back differently by the reference: keys sorted, escapes
      // resolved, numbers normalized
      R"({"tasks":[{"queue":"q","payload":{"b":1,"a":2}}]})",
      R"({"tasks":[{"queue":"q","payload":{"a":1,"a":2}}]})",
      R"({"tasks":[{"queue":"q","payload":"\u00e9\/"}]})",
      R"({"tasks":[{"queue":"q","payload":"\b\f"}]})",
      R"({"tasks":[{"queue":"q","payload":{"\f":1}}]})",
      R"({"tasks":[{"queue":"q","payload":1.50}]})",
      R"({"tasks":[{"queue":"q","payload":1e3}]})",
      R"({"tasks":[{"queue":"q","payload":18446744073709551616}]})",
      R"({"tasks":[{"queue":"q\u0041"}]})",
      R"({"tasks":[{"qu\u0065ue":"q"}]})",
      // fields it does not read
      R"({"tasks":[{"queue":"q","backoff":{"base_ms":100}}]})",
      R"({"tasks":[{"queue":"q","target":{"url":"http://127.0.0.1:9/hook"}}]})",
      // a duplicate field: the reference takes the last one
      R"({"tasks":[{"queue":"a","queue":"b"}]})",
      R"({"tasks":[],"tasks":[{"queue":"q"}]})",
  };
  for (const std::string& body : bodies) {
    EXPECT_TRUE(ReadBatchReference(body).ok()) << body;
    EXPECT_FALSE(CheckBatch(body)) << "taken by the fast reading: " << body;
  }
}

TEST(TaskBodiesTest, InvalidBodiesGetTheReferencesError) {
  const std::vector<std::string> bodies = {
      "",
      "[]",
      "{",
      R"({"tasks":[{"queue":"q"}]} x)",
      R"({"tasks":[{"queue":"q"}]}})",
      R"({"tasks":[{"queue":"q"},]})",
      R"({"tasks":[{"queue":"q"} {"queue":"r"}]})",
      R"({"tasks":[{"queue" "q"}]})",
      R"({"tasks":[{"queue":"q","payload":tru}]})",
      R"({"tasks":[{"queue":"q","payload":nulls}]})",
      R"({"tasks":[{"queue":"q","payload":01}]})",
      R"({"tasks":[{"queue":"q","payload":"a)"
      "\x01"
      R"("}]})",
      "{\"tasks\":[{\"queue\":\"q\",\"payload\":\"\xff\"}]}",
      R"({"tasks":{}})",
      R"({"tasks":null})",
      R"({})",
      R"({"tasks":[],"return":"all"})",
      R"({"tasks":[],"return":1})",
      R"({"tasks":[],"extra":1})",
      R"({"tasks":[1]})",
      R"({"tasks":[{}]})",
      R"({"tasks":[{"queue":null}]})",
      R"({"tasks":[{"queue":1}]})",
      R"({"tasks":[{"queue":"q","queue2":1}]})",
      R"({"tasks":[{"queue":"q","run_at":"tomorrow"}]})",
      R"({"tasks":[{"queue":"q","run_at":-1}]})",
      R"({"tasks":[{"queue":"q","run_at":253402300800000}]})",
      R"({"tasks":[{"queue":"q","run_at":1.5}]})",
      R"({"tasks":[{"queue":"q","run_at":true}]})",
      R"({"tasks":[{"queue":"q","delay_ms":9223372036854776}]})",
      R"({"tasks":[{"queue":"q","delay_ms":"5"}]})",
      R"({"tasks":[{"queue":"q","id":""}]})",
      R"({"tasks":[{"queue":"q","key":""}]})",
      R"({"tasks":[{"queue":"q","key":7}]})",
      R"({"tasks":[{"queue":"q","on_conflict":"merge"}]})",
      R"({"tasks":[{"queue":"q","max_attempts":0}]})",
      R"({"tasks":[{"queue":"q","max_attempts":2147483648}]})",
      R"({"tasks":[{"queue":"q","priority":-2147483649}]})",
      R"({"tasks":[{"queue":"q","priority":[]}]})",
      R"({"tasks":[{"queue":"q","backoff":{}}]})",
      R"({"tasks":[{"queue":"q","target":{"url":1}}]})",
  };
  for (const std::string& body : bodies) {
    EXPECT_FALSE(ReadBatchReference(body).ok()) << body;
    EXPECT_FALSE(CheckBatch(body)) << "taken by the fast reading: " << body;
  }
  EXPECT_FALSE(CheckTask(R"({"queue":"q"} [])"));
  EXPECT_FALSE(CheckTask(R"({"queue":"q","tasks":[]})"));
}

TEST(TaskBodiesTest, NestingIsCheckedAsTheReferenceChecksIt) {
  for (int depth : {10, 60, 61, 62, 63, 64, 65, 100}) {
    // The body is level 1, "tasks" 2, the task 3: the payload adds `depth`.
    const std::string payload = std::string(depth, '[') + std::string(depth, ']');
    const std::string body = R"({"tasks":[{"queue":"q","payload":)" + payload + "}]}";
    CheckBatch(body);
    EXPECT_EQ(ReadTaskBatchBody(body).ok(), depth + 3 <= 64) << depth;
  }
}

TEST(TaskBodiesTest, ClaimsAndAcksAreReadTheSameWays) {
  for (const std::string body : {
           R"({"max":256,"lease_ms":30000,"wait_ms":0,"worker":"host:42"})",
           R"({"max":10,"acks":[{"id":"_01J","token":7},{"id":"b","token":8,"error":"boom"},)"
           R"({"id":"c","token":9223372036854775807,"error":"x","retry_in_ms":-5}]})",
           R"({"wait_ms":null,"worker":null,"acks":null})",
           R"({})",
       }) {
    EXPECT_TRUE(CheckClaim(body)) << "left to the reference: " << body;
  }
  EXPECT_TRUE(CheckAcks(R"({"acks":[{"id":"a","token":1},{"id":"b","token":2,"error":"e"}]})"));
  for (const std::string& body : {
           std::string(""),  // a claim's empty body: the reference's defaults
           std::string(R"({"worker":"\u0041"})"),
           std::string(R"({"max":1,"max":2})"),  // the reference takes the last
       }) {
    EXPECT_TRUE(ReadClaimBody(body).ok()) << body;
    EXPECT_FALSE(CheckClaim(body)) << "taken by the fast reading: " << body;
  }
  for (const std::string body : {
           R"({"max":1.5})",
           R"({"max":2147483648})",
           R"({"lease_ms":9223372036854776})",
           R"({"worker":1})",
           R"({"acks":[]})",
           R"({"acks":{}})",
           R"({"acks":[1]})",
           R"({"acks":[{"id":"a"}]})",
           R"({"acks":[{"token":1}]})",
           R"({"acks":[{"id":null,"token":1}]})",
           R"({"acks":[{"id":"a","token":0}]})",
           R"({"acks":[{"id":"a","token":1,"retry_in_ms":5}]})",
           R"({"acks":[{"id":"a","token":1,"error":null,"retry_in_ms":5}]})",
           R"({"acks":[{"id":"a","token":1,"extra":1}]})",
           R"({"other":1})",
           R"({"max":1} [])",
           "[]",
       }) {
    EXPECT_FALSE(ReadClaimBody(body).ok()) << body;
    EXPECT_FALSE(CheckClaim(body)) << "taken by the fast reading: " << body;
  }
  for (const std::string body :
       {"", "{}", R"({"acks":null})", R"({"acks":[{"id":"a","token":1}],"max":1})"}) {
    EXPECT_FALSE(ReadAcksBody(body).ok()) << body;
    EXPECT_FALSE(CheckAcks(body)) << "taken by the fast reading: " << body;
  }
}

// Random bodies: `clean` ones hold only what the fast reading takes (so it
// must take every one); the others anything, valid or not.
class BodyMaker {
 public:
  BodyMaker(uint64_t seed, bool clean) : rng_(seed), clean_(clean) {}

  std::string Batch() {
    std::string out = "{";
    std::vector<std::string> fields;
    std::string tasks = Space() + "\"tasks\"" + Space() + ":" + Space() + "[";
    const int n = Pick(4);
    for (int i = 0; i < n; ++i) {
      if (i > 0) tasks += ",";
      tasks += Space() + Task() + Space();
    }
    fields.push_back(tasks + "]");
    if (Chance(3)) fields.push_back(R"("return":)" + OneOf({"\"ids\"", "\"tasks\"", "null"}));
    if (!clean_ && Chance(10)) fields.push_back(R"("return":)" + Scalar());
    if (!clean_ && Chance(15)) fields.push_back(R"("other":1)");
    if (Chance(2)) std::swap(fields.front(), fields.back());
    for (size_t i = 0; i < fields.size(); ++i) out += (i > 0 ? "," : "") + fields[i];
    out += "}";
    return Damage(out);
  }

  std::string Task() {
    std::vector<std::string> fields = {R"("queue":)" + Text("q")};
    if (!clean_ && Chance(15)) fields.back() = R"("queue":)" + Scalar();
    if (!clean_ && Chance(20)) fields.clear();
    const char* names[] = {"payload",      "run_at",   "delay_ms", "id",      "on_conflict",
                           "max_attempts", "priority", "key",      "backoff", "target"};
    for (const char* name : names) {
      if (!Chance(3)) continue;
      const std::string n = name;
      if (clean_ && (n == "backoff" || n == "target")) continue;
      std::string value;
      if (n == "payload") value = Payload(4);
      if (n == "run_at") {
        value = Chance(2) ? "\"2026-11-27T10:00:00." + std::to_string(Pick(1000)) + "Z\""
                          : std::to_string(1798000000000 + Pick(1000000));
      }
      if (n == "delay_ms") value = std::to_string(static_cast<int>(Pick(200000)) - 100000);
      if (n == "id" || n == "key") value = Text("k");
      if (n == "on_conflict") value = OneOf({"\"reject\"", "\"ignore\"", "\"replace\""});
      if (n == "max_attempts") value = std::to_string(1 + Pick(50));
      if (n == "priority") value = std::to_string(static_cast<int>(Pick(20)) - 10);
      if (n == "backoff") value = R"({"base_ms":100})";
      if (n == "target") value = R"({"url":"http://127.0.0.1:9/h"})";
      if (!clean_ && Chance(6)) value = Scalar();
      if (Chance(12)) value = "null";
      fields.push_back(Space() + "\"" + n + "\"" + Space() + ":" + Space() + value + Space());
      if (!clean_ && Chance(30)) fields.push_back(fields.back());
    }
    if (!clean_ && Chance(25)) fields.push_back(R"("bogus":true)");
    std::shuffle(fields.begin(), fields.end(), rng_);
    std::string out = "{";
    for (size_t i = 0; i < fields.size(); ++i) out += (i > 0 ? "," : "") + fields[i];
    return out + "}";
  }

  // A claim body (with acks), or with `acks_only` a POST /v1/acks body.
  std::string Claim(bool acks_only) {
    std::vector<std::string> fields;
    if (!acks_only) {
      if (Chance(2)) fields.push_back(R"("max":)" + OneOf({"1", "256", "null", "0", "-3"}));
      if (Chance(2)) fields.push_back(R"("lease_ms":)" + OneOf({"30000", "1", "null"}));
      if (Chance(2)) fields.push_back(R"("wait_ms":)" + OneOf({"0", "1000", "null"}));
      if (Chance(2)) fields.push_back(R"("worker":)" + OneOf({"\"host:1\"", "\"\"", "null"}));
    }
    if (acks_only || Chance(2)) {
      std::string acks = R"("acks":[)";
      const int n = 1 + Pick(4);
      for (int i = 0; i < n; ++i) {
        std::vector<std::string> ack = {R"("id":)" + Text("t"),
                                        R"("token":)" + std::to_string(1 + Pick(1000))};
        if (Chance(4)) {
          ack.push_back(R"("error":null)");
        } else if (Chance(3)) {
          ack.push_back(R"("error":)" + OneOf({"\"boom\"", "\"a\\nb\""}));
          if (Chance(2)) ack.push_back(R"("retry_in_ms":)" + OneOf({"0", "500", "null"}));
        }
        if (!clean_ && Chance(8)) ack[static_cast<size_t>(Pick(2))] = R"("id":)" + Scalar();
        if (!clean_ && Chance(8)) ack.push_back(R"("token":)" + Scalar());
        if (!clean_ && Chance(12)) ack.pop_back();
        if (!clean_ && Chance(20)) ack.push_back(R"("retry_in_ms":7)");
        std::shuffle(ack.begin(), ack.end(), rng_);
        acks += (i > 0 ? "," : "") + std::string("{");
        for (size_t k = 0; k < ack.size(); ++k) acks += (k > 0 ? "," : "") + Space() + ack[k];
        acks += "}";
      }
      fields.push_back(acks + "]");
    }
    if (!clean_ && Chance(10)) fields.push_back(R"("max":)" + Scalar());
    if (!clean_ && Chance(15)) fields.push_back(R"("bogus":[])");
    std::shuffle(fields.begin(), fields.end(), rng_);
    std::string out = "{";
    for (size_t i = 0; i < fields.size(); ++i) out += (i > 0 ? "," : "") + Space() + fields[i];
    return Damage(out + "}");
  }

  std::string Payload(int depth) {
    const int kind = Pick(depth > 0 ? 4 : 2);
    if (kind == 0 || kind == 1) return Scalar();
    if (kind == 2) {
      std::string out = "[";
      const int n = Pick(4);
      for (int i = 0; i < n; ++i) out += (i > 0 ? "," : "") + Space() + Payload(depth - 1);
      return out + Space() + "]";
    }
    std::vector<std::string> keys;
    for (int i = Pick(4); i > 0; --i) {
      keys.push_back(clean_ || Chance(2) ? OneOf({"a", "b", "B", "", "aa", "\xc3\xa9"})
                                         : OneOf({"\\f", "\\n", "\\\"", "\\u0041", "\\/"}));
    }
    std::sort(keys.begin(), keys.end());
    if (clean_) keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (!clean_ && Chance(3)) std::shuffle(keys.begin(), keys.end(), rng_);
    std::string out = "{";
    for (size_t i = 0; i < keys.size(); ++i) {
      out += (i > 0 ? "," : "") + Space() + "\"" + keys[i] + "\"" + Space() + ":" + Space() +
             Payload(depth - 1);
    }
    return out + "}";
  }

  std::string Scalar() {
    std::vector<std::string> choices = {"true",
                                        "false",
                                        "null",
                                        "0",
                                        "-5",
                                        "42",
                                        "9223372036854775807",
                                        "-9223372036854775808",
                                        "18446744073709551615",
                                        Text("s"),
                                        "\"\"",
                                        "\"caf\xc3\xa9\""};
    if (!clean_) {
      for (const char* odd : {"1.5", "-0", "1e3", "-1E-2", "18446744073709551616",
                              "-9223372036854775809", "\"a\\\"b\"", "\"\\u00e9\"", "\"\\n\"", "[]",
                              "{}", "2147483648", "-2147483649", "\"tomorrow\""}) {
        choices.push_back(odd);
      }
    }
    return choices[Pick(static_cast<int>(choices.size()))];
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool Chance(int one_in) { return Pick(one_in) == 0; }
  std::string OneOf(std::initializer_list<const char*> options) {
    return *(options.begin() + Pick(static_cast<int>(options.size())));
  }
  std::string Space() { return Chance(4) ? OneOf({" ", "\n", "\t ", "\r\n"}) : ""; }
  std::string Text(const std::string& prefix) {
    return "\"" + prefix + std::to_string(Pick(100)) + "\"";
  }
  // Unclean bodies are sometimes cut short, or get a byte changed or added.
  std::string Damage(std::string body) {
    if (clean_ || !Chance(8) || body.empty()) return body;
    const size_t at = static_cast<size_t>(Pick(static_cast<int>(body.size())));
    switch (Pick(3)) {
      case 0:
        return body.substr(0, at);
      case 1:
        body[at] = OneOf({"}", "]", ",", ":", "\"", "x", " "})[0];
        return body;
      default:
        return body.insert(at, OneOf({"}", ",", "\"", "1", " x"}));
    }
  }

  std::mt19937_64 rng_;
  bool clean_;
};

TEST(TaskBodiesTest, GeneratedCleanBodiesAreAllTakenAndReadTheSame) {
  BodyMaker maker(19, /*clean=*/true);
  for (int i = 0; i < 1000; ++i) {
    const std::string body = maker.Batch();
    ASSERT_TRUE(ReadBatchReference(body).ok()) << body;
    ASSERT_TRUE(CheckBatch(body)) << "left to the reference: " << body;
    ASSERT_TRUE(CheckTask(maker.Task()));
  }
}

TEST(TaskBodiesTest, GeneratedClaimsAndAcksGetTheReferencesAnswer) {
  BodyMaker clean(7, /*clean=*/true);
  for (int i = 0; i < 1000; ++i) {
    const std::string claim = clean.Claim(false);
    ASSERT_TRUE(ReadClaimBody(claim).ok()) << claim;
    ASSERT_TRUE(CheckClaim(claim)) << "left to the reference: " << claim;
    const std::string acks = clean.Claim(true);
    ASSERT_TRUE(CheckAcks(acks)) << "left to the reference: " << acks;
  }
  BodyMaker any(8, /*clean=*/false);
  int taken = 0, valid = 0;
  constexpr int kBodies = 5000;
  for (int i = 0; i < kBodies; ++i) {
    const std::string claim = any.Claim(i % 2 == 0);
    valid += task_bodies::ReadClaimReference(claim).ok() ? 1 : 0;
    taken += CheckClaim(claim) ? 1 : 0;
    CheckAcks(claim);
    if (HasFailure()) return;
  }
  EXPECT_GT(taken, kBodies / 20);
  EXPECT_GT(kBodies - valid, kBodies / 5);
}

TEST(TaskBodiesTest, GeneratedBodiesOfAnyKindGetTheReferencesAnswer) {
  BodyMaker maker(2026, /*clean=*/false);
  int taken = 0, valid = 0;
  constexpr int kBodies = 5000;
  for (int i = 0; i < kBodies; ++i) {
    const std::string body = maker.Batch();
    valid += ReadBatchReference(body).ok() ? 1 : 0;
    taken += CheckBatch(body) ? 1 : 0;
    CheckTask(maker.Task());
    if (HasFailure()) return;
  }
  // Both kinds must be common, or the property above says little.
  EXPECT_GT(taken, kBodies / 20);
  EXPECT_GT(kBodies - valid, kBodies / 5);
  EXPECT_GT(valid - taken, kBodies / 20);
}

}  // namespace
}  // namespace chronoq::server
