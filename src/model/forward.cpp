// The forward pass (see model.h). One code path for every architecture in arch.cpp: the
// rotary layout, Q/K norms, the attention biases, post-norms, the FFN's activation, the
// embedding scale, soft-capping and the sliding window of local layers follow the config's
// ArchSpec and the tensors the file has (null biases/norms are skipped); RoPE scaling lives in
// the RopeTables (Model::rope_for). Matrices go
// through kernels::matmul in their stored type; with F32 weights and the scalar kernels this is
// the plain FP32 reference computation. The per-token operations live in ops.h, shared with the
// engine's batched forward, which must stay bit-identical to this one.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/deltanet.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/ple.h"

namespace edgelm::model {
namespace {
// The reference forward's element-wise math is the scalar expressions (kernels/ops_vector.h).
const kernels::VectorOps& scalar_ops() { return *kernels::vector_ops(kernels::Isa::scalar); }
}  // namespace

void Model::prepare_qk(int32_t layer, float* q, float* k, const RopePos& pos, int32_t n_ctx) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[static_cast<size_t>(layer)];
  const int32_t D = c.layer_head_dim(layer);
  if (L.attn_q_norm != nullptr)
    for (int32_t h = 0; h < c.n_head; ++h) rms_norm(q + h * D, q + h * D, L.attn_q_norm, D, c.rms_eps);
  if (k != nullptr && L.attn_k_norm != nullptr)
    for (int32_t h = 0; h < c.n_head_kv; ++h) rms_norm(k + h * D, k + h * D, L.attn_k_norm, D, c.rms_eps);
  const RopeTable& rope = rope_for(layer, n_ctx);
  rope.apply(q, c.n_head, D, pos);
  if (k != nullptr) rope.apply(k, c.n_head_kv, D, pos);
}

void Model::prepare_v(int32_t layer, float* v) const {
  const ModelConfig& c = config_;
  if (!c.v_norm) return;
  const int32_t D = c.layer_head_dim(layer);
  for (int32_t h = 0; h < c.n_head_kv; ++h) rms_norm(v + h * D, v + h * D, nullptr, D, c.rms_eps);
}

// Softmax attention of one layer: Q/K/V projections (Q with its output gate when the layer has
// one; V is K's projection when the layer has no V weights), Q/K (and V) norms and RoPE, the new
// K/V appended to the cache (a shared-KV layer computes only Q and reads its source layer's),
// causal attention over the cache (a local layer: its window), the gate, the output projection
// into proj.
void Model::attention_layer(int32_t l, const float* xn, int64_t n, int32_t pos0, KvCache& cache, float* proj,
                            ThreadPool& pool, kernels::MatmulScratch& scratch, std::span<const EmbdSpan> spans,
                            std::span<const MropeImage> mrope) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
  const int64_t D = c.layer_head_dim(l), Q = static_cast<int64_t>(c.n_head) * D, KV = c.layer_n_embd_kv(l);
  const int32_t kl = c.kv_layer(l);
  const bool own_kv = c.layer_has_kv(l);
  std::vector<float> q(n * Q), k(n * KV), v(n * KV), att(n * Q), gate;
  std::vector<float> scores(static_cast<size_t>(pos0 + n));  // [n_past + n] attention weights of one head
  if (L.attn_gated) {
    std::vector<float> qg(n * 2 * Q);
    linear(qg.data(), xn, n, L.wq, L.bq, pool, scratch);
    gate.resize(static_cast<size_t>(n * Q));
    split_q_gate(qg.data(), q.data(), gate.data(), n, c.n_head, D);
  } else {
    linear(q.data(), xn, n, L.wq, L.bq, pool, scratch);
  }
  if (own_kv) {
    linear(k.data(), xn, n, L.wk, L.bk, pool, scratch);
    if (L.wv) {
      linear(v.data(), xn, n, L.wv, L.bv, pool, scratch);
    } else {
      v = k;  // Gemma 4 without V weights: V is K's projection
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    const auto pos = static_cast<int32_t>(pos0 + t);
    const RopePos rp = mrope.empty() ? RopePos(pos) : mrope_position(mrope, pos);
    prepare_qk(l, &q[t * Q], own_kv ? &k[t * KV] : nullptr, rp, cache.n_ctx());
    if (!own_kv) continue;
    prepare_v(l, &v[t * KV]);
    std::copy(&k[t * KV], &k[t * KV] + KV, cache.k(kl, pos));
    std::copy(&v[t * KV], &v[t * KV] + KV, cache.v(kl, pos));
  }
  // Causal attention: token t (position pos0 + t) attends to positions [lo, pos0 + t]: from 0,
  // or in a local layer the last `window` of them; a token of a bidirectional embedding span up
  // to the span's last position (embd_span.h).
  const int32_t window = c.layer_window(l);
  const float att_scale = attn_scale();
  for (int64_t t = 0; t < n; ++t) {
    const auto pos = static_cast<int32_t>(pos0 + t);
    const int32_t lo = window > 0 ? std::max(0, pos - window + 1) : 0;
    const EmbdSpan* span = embd_span_at(spans, pos);
    const int32_t hi = embd_span_attention_end(span, pos);  // exclusive
    for (int32_t h = 0; h < c.n_head; ++h) {
      const int64_t kv_off = static_cast<int64_t>(h / c.n_gqa()) * D;
      attention_head(&q[t * Q + h * D], cache.k(kl, lo) + kv_off, cache.v(kl, lo) + kv_off, KV, hi - lo, D, att_scale,
                     scores.data(), &att[t * Q + h * D], c.attn_softcap);
    }
  }
  if (L.attn_gated) sigmoid_gate(att.data(), gate.data(), n * Q);
  linear(proj, att.data(), n, L.wo, nullptr, pool, scratch);
}

