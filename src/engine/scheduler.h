// The continuous-batching scheduler: decides, every step, which sequences run and with how many
// tokens, and keeps the KV cache from ever running out.
//
// Policy (vLLM's shape):
//  - Order: priority (higher first), then arrival (FCFS). Running sequences are served before
//    waiting ones; within a step, decode tokens (1 per sequence) and the chunks of prompts still
//    being prefilled share a token budget (max_batch_tokens).
//  - Admission: a waiting sequence joins while the running set is below the batch cap, tokens
//    remain in the budget, and its blocks keep the pool's used fraction at or below the
//    watermark (so running sequences keep room to grow). Cached prefix blocks are reused on
//    admission (KvManager::match_prefix); unused cached blocks are evicted (LRU) before any
//    sequence is preempted, because they count as free.
//  - Pressure: when a running sequence cannot get a block, the newest sequence that has not been
//    scheduled in this step (lowest priority, latest arrival; possibly itself) is preempted by
//    recompute: its blocks are freed and it waits again with all its tokens (prompt + output) as
//    the prompt of its next admission. Its sampler and text state are kept, so its output is
//    the same as without preemption. No allocation can fail past this point, so the engine never
//    runs out of KV memory; a request that could not fit even alone is refused at admission.
//  - Speculation: a decoding sequence with a draft (Sequence::draft) gets 1 + draft tokens when
//    the budget still leaves one token for every running sequence after it and its blocks fit
//    without preempting anyone; otherwise its draft is dropped and it decodes one token.
//  - Hybrid recurrent models: a prefix hit keeps only the blocks up to the longest recurrent
//    state snapshot inside it (the prefix hook); the rest of the prompt is computed.
//  - Images (Request::images): a slice never ends inside an image; it stops before it, or waits
//    for a step with budget for the whole image (a prefix hit may resume inside one: only the
//    rest is computed then, with the earlier part's K/V from the cache).
//  - Disk tier: a waiting sequence whose prefix is being read back from disk (disk_wait) is
//    passed over by admission (others behind it go first) until the engine clears the flag.
//  - Batch cap: adapts within [1, max_batch_size]: shrinks by a quarter when a step overshoots
//    target_step_ms, grows by one when steps are under half the target and sequences are
//    waiting on the cap.
// Single-threaded, like the engine step loop that calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/constraint.h"
#include "engine/request.h"
#include "engine/speculative.h"
#include "engine/text_stream.h"
#include "kv/kv_manager.h"
#include "model/mrope.h"
#include "sample/sampler.h"

namespace edgelm::engine {

// One request in flight.
struct Sequence {
  Sequence(RequestId id_, Request req_, uint64_t arrival_)
      : id(id_), req(std::move(req_)), arrival(arrival_), sampler(req.sampling) {}

  RequestId id;
  Request req;
  uint64_t arrival;             // admission order, for FCFS
  std::vector<int32_t> tokens;  // [n_prompt + n_generated] prompt, then generated tokens
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  int32_t n_cached = 0;  // prompt tokens served from the prefix cache at first admission
  bool admitted_once = false;
  int32_t n_preemptions = 0;
  kv::SeqKv kv;
  sample::Sampler sampler;
  std::optional<TextStream> text;             // when the engine has a tokenizer
  std::optional<Constraint> constraint;       // with Request::grammar
  std::string error;                          // why it ends with Finish::error (not a forward's failure)
  std::optional<ReasoningTracker> reasoning;  // with Request::reasoning.enabled
  ReasoningCut reasoning_cut = ReasoningCut::none;
  // Speculative decoding (speculative.h): this step's proposal, verified after the pending token,
  // and the per-sequence adaptive k.
  std::vector<int32_t> draft;
  std::vector<float> draft_probs;  // [draft.size(), n_vocab] proposal distributions; empty: certain
  SpecController spec;
  // Hybrid models: the sequence's recurrent state slot (kv::StateStore), from its first step
  // until it finishes; a preempted sequence keeps it and restarts it from position 0.
  int32_t state_slot = -1;
  // Hybrid models: a prefix hit continues from a state snapshot (kv/state_snapshots.h), loaded
  // into the slot before the sequence's next slice: the snapshot's block hash and the tokens it
  // absorbed (0: none to load).
  uint64_t restore_hash = 0;
  int32_t restore_tokens = 0;
  // M-RoPE models: the prompt's images as model/mrope.h's map (from req.images at admission; the
  // rotation positions of every step of the sequence, prefix hits and restores included, follow
  // from it); empty for other models and text-only requests.
  std::vector<model::MropeImage> mrope;
  // The KV disk tier (kv/disk_tier.h) is reading blocks of this waiting sequence's prompt back:
  // the scheduler admits others meanwhile and this one once the engine installed them.
  bool disk_wait = false;
  int32_t disk_asked = 0;  // blocks asked of the disk tier
  // Hybrid models: the longest prefix asked of the disk ends at a state snapshot that is on disk
  // too (not in RAM); without it the blocks read back are no use to this request.
  bool disk_state = false;
  int32_t disk_ram_keys = -1;  // then: the disk blocks up to a shorter snapshot RAM holds (-1: none)

