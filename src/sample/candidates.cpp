// Candidate filters; see candidates.h for definitions and invariants.
#include "sample/candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "sample/logit_scan.h"

namespace edgelm::sample {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Strict total order for distinct ids (NaN never reaches here): best first.
bool better(const TokenData& a, const TokenData& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

// Sorting the first chunk of this size is cheap and almost always enough for top_p, whose
// nucleus is typically a few dozen tokens.
constexpr size_t kTopPFirstChunk = 128;

float max_logit(const Candidates& c) {
  float m = kNegInf;
  for (const TokenData& t : c.data) m = std::max(m, t.logit);
  return m;
}

// Keeps the best `k` entries (k < size), sorted.
void keep_best(Candidates& c, size_t k) {
  auto& d = c.data;
  if (!c.sorted) {
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(k), d.end(), better);
    std::sort(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(k), better);
  }
  d.resize(k);
  c.sorted = true;
}

}  // namespace

void candidates_fill(Candidates& c, std::span<const float> logits) {
  c.data.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    c.data[i] = TokenData{static_cast<TokenId>(i), std::isnan(l) ? kNegInf : l, 0.0f};
  }
  c.sorted = false;
}

TokenId argmax(std::span<const float> logits) {
  EDGELM_CHECK(!logits.empty(), "argmax of an empty logit vector");
  // The lowest index of the largest value (strict '>' over the indices in order); NaN acts as
  // -inf, and with nothing above -inf the answer is index 0.
  const float best = max_ignoring_nan(logits);
  if (!(best > kNegInf)) return 0;
  return static_cast<TokenId>(first_equal(logits, best));
}

void apply_top_k(Candidates& c, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= c.data.size()) return;
  keep_best(c, static_cast<size_t>(k));
}

void apply_top_p(Candidates& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.data.empty()) return;
  apply_softmax(c);

  // Sort lazily: extend the sorted prefix (doubling) only while the cut has not been found, so a
  // typical nucleus costs O(n) instead of a full O(n log n) sort of the vocabulary.
  auto& d = c.data;
  const size_t n = d.size();
  size_t n_sorted = c.sorted ? n : 0;
  size_t keep = n;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (i == n_sorted) {
      const size_t next = std::min(n, std::max(2 * n_sorted, kTopPFirstChunk));
      const auto first = d.begin() + static_cast<std::ptrdiff_t>(n_sorted);
      const auto mid = d.begin() + static_cast<std::ptrdiff_t>(next);
      if (next < n) std::nth_element(first, mid, d.end(), better);
      std::sort(first, mid, better);
      n_sorted = next;
    }
    cum += d[i].p;
    if (cum >= p && i + 1 >= min_keep) {
      keep = i + 1;
      break;
    }
  }
  // Everything up to `keep` is sorted; if the loop ran out (rounding left cum just below p), the
  // whole array was sorted on the way.
  d.resize(keep);
  c.sorted = true;
}

void apply_min_p(Candidates& c, float p, size_t min_keep) {
  if (p <= 0.0f || c.data.empty()) return;
  // p_i >= p * p_max  <=>  exp(l_i - l_max) >= p  <=>  l_i >= l_max + log(p). An infinite max
  // needs no special case: +inf keeps only the +inf entries, -inf keeps everything.
  const float threshold = max_logit(c) + std::log(p);
  const auto n_pass = static_cast<size_t>(std::count_if(
      c.data.begin(), c.data.end(), [&](const TokenData& t) { return t.logit >= threshold; }));
  if (n_pass >= min_keep) {
    // Stable removal keeps a sorted array sorted and an unsorted one in id order.
    std::erase_if(c.data, [&](const TokenData& t) { return t.logit < threshold; });
  } else if (min_keep < c.data.size()) {
    keep_best(c, min_keep);
  }
}

void apply_temperature(Candidates& c, float temperature) {
  if (c.data.empty()) return;
  if (temperature <= 0.0f) {
    // The zero-temperature limit puts all mass on the best candidate.
    const auto best = std::min_element(c.data.begin(), c.data.end(), better);
    const TokenData kept = *best;
    c.data.assign(1, kept);
    c.sorted = true;
    return;
  }
  for (TokenData& t : c.data) t.logit /= temperature;
}

void apply_softmax(Candidates& c) {
  if (c.data.empty()) return;
  const float m = max_logit(c);
  if (std::isinf(m)) {
    size_t n_max = 0;
    for (const TokenData& t : c.data) n_max += t.logit == m ? 1 : 0;
    const float share = 1.0f / static_cast<float>(n_max);
    for (TokenData& t : c.data) t.p = t.logit == m ? share : 0.0f;
    return;
  }
  double sum = 0.0;
  for (TokenData& t : c.data) {
    t.p = std::exp(t.logit - m);  // <= 1, and the max contributes exactly 1, so sum >= 1
    sum += t.p;
  }
  const double inv = 1.0 / sum;
  for (TokenData& t : c.data) t.p = static_cast<float>(t.p * inv);
}

size_t draw_index(const Candidates& c, double u) {
  EDGELM_CHECK(!c.data.empty(), "draw from an empty candidate array");
  double total = 0.0;
  for (const TokenData& t : c.data) total += t.p;
  const double target = u * total;
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < c.data.size(); ++i) {
    if (c.data[i].p <= 0.0f) continue;
    cum += c.data[i].p;
    last_positive = i;
    if (target < cum) return i;
  }
  // Only reachable through rounding at u close to 1.
  return last_positive;
}

}  // namespace edgelm::sample