// A Gated DeltaNet layer (model/deltanet.h) over the sequence's recurrent state, into proj.
void Model::deltanet_layer(int32_t l, const float* xn, int64_t n, KvCache& cache, float* proj, ThreadPool& pool,
                           kernels::MatmulScratch& scratch) const {
  const ModelConfig& c = config_;
  const DeltaNetConfig& d = c.deltanet;
  const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
  const int64_t C = d.conv_dim(), V = d.value_dim(), H = d.n_v_heads;
  std::vector<float> mixed(n * C), z(n * V), beta(n * H), alpha(n * H), out(n * V);
  linear(mixed.data(), xn, n, L.w_qkv_mixed, nullptr, pool, scratch);
  linear(z.data(), xn, n, L.w_z, nullptr, pool, scratch);
  linear(beta.data(), xn, n, L.w_beta, nullptr, pool, scratch);
  linear(alpha.data(), xn, n, L.w_alpha, nullptr, pool, scratch);
  const int32_t r = c.recurrent_index(l);
  deltanet_conv(d, mixed.data(), n, C, cache.conv_state(r), L.ssm_conv, 0, C, scalar_ops());
  deltanet_l2norm_qk(d, mixed.data(), n, C, c.rms_eps);
  deltanet_rule(d, L, mixed.data(), n, C, beta.data(), alpha.data(), H, cache.ssm_state(r), out.data(), V, 0,
                d.n_v_heads, cache.n_past());
  deltanet_gate(d, L, out.data(), V, z.data(), V, n, c.rms_eps, 0, d.n_v_heads, scalar_ops());
  linear(proj, out.data(), n, L.w_ssm_out, nullptr, pool, scratch);
}

