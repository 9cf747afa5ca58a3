// The batched forward pass of continuous batching: one step runs slices of several sequences
// (prefill chunks and decode tokens alike) through the model together, over the paged KV cache.
//
// Job: the same computation as Model::forward (model/forward.cpp) for every slice, but
//  - each weight matrix is multiplied once per step with all n_total tokens of the batch
//    (kernels::matmul with n_tok = n_total), so a decode step of N sequences streams the
//    weights once instead of N times;
//  - K/V live in a kv::KvStore addressed through each sequence's block table: position pos is
//    block blocks[pos / block_size], slot pos % block_size;
//  - attention (batch_attention.h) reads every position, the slice's own new tokens included,
//    straight from the store in its stored type (f32, f16, q8_0), one pass with an online
//    softmax, split-K over fixed position chunks, so a quantized KV type affects the current
//    token exactly as it will later steps, and the context is never converted to f32;
//  - the element-wise ops (RMSNorm, SwiGLU, residual add) use the SIMD variants of
//    kernels/ops_vector.h (GeGLU the scalar model/ops.h), RoPE the model's cos/sin tables;
//  - sliding-window layers attend over each token's last n_swa positions (their own attention
//    plan), so the paged KV honours the window exactly as Model::forward does;
//  - embedding models (StepBatch::bidirectional): each slice is a whole text attending over all
//    its positions (local layers: a symmetric window), by the same plan with later ends;
//  - embedding spans (StepBatch::spans, model/embd_span.h: an image's soft tokens) replace the
//    token_embd rows of their positions, unscaled, and attend bidirectionally within the span
//    as Model::forward does with the same spans;
//  - M-RoPE images (BatchSeq::mrope): their tokens and the text after them turn by the
//    positions of model/mrope.h, the KV slot staying the token's index;
//  - Gemma 4: per-layer head sizes and FFN sizes, shared-KV layers that compute only Q and
//    attend over their source layer's K/V in the store, the per-layer embeddings (model/ple.h);
//  - hybrid models' Gated DeltaNet layers run model/deltanet.h per slice over the slice's
//    recurrent state slot (StepBatch::states): the convolution over channel ranges and the
//    delta rule over value heads of every slice in one parallel loop each; a slice with
//    captures (StateCapture) runs its recurrence in segments split at the captured positions
//    and copies each work item's part of the state (its channels, its head) after a segment,
//    so the copies cost no extra pass and the states are those of a run that stopped there.
//
// Invariants:
//  - Every architecture of model/arch.h runs through the same ops as Model::forward; with F32
//    weights and an f32 store the logits equal Model::forward's on each sequence alone up to
//    float reassociation (the online softmax, the SIMD sums): tests/engine/test_batch_forward.cpp
//    holds them to 1e-4 of the largest logit. They are no longer bit-identical.
//  - Each token's result depends only on its own sequence and position, not on the batch, the
//    block layout or the number of threads: batched, chunked and shuffled runs are
//    bit-identical to each other (with quantized weights whose matmul kernel depends on
//    n_total, up to that kernel's reassociation).
//  - Slices must write disjoint (block, slot)s (the scheduler's copy-on-write guarantees it); a
//    slice's block table must cover positions [0, pos0 + n_tokens) and positions [0, pos0) must
//    already be written.
//  - Validation happens before anything is written: on an error the store is untouched.
//
// Cost: weights once per step; per layer, each (token, KV head) reads its K/V rows once for all
// its query heads. Once the scratch has grown to a step's size, steps of that size or smaller
// allocate nothing here (tests/engine/test_engine_allocations.cpp checks a whole engine step).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/batch_attention.h"
#include "kernels/matmul.h"
#include "kv/block_pool.h"
#include "kv/kv_store.h"
#include "kv/state_store.h"
#include "model/embd_span.h"
#include "model/model.h"
#include "model/mrope.h"

