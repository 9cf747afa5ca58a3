// Repetition penalties; see penalties.h for the semantics.
#include "sample/penalties.h"

#include <algorithm>

namespace edgelm::sample {

bool penalties_are_off(const PenaltyParams& params) {
  return params.last_n == 0 ||
         (params.repeat == 1.0f && params.presence == 0.0f && params.frequency == 0.0f);
}

std::span<const TokenId> penalty_window(std::span<const TokenId> history, int32_t last_n) {
  if (last_n == 0) return {};
  if (last_n < 0 || static_cast<size_t>(last_n) >= history.size()) return history;
  return history.last(static_cast<size_t>(last_n));
}

void apply_penalties(std::span<float> logits, std::span<const TokenId> history,
                     const PenaltyParams& params, std::vector<TokenId>& scratch) {
  if (penalties_are_off(params)) return;
  const std::span<const TokenId> window = penalty_window(history, params.last_n);
  if (window.empty()) return;

  // Counting by sorting a copy of the window avoids a [n_vocab] count array (600 KB to clear per
  // token at 150k vocab) and a hash map; windows are small (64 by default).
  // assign() would grow the buffer to exactly the window, i.e. on every token while the window
  // fills up; grow geometrically instead so a sequence's steps stop allocating.
  if (scratch.capacity() < window.size()) scratch.reserve(std::max<size_t>(window.size(), 2 * scratch.capacity()));
  scratch.assign(window.begin(), window.end());
  std::sort(scratch.begin(), scratch.end());

  const auto n_vocab = static_cast<int64_t>(logits.size());
  for (size_t i = 0; i < scratch.size();) {
    const TokenId id = scratch[i];
    size_t j = i;
    while (j < scratch.size() && scratch[j] == id) ++j;
    const auto count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || id >= n_vocab) continue;

    float& logit = logits[static_cast<size_t>(id)];
    // Dividing a negative logit would move it towards 0, i.e. make the token more likely; the
    // sign split keeps "repeat > 1" a penalty on both sides (llama.cpp semantics).
    logit = logit > 0.0f ? logit / params.repeat : logit * params.repeat;
    logit -= count * params.frequency + params.presence;
  }
}

void apply_penalties(std::span<float> logits, std::span<const TokenId> history,
                     const PenaltyParams& params) {
  std::vector<TokenId> scratch;
  apply_penalties(logits, history, params, scratch);
}

}  // namespace edgelm::sample
