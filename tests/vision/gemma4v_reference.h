// A plain double-precision Gemma 4 vision tower for the tests, written from the model's
// definition (Gemma4VisionModel + Gemma4MultimodalEmbedder, with the reference's x-then-y split
// of each head for the 2-D RoPE) rather than from the encoder's code: patches
// flattened (channel, ky, kx) and 2 (x - 0.5) through the patch kernel; position ids (x, y) of
// the row-major grid looking up the two tables; per layer RMSNorm (weight w: x / rms * w),
// Gemma4ClippableLinear q, k, v (clamp the input, x @ W^T, clamp the output), per-head q / k
// norms and a weightless v norm, RoPE on each head's x half and y half (rotate_half within the
// half, inv_freq = theta^(-2 i / half), theta 100), softmax(q k^T) v with scale 1, o_proj,
// post-attention norm, residual, pre-FFN norm, down(gelu_tanh(gate) * up), post-FFN norm,
// residual, times layer_scalar; then the pooler (mean over each k x k block, times
// sqrt(hidden)), standardize when present, RMSNorm without scale, the clipped projection.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "vit_reference.h"

namespace edgelm::test {

// Scalar tensor `name` or fallback.
inline double g4_scalar(const format::ModelFile& f, const std::string& name, double fallback) {
  const std::vector<double> v = tensor_f64(f, name);
  return v.empty() ? fallback : v[0];
}

// HF's Gemma4ClippableLinear of the linear `base` (ne = {cols, rows}) on x [n, cols].
inline std::vector<double> g4_linear(const format::ModelFile& f, const std::string& base, std::vector<double> x,
                                     int64_t n, int64_t cols, int64_t rows) {
  const double inf = std::numeric_limits<double>::infinity();
  const double in_lo = g4_scalar(f, base + ".input_min", -inf), in_hi = g4_scalar(f, base + ".input_max", inf);
  const double out_lo = g4_scalar(f, base + ".output_min", -inf), out_hi = g4_scalar(f, base + ".output_max", inf);
  for (double& v : x) v = std::min(std::max(v, in_lo), in_hi);
  const std::vector<double> W = tensor_f64(f, base + ".weight");
  std::vector<double> y(static_cast<size_t>(n * rows));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[t * cols + c];
      y[t * rows + r] = std::min(std::max(s, out_lo), out_hi);
    }
  return y;
}

// RMSNorm of each row of width w of x in place (w: weight or empty).
inline void g4_rms(std::vector<double>& x, int64_t width, const std::vector<double>& w, double eps) {
  for (size_t t = 0; t < x.size() / static_cast<size_t>(width); ++t) {
    double* r = x.data() + t * width;
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += r[i] * r[i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(width) + eps);
    for (int64_t i = 0; i < width; ++i) r[i] = r[i] * inv * (w.empty() ? 1.0 : w[i]);
  }
}

