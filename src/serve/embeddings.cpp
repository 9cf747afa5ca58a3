#include "serve/embeddings.h"

#include <algorithm>
#include <cmath>

#include "model/kv_cache.h"
#include "model/ops.h"

namespace edgelm::serve {

using namespace edgelm::model;

Result<std::vector<float>> embed_tokens(const Model& m, std::span<const TokenId> tokens, ThreadPool& pool) {
  const ModelConfig& c = m.config();
  const Weights& w = m.weights();
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return make_error("embeddings: no tokens");
  for (const TokenId t : tokens)
    if (t < 0 || t >= c.n_vocab) return make_error("token id {} is outside the vocabulary [0, {})", t, c.n_vocab);
  KvCache cache(c, static_cast<int32_t>(n));

  const int64_t E = c.n_embd, D = c.head_dim, Q = static_cast<int64_t>(c.n_head) * D, KV = c.n_embd_kv(), F = c.n_ff;
  std::vector<float> x(n * E), xn(n * E), q(n * Q), k(n * KV), v(n * KV), att(n * Q), proj(n * E), gate(n * F),
      up(n * F), scores(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) kernels::get_row(w.token_embd, tokens[static_cast<size_t>(t)], &x[t * E]);
  kernels::MatmulScratch scratch;
  const float att_scale = 1.0f / std::sqrt(static_cast<float>(D));

  for (int32_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    for (int64_t t = 0; t < n; ++t) rms_norm(&xn[t * E], &x[t * E], L.attn_norm, E, c.rms_eps);
    linear(q.data(), xn.data(), n, L.wq, L.bq, pool, scratch);
    linear(k.data(), xn.data(), n, L.wk, L.bk, pool, scratch);
    linear(v.data(), xn.data(), n, L.wv, L.bv, pool, scratch);
    for (int64_t t = 0; t < n; ++t) {
      const auto pos = static_cast<int32_t>(t);
      rope(&q[t * Q], c.n_head, c.head_dim, c.n_rot, pos, c.rope_base, c.arch->rope_style);
      rope(&k[t * KV], c.n_head_kv, c.head_dim, c.n_rot, pos, c.rope_base, c.arch->rope_style);
      std::copy(&k[t * KV], &k[t * KV] + KV, cache.k(l, pos));
      std::copy(&v[t * KV], &v[t * KV] + KV, cache.v(l, pos));
    }
    for (int64_t t = 0; t < n; ++t) {
      const auto n_kv_pos = static_cast<int32_t>(t + 1);
      for (int32_t h = 0; h < c.n_head; ++h) {
        const int64_t kv_off = static_cast<int64_t>(h / c.n_gqa()) * D;
        attention_head(&q[t * Q + h * D], cache.k(l, 0) + kv_off, cache.v(l, 0) + kv_off, KV, n_kv_pos, D, att_scale,
                       scores.data(), &att[t * Q + h * D]);
      }
    }
    linear(proj.data(), att.data(), n, L.wo, nullptr, pool, scratch);
    add_inplace(x.data(), proj.data(), n * E);
    for (int64_t t = 0; t < n; ++t) rms_norm(&xn[t * E], &x[t * E], L.ffn_norm, E, c.rms_eps);
    linear(gate.data(), xn.data(), n, L.w_gate, nullptr, pool, scratch);
    linear(up.data(), xn.data(), n, L.w_up, nullptr, pool, scratch);
    swiglu(gate.data(), up.data(), n * F);
    linear(proj.data(), gate.data(), n, L.w_down, nullptr, pool, scratch);
    add_inplace(x.data(), proj.data(), n * E);
  }

  // Mean of the normed final states (in double), then L2 normalization.
  std::vector<double> sum(static_cast<size_t>(E), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    rms_norm(&xn[t * E], &x[t * E], w.output_norm, E, c.rms_eps);
    for (int64_t i = 0; i < E; ++i) sum[static_cast<size_t>(i)] += xn[t * E + i];
  }
  double norm2 = 0.0;
  for (double& s : sum) {
    s /= static_cast<double>(n);
    norm2 += s * s;
  }
  const double inv = norm2 > 0.0 ? 1.0 / std::sqrt(norm2) : 0.0;
  std::vector<float> out(static_cast<size_t>(E));
  for (int64_t i = 0; i < E; ++i) out[static_cast<size_t>(i)] = static_cast<float>(sum[static_cast<size_t>(i)] * inv);
  return out;
}

}  // namespace edgelm::serve
