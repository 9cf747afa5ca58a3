// Draft sampling, shared by the drafters (speculative.cpp's ModelDrafter, mtp_drafter.cpp's
// MtpDrafter, assistant_drafter.cpp's AssistantDrafter).
//
// Job: append_draft_token draws one drafted token from a draft source's logits row: with the
// sequence's own sampler over its tokens plus the drafts so far, a greedy sequence gets the
// argmax (proposed with certainty: no distribution kept); any other appends the drawn token and
// its full distribution to draft_probs, which the verifier's rejection sampling reads.
// draft_state gives a drafter's per-sequence state, made on first use with the draft sampler: the
// request's sampling parameters on a stream of the drafter's own (seed ^ stream), reproducible
// from the request's seed and independent of the target's draws.
// Invariants: hist and probs are the caller's scratch (reused, not kept); nothing else changes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "sample/sampler.h"

namespace edgelm::engine {

void append_draft_token(Sequence& s, sample::Sampler& smp, std::span<float> row, std::vector<int32_t>& hist,
                        std::vector<float>& probs);

// The state of sequence s in `states`, made from its draft sampling parameters (State is
// constructible from sample::SamplingParams) on first use.
template <typename State>
State& draft_state(std::map<RequestId, std::unique_ptr<State>>& states, const Sequence& s, uint64_t stream) {
  std::unique_ptr<State>& st = states[s.id];
  if (!st) {
    sample::SamplingParams p = s.req.sampling;
    p.seed ^= stream;
    st = std::make_unique<State>(p);
  }
  return *st;
}

}  // namespace edgelm::engine
