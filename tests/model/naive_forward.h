// An independent, deliberately different computation of a llama/qwen2/qwen3 forward pass, used
// as a second opinion on model/forward.cpp: double precision, the whole sequence recomputed from
// scratch with no KV cache, tensors read straight from the file by name, and rotary embeddings
// applied as complex multiplications on explicitly chosen index pairs. Written from the
// published definitions: Qwen3's per-head RMSNorm of q and k before RoPE, an explicit head size,
// linear RoPE scaling (positions / factor), YaRN (NTK-by-parts over the pair index, ramp between
// the pairs turning beta_fast and beta_slow times over the original context, cos/sin scaled by
// mscale) and Llama 3.1's rope_freqs (each frequency divided by its factor); Gemma 2 / 3 (the
// embedding times sqrt(hidden size), RMSNorm weights as the converter stores them (1 + w folded
// in), post-attention and post-feed-forward norms, GELU-tanh gating, attention scores and final
// logits soft-capped as cap * tanh(x / cap), sliding-window layers that see only keys less than
// `window` positions behind the query — Gemma 2's even layers, Gemma 3's all but every sixth —,
// Gemma 3's local layers rotating with their own base and no scaling); Phi-3 (the fused QKV
// tensor split into Q, K, V rows and the fused gate/up tensor into its two halves, LongRoPE:
// frequencies divided by the short or long factors, cos/sin times the attention factor, and
// partial rotary: only the first n_rot dims of a head rotate).
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <string>
#include <vector>

#include "format/model_file.h"
#include "kernels/dequantize.h"

namespace edgelm::test {

struct NaiveConfig {
  int n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab;
  double eps, rope_base;
  bool neox;  // rotate (i, i + d/2) instead of (2i, 2i + 1)
  bool biases;
  int head_dim = 0;      // 0: n_embd / n_head
  bool qk_norm = false;  // blk.N.attn_{q,k}_norm.weight per head before RoPE
  enum class Scaling { none, linear, yarn } scaling = Scaling::none;
  double factor = 1, attn_factor = 1, beta_fast = 32, beta_slow = 1, log_mul = 0.1;
  int original_ctx = 0;
  bool rope_freqs = false;  // divide frequency j by rope_freqs.weight[j]
  int n_rot = 0;            // rotated dims per head; 0: all
  // Gemma.
  bool embd_scale = false;  // embeddings times sqrt(n_embd)
  bool post_norms = false;  // blk.N.post_attention_norm / post_ffw_norm on the sub-layer outputs
  bool gelu = false;        // GELU-tanh instead of SiLU on the gate
  double attn_softcap = 0, final_softcap = 0;
  enum class Swa { none, all, gemma2, gemma3 } swa = Swa::none;  // which layers are sliding
  int window = 0;
  double local_rope_base = 0;  // > 0: sliding layers rotate with this base, unscaled
  // Phi-3.
  bool fused = false;
  enum class LongRope { none, short_factors, long_factors } longrope = LongRope::none;
  double longrope_attn = 1;  // cos/sin factor of LongRoPE
  // Qwen3.5 (hybrid): layers l with (l + 1) % interval != 0 are Gated DeltaNet, the others gated
  // attention (attn_q rows: per head its queries, then its gate); the FFN norm is post_attention_norm.
  int interval = 0;
  int d_conv = 0, nk = 0, nv = 0, dk = 0;  // taps, key heads, value heads, head size (keys and values)
};

class NaiveModel {
 public:
  NaiveModel(const format::ModelFile& f, NaiveConfig c) : f_(f), c_(c) {}

