// The batched encoder forward pass (encoder_model.h): the rows of all texts stacked into one
// [rows, n_embd] matrix, every linear one kernels::matmul over all rows (Q/K/V and up/gate as one
// matmul_many), attention per (text, head) over that text's rows only, LayerNorm statistics in
// double, per-row work split over the pool. Nothing depends on the number of threads.
// GELU is the tanh form (model/ops.h gelu_tanh) for bert and jina-bert-v2 alike: what the reference
// engines compute (Hugging Face's BERT uses the erf form; the two differ by < 5e-4 per activation).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops_vector.h"
#include "model/encoder_model.h"
#include "model/ops.h"

namespace edgelm::model {
namespace {

// out = (x - mean) / sqrt(var + eps) * w + b over one row of n; out may alias x.
void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double var = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    var += d * d;
  }
  var /= static_cast<double>(n);
  const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((x[i] - mean) * inv) * w[i] + b[i];
}

// Where each text's rows start in the stacked matrix, and which text each row belongs to.
struct RowMap {
  std::vector<int64_t> start;  // [n_texts + 1]
  std::vector<int32_t> text;   // [rows]
  int64_t rows = 0;
};

RowMap row_map(std::span<const std::vector<int32_t>> texts) {
  RowMap m;
  m.start.reserve(texts.size() + 1);
  for (size_t t = 0; t < texts.size(); ++t) {
    m.start.push_back(m.rows);
    m.rows += static_cast<int64_t>(texts[t].size());
    m.text.insert(m.text.end(), texts[t].size(), static_cast<int32_t>(t));
  }
  m.start.push_back(m.rows);
  return m;
}

// LayerNorm of every row of x [rows, n] in place, rows split over the pool.
void layer_norm_rows(float* x, int64_t rows, int64_t n, const float* w, const float* b, float eps, ThreadPool& pool) {
  pool.parallel_for(static_cast<size_t>(rows), [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) layer_norm(x + r * n, x + r * n, w, b, n, eps);
  });
}

// Query rows attend_text scores together: each K^T row and V row loaded once serves them all.
constexpr int32_t kQueryBlock = 4;

// Softmax attention of one head over one text of n rows: q, k, v point at the text's first row's
// head slice (rows `stride` floats apart), out at its first output row (rows out_stride apart).
// Scores: (q . k_j) * scale - slope * |i - j| (slope 0: no ALiBi). K is transposed into kt
// [head_dim, n] so that each score row is a sum of axpys (vectorizable without reassociation),
// kQueryBlock query rows at a time; every sum still runs in index order, so a row's result does
// not depend on its block. scores: [kQueryBlock * n] scratch.
void attend_text(const float* q, const float* k, const float* v, int64_t stride, int32_t n, int32_t head_dim,
                 float scale, float slope, float* out, int64_t out_stride, float* kt, float* scores) {
  const auto N = static_cast<size_t>(n);
  for (int32_t j = 0; j < n; ++j)
    for (int32_t d = 0; d < head_dim; ++d) kt[static_cast<size_t>(d) * N + static_cast<size_t>(j)] = k[j * stride + d];
  for (int32_t i0 = 0; i0 < n; i0 += kQueryBlock) {
    const int32_t nb = std::min(kQueryBlock, n - i0);
    float* s0 = scores;
    float* s1 = scores + N;
    float* s2 = scores + 2 * N;
    float* s3 = scores + 3 * N;
    std::fill(scores, scores + kQueryBlock * N, 0.0f);
    for (int32_t d = 0; d < head_dim; ++d) {
      // Rows past the text's end score with 0 queries into rows that are never read.
      const float q0 = q[i0 * stride + d];
      const float q1 = nb > 1 ? q[(i0 + 1) * stride + d] : 0.0f;
      const float q2 = nb > 2 ? q[(i0 + 2) * stride + d] : 0.0f;
      const float q3 = nb > 3 ? q[(i0 + 3) * stride + d] : 0.0f;
      const float* kr = kt + static_cast<size_t>(d) * N;
      for (size_t j = 0; j < N; ++j) {
        const float kj = kr[j];
        s0[j] += q0 * kj;
        s1[j] += q1 * kj;
        s2[j] += q2 * kj;
        s3[j] += q3 * kj;
      }
    }
    float inv[kQueryBlock] = {};
    for (int32_t b = 0; b < nb; ++b) {
      float* sc = scores + static_cast<size_t>(b) * N;
      const int32_t i = i0 + b;
      float mx = -INFINITY;
      for (int32_t j = 0; j < n; ++j) {
        float x = sc[j] * scale;
        if (slope != 0.0f) x -= slope * static_cast<float>(std::abs(i - j));
        sc[j] = x;
        mx = std::max(mx, x);
      }
      double sum = 0.0;
      for (int32_t j = 0; j < n; ++j) {
        sc[j] = std::exp(sc[j] - mx);
        sum += sc[j];
      }
      inv[b] = static_cast<float>(1.0 / sum);
      float* o = out + i * out_stride;
      std::fill(o, o + head_dim, 0.0f);
    }
    for (int32_t j = 0; j < n; ++j) {
      const float* vj = v + j * stride;
      for (int32_t b = 0; b < nb; ++b) {
        const float p = scores[static_cast<size_t>(b) * N + static_cast<size_t>(j)] * inv[b];
        float* o = out + (i0 + b) * out_stride;
        for (int32_t d = 0; d < head_dim; ++d) o[d] += p * vj[d];
      }
    }
  }
}

