// Speculative decoding for the batching engine: cheap proposals of the next few tokens, verified
// by the target model in one forward over k+1 positions.
//
// Job:
//  - Drafter: proposes up to k tokens per decoding sequence. NgramDrafter (prompt lookup) copies
//    the continuation of the latest earlier occurrence of the sequence's last n tokens (longest n
//    first); ModelDrafter runs a smaller model of the same vocabulary through its own StepModel,
//    KvStore, BlockPool and KvManager, batched over all speculating sequences, k sequential draft
//    steps per engine step. MtpDrafter (engine/mtp_drafter.h) drafts with a qwen35 file's own
//    MTP head over the target's hidden states, which the engine hands it after each step
//    (Drafter::observe, StepBatch::want_hidden). AssistantDrafter (engine/assistant_drafter.h)
//    drafts with a Gemma 4 assistant file over the target's hidden states and its K/V in place.
//  - verify(): the acceptance rule. Greedy: a draft token is accepted iff it is the target's
//    argmax (after penalties), so the output equals plain greedy decoding token for token.
//    Sampling: draft token x, proposed with probability q(x), is accepted with probability
//    min(1, p(x) / q(x)) where p is the target's final distribution (Sampler::distribution:
//    penalties, filters, temperature); on a rejection the token is drawn from
//    norm(max(0, p - q)) and verification stops; when every draft is accepted one more token is
//    drawn from p. Each emitted token is therefore distributed exactly as the target's.
//    Prompt lookup proposes with certainty (q = a point mass).
//  - SpecController: per-sequence adaptive k. k grows by one after a fully accepted draft,
//    drops to one past the accepted count after a rejection, and falls to 0 (plain decoding)
//    while the running acceptance rate stays below a threshold (then probes again with k = 1
//    after a cool-down that doubles after each failed probe, up to 128 steps).
//
// Invariants:
//  - Rollback: the target reserves 1 + n_draft KV positions and commits only the pending token
//    plus the accepted drafts (KvManager::commit publishes only committed, hence correct, full
//    blocks; cancel releases the rest). The ModelDrafter holds its fed tokens as a reservation of
//    its own KV and, after the step (sync), commits the prefix that equals the sequence's tokens
//    and releases the rest, so neither pool keeps K/V of a rejected token.
//  - A draft never makes a sequence exceed max_new_tokens or its context (the engine bounds k).
// Single-threaded, driven by Engine::step().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/step_model.h"
#include "kv/block_pool.h"
#include "kv/kv_manager.h"
#include "kv/kv_store.h"
#include "model/gemma4_assistant.h"
#include "sample/sampler.h"

namespace edgelm::engine {

struct Sequence;
using RequestId = uint64_t;

enum class SpecMode { off, ngram, draft, mtp, assistant };

struct SpecOptions {
  SpecMode mode = SpecMode::off;
  int32_t ngram_n = 3;               // ngram: longest suffix matched (then shorter ones, down to 1)
  int32_t draft_max = 8;             // k at most
  int32_t draft_min = 0;             // k at least while speculating; 0 lets k fall to plain decoding
  StepModel* draft_model = nullptr;  // draft: same vocabulary as the target; outlives the engine
  // mtp: the target model (its MTP head drafts, engine/mtp_drafter.h) and a pool to run the head on;
  // both outlive the engine.
  const model::Model* mtp_model = nullptr;
  ThreadPool* mtp_pool = nullptr;
  // assistant: a Gemma 4 assistant (engine/assistant_drafter.h) drafting for mtp_model (the
  // target) on mtp_pool; outlives the engine.
  const model::Gemma4Assistant* assistant = nullptr;
  // Pause speculation while it measures slower than plain decoding (SpecGate). Tests that need
  // every step to speculate, whatever the timing, turn it off; so does draft_min > 0.
  bool cost_gate = true;
};

// Ranges, and a draft model in draft mode. The message names the flag.
Status validate(const SpecOptions& o);
// "off", "ngram", "ngram:N", "mtp" (--spec) into o.mode / o.ngram_n.
Status parse_spec_mode(std::string_view text, SpecOptions& o);

class SpecController {
 public:
  SpecController() = default;
  SpecController(int32_t k_min, int32_t k_max);
  // Drafts to propose this step (0: decode plainly).
  int32_t next_k();
  void observe(int32_t proposed, int32_t accepted);
  int32_t k() const { return k_; }

