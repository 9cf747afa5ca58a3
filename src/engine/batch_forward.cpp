// The batched forward pass over the paged KV cache (see batch_forward.h).
//
// Per layer: norm (per token) -> Q/K/V matmuls (all tokens, one parallel loop) -> Q/K norms, RoPE and K/V write
// to the store (per token; Model::prepare_qk, shared with the reference) -> attention over the
// store (batch_attention.h; local layers over their window) -> output matmul -> post-norm (if
// any) + residual + norm (per token) -> gate/up matmuls (one loop) -> SwiGLU or GeGLU (per token) -> down
// matmul -> post-norm + residual + next norm; logits soft-capped where the model says so.
#include "engine/batch_forward.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops_vector.h"
#include "model/deltanet.h"
#include "model/ops.h"
#include "model/ple.h"

namespace edgelm::engine {
namespace {

// Below this many float operations a loop runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = 1 << 14;

template <typename T>
T* grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// What the parallel loops of a step read.
struct Step {
  const model::Model& m;
  const model::ModelConfig& c;
  const model::Weights& w;
  const StepBatch& batch;
  kv::KvStore& store;
  BatchScratch& s;
  ThreadPool& pool;
  const kernels::VectorOps& ops;
  int64_t n = 0;  // tokens of the step
  int64_t E = 0, H = 0;
  int64_t D = 0, Q = 0, KV = 0, F = 0;  // the current layer's head size, Q and K/V widths, FFN size
  int32_t block_size = 0;
  int32_t n_ctx = 0;
  float att_scale = 0.0f;
  bool mrope = false;  // some slice has M-RoPE images: BatchScratch::tok_rope holds every token's rotation
  // Set per layer:
  int32_t layer = 0;
  int32_t kv_layer = 0;              // the layer's K/V index in the store (ModelConfig::kv_layer)
  bool own_kv = true;                // the layer computes and stores K/V (false: Gemma 4 shared-KV layer)
  const float* post_norm = nullptr;  // [n_embd] norm of the sub-layer output before the add; null: none
  const float* next_norm = nullptr;  // [n_embd] norm applied after a residual add; null: none
};

// fn over [0, n_items) on the pool, or inline when the whole loop is cheap.
void run(Step& st, size_t n_items, int64_t work_per_item, FunctionRef<void(size_t, size_t)> fn) {
  if (st.pool.n_threads() == 1 || static_cast<int64_t>(n_items) * work_per_item < kMinParallelWork) {
    fn(0, n_items);
  } else {
    st.pool.parallel_for(n_items, fn);
  }
}

const kv::BlockId* slice_blocks(const Step& st, int32_t seq) {
  return st.batch.seqs[static_cast<size_t>(seq)].blocks.data();
}

void embed_tokens(Step& st) {
  run(st, static_cast<size_t>(st.n), 2 * st.E, [&st](size_t b, size_t e) {
    BatchScratch& s = st.s;
    for (size_t t = b; t < e; ++t) {
      float* x = &s.x[t * st.E];
      const float* row = st.batch.embd_in != nullptr ? st.batch.embd_in + t * st.E
                         : !st.batch.spans.empty()    ? s.tok_embd[t]
                                                      : nullptr;
      if (row != nullptr) {  // a supplied row, unscaled (embd_span.h, StepBatch::embd_in)
        std::copy_n(row, st.E, x);
        st.ops.rms_norm(&s.xn[t * st.E], x, st.w.layers[0].attn_norm, st.E, st.c.rms_eps);
        continue;
      }
      kernels::get_row(st.w.token_embd, st.batch.tokens[t], x);
      if (st.c.arch->scale_embd) {
        const float sc = std::sqrt(static_cast<float>(st.E));
        for (int64_t i = 0; i < st.E; ++i) x[i] *= sc;
      }
      st.ops.rms_norm(&s.xn[t * st.E], x, st.w.layers[0].attn_norm, st.E, st.c.rms_eps);
    }
  });
}

void rope_and_store(Step& st) {
  run(st, static_cast<size_t>(st.n), 2 * (st.Q + st.KV), [&st](size_t b, size_t e) {
    BatchScratch& s = st.s;
    for (size_t t = b; t < e; ++t) {
      const int32_t pos = s.tok_pos[t];
      float* k = st.own_kv ? &s.k[t * st.KV] : nullptr;
      const model::RopePos rp = st.mrope ? s.tok_rope[t] : model::RopePos(pos);
      st.m.prepare_qk(st.layer, &s.q[t * st.Q], k, rp, st.n_ctx);  // Q/K norms (if any) and RoPE
      if (!st.own_kv) continue;                                     // a shared-KV layer reads its source layer's K/V
      st.m.prepare_v(st.layer, &s.v[t * st.KV]);
      const kv::BlockId block = slice_blocks(st, s.tok_seq[t])[pos / st.block_size];
      st.store.write(st.kv_layer, block, pos % st.block_size, k, &s.v[t * st.KV]);
    }
  });
}

// Causal attention of every token over its own sequence (a local layer: its window), straight
// from the store.
void attention(Step& st) {
  const AttnLayer a{
      st.store,      st.kv_layer,     st.batch.seqs.data(), st.s.tok_seq.data(), st.s.tok_pos.data(),
      st.s.q.data(), st.s.att.data(), st.c.n_head,          st.c.n_head_kv,      static_cast<int32_t>(st.D),
      st.att_scale,  nullptr,         st.c.attn_softcap};
  attention_run(a, st.c.layer_is_local(st.layer) ? st.s.attn_local : st.s.attn, st.pool);
}

// proj = rms_norm(proj, post_norm) when post_norm is set, x += proj, then xn = rms_norm(x,
// next_norm) when next_norm is set; per token.
void residual(Step& st) {
  run(st, static_cast<size_t>(st.n), 4 * st.E, [&st](size_t b, size_t e) {
    BatchScratch& s = st.s;
    for (size_t t = b; t < e; ++t) {
      if (st.post_norm != nullptr)
        st.ops.rms_norm(&s.proj[t * st.E], &s.proj[t * st.E], st.post_norm, st.E, st.c.rms_eps);
      st.ops.add(&s.x[t * st.E], &s.proj[t * st.E], st.E);
      if (st.next_norm != nullptr) st.ops.rms_norm(&s.xn[t * st.E], &s.x[t * st.E], st.next_norm, st.E, st.c.rms_eps);
    }
  });
}

// xn = rms_norm(x, next_norm) per token (when next_norm is set).
void next_layer_norm(Step& st) {
  if (st.next_norm == nullptr) return;
  run(st, static_cast<size_t>(st.n), 2 * st.E, [&st](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t)
      st.ops.rms_norm(&st.s.xn[t * st.E], &st.s.x[t * st.E], st.next_norm, st.E, st.c.rms_eps);
  });
}

// The gated activation: SwiGLU or GeGLU (both SIMD where the ISA has them).
void gated_act(Step& st) {
  const bool gelu = st.c.arch->ffn_act == model::FfnAct::gelu_tanh;
  run(st, static_cast<size_t>(st.n), 8 * st.F, [&st, gelu](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      if (gelu) {
        st.ops.geglu(&st.s.gate[t * st.F], &st.s.up[t * st.F], st.F);
      } else {
        st.ops.swiglu(&st.s.gate[t * st.F], &st.s.gate[t * st.F], &st.s.up[t * st.F], st.F);
      }
    }
  });
}

