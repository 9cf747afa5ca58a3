// Speculative drafts from a Gemma 4 assistant file (model/gemma4_assistant.h; --draft-model FILE
// with a "gemma4_mtp" file: the architecture picks this drafter).
//
// Job: propose up to k tokens per decoding sequence with the assistant, batched over all drafting
// sequences: draft step j runs one row per sequence still drafting (model/gemma4_assistant.h gives
// the step). The assistant has no K/V: its layers attend over the target's paged K/V store,
// read in place through the sequence's block table (AttnLayer over the target's store), never
// copied; drafted tokens are never written to it.
// Input of a sequence whose target K/V holds [0, n) with token n pending: the pending token and
// the target's final-normed hidden state at n - 1, which the engine hands over after each step
// (observe(): committed positions only, so nothing needs rolling back after a rejection).
// Invariants:
//  - A sequence without the hidden state of position n - 1 (its last step computed none, e.g.
//    right after a prefix-cache hit that skipped the whole prompt) drafts nothing this step.
//  - The draft never changes the output: verification (speculative.h) decides every token.
// Single-threaded, driven by Engine::step().
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch_attention.h"
#include "engine/batch_forward.h"
#include "engine/speculative.h"
#include "model/gemma4_assistant.h"
#include "model/model.h"

namespace edgelm::engine {

class AssistantDrafter final : public Drafter {
 public:
  // Error: the assistant does not fit the target (Gemma4Assistant::check_target).
  static Result<std::unique_ptr<AssistantDrafter>> create(const model::Model& target,
                                                          const model::Gemma4Assistant& assistant, ThreadPool& pool);
  void attach_target_kv(const kv::KvStore& store) override { store_ = &store; }
  void propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) override;
  void release(RequestId id) override { states_.erase(id); }
  bool wants_hidden() const override { return true; }
  void observe(const Sequence& s, int32_t pos0, std::span<const float> rows) override;

  // One draft step of n rows (exposed for tests): row r feeds tokens[r] with hidden h[r] at
  // position pos[r] over the target K/V of blocks[r] ([0, pos[r]) written). Writes logits
  // [n, n_vocab] and the next hidden rows h_out [n, n_backbone].
  void step(std::span<const int32_t> tokens, const float* h, std::span<const int32_t> pos,
            std::span<const std::span<const kv::BlockId>> blocks, float* logits, float* h_out);

 private:
  struct State {
    explicit State(const sample::SamplingParams& p) : sampler(p) {}
    sample::Sampler sampler;
    int32_t h_pos = -1;     // target position of h
    std::vector<float> h;   // [n_backbone] the target's final-normed hidden state there
  };
  AssistantDrafter(const model::Model& target, const model::Gemma4Assistant& a, ThreadPool& pool);
  State& state(const Sequence& s);

  const model::Model& target_;
  const model::Gemma4Assistant& a_;
  ThreadPool& pool_;
  const kv::KvStore* store_ = nullptr;
  std::vector<int32_t> kv_index_;  // per assistant layer: the target K/V layer it reads
  std::map<RequestId, std::unique_ptr<State>> states_;
  // Scratch.
  std::vector<float> in_, x_, xn_, q_, attn_, proj_, gate_, up_, logits_, h_in_, h_out_, probs_;
  std::vector<int32_t> tok_seq_, tok_pos_, hist_;
  std::vector<BatchSeq> bseqs_;
  AttnScratch attn_scratch_;
  kernels::MatmulScratch mm_;
};

}  // namespace edgelm::engine
