// Candidate arrays and the filters of the sampling chain (top-k, top-p, min-p, temperature,
// softmax) plus argmax and the final draw, as free functions so each can be tested alone.
//
// A Candidates array holds one entry per token still in the running. Filters only ever remove
// entries or rewrite logit/p; they never add tokens. Invariants:
//   - ids are distinct, so "logit descending, then id ascending" is a strict total order; every
//     sort uses it, which makes results independent of the standard library's sort algorithm
//     (ties at a top-k boundary always keep the lower id).
//   - sorted == true means data is in that order; unsorted arrays are in ascending id order
//     minus removed entries (filters that do not sort are stable), so the draw is deterministic
//     either way.
//   - NaN logits are stored as -inf (candidates_fill), so comparisons are well defined.
//   - p is only meaningful right after apply_softmax (or a filter that calls it).
//
// Definitions follow llama.cpp's samplers:
//   top_k(k)     keep the k highest logits; k <= 0 or k >= size: no-op.
//   top_p(p)     softmax, then keep the smallest prefix of the sorted candidates whose cumulative
//                probability is >= p (at least min_keep); p >= 1: no-op.
//   min_p(p)     keep tokens whose probability is >= p * (max probability), evaluated as
//                logit >= max_logit + log(p) (same set, no exp per token); p <= 0: no-op.
//   temperature  logit /= t; t <= 0 keeps only the best candidate (greedy).
// Costs for n candidates: top_k O(n + k log k); top_p O(n) per doubling of the sorted prefix
// it needs (it sorts only as far as the cut, not the whole 150k vocab); min_p, temperature,
// softmax, draw O(n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace edgelm::sample {

using TokenId = int32_t;

struct TokenData {
  TokenId id;
  float logit;
  float p;  // probability after the last softmax
};

struct Candidates {
  std::vector<TokenData> data;  // [n_candidates]
  bool sorted = false;          // data in (logit desc, id asc) order
};

// Refills `c` with every token of logits [n_vocab] in id order (reusing its storage); NaN
// logits become -inf.
void candidates_fill(Candidates& c, std::span<const float> logits);

// Index of the highest logit; the lowest index wins ties, NaN counts as -inf, and an all -inf
// (or all NaN) vector yields 0. logits must not be empty.
TokenId argmax(std::span<const float> logits);

void apply_top_k(Candidates& c, int32_t k);
void apply_top_p(Candidates& c, float p, size_t min_keep = 1);
void apply_min_p(Candidates& c, float p, size_t min_keep = 1);
void apply_temperature(Candidates& c, float temperature);

// Fills p with the softmax of the logits without reordering. If the largest logit is infinite
// (all -inf, or some +inf), the mass is split evenly among the candidates equal to it, which is
// the limit of the finite case and avoids inf - inf = NaN.
void apply_softmax(Candidates& c);

// The candidate selected by a uniform u in [0, 1): the first index whose cumulative probability
// exceeds u * (total probability). Zero-probability candidates are never chosen. Expects p from
// apply_softmax; c must not be empty.
size_t draw_index(const Candidates& c, double u);

}  // namespace edgelm::sample
