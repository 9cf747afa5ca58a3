// Batch attention over the paged KV store (see batch_attention.h).
//
// Per group of tokens: pass 1 computes every item's partial state (a chunk of one token's
// context, all heads) on the pool, parts balanced by cost; an item that is its token's
// whole context finishes into the output at once. Pass 2 folds the partials of tokens with
// several chunks in position order and finishes them.
#include "engine/batch_attention.h"

#include <algorithm>

#include "engine/batch_forward.h"
#include "kernels/attention_kernels.h"

namespace edgelm::engine {
namespace {

// Below this many multiply-adds a pass runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = 1 << 14;
// Parts per thread the items are grouped into (balanced by cost), which the pool's threads claim
// as they finish the last: a thread that falls behind leaves its later parts to the others.
constexpr int64_t kPartsPerThread = 4;
// Fixed cost of an item, in positions, for load balancing.
constexpr int64_t kItemOverhead = 8;

template <typename T>
T* grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

struct Pass {
  const AttnLayer& a;
  AttnScratch& s;
  const kernels::AttentionKernels& k;
  int64_t state_floats = 0;  // per item: acc [n_head, D], m [n_head], l [n_head]
  int64_t item0 = 0;         // first item of the group
  int64_t Q = 0;             // floats per token of q / out

  kernels::AttnState state(int64_t item) const {
    float* base = &s.state[static_cast<size_t>((item - item0) * state_floats)];
    const int64_t acc = Q;
    return {base + acc, base + acc + a.n_head, base};
  }
  bool single_chunk(int32_t tok) const {
    return s.tok_item[static_cast<size_t>(tok) + 1] - s.tok_item[static_cast<size_t>(tok)] == 1;
  }
  void partial(int64_t i) const {
    const AttnScratch::Item& it = s.items[static_cast<size_t>(i)];
    const BatchSeq& seq = a.seqs[a.tok_seq[it.tok]];
    kernels::AttnKv kv;
    kv.type = kv::kv_elem(a.store.type());
    kv.k_base = a.store.k_rows(a.layer, 0);
    kv.v_base = a.store.v_rows(a.layer, 0);
    kv.block_stride = a.store.block_bytes(a.layer);
    kv.row_bytes = a.store.row_bytes(a.layer);
    kv.block_size = a.store.block_size();
    kv.blocks = seq.blocks.data();
    kv.head_dim = a.head_dim;
    kv.softcap = a.softcap;
    kv.k_transposed = a.store.k_transposed();
    if (i + 1 < s.tok_item[static_cast<size_t>(it.tok) + 1]) kv.prefetch_end = s.items[static_cast<size_t>(i) + 1].p1;
    const kernels::AttnState st = state(i);
    kernels::attention_partial(k, kv, a.q + it.tok * Q, a.n_head_kv, a.n_head / a.n_head_kv, a.scale, it.p0, it.p1, st);
    if (single_chunk(it.tok)) kernels::attention_finish(a.n_head, a.head_dim, st.l, st.acc, a.out + it.tok * Q);
  }
  // Folds the token's chunks in order into its first item's state and finishes it.
  void fold(int64_t tok) const {
    const int64_t first = s.tok_item[static_cast<size_t>(tok)], end = s.tok_item[static_cast<size_t>(tok) + 1];
    if (end - first == 1) return;  // finished by partial()
    const kernels::AttnState acc = state(first);
    for (int64_t i = first + 1; i < end; ++i) {
      const kernels::AttnState other = state(i);
      kernels::attention_fold(a.n_head, a.head_dim, acc, other.m, other.l, other.acc);
    }
    kernels::attention_finish(a.n_head, a.head_dim, acc.l, acc.acc, a.out + tok * Q);
  }
};

}  // namespace

void attention_plan(AttnScratch& s, int64_t n_tokens, const int32_t* tok_pos, int32_t n_head, int32_t head_dim,
                    int n_threads, int32_t window, const int32_t* tok_end) {
  const int64_t S = std::max(1, s.split_positions);
  // A token's first position: 0, or the start of its window.
  auto first_pos = [window](int32_t pos) -> int64_t { return window > 0 ? std::max(0, pos - window + 1) : 0; };
  // A token's positions end here (exclusive).
  auto end_pos = [tok_pos, tok_end](int64_t t) -> int32_t { return tok_end != nullptr ? tok_end[t] : tok_pos[t] + 1; };
  int64_t n_items = 0;
  for (int64_t t = 0; t < n_tokens; ++t) n_items += (end_pos(t) - 1 + S) / S - first_pos(tok_pos[t]) / S;
  AttnScratch::Item* items = grow(s.items, n_items);
  int64_t* cost = grow(s.cost, n_items + 1);
  int64_t* tok_item = grow(s.tok_item, n_tokens + 1);
  grow(s.part_item, int64_t{n_threads} * kPartsPerThread + 1);
  const int64_t state_bytes = int64_t{n_head} * (head_dim + 2) * static_cast<int64_t>(sizeof(float));
  s.group_tok.clear();  // keeps its capacity
  s.group_tok.push_back(0);
  int64_t i = 0, group_item0 = 0, max_group_items = 0;
  cost[0] = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t n_pos = end_pos(t);
    const int64_t lo = first_pos(tok_pos[t]);
    const int64_t c0 = lo / S, n_chunks = (n_pos + S - 1) / S - c0;
    if (t > 0 && (i + n_chunks - group_item0) * state_bytes > s.state_budget_bytes) {
      s.group_tok.push_back(t);
      group_item0 = i;
    }
    tok_item[t] = i;
    for (int64_t c = c0; c < c0 + n_chunks; ++c, ++i) {
      const auto p0 = static_cast<int32_t>(std::max(lo, c * S));
      const auto p1 = static_cast<int32_t>(std::min<int64_t>(n_pos, (c + 1) * S));
      items[i] = {static_cast<int32_t>(t), p0, p1};
      cost[i + 1] = cost[i] + (p1 - p0) + kItemOverhead;
    }
    max_group_items = std::max(max_group_items, i - group_item0);
  }
  tok_item[n_tokens] = i;
  s.group_tok.push_back(n_tokens);
  grow(s.state, max_group_items * state_bytes / static_cast<int64_t>(sizeof(float)));
}

