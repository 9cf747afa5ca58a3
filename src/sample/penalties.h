// Repetition penalties: adjust raw logits of tokens that already occurred in the sequence.
//
// Three penalties, all over the same window of recent tokens, applied together in one pass:
//   repeat    (llama.cpp / CTRL): logit > 0 ? logit / repeat : logit * repeat, once per token,
//             however often it occurred. repeat > 1 discourages, < 1 encourages, 1 is off.
//   presence  (OpenAI): logit -= presence once if the token occurred at all.
//   frequency (OpenAI): logit -= count * frequency.
// The window is the last `last_n` tokens of the history (prompt + generated): 0 turns all
// penalties off, -1 uses the whole history.
//
// Invariants: only logits of tokens in the window change; a token outside [0, n_vocab) in the
// history is ignored (it has no logit to penalize). Cost: O(w log w) for a window of w tokens,
// independent of the vocabulary size, so it stays cheap for 150k-token vocabularies.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/candidates.h"  // TokenId

namespace edgelm::sample {

struct PenaltyParams {
  float repeat = 1.0f;      // 1: off; must be > 0
  float presence = 0.0f;    // 0: off
  float frequency = 0.0f;   // 0: off
  int32_t last_n = 64;      // window of recent tokens; 0: off, -1: whole history
};

// True when the penalties cannot change any logit (all neutral or an empty window).
bool penalties_are_off(const PenaltyParams& params);

// The tail of `history` the penalties look at.
std::span<const TokenId> penalty_window(std::span<const TokenId> history, int32_t last_n);

// Applies the penalties to logits [n_vocab] in place. `scratch` is reused storage for the sorted
// window, so the per-token hot path does not allocate once it has grown.
void apply_penalties(std::span<float> logits, std::span<const TokenId> history,
                     const PenaltyParams& params, std::vector<TokenId>& scratch);
void apply_penalties(std::span<float> logits, std::span<const TokenId> history,
                     const PenaltyParams& params);

}  // namespace edgelm::sample
