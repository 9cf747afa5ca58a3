// Quality metrics against values worked out by hand (the arithmetic is in the comments), plus the
// boundary cases every metric must get exactly right: identical inputs, disjoint inputs, empty.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/quality_metrics.h"
#include "sample/candidates.h"

namespace edgelm::engine {
namespace {

TEST(Perplexity, HandComputed) {
  // exp(-(log 1/2 + log 1/4) / 2) = exp(log 8 / 2) = sqrt(8)
  const std::vector<double> lp = {std::log(0.5), std::log(0.25)};
  EXPECT_NEAR(perplexity(lp), std::sqrt(8.0), 1e-12);
  const std::vector<double> certain = {0.0, 0.0, 0.0};
  EXPECT_DOUBLE_EQ(perplexity(certain), 1.0);
  EXPECT_TRUE(std::isnan(perplexity({})));
}

TEST(Perplexity, UniformLogitsGiveTheVocabularySize) {
  const std::vector<float> logits(512, 3.5f);
  std::vector<double> lp;
  for (int32_t id : {0, 17, 511}) lp.push_back(log_prob_of(logits, id));
  EXPECT_NEAR(perplexity(lp), 512.0, 1e-9);
}

TEST(LogSoftmax, NormalizesAndSurvivesHugeLogits) {
  const std::vector<float> logits = {1000.0f, 999.0f, -1000.0f};
  std::vector<double> out(3);
  log_softmax(logits, out);
  double sum = 0.0;
  for (const double v : out) {
    EXPECT_TRUE(std::isfinite(v));
    sum += std::exp(v);
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  // log(e^0 / (e^0 + e^-1)) for the top entry
  EXPECT_NEAR(out[0], -std::log1p(std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(log_prob_of(logits, 1), out[1], 1e-12);
}

TEST(KlDivergence, HandComputed) {
  // P = softmax(0, 0) = (1/2, 1/2); Q = softmax(log 3, 0) = (3/4, 1/4).
  // KL(P||Q) = 1/2 log(2/3) + 1/2 log 2 = 1/2 log(4/3)
  // KL(Q||P) = 3/4 log(3/2) + 1/4 log(1/2)
  const std::vector<float> p = {0.0f, 0.0f};
  const std::vector<float> q = {std::log(3.0f), 0.0f};
  EXPECT_NEAR(kl_divergence(p, q), 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_NEAR(kl_divergence(q, p), 0.75 * std::log(1.5) + 0.25 * std::log(0.5), 1e-7);
  EXPECT_GT(std::abs(kl_divergence(p, q) - kl_divergence(q, p)), 1e-3);  // asymmetric
}

TEST(KlDivergence, IdenticalIsZeroAndShiftInvariant) {
  const std::vector<float> a = {0.3f, -2.0f, 5.0f, 1.25f};
  EXPECT_EQ(kl_divergence(a, a), 0.0);
  std::vector<float> shifted = a;
  for (auto& v : shifted) v += 40.0f;  // softmax ignores a constant shift
  EXPECT_NEAR(kl_divergence(a, shifted), 0.0, 1e-12);
}

TEST(KlDivergence, NonNegativeAndStableOnExtremeLogits) {
  const std::vector<float> a = {1000.0f, 0.0f};
  const std::vector<float> b = {0.0f, 1000.0f};
  // P = (1, e^-1000): KL = 1 * (0 - (-1000)) up to a vanishing term.
  EXPECT_NEAR(kl_divergence(a, b), 1000.0, 1e-9);
  // Pseudo-random pairs: Gibbs' inequality.
  uint32_t s = 12345;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 20.0f - 10.0f;
  };
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> x(64), y(64);
    for (auto& v : x) v = next();
    for (auto& v : y) v = next();
    EXPECT_GE(kl_divergence(x, y), 0.0);
  }
}

TEST(Top1, ArgmaxAndAgreement) {
  EXPECT_EQ(sample::argmax(std::vector<float>{1.0f, 3.0f, 3.0f, -1.0f}), 1);  // lowest index on ties
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {1, 0, 3, 0};
  EXPECT_DOUBLE_EQ(top1_agreement(a, a), 1.0);
  EXPECT_DOUBLE_EQ(top1_agreement(a, b), 0.5);
  EXPECT_DOUBLE_EQ(top1_agreement(a, std::vector<int32_t>{5, 6, 7, 8}), 0.0);
  EXPECT_DOUBLE_EQ(top1_agreement({}, {}), 1.0);
}

TEST(Bleu, HandComputedWithBrevityPenalty) {
  // hyp 1 2 3 4 5 (c = 5) against ref 1 2 3 6 5 7 (r = 6):
  //  unigrams 4/5 (1 2 3 5), bigrams (2+1)/(4+1) (12 23), trigrams (1+1)/(3+1) (123),
  //  4-grams (0+1)/(2+1); BP = exp(1 - 6/5).
  const std::vector<TokenSeq> hyp = {{1, 2, 3, 4, 5}};
  const std::vector<TokenSeq> ref = {{1, 2, 3, 6, 5, 7}};
  const BleuScore s = corpus_bleu(hyp, ref);
  EXPECT_DOUBLE_EQ(s.precisions[0], 0.8);
  EXPECT_DOUBLE_EQ(s.precisions[1], 0.6);
  EXPECT_DOUBLE_EQ(s.precisions[2], 0.5);
  EXPECT_DOUBLE_EQ(s.precisions[3], 1.0 / 3.0);
  EXPECT_NEAR(s.brevity_penalty, std::exp(-0.2), 1e-12);
  EXPECT_NEAR(s.bleu, std::exp(-0.2) * std::pow(0.8 * 0.6 * 0.5 / 3.0, 0.25), 1e-12);
  EXPECT_EQ(s.hyp_length, 5u);
  EXPECT_EQ(s.ref_length, 6u);
}

TEST(Bleu, ClipsRepeatedNgrams) {
  // hyp 7 7 7 7 against ref 7 1: the unigram 7 counts once (1/4); no bigram, trigram or 4-gram
  // matches: (0+1)/(3+1), (0+1)/(2+1), (0+1)/(1+1). c = 4 > r = 2: BP = 1.
  const std::vector<TokenSeq> hyp = {{7, 7, 7, 7}};
  const std::vector<TokenSeq> ref = {{7, 1}};
  const BleuScore s = corpus_bleu(hyp, ref);
  EXPECT_DOUBLE_EQ(s.precisions[0], 0.25);
  EXPECT_DOUBLE_EQ(s.brevity_penalty, 1.0);
  EXPECT_NEAR(s.bleu, std::pow(0.25 * 0.25 / 3.0 / 2.0, 0.25), 1e-12);
}

TEST(Bleu, SumsCountsOverTheCorpus) {
  // Pair 1: 1 2 / 1 2 (all match); pair 2: 3 / 4 (no match). Unigrams 2/3, bigrams (1+1)/(1+1),
  // no trigrams or 4-grams: 1/1. c = r = 3. Corpus BLEU (2/3)^(1/4), not the mean of the
  // sentence scores (1 and 0).
  const std::vector<TokenSeq> hyp = {{1, 2}, {3}};
  const std::vector<TokenSeq> ref = {{1, 2}, {4}};
  EXPECT_NEAR(corpus_bleu(hyp, ref).bleu, std::pow(2.0 / 3.0, 0.25), 1e-12);
}

TEST(Bleu, IdenticalIsOneDisjointIsZero) {
  const std::vector<TokenSeq> a = {{5, 6, 7, 8, 9, 10}, {1, 2, 3}, {4}};
  EXPECT_DOUBLE_EQ(corpus_bleu(a, a).bleu, 1.0);
  const std::vector<TokenSeq> b = {{11, 12, 13, 14, 15, 16}, {17, 18, 19}, {20}};
  EXPECT_DOUBLE_EQ(corpus_bleu(a, b).bleu, 0.0);
  // Empty outputs: agreement only when both are empty.
  const std::vector<TokenSeq> empty = {{}};
  EXPECT_DOUBLE_EQ(corpus_bleu(empty, empty).bleu, 1.0);
  EXPECT_DOUBLE_EQ(corpus_bleu(empty, std::vector<TokenSeq>{{1, 2}}).bleu, 0.0);
  EXPECT_DOUBLE_EQ(corpus_bleu(std::vector<TokenSeq>{{1, 2}}, empty).bleu, 0.0);
}

TEST(Bleu, ShortHypothesisIsPenalized) {
  // A correct prefix of half the length: all precisions 1, BP = exp(1 - 8/4) = e^-1.
  const std::vector<TokenSeq> hyp = {{1, 2, 3, 4}};
  const std::vector<TokenSeq> ref = {{1, 2, 3, 4, 5, 6, 7, 8}};
  EXPECT_NEAR(corpus_bleu(hyp, ref).bleu, std::exp(-1.0), 1e-12);
}

TEST(RougeL, HandComputed) {
  // LCS(1 2 3 4 5, 1 3 5 6) = 1 3 5: P = 3/5, R = 3/4, F1 = 2 * 0.45 / 1.35 = 2/3.
  const TokenSeq hyp = {1, 2, 3, 4, 5};
  const TokenSeq ref = {1, 3, 5, 6};
  EXPECT_EQ(lcs_length(hyp, ref), 3u);
  EXPECT_NEAR(rouge_l(hyp, ref), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(rouge_l(ref, hyp), 2.0 / 3.0, 1e-12);  // F1 is symmetric
  EXPECT_EQ(lcs_length(TokenSeq{1, 2, 3}, TokenSeq{3, 2, 1}), 1u);
  EXPECT_EQ(lcs_length(TokenSeq{1, 2, 1, 2}, TokenSeq{2, 1, 2, 1}), 3u);
}

TEST(RougeL, IdenticalIsOneDisjointIsZero) {
  const TokenSeq a = {4, 8, 15, 16, 23, 42};
  EXPECT_DOUBLE_EQ(rouge_l(a, a), 1.0);
  EXPECT_DOUBLE_EQ(rouge_l(a, TokenSeq{1, 2, 3}), 0.0);
  EXPECT_DOUBLE_EQ(rouge_l(TokenSeq{}, TokenSeq{}), 1.0);
  EXPECT_DOUBLE_EQ(rouge_l(TokenSeq{}, a), 0.0);
  // Corpus: the mean of the pairs' scores.
  const std::vector<TokenSeq> hyp = {a, {1, 2, 3, 4, 5}};
  const std::vector<TokenSeq> ref = {a, {1, 3, 5, 6}};
  EXPECT_NEAR(mean_rouge_l(hyp, ref), (1.0 + 2.0 / 3.0) / 2.0, 1e-12);
}

}  // namespace
}  // namespace edgelm::engine
