#include "chronoq/status.h"

#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "chronoq/result.h"

namespace chronoq {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.field(), "");
  EXPECT_EQ(s.ToString(), "ok");
  EXPECT_EQ(Status::Ok(), s);
}

TEST(StatusTest, CodeNamesAreTheWireSpelling) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "ok");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(StatusCodeName(StatusCode::kNotFound), "not_found");
  EXPECT_EQ(StatusCodeName(StatusCode::kAlreadyExists), "already_exists");
  EXPECT_EQ(StatusCodeName(StatusCode::kFailedPrecondition), "failed_precondition");
  EXPECT_EQ(StatusCodeName(StatusCode::kAborted), "aborted");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnavailable), "unavailable");
  EXPECT_EQ(StatusCodeName(StatusCode::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(StatusCodeName(StatusCode::kResourceExhausted), "resource_exhausted");
  EXPECT_EQ(StatusCodeName(StatusCode::kDataLoss), "data_loss");
  EXPECT_EQ(StatusCodeName(StatusCode::kInternal), "internal");
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  const Status not_found = Status::NotFound("task share:42 does not exist");
  EXPECT_FALSE(not_found.ok());
  EXPECT_EQ(not_found.code(), StatusCode::kNotFound);
  EXPECT_EQ(not_found.message(), "task share:42 does not exist");
  EXPECT_EQ(not_found.field(), "");

  EXPECT_EQ(Status::AlreadyExists("x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Status::Unavailable("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Status::ResourceExhausted("x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Status::Internal("x").code(), StatusCode::kInternal);

  const Status precondition = Status::FailedPrecondition("stale lease", "token");
  EXPECT_EQ(precondition.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(precondition.message(), "stale lease");
  EXPECT_EQ(precondition.field(), "token");
}

TEST(StatusTest, ToStringIsCodeNameColonMessage) {
  EXPECT_EQ(Status::NotFound("task share:42 does not exist").ToString(),
            "not_found: task share:42 does not exist");
  EXPECT_EQ(Status(StatusCode::kDataLoss, "page 7 is corrupt").ToString(),
            "data_loss: page 7 is corrupt");
  EXPECT_EQ(Status(StatusCode::kDeadlineExceeded, "wait ran out").ToString(),
            "deadline_exceeded: wait ran out");
}

TEST(StatusTest, InvalidArgumentPrefixesTheFieldAndRemembersIt) {
  const Status s = Status::InvalidArgument("run_at", "before 1970");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "run_at: before 1970");
  EXPECT_EQ(s.field(), "run_at");
  EXPECT_EQ(s.ToString(), "invalid_argument: run_at: before 1970");
}

TEST(StatusTest, InvalidArgumentKeepsNestedFieldNames) {
  const Status s = Status::InvalidArgument("tasks[3].id", "must not be empty");
  EXPECT_EQ(s.field(), "tasks[3].id");
  EXPECT_EQ(s.message(), "tasks[3].id: must not be empty");
}

TEST(StatusTest, EqualityComparesCodeMessageAndField) {
  EXPECT_EQ(Status::InvalidArgument("a", "b"), Status::InvalidArgument("a", "b"));
  EXPECT_NE(Status::InvalidArgument("a", "b"), Status::InvalidArgument("a", "c"));
  EXPECT_NE(Status(StatusCode::kInternal, "m", "f1"), Status(StatusCode::kInternal, "m", "f2"));
  EXPECT_NE(Status(StatusCode::kInternal, "m"), Status(StatusCode::kUnavailable, "m"));
  EXPECT_NE(Status::NotFound("x"), Status::Ok());
}

TEST(ResultTest, HoldsAValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  *r = 7;
  EXPECT_EQ(r.value(), 7);
}

TEST(ResultTest, HoldsAnError) {
  Result<int> r = Status::NotFound("no such task");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "no such task");
}

TEST(ResultTest, ArrowAndMoveOut) {
  Result<std::string> r = std::string("payload");
  EXPECT_EQ(r->size(), 7u);
  std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "payload");

  Result<std::unique_ptr<int>> p = std::make_unique<int>(5);
  std::unique_ptr<int> owned = *std::move(p);
  ASSERT_NE(owned, nullptr);
  EXPECT_EQ(*owned, 5);
}

TEST(ResultDeathTest, OkStatusWithoutValueAborts) {
  EXPECT_DEATH(
      {
        Result<int> r{Status::Ok()};
        r.IgnoreError();
      },
      "");
}

// Helpers for the macro tests: each records how far it got.
Status FailWith(StatusCode code) {
  if (code == StatusCode::kOk) return {};
  return Status(code, "inner failed", "inner_field");
}

Status RunSteps(StatusCode first, int* reached) {
  *reached = 0;
  CHRONOQ_RETURN_IF_ERROR(FailWith(first));
  *reached = 1;
  CHRONOQ_RETURN_IF_ERROR(FailWith(StatusCode::kOk));
  *reached = 2;
  return Status::Internal("end of steps");
}

TEST(StatusMacroTest, ReturnIfErrorPropagatesTheError) {
  int reached = -1;
  const Status s = RunSteps(StatusCode::kUnavailable, &reached);
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "inner failed");
  EXPECT_EQ(s.field(), "inner_field");
}

TEST(StatusMacroTest, ReturnIfErrorContinuesOnOk) {
  int reached = -1;
  const Status s = RunSteps(StatusCode::kOk, &reached);
  EXPECT_EQ(reached, 2);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "end of steps");
}

Result<int> Half(int n) {
  if (n % 2 != 0) return Status::InvalidArgument("n", "odd");
  return n / 2;
}

Result<int> Quarter(int n, bool* second_step_ran) {
  *second_step_ran = false;
  CHRONOQ_ASSIGN_OR_RETURN(int half, Half(n));
  *second_step_ran = true;
  CHRONOQ_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status StoreQuarter(int n, int* out) {
  bool ignored = false;
  CHRONOQ_ASSIGN_OR_RETURN(*out, Quarter(n, &ignored));
  return {};
}

TEST(StatusMacroTest, AssignOrReturnBindsTheValue) {
  bool second = false;
  Result<int> r = Quarter(12, &second);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(second);
  EXPECT_EQ(*r, 3);
}

TEST(StatusMacroTest, AssignOrReturnPropagatesTheFirstError) {
  bool second = true;
  Result<int> r = Quarter(7, &second);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(second);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "n");
  EXPECT_EQ(r.status().message(), "n: odd");
}

TEST(StatusMacroTest, AssignOrReturnPropagatesALaterError) {
  bool second = false;
  Result<int> r = Quarter(6, &second);  // 6 / 2 = 3 is odd
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(second);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(StatusMacroTest, AssignOrReturnIntoAnExistingVariableAndIntoStatus) {
  int out = -1;
  EXPECT_TRUE(StoreQuarter(8, &out).ok());
  EXPECT_EQ(out, 2);

  out = -1;
  const Status s = StoreQuarter(5, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "n");
  EXPECT_EQ(out, -1);
}

}  // namespace
}  // namespace chronoq
