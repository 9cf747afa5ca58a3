#include <gtest/gtest.h>

#include "core/result.h"

namespace edgelm {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return make_error("value {} is not positive", v);
  return v;
}

Result<int> doubled(int v) {
  EDGELM_TRY(const int x, parse_positive(v));
  return 2 * x;
}

Status check(int v) {
  EDGELM_TRY_STATUS(doubled(v));
  return ok_status();
}

TEST(Result, ValuesAndErrorsPropagate) {
  EXPECT_EQ(*doubled(4), 8);
  auto e = doubled(-1);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "value -1 is not positive");
  EXPECT_TRUE(check(1).ok());
  EXPECT_EQ(check(0).error().message, "value 0 is not positive");
}

TEST(ResultDeathTest, ValueOfAnErrorIsABugThatNamesTheError) {
  EXPECT_DEATH((void)doubled(-3).value(), "value -3 is not positive");
}

}  // namespace
}  // namespace edgelm
