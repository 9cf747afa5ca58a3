// The continuous-batching engine: many sequences served at once over a paged KV cache.
//
// Job: accept requests (add_request), advance every running sequence by one step per step()
// call (one batched forward: decode tokens of running sequences plus prompt chunks of new ones,
// each weight read once per step), sample, stream tokens and text, and end requests on stop,
// length, cancel, deadline or error. The scheduler (scheduler.h) decides what runs; the KV
// cache (kv/) shares prompt prefixes between requests.
//
// Invariants:
//  - max_new_tokens is exact: a request that does not stop earlier gets exactly that many tokens.
//  - Every request gets exactly one finishing event; after it, the request holds no KV block.
//  - cancel(id) frees the request's blocks before it returns.
//  - Greedy output does not depend on what else is in the batch, on prefix-cache hits or on
//    preemption: every token's K/V and logits are computed by the same per-token operations.
//    (With tile GEMM kernels, gemm.h, quantized matmuls of large batches may differ from small
//    ones by float reassociation. Likewise hybrid models' delta rule runs whole position-aligned
//    chunks of 64 tokens in its chunked form, model/deltanet.h: the scheduler ends prompt
//    pieces at multiples of 64 when the step budget reaches one and every snapshot boundary
//    splits the run, but a piece cut mid-chunk by a nearly spent budget runs that chunk token by
//    token, which may differ in the last float bits.)
//  - Hybrid recurrent models (qwen35): each running sequence has a recurrent state slot; with
//    state_snapshot_interval, states are copied at block boundaries and a prefix hit continues
//    from the longest snapshot inside it (the same tokens as a cold run); a verification that
//    rejects a draft restores the state after its pending token and recomputes the accepted
//    tokens in the next step, so speculation stays exact.
//  - Speculative decoding (opts.spec, speculative.h) keeps all of the above: drafts are bounded
//    by max_new_tokens and the context, accepted tokens pass through the same stop checks one by
//    one, greedy output equals plain greedy decoding, and rejected tokens leave no KV behind.
//  - KV disk tier (opts.kv_disk, kv/disk_tier.h, engine_disk.cpp): published blocks (and hybrid
//    models' published state snapshots) are written through by the tier's own thread (the step
//    only copies their bytes into its bounded queue); a request whose prefix blocks RAM lacks
//    but the disk holds waits, alone, for them (and the snapshot at their end) to be read back
//    straight into KV blocks held for it (never published unless verified), then matches them
//    like RAM hits, so its output is the same as without the tier.
//  - With check_invariants, the KV block invariants (no leak, no double free, refcounts match
//    the block tables) are asserted after every step; on by default in debug builds.
// Not thread-safe: one thread drives add_request / step / cancel.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/speculative.h"
#include "engine/step_model.h"
#include "kv/block_pool.h"
#include "kv/disk_tier.h"
#include "kv/kv_manager.h"
#include "kv/kv_store.h"
#include "kv/state_snapshots.h"
#include "kv/state_store.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::engine {

// The KV disk tier (kv/disk_tier.h; --kv-disk, --kv-disk-size): off when dir is empty.
struct KvDiskOptions {
  std::string dir;
  uint64_t max_bytes = uint64_t{2} << 30;
  // What names the model's content (model file, chat template, mmproj: kv/disk_namespace.h),
  // set by the server; the engine mixes in its KV type, block size and layout, RoPE and context.
  uint64_t content_namespace = 0;
  size_t queue_bytes = size_t{64} << 20;  // blocks waiting to be written at most
};

struct EngineOptions {
  size_t kv_memory_bytes = size_t{512} << 20;  // KV pool budget (--kv-memory)
  kv::KvType kv_type = kv::KvType::f16;        // --kv-type
  int32_t block_size = 16;                     // tokens per KV block
  int32_t n_ctx = 0;                           // positions per sequence; 0: the model's trained context
  SchedulerOptions scheduler;
  SpecOptions spec;  // speculative decoding; off by default
  // Hybrid recurrent models (qwen35): copy a sequence's recurrent state at the end of every
  // this-many-th KV block (--state-snapshot-interval), so that a later request sharing the prefix
  // continues from the longest snapshot inside its KV prefix hit and computes only the rest; 0:
  // no snapshots and no prefix reuse. 16 blocks (256 tokens at the default block size): a real
  // model's state weighs about 100 KV blocks, so snapshotting every block would spend the budget
  // on states; a hit then recomputes at most 255 tokens, less than one prefill step. The
  // snapshots' memory comes out of kv_memory_bytes (engine/memory_split.h).
  int32_t state_snapshot_interval = 16;
  // Commit the KV pool's memory at create() instead of page by page as blocks are first written,
  // and a hybrid model's recurrent-state slots for max_batch_size sequences (part of the same
  // budget, engine/memory_split.h) instead of at each sequence's first step.
  // Off by default: a server's pool costs memory only as far as it has been used. bench
  // --concurrency turns it on because it builds a fresh engine per repetition and times what a
  // warm server does, whose pages are already there.
  bool prefault_kv = false;
  KvDiskOptions kv_disk;
#ifdef NDEBUG
  bool check_invariants = false;
#else
  bool check_invariants = true;
#endif
};