// The soft tokens [(gx / k) (gy / k), projection_dim] of image chw [3, H, W] (sides multiples of
// patch * k).
inline std::vector<double> reference_encode_gemma4v(const format::ModelFile& f, const float* chw, int64_t W,
                                                    int64_t H) {
  const int64_t ps = md_u32(f, "clip.vision.patch_size"), E = md_u32(f, "clip.vision.embedding_length");
  const int64_t F = md_u32(f, "clip.vision.feed_forward_length"), L = md_u32(f, "clip.vision.block_count");
  const int64_t NH = md_u32(f, "clip.vision.attention.head_count"), D = E / NH;
  const int64_t k = md_u32(f, "clip.vision.projector.scale_factor", 3);
  const double eps = *f.metadata.get_f32("clip.vision.attention.layer_norm_epsilon");
  const int64_t gx = W / ps, gy = H / ps, n = gx * gy, K = 3 * ps * ps;
  const std::vector<double> pe = tensor_f64(f, "v.position_embd.weight");
  const int64_t pos_size = static_cast<int64_t>(pe.size()) / (2 * E);
  // Patch embedding: Linear(3 ps^2 -> E) of 2 (x - 0.5) (the file holds it as a conv kernel).
  std::vector<double> patches(static_cast<size_t>(n * K));
  for (int64_t p = 0; p < n; ++p)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t ky = 0; ky < ps; ++ky)
        for (int64_t kx = 0; kx < ps; ++kx)
          patches[p * K + (c * ps + ky) * ps + kx] =
              2.0 * (static_cast<double>(chw[(c * H + (p / gx) * ps + ky) * W + (p % gx) * ps + kx]) - 0.5);
  std::vector<double> x = g4_linear(f, "v.patch_embd", patches, n, K, E);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < E; ++i) x[p * E + i] += pe[(p % gx) * E + i] + pe[(pos_size + p / gx) * E + i];
  const double theta = 100.0;
  const int64_t half = D / 2;
  auto rope = [&](double* r, int64_t p) {
    for (int a = 0; a < 2; ++a) {
      double* h = r + a * half;
      const double pos = static_cast<double>(a == 0 ? p % gx : p / gx);
      std::vector<double> out(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) {
        const int64_t j = i % (half / 2);
        const double ang = pos * std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(half));
        const double rot = i < half / 2 ? -h[i + half / 2] : h[i - half / 2];  // rotate_half
        out[i] = h[i] * std::cos(ang) + rot * std::sin(ang);
      }
      std::copy(out.begin(), out.end(), h);
    }
  };
  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "v.blk." + std::to_string(l) + ".";
    std::vector<double> h = x;
    g4_rms(h, E, tensor_f64(f, b + "ln1.weight"), eps);
    std::vector<double> q = g4_linear(f, b + "attn_q", h, n, E, E), kk = g4_linear(f, b + "attn_k", h, n, E, E),
                        v = g4_linear(f, b + "attn_v", h, n, E, E);
    g4_rms(q, D, tensor_f64(f, b + "attn_q_norm.weight"), eps);
    g4_rms(kk, D, tensor_f64(f, b + "attn_k_norm.weight"), eps);
    g4_rms(v, D, {}, eps);
    for (int64_t p = 0; p < n; ++p)
      for (int64_t hd = 0; hd < NH; ++hd) {
        rope(q.data() + p * E + hd * D, p);
        rope(kk.data() + p * E + hd * D, p);
      }
    std::vector<double> att(static_cast<size_t>(n * E)), s(static_cast<size_t>(n));
    for (int64_t hd = 0; hd < NH; ++hd)
      for (int64_t t = 0; t < n; ++t) {
        double mx = -1e300, sum = 0;
        for (int64_t u = 0; u < n; ++u) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += q[t * E + hd * D + i] * kk[u * E + hd * D + i];
          s[u] = d;
          mx = std::max(mx, d);
        }
        for (int64_t u = 0; u < n; ++u) sum += s[u] = std::exp(s[u] - mx);
        for (int64_t i = 0; i < D; ++i) {
          double o = 0;
          for (int64_t u = 0; u < n; ++u) o += s[u] / sum * v[u * E + hd * D + i];
          att[t * E + hd * D + i] = o;
        }
      }
    std::vector<double> o = g4_linear(f, b + "attn_out", att, n, E, E);
    g4_rms(o, E, tensor_f64(f, b + "attn_post_norm.weight"), eps);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = x;
    g4_rms(h, E, tensor_f64(f, b + "ln2.weight"), eps);
    std::vector<double> g = g4_linear(f, b + "ffn_gate", h, n, E, F), up = g4_linear(f, b + "ffn_up", h, n, E, F);
    for (size_t i = 0; i < g.size(); ++i) {
      const double z = g[i];
      g[i] = 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z))) * up[i];
    }
    std::vector<double> dn = g4_linear(f, b + "ffn_down", g, n, F, E);
    g4_rms(dn, E, tensor_f64(f, b + "ffn_post_norm.weight"), eps);
    const double scalar = g4_scalar(f, b + "out_scale.weight", 1.0);
    for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] + dn[i]) * scalar;
  }
  const int64_t Gx = gx / k, Gy = gy / k, m = Gx * Gy;
  std::vector<double> pooled(static_cast<size_t>(m * E), 0.0);
  const std::vector<double> sb = tensor_f64(f, "v.std_bias"), ss = tensor_f64(f, "v.std_scale");
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t p = 0; p < n; ++p)
      if ((p / gx) / k == o / Gx && (p % gx) / k == o % Gx)
        for (int64_t i = 0; i < E; ++i) pooled[o * E + i] += x[p * E + i];
    for (int64_t i = 0; i < E; ++i) {
      double& v = pooled[o * E + i];
      v = v / static_cast<double>(k * k) * std::sqrt(static_cast<double>(E));
      if (!sb.empty()) v = (v - sb[i]) * ss[i];
    }
  }
  g4_rms(pooled, E, {}, eps);
  const int64_t P = static_cast<int64_t>(tensor_f64(f, "mm.input_projection.weight").size()) / E;
  return g4_linear(f, "mm.input_projection", pooled, m, E, P);
}

}  // namespace edgelm::test
