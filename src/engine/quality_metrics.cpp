#include "engine/quality_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/check.h"

namespace edgelm::engine {
namespace {

double log_sum_exp(std::span<const float> logits) {
  EDGELM_CHECK(!logits.empty(), "empty logits");
  double max = -std::numeric_limits<double>::infinity();
  for (const float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0.0;
  for (const float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum);
}

// The n-grams of seq with their counts; an ordered map keyed by the n ids (n <= 4, short texts:
// simple beats fast here).
std::map<std::array<int32_t, 4>, uint32_t> ngram_counts(std::span<const int32_t> seq, size_t n) {
  std::map<std::array<int32_t, 4>, uint32_t> counts;
  for (size_t i = 0; i + n <= seq.size(); ++i) {
    std::array<int32_t, 4> key{-1, -1, -1, -1};
    std::copy_n(seq.begin() + static_cast<ptrdiff_t>(i), n, key.begin());
    ++counts[key];
  }
  return counts;
}

}  // namespace

double perplexity(std::span<const double> log_probs) {
  if (log_probs.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0.0;
  for (const double lp : log_probs) sum += lp;
  return std::exp(-sum / static_cast<double>(log_probs.size()));
}

void log_softmax(std::span<const float> logits, std::span<double> out) {
  EDGELM_CHECK(out.size() == logits.size(), "log_softmax: size mismatch");
  const double lse = log_sum_exp(logits);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - lse;
}

double log_prob_of(std::span<const float> logits, int32_t id) {
  EDGELM_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(), "token id ", id, " outside the logits");
  return static_cast<double>(logits[static_cast<size_t>(id)]) - log_sum_exp(logits);
}

double kl_divergence(std::span<const float> ref_logits, std::span<const float> test_logits) {
  EDGELM_CHECK(ref_logits.size() == test_logits.size(), "kl_divergence: size mismatch");
  const double lse_p = log_sum_exp(ref_logits);
  const double lse_q = log_sum_exp(test_logits);
  double kl = 0.0;
  for (size_t i = 0; i < ref_logits.size(); ++i) {
    const double log_p = static_cast<double>(ref_logits[i]) - lse_p;
    const double log_q = static_cast<double>(test_logits[i]) - lse_q;
    const double p = std::exp(log_p);
    if (p > 0.0) kl += p * (log_p - log_q);
  }
  // Each term's sign is free, only the sum is >= 0 (Gibbs); rounding can leave -1e-17.
  return std::max(kl, 0.0);
}

double top1_agreement(std::span<const int32_t> ref_top1, std::span<const int32_t> test_top1) {
  EDGELM_CHECK(ref_top1.size() == test_top1.size(), "top1_agreement: size mismatch");
  if (ref_top1.empty()) return 1.0;
  size_t same = 0;
  for (size_t i = 0; i < ref_top1.size(); ++i) same += ref_top1[i] == test_top1[i] ? 1 : 0;
  return static_cast<double>(same) / static_cast<double>(ref_top1.size());
}

BleuScore corpus_bleu(std::span<const TokenSeq> hypotheses, std::span<const TokenSeq> references) {
  EDGELM_CHECK(hypotheses.size() == references.size(), "corpus_bleu: ", hypotheses.size(), " hypotheses for ",
               references.size(), " references");
  std::array<uint64_t, 4> matches{}, totals{};  // m_n: clipped matches; t_n: hypothesis n-grams
  BleuScore s;
  for (size_t k = 0; k < hypotheses.size(); ++k) {
    const TokenSeq& hyp = hypotheses[k];
    const TokenSeq& ref = references[k];
    s.hyp_length += hyp.size();
    s.ref_length += ref.size();
    for (size_t n = 1; n <= 4; ++n) {
      if (hyp.size() < n) continue;
      totals[n - 1] += hyp.size() - n + 1;
      const auto ref_counts = ngram_counts(ref, n);
      for (const auto& [gram, count] : ngram_counts(hyp, n)) {
        const auto it = ref_counts.find(gram);
        if (it != ref_counts.end()) matches[n - 1] += std::min(count, it->second);  // clipping
      }
    }
  }
  if (s.hyp_length == 0) {
    // Nothing generated: agreement exactly when nothing was expected either.
    const bool both_empty = s.ref_length == 0;
    s.bleu = s.brevity_penalty = both_empty ? 1.0 : 0.0;
    s.precisions.fill(both_empty ? 1.0 : 0.0);
    return s;
  }
  s.precisions[0] = static_cast<double>(matches[0]) / static_cast<double>(totals[0]);
  for (size_t n = 1; n < 4; ++n)
    s.precisions[n] = static_cast<double>(matches[n] + 1) / static_cast<double>(totals[n] + 1);
  const double c = static_cast<double>(s.hyp_length), r = static_cast<double>(s.ref_length);
  s.brevity_penalty = c < r ? std::exp(1.0 - r / c) : 1.0;
  if (s.precisions[0] == 0.0) {
    s.bleu = 0.0;  // log(0): the geometric mean is 0
    return s;
  }
  double log_mean = 0.0;
  for (const double p : s.precisions) log_mean += std::log(p) / 4.0;
  s.bleu = s.brevity_penalty * std::exp(log_mean);
  return s;
}

size_t lcs_length(std::span<const int32_t> a, std::span<const int32_t> b) {
  if (a.size() < b.size()) std::swap(a, b);  // the DP row runs over the shorter sequence
  std::vector<size_t> row(b.size() + 1, 0);  // [|b| + 1] LCS of a[0..i) and b[0..j)
  for (size_t i = 0; i < a.size(); ++i) {
    size_t diag = 0;  // row[j] of the previous i
    for (size_t j = 0; j < b.size(); ++j) {
      const size_t up = row[j + 1];
      row[j + 1] = a[i] == b[j] ? diag + 1 : std::max(up, row[j]);
      diag = up;
    }
  }
  return row[b.size()];
}

double rouge_l(std::span<const int32_t> hypothesis, std::span<const int32_t> reference) {
  if (hypothesis.empty() && reference.empty()) return 1.0;
  if (hypothesis.empty() || reference.empty()) return 0.0;
  const double lcs = static_cast<double>(lcs_length(hypothesis, reference));
  if (lcs == 0.0) return 0.0;
  const double p = lcs / static_cast<double>(hypothesis.size());
  const double r = lcs / static_cast<double>(reference.size());
  return 2.0 * p * r / (p + r);
}

double mean_rouge_l(std::span<const TokenSeq> hypotheses, std::span<const TokenSeq> references) {
  EDGELM_CHECK(hypotheses.size() == references.size(), "mean_rouge_l: size mismatch");
  if (hypotheses.empty()) return 1.0;
  double sum = 0.0;
  for (size_t k = 0; k < hypotheses.size(); ++k) sum += rouge_l(hypotheses[k], references[k]);
  return sum / static_cast<double>(hypotheses.size());
}

}  // namespace edgelm::engine
