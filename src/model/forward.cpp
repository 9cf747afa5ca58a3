// The forward pass (see model.h). One code path for every architecture in arch.cpp: the
// rotary layout and the attention biases are read from the config's ArchSpec. Matrices go
// through kernels::matmul in their stored type; with F32 weights and the scalar kernels this is
// the plain FP32 reference computation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "model/model.h"

namespace edgelm::model {
namespace {

// out[t, :] = W x[t, :] (+ bias) for t < n_tok; out: [n_tok, w.rows].
void linear(float* out, const float* x, int64_t n_tok, const WeightMatrix& w, const float* bias, ThreadPool& pool,
            kernels::MatmulScratch& scratch) {
  kernels::matmul(w, x, n_tok, out, pool, scratch);
  if (bias == nullptr) return;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < w.rows; ++r) out[t * w.rows + r] += bias[r];
}

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], for one row of n.
void rms_norm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

// Rotates the first n_rot dims of each of n_heads heads of one token at position pos.
// norm: pairs (2i, 2i+1); neox: pairs (i, i + n_rot/2); pair i turns by pos * base^(-2i/n_rot).
void rope(float* v, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t pos, float base, RopeStyle style) {
  const int32_t half = n_rot / 2;
  for (int32_t i = 0; i < half; ++i) {
    const float theta = static_cast<float>(pos) * std::pow(base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot));
    const float c = std::cos(theta), s = std::sin(theta);
    const int32_t a = style == RopeStyle::norm ? 2 * i : i;
    const int32_t b = style == RopeStyle::norm ? 2 * i + 1 : i + half;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* x = v + static_cast<int64_t>(h) * head_dim;
      const float x0 = x[a], x1 = x[b];
      x[a] = x0 * c - x1 * s;
      x[b] = x0 * s + x1 * c;
    }
  }
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

Status Model::forward(std::span<const TokenId> tokens, KvCache& cache, std::span<float> logits, ThreadPool& pool) const {
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

  const int64_t E = c.n_embd, D = c.head_dim, Q = static_cast<int64_t>(c.n_head) * D, KV = c.n_embd_kv(), F = c.n_ff;
  std::vector<float> x(n * E);        // [n, n_embd] residual stream
  std::vector<float> xn(n * E);       // [n, n_embd] normalized input of a sub-layer
  std::vector<float> q(n * Q);        // [n, n_head * head_dim]
  std::vector<float> k(n * KV);       // [n, n_embd_kv]
  std::vector<float> v(n * KV);       // [n, n_embd_kv]
  std::vector<float> att(n * Q);      // [n, n_head * head_dim] attention output
  std::vector<float> proj(n * E);     // [n, n_embd] sub-layer output
  std::vector<float> gate(n * F);     // [n, n_ff]
  std::vector<float> up(n * F);       // [n, n_ff]
  std::vector<float> scores(static_cast<size_t>(pos0 + n));  // [n_past + n] attention weights of one head

  for (int64_t t = 0; t < n; ++t) kernels::get_row(weights_.token_embd, tokens[static_cast<size_t>(t)], &x[t * E]);
  kernels::MatmulScratch scratch;
  const float att_scale = 1.0f / std::sqrt(static_cast<float>(D));

  for (int32_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    for (int64_t t = 0; t < n; ++t) rms_norm(&xn[t * E], &x[t * E], L.attn_norm, E, c.rms_eps);
    linear(q.data(), xn.data(), n, L.wq, L.bq, pool, scratch);
    linear(k.data(), xn.data(), n, L.wk, L.bk, pool, scratch);
    linear(v.data(), xn.data(), n, L.wv, L.bv, pool, scratch);
    for (int64_t t = 0; t < n; ++t) {
      const auto pos = static_cast<int32_t>(pos0 + t);
      rope(&q[t * Q], c.n_head, c.head_dim, c.n_rot, pos, c.rope_base, c.arch->rope_style);
      rope(&k[t * KV], c.n_head_kv, c.head_dim, c.n_rot, pos, c.rope_base, c.arch->rope_style);
      std::copy(&k[t * KV], &k[t * KV] + KV, cache.k(l, pos));
      std::copy(&v[t * KV], &v[t * KV] + KV, cache.v(l, pos));
    }
    // Causal attention: token t (position pos0 + t) attends to positions [0, pos0 + t].
    for (int64_t t = 0; t < n; ++t) {
      const auto n_kv_pos = static_cast<int32_t>(pos0 + t + 1);
      for (int32_t h = 0; h < c.n_head; ++h) {
        const int32_t kv_head = h / c.n_gqa();
        const float* qh = &q[t * Q + h * D];
        float max_score = -INFINITY;
        for (int32_t p = 0; p < n_kv_pos; ++p) {
          const float* kp = cache.k(l, p) + kv_head * D;
          float dot = 0.0f;
          for (int64_t i = 0; i < D; ++i) dot += qh[i] * kp[i];
          scores[static_cast<size_t>(p)] = dot * att_scale;
          max_score = std::max(max_score, scores[static_cast<size_t>(p)]);
        }
        float sum = 0.0f;
        for (int32_t p = 0; p < n_kv_pos; ++p) {
          scores[static_cast<size_t>(p)] = std::exp(scores[static_cast<size_t>(p)] - max_score);
          sum += scores[static_cast<size_t>(p)];
        }
        float* out = &att[t * Q + h * D];
        std::fill(out, out + D, 0.0f);
        for (int32_t p = 0; p < n_kv_pos; ++p) {
          const float w = scores[static_cast<size_t>(p)] / sum;
          const float* vp = cache.v(l, p) + kv_head * D;
          for (int64_t i = 0; i < D; ++i) out[i] += w * vp[i];
        }
      }
    }
    linear(proj.data(), att.data(), n, L.wo, nullptr, pool, scratch);
    for (int64_t i = 0; i < n * E; ++i) x[i] += proj[i];

    // SwiGLU feed-forward: down(silu(gate(x)) * up(x)).
    for (int64_t t = 0; t < n; ++t) rms_norm(&xn[t * E], &x[t * E], L.ffn_norm, E, c.rms_eps);
    linear(gate.data(), xn.data(), n, L.w_gate, nullptr, pool, scratch);
    linear(up.data(), xn.data(), n, L.w_up, nullptr, pool, scratch);
    for (int64_t i = 0; i < n * F; ++i) gate[i] = silu(gate[i]) * up[i];
    linear(proj.data(), gate.data(), n, L.w_down, nullptr, pool, scratch);
    for (int64_t i = 0; i < n * E; ++i) x[i] += proj[i];
  }
  cache.set_n_past(static_cast<int32_t>(pos0 + n));

  if (!logits.empty()) {
    const float* last = &x[(n - 1) * E];
    rms_norm(xn.data(), last, weights_.output_norm, E, c.rms_eps);
    linear(logits.data(), xn.data(), 1, weights_.output, nullptr, pool, scratch);
  }
  return ok_status();
}

}  // namespace edgelm::model