// Checks ranges; the message names the option.
Status validate(const EngineOptions& opts);

// Upper bounds (seconds) of the mask-time histogram's buckets, without +Inf.
inline constexpr std::array<double, 10> kMaskTimeBounds = {1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4,
                                                           5e-4, 1e-3,   2.5e-3, 5e-3, 1e-2};
struct MaskTimeStats {
  std::array<int64_t, kMaskTimeBounds.size() + 1> buckets{};  // per bucket (not cumulative), the last +Inf
  double sum_s = 0.0;
  int64_t count = 0;
  void observe(double seconds);
};

struct EngineStats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;
  int32_t batch_cap = 0;              // the adaptive cap on running sequences
  int64_t waiting_prompt_tokens = 0;  // prompt tokens of the waiting requests (the router's queue estimate)
  int64_t running_tokens_left = 0;    // tokens the running requests may still generate (max_new_tokens left)
  int32_t kv_blocks = 0;
  int32_t kv_blocks_used = 0;    // held by sequences
  int32_t kv_blocks_cached = 0;  // free but still holding a reusable prefix
  // Hybrid models: recurrent-state slots held by sequences, and the memory of all slots (kept
  // for reuse after a sequence ends); 0 for models without recurrent layers.
  // state_bytes_live: the slots held by sequences (with speculation, their rollback copies too).
  int32_t state_slots_live = 0;
  int64_t state_bytes = 0;
  int64_t state_bytes_live = 0;
  // Hybrid models: recurrent-state snapshots at block boundaries (prefix reuse), their memory
  // (entries allocated so far) and the most the budget holds; snapshots dropped (evicted with
  // their KV block or by their own LRU); prompt tokens served from the prefix cache (KV + a
  // snapshot on hybrid models).
  int32_t state_snapshots = 0;
  int64_t state_snapshot_bytes = 0;
  int32_t state_snapshot_capacity = 0;
  int64_t state_snapshot_evictions = 0;
  int64_t prefix_tokens_hit = 0;
  int64_t prefix_queries = 0;  // prompt blocks looked up in the prefix cache
  int64_t prefix_hits = 0;
  int64_t n_preemptions = 0;
  int32_t last_step_tokens = 0;
  double last_step_ms = 0.0;
  // Speculative decoding: draft tokens sent to verification and those accepted (acceptance
  // rate = accepted / proposed), verification slices, and the draft model's KV blocks in use.
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_verify_steps = 0;
  int32_t spec_draft_kv_blocks_used = 0;
  // Constrained decoding: time to pick each constrained token's allowed set (mask or the
  // greedy shortcut), per token.
  MaskTimeStats mask_time;
  // The KV disk tier (disk_on false: none). Prompt blocks by the tier that served them at
  // admission: RAM (already cached), disk (read back), miss (computed); disk reads of whole
  // prefixes (jobs) and their summed wall time.
  bool disk_on = false;
  kv::DiskTierStats disk;
  int64_t tier_ram_blocks = 0, tier_disk_blocks = 0, tier_miss_blocks = 0;
  int64_t disk_fetches = 0;
  double disk_fetch_seconds = 0.0;
};

class Engine {
 public:
  // `model` (and `tok`, which may be null: then stop strings are refused and events carry no
  // text) must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(StepModel& model, const tokenizer::Tokenizer* tok, EngineOptions opts);

