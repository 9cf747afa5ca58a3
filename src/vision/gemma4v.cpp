// gemma4v's steps of the encoder (see vit.h for the computation and its order).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/ops.h"
#include "vision/vit.h"
#include "vision/vit_math.h"
#include "vision/vit_steps.h"

namespace edgelm::vision {
namespace {

using detail::for_rows;
using detail::grow;
using detail::matmul_chunked;

constexpr double kRopeTheta = 100.0;  // the reference's rope_theta for gemma4v (HF: rope_parameters.rope_theta)

void clamp_rows(float* x, int64_t n, float lo, float hi, ThreadPool& pool, int64_t width) {
  for_rows(pool, n, [&](int64_t t) {
    float* r = x + t * width;
    for (int64_t i = 0; i < width; ++i) r[i] = std::min(std::max(r[i], lo), hi);
  });
}

// out [n, w.rows] = clamp_out(clamp_in(x) W^T). A clamped input is copied to tmp ([n, w.cols])
// unless in_place, when x itself is clamped.
void clamped_linear(const kernels::WeightMatrix& w, const LinearClamp& cl, float* x, int64_t n, float* out, float* tmp,
                    bool in_place, ThreadPool& pool, kernels::MatmulScratch& mm) {
  const float* in = x;
  if (cl.clamps_input()) {
    float* dst = in_place ? x : tmp;
    for_rows(pool, n, [&](int64_t t) {
      const float* r = x + t * w.cols;
      float* d = dst + t * w.cols;
      for (int64_t i = 0; i < w.cols; ++i) d[i] = std::min(std::max(r[i], cl.in_min), cl.in_max);
    });
    in = dst;
  }
  matmul_chunked(w, in, n, out, pool, mm);
  if (cl.clamps_output()) clamp_rows(out, n, cl.out_min, cl.out_max, pool, w.rows);
}

}  // namespace

// x[t] += table_x[x] + table_y[y] (each image's tokens row-major, gx wide).
void VisionEncoder::add_positions_gemma4v(const Batch& b, VisionScratch& s, ThreadPool& pool) const {
  const int64_t E = config_.n_embd;
  const float* tx = weights_.pos_embd;
  const float* ty = tx + weights_.pos_size * E;
  for_rows(pool, b.n, [&](int64_t t) {
    const VisionSegment& sg = b.at_row(t);
    const int64_t ti = t - sg.row0;
    const float* px = tx + (ti % sg.gx) * E;
    const float* py = ty + (ti / sg.gx) * E;
    float* dst = s.x.data() + t * E;
    for (int64_t i = 0; i < E; ++i) dst[i] += px[i] + py[i];
  });
}

// Per stacked row, head_dim / 4 each of cos(x angles), sin(x angles), cos(y angles), sin(y angles).
void VisionEncoder::rope_table_gemma4v(const Batch& b, VisionScratch& s) const {
  const int64_t D = config_.head_dim(), quarter = D / 4;
  grow(s.rope, static_cast<size_t>(b.n * D));
  for (const VisionSegment& sg : b.seg)
    for (int64_t t = 0; t < sg.n(); ++t) {
      float* out = s.rope.data() + (sg.row0 + t) * D;
      const double pos[2] = {static_cast<double>(t % sg.gx), static_cast<double>(t / sg.gx)};
      for (int a = 0; a < 2; ++a)
        for (int64_t i = 0; i < quarter; ++i) {
          const double angle = pos[a] * std::pow(kRopeTheta, -4.0 * static_cast<double>(i) / static_cast<double>(D));
          out[(2 * a) * quarter + i] = static_cast<float>(std::cos(angle));
          out[(2 * a + 1) * quarter + i] = static_cast<float>(std::sin(angle));
        }
    }
}

void VisionEncoder::run_layer_gemma4v(const VisionLayerWeights& L, const Batch& b, VisionScratch& s,
                                      ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const int64_t n = b.n, E = c.n_embd, F = c.n_ff, H = c.n_head, D = c.head_dim(), quarter = D / 4;
  const float eps = c.eps;
  float* x = s.x.data();
  float* h = s.h.data();
  float* q = s.big.data();  // [n, E]; later the attention output
  float* k = q + n * E;     // [n, E]
  float* v = k + n * E;     // [n, E]
  float* vt = v + n * E;    // per image [H, D, n_i] at vt + row0_i * E; first the clamped copy of h

  for_rows(pool, n, [&](int64_t t) { model::rms_norm(h + t * E, x + t * E, L.ln1_w, E, eps); });
  if (!L.cq.clamps_input() && !L.ck.clamps_input() && !L.cv.clamps_input()) {
    detail::matmul_many_chunked({{&L.wq, q}, {&L.wk, k}, {&L.wv, v}}, h, n, pool, s.mm);
    for (auto [cl, o] : {std::pair{&L.cq, q}, std::pair{&L.ck, k}, std::pair{&L.cv, v}})
      if (cl->clamps_output()) clamp_rows(o, n, cl->out_min, cl->out_max, pool, E);
  } else {
    clamped_linear(L.wq, L.cq, h, n, q, vt, false, pool, s.mm);
    clamped_linear(L.wk, L.ck, h, n, k, vt, false, pool, s.mm);
    clamped_linear(L.wv, L.cv, h, n, v, vt, false, pool, s.mm);
  }
  // Per-head norms and RoPE; per image i of n_i tokens from row0_i: queries to [H, n_i, D] (into
  // h), values normed and transposed to [H, D, n_i]; keys stay [n, E].
  float* qh = h;
  const float* rope = s.rope.data();
  for_rows(pool, n, [&](int64_t t) {
    const VisionSegment& sg = b.at_row(t);
    const int64_t ni = sg.n(), ti = t - sg.row0;
    float* qi = qh + sg.row0 * E;
    const float* r0 = rope + t * D;
    const float* cs[2] = {r0, r0 + 2 * quarter};
    const float* sn[2] = {r0 + quarter, r0 + 3 * quarter};
    for (int64_t hd = 0; hd < H; ++hd) {
      float* qr = qi + (hd * ni + ti) * D;
      float* kr = k + t * E + hd * D;
      model::rms_norm(qr, q + t * E + hd * D, L.q_norm, D, eps);
      model::rms_norm(kr, kr, L.k_norm, D, eps);
      for (float* r : {qr, kr})
        for (int a = 0; a < 2; ++a) {
          float* half = r + a * (D / 2);
          for (int64_t i = 0; i < quarter; ++i) {
            const float x0 = half[i], x1 = half[i + quarter];
            half[i] = x0 * cs[a][i] - x1 * sn[a][i];
            half[i + quarter] = x0 * sn[a][i] + x1 * cs[a][i];
          }
        }
      float* vr = v + t * E + hd * D;
      model::rms_norm(vr, vr, nullptr, D, eps);
    }
  });
  transpose_values(s.attention_segments, v, nullptr, vt, H, D, pool);
  float* attn = q;
  vit_attention_batch(s.attention_segments, qh, k, vt, attn, H, D, pool, s.attention, 1.0f);
  clamped_linear(L.wo, L.co, attn, n, h, nullptr, true, pool, s.mm);
  for_rows(pool, n, [&](int64_t t) {
    float* r = h + t * E;
    model::rms_norm(r, r, L.attn_post_norm, E, eps);
    for (int64_t i = 0; i < E; ++i) x[t * E + i] += r[i];
  });

  for_rows(pool, n, [&](int64_t t) { model::rms_norm(h + t * E, x + t * E, L.ln2_w, E, eps); });
  float* gate = s.big.data();  // [n, F]
  float* up = gate + n * F;    // [n, F]
  float* tmp = up + n * F;     // [n, E]
  clamped_linear(L.w_gate, L.cgate, h, n, gate, tmp, false, pool, s.mm);
  clamped_linear(L.w_up, L.cup, h, n, up, tmp, false, pool, s.mm);
  for_rows(pool, n, [&](int64_t t) {
    float* gr = gate + t * F;
    activate(gr, nullptr, F, c.activation);
    const float* ur = up + t * F;
    for (int64_t i = 0; i < F; ++i) gr[i] *= ur[i];
  });
  clamped_linear(L.w_down, L.cdown, gate, n, h, nullptr, true, pool, s.mm);
  const float scale = L.out_scale;
  for_rows(pool, n, [&](int64_t t) {
    float* r = h + t * E;
    model::rms_norm(r, r, L.ffn_post_norm, E, eps);
    float* xr = x + t * E;
    for (int64_t i = 0; i < E; ++i) xr[i] = (xr[i] + r[i]) * scale;
  });
}

// s.x (the last layer's output, each image's [n_i, E] row-major gx wide) -> per image, average pool
// n_merge x n_merge, scale, standardize, RMSNorm -> s.pooled [b.n_tok, E] -> out [b.n_tok, projection_dim].
void VisionEncoder::project_gemma4v(const Batch& b, float* out, VisionScratch& s, ThreadPool& pool) const {
  const VisionConfig& c = config_;
  const VisionWeights& w = weights_;
  const int64_t m = c.n_merge, E = c.n_embd;
  const float* x = s.x.data();
  float* pooled = s.pooled.data();
  const float inv = 1.0f / static_cast<float>(m * m);
  const float emb_scale = std::sqrt(static_cast<float>(E));
  for_rows(pool, b.n_tok, [&](int64_t o) {
    const VisionSegment& sg = b.at_tok(o);
    const int64_t Gx = sg.gx / m, oi = o - sg.tok0, by = oi / Gx, bx = oi % Gx;
    const float* xi = x + sg.row0 * E;
    float* dst = pooled + o * E;
    std::fill(dst, dst + E, 0.0f);
    for (int64_t dy = 0; dy < m; ++dy)
      for (int64_t dx = 0; dx < m; ++dx) {
        const float* src = xi + ((by * m + dy) * sg.gx + bx * m + dx) * E;
        for (int64_t i = 0; i < E; ++i) dst[i] += src[i];
      }
    for (int64_t i = 0; i < E; ++i) dst[i] = dst[i] * inv * emb_scale;
    if (w.std_bias != nullptr)
      for (int64_t i = 0; i < E; ++i) dst[i] = (dst[i] - w.std_bias[i]) * w.std_scale[i];
    model::rms_norm(dst, dst, nullptr, E, c.eps);
  });
  clamped_linear(w.input_proj, w.c_proj, pooled, b.n_tok, out, nullptr, true, pool, s.mm);
}

}  // namespace edgelm::vision
