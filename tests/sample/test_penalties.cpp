// Repetition penalties: repeat (llama.cpp sign-split), presence and frequency (OpenAI), and the
// window of recent tokens they look at.
#include <gtest/gtest.h>

#include <vector>

#include "sample/penalties.h"

namespace edgelm::sample {
namespace {

std::vector<float> base_logits() { return {2.0f, -2.0f, 1.0f, 0.5f}; }

std::vector<float> penalized(const std::vector<TokenId>& history, const PenaltyParams& params) {
  std::vector<float> logits = base_logits();
  apply_penalties(logits, history, params);
  return logits;
}

TEST(Penalties, RepeatDividesPositiveMultipliesNegativeOncePerToken) {
  const PenaltyParams params{.repeat = 2.0f, .last_n = -1};
  // Token 0 occurs twice but is penalized once; token 1 is negative and must move down.
  EXPECT_EQ(penalized({0, 1, 0}, params), (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f}));
}

TEST(Penalties, RepeatBelowOneEncourages) {
  const PenaltyParams params{.repeat = 0.5f, .last_n = -1};
  EXPECT_EQ(penalized({0, 1}, params), (std::vector<float>{4.0f, -1.0f, 1.0f, 0.5f}));
}

TEST(Penalties, PresenceSubtractsOnceIfPresent) {
  const PenaltyParams params{.presence = 0.5f, .last_n = -1};
  EXPECT_EQ(penalized({0, 0, 0, 2}, params), (std::vector<float>{1.5f, -2.0f, 0.5f, 0.5f}));
}

TEST(Penalties, FrequencySubtractsPerOccurrence) {
  const PenaltyParams params{.frequency = 0.25f, .last_n = -1};
  EXPECT_EQ(penalized({0, 0, 0, 2}, params), (std::vector<float>{1.25f, -2.0f, 0.75f, 0.5f}));
}

TEST(Penalties, AllThreeCombineRepeatFirst) {
  const PenaltyParams params{.repeat = 2.0f, .presence = 0.5f, .frequency = 0.25f, .last_n = -1};
  // token 0: 2 / 2 - (2 * 0.25 + 0.5) = 0; token 1: -2 * 2 - (0.25 + 0.5) = -4.75.
  EXPECT_EQ(penalized({0, 1, 0}, params), (std::vector<float>{0.0f, -4.75f, 1.0f, 0.5f}));
}

TEST(Penalties, WindowOnlySeesTheLastNTokens) {
  const PenaltyParams params{.presence = 1.0f, .last_n = 2};
  // Token 0 is outside the last 2 tokens {1, 2}.
  EXPECT_EQ(penalized({0, 1, 2}, params), (std::vector<float>{2.0f, -3.0f, 0.0f, 0.5f}));
}

TEST(Penalties, WindowLongerThanHistoryAndWholeHistory) {
  const PenaltyParams longer{.frequency = 1.0f, .last_n = 100};
  const PenaltyParams whole{.frequency = 1.0f, .last_n = -1};
  const std::vector<float> expected = {1.0f, -3.0f, 0.0f, 0.5f};
  EXPECT_EQ(penalized({0, 1, 2}, longer), expected);
  EXPECT_EQ(penalized({0, 1, 2}, whole), expected);
}

TEST(Penalties, ZeroWindowOrNeutralValuesAreOff) {
  EXPECT_EQ(penalized({0, 1, 2}, PenaltyParams{.repeat = 3.0f, .presence = 1.0f, .last_n = 0}),
            base_logits());
  EXPECT_EQ(penalized({0, 1, 2}, PenaltyParams{.last_n = -1}), base_logits());
  EXPECT_TRUE(penalties_are_off(PenaltyParams{}));
  EXPECT_FALSE(penalties_are_off(PenaltyParams{.frequency = 0.1f}));
  EXPECT_EQ(penalized({}, PenaltyParams{.presence = 1.0f, .last_n = -1}), base_logits());
}

TEST(Penalties, OutOfRangeIdsAreIgnored) {
  const PenaltyParams params{.presence = 1.0f, .last_n = -1};
  EXPECT_EQ(penalized({-1, 4, 1000, 3}, params), (std::vector<float>{2.0f, -2.0f, 1.0f, -0.5f}));
}

TEST(PenaltyWindow, Tails) {
  const std::vector<TokenId> history = {10, 11, 12, 13};
  EXPECT_TRUE(penalty_window(history, 0).empty());
  EXPECT_EQ(penalty_window(history, -1).size(), 4u);
  EXPECT_EQ(penalty_window(history, 9).size(), 4u);
  const auto last2 = penalty_window(history, 2);
  ASSERT_EQ(last2.size(), 2u);
  EXPECT_EQ(last2[0], 12);
  EXPECT_EQ(last2[1], 13);
}

TEST(Penalties, ScratchOverloadMatchesAndIsReusable) {
  const PenaltyParams params{.repeat = 1.5f, .frequency = 0.5f, .last_n = 3};
  std::vector<TokenId> scratch;
  for (int round = 0; round < 2; ++round) {
    std::vector<float> a = base_logits();
    std::vector<float> b = base_logits();
    const std::vector<TokenId> history = {3, 3, 2, 0, 0};
    apply_penalties(a, history, params, scratch);
    apply_penalties(b, history, params);
    EXPECT_EQ(a, b);
    EXPECT_FLOAT_EQ(a[0], 2.0f / 1.5f - 1.0f);  // window {2, 0, 0}: token 0 twice
    EXPECT_FLOAT_EQ(a[3], 0.5f);                // token 3 only outside the window
  }
}

}  // namespace
}  // namespace edgelm::sample
