#include "sample/logit_scan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace edgelm::sample {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr size_t kStep = 16;  // floats per step: four 4-lane vectors

}  // namespace

#if defined(__SSE2__)

void nan_to_neg_inf(std::span<float> x) {
  const size_t n = x.size();
  float* p = x.data();
  size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    __m128 v[4], nan = _mm_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm_loadu_ps(p + i + 4 * j);
      nan = _mm_or_ps(nan, _mm_cmpunord_ps(v[j], v[j]));
    }
    if (_mm_movemask_ps(nan) == 0) continue;  // the common case: nothing to write
    for (size_t j = i; j < i + kStep; ++j)
      if (std::isnan(p[j])) p[j] = kNegInf;
  }
  for (; i < n; ++i)
    if (std::isnan(p[i])) p[i] = kNegInf;
}

float max_ignoring_nan(std::span<const float> x) {
  const size_t n = x.size();
  const float* p = x.data();
  // maxps(a, m) returns m when a is NaN, so NaN never enters the running maxima.
  __m128 m[4];
  for (__m128& v : m) v = _mm_set1_ps(kNegInf);
  size_t i = 0;
  for (; i + kStep <= n; i += kStep)
    for (int j = 0; j < 4; ++j) m[j] = _mm_max_ps(_mm_loadu_ps(p + i + 4 * j), m[j]);
  alignas(16) float lanes[16];
  for (int j = 0; j < 4; ++j) _mm_store_ps(lanes + 4 * j, m[j]);
  float best = kNegInf;
  for (const float f : lanes) best = f > best ? f : best;
  for (; i < n; ++i) best = p[i] > best ? p[i] : best;
  return best;
}

size_t first_equal(std::span<const float> x, float v) {
  const size_t n = x.size();
  const float* p = x.data();
  const __m128 vv = _mm_set1_ps(v);
  size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    int mask = 0;
    for (int j = 0; j < 4; ++j) mask |= _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(p + i + 4 * j), vv)) << (4 * j);
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
  for (; i < n; ++i)
    if (p[i] == v) return i;
  return n;
}

#elif defined(__ARM_NEON)

void nan_to_neg_inf(std::span<float> x) {
  const size_t n = x.size();
  float* p = x.data();
  const float32x4_t ninf = vdupq_n_f32(kNegInf);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(p + i);
    const uint32x4_t ok = vceqq_f32(v, v);  // false exactly for NaN
    vst1q_f32(p + i, vbslq_f32(ok, v, ninf));
  }
  for (; i < n; ++i)
    if (std::isnan(p[i])) p[i] = kNegInf;
}

float max_ignoring_nan(std::span<const float> x) {
  const size_t n = x.size();
  const float* p = x.data();
  float32x4_t m[4];
  for (float32x4_t& v : m) v = vdupq_n_f32(kNegInf);
  size_t i = 0;
  // vmaxnmq returns the number when one operand is NaN.
  for (; i + kStep <= n; i += kStep)
    for (int j = 0; j < 4; ++j) m[j] = vmaxnmq_f32(m[j], vld1q_f32(p + i + 4 * j));
  float best = vmaxnmvq_f32(vmaxnmq_f32(vmaxnmq_f32(m[0], m[1]), vmaxnmq_f32(m[2], m[3])));
  if (std::isnan(best)) best = kNegInf;
  for (; i < n; ++i) best = p[i] > best ? p[i] : best;
  return best;
}

size_t first_equal(std::span<const float> x, float v) {
  const size_t n = x.size();
  const float* p = x.data();
  const float32x4_t vv = vdupq_n_f32(v);
  size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    uint32x4_t any = vdupq_n_u32(0);
    for (int j = 0; j < 4; ++j) any = vorrq_u32(any, vceqq_f32(vld1q_f32(p + i + 4 * j), vv));
    if (vmaxvq_u32(any) == 0) continue;
    for (size_t j = i; j < i + kStep; ++j)
      if (p[j] == v) return j;
  }
  for (; i < n; ++i)
    if (p[i] == v) return i;
  return n;
}

#else

void nan_to_neg_inf(std::span<float> x) {
  for (float& l : x)
    if (std::isnan(l)) l = kNegInf;
}

float max_ignoring_nan(std::span<const float> x) {
  float best = kNegInf;
  for (const float f : x) best = f > best ? f : best;
  return best;
}

size_t first_equal(std::span<const float> x, float v) {
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] == v) return i;
  return x.size();
}

#endif

}  // namespace edgelm::sample
