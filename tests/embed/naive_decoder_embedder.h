// A second opinion on the decoder embedders (embed/decoder_encoder.cpp): double precision, every
// text recomputed from scratch with no KV cache, tensors read by name from the file, written from
// the published definitions rather than from model/ or engine/:
//  - Qwen3 (causal; per-head RMSNorm of Q and K; NeoX RoPE; SiLU gating);
//  - EmbeddingGemma (Gemma 3 layers: embedding x sqrt(n_embd), Q/K norms, post-attention and
//    post-FFN norms, GELU-tanh gating, local layers (all but every sixth) rotating with base 1e4;
//    attention over the WHOLE text, and in local layers only over keys within window / 2 on either
//    side of the query, the Hugging Face / llama.cpp symmetric window).
// Returns every token's final-normed hidden state; the tests pool and project themselves.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "format/model_file.h"
#include "kernels/dequantize.h"

namespace edgelm::test {

struct NaiveEmbedderConfig {
  int n_embd, n_layer, n_head, n_head_kv, head_dim;
  double eps = 1e-6, rope_base = 1e6, local_rope_base = 1e4;
  bool gemma = false;  // EmbeddingGemma (bidirectional, see above); else Qwen3 (causal)
  int window = 0;      // gemma: the sliding window (attention.sliding_window)
};

class NaiveDecoderEmbedder {
 public:
  NaiveDecoderEmbedder(const format::ModelFile& f, NaiveEmbedderConfig c) : f_(f), c_(c) {}

  // [n][n_embd] final-normed hidden states of `tokens`.
  std::vector<std::vector<double>> hidden(const std::vector<int>& tokens) const {
    const int E = c_.n_embd, H = c_.n_head, D = c_.head_dim, HKV = c_.n_head_kv, n = static_cast<int>(tokens.size());
    std::vector<std::vector<double>> x(n);
    const auto emb = mat("token_embd.weight");
    for (int t = 0; t < n; ++t) {
      x[t].assign(emb.begin() + static_cast<long>(tokens[t]) * E, emb.begin() + static_cast<long>(tokens[t] + 1) * E);
      if (c_.gemma)
        for (double& v : x[t]) v *= std::sqrt(static_cast<double>(E));
    }
    for (int l = 0; l < c_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const bool local = c_.gemma && (l + 1) % 6 != 0;
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (int t = 0; t < n; ++t) {
        const auto h = norm(x[t], mat(p + "attn_norm.weight"));
        q[t] = linear(h, p + "attn_q");
        k[t] = linear(h, p + "attn_k");
        v[t] = linear(h, p + "attn_v");
        head_norm(q[t], H, D, mat(p + "attn_q_norm.weight"));
        head_norm(k[t], HKV, D, mat(p + "attn_k_norm.weight"));
        rotate(q[t], H, D, t, local);
        rotate(k[t], HKV, D, t, local);
      }
      std::vector<std::vector<double>> out(n);
      for (int t = 0; t < n; ++t) {
        std::vector<double> att(static_cast<size_t>(H) * D, 0.0);
        for (int h = 0; h < H; ++h) {
          const int g = h / (H / HKV);
          std::vector<double> w(n, 0.0);
          std::vector<bool> seen(n, false);
          double mx = -1e300, sum = 0.0;
          for (int s = 0; s < n; ++s) {
            if (!c_.gemma && s > t) continue;                        // causal
            if (local && std::abs(t - s) > c_.window / 2) continue;  // symmetric window
            seen[s] = true;
            double d = 0.0;
            for (int i = 0; i < D; ++i) d += q[t][h * D + i] * k[s][g * D + i];
            w[s] = d / std::sqrt(static_cast<double>(D));
            mx = std::max(mx, w[s]);
          }
          for (int s = 0; s < n; ++s) sum += (w[s] = seen[s] ? std::exp(w[s] - mx) : 0.0);
          for (int s = 0; s < n; ++s)
            for (int i = 0; i < D; ++i) att[h * D + i] += w[s] / sum * v[s][g * D + i];
        }
        out[t] = linear(att, p + "attn_output");
        if (c_.gemma) out[t] = norm(out[t], mat(p + "post_attention_norm.weight"));
      }
      for (int t = 0; t < n; ++t) {
        for (int i = 0; i < E; ++i) x[t][i] += out[t][i];
        const auto h2 = norm(x[t], mat(p + "ffn_norm.weight"));
        auto gate = linear(h2, p + "ffn_gate");
        const auto up = linear(h2, p + "ffn_up");
        for (size_t i = 0; i < gate.size(); ++i) {
          const double g = gate[i];
          const double a = c_.gemma ? 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)))
                                    : g / (1.0 + std::exp(-g));
          gate[i] = a * up[i];
        }
        auto down = linear(gate, p + "ffn_down");
        if (c_.gemma) down = norm(down, mat(p + "post_ffw_norm.weight"));
        for (int i = 0; i < E; ++i) x[t][i] += down[i];
      }
    }
    for (int t = 0; t < n; ++t) x[t] = norm(x[t], mat("output_norm.weight"));
    return x;
  }

  // y = W x for tensor `name` ([rows, cols] = ne {cols, rows}).
  std::vector<double> apply(const std::vector<double>& x, const std::string& name) const { return linear(x, name, ""); }

 private:
  std::vector<double> mat(const std::string& name) const {
    const format::TensorInfo* t = f_.find_tensor(name);
    if (t == nullptr) return {};
    std::vector<float> tmp(static_cast<size_t>(t->n_elements()));
    kernels::to_float(t->type, t->data, tmp.data(), t->n_elements());
    return {tmp.begin(), tmp.end()};
  }
  std::vector<double> linear(const std::vector<double>& x, const std::string& base,
                             const char* suffix = ".weight") const {
    const std::string name = base + suffix;
    const format::TensorInfo* t = f_.find_tensor(name);
    const auto w = mat(name);
    const int64_t cols = t->ne[0], rows = t->ne[1];
    std::vector<double> y(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
    return y;
  }
  std::vector<double> norm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0.0;
    for (const double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c_.eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
    return y;
  }
  void head_norm(std::vector<double>& x, int heads, int D, const std::vector<double>& w) const {
    for (int h = 0; h < heads; ++h) {
      const std::vector<double> s(x.begin() + h * D, x.begin() + (h + 1) * D);
      const auto y = norm(s, w);
      std::copy(y.begin(), y.end(), x.begin() + h * D);
    }
  }
  void rotate(std::vector<double>& x, int heads, int D, int pos, bool local) const {
    const double base = local ? c_.local_rope_base : c_.rope_base;
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < D / 2; ++j) {
        const double a = pos * std::pow(base, -2.0 * j / D);
        const double x0 = x[h * D + j], x1 = x[h * D + j + D / 2];
        x[h * D + j] = x0 * std::cos(a) - x1 * std::sin(a);
        x[h * D + j + D / 2] = x0 * std::sin(a) + x1 * std::cos(a);
      }
  }

  const format::ModelFile& f_;
  NaiveEmbedderConfig c_;
};

}  // namespace edgelm::test