  // Logits [n_vocab] of the last token of `tokens` (positions 0..n-1).
  std::vector<double> logits(const std::vector<int>& tokens) const {
    const int E = c_.n_embd, H = c_.n_head, D = c_.head_dim > 0 ? c_.head_dim : E / H, HKV = c_.n_head_kv,
              n = static_cast<int>(tokens.size());
    std::vector<std::vector<double>> x(n);
    const auto emb = mat("token_embd.weight");
    for (int t = 0; t < n; ++t) {
      x[t].assign(emb.begin() + tokens[t] * E, emb.begin() + (tokens[t] + 1) * E);
      if (c_.embd_scale)
        for (double& xi : x[t]) xi *= std::sqrt(static_cast<double>(E));
    }
    for (int l = 0; l < c_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      if (c_.interval > 0 && (l + 1) % c_.interval != 0) {
        delta_layer(x, p);
        continue;
      }
      const bool sliding = is_sliding(l);
      std::vector<std::vector<double>> q(n), k(n), v(n), gates;
      for (int t = 0; t < n; ++t) {
        auto h = norm(x[t], mat(p + "attn_norm.weight"));
        if (c_.fused) {
          const auto qkv = linear(h, p + "attn_qkv");  // rows: Q, then K, then V
          q[t].assign(qkv.begin(), qkv.begin() + H * D);
          k[t].assign(qkv.begin() + H * D, qkv.begin() + (H + HKV) * D);
          v[t].assign(qkv.begin() + (H + HKV) * D, qkv.end());
        } else {
          q[t] = linear(h, p + "attn_q");
          k[t] = linear(h, p + "attn_k");
          v[t] = linear(h, p + "attn_v");
        }
        if (c_.interval > 0) {  // Qwen3.5: split each head's queries from its gate
          std::vector<double> qq, gg;
          for (int hh = 0; hh < H; ++hh) {
            qq.insert(qq.end(), q[t].begin() + 2 * hh * D, q[t].begin() + (2 * hh + 1) * D);
            gg.insert(gg.end(), q[t].begin() + (2 * hh + 1) * D, q[t].begin() + (2 * hh + 2) * D);
          }
          q[t] = qq;
          gates.push_back(gg);
        }
        if (c_.qk_norm) {
          head_norm(q[t], H, D, mat(p + "attn_q_norm.weight"));
          head_norm(k[t], HKV, D, mat(p + "attn_k_norm.weight"));
        }
        rotate(q[t], H, D, t, sliding);
        rotate(k[t], HKV, D, t, sliding);
      }
      for (int t = 0; t < n; ++t) {
        std::vector<double> att(static_cast<size_t>(H) * D, 0.0);
        for (int h = 0; h < H; ++h) {
          const int g = h * HKV / H;  // kv head shared by this query head
          std::vector<double> w(t + 1, 0.0);
          std::vector<bool> seen(t + 1, false);
          double mx = -1e300, sum = 0;
          for (int s = 0; s <= t; ++s) {
            if (sliding && t - s >= c_.window) continue;  // outside the window: masked
            seen[s] = true;
            double d = 0;
            for (int i = 0; i < D; ++i) d += q[t][h * D + i] * k[s][g * D + i];
            w[s] = d / std::sqrt(static_cast<double>(D));
            if (c_.attn_softcap > 0) w[s] = c_.attn_softcap * std::tanh(w[s] / c_.attn_softcap);
            mx = std::max(mx, w[s]);
          }
          for (int s = 0; s <= t; ++s) sum += (w[s] = seen[s] ? std::exp(w[s] - mx) : 0.0);
          for (int s = 0; s <= t; ++s)
            for (int i = 0; i < D; ++i) att[h * D + i] += w[s] / sum * v[s][g * D + i];
        }
        if (c_.interval > 0)
          for (size_t i = 0; i < att.size(); ++i) att[i] *= 1.0 / (1.0 + std::exp(-gates[t][i]));
        auto o = linear(att, p + "attn_output");
        if (c_.post_norms) o = norm(o, mat(p + "post_attention_norm.weight"));
        for (int i = 0; i < E; ++i) x[t][i] += o[i];
        ffn(x[t], p);
      }
    }
    const auto h = norm(x[n - 1], mat("output_norm.weight"));
    const bool tied = f_.find_tensor("output.weight") == nullptr;
    auto z = linear(h, tied ? "token_embd" : "output");
    if (c_.final_softcap > 0)
      for (double& zi : z) zi = c_.final_softcap * std::tanh(zi / c_.final_softcap);
    return z;
  }

