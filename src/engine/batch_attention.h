// Causal attention of a step's tokens straight over the paged KV store, in its stored type.
//
// Job: for every token of a step, softmax(q . K * scale) V over the token's positions [0, pos]
// (or, planned with a sliding window w, the last w of them: [max(0, pos - w + 1), pos]; a
// token of a bidirectional span up to the span's end instead of pos, see attention_plan), scores
// soft-capped where the layer asks for it, for all its query heads, with the kernels of
// kernels/attention_kernels.h: each K/V row is read once per token (each KV head's slice once
// for the query heads that share it, GQA), in its stored type, by one pass with an online
// softmax. Nothing converts the context to f32.
//
// Split-K: a token's context is cut into chunks at fixed positions (multiples of
// split_positions; a window's first chunk starts at the window's start), each chunk's partial
// state (all heads) is a work item of its own, and the partials are folded in position order.
// So one long sequence spreads over every thread, and because the cuts depend only on
// positions, a token's result is the same bits whatever else is in the batch, however its
// blocks are laid out, and on any number of threads.
//
// Cost: per layer, two dispatches at most (partials, then the folds of tokens with more than
// one chunk); items are split over the threads by cost (positions + a fixed overhead). The
// partial states of a group of tokens live in scratch bounded by state_budget_bytes (tokens
// are attended group by group); planned once per step, allocation-free once warm.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention_kernels.h"
#include "kv/kv_store.h"

namespace edgelm::engine {

struct BatchSeq;  // batch_forward.h

// Reusable buffers and settings of batch attention (part of BatchScratch).
struct AttnScratch {
  struct Item {
    int32_t tok;     // token of the step
    int32_t p0, p1;  // positions [p0, p1) of the chunk
  };
  std::vector<Item> items;         // [n_items] by token, then chunk
  std::vector<int64_t> cost;       // [n_items + 1] prefix sums of the items' costs
  std::vector<int64_t> tok_item;   // [n_tokens + 1] first item of each token
  std::vector<int64_t> group_tok;  // [n_groups + 1] first token of each group of tokens
  std::vector<int64_t> part_item;  // [n_threads * parts per thread + 1] first item of each part, per group
  std::vector<float> state;        // [items of a group, n_head * (head_dim + 2)] partial states
  // Settings: the split-K chunk in positions (>= 1), and the most bytes of partial states held.
  int32_t split_positions = 128;
  int64_t state_budget_bytes = int64_t{16} << 20;
};

// What one layer's attention reads and writes.
struct AttnLayer {
  const kv::KvStore& store;
  int32_t layer;
  const BatchSeq* seqs;    // [n_slices] the step's slices (their block tables)
  const int32_t* tok_seq;  // [n_tokens] slice of each token
  const int32_t* tok_pos;  // [n_tokens] position of each token
  const float* q;          // [n_tokens, n_head * head_dim] queries after RoPE
  float* out;              // [n_tokens, n_head * head_dim]
  int32_t n_head, n_head_kv, head_dim;
  float scale;
  const kernels::AttentionKernels* kernels = nullptr;  // null: the active ISA's (tests pick others)
  float softcap = 0.0f;                                // > 0: scores soft-capped (kernels::AttnKv::softcap)
};

// Items, costs and groups for tokens at positions tok_pos[0..n_tokens); the same for every
// layer of the step with the same window (window > 0: each token attends to its last `window`
// positions; 0: to all). n_threads sizes the per-part table. tok_end (null: tok_pos + 1) is
// each token's exclusive last position, > tok_pos for a token of a bidirectional span (an
// image, model/embd_span.h) that also attends to the span's later positions, which must be
// written to the store before attention_run; the window's start still follows tok_pos.
void attention_plan(AttnScratch& s, int64_t n_tokens, const int32_t* tok_pos, int32_t n_head, int32_t head_dim,
                    int n_threads, int32_t window = 0, const int32_t* tok_end = nullptr);

// One layer's attention of every token of the plan.
void attention_run(const AttnLayer& a, AttnScratch& s, ThreadPool& pool);

}  // namespace edgelm::engine