// A hybrid model's slices against their recurrent state slots (see forward_batch).
Status validate_states(const model::ModelConfig& c, const StepBatch& batch) {
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const BatchSeq& q = batch.seqs[i];
    int32_t prev = q.pos0 + 1;
    for (const StateCapture& cap : q.captures) {
      if (cap.n_tokens < prev || cap.n_tokens > q.pos0 + q.n_tokens)
        return make_error(
            "forward_batch: slice {} [{}, {}) asks for a state capture after {} tokens (captures must be inside the "
            "slice, ascending)",
            i, q.pos0, q.pos0 + q.n_tokens, cap.n_tokens);
      prev = cap.n_tokens;
    }
    if (!q.captures.empty() && (c.n_recurrent_layers() == 0 || c.deltanet.interval == 0))
      return make_error("forward_batch: slice {} asks for state captures on a model without recurrent layers", i);
  }
  if (c.n_recurrent_layers() == 0 || c.deltanet.interval == 0) return ok_status();
  if (batch.states == nullptr || !batch.states->enabled())
    return make_error("forward_batch: a hybrid model ({}) needs a recurrent state store", c.arch->name);
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const BatchSeq& q = batch.seqs[i];
    if (!batch.states->valid(q.state_slot))
      return make_error("forward_batch: slice {} has no live recurrent state slot ({})", i, q.state_slot);
    if (q.pos0 > 0 && batch.states->n_tokens(q.state_slot) != q.pos0)
      return make_error(
          "forward_batch: slice {} continues at position {} but its recurrent state has absorbed {} tokens (a "
          "recurrent state cannot be rewound)",
          i, q.pos0, batch.states->n_tokens(q.state_slot));
    for (size_t j = 0; j < i; ++j)
      if (batch.seqs[j].state_slot == q.state_slot)
        return make_error("forward_batch: slices {} and {} share recurrent state slot {}", j, i, q.state_slot);
  }
  return ok_status();
}