// NeoX rotation of the n_head heads of one row at position pos (pairs (i, i + D/2)).
void rope_neox(float* x, int32_t n_head, int32_t head_dim, const float* cos_sin_row) {
  const int32_t half = head_dim / 2;
  for (int32_t h = 0; h < n_head; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float c = cos_sin_row[2 * i], s = cos_sin_row[2 * i + 1];
      const float x0 = xh[i], x1 = xh[i + half];
      xh[i] = x0 * c - x1 * s;
      xh[i + half] = x0 * s + x1 * c;
    }
  }
}

}  // namespace

std::vector<float> encoder_forward(const EncoderConfig& c, const EncoderWeights& w,
                                   std::span<const std::vector<int32_t>> texts, ThreadPool& pool) {
  const RowMap map = row_map(texts);
  const int64_t N = map.rows, E = c.n_embd, F = c.n_ff;
  const int32_t H = c.n_head, D = c.head_dim();
  const bool fused_qkv = c.arch == EncoderArch::nomic_bert;
  const bool gated = c.arch != EncoderArch::bert;
  const int64_t qkv_stride = fused_qkv ? 3 * E : E;
  std::vector<float> x(N * E);                 // [N, E] hidden states
  std::vector<float> layer_in(N * E);          // [N, E] the layer's input (jina's attn_norm_2 re-adds it)
  std::vector<float> qkv(N * E * 3);           // fused: [N, 3E]; else q, k, v as three [N, E] blocks
  std::vector<float> att(N * E);               // [N, E] attention output (heads side by side)
  std::vector<float> proj(N * E);              // [N, E] sub-layer output
  std::vector<float> up(N * F);                // [N, F]
  std::vector<float> gate(gated ? N * F : 0);  // [N, F]
  float* q = qkv.data();
  float* k = fused_qkv ? q + E : q + N * E;
  float* v = fused_qkv ? q + 2 * E : q + 2 * N * E;

  // Embeddings: token + token type 0 (+ absolute position: bert), then LayerNorm.
  std::vector<float> type0(static_cast<size_t>(E));
  kernels::get_row(w.token_types, 0, type0.data());
  pool.parallel_for(static_cast<size_t>(N), [&](size_t begin, size_t end) {
    std::vector<float> pos(static_cast<size_t>(E));
    for (size_t r = begin; r < end; ++r) {
      const int32_t t = map.text[r];
      const int64_t p = static_cast<int64_t>(r) - map.start[static_cast<size_t>(t)];
      float* xr = &x[r * E];
      kernels::get_row(w.token_embd, texts[static_cast<size_t>(t)][static_cast<size_t>(p)], xr);
      add_inplace(xr, type0.data(), E);
      if (w.position_embd) {
        kernels::get_row(w.position_embd, p, pos.data());
        add_inplace(xr, pos.data(), E);
      }
      layer_norm(xr, xr, w.embd_norm_w, w.embd_norm_b, E, c.norm_eps);
    }
  });

  const kernels::VectorOps& vops = kernels::active_vector_ops();
  kernels::MatmulScratch scratch;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (const EncoderLayer& L : w.layers) {
    if (L.attn_norm2_w != nullptr) std::copy(x.begin(), x.end(), layer_in.begin());
    if (fused_qkv) {
      linear(q, x.data(), N, L.wqkv, nullptr, pool, scratch);
    } else {
      const LinearPart parts[] = {{&L.wq, L.bq, q}, {&L.wk, L.bk, k}, {&L.wv, L.bv, v}};
      linear_many(parts, x.data(), N, pool, scratch);
    }
    if (L.q_norm_w != nullptr) layer_norm_rows(q, N, E, L.q_norm_w, L.q_norm_b, c.norm_eps, pool);
    if (L.k_norm_w != nullptr) layer_norm_rows(k, N, E, L.k_norm_w, L.k_norm_b, c.norm_eps, pool);
    if (!w.rope_cos_sin.empty()) {
      pool.parallel_for(static_cast<size_t>(N), [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
          const int64_t p = static_cast<int64_t>(r) - map.start[static_cast<size_t>(map.text[r])];
          const float* cs = &w.rope_cos_sin[static_cast<size_t>(p) * static_cast<size_t>(D)];  // D/2 pairs of 2
          rope_neox(q + static_cast<int64_t>(r) * qkv_stride, H, D, cs);
          rope_neox(k + static_cast<int64_t>(r) * qkv_stride, H, D, cs);
        }
      });
    }
    // Attention: one (text, head) per item, over the text's own rows.
    const size_t n_items = texts.size() * static_cast<size_t>(H);
    pool.parallel_for(n_items, [&](size_t begin, size_t end) {
      std::vector<float> kt, scores;
      for (size_t it = begin; it < end; ++it) {
        const size_t t = it / static_cast<size_t>(H);
        const int32_t h = static_cast<int32_t>(it % static_cast<size_t>(H));
        const int64_t r0 = map.start[t];
        const auto n = static_cast<int32_t>(map.start[t + 1] - r0);
        kt.resize(static_cast<size_t>(n) * static_cast<size_t>(D));
        scores.resize(static_cast<size_t>(kQueryBlock) * static_cast<size_t>(n));
        const int64_t off = r0 * qkv_stride + static_cast<int64_t>(h) * D;
        const float slope = w.alibi_slopes.empty() ? 0.0f : w.alibi_slopes[static_cast<size_t>(h)];
        attend_text(q + off, k + off, v + off, qkv_stride, n, D, scale, slope, &att[r0 * E + h * D], E, kt.data(),
                    scores.data());
      }
    });
    linear(proj.data(), att.data(), N, L.wo, L.bo, pool, scratch);
    vops.add(x.data(), proj.data(), N * E);
    layer_norm_rows(x.data(), N, E, L.attn_norm_w, L.attn_norm_b, c.norm_eps, pool);
    if (L.attn_norm2_w != nullptr) {
      vops.add(x.data(), layer_in.data(), N * E);
      layer_norm_rows(x.data(), N, E, L.attn_norm2_w, L.attn_norm2_b, c.norm_eps, pool);
    }

    // Feed-forward: GELU (bert), SwiGLU (nomic-bert), GeGLU (jina-bert-v2).
    if (!gated) {
      linear(up.data(), x.data(), N, L.w_up, L.b_up, pool, scratch);
      pool.parallel_for(static_cast<size_t>(N * F), [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) up[i] = gelu_tanh(up[i]);
      });
      linear(proj.data(), up.data(), N, L.w_down, L.b_down, pool, scratch);
    } else {
      const LinearPart parts[] = {{&L.w_up, nullptr, up.data()}, {&L.w_gate, nullptr, gate.data()}};
      linear_many(parts, x.data(), N, pool, scratch);
      const bool swiglu = c.arch == EncoderArch::nomic_bert;
      pool.parallel_for(static_cast<size_t>(N), [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
          float* g = &gate[r * F];
          const float* u = &up[r * F];
          if (swiglu) {
            vops.swiglu(g, g, u, F);
          } else {
            vops.geglu(g, u, F);
          }
        }
      });
      linear(proj.data(), gate.data(), N, L.w_down, L.b_down, pool, scratch);
    }
    vops.add(x.data(), proj.data(), N * E);
    layer_norm_rows(x.data(), N, E, L.out_norm_w, L.out_norm_b, c.norm_eps, pool);
  }
  return x;
}

