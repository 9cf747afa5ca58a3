// One drafted token from a draft source's logits row, shared by the drafters (speculative.cpp's
// ModelDrafter, mtp_drafter.cpp's MtpDrafter).
//
// Job: with the sequence's own sampler over its tokens plus the drafts so far, a greedy
// sequence gets the argmax (proposed with certainty: no distribution kept); any other appends
// the drawn token and its full distribution to draft_probs, which the verifier's rejection
// sampling reads.
// Invariants: hist and probs are the caller's scratch (reused, not kept); nothing else changes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace edgelm::sample {
class Sampler;
}

namespace edgelm::engine {

struct Sequence;

void append_draft_token(Sequence& s, sample::Sampler& smp, std::span<float> row, std::vector<int32_t>& hist,
                        std::vector<float>& probs);

}  // namespace edgelm::engine
