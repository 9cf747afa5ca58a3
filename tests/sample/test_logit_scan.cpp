// The vectorized logit scans (sample/logit_scan.h) and argmax built on them, against the plain
// loops they replace, on vocabulary-sized vectors with the winner, ties, NaN and infinities at
// every kind of position: the first lane, the middle of a 16-float step, the scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "sample/candidates.h"
#include "sample/logit_scan.h"

namespace edgelm::sample {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The strict '>' loop argmax was before it was vectorized.
TokenId plain_argmax(const std::vector<float>& x) {
  size_t best = 0;
  float best_logit = -kInf;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] > best_logit) {
      best_logit = x[i];
      best = i;
    }
  return static_cast<TokenId>(best);
}

std::vector<float> random_logits(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = g(rng);
  return x;
}

TEST(LogitScan, ArgmaxEqualsThePlainLoop) {
  std::mt19937 rng(3);
  for (const size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}, size_t{248077}}) {
    std::vector<size_t> spots = {0, n / 2, n - 1};
    if (n > 16) spots.push_back(n - n % 16 - 1);  // last lane of the last whole step
    for (const size_t at : spots) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", winner at " << at);
      std::vector<float> x = random_logits(n, rng);
      x[at] = 50.0f;
      EXPECT_EQ(argmax(x), plain_argmax(x));
      EXPECT_EQ(argmax(x), static_cast<TokenId>(at));
      // A tie after it: still the lower index. A tie before it: that one.
      if (at + 1 < n) {
        x[n - 1] = 50.0f;
        EXPECT_EQ(argmax(x), static_cast<TokenId>(at));
      }
      if (at > 0) {
        x[at / 2] = 50.0f;
        EXPECT_EQ(argmax(x), plain_argmax(x));
      }
      // NaN everywhere around it, and a NaN in place of the winner.
      for (size_t i = 0; i < n; i += 3) x[i] = kNaN;
      EXPECT_EQ(argmax(x), plain_argmax(x));
      x[at] = kNaN;
      EXPECT_EQ(argmax(x), plain_argmax(x));
    }
  }
}

TEST(LogitScan, ArgmaxOfInfinitiesNaNAndSignedZeros) {
  const size_t n = 40;
  std::vector<float> x(n, kNaN);
  EXPECT_EQ(argmax(x), 0);  // nothing above -inf: index 0
  x.assign(n, -kInf);
  x[0] = kNaN;
  EXPECT_EQ(argmax(x), 0);
  x[37] = kInf;
  x[38] = kInf;
  EXPECT_EQ(argmax(x), 37);
  x.assign(n, -1.0f);
  x[20] = -0.0f;
  x[21] = 0.0f;
  EXPECT_EQ(argmax(x), 20);  // -0 and +0 tie; the lower index wins, as with the plain loop
  EXPECT_EQ(argmax(x), plain_argmax(x));
}

TEST(LogitScan, NaNBecomesNegInfAndNothingElseChanges) {
  std::mt19937 rng(4);
  for (const size_t n : {size_t{5}, size_t{16}, size_t{33}, size_t{70001}}) {
    std::vector<float> x = random_logits(n, rng);
    x[n - 1] = kNaN;
    x[0] = kInf;
    if (n > 20) x[17] = kNaN;
    std::vector<float> want = x;
    for (float& v : want)
      if (std::isnan(v)) v = -kInf;
    nan_to_neg_inf(x);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::memcmp(&x[i], &want[i], sizeof(float)), 0) << "at " << i;
  }
}

TEST(LogitScan, MaxAndFirstEqual) {
  std::vector<float> x = {kNaN, -3.0f, 2.0f, kNaN, 2.0f};
  EXPECT_EQ(max_ignoring_nan(x), 2.0f);
  EXPECT_EQ(first_equal(x, 2.0f), 2u);
  EXPECT_EQ(first_equal(x, 7.0f), x.size());
  EXPECT_EQ(max_ignoring_nan(std::vector<float>{}), -kInf);
  EXPECT_EQ(max_ignoring_nan(std::vector<float>(33, kNaN)), -kInf);
}

}  // namespace
}  // namespace edgelm::sample