// Checks the batch against the model and the store; returns the number of tokens with logits.
Result<int64_t> validate(const model::ModelConfig& c, const StepBatch& batch, const kv::KvStore& store,
                         std::span<const float> logits) {
  if (batch.seqs.empty() || batch.tokens.empty()) return make_error("forward_batch: empty batch");
  if (store.n_layer() != c.n_kv_layers())
    return make_error("forward_batch: KV store of {} layers is not this model's {}", store.n_layer(), c.n_kv_layers());
  for (int32_t l = 0; l < c.n_kv_layers(); ++l)
    if (store.n_embd_kv(l) != c.kv_n_embd(l))
      return make_error("forward_batch: KV store layer {} of width {} is not this model's {}", l, store.n_embd_kv(l),
                        c.kv_n_embd(l));
  if (batch.embd_in != nullptr && (!batch.spans.empty() || c.n_embd_ple > 0))
    return make_error("forward_batch: input rows (embd_in) combine with neither spans nor per-layer embeddings");
  const int64_t bs = store.block_size();
  int64_t n_total = 0, n_logits = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const BatchSeq& q = batch.seqs[i];
    if (q.n_tokens <= 0)
      return make_error("forward_batch: slice {} has {} tokens; at least 1 is needed", i, q.n_tokens);
    if (q.pos0 < 0 || q.pos0 > std::numeric_limits<int32_t>::max() - q.n_tokens)
      return make_error("forward_batch: slice {} starts at invalid position {}", i, q.pos0);
    const int64_t n_pos = int64_t{q.pos0} + q.n_tokens;
    const int64_t need = (n_pos + bs - 1) / bs;
    if (static_cast<int64_t>(q.blocks.size()) < need)
      return make_error("forward_batch: slice {} reaches position {} but its block table of {} blocks covers only {}",
                        i, n_pos - 1, q.blocks.size(), static_cast<int64_t>(q.blocks.size()) * bs);
    for (int64_t b = 0; b < need; ++b)
      if (q.blocks[static_cast<size_t>(b)] < 0 || q.blocks[static_cast<size_t>(b)] >= store.n_blocks())
        return make_error("forward_batch: slice {} names block {}, outside the store's [0, {})", i,
                          q.blocks[static_cast<size_t>(b)], store.n_blocks());
    if (!q.mrope.empty()) {
      if (!c.has_mrope())
        return make_error("forward_batch: slice {} has M-RoPE images but {} has no M-RoPE sections", i, c.arch->name);
      if (const Status st = model::mrope_check(q.mrope); !st)
        return make_error("forward_batch: slice {}: {}", i, st.error().message);
    }
    if (q.n_logits < 0 || q.n_logits > q.n_tokens)
      return make_error("forward_batch: slice {} asks for {} logits of {} tokens", i, q.n_logits, q.n_tokens);
    n_total += q.n_tokens;
    n_logits += q.n_logits;
  }
  if (n_total != static_cast<int64_t>(batch.tokens.size()))
    return make_error("forward_batch: the slices have {} tokens in all but the batch carries {}", n_total,
                      batch.tokens.size());
  for (const model::TokenId t : batch.tokens)
    if (t < 0 || t >= c.n_vocab) return make_error("token id {} is outside the vocabulary [0, {})", t, c.n_vocab);
  if (static_cast<int64_t>(logits.size()) != n_logits * c.n_vocab)
    return make_error("forward_batch: logits buffer has {} entries; {} tokens with logits x {} vocabulary need {}",
                      logits.size(), n_logits, c.n_vocab, n_logits * c.n_vocab);
  EDGELM_TRY_STATUS(validate_states(c, batch));
  if (c.arch->bidirectional && !batch.bidirectional)
    return make_error(
        "forward_batch: {} is an embedding model (bidirectional attention); it runs through the embed layer, not "
        "generation",
        c.arch->name);
  if (batch.bidirectional && !c.arch->bidirectional)
    return make_error("forward_batch: {} attends causally; a bidirectional batch is for embedding models",
                      c.arch->name);
  if (batch.bidirectional) {
    if (!batch.spans.empty() || batch.embd_in != nullptr || c.deltanet.interval > 0)
      return make_error("forward_batch: a bidirectional batch takes neither spans, input rows nor recurrent layers");
    for (size_t i = 0; i < batch.seqs.size(); ++i)
      if (batch.seqs[i].pos0 != 0)
        return make_error("forward_batch: bidirectional slice {} starts at position {}; each must be a whole text", i,
                          batch.seqs[i].pos0);
  }
  for (size_t i = 0; i < batch.spans.size(); ++i) {
    const BatchSpan& b = batch.spans[i];
    if (b.seq < 0 || b.seq >= static_cast<int32_t>(batch.seqs.size()))
      return make_error("forward_batch: span {} names slice {}, not in the batch", i, b.seq);
    if (b.span.n_tokens <= 0 || b.span.pos0 < 0 || b.span.embd == nullptr)
      return make_error("forward_batch: span {} is empty or has no rows", i);
    const BatchSeq& q = batch.seqs[static_cast<size_t>(b.seq)];
    const int32_t end = q.pos0 + q.n_tokens;
    if (b.span.pos0 < end && b.span.end() > q.pos0 && b.span.end() > end)
      return make_error(
          "forward_batch: span {} [{}, {}) of slice {} does not end inside the slice [{}, {}): a bidirectional span "
          "must be computed in one step",
          i, b.span.pos0, b.span.end(), b.seq, q.pos0, end);
    for (size_t j = 0; j < i; ++j)
      if (batch.spans[j].seq == b.seq && b.span.pos0 < batch.spans[j].span.end() &&
          batch.spans[j].span.pos0 < b.span.end())
        return make_error("forward_batch: spans {} and {} of slice {} overlap", j, i, b.seq);
  }
  return n_logits;
}