  // Tokens whose K/V still have to be computed (>= 1 for every live sequence).
  int32_t n_pending() const { return static_cast<int32_t>(tokens.size()) - kv.n_tokens; }
};

struct SchedulerOptions {
  int32_t max_batch_tokens = 512;  // tokens per step, decode and prefill together
  int32_t max_batch_size = 32;     // running sequences at most
  double watermark = 0.8;          // admissions pause above this used fraction of the pool
  double target_step_ms = 250.0;   // adaptive batch cap target; <= 0 keeps the cap at the max
  // > 0: a prompt chunk that does not finish its prompt ends at a multiple of this position when
  // it reaches one (set by the engine for hybrid models to the delta rule's chunk, so that each
  // whole chunk of a prompt is computed in one run in the chunked form, model/deltanet.h,
  // whatever else shares the step's budget). An image that crosses such a multiple is computed
  // whole in an unaligned chunk instead (an image is never split across steps).
  int32_t prompt_align = 0;
};

struct ScheduledSlice {
  Sequence* seq;
  int32_t n_tokens;     // positions [seq->kv.n_tokens, + n_tokens), reserved in the KV
  bool logits;          // the slice ends at the sequence's last token: sample after it
  int32_t n_draft = 0;  // the last n_draft tokens are seq->draft, to verify (n_tokens = 1 + n_draft)
};

class Scheduler {
 public:
  Scheduler(kv::KvManager& kv, kv::BlockPool& pool, SchedulerOptions opts);

  void add(std::unique_ptr<Sequence> seq);
  // Removes the sequence (waiting or running) and frees its blocks; nullptr if unknown.
  std::unique_ptr<Sequence> remove(RequestId id);
  Sequence* find(RequestId id);

  // Plans one step and reserves the KV room of every slice (commit or cancel them after the
  // forward). Empty when nothing can run. The plan lives in the scheduler (reused, so a warm
  // step allocates nothing) and is valid until the next schedule().
  const std::vector<ScheduledSlice>& schedule();
  // Called at admission after a prefix match of `matched` > 0 tokens; returns the tokens kept
  // (it may shrink the match, KvManager::shrink_prefix). Hybrid models stop at a state snapshot.
  void set_prefix_hook(std::function<int32_t(Sequence&, int32_t)> hook) { prefix_hook_ = std::move(hook); }
  // Feeds the adaptive batch cap with the duration of the step just run.
  void observe_step(double step_ms);

  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::vector<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  int32_t batch_cap() const { return cap_; }
  int64_t n_preemptions() const { return n_preemptions_; }
  // All sequences holding blocks (for KvManager::check_invariants).
  std::vector<const kv::SeqKv*> live_kv() const;

 private:
  void preempt(size_t running_index);
  void insert_waiting(std::unique_ptr<Sequence> seq);

  kv::KvManager& kv_;
  kv::BlockPool& pool_;
  SchedulerOptions opts_;
  int32_t cap_;
  bool capped_last_step_ = false;  // a waiting sequence was held back by the cap
  int64_t n_preemptions_ = 0;
  std::vector<std::unique_ptr<Sequence>> running_;  // in priority, arrival order
  std::vector<std::unique_ptr<Sequence>> waiting_;  // in priority, arrival order
  std::vector<ScheduledSlice> plan_;                // the last schedule()
  std::function<int32_t(Sequence&, int32_t)> prefix_hook_;
};

}  // namespace edgelm::engine
