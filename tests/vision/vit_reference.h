// A plain double-precision vision encoder (gemma3, idefics3 and qwen3vl projectors) for the tests:
// straightforward loops over the tensors of an mmproj file, read by name and converted with
// kernels::to_float, written from the definitions (Conv2d, LayerNorm, softmax attention, tanh
// GELU, average pool, RMSNorm, x @ W; idefics3: HF's Idefics3Connector.pixel_shuffle as its
// sequence of views and permutes, materialised one by one, then the bias-free linear) rather
// than from the encoder's code, so that a layout or order slip in either shows. qwen3vl is
// written from HF's Qwen3-VL vision model: patches row-major (not the encoder's merge-block
// order), fast_pos_embed_interpolate (linspace + bilinear), rotate_half RoPE with
// cat(freqs_h, freqs_w) doubled, and the merger gathering each 2 x 2 block from the grid.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "format/model_file.h"
#include "kernels/dequantize.h"

namespace edgelm::test {

inline std::vector<double> tensor_f64(const format::ModelFile& f, const std::string& name) {
  const format::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return {};
  std::vector<float> tmp(static_cast<size_t>(t->n_elements()));
  kernels::to_float(t->type, t->data, tmp.data(), t->n_elements());
  return {tmp.begin(), tmp.end()};
}

inline int64_t md_u32(const format::ModelFile& f, const char* key, int64_t fallback = -1) {
  auto v = f.metadata.get_u32_or(key, static_cast<uint32_t>(fallback));
  return v.ok() ? static_cast<int64_t>(*v) : fallback;
}

// LayerNorm of each of the n rows of x [n, E] in place.
inline void ref_layer_norm(std::vector<double>& x, int64_t n, int64_t E, const std::vector<double>& w,
                           const std::vector<double>& b, double eps) {
  for (int64_t t = 0; t < n; ++t) {
    double* r = x.data() + t * E;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < E; ++i) mean += r[i];
    mean /= static_cast<double>(E);
    for (int64_t i = 0; i < E; ++i) var += (r[i] - mean) * (r[i] - mean);
    var /= static_cast<double>(E);
    for (int64_t i = 0; i < E; ++i) r[i] = (r[i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
  }
}

// y [n, rows] = x [n, cols] W^T + b for a linear weight stored ne = {cols, rows}.
inline std::vector<double> ref_linear(const std::vector<double>& x, int64_t n, int64_t cols,
                                      const std::vector<double>& W, const std::vector<double>& b, int64_t rows) {
  std::vector<double> y(static_cast<size_t>(n * rows));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = b[r];
      for (int64_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[t * cols + c];
      y[t * rows + r] = s;
    }
  return y;
}

// HF's pixel_shuffle on one image's hidden states x [seq, E] (seq = side^2), scale s, step by
// step: view [side, side, E] -> view [side, side / s, E s] -> permute (1, 0, 2) -> reshape
// [side / s, side / s, E s^2] -> permute (1, 0, 2) -> reshape [seq / s^2, E s^2].
inline std::vector<double> ref_pixel_shuffle(const std::vector<double>& x, int64_t side, int64_t E, int64_t s) {
  const int64_t a = side, b = side / s, c = E * s;  // view [a, b, c] of the contiguous x
  std::vector<double> p1(x.size());                 // permute -> [b, a, c], made contiguous
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k) p1[(j * a + i) * c + k] = x[(i * b + j) * c + k];
  // reshape [b, a / s, c s] (a view of p1), permute -> [a / s, b, c s], made contiguous
  const int64_t a2 = a / s, c2 = c * s;
  std::vector<double> p2(x.size());
  for (int64_t j = 0; j < b; ++j)
    for (int64_t i = 0; i < a2; ++i)
      for (int64_t k = 0; k < c2; ++k) p2[(i * b + j) * c2 + k] = p1[(j * a2 + i) * c2 + k];
  return p2;  // reshape [a2 * b, c2]: already that layout
}

// The soft tokens [n_out, projection_dim] of image chw [3, S, S].
inline std::vector<double> reference_encode(const format::ModelFile& f, const float* chw) {
  const int64_t S = md_u32(f, "clip.vision.image_size"), ps = md_u32(f, "clip.vision.patch_size");
  const int64_t E = md_u32(f, "clip.vision.embedding_length"), F = md_u32(f, "clip.vision.feed_forward_length");
  const int64_t L = md_u32(f, "clip.vision.block_count"), H = md_u32(f, "clip.vision.attention.head_count");
  const int64_t P = md_u32(f, "clip.vision.projection_dim"), m = md_u32(f, "clip.vision.projector.scale_factor", 4);
  const double eps = *f.metadata.get_f32("clip.vision.attention.layer_norm_epsilon");
  const int64_t G = S / ps, n = G * G, D = E / H;

  // Conv2d(3 -> E, kernel ps, stride ps): weight [E][3][ps][ps]; patch p = py * G + px.
  const auto Wp = tensor_f64(f, "v.patch_embd.weight"), bp = tensor_f64(f, "v.patch_embd.bias");
  const auto pos = tensor_f64(f, "v.position_embd.weight");
  std::vector<double> x(static_cast<size_t>(n * E));
  for (int64_t py = 0; py < G; ++py)
    for (int64_t px = 0; px < G; ++px)
      for (int64_t o = 0; o < E; ++o) {
        double s = bp[o];
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t ky = 0; ky < ps; ++ky)
            for (int64_t kx = 0; kx < ps; ++kx)
              s += Wp[((o * 3 + c) * ps + ky) * ps + kx] * chw[(c * S + py * ps + ky) * S + px * ps + kx];
        const int64_t p = py * G + px;
        x[p * E + o] = s + pos[p * E + o];
      }

  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "v.blk." + std::to_string(l) + ".";
    auto h = x;
    ref_layer_norm(h, n, E, tensor_f64(f, b + "ln1.weight"), tensor_f64(f, b + "ln1.bias"), eps);
    const auto q = ref_linear(h, n, E, tensor_f64(f, b + "attn_q.weight"), tensor_f64(f, b + "attn_q.bias"), E);
    const auto k = ref_linear(h, n, E, tensor_f64(f, b + "attn_k.weight"), tensor_f64(f, b + "attn_k.bias"), E);
    const auto v = ref_linear(h, n, E, tensor_f64(f, b + "attn_v.weight"), tensor_f64(f, b + "attn_v.bias"), E);
    std::vector<double> attn(static_cast<size_t>(n * E)), sc(static_cast<size_t>(n));
    for (int64_t hd = 0; hd < H; ++hd)
      for (int64_t t = 0; t < n; ++t) {
        double mx = -1e300, sum = 0;
        for (int64_t p = 0; p < n; ++p) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += q[t * E + hd * D + d] * k[p * E + hd * D + d];
          sc[p] = s / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[p]);
        }
        for (int64_t p = 0; p < n; ++p) sum += (sc[p] = std::exp(sc[p] - mx));
        for (int64_t d = 0; d < D; ++d) {
          double s = 0;
          for (int64_t p = 0; p < n; ++p) s += sc[p] / sum * v[p * E + hd * D + d];
          attn[t * E + hd * D + d] = s;
        }
      }
    const auto o = ref_linear(attn, n, E, tensor_f64(f, b + "attn_out.weight"), tensor_f64(f, b + "attn_out.bias"), E);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = x;
    ref_layer_norm(h, n, E, tensor_f64(f, b + "ln2.weight"), tensor_f64(f, b + "ln2.bias"), eps);
    auto u = ref_linear(h, n, E, tensor_f64(f, b + "ffn_up.weight"), tensor_f64(f, b + "ffn_up.bias"), F);
    for (double& e : u) e = 0.5 * e * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (e + 0.044715 * e * e * e)));
    const auto dn = ref_linear(u, n, F, tensor_f64(f, b + "ffn_down.weight"), tensor_f64(f, b + "ffn_down.bias"), E);
    for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
  }
  ref_layer_norm(x, n, E, tensor_f64(f, "v.post_ln.weight"), tensor_f64(f, "v.post_ln.bias"), eps);

  if (*f.metadata.get_string("clip.projector_type") == "idefics3") {  // pixel shuffle, then x W_fc^T
    const auto shuffled = ref_pixel_shuffle(x, G, E, m);
    const int64_t M = E * m * m;
    return ref_linear(shuffled, n / (m * m), M, tensor_f64(f, "mm.model.fc.weight"),
                      std::vector<double>(static_cast<size_t>(P), 0.0), P);
  }

  // 2-D average pool m x m over the G x G grid, RMSNorm * soft_emb_norm, then x @ W [E][P].
  const int64_t Go = G / m, n_out = Go * Go;
  const auto norm = tensor_f64(f, "mm.soft_emb_norm.weight"), Wi = tensor_f64(f, "mm.input_projection.weight");
  std::vector<double> out(static_cast<size_t>(n_out * P));
  for (int64_t oy = 0; oy < Go; ++oy)
    for (int64_t ox = 0; ox < Go; ++ox) {
      std::vector<double> pooled(static_cast<size_t>(E), 0.0);
      for (int64_t dy = 0; dy < m; ++dy)
        for (int64_t dx = 0; dx < m; ++dx)
          for (int64_t i = 0; i < E; ++i) pooled[i] += x[((oy * m + dy) * G + ox * m + dx) * E + i] / (m * m);
      double ss = 0;
      for (double e : pooled) ss += e * e;
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(E) + eps);
      for (int64_t i = 0; i < E; ++i) pooled[i] *= r * norm[i];
      for (int64_t j = 0; j < P; ++j) {
        double s = 0;
        for (int64_t i = 0; i < E; ++i) s += pooled[i] * Wi[i * P + j];
        out[(oy * Go + ox) * P + j] = s;
      }
    }
  return out;
}