std::vector<float> EncoderModel::forward(std::span<const std::vector<int32_t>> texts, ThreadPool& pool) const {
  return encoder_forward(config_, weights_, texts, pool);
}

std::vector<float> EncoderModel::rank_scores(const float* rows, int64_t n, ThreadPool& pool) const {
  const EncoderWeights& w = weights_;
  const int64_t E = config_.n_embd;
  kernels::MatmulScratch scratch;
  std::vector<float> hidden(static_cast<size_t>(n * E));
  linear(hidden.data(), rows, n, w.cls, w.cls_b, pool, scratch);
  for (float& h : hidden) h = std::tanh(h);
  std::vector<float> scores(static_cast<size_t>(n));
  if (!w.cls_out) {
    for (int64_t i = 0; i < n; ++i) scores[static_cast<size_t>(i)] = hidden[static_cast<size_t>(i * E)];
    return scores;
  }
  const int64_t n_out = w.cls_out.rows;
  std::vector<float> out(static_cast<size_t>(n * n_out));
  linear(out.data(), hidden.data(), n, w.cls_out, w.cls_out_b, pool, scratch);
  for (int64_t i = 0; i < n; ++i) scores[static_cast<size_t>(i)] = out[static_cast<size_t>(i * n_out)];
  return scores;
}

}  // namespace edgelm::model