  // Queues a request. Errors: empty prompt, token outside the vocabulary, invalid sampling,
  // images out of order, outside the prompt, of the wrong size or longer than max_batch_tokens,
  // a bidirectional image on a hybrid recurrent model, an image without a grid that holds its
  // tokens on an M-RoPE model (Qwen3.5),
  // max_new_tokens < 0, prompt + max_new_tokens beyond the context or the whole KV pool, stop
  // strings without a tokenizer.
  Result<RequestId> add_request(Request req);
  // Runs one step; returns its events (each also passed to its request's on_event), valid until
  // the next step(). A warm decode step allocates nothing (tests/engine/test_engine_allocations.cpp):
  // buffers are reused and a request's token and block vectors are reserved at admission.
  const std::vector<TokenEvent>& step();
  // Ends the request now (its blocks are freed); its finishing event comes with the next
  // step(). False when the id is unknown or already finished.
  bool cancel(RequestId id);
  // Something is running, waiting, or an event is pending.
  bool has_work() const;

  EngineStats stats() const;
  // Drops the prefix cache: the cached (unused) RAM blocks when `ram`, every disk-tier file
  // when `disk` (after the queued writes). Returns the blocks and files dropped.
  std::pair<int32_t, int64_t> flush_prefix_cache(bool ram, bool disk);
  // Waits until the disk tier's queued writes are on disk (no-op without a tier).
  void drain_disk_writes();
  // The disk tier (null: none); set at create() and thread-safe (kv/disk_tier.h), so other
  // threads may wait on its writes.
  kv::DiskTier* disk_tier() const { return disk_.get(); }
  const EngineOptions& options() const { return opts_; }
  int32_t n_ctx() const { return n_ctx_; }

 private:
  Engine(StepModel& model, const tokenizer::Tokenizer* tok, EngineOptions opts, kv::KvStore store,
         std::unique_ptr<Drafter> drafter, int32_t n_snapshots, std::unique_ptr<kv::DiskTier> disk);
  // Disk tier (engine_disk.cpp): at add_request, asks the tier for the prompt's blocks that RAM
  // lacks (the sequence waits, disk_wait); at each step, installs the blocks read so far as
  // cached blocks (then the sequence's admission finds them like any RAM hit).
  void ask_disk(Sequence& s);
  void install_disk_reads();
  // Starts kv_populate_ when the disk holds blocks of this namespace.
  void populate_for_disk();
  // Hybrid models: queues the published snapshot `entry` (the state after n_tokens, the end of
  // a block of s) for the disk; installs a snapshot read back as a published one (false: it
  // does not fit this engine, or its block is not in RAM, or the store has no free entry).
  void write_snapshot(const Sequence& s, int32_t entry, int32_t n_tokens);
  bool install_snapshot(const kv::DiskBlock& b);
  struct DiskWriter final : kv::PublishListener {
    Engine* engine = nullptr;
    void on_publish(kv::BlockId b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) override;
  };
  // Scheduler prefix hook (hybrid models): keeps the longest matched prefix that ends at a state
  // snapshot and marks the snapshot for loading into the sequence's slot.
  int32_t match_snapshot(Sequence& s, int32_t matched);
  // Hybrid models, before the forward: slots for the plan's sequences (snapshots loaded), then
  // the state captures of each slice (rollback states of verifications, prefix snapshots at
  // block boundaries) into captures_, referenced by batch_.seqs.
  void prepare_hybrid(const std::vector<ScheduledSlice>& plan);
  // After slice i's KV commit: publishes its snapshots inside the committed tokens (all of them
  // when the step failed: discards) and frees its rollback state.
  void finish_captures(size_t i, const Sequence& s, bool ok);
  void emit(Sequence& s, TokenEvent ev, std::vector<TokenEvent>& out);
  // Request::images against the prompt, the model and the step budget.
  Status validate_images(const Request& req) const;
  void finish(RequestId id, Finish f, std::string error, std::vector<TokenEvent>& out);
  // After sampling `token` for s: append it, emit it, and say whether s is done.
  Finish accept_token(Sequence& s, int32_t token, std::vector<TokenEvent>& out);
  // Asks the drafter for proposals for the decoding sequences (k bounded by each request's
  // remaining tokens and context); returns the ids asked.
  std::vector<RequestId> propose_drafts();
  // Verifies sl's drafts with its logits rows, commits the accepted KV and emits the tokens.
  // rollback: hybrid models, the rollback_ slot holding the state after the pending token.
  Finish verify_slice(const ScheduledSlice& sl, std::span<float> logits, std::vector<TokenEvent>& out,
                      int32_t rollback);
  // The next token of s from its logits row, inside its grammar when it has one; -1 when the
  // grammar lets no token continue.
  int32_t sample_token(Sequence& s, std::span<float> logits);
  // Masks each row of a verification slice (the pending token's, then one per draft) with the
  // grammar state after the drafts before it, so verification accepts only drafts the grammar
  // takes and draws corrections inside it.
  void mask_draft_rows(Sequence& s, std::span<float> logits, std::span<const int32_t> draft);
  // After s generated `token`: follows its reasoning span and closes it when its budget is spent.
  Finish follow_reasoning(Sequence& s, int32_t token, std::vector<TokenEvent>& out);
  // Closes s's reasoning span now: appends and emits its closing tokens.
  Finish close_reasoning(Sequence& s, ReasoningCut why, std::vector<TokenEvent>& out);
  // Tokens s may still generate after its next one (max_new_tokens and the context).
  int64_t tokens_left_after_next(const Sequence& s) const;
  // The budget rule of constraint.h applied to a verification's tokens, as plain decoding would
  // apply it token by token (rows: the logits verify() used).
  void close_in_budget(Sequence& s, std::span<float> logits, Verdict& v);
  // The vocabulary as grammars see it, built on first use.
  std::shared_ptr<const GrammarVocab> grammar_vocab();

