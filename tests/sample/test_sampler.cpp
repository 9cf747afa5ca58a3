// The whole chain: greedy, top_k=1, chain order, seeded reproducibility, agreement with softmax
// (chi-square), NaN/-inf robustness, and validate().
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sample/sampler.h"

namespace edgelm::sample {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// No filters: the draw must follow softmax(logits / temperature) exactly.
SamplingParams unfiltered(float temperature, uint64_t seed) {
  return SamplingParams{.temperature = temperature, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                        .seed = seed};
}

TokenId sample_once(Sampler& s, std::vector<float> logits,
                    const std::vector<TokenId>& history = {}) {
  return s.sample(logits, history);
}

std::vector<TokenId> draw_sequence(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i) out.push_back(sample_once(s, logits));
  return out;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  for (float t : {0.0f, -1.0f}) {
    Sampler s(SamplingParams{.temperature = t});
    EXPECT_EQ(sample_once(s, {1.0f, 5.0f, 5.0f, 2.0f}), 1);
    EXPECT_EQ(sample_once(s, {9.0f, 5.0f, 9.0f}), 0);
    EXPECT_EQ(sample_once(s, {-3.0f, -1.0f, -2.0f}), 1);
  }
}

TEST(Sampler, GreedyAppliesPenaltiesFirst) {
  Sampler s(SamplingParams{.temperature = 0.0f, .repeat_penalty = 2.0f});
  EXPECT_EQ(sample_once(s, {5.0f, 4.0f}, {0}), 1);  // 5 / 2 < 4
  EXPECT_EQ(sample_once(s, {5.0f, 4.0f}, {1}), 0);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  std::mt19937 gen(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  Sampler greedy(SamplingParams{.temperature = 0.0f});
  Sampler top1(SamplingParams{.temperature = 1.5f, .top_k = 1, .top_p = 1.0f, .min_p = 0.0f});
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(1000);
    // Coarse rounding makes ties at the top frequent.
    for (float& l : logits) l = std::round(dist(gen));
    EXPECT_EQ(sample_once(top1, logits), sample_once(greedy, logits)) << "trial " << trial;
  }
}

// top_p and min_p must see temperature-1 probabilities: a high temperature flattens the
// distribution but must not let more tokens through the filters.
TEST(Sampler, FiltersRunBeforeTemperature) {
  const std::vector<float> logits = {std::log(0.6f), std::log(0.2f), std::log(0.15f),
                                     std::log(0.05f)};
  Sampler top_p(SamplingParams{.temperature = 20.0f, .top_k = 0, .top_p = 0.5f, .min_p = 0.0f});
  Sampler min_p(SamplingParams{.temperature = 20.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.3f});
  int n_other_min_p = 0;
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(sample_once(top_p, logits), 0);  // 0.6 >= 0.5: only token 0 survives
    const TokenId t = sample_once(min_p, logits);  // keeps p >= 0.18: tokens 0 and 1
    EXPECT_TRUE(t == 0 || t == 1) << t;
    n_other_min_p += t == 1 ? 1 : 0;
  }
  EXPECT_GT(n_other_min_p, 150);  // at temperature 20 the two survivors are nearly even
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  const std::vector<float> logits = {0.1f, 0.3f, -0.2f, 0.0f, 0.5f, 0.2f, -0.1f, 0.4f};
  Sampler a(unfiltered(1.0f, 42));
  Sampler b(unfiltered(1.0f, 42));
  Sampler c(unfiltered(1.0f, 43));
  const std::vector<TokenId> seq_a = draw_sequence(a, logits, 200);
  EXPECT_EQ(seq_a, draw_sequence(b, logits, 200));
  EXPECT_NE(seq_a, draw_sequence(c, logits, 200));

  a.reseed(42);
  EXPECT_EQ(draw_sequence(a, logits, 200), seq_a);
}

TEST(Sampler, DefaultParamsAreReproducible) {
  std::mt19937 gen(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> logits(5000);
  for (float& l : logits) l = dist(gen);
  Sampler a{SamplingParams{}};
  Sampler b{SamplingParams{}};
  std::vector<TokenId> history;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> la = logits;
    std::vector<float> lb = logits;
    const TokenId ta = a.sample(la, history);
    ASSERT_EQ(ta, b.sample(lb, history));
    history.push_back(ta);
  }
}

// mt19937_64 is fully specified by the standard: its 10000th output from the default seed is
// 9981545732273789042 on every conforming library, so Rng's uniforms are portable.
TEST(Rng, UsesTheStandardMt19937_64Stream) {
  Rng rng(5489u);
  double u = 0.0;
  for (int i = 0; i < 10000; ++i) u = rng.uniform();
  EXPECT_EQ(u, static_cast<double>(9981545732273789042ull >> 11) * 0x1.0p-53);
  for (int i = 0; i < 1000; ++i) {
    const double v = rng.uniform();
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
  }
}

// Pearson's chi-square over n draws against the expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * n;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p;
  double z = 0.0;
  for (float l : logits) z += std::exp(l / temperature);
  for (float l : logits) p.push_back(std::exp(l / temperature) / z);
  return p;
}

