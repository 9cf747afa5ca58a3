// The shared numeric operations of the forward passes (see ops.h). The expressions are exactly
// those of the original reference forward: changing one changes every golden result.
#include "model/ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/check.h"

namespace edgelm::model {
namespace {

std::atomic<LinearObserver*> g_observer{nullptr};

void add_bias(float* out, int64_t n_tok, int64_t rows, const float* bias) {
  if (bias == nullptr) return;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < rows; ++r) out[t * rows + r] += bias[r];
}

}  // namespace

LinearObserver* set_linear_observer(LinearObserver* o) { return g_observer.exchange(o); }

void linear(float* out, const float* x, int64_t n_tok, const kernels::WeightMatrix& w, const float* bias,
            ThreadPool& pool, kernels::MatmulScratch& scratch) {
  if (LinearObserver* o = g_observer.load(std::memory_order_relaxed)) o->observe(w, x, n_tok);
  kernels::matmul(w, x, n_tok, out, pool, scratch);
  add_bias(out, n_tok, w.rows, bias);
}

void linear_many(std::span<const LinearPart> parts, const float* x, int64_t n_tok, ThreadPool& pool,
                 kernels::MatmulScratch& scratch) {
  EDGELM_CHECK(parts.size() <= kernels::kMaxMatmulParts, "linear_many: ", parts.size(), " parts; at most ",
               kernels::kMaxMatmulParts);
  if (LinearObserver* o = g_observer.load(std::memory_order_relaxed))
    for (const LinearPart& p : parts) o->observe(*p.w, x, n_tok);
  kernels::MatmulPart mm[kernels::kMaxMatmulParts];
  for (size_t i = 0; i < parts.size(); ++i) mm[i] = {parts[i].w, parts[i].out};
  kernels::matmul_many({mm, parts.size()}, x, n_tok, pool, scratch);
  for (const LinearPart& p : parts) add_bias(p.out, n_tok, p.w->rows, p.bias);
}

void rms_norm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  if (weight == nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void swiglu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = silu(gate[i]) * up[i];
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

void geglu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void attention_head(const float* q, const float* k, const float* v, int64_t row_stride, int32_t n_pos, int64_t head_dim,
                    float scale, float* scores, float* out, float softcap) {
  float max_score = -INFINITY;
  for (int32_t p = 0; p < n_pos; ++p) {
    const float* kp = k + p * row_stride;
    float dot = 0.0f;
    for (int64_t i = 0; i < head_dim; ++i) dot += q[i] * kp[i];
    scores[p] = dot * scale;
    if (softcap > 0.0f) scores[p] = soft_cap(scores[p], softcap);
    max_score = std::max(max_score, scores[p]);
  }
  float sum = 0.0f;
  for (int32_t p = 0; p < n_pos; ++p) {
    scores[p] = std::exp(scores[p] - max_score);
    sum += scores[p];
  }
  std::fill(out, out + head_dim, 0.0f);
  for (int32_t p = 0; p < n_pos; ++p) {
    const float w = scores[p] / sum;
    const float* vp = v + p * row_stride;
    for (int64_t i = 0; i < head_dim; ++i) out[i] += w * vp[i];
  }
}

void split_q_gate(const float* qg, float* q, float* gate, int64_t n_tok, int32_t n_head, int64_t head_dim) {
  for (int64_t t = 0; t < n_tok; ++t)
    for (int32_t h = 0; h < n_head; ++h) {
      const float* src = qg + (t * n_head + h) * 2 * head_dim;
      std::copy(src, src + head_dim, q + (t * n_head + h) * head_dim);
      std::copy(src + head_dim, src + 2 * head_dim, gate + (t * n_head + h) * head_dim);
    }
}

void sigmoid_gate(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

}  // namespace edgelm::model