 private:
  int32_t k_min_ = 0, k_max_ = 0, k_ = 0;
  double rate_ = 0.5;  // moving average of accepted / proposed
  int32_t cooldown_ = 0, backoff_ = 8;
};

// Speculation pays only when steps with drafts emit tokens faster than plain steps; acceptance
// alone does not say so (a draft as slow as the target loses even at 100%). SpecGate measures
// both on decode-only steps (no prompt chunk in the batch), per number of decoding sequences
// (throughput grows with the batch, so only equal batches compare): an exponentially weighted
// tokens-per-millisecond of steps with and without drafts. When speculating is measurably slower
// than plain decoding at the current batch size, it pauses speculation for a number of plain
// decode steps (doubling after each losing probe, up to kMaxPause), then lets it probe again.
// Greedy output never depends on it; seeded sampling does, since drafts change how the random
// stream is used and the gate follows wall-clock timings.
class SpecGate {
 public:
  // Whether the step about to run (with `n_decoding` sequences in decode) may carry drafts.
  bool allow(int32_t n_decoding) const;
  // A finished decode-only step: whether it carried drafts, tokens it emitted, its time.
  void observe(int32_t n_decoding, bool speculative, int32_t n_emitted, double step_ms);
  // Tokens per millisecond measured at this batch size (< 0: none yet).
  double plain_rate(int32_t n_decoding) const;
  double spec_rate(int32_t n_decoding) const;

  static constexpr int32_t kFirstPause = 8;   // plain steps after the first losing probe
  static constexpr int32_t kMaxPause = 1024;  // at most this many plain steps between probes
  static constexpr int32_t kProbeSteps = 4;   // speculative steps measured before judging

 private:
  struct Rates {
    double plain = -1.0, spec = -1.0;  // tokens per ms, exponentially weighted
    int32_t n_spec = 0;                // speculative steps since the last judgement
    int32_t pause = 0;                 // plain decode steps still to run before probing again
    int32_t next_pause = kFirstPause;
  };
  std::map<int32_t, Rates> by_batch_;
};

struct Verdict {
  std::vector<int32_t> tokens;  // accepted drafts, then one token of the target's
  int32_t n_accepted = 0;
};

// logits: [draft.size() + 1, n_vocab], the target's logits after the pending token and after
// each draft token (used as scratch). history: the sequence's tokens (prompt + generated) before
// the drafts. draft_probs: [draft.size(), n_vocab] the proposal distributions, or empty when each
// draft token was proposed with certainty.
Verdict verify(sample::Sampler& sampler, std::span<float> logits, std::span<const int32_t> history, int32_t n_prompt,
               std::span<const int32_t> draft, std::span<const float> draft_probs);

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Fills seqs[i]->draft with at most k[i] tokens (and draft_probs, see verify()).
  virtual void propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) = 0;
  // After the step, with s.tokens final: keeps the draft state that matches, rolls back the rest.
  virtual void sync(Sequence& s) { (void)s; }
  // The request is gone: drop its state.
  virtual void release(RequestId id) { (void)id; }
  // Whether the engine should hand over the target's hidden states (StepBatch::want_hidden).
  virtual bool wants_hidden() const { return false; }
  // After a step: the target's final-normed hidden states [n, n_embd] of s's committed positions
  // [pos0, pos0 + n) that the step computed (every slice, drafted or not).
  virtual void observe(const Sequence& s, int32_t pos0, std::span<const float> rows) {
    (void)s, (void)pos0, (void)rows;
  }
  virtual void check_invariants() const {}
  virtual int32_t kv_blocks_used() const { return 0; }
  // The engine's (target's) K/V store, handed over once the engine owns it (drafters that read
  // the target's K/V in place: engine/assistant_drafter.h).
  virtual void attach_target_kv(const kv::KvStore& store) { (void)store; }
};

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int32_t n) : n_(n) {}
  void propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) override;
  // The continuation (up to k tokens) of the latest earlier occurrence of tokens' last m tokens,
  // for the largest m <= n that occurs; empty if none.
  static std::vector<int32_t> lookup(std::span<const int32_t> tokens, int32_t n, int32_t k);

 private:
  int32_t n_;
};

class ModelDrafter final : public Drafter {
 public:
  // A KV pool for the draft of kv_memory_bytes (at least 2 blocks).
  static Result<std::unique_ptr<ModelDrafter>> create(StepModel& draft, int32_t block_size, kv::KvType kv_type,
                                                      size_t kv_memory_bytes);
  void propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) override;
  void sync(Sequence& s) override;
  void release(RequestId id) override;
  void check_invariants() const override;
  int32_t kv_blocks_used() const override { return pool_.n_used(); }

 private:
  struct State {
    // Draft KV is private: nothing of it is ever published.
    explicit State(const sample::SamplingParams& p) : sampler(p) { kv.cache_prefix = false; }
    kv::SeqKv kv;
    sample::Sampler sampler;   // the draft's own chain and random stream
    std::vector<int32_t> fed;  // tokens fed this step at positions [kv.n_tokens, ...): reserved, not committed
  };
  ModelDrafter(StepModel& draft, kv::KvStore store, int32_t block_size);
  State& state(const Sequence& s);

  StepModel& model_;
  kv::KvStore store_;
  kv::BlockPool pool_;
  kv::KvManager kv_;
  std::map<RequestId, std::unique_ptr<State>> states_;
  StepBatch batch_;
  std::vector<float> logits_;  // [drafting sequences, n_vocab]
  std::vector<float> probs_;   // [n_vocab]
  std::vector<int32_t> hist_;
};

}  // namespace edgelm::engine