// 3 degrees of freedom: P(chi2 > 16.27) = 0.001 under the null hypothesis. A wrong distribution
// (e.g. temperature applied twice, off-by-one in the draw) gives values in the hundreds.
constexpr double kChi2Critical3Dof = 16.27;

TEST(Sampler, MatchesSoftmaxChiSquare) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -1.0f};
  for (float temperature : {1.0f, 0.5f}) {
    Sampler s(unfiltered(temperature, 1234));
    constexpr int kDraws = 20000;
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(sample_once(s, logits))];
    const double chi2 = chi_square(counts, softmax(logits, temperature), kDraws);
    EXPECT_LT(chi2, kChi2Critical3Dof) << "temperature " << temperature << ": counts " << counts[0]
                                       << " " << counts[1] << " " << counts[2] << " "
                                       << counts[3];
  }
}

TEST(Sampler, NaNLogitsAreNeverDrawn) {
  Sampler greedy(SamplingParams{.temperature = 0.0f});
  EXPECT_EQ(sample_once(greedy, {kNaN, 1.0f, kNaN, 0.5f}), 1);
  Sampler s(unfiltered(1.0f, 9));
  for (int i = 0; i < 500; ++i) {
    const TokenId t = sample_once(s, {kNaN, 1.0f, kNaN, 0.5f});
    ASSERT_TRUE(t == 1 || t == 3) << t;
  }
}

TEST(Sampler, AllNegInfOrNaNStillGivesAValidToken) {
  Sampler greedy(SamplingParams{.temperature = 0.0f});
  EXPECT_EQ(sample_once(greedy, {-kInf, -kInf, -kInf}), 0);
  EXPECT_EQ(sample_once(greedy, {kNaN, kNaN}), 0);
  for (const SamplingParams& params : {SamplingParams{}, unfiltered(1.0f, 1)}) {
    Sampler s(params);
    for (int i = 0; i < 100; ++i) {
      const TokenId a = sample_once(s, {-kInf, -kInf, -kInf});
      ASSERT_TRUE(a >= 0 && a < 3) << a;
      const TokenId b = sample_once(s, {kNaN, -kInf, kNaN, kNaN}, {0, 1, 2});
      ASSERT_TRUE(b >= 0 && b < 4) << b;
    }
  }
}

TEST(Sampler, OnlyFiniteSurvivorIsAlwaysChosen) {
  Sampler s(SamplingParams{.temperature = 1.0f, .repeat_penalty = 1.3f, .presence_penalty = 1.0f});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_once(s, {-kInf, kNaN, -3.0f, -kInf}, {2}), 2);
  Sampler inf(unfiltered(1.0f, 2));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_once(inf, {100.0f, kInf, 3.0f}), 1);
}

void expect_invalid(const SamplingParams& params, const std::string& needle) {
  const Status st = validate(params);
  ASSERT_FALSE(st.ok()) << "expected an error mentioning " << needle;
  EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
}

TEST(Validate, AcceptsDefaultsAndEdges) {
  EXPECT_TRUE(validate(SamplingParams{}).ok());
  EXPECT_TRUE(validate(SamplingParams{.temperature = -1.0f}).ok());  // greedy
  EXPECT_TRUE(validate(SamplingParams{.top_k = -5, .top_p = 1.0f, .min_p = 0.0f}).ok());
  EXPECT_TRUE(validate(SamplingParams{.min_p = 1.0f, .penalty_last_n = -1}).ok());
  EXPECT_TRUE(validate(SamplingParams{.presence_penalty = -2.0f, .frequency_penalty = 2.0f}).ok());
}

TEST(Validate, RejectsBadValuesWithMessages) {
  expect_invalid(SamplingParams{.temperature = kNaN}, "temperature");
  expect_invalid(SamplingParams{.temperature = kInf}, "temperature");
  expect_invalid(SamplingParams{.top_p = 0.0f}, "top_p");
  expect_invalid(SamplingParams{.top_p = 1.5f}, "top_p");
  expect_invalid(SamplingParams{.top_p = kNaN}, "top_p");
  expect_invalid(SamplingParams{.min_p = -0.1f}, "min_p");
  expect_invalid(SamplingParams{.min_p = 1.1f}, "min_p");
  expect_invalid(SamplingParams{.repeat_penalty = 0.0f}, "repeat_penalty");
  expect_invalid(SamplingParams{.repeat_penalty = -1.0f}, "repeat_penalty");
  expect_invalid(SamplingParams{.presence_penalty = kNaN}, "presence_penalty");
  expect_invalid(SamplingParams{.frequency_penalty = -kInf}, "frequency_penalty");
  expect_invalid(SamplingParams{.penalty_last_n = -2}, "penalty_last_n");

  SamplingParams dyn;
  dyn.dyn_temp = DynamicTemperature{.enabled = true, .start_tokens = 100, .full_tokens = 100};
  expect_invalid(dyn, "full_tokens");
  dyn.dyn_temp = DynamicTemperature{.min_temperature = -0.5f};
  expect_invalid(dyn, "min_temperature");
  dyn.dyn_temp = DynamicTemperature{.start_tokens = -1};
  expect_invalid(dyn, "start_tokens");
}

TEST(Validate, MessageNamesTheValue) {
  const Status st = validate(SamplingParams{.top_p = 1.5f});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("1.5"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace edgelm::sample
