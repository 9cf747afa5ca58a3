#include "vision/vit_math.h"

#include <algorithm>
#include <bit>
#include <cmath>

// The loops below vectorise with the baseline ISA (this file is built with -fno-trapping-math,
// without which GCC keeps the compares of min / max as branches); on x86-64 the loop-heavy
// functions also get an AVX2 clone chosen at load time by the CPU (GCC / clang target_clones,
// an ifunc). Both clones do the same operations per element (no FMA contraction) and the same
// fixed-order reductions, so they give the same results.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EDGELM_VISION_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define EDGELM_VISION_CLONES
#endif

namespace edgelm::vision {
namespace {

// The body of exp_approx, inlined into the loops below so they vectorise.
inline float exp_inline(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // n = round(x / ln 2) by the 1.5 * 2^23 trick (round to nearest in the default mode).
  constexpr float kShift = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kShift) - kShift;
  // r = x - n ln 2 in two parts (Cody-Waite), |r| <= ln(2) / 2.
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  // e^r by its Taylor series to r^7 (relative error < 1.3e-8 on |r| <= 0.347), Horner form.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n for n in [-126, 127]: the exponent field.
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

}  // namespace

float exp_approx(float x) { return exp_inline(x); }

EDGELM_VISION_CLONES void activate(float* x, const float* bias, int64_t n, VisionActivation act) {
  if (bias != nullptr)
    for (int64_t i = 0; i < n; ++i) x[i] += bias[i];
  switch (act) {
    case VisionActivation::gelu_tanh:
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float u = -1.5957691216057308f * (v + 0.044715f * v * v * v);  // -2 sqrt(2/pi) (...)
        x[i] = v / (1.0f + exp_inline(u));
      }
      break;
    case VisionActivation::gelu_quick:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + exp_inline(-1.702f * x[i]));
      break;
    case VisionActivation::silu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + exp_inline(-x[i]));
      break;
  }
}

EDGELM_VISION_CLONES void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    ss += d * d;
  }
  const float m = static_cast<float>(mean);
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * scale * w[i] + b[i];
}

EDGELM_VISION_CLONES void softmax_scaled(float* s, int64_t n, float scale) {
  // Eight partial maxima and sums (lanes of the vectorised loops); the tail folds into lane 0.
  constexpr int64_t kLanes = 8;
  float mx[kLanes], sum[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) mx[j] = -INFINITY, sum[j] = 0.0f;
  const int64_t n8 = n / kLanes * kLanes;
  for (int64_t i = 0; i < n8; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) mx[j] = std::max(mx[j], s[i + j]);
  for (int64_t i = n8; i < n; ++i) mx[0] = std::max(mx[0], s[i]);
  float m = mx[0];
  for (int64_t j = 1; j < kLanes; ++j) m = std::max(m, mx[j]);
  m *= scale;
  for (int64_t i = 0; i < n; ++i) s[i] = exp_inline(s[i] * scale - m);
  for (int64_t i = 0; i < n8; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) sum[j] += s[i + j];
  for (int64_t i = n8; i < n; ++i) sum[0] += s[i];
  float total = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) total += sum[j];
  const float inv = 1.0f / total;
  for (int64_t i = 0; i < n; ++i) s[i] *= inv;
}

}  // namespace edgelm::vision
