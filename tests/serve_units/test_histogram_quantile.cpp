// Quantiles from fixed buckets (serve/histogram_quantile.h), against hand-computed values.
#include "serve/histogram_quantile.h"

#include <gtest/gtest.h>

#include <vector>

namespace edgelm::serve {
namespace {

const std::vector<double> kBounds = {0.1, 0.2, 0.5, 1.0};

TEST(HistogramQuantile, EmptyOrMismatchedIsNone) {
  EXPECT_FALSE(histogram_quantile(0.5, kBounds, std::vector<uint64_t>{0, 0, 0, 0, 0}));
  EXPECT_FALSE(histogram_quantile(0.5, kBounds, std::vector<uint64_t>{1, 2}));
  EXPECT_FALSE(histogram_quantile(0.5, std::vector<double>{}, std::vector<uint64_t>{3}));
}

TEST(HistogramQuantile, InterpolatesInsideTheBucketOfTheRank) {
  // 10 observations: 4 in (0, 0.1], 4 in (0.1, 0.2], 2 in (0.2, 0.5].
  const std::vector<uint64_t> c = {4, 4, 2, 0, 0};
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, kBounds, c), 0.125);                // rank 5: 1/4 into (0.1, 0.2]
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.4, kBounds, c), 0.1);                  // rank 4: the top of the first
  EXPECT_NEAR(*histogram_quantile(0.95, kBounds, c), 0.2 + 0.3 * 0.75, 1e-12);  // rank 9.5
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.0, kBounds, c), 0.0);
  EXPECT_DOUBLE_EQ(*histogram_quantile(1.0, kBounds, c), 0.5);
}

TEST(HistogramQuantile, SkipsEmptyBucketsAndCapsAtTheHighestFiniteBound) {
  const std::vector<uint64_t> c = {0, 0, 0, 1, 3};  // one in (0.5, 1], three above 1
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.1, kBounds, c), 0.5 + 0.5 * 0.4);
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.99, kBounds, c), 1.0);  // +Inf: the histogram cannot tell more
}

TEST(HistogramQuantile, DeltaOfTwoTotalsIsTheWindow) {
  const std::vector<uint64_t> before = {1, 2, 3, 0, 0}, now = {1, 5, 3, 2, 0};
  EXPECT_EQ(bucket_delta(now, before), (std::vector<uint64_t>{0, 3, 0, 2, 0}));
  EXPECT_EQ(bucket_delta(now, {}), now);  // no earlier sample: everything since start
  const std::vector<uint64_t> reset = {0, 1, 0, 0, 0};
  EXPECT_EQ(bucket_delta(reset, before), reset);  // a counter that went down was reset
  EXPECT_NEAR(*histogram_quantile(0.5, kBounds, bucket_delta(now, before)), 0.1 + 0.1 * 2.5 / 3, 1e-12);
}

}  // namespace
}  // namespace edgelm::serve