Status Model::forward(std::span<const TokenId> tokens, KvCache& cache, std::span<float> logits, ThreadPool& pool,
                      std::span<float> hidden, std::span<const EmbdSpan> spans,
                      std::span<const MropeImage> mrope) const {
  const ModelConfig& c = config_;
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return make_error("forward: no tokens");
  const int32_t pos0 = cache.n_past();
  if (pos0 + n > cache.n_ctx())
    return make_error("context overflow: {} tokens at position {} exceed the context of {}", n, pos0, cache.n_ctx());
  for (const TokenId t : tokens)
    if (t < 0 || t >= c.n_vocab) return make_error("token id {} is outside the vocabulary [0, {})", t, c.n_vocab);
  if (!logits.empty() && static_cast<int64_t>(logits.size()) != c.n_vocab)
    return make_error("logits buffer has {} entries, the vocabulary {}", logits.size(), c.n_vocab);
  if (!hidden.empty() && static_cast<int64_t>(hidden.size()) != n * c.n_embd)
    return make_error("hidden-state buffer has {} entries, {} tokens x {} need {}", hidden.size(), n, c.n_embd,
                      n * c.n_embd);
  if (!mrope.empty() && !c.has_mrope())
    return make_error("forward: M-RoPE image positions given to {}, which has no M-RoPE sections", c.arch->name);
  if (const Status st = mrope_check(mrope); !st) return make_error("forward: {}", st.error().message);
  if (c.arch->bidirectional && spans.empty())
    return make_error(
        "forward: {} is an embedding model (its texts attend bidirectionally); it runs through the embed layer "
        "(/v1/embeddings, edgelm embed), not the causal forward",
        c.arch->name);
  for (size_t i = 0; i < spans.size(); ++i) {
    const EmbdSpan& sp = spans[i];
    if (sp.n_tokens <= 0 || sp.pos0 < 0 || sp.embd == nullptr)
      return make_error("forward: embedding span {} is empty or has no rows", i);
    for (size_t j = 0; j < i; ++j)
      if (sp.pos0 < spans[j].end() && spans[j].pos0 < sp.end())
        return make_error("forward: embedding spans {} and {} overlap", j, i);
    if (sp.pos0 < pos0 + n && sp.end() > pos0 + n)
      return make_error("forward: embedding span [{}, {}) does not end inside the run [{}, {})", sp.pos0, sp.end(),
                        pos0, pos0 + n);
  }

  const int64_t E = c.n_embd, F = c.n_ff;
  std::vector<float> x(n * E);     // [n, n_embd] residual stream
  std::vector<float> xn(n * E);    // [n, n_embd] normalized input of a sub-layer
  std::vector<float> proj(n * E);  // [n, n_embd] sub-layer output
  std::vector<float> gate(n * F);  // [n, n_ff]
  std::vector<float> up(n * F);    // [n, n_ff]
  const int64_t LP = int64_t{c.n_layer} * c.n_embd_ple;
  std::vector<float> ple(n * LP);                 // [n, n_layer * n_embd_ple] Gemma 4's per-layer inputs
  std::vector<float> ple_row(LP);                 // [n_layer * n_embd_ple] one token's table row
  std::vector<float> ple_gate(n * c.n_embd_ple);  // [n, n_embd_ple]

  // Token rows scaled (Gemma), supplied embedding rows as they are.
  const float embd_scale = c.arch->scale_embd ? std::sqrt(static_cast<float>(E)) : 1.0f;
  std::vector<const float*> supplied(spans.empty() ? 0 : static_cast<size_t>(n), nullptr);
  for (int64_t t = 0; t < n; ++t) {
    const auto pos = static_cast<int32_t>(pos0 + t);
    if (const EmbdSpan* sp = embd_span_at(spans, pos); sp != nullptr) {
      supplied[static_cast<size_t>(t)] = sp->embd + static_cast<int64_t>(pos - sp->pos0) * E;
      std::copy_n(supplied[static_cast<size_t>(t)], E, &x[t * E]);
      continue;
    }
    kernels::get_row(weights_.token_embd, tokens[static_cast<size_t>(t)], &x[t * E]);
    if (c.arch->scale_embd)
      for (int64_t i = 0; i < E; ++i) x[t * E + i] *= embd_scale;
  }
  kernels::MatmulScratch scratch;
  if (LP > 0)
    ple_inputs(c, weights_, tokens.data(), x.data(), n, ple.data(), ple_row.data(), pool, scratch,
               supplied.empty() ? nullptr : supplied.data());

  if (pos0 == 0) cache.clear();  // a sequence starts from the zero recurrent state
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    for (int64_t t = 0; t < n; ++t) rms_norm(&xn[t * E], &x[t * E], L.attn_norm, E, c.rms_eps);
    if (c.layer_is_recurrent(l)) {
      deltanet_layer(l, xn.data(), n, cache, proj.data(), pool, scratch);
    } else {
      attention_layer(l, xn.data(), n, pos0, cache, proj.data(), pool, scratch, spans, mrope);
    }
    if (L.attn_post_norm != nullptr)
      for (int64_t t = 0; t < n; ++t) rms_norm(&proj[t * E], &proj[t * E], L.attn_post_norm, E, c.rms_eps);
    add_inplace(x.data(), proj.data(), n * E);

    // Gated feed-forward: down(act(gate(x)) * up(x)), act SiLU (SwiGLU) or GELU-tanh (GeGLU).
    // The layer's FFN size Fl (Gemma 4's may differ per layer): gate and up are [n, Fl].
    const int64_t Fl = c.layer_n_ff(l);
    for (int64_t t = 0; t < n; ++t) rms_norm(&xn[t * E], &x[t * E], L.ffn_norm, E, c.rms_eps);
    linear(gate.data(), xn.data(), n, L.w_gate, nullptr, pool, scratch);
    linear(up.data(), xn.data(), n, L.w_up, nullptr, pool, scratch);
    if (c.arch->ffn_act == FfnAct::gelu_tanh) {
      geglu(gate.data(), up.data(), n * Fl);
    } else {
      swiglu(gate.data(), up.data(), n * Fl);
    }
    linear(proj.data(), gate.data(), n, L.w_down, nullptr, pool, scratch);
    if (L.ffn_post_norm != nullptr)
      for (int64_t t = 0; t < n; ++t) rms_norm(&proj[t * E], &proj[t * E], L.ffn_post_norm, E, c.rms_eps);
    add_inplace(x.data(), proj.data(), n * E);
    if (c.arch->gemma4) ple_layer(c, L, l, x.data(), ple.data(), n, ple_gate.data(), proj.data(), pool, scratch);
  }
  cache.set_n_past(static_cast<int32_t>(pos0 + n));

  if (!logits.empty()) {
    const float* last = &x[(n - 1) * E];
    rms_norm(xn.data(), last, weights_.output_norm, E, c.rms_eps);
    linear(logits.data(), xn.data(), 1, weights_.output, nullptr, pool, scratch);
    cap_logits(logits.data(), c.n_vocab);
  }
  if (!hidden.empty())
    for (int64_t t = 0; t < n; ++t) rms_norm(&hidden[t * E], &x[t * E], weights_.output_norm, E, c.rms_eps);
  return ok_status();
}

}  // namespace edgelm::model