void attention_run(const AttnLayer& a, AttnScratch& s, ThreadPool& pool) {
  Pass p{a, s, a.kernels != nullptr ? *a.kernels : kernels::active_attention_kernels()};
  p.state_floats = int64_t{a.n_head} * (a.head_dim + 2);
  p.Q = int64_t{a.n_head} * a.head_dim;
  const int64_t work_per_cost = 2 * p.Q;  // multiply-adds per position
  for (size_t g = 0; g + 1 < s.group_tok.size(); ++g) {
    const int64_t tok0 = s.group_tok[g], tok1 = s.group_tok[g + 1];
    const int64_t item0 = s.tok_item[static_cast<size_t>(tok0)];
    const int64_t item1 = s.tok_item[static_cast<size_t>(tok1)];
    p.item0 = item0;
    const int64_t c0 = s.cost[static_cast<size_t>(item0)], total = s.cost[static_cast<size_t>(item1)] - c0;
    int64_t n_parts = std::min<int64_t>(int64_t{pool.n_threads()} * kPartsPerThread, item1 - item0);
    if (total * work_per_cost < kMinParallelWork) n_parts = 1;
    // Part j starts at the item boundary whose cost prefix is nearest total * j / n_parts (the
    // first at or above it would give one decoding sequence's 17 chunks at depth 2048 as 9 + 8).
    int64_t* part = s.part_item.data();
    for (int64_t j = 0; j <= n_parts; ++j) {
      const int64_t target = c0 + total * j / n_parts;
      int64_t b = std::lower_bound(s.cost.begin() + item0, s.cost.begin() + item1, target) - s.cost.begin();
      if (b > item0 && target - s.cost[static_cast<size_t>(b - 1)] < s.cost[static_cast<size_t>(b)] - target) --b;
      part[j] = b;
    }
    part[n_parts] = item1;
    auto partials = [&p, part](size_t b, size_t e) {
      for (int64_t i = part[b]; i < part[e]; ++i) p.partial(i);
    };
    if (n_parts == 1) {
      partials(0, 1);
    } else {
      pool.parallel_for(static_cast<size_t>(n_parts), partials);
    }
    // Folds: only tokens whose context has several chunks.
    const int64_t u0 = tok0, u1 = tok1;
    if (item1 - item0 == u1 - u0) continue;  // every token is one chunk
    auto folds = [&p, u0](size_t b, size_t e) {
      for (size_t u = b; u < e; ++u) p.fold(u0 + static_cast<int64_t>(u));
    };
    const int64_t fold_work = (item1 - item0) * p.state_floats * 2;
    if (pool.n_threads() == 1 || fold_work < kMinParallelWork) {
      folds(0, static_cast<size_t>(u1 - u0));
    } else {
      pool.parallel_for(static_cast<size_t>(u1 - u0), folds);
    }
  }
}

}  // namespace edgelm::engine