// Token -> slice and position tables and the attention plan; sizes the scratch.
void plan_step(Step& st) {
  BatchScratch& s = st.s;
  const auto n_seqs = static_cast<int64_t>(st.batch.seqs.size());
  int32_t* tok_seq = grow(s.tok_seq, st.n);
  int32_t* tok_pos = grow(s.tok_pos, st.n);
  int64_t* seq_tok = grow(s.seq_tok, n_seqs + 1);
  int64_t t = 0;
  for (int64_t i = 0; i < n_seqs; ++i) {
    const BatchSeq& q = st.batch.seqs[static_cast<size_t>(i)];
    seq_tok[i] = t;
    for (int32_t j = 0; j < q.n_tokens; ++j, ++t) {
      tok_seq[t] = static_cast<int32_t>(i);
      tok_pos[t] = q.pos0 + j;
    }
  }
  seq_tok[n_seqs] = t;
  st.mrope = false;
  for (const BatchSeq& q : st.batch.seqs) st.mrope = st.mrope || !q.mrope.empty();
  if (st.mrope) {
    model::RopePos* rope = grow(s.tok_rope, st.n);
    for (int64_t u = 0; u < st.n; ++u) {
      const BatchSeq& q = st.batch.seqs[static_cast<size_t>(tok_seq[u])];
      rope[u] = q.mrope.empty() ? model::RopePos(tok_pos[u]) : model::mrope_position(q.mrope, tok_pos[u]);
    }
  }
  // Embedding spans: each covered token's row and its attention end (a bidirectional span's end).
  const int32_t* tok_end = nullptr;
  if (!st.batch.spans.empty()) {
    int32_t* end = grow(s.tok_end, st.n);
    const float** embd = grow(s.tok_embd, st.n);
    for (int64_t u = 0; u < st.n; ++u) {
      end[u] = tok_pos[u] + 1;
      embd[u] = nullptr;
    }
    for (const BatchSpan& b : st.batch.spans) {
      const BatchSeq& q = st.batch.seqs[static_cast<size_t>(b.seq)];
      const int32_t lo = std::max(q.pos0, b.span.pos0), hi = std::min(q.pos0 + q.n_tokens, b.span.end());
      for (int32_t pos = lo; pos < hi; ++pos) {
        const int64_t u = seq_tok[b.seq] + (pos - q.pos0);
        end[u] = model::embd_span_attention_end(&b.span, pos);
        embd[u] = b.span.embd + static_cast<int64_t>(pos - b.span.pos0) * st.E;
      }
    }
    tok_end = end;
  }
  // Whole texts attending bidirectionally: every token up to its slice's end; in local layers the
  // symmetric window [pos - n_swa / 2, pos + n_swa / 2] (a causal window of n_swa / 2 + 1
  // positions behind, ends n_swa / 2 + 1 past the token).
  int32_t local_window = st.c.n_swa;
  const int32_t* tok_end_local = tok_end;
  if (st.batch.bidirectional) {
    int32_t* end = grow(s.tok_end, st.n);
    int32_t* end_local = grow(s.tok_end_local, st.n);
    const int32_t half = st.c.n_swa / 2;
    for (int64_t u = 0; u < st.n; ++u) {
      const BatchSeq& q = st.batch.seqs[static_cast<size_t>(tok_seq[u])];
      end[u] = q.pos0 + q.n_tokens;
      end_local[u] = static_cast<int32_t>(std::min<int64_t>(end[u], int64_t{tok_pos[u]} + half + 1));
    }
    tok_end = end;
    tok_end_local = end_local;
    local_window = half + 1;
  }
  const int32_t max_d = st.c.max_head_dim();  // the plan's partial states fit every layer's heads
  attention_plan(s.attn, st.n, tok_pos, st.c.n_head, max_d, st.pool.n_threads(), 0, tok_end);
  if (st.c.n_swa > 0) {
    s.attn_local.split_positions = s.attn.split_positions;
    s.attn_local.state_budget_bytes = s.attn.state_budget_bytes;
    attention_plan(s.attn_local, st.n, tok_pos, st.c.n_head, max_d, st.pool.n_threads(), local_window, tok_end_local);
  }

  for (auto* buf : {&s.x, &s.xn, &s.proj}) grow(*buf, st.n * st.E);
  for (auto* buf : {&s.q, &s.att}) grow(*buf, st.n * st.H * max_d);
  for (auto* buf : {&s.k, &s.v}) grow(*buf, st.n * st.c.n_head_kv * max_d);
  for (auto* buf : {&s.gate, &s.up}) grow(*buf, st.n * st.c.n_ff);
  if (st.c.n_embd_ple > 0) {
    const int64_t LP = int64_t{st.c.n_layer} * st.c.n_embd_ple;
    grow(s.ple, st.n * LP);
    grow(s.ple_row, LP);
    grow(s.ple_gate, st.n * st.c.n_embd_ple);
  }
  if (st.c.arch->gated_deltanet) {
    const model::DeltaNetConfig& d = st.c.deltanet;
    grow(s.q_gate, st.n * 2 * st.H * max_d);
    grow(s.attn_gate, st.n * st.H * max_d);
    grow(s.mixed, st.n * d.conv_dim());
    for (auto* buf : {&s.z, &s.rec_out}) grow(*buf, st.n * d.value_dim());
    for (auto* buf : {&s.beta, &s.alpha}) grow(*buf, st.n * d.n_v_heads);
  }
}

