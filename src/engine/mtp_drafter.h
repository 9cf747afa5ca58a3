// Speculative drafts from a qwen35 file's own MTP ("nextn") head (--draft mtp / --spec mtp).
//
// Job: propose up to k tokens per decoding sequence with the MTP block (model::MtpWeights) run
// as a one-layer model (model::Model::mtp_head) over a paged K/V store of its own, batched over
// all drafting sequences. Entry j of a sequence's MTP K/V is the MTP block applied at main
// position i = base + j to the row eh_proj(concat(enorm(embd(token i + 1)), hnorm(h_i))), h_i
// the main model's final-normed hidden state at position i (what the reference hands its MTP
// head; the rotary position is j: attention sees only relative positions). Drafting from a
// sequence whose main K/V holds positions [0, N) and whose token N is pending:
//  1. catch up: the entries of main positions not yet in the MTP K/V, up to N - 1 (their h from
//     observe(), their next tokens final); the last one's logits give draft 1;
//  2. chain: draft j + 1 from the entry (embd(draft j), the MTP block's own final-normed output
//     of the previous entry), as the reference chains its head.
// Invariants:
//  - Only final entries stay: the catch-up entries are committed by sync(); the chained ones
//    (built on the head's own hidden state, not the main model's) are released, and rebuilt from
//    the main model's hidden states once the verification has accepted their tokens.
//  - The hidden rows come from the engine after each step (observe(): committed positions only),
//    so rollback needs nothing more. A gap (prefix-cache hit, preemption, recomputation) restarts
//    the sequence's MTP K/V at the first position observed after it (less context, same output).
//  - The draft never changes the output: verification (speculative.h) decides every token.
// Single-threaded, driven by Engine::step().
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch_forward.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace edgelm::engine {

class MtpDrafter final : public Drafter {
 public:
  // A K/V store of n_blocks blocks (at least 2) for the head. Error: target without MTP block.
  static Result<std::unique_ptr<MtpDrafter>> create(const model::Model& target, ThreadPool& pool, int32_t block_size,
                                                    kv::KvType kv_type, int32_t n_blocks);
  void propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) override;
  void sync(Sequence& s) override;
  void release(RequestId id) override;
  bool wants_hidden() const override { return true; }
  void observe(const Sequence& s, int32_t pos0, std::span<const float> rows) override;
  void check_invariants() const override;
  int32_t kv_blocks_used() const override { return pool_.n_used(); }

 private:
  struct State {
    explicit State(const sample::SamplingParams& p) : sampler(p) {
      kv.cache_prefix = false;  // private: nothing of it is ever published
    }
    kv::SeqKv kv;
    sample::Sampler sampler;
    int32_t base = 0;        // main position of MTP entry 0
    int32_t h_pos = 0;       // main position of hidden row 0; base + entries (committed or pending) == h_pos
    std::vector<float> h;    // [rows, n_embd] main hidden states not yet in the MTP K/V
    int32_t n_catchup = 0;   // reserved entries of this step that are final (committed by sync)
    std::vector<int32_t> fed;  // tokens of the reserved entries (catch-up, then chained)
  };
  MtpDrafter(const model::Model& target, std::unique_ptr<model::Model> head, ThreadPool& pool, kv::KvStore store,
             int32_t block_size);
  State& state(const Sequence& s);
  void reset(State& st, int32_t pos);
  // rows [n, n_embd] of eh_proj(concat(enorm(embd(tokens[t])), hnorm(hidden[t]))) into in_.
  void input_rows(std::span<const int32_t> tokens, const float* hidden, int64_t n);

  const model::Model& target_;
  std::unique_ptr<model::Model> head_;
  ThreadPool& pool_threads_;
  kv::KvStore store_;
  kv::BlockPool pool_;
  kv::KvManager kv_;
  std::map<RequestId, std::unique_ptr<State>> states_;
  StepBatch batch_;
  BatchScratch scratch_;
  kernels::MatmulScratch mm_;
  std::vector<float> cat_;     // [n, 2 * n_embd]
  std::vector<float> in_;      // [n, n_embd]
  std::vector<float> hin_;     // [n, n_embd] hidden rows of a step's entries
  std::vector<float> logits_;  // [drafting sequences, n_vocab]
  std::vector<float> probs_;
  std::vector<int32_t> hist_;
};

}  // namespace edgelm::engine
