// Filters of the sampling chain on hand-made distributions: each test pins the exact set (and
// order) a filter must keep, following llama.cpp's definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sample/candidates.h"

namespace edgelm::sample {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<TokenId> ids_of(const Candidates& c) {
  std::vector<TokenId> ids;
  for (const TokenData& t : c.data) ids.push_back(t.id);
  return ids;
}

std::vector<TokenId> sorted_ids(const Candidates& c) {
  std::vector<TokenId> ids = ids_of(c);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Probabilities {0.1, 0.4, 0.2, 0.3} by id: sorted order is ids 1 (0.4), 3 (0.3), 2 (0.2), 0 (0.1).
// Ids are deliberately not in probability order so that filters must really sort.
Candidates four_tokens() {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.4f), std::log(0.2f),
                                     std::log(0.3f)};
  Candidates c;
  candidates_fill(c, logits);
  return c;
}

TEST(Candidates, FillMapsNaNToNegInfAndKeepsIdOrder) {
  Candidates c;
  const std::vector<float> logits = {1.0f, kNaN, -2.0f};
  candidates_fill(c, logits);
  ASSERT_EQ(c.data.size(), 3u);
  EXPECT_EQ(ids_of(c), (std::vector<TokenId>{0, 1, 2}));
  EXPECT_EQ(c.data[1].logit, -kInf);
  EXPECT_FALSE(c.sorted);
}

TEST(Argmax, PicksLowestIndexOnTies) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 5.0f, 5.0f, 2.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{7.0f, 7.0f}), 0);
  EXPECT_EQ(argmax(std::vector<float>{-3.0f, -1.0f, -2.0f}), 1);
}

TEST(Argmax, NaNIsNegInfAndAllNegInfGivesZero) {
  EXPECT_EQ(argmax(std::vector<float>{kNaN, -100.0f, kNaN}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -kInf, -kInf}), 0);
  EXPECT_EQ(argmax(std::vector<float>{kNaN, kNaN}), 0);
  EXPECT_EQ(argmax(std::vector<float>{kNaN, -kInf, 3.0f, kInf}), 3);
}

TEST(TopK, KeepsTheKBestSorted) {
  Candidates c = four_tokens();
  apply_top_k(c, 2);
  EXPECT_EQ(ids_of(c), (std::vector<TokenId>{1, 3}));
  EXPECT_TRUE(c.sorted);
}

TEST(TopK, TiesAtTheBoundaryKeepLowerIds) {
  Candidates c;
  candidates_fill(c, std::vector<float>{1.0f, 3.0f, 3.0f, 3.0f, 0.0f});
  apply_top_k(c, 2);
  EXPECT_EQ(ids_of(c), (std::vector<TokenId>{1, 2}));
}

TEST(TopK, OffOrLargerThanVocabIsANoOp) {
  for (int32_t k : {0, -1, 4, 100}) {
    Candidates c = four_tokens();
    apply_top_k(c, k);
    EXPECT_EQ(ids_of(c), (std::vector<TokenId>{0, 1, 2, 3})) << "k=" << k;
  }
}