// Gated attention's Q projection split into Q and the output gate (model::split_q_gate), per token.
void split_q_gate(Step& st) {
  run(st, static_cast<size_t>(st.n), 2 * st.Q, [&st](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t)
      model::split_q_gate(&st.s.q_gate[t * 2 * st.Q], &st.s.q[t * st.Q], &st.s.attn_gate[t * st.Q], 1, st.c.n_head,
                          st.D);
  });
}

void apply_attn_gate(Step& st) {
  run(st, static_cast<size_t>(st.n), 8 * st.Q, [&st](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) model::sigmoid_gate(&st.s.att[t * st.Q], &st.s.attn_gate[t * st.Q], st.Q);
  });
}

// Channels per work item of the DeltaNet convolution.
constexpr int64_t kConvChunk = 512;

// A Gated DeltaNet layer of every slice over its state slot (model/deltanet.h) into proj: the
// projections of all tokens at once, then per slice the convolution (channel ranges), Q/K L2
// norms (per token), the delta rule (per value head) and the gated norm (per token).
void deltanet_layer(Step& st, const model::LayerWeights& L) {
  BatchScratch& s = st.s;
  const model::DeltaNetConfig& d = st.c.deltanet;
  const int64_t C = d.conv_dim(), V = d.value_dim(), H = d.n_v_heads, n = st.n;
  const int32_t r = st.c.recurrent_index(st.layer);
  const model::LinearPart parts[] = {{&L.w_qkv_mixed, nullptr, s.mixed.data()},
                                     {&L.w_z, nullptr, s.z.data()},
                                     {&L.w_beta, nullptr, s.beta.data()},
                                     {&L.w_alpha, nullptr, s.alpha.data()}};
  model::linear_many(parts, s.xn.data(), n, st.pool, s.matmul);
  const auto n_seqs = static_cast<int64_t>(st.batch.seqs.size());
  const int64_t n_chunks = (C + kConvChunk - 1) / kConvChunk;
  kv::StateStore& states = *st.batch.states;
  const int64_t layer_off = r * states.layer_floats(), conv_floats = states.conv_floats();
  run(st, static_cast<size_t>(n_seqs * n_chunks), kConvChunk * d.d_conv * 4, [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      const auto i = static_cast<int64_t>(item) / n_chunks, c0 = static_cast<int64_t>(item) % n_chunks * kConvChunk;
      const int64_t c1 = std::min(C, c0 + kConvChunk);
      const BatchSeq& q = st.batch.seqs[static_cast<size_t>(i)];
      float* conv = states.conv(q.state_slot, r);
      float* x = &s.mixed[static_cast<size_t>(s.seq_tok[i] * C)];
      int64_t t0 = 0;  // segments end at the captured positions (deltanet_conv runs token by token)
      for (const StateCapture& cap : q.captures) {
        const int64_t t1 = cap.n_tokens - q.pos0;
        model::deltanet_conv(d, x + t0 * C, t1 - t0, C, conv, L.ssm_conv, c0, c1, st.ops);
        for (int64_t j = 0; cap.dst != nullptr && j + 1 < d.d_conv; ++j)
          std::copy(conv + j * C + c0, conv + j * C + c1, cap.dst + layer_off + j * C + c0);
        t0 = t1;
      }
      if (t0 < q.n_tokens) model::deltanet_conv(d, x + t0 * C, q.n_tokens - t0, C, conv, L.ssm_conv, c0, c1, st.ops);
    }
  });
  run(st, static_cast<size_t>(n), 4 * 2 * d.key_dim(), [&](size_t b, size_t e) {
    model::deltanet_l2norm_qk(d, &s.mixed[b * C], static_cast<int64_t>(e - b), C, st.c.rms_eps);
  });
  const int64_t head_work = 6 * int64_t{d.head_v_dim} * d.head_k_dim;
  run(st, static_cast<size_t>(n_seqs * H), head_work, [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      const auto i = static_cast<int64_t>(item) / H;
      const auto h = static_cast<int32_t>(static_cast<int64_t>(item) % H);
      const BatchSeq& q = st.batch.seqs[static_cast<size_t>(i)];
      float* ssm = states.ssm(q.state_slot, r);
      const int64_t head = int64_t{h} * d.head_v_dim * d.head_k_dim, head_floats = int64_t{d.head_v_dim} * d.head_k_dim;
      int64_t a = 0;  // segments end at the captured positions, as in the convolution
      auto segment = [&](int64_t b0, int64_t b1) {
        const int64_t t0 = s.seq_tok[i] + b0;
        model::deltanet_rule(d, L, &s.mixed[static_cast<size_t>(t0 * C)], b1 - b0, C, &s.beta[t0 * H], &s.alpha[t0 * H],
                             H, ssm, &s.rec_out[t0 * V], V, h, h + 1, q.pos0 + b0);
      };
      for (const StateCapture& cap : q.captures) {
        const int64_t t1 = cap.n_tokens - q.pos0;
        segment(a, t1);
        if (cap.dst != nullptr) std::copy_n(ssm + head, head_floats, cap.dst + layer_off + conv_floats + head);
        a = t1;
      }
      if (a < q.n_tokens) segment(a, q.n_tokens);
    }
  });
  run(st, static_cast<size_t>(n), 8 * V, [&](size_t b, size_t e) {
    model::deltanet_gate(d, L, &s.rec_out[b * V], V, &s.z[b * V], V, static_cast<int64_t>(e - b), st.c.rms_eps, 0,
                         d.n_v_heads, st.ops);
  });
  model::linear(s.proj.data(), s.rec_out.data(), n, L.w_ssm_out, nullptr, st.pool, s.matmul);
}

