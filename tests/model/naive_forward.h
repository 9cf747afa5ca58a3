// An independent, deliberately different computation of a llama/qwen2 forward pass, used as a
// second opinion on model/forward.cpp: double precision, the whole sequence recomputed from
// scratch with no KV cache, tensors read straight from the file by name, and rotary embeddings
// applied as complex multiplications on explicitly chosen index pairs.
#pragma once

#include <complex>
#include <cmath>
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
};

class NaiveModel {
 public:
  NaiveModel(const format::ModelFile& f, NaiveConfig c) : f_(f), c_(c) {}

  // Logits [n_vocab] of the last token of `tokens` (positions 0..n-1).
  std::vector<double> logits(const std::vector<int>& tokens) const {
    const int E = c_.n_embd, H = c_.n_head, D = E / H, HKV = c_.n_head_kv, n = static_cast<int>(tokens.size());
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
        rotate(q[t], H, D, t);
        rotate(k[t], HKV, D, t);
      }
      for (int t = 0; t < n; ++t) {
        std::vector<double> att(E, 0.0);
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

  void rotate(std::vector<double>& v, int heads, int D, int pos) const {
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < D / 2; ++j) {
        const int a = c_.neox ? j : 2 * j;
        const int b = c_.neox ? j + D / 2 : 2 * j + 1;
        const double freq = std::pow(c_.rope_base, -2.0 * j / D);
        const std::complex<double> z(v[h * D + a], v[h * D + b]);
        const std::complex<double> r = z * std::polar(1.0, pos * freq);
        v[h * D + a] = r.real();
        v[h * D + b] = r.imag();
      }
    }
  }

  const format::ModelFile& f_;
  NaiveConfig c_;
};

}  // namespace edgelm::test