// qwen3vl: the soft tokens [(gx / 2) (gy / 2), projection_dim] of image chw [3, Hp, Wp].
inline std::vector<double> reference_encode_qwen3vl(const format::ModelFile& f, const float* chw, int64_t Wp,
                                                    int64_t Hp) {
  const int64_t ps = md_u32(f, "clip.vision.patch_size"), S = md_u32(f, "clip.vision.image_size");
  const int64_t E = md_u32(f, "clip.vision.embedding_length"), F = md_u32(f, "clip.vision.feed_forward_length");
  const int64_t L = md_u32(f, "clip.vision.block_count"), H = md_u32(f, "clip.vision.attention.head_count");
  const int64_t P = md_u32(f, "clip.vision.projection_dim");
  const double eps = *f.metadata.get_f32("clip.vision.attention.layer_norm_epsilon");
  const int64_t gx = Wp / ps, gy = Hp / ps, n = gx * gy, D = E / H, side = S / ps;
  auto gelu = [](double e) { return 0.5 * e * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (e + 0.044715 * e * e * e))); };

  // Conv3d over two identical frames = both kernels applied to the image; patch p = y * gx + x.
  const auto W0 = tensor_f64(f, "v.patch_embd.weight"), W1 = tensor_f64(f, "v.patch_embd.weight.1");
  const auto bp = tensor_f64(f, "v.patch_embd.bias"), pos = tensor_f64(f, "v.position_embd.weight");
  std::vector<double> x(static_cast<size_t>(n * E));
  // linspace(0, side - 1, g)
  auto lin = [side](int64_t i, int64_t g) { return g == 1 ? 0.0 : static_cast<double>(i) * (side - 1) / (g - 1); };
  for (int64_t py = 0; py < gy; ++py)
    for (int64_t px = 0; px < gx; ++px) {
      const double hy = lin(py, gy), wx = lin(px, gx);
      const int64_t hf = static_cast<int64_t>(hy), wf = static_cast<int64_t>(wx);
      const int64_t hc = std::min(hf + 1, side - 1), wc = std::min(wf + 1, side - 1);
      const double dh = hy - hf, dw = wx - wf;
      for (int64_t o = 0; o < E; ++o) {
        double s = bp[o];
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t ky = 0; ky < ps; ++ky)
            for (int64_t kx = 0; kx < ps; ++kx) {
              const size_t wi = static_cast<size_t>(((o * 3 + c) * ps + ky) * ps + kx);
              s += (W0[wi] + W1[wi]) * chw[(c * Hp + py * ps + ky) * Wp + px * ps + kx];
            }
        auto pe = [&](int64_t yy, int64_t xx) { return pos[(yy * side + xx) * E + o]; };
        s += (1 - dh) * (1 - dw) * pe(hf, wf) + (1 - dh) * dw * pe(hf, wc) + dh * (1 - dw) * pe(hc, wf) +
             dh * dw * pe(hc, wc);
        x[(py * gx + px) * E + o] = s;
      }
    }
  // rotary: inv_freq [D / 4] of dim D / 2; freqs(p) = cat(y inv_freq, x inv_freq); emb = cat(freqs, freqs).
  auto rope = [&](std::vector<double>& v, int64_t p) {
    const int64_t py = p / gx, px = p % gx;
    std::vector<double> emb(static_cast<size_t>(D));
    for (int64_t j = 0; j < D / 4; ++j) {
      const double inv = 1.0 / std::pow(10000.0, 2.0 * j / (D / 2.0));
      emb[j] = emb[j + D / 2] = py * inv;
      emb[j + D / 4] = emb[j + D / 4 + D / 2] = px * inv;
    }
    for (int64_t hd = 0; hd < H; ++hd) {
      double* r = v.data() + p * 3 * E + hd * D;  // rows of the fused qkv output: q at 0, k at E
      for (double* q : {r, r + E}) {
        std::vector<double> rot(static_cast<size_t>(D));  // rotate_half: cat(-q2, q1)
        for (int64_t d = 0; d < D / 2; ++d) rot[d] = -q[d + D / 2], rot[d + D / 2] = q[d];
        for (int64_t d = 0; d < D; ++d) q[d] = q[d] * std::cos(emb[d]) + rot[d] * std::sin(emb[d]);
      }
    }
  };
  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "v.blk." + std::to_string(l) + ".";
    auto h = x;
    ref_layer_norm(h, n, E, tensor_f64(f, b + "ln1.weight"), tensor_f64(f, b + "ln1.bias"), eps);
    auto qkv = ref_linear(h, n, E, tensor_f64(f, b + "attn_qkv.weight"), tensor_f64(f, b + "attn_qkv.bias"), 3 * E);
    for (int64_t p = 0; p < n; ++p) rope(qkv, p);
    std::vector<double> attn(static_cast<size_t>(n * E)), sc(static_cast<size_t>(n));
    for (int64_t hd = 0; hd < H; ++hd)
      for (int64_t t = 0; t < n; ++t) {
        double mx = -1e300, sum = 0;
        for (int64_t p = 0; p < n; ++p) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qkv[t * 3 * E + hd * D + d] * qkv[p * 3 * E + E + hd * D + d];
          sc[p] = s / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[p]);
        }
        for (int64_t p = 0; p < n; ++p) sum += (sc[p] = std::exp(sc[p] - mx));
        for (int64_t d = 0; d < D; ++d) {
          double s = 0;
          for (int64_t p = 0; p < n; ++p) s += sc[p] / sum * qkv[p * 3 * E + 2 * E + hd * D + d];
          attn[t * E + hd * D + d] = s;
        }
      }
    const auto o = ref_linear(attn, n, E, tensor_f64(f, b + "attn_out.weight"), tensor_f64(f, b + "attn_out.bias"), E);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = x;
    ref_layer_norm(h, n, E, tensor_f64(f, b + "ln2.weight"), tensor_f64(f, b + "ln2.bias"), eps);
    auto u = ref_linear(h, n, E, tensor_f64(f, b + "ffn_up.weight"), tensor_f64(f, b + "ffn_up.bias"), F);
    for (double& e : u) e = gelu(e);
    const auto dn = ref_linear(u, n, F, tensor_f64(f, b + "ffn_down.weight"), tensor_f64(f, b + "ffn_down.bias"), E);
    for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
  }
  ref_layer_norm(x, n, E, tensor_f64(f, "v.post_ln.weight"), tensor_f64(f, "v.post_ln.bias"), eps);
  // merger: block (by, bx) row-major, its patches (dy, dx) concatenated, then fc1, GELU, fc2.
  const int64_t m = n / 4, M = 4 * E;
  std::vector<double> merged(static_cast<size_t>(m * M));
  for (int64_t by = 0; by < gy / 2; ++by)
    for (int64_t bx = 0; bx < gx / 2; ++bx)
      for (int64_t dy = 0; dy < 2; ++dy)
        for (int64_t dx = 0; dx < 2; ++dx)
          for (int64_t i = 0; i < E; ++i)
            merged[(by * (gx / 2) + bx) * M + (dy * 2 + dx) * E + i] = x[((2 * by + dy) * gx + 2 * bx + dx) * E + i];
  auto mid = ref_linear(merged, m, M, tensor_f64(f, "mm.0.weight"), tensor_f64(f, "mm.0.bias"), M);
  for (double& e : mid) e = gelu(e);
  return ref_linear(mid, m, M, tensor_f64(f, "mm.2.weight"), tensor_f64(f, "mm.2.bias"), P);
}

}  // namespace edgelm::test