// Zeroes the state of slices that start their sequence; marks every slot's new position (after
// the step: the layers all run unconditionally once validation passed).
void prepare_states(const StepBatch& batch) {
  if (batch.states == nullptr) return;
  for (const BatchSeq& q : batch.seqs)
    if (q.pos0 == 0) batch.states->reset(q.state_slot);
}

void advance_states(const StepBatch& batch) {
  if (batch.states == nullptr) return;
  for (const BatchSeq& q : batch.seqs) batch.states->set_n_tokens(q.state_slot, q.pos0 + q.n_tokens);
}

}  // namespace

Status forward_batch(const model::Model& m, const StepBatch& batch, kv::KvStore& store, std::span<float> logits,
                     ThreadPool& pool, BatchScratch& scratch) {
  const model::ModelConfig& c = m.config();
  const model::Weights& w = m.weights();
  auto n_logits = validate(c, batch, store, logits);
  if (!n_logits.ok()) return n_logits.error();

  Step st{m, c, w, batch, store, scratch, pool, kernels::active_vector_ops()};
  st.n = static_cast<int64_t>(batch.tokens.size());
  st.E = c.n_embd;
  st.H = c.n_head;
  st.block_size = store.block_size();
  st.att_scale = m.attn_scale();
  st.n_ctx = batch.n_ctx > 0 ? batch.n_ctx : c.n_ctx_train;
  plan_step(st);
  BatchScratch& s = scratch;
  kernels::MatmulScratch& mm = s.matmul;
  const int64_t n = st.n;

  const bool hybrid = c.deltanet.interval > 0;
  if (hybrid) prepare_states(batch);
  embed_tokens(st);  // also the first layer's attention norm
  if (c.n_embd_ple > 0)
    model::ple_inputs(c, w, batch.tokens.data(), s.x.data(), n, s.ple.data(), s.ple_row.data(), pool, mm,
                      batch.spans.empty() ? nullptr : s.tok_embd.data());
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const model::LayerWeights& L = w.layers[static_cast<size_t>(l)];
    st.layer = l;
    st.kv_layer = c.kv_layer(l);
    st.own_kv = c.layer_has_kv(l);
    st.D = c.layer_head_dim(l);
    st.Q = st.H * st.D;
    st.KV = c.layer_n_embd_kv(l);
    st.F = c.layer_n_ff(l);
    if (c.layer_is_recurrent(l)) {
      deltanet_layer(st, L);
    } else {
      const model::LinearPart qkv[] = {{&L.wq, L.bq, L.attn_gated ? s.q_gate.data() : s.q.data()},
                                       {&L.wk, L.bk, s.k.data()},
                                       {&L.wv, L.bv, s.v.data()}};
      // Q, K and V; a shared-KV layer only Q; without V weights V is K's projection (Gemma 4).
      const size_t n_parts = !st.own_kv ? 1 : L.wv ? 3 : 2;
      model::linear_many(std::span(qkv, n_parts), s.xn.data(), n, pool, mm);
      if (st.own_kv && !L.wv) std::copy_n(s.k.data(), n * st.KV, s.v.data());
      if (L.attn_gated) split_q_gate(st);
      rope_and_store(st);
      attention(st);
      if (L.attn_gated) apply_attn_gate(st);
      model::linear(s.proj.data(), s.att.data(), n, L.wo, nullptr, pool, mm);
    }
    st.post_norm = L.attn_post_norm;
    st.next_norm = L.ffn_norm;
    residual(st);

    if (!L.w_down) continue;  // a layer without FFN (the MTP block of some files): the last one
    // Gated feed-forward: down(act(gate(x)) * up(x)).
    const model::LinearPart gate_up[] = {{&L.w_gate, nullptr, s.gate.data()}, {&L.w_up, nullptr, s.up.data()}};
    model::linear_many(gate_up, s.xn.data(), n, pool, mm);
    gated_act(st);
    model::linear(s.proj.data(), s.gate.data(), n, L.w_down, nullptr, pool, mm);
    st.post_norm = L.ffn_post_norm;
    const float* next_norm = l + 1 < c.n_layer ? w.layers[static_cast<size_t>(l) + 1].attn_norm : nullptr;
    st.next_norm = c.arch->gemma4 ? nullptr : next_norm;
    residual(st);
    if (c.arch->gemma4) {  // the per-layer embedding and output scale, then the next layer's norm
      model::ple_layer(c, L, l, s.x.data(), s.ple.data(), n, s.ple_gate.data(), s.proj.data(), pool, mm);
      st.next_norm = next_norm;
      next_layer_norm(st);
    }
  }

  if (hybrid) advance_states(batch);
  if (batch.want_hidden) {
    float* hidden = grow(s.hidden, n * st.E);
    run(st, static_cast<size_t>(n), 2 * st.E, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) st.ops.rms_norm(&hidden[t * st.E], &s.x[t * st.E], w.output_norm, st.E, c.rms_eps);
    });
  }
  if (*n_logits == 0) return ok_status();
  float* x_out = grow(s.x_out, *n_logits * st.E);  // [n_logits, n_embd]
  int64_t j = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const int64_t end = s.seq_tok[i + 1];
    for (int64_t t = end - batch.seqs[i].n_logits; t < end; ++t)
      st.ops.rms_norm(&x_out[j++ * st.E], &s.x[static_cast<size_t>(t * st.E)], w.output_norm, st.E, c.rms_eps);
  }
  model::linear(logits.data(), x_out, *n_logits, w.output, nullptr, pool, mm);
  if (c.final_softcap > 0.0f) st.ops.soft_cap(logits.data(), *n_logits * c.n_vocab, c.final_softcap);
  return ok_status();
}

}  // namespace edgelm::engine