namespace edgelm::engine {

// A copy of a hybrid model's recurrent state taken inside a step: once the slice's state has
// absorbed n_tokens tokens (pos0 < n_tokens <= pos0 + the slice's n_tokens), the whole state
// (kv::StateStore::data layout: per recurrent layer the conv tail, then the delta-rule matrices;
// StateStore::slot_floats() floats) is copied to dst. Used for prefix snapshots at block
// boundaries and for rolling back a speculative verification to an accepted token. dst nullptr:
// only split the recurrence there (the engine splits at every snapshot boundary, taken or not,
// so that the delta rule's runs, model/deltanet.h, depend on positions alone).
struct StateCapture {
  int32_t n_tokens = 0;
  float* dst = nullptr;
};

// One sequence's part of a step.
struct BatchSeq {
  int32_t pos0 = 0;                     // position of the slice's first token (tokens [0, pos0) are already in the KV)
  int32_t n_tokens = 0;                 // tokens of this slice, at positions [pos0, pos0 + n_tokens)
  std::span<const kv::BlockId> blocks;  // the sequence's block table; covers positions [0, pos0 + n_tokens)
  int32_t n_logits = 0;                 // compute the logits of the slice's last n_logits tokens, in [0, n_tokens]
                                        // (1: the next token after the slice; more: speculative verification)
  int32_t state_slot = -1;              // hybrid models: the sequence's slot in StepBatch::states
  std::span<const StateCapture> captures;  // hybrid models: states to copy out, n_tokens ascending (ties allowed)
  // M-RoPE models (model/mrope.h): every image of the sequence (not only this slice's), from which
  // each token's rotation position follows; empty: a token turns by its position.
  std::span<const model::MropeImage> mrope;
};

// An embedding span of one slice's sequence (positions absolute, as the slice's pos0).
struct BatchSpan {
  int32_t seq = 0;  // index into StepBatch::seqs
  model::EmbdSpan span;
};

struct StepBatch {
  std::vector<model::TokenId> tokens;  // [n_total] every slice's tokens, slice after slice, in seqs order
  std::vector<BatchSeq> seqs;
  // The context the sequences are sized for (the engine's n_ctx): picks LongRoPE's factor set
  // (model::Model::rope_for); 0: the model's trained context.
  int32_t n_ctx = 0;
  // Hybrid models (recurrent layers): the sequences' states. A slice continues its slot's state,
  // which must have absorbed exactly pos0 tokens (pos0 == 0 resets it); after the step it has
  // absorbed pos0 + n_tokens. Null for models without recurrent layers.
  kv::StateStore* states = nullptr;
  // Embedding spans that overlap their slice's positions (others may be listed; they are
  // ignored). A span overlapping a slice must end inside it (a span is never split across steps;
  // it may start before pos0, its earlier positions already in the KV).
  std::vector<BatchSpan> spans;
  // Input rows [n_total, n_embd] that replace every token's embedding (unscaled; the tokens are
  // still checked against the vocabulary): the MTP head's eh_proj rows (engine/mtp_drafter.h).
  // Null: the tokens' embeddings. Not combined with spans.
  const float* embd_in = nullptr;
  // Also write every token's final hidden state after the output norm into BatchScratch::hidden
  // ([n_total, n_embd], batch order): what the MTP head drafts from.
  bool want_hidden = false;
  // Embedding models (model::ArchSpec::bidirectional, gemma-embedding): every slice is a whole
  // text (pos0 == 0) whose tokens attend to all its positions, and in sliding-window layers to
  // those within n_swa / 2 on either side. Required for such models, refused for others (and
  // with spans, embd_in or recurrent layers).
  bool bidirectional = false;
};

// Reusable buffers of forward_batch (one per caller; not thread-safe). The buffers are internal
// and only grow, so a warmed-up scratch makes a step allocation-free; attn's split_positions and
// state_budget_bytes are the settings.
struct BatchScratch {
  std::vector<float> x;                // [n_total, n_embd] residual stream
  std::vector<float> xn;               // [n_total, n_embd] normalized input of a sub-layer
  std::vector<float> q;                // [n_total, n_head * head_dim] (the layer's head size; sized for the largest)
  std::vector<float> k;                // [n_total, n_embd_kv] the step's new keys (after RoPE)
  std::vector<float> v;                // [n_total, n_embd_kv]
  std::vector<float> att;              // [n_total, n_head * head_dim] attention output
  std::vector<float> proj;             // [n_total, n_embd] sub-layer output
  std::vector<float> gate;             // [n_total, n_ff]
  std::vector<float> up;               // [n_total, n_ff]
  std::vector<float> x_out;            // [sum of n_logits, n_embd] final-normed tokens with logits
  std::vector<float> hidden;           // [n_total, n_embd] every token final-normed (StepBatch::want_hidden)
  std::vector<float> q_gate;           // [n_total, 2 * n_head * head_dim] gated attention's Q projection
  std::vector<float> attn_gate;        // [n_total, n_head * head_dim] its output gate
  std::vector<float> mixed;            // [n_total, conv_dim] DeltaNet Q, K, V channels (deltanet.h)
  std::vector<float> z;                // [n_total, value_dim] DeltaNet output gate
  std::vector<float> beta;             // [n_total, n_v_heads]
  std::vector<float> alpha;            // [n_total, n_v_heads]
  std::vector<float> rec_out;          // [n_total, value_dim] DeltaNet output
  std::vector<float> ple;              // [n_total, n_layer * n_embd_ple] Gemma 4's per-layer inputs (model/ple.h)
  std::vector<float> ple_row;          // [n_layer * n_embd_ple] one token's per_layer_token_embd row
  std::vector<float> ple_gate;         // [n_total, n_embd_ple]
  std::vector<int32_t> tok_seq;        // [n_total] slice of each token
  std::vector<int32_t> tok_pos;        // [n_total] position of each token
  std::vector<model::RopePos> tok_rope;  // [n_total] rotation position of each token (with M-RoPE images)
  std::vector<int32_t> tok_end;        // [n_total] exclusive end of each token's attended positions (with spans)
  std::vector<int32_t> tok_end_local;  // [n_total] the same in sliding-window layers (StepBatch::bidirectional)
  std::vector<const float*> tok_embd;  // [n_total] a span token's embedding row, else null (with spans)
  std::vector<int64_t> seq_tok;        // [n_seqs + 1] first token of each slice (and n_total)
  AttnScratch attn;                    // attention work items and partial states (global layers)
  AttnScratch attn_local;              // the same for sliding-window layers (its settings copied from attn)
  kernels::MatmulScratch matmul;
};

// Runs every slice's tokens through the model in one pass (see the header comment) and writes
// the logits of the last n_logits tokens of each slice: logits is [sum of n_logits, n_vocab],
// slice after slice in seqs order, tokens in position order within a slice. The store's block size is the paging unit.
// Errors (nothing is written): empty batch, tokens.size() != sum of n_tokens, n_tokens <= 0,
// pos0 < 0, n_logits outside [0, n_tokens], a token outside the vocabulary, a span that does not
// end inside a slice it overlaps or overlaps another of its sequence, a block table too short or naming a block
// outside the store, a store of another model's shape, logits span of the wrong size; for hybrid
// models no state store, a slice without a live slot, two slices of one slot, a slot whose
// state is at another position than the slice's pos0 (> 0), captures outside the slice, out of
// order or without a destination (or on a model without recurrent layers); M-RoPE images on a model
// without M-RoPE, or that mrope_check refuses.
Status forward_batch(const model::Model& m, const StepBatch& batch, kv::KvStore& store, std::span<float> logits,
                     ThreadPool& pool, BatchScratch& scratch);

}  // namespace edgelm::engine
