// GoogleMock matchers for Status and Result<T>, so a failure prints the error:
//
//   EXPECT_THAT(engine->Ack(id, token), IsOk());
//   EXPECT_THAT(server.Stop(SIGTERM), IsOkAndHolds(0));
//   EXPECT_THAT(engine->Cancel("nope"), StatusIs(StatusCode::kNotFound));
#pragma once

#include <ostream>

#include <gmock/gmock.h>

#include "chronoq/result.h"
#include "chronoq/status.h"

namespace chronoq {

// gtest prints a Status (and so a failed Result) with its code and message.
inline void PrintTo(const Status& s, std::ostream* os) { *os << s.ToString(); }
template <typename T>
void PrintTo(const Result<T>& r, std::ostream* os) {
  if (r.ok()) {
    *os << "ok: " << ::testing::PrintToString(*r);
  } else {
    *os << r.status().ToString();
  }
}

namespace test {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

MATCHER(IsOk, "is OK") {
  const Status s = StatusOf(arg);
  if (!s.ok()) *result_listener << s.ToString();
  return s.ok();
}

MATCHER_P(IsOkAndHolds, matcher, "is OK and holds a matching value") {
  if (!arg.ok()) {
    *result_listener << arg.status().ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(matcher, *arg, result_listener);
}

MATCHER_P(StatusIs, code, "has status code " + std::string(StatusCodeName(code))) {
  const Status s = StatusOf(arg);
  *result_listener << s.ToString();
  return s.code() == code;
}

}  // namespace test
}  // namespace chronoq
