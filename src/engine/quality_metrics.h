// Quality metrics for comparing a model (usually a quantized one) with a reference model:
// perplexity, KL divergence and top-1 agreement of next-token distributions, and BLEU / ROUGE-L
// of generated token sequences.
//
// All functions are pure and deterministic. Distributions are computed from raw logits in
// double precision with log-sum-exp, so that the tiny divergences of fine quantizations (F16,
// Q8_0: KLD around 1e-5) are not drowned in float32 rounding. Sequence metrics work on token
// ids, not text, so they measure the models and not the tokenizer's detokenization.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace edgelm::engine {

using TokenSeq = std::vector<int32_t>;

// exp(-mean(log_probs)), with natural-log probabilities of the true next tokens. 1 for a
// perfect model; NaN for an empty input (no positions scored).
double perplexity(std::span<const double> log_probs);

// out[i] = logits[i] - logsumexp(logits), in double. out.size() must equal logits.size() > 0.
void log_softmax(std::span<const float> logits, std::span<double> out);

// log softmax(logits)[id]; id must index logits.
double log_prob_of(std::span<const float> logits, int32_t id);

// KL(P_ref || P_test) = sum_i p_i (log p_i - log q_i) in nats, with P = softmax(ref_logits) and
// Q = softmax(test_logits). >= 0 (tiny negative rounding is clamped to 0); exactly 0 for
// identical logits; asymmetric. Both spans must have the same non-zero size. Terms with
// p_i == 0 (underflow) contribute 0, as their limit does.
double kl_divergence(std::span<const float> ref_logits, std::span<const float> test_logits);

// Fraction of positions where the two sequences hold the same id (the sequences being the
// argmax tokens of the two models at the same positions: sample::argmax, what greedy decoding
// picks). Sizes must match; 1 for empty input.
double top1_agreement(std::span<const int32_t> ref_top1, std::span<const int32_t> test_top1);

struct BleuScore {
  double bleu = 0.0;                   // in [0, 1]
  std::array<double, 4> precisions{};  // p1 unsmoothed, p2..p4 add-one smoothed
  double brevity_penalty = 0.0;
  uint64_t hyp_length = 0, ref_length = 0;  // c and r of the paper, summed over the corpus
};

// Corpus BLEU-4 (Papineni et al. 2002) of hypotheses[i] against the single reference
// references[i]: n-gram matches are clipped by the reference counts and summed over the corpus
// before dividing (not averaged per sentence); BLEU = BP * exp(mean_n log p_n), with
// BP = exp(1 - r/c) when c < r, else 1 (and 0 when c = 0 < r).
//
// Smoothing: p_n = (m_n + 1) / (t_n + 1) for n = 2..4 (add-one, "smoothing 2" of Lin & Och
// 2004), because a short or drifting continuation often has no matching 4-gram at all and
// unsmoothed BLEU would then be 0 whatever its quality. p_1 stays unsmoothed, so disjoint
// sequences still score exactly 0 and identical ones exactly 1. Both corpora empty (or all
// sequences empty) score 1: the outputs agree.
BleuScore corpus_bleu(std::span<const TokenSeq> hypotheses, std::span<const TokenSeq> references);

// Length of the longest common subsequence; O(|a| |b|) time, O(min) memory.
size_t lcs_length(std::span<const int32_t> a, std::span<const int32_t> b);

// ROUGE-L F-measure (Lin 2004) with beta = 1: P = LCS/|hyp|, R = LCS/|ref|, F = 2PR/(P+R).
// 1 when both sequences are empty; 0 when exactly one is empty or they share no token.
double rouge_l(std::span<const int32_t> hypothesis, std::span<const int32_t> reference);

// Mean of rouge_l over aligned pairs (ROUGE-L is a per-pair score; averaging it is the usual
// corpus summary). 1 for an empty corpus.
double mean_rouge_l(std::span<const TokenSeq> hypotheses, std::span<const TokenSeq> references);

}  // namespace edgelm::engine
