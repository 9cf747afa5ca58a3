// The vectorized logit scans (sample/logit_scan.h) and argmax on them against the plain loops:
// the framework-free checks of logit_scan_check.cpp, which the AArch64 self-test runs too.
#include <gtest/gtest.h>

#include "logit_scan_check.h"

namespace edgelm::sample {
namespace {

TEST(LogitScan, ArgmaxAndNaNSanitizingEqualThePlainLoops) {
  const kernels::CheckCounts c = check_logit_scan();
  EXPECT_EQ(c.failed, 0);
  EXPECT_GT(c.passed, 60);
}

}  // namespace
}  // namespace edgelm::sample