TEST(TopK, LargeVocabMatchesFullSort) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> logits(150000);
  for (float& l : logits) l = std::round(dist(gen) * 4.0f) / 4.0f;  // many ties on purpose
  Candidates c;
  candidates_fill(c, logits);
  apply_top_k(c, 40);

  std::vector<TokenId> ref(logits.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = static_cast<TokenId>(i);
  std::sort(ref.begin(), ref.end(), [&](TokenId a, TokenId b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  ref.resize(40);
  EXPECT_EQ(ids_of(c), ref);
}

TEST(TopP, KeepsSmallestPrefixReachingP) {
  // Cumulative over the sorted order: 0.4, 0.7, 0.9, 1.0.
  const struct {
    float p;
    std::vector<TokenId> kept;
  } cases[] = {
      {0.35f, {1}},           // the first token alone already reaches p
      {0.5f, {1, 3}},         // 0.4 < 0.5 <= 0.7
      {0.65f, {1, 3}},
      {0.75f, {1, 3, 2}},     // 0.7 < 0.75 <= 0.9
      {0.95f, {1, 3, 2, 0}},  // needs everything
  };
  for (const auto& tc : cases) {
    Candidates c = four_tokens();
    apply_top_p(c, tc.p);
    EXPECT_EQ(ids_of(c), tc.kept) << "top_p=" << tc.p;
    EXPECT_TRUE(c.sorted);
  }
}

TEST(TopP, OneIsOffAndMinKeepIsHonoured) {
  Candidates c = four_tokens();
  apply_top_p(c, 1.0f);
  EXPECT_EQ(c.data.size(), 4u);

  Candidates d = four_tokens();
  apply_top_p(d, 0.1f, /*min_keep=*/3);
  EXPECT_EQ(ids_of(d), (std::vector<TokenId>{1, 3, 2}));
}

TEST(TopP, AppliesAfterTopKOnRenormalisedProbabilities) {
  // After top_k=2 the survivors are 0.4 and 0.3, i.e. 4/7 and 3/7 of the remaining mass:
  // top_p=0.5 then keeps only the first (4/7 >= 0.5), although 0.4 < 0.5 over the full vocab.
  Candidates c = four_tokens();
  apply_top_k(c, 2);
  apply_top_p(c, 0.5f);
  EXPECT_EQ(ids_of(c), (std::vector<TokenId>{1}));
}

// The lazy, chunked sort of top_p must cut exactly where a full sort would, also when the
// nucleus is far larger than the first chunk.
TEST(TopP, LargeVocabMatchesFullSortReference) {
  for (float scale : {4.0f, 0.05f}) {  // peaked (small nucleus) and nearly flat (huge nucleus)
    std::mt19937 gen(11);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> logits(150000);
    for (float& l : logits) l = dist(gen);

    Candidates c;
    candidates_fill(c, logits);
    apply_softmax(c);
    Candidates ref = c;
    apply_top_p(c, 0.9f);

    std::sort(ref.data.begin(), ref.data.end(), [](const TokenData& a, const TokenData& b) {
      return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    });
    double cum = 0.0;
    size_t keep = ref.data.size();
    for (size_t i = 0; i < ref.data.size(); ++i) {
      cum += ref.data[i].p;
      if (cum >= 0.9) {
        keep = i + 1;
        break;
      }
    }
    ref.data.resize(keep);
    EXPECT_EQ(ids_of(c), ids_of(ref)) << "scale=" << scale;
    if (scale < 1.0f) {
      EXPECT_GT(c.data.size(), 1000u);  // the doubling path really ran
    }
  }
}

TEST(MinP, KeepsTokensAboveFractionOfMax) {
  // p_max = 0.4; thresholds kept away from the exact probabilities.
  const struct {
    float min_p;
    std::vector<TokenId> kept;  // ascending ids (min_p keeps the id order of an unsorted array)
  } cases[] = {
      {0.2f, {0, 1, 2, 3}},  // >= 0.08
      {0.3f, {1, 2, 3}},     // >= 0.12 drops 0.1
      {0.6f, {1, 3}},        // >= 0.24 drops 0.2
      {0.8f, {1}},           // >= 0.32 drops 0.3
      {1.0f, {1}},           // only the max
  };
  for (const auto& tc : cases) {
    Candidates c = four_tokens();
    apply_min_p(c, tc.min_p);
    EXPECT_EQ(ids_of(c), tc.kept) << "min_p=" << tc.min_p;
  }
}

TEST(MinP, ZeroIsOffAndSortedStaysSorted) {
  Candidates c = four_tokens();
  apply_min_p(c, 0.0f);
  EXPECT_EQ(c.data.size(), 4u);

  Candidates d = four_tokens();
  apply_top_k(d, 3);  // sorted: 1, 3, 2
  apply_min_p(d, 0.6f);
  EXPECT_EQ(ids_of(d), (std::vector<TokenId>{1, 3}));
  EXPECT_TRUE(d.sorted);
}

TEST(MinP, MinKeepFallsBackToTheBest) {
  Candidates c = four_tokens();
  apply_min_p(c, 0.8f, /*min_keep=*/2);
  EXPECT_EQ(sorted_ids(c), (std::vector<TokenId>{1, 3}));
}

TEST(MinP, InfiniteLogits) {
  Candidates c;
  candidates_fill(c, std::vector<float>{-kInf, -kInf, -kInf});
  apply_min_p(c, 0.5f);
  EXPECT_EQ(c.data.size(), 3u);  // all equally likely: nothing can be dropped

  Candidates d;
  candidates_fill(d, std::vector<float>{1.0f, kInf, 2.0f, kInf});
  apply_min_p(d, 0.5f);
  EXPECT_EQ(ids_of(d), (std::vector<TokenId>{1, 3}));
}

TEST(Temperature, ScalesLogitsAndZeroKeepsTheBest) {
  Candidates c = four_tokens();
  const float before = c.data[2].logit;
  apply_temperature(c, 0.5f);
  EXPECT_FLOAT_EQ(c.data[2].logit, before / 0.5f);

  Candidates d = four_tokens();
  apply_temperature(d, 0.0f);
  EXPECT_EQ(ids_of(d), (std::vector<TokenId>{1}));
}

TEST(Softmax, MatchesDefinitionWithoutReordering) {
  Candidates c;
  candidates_fill(c, std::vector<float>{0.0f, 1.0f, 2.0f});
  apply_softmax(c);
  const double z = 1.0 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(c.data[0].p, 1.0 / z, 1e-6);
  EXPECT_NEAR(c.data[1].p, std::exp(1.0) / z, 1e-6);
  EXPECT_NEAR(c.data[2].p, std::exp(2.0) / z, 1e-6);
  EXPECT_EQ(ids_of(c), (std::vector<TokenId>{0, 1, 2}));
}

TEST(Softmax, InfiniteMaxSplitsMassEvenly) {
  Candidates c;
  candidates_fill(c, std::vector<float>{-kInf, -kInf, -kInf, -kInf});
  apply_softmax(c);
  for (const TokenData& t : c.data) EXPECT_FLOAT_EQ(t.p, 0.25f);

  Candidates d;
  candidates_fill(d, std::vector<float>{3.0f, kInf, kNaN, kInf});
  apply_softmax(d);
  EXPECT_FLOAT_EQ(d.data[0].p, 0.0f);
  EXPECT_FLOAT_EQ(d.data[1].p, 0.5f);
  EXPECT_FLOAT_EQ(d.data[2].p, 0.0f);
  EXPECT_FLOAT_EQ(d.data[3].p, 0.5f);
}

TEST(Draw, WalksTheCumulativeDistribution) {
  Candidates c;
  c.data = {{5, 0.0f, 0.25f}, {6, 0.0f, 0.0f}, {7, 0.0f, 0.5f}, {8, 0.0f, 0.25f}};
  EXPECT_EQ(draw_index(c, 0.0), 0u);
  EXPECT_EQ(draw_index(c, 0.2499), 0u);
  EXPECT_EQ(draw_index(c, 0.25), 2u);  // index 1 has p = 0 and can never be drawn
  EXPECT_EQ(draw_index(c, 0.7499), 2u);
  EXPECT_EQ(draw_index(c, 0.75), 3u);
  EXPECT_EQ(draw_index(c, 0.9999999999), 3u);
}

TEST(Draw, NeverPicksZeroProbabilityAtTheEnds) {
  Candidates c;
  c.data = {{0, 0.0f, 0.0f}, {1, 0.0f, 1.0f}, {2, 0.0f, 0.0f}};
  EXPECT_EQ(draw_index(c, 0.0), 1u);
  EXPECT_EQ(draw_index(c, std::nextafter(1.0, 0.0)), 1u);
}

}  // namespace
}  // namespace edgelm::sample
