#include "common/check.h"

#include <gtest/gtest.h>

namespace chronoq {
namespace {

TEST(CheckDeathTest, AFailedCheckAbortsNamingTheConditionAndWhy) {
  // "threadsafe" starts the binary again instead of forking a process that
  // may have threads (see common/subprocess.h).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int queued = 1;
  EXPECT_DEATH(CHRONOQ_CHECK(queued == 2, "two are queued"),
               "CHRONOQ_CHECK\\(queued == 2\\) failed: two are queued");
  CHRONOQ_CHECK(queued == 1, "one is queued");  // holds: nothing happens
}

}  // namespace
}  // namespace chronoq
