// NEON element-wise ops (see ops_vector.h) for AArch64: baseline Advanced SIMD only (no flags,
// no CPU check; built only where src/kernels/CMakeLists.txt defines EDGELM_HAVE_NEON_KERNELS).
// The same formulas as the AVX2 variant (ops_avx2.cpp), 4 lanes at a time, with the polynomial
// exp of neon_math.h; rms_norm sums squares in double (float64x2) like the scalar op. Tails run
// through the same formula on a zero-padded copy, so every element sees one expression.
#include "kernels/ops_neon.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>

#include <cmath>
#include <cstdint>

#include "kernels/neon_math.h"

namespace edgelm::kernels::neon {
namespace {

void rms_norm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  float64x2_t a0 = vdupq_n_f64(0.0), a1 = vdupq_n_f64(0.0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
    a0 = vfmaq_f64(a0, lo, lo);  // products of floats are exact in double: one rounding per add
    a1 = vfmaq_f64(a1, hi, hi);
  }
  double ss = vaddvq_f64(vaddq_f64(a0, a1));
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  for (i = 0; i + 4 <= n; i += 4)
    vst1q_f32(out + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(weight + i)));
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

// x / (1 + e^z); 0 where e^z overflows (z > 88), as ops_avx2.cpp's gated().
inline float32x4_t gated(float32x4_t x, float32x4_t z) {
  const float32x4_t r = vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), exp4(z)));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(r), vcgtq_f32(z, vdupq_n_f32(88.0f))));
}

inline float32x4_t silu4(float32x4_t g) { return gated(g, vnegq_f32(g)); }

inline float32x4_t gelu4(float32x4_t x) {
  const float32x4_t x3 = vmulq_f32(vmulq_f32(x, x), x);
  const float32x4_t z = vfmaq_f32(vmulq_n_f32(x, -2.0f * 0.7978845608028654f), x3,
                                  vdupq_n_f32(-2.0f * 0.7978845608028654f * 0.044715f));
  return gated(x, z);
}

// tanh as ops_avx2.cpp's tanh8: odd series below |y| = 1/8, (1 - e) / (1 + e) above; NaN kept.
inline float32x4_t tanh4(float32x4_t y) {
  const float32x4_t a = vabsq_f32(y), a2 = vmulq_f32(a, a);
  float32x4_t p = vfmaq_f32(vdupq_n_f32(2.0f / 15.0f), vdupq_n_f32(-17.0f / 315.0f), a2);
  p = vfmaq_f32(vdupq_n_f32(-1.0f / 3.0f), p, a2);
  const float32x4_t small = vfmaq_f32(a, vmulq_f32(p, a2), a);
  const float32x4_t e = exp4(vmulq_n_f32(a, -2.0f));
  const float32x4_t big = vdivq_f32(vsubq_f32(vdupq_n_f32(1.0f), e), vaddq_f32(vdupq_n_f32(1.0f), e));
  const float32x4_t t = vbslq_f32(vcltq_f32(a, vdupq_n_f32(0.125f)), small, big);
  const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(y), vdupq_n_u32(0x80000000u));
  const float32x4_t r = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(t), sign));
  return vbslq_f32(vceqq_f32(y, y), r, y);  // NaN stays NaN
}

// out[i] = f(a[i], b[i]) for i < n, 4 lanes at a time; the tail on a zero-padded copy.
template <typename F>
inline void map2(float* out, const float* a, const float* b, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, f(vld1q_f32(a + i), vld1q_f32(b + i)));
  if (i == n) return;
  float ta[4] = {}, tb[4] = {}, to[4];
  for (int64_t j = i; j < n; ++j) {
    ta[j - i] = a[j];
    tb[j - i] = b[j];
  }
  vst1q_f32(to, f(vld1q_f32(ta), vld1q_f32(tb)));
  for (int64_t j = i; j < n; ++j) out[j] = to[j - i];
}

void swiglu(float* out, const float* gate, const float* up, int64_t n) {
  map2(out, gate, up, n, [](float32x4_t g, float32x4_t u) { return vmulq_f32(silu4(g), u); });
}

void silu(float* x, int64_t n) {
  map2(x, x, x, n, [](float32x4_t g, float32x4_t) { return silu4(g); });
}

void geglu(float* gate, const float* up, int64_t n) {
  map2(gate, gate, up, n, [](float32x4_t g, float32x4_t u) { return vmulq_f32(gelu4(g), u); });
}

void soft_cap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  map2(x, x, x, n, [cap, inv](float32x4_t v, float32x4_t) { return vmulq_n_f32(tanh4(vmulq_n_f32(v, inv)), cap); });
}

void add(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vaddq_f32(vld1q_f32(x + i), vld1q_f32(y + i)));
  for (; i < n; ++i) x[i] += y[i];
}

}  // namespace

const VectorOps kNeonVectorOps{Isa::neon, &rms_norm, &swiglu, &silu, &geglu, &soft_cap, &add};

}  // namespace edgelm::kernels::neon

#endif
