// An independent, deliberately different computation of a llama/qwen2/qwen3 forward pass, used
// as a second opinion on model/forward.cpp: double precision, the whole sequence recomputed from
// scratch with no KV cache, tensors read straight from the file by name, and rotary embeddings
// applied as complex multiplications on explicitly chosen index pairs. Written from the
// published definitions: Qwen3's per-head RMSNorm of q and k before RoPE, an explicit head size,
// linear RoPE scaling (positions / factor), YaRN (NTK-by-parts over the pair index, ramp between
// the pairs turning beta_fast and beta_slow times over the original context, cos/sin scaled by
// mscale) and Llama 3.1's rope_freqs (each frequency divided by its factor).
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
    for (int t = 0; t < n; ++t) x[t].assign(emb.begin() + tokens[t] * E, emb.begin() + (tokens[t] + 1) * E);
    for (int l = 0; l < c_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (int t = 0; t < n; ++t) {
        auto h = norm(x[t], mat(p + "attn_norm.weight"));
        q[t] = linear(h, p + "attn_q");
        k[t] = linear(h, p + "attn_k");
        v[t] = linear(h, p + "attn_v");
        if (c_.qk_norm) {
          head_norm(q[t], H, D, mat(p + "attn_q_norm.weight"));
          head_norm(k[t], HKV, D, mat(p + "attn_k_norm.weight"));
        }
        rotate(q[t], H, D, t);
        rotate(k[t], HKV, D, t);
      }
      for (int t = 0; t < n; ++t) {
        std::vector<double> att(static_cast<size_t>(H) * D, 0.0);
        for (int h = 0; h < H; ++h) {
          const int g = h * HKV / H;  // kv head shared by this query head
          std::vector<double> w(t + 1);
          double mx = -1e300, sum = 0;
          for (int s = 0; s <= t; ++s) {
            double d = 0;
            for (int i = 0; i < D; ++i) d += q[t][h * D + i] * k[s][g * D + i];
            w[s] = d / std::sqrt(static_cast<double>(D));
            mx = std::max(mx, w[s]);
          }
          for (double& ws : w) sum += (ws = std::exp(ws - mx));
          for (int s = 0; s <= t; ++s)
            for (int i = 0; i < D; ++i) att[h * D + i] += w[s] / sum * v[s][g * D + i];
        }
        const auto o = linear(att, p + "attn_output");
        for (int i = 0; i < E; ++i) x[t][i] += o[i];
        auto h2 = norm(x[t], mat(p + "ffn_norm.weight"));
        auto gate = linear(h2, p + "ffn_gate");
        const auto up = linear(h2, p + "ffn_up");
        for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
        const auto down = linear(gate, p + "ffn_down");
        for (int i = 0; i < E; ++i) x[t][i] += down[i];
      }
    }
    const auto h = norm(x[n - 1], mat("output_norm.weight"));
    const bool tied = f_.find_tensor("output.weight") == nullptr;
    return linear(h, tied ? "token_embd" : "output");
  }

 private:
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

  // Rotation of pair j per position, and the factor on the rotation (YaRN's mscale).
  double frequency(int j, int D) const {
    double freq = std::pow(c_.rope_base, -2.0 * j / D);
    if (c_.rope_freqs) freq /= mat("rope_freqs.weight")[j];
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
  double magnitude() const {
    if (c_.scaling != NaiveConfig::Scaling::yarn) return 1.0;
    return c_.attn_factor * (c_.factor > 1 ? 1.0 + c_.log_mul * std::log(c_.factor) : 1.0);
  }

  void rotate(std::vector<double>& v, int heads, int D, int pos) const {
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < D / 2; ++j) {
        const int a = c_.neox ? j : 2 * j;
        const int b = c_.neox ? j + D / 2 : 2 * j + 1;
        const double freq = frequency(j, D);
        const std::complex<double> z(v[h * D + a], v[h * D + b]);
        const std::complex<double> r = z * std::polar(magnitude(), pos * freq);
        v[h * D + a] = r.real();
        v[h * D + b] = r.imag();
      }
    }
  }

  const format::ModelFile& f_;
  NaiveConfig c_;
};

}  // namespace edgelm::test