  StepModel& model_;
  const tokenizer::Tokenizer* tok_;
  EngineOptions opts_;
  int32_t n_ctx_;
  kv::KvStore store_;
  kv::StateStore states_;         // hybrid models' recurrent state slots (empty otherwise)
  kv::StateStore rollback_;       // hybrid models with speculation: states after a verified pending token
  kv::StateSnapshots snapshots_;  // hybrid models: prefix snapshots at block boundaries
  std::vector<StateCapture> captures_;
  struct SliceCaptures {
    size_t begin = 0, end = 0;  // its captures in captures_
    int32_t rollback = -1;      // rollback_ slot, or -1
    // Its snapshot entries (parallel to the captures that are snapshots), by tokens absorbed.
    std::vector<std::pair<int32_t, int32_t>> snapshots;  // (entry, n_tokens)
  };
  std::vector<SliceCaptures> slice_caps_;  // [plan size] of the current step
  std::vector<int32_t> hash_tokens_;       // a verification's tokens with its drafts, for hashing
  std::vector<uint64_t> hashes_;           // block hashes of a prefix match
  kv::BlockPool pool_;
  kv::KvManager kv_;
  Scheduler scheduler_;
  RequestId next_id_ = 1;
  uint64_t next_arrival_ = 0;
  // Finishing events decided outside step() (cancel, max_new_tokens 0), delivered by the next
  // step() with their request's callback.
  struct PendingEvent {
    TokenEvent event;
    std::function<void(const TokenEvent&)> on_event;
  };
  std::vector<PendingEvent> pending_;
  std::vector<float> logits_;  // [tokens with logits (1 per sampling slice, 1 + n_draft per verifying one), n_vocab]
  StepBatch batch_;
  int32_t last_step_tokens_ = 0;
  double last_step_ms_ = 0.0;
  std::unique_ptr<Drafter> drafter_;  // null: speculation off
  std::unique_ptr<kv::DiskTier> disk_;  // null: no disk tier
  DiskWriter disk_writer_;
  // Blocks allocated (one reference, unpublished) as the destinations of a disk read, by the
  // read's tag (the request id), until its result is installed: the reader writes into them.
  std::unordered_map<uint64_t, std::vector<kv::BlockId>> disk_dest_;
  std::vector<kv::BlockId> held_buf_;  // check_invariants' list of them
  int64_t tier_ram_blocks_ = 0, tier_disk_blocks_ = 0, tier_miss_blocks_ = 0;
  int64_t disk_fetches_ = 0;
  double disk_fetch_seconds_ = 0.0;
  SpecGate gate_;                     // pauses speculation while it is slower than plain decoding
  int64_t spec_draft_tokens_ = 0, spec_accepted_tokens_ = 0, spec_verify_steps_ = 0;
  std::vector<int32_t> commit_buf_;
  std::shared_ptr<const GrammarVocab> grammar_vocab_;
  std::vector<uint8_t> mask_buf_;     // [n_vocab] allowed tokens of one constrained row
  std::vector<float> greedy_logits_;  // [n_vocab] the unmasked row for the greedy shortcut
  MaskTimeStats mask_time_;
  // Reused by step(): its events, expired and finished requests.
  std::vector<TokenEvent> events_;
  std::vector<RequestId> expired_;
  std::vector<std::pair<RequestId, Finish>> done_;
  // With a disk tier that holds blocks at start: commits the KV memory they will be read into
  // (kv::KvStore::populate_blocks, off the request path; engine_disk.cpp). Last, so it is
  // joined before the store goes.
  std::jthread kv_populate_;
};

}  // namespace edgelm::engine