 private:
  // The gated feed-forward with its pre-norm and residual.
  void ffn(std::vector<double>& xt, const std::string& p) const {
    const int E = c_.n_embd;
    auto h2 = norm(xt, mat(p + (c_.interval > 0 ? "post_attention_norm.weight" : "ffn_norm.weight")));
    std::vector<double> gate, up;
    if (c_.fused) {
      const auto gu = linear(h2, p + "ffn_up");  // the gate half, then the up half
      gate.assign(gu.begin(), gu.begin() + c_.n_ff);
      up.assign(gu.begin() + c_.n_ff, gu.end());
    } else {
      gate = linear(h2, p + "ffn_gate");
      up = linear(h2, p + "ffn_up");
    }
    for (size_t i = 0; i < gate.size(); ++i) {
      const double g = gate[i];
      const double act =
          c_.gelu ? 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (g + 0.044715 * g * g * g)))
                  : g / (1.0 + std::exp(-g));
      gate[i] = act * up[i];
    }
    auto down = linear(gate, p + "ffn_down");
    if (c_.post_norms) down = norm(down, mat(p + "post_ffw_norm.weight"));
    for (int i = 0; i < E; ++i) xt[i] += down[i];
  }

  // A Gated DeltaNet layer over the whole sequence from a zero state, in the published
  // formulation: S <- exp(g) S; delta = beta (v - S k); S <- S + delta k^T; o = S q / sqrt(dk),
  // with the causal convolution written as a dot product over the last d_conv inputs (zeros
  // before the sequence), L2-normalized q and k, then the per-head RMSNorm times silu(z).
  void delta_layer(std::vector<std::vector<double>>& x, const std::string& p) const {
    const int n = static_cast<int>(x.size()), K = c_.nk * c_.dk, V = c_.nv * c_.dk, C = 2 * K + V;
    std::vector<std::vector<double>> mixed(n), z(n), beta(n), alpha(n);
    for (int t = 0; t < n; ++t) {
      const auto h = norm(x[t], mat(p + "attn_norm.weight"));
      mixed[t] = linear(h, p + "attn_qkv");
      z[t] = linear(h, p + "attn_gate");
      beta[t] = linear(h, p + "ssm_beta");
      alpha[t] = linear(h, p + "ssm_alpha");
    }
    const auto w = mat(p + "ssm_conv1d.weight"), dt = mat(p + "ssm_dt.bias"), a = mat(p + "ssm_a"),
               nw = mat(p + "ssm_norm.weight");
    std::vector<std::vector<double>> conv(n, std::vector<double>(C));
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int j = 0; j < c_.d_conv; ++j) {
          const int src = t - (c_.d_conv - 1) + j;
          if (src >= 0) s += w[c * c_.d_conv + j] * mixed[src][c];
        }
        conv[t][c] = s / (1.0 + std::exp(-s));
      }
    auto l2 = [&](std::vector<double>& v, int off, int len) {
      double ss = 0;
      for (int i = 0; i < len; ++i) ss += v[off + i] * v[off + i];
      const double r = 1.0 / std::max(std::sqrt(ss), c_.eps);
      for (int i = 0; i < len; ++i) v[off + i] *= r;
    };
    for (int t = 0; t < n; ++t)
      for (int hh = 0; hh < 2 * c_.nk; ++hh) l2(conv[t], hh * c_.dk, c_.dk);
    std::vector<std::vector<double>> S(c_.nv, std::vector<double>(static_cast<size_t>(c_.dk) * c_.dk, 0.0));
    const int Dk = c_.dk;
    for (int t = 0; t < n; ++t) {
      std::vector<double> out(V);
      for (int h = 0; h < c_.nv; ++h) {
        const int kh = h % c_.nk;
        const double* q = &conv[t][kh * Dk];
        const double* k = &conv[t][K + kh * Dk];
        const double* v = &conv[t][2 * K + h * Dk];
        const double xa = alpha[t][h] + dt[h];
        const double g = (xa > 20 ? xa : std::log1p(std::exp(xa))) * a[h];
        const double b = 1.0 / (1.0 + std::exp(-beta[t][h]));
        auto& Sh = S[h];  // Sh[i * Dk + j]: key dim i, value dim j
        for (double& s : Sh) s *= std::exp(g);
        for (int j = 0; j < Dk; ++j) {
          double sk = 0;
          for (int i = 0; i < Dk; ++i) sk += Sh[i * Dk + j] * k[i];
          const double delta = b * (v[j] - sk);
          for (int i = 0; i < Dk; ++i) Sh[i * Dk + j] += k[i] * delta;
        }
        std::vector<double> o(Dk, 0.0);
        for (int j = 0; j < Dk; ++j) {
          for (int i = 0; i < Dk; ++i) o[j] += Sh[i * Dk + j] * q[i];
          o[j] /= std::sqrt(static_cast<double>(Dk));
        }
        const auto on = norm(o, nw);
        for (int j = 0; j < Dk; ++j) {
          const double zz = z[t][h * Dk + j];
          out[h * Dk + j] = on[j] * zz / (1.0 + std::exp(-zz));
        }
      }
      const auto o = linear(out, p + "ssm_out");
      for (int i = 0; i < c_.n_embd; ++i) x[t][i] += o[i];
      ffn(x[t], p);
    }
  }

  std::vector<double> mat(const std::string& name) const {
    const format::TensorInfo* t = f_.find_tensor(name);
    if (t == nullptr) return {};
    // Quantized tensors are dequantized by the (reference-exact, hash-checked) dequantizer.
    std::vector<float> f(static_cast<size_t>(t->n_elements()));
    kernels::to_float(t->type, t->data, f.data(), t->n_elements());
    return std::vector<double>(f.begin(), f.end());
  }

  // y = W x (+ b), W stored as rows of len(x).
  std::vector<double> linear(const std::vector<double>& x, const std::string& name) const {
    const auto w = mat(name + ".weight");
    const size_t rows = w.size() / x.size();
    std::vector<double> y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < x.size(); ++i) y[r] += w[r * x.size() + i] * x[i];
    if (c_.biases) {
      const auto b = mat(name + ".bias");
      for (size_t r = 0; r < b.size(); ++r) y[r] += b[r];
    }
    return y;
  }

  std::vector<double> norm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ms = 0;
    for (double v : x) ms += v * v;
    ms /= static_cast<double>(x.size());
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + c_.eps) * w[i];
    return y;
  }

  // Each head's slice of x normalized on its own: x / rms(x) * w, w: [D].
  void head_norm(std::vector<double>& x, int heads, int D, const std::vector<double>& w) const {
    for (int h = 0; h < heads; ++h) {
      const std::vector<double> slice(x.begin() + h * D, x.begin() + (h + 1) * D);
      const auto y = norm(slice, w);
      std::copy(y.begin(), y.end(), x.begin() + h * D);
    }
  }

  // Gemma 2: layer i slides when i is even; Gemma 3: unless (i + 1) is a multiple of 6.
  bool is_sliding(int layer) const {
    switch (c_.swa) {
      case NaiveConfig::Swa::none: return false;
      case NaiveConfig::Swa::all: return true;
      case NaiveConfig::Swa::gemma2: return !(layer % 2);
      case NaiveConfig::Swa::gemma3: return ((layer + 1) % 6) != 0;
    }
    return false;
  }

  // Rotation of pair j per position, and the factor on the rotation (YaRN's mscale). D here is
  // the number of rotated dims.
  double frequency(int j, int D, bool sliding) const {
    if (sliding && c_.local_rope_base > 0) return std::pow(c_.local_rope_base, -2.0 * j / D);
    double freq = std::pow(c_.rope_base, -2.0 * j / D);
    if (c_.rope_freqs) freq /= mat("rope_freqs.weight")[j];
    if (c_.longrope != NaiveConfig::LongRope::none)
      return freq / mat(c_.longrope == NaiveConfig::LongRope::long_factors ? "rope_factors_long.weight"
                                                                           : "rope_factors_short.weight")[j];
    switch (c_.scaling) {
      case NaiveConfig::Scaling::none: return freq;
      case NaiveConfig::Scaling::linear: return freq / c_.factor;
      case NaiveConfig::Scaling::yarn: {
        // The pair index at which a pair turns `turns` times over the original context:
        // original_ctx * freq(j) / (2 pi) = turns, solved for j.
        auto pair_at = [&](double turns) {
          return D * std::log(c_.original_ctx / (turns * 2.0 * 3.14159265358979323846)) /
                 (2.0 * std::log(c_.rope_base));
        };
        const double lo = std::max(0.0, std::floor(pair_at(c_.beta_fast)));
        double hi = std::min(D - 1.0, std::ceil(pair_at(c_.beta_slow)));
        if (hi == lo) hi += 0.001;
        double interp = (j - lo) / (hi - lo);  // 0: keep the frequency; 1: divide it by factor
        interp = interp < 0 ? 0 : interp > 1 ? 1 : interp;
        return freq / c_.factor * interp + freq * (1 - interp);
      }
    }
    return freq;
  }
  double magnitude(bool sliding) const {
    if (sliding && c_.local_rope_base > 0) return 1.0;
    if (c_.longrope != NaiveConfig::LongRope::none) return c_.longrope_attn;
    if (c_.scaling != NaiveConfig::Scaling::yarn) return 1.0;
    return c_.attn_factor * (c_.factor > 1 ? 1.0 + c_.log_mul * std::log(c_.factor) : 1.0);
  }

  void rotate(std::vector<double>& v, int heads, int D, int pos, bool sliding) const {
    const int R = c_.n_rot > 0 ? c_.n_rot : D;  // the first R dims of each head rotate
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < R / 2; ++j) {
        const int a = c_.neox ? j : 2 * j;
        const int b = c_.neox ? j + R / 2 : 2 * j + 1;
        const double freq = frequency(j, R, sliding);
        const std::complex<double> z(v[h * D + a], v[h * D + b]);
        const std::complex<double> r = z * std::polar(magnitude(sliding), pos * freq);
        v[h * D + a] = r.real();
        v[h * D + b] = r.imag();
      }
    }
  }

  const format::ModelFile& f_;
  NaiveConfig c_;
};

}  // namespace edgelm::test
