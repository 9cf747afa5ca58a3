// AVX2 + FMA element-wise ops (see ops_vector.h), under the rules of kernels_x86.h: per-file
// -mavx2 -mfma -mf16c, internal linkage, reached only through vector_ops() after the CPU check.
#include <immintrin.h>

#include <cstdint>

#include "kernels/ops_avx2_math.h"
#include "kernels/ops_x86.h"

namespace edgelm::kernels::x86 {
namespace {

// Sum of squares in double, as the scalar op: each product of two floats is exact in double,
// so the FMA rounds once per add like the scalar's separate multiply and add.
void rms_norm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    a0 = _mm256_fmadd_pd(lo, lo, a0);
    a1 = _mm256_fmadd_pd(hi, hi, a1);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a0, a1));
  double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(ss / static_cast<double>(n));
  const float scale = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(mean + eps)));
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(weight + i)));
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

// x / (1 + e^z), the form of both gated activations; 0 where e^z overflows (z > 88: exp256
// saturates at e^88.3, which would leave x / e^88.3 for huge |x| instead of 0).
inline __m256 gated(__m256 x, __m256 z) {
  const __m256 r = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp256(z)));
  return _mm256_andnot_ps(_mm256_cmp_ps(z, _mm256_set1_ps(88.0f), _CMP_GT_OQ), r);
}

// The mask of the first r < 8 lanes, for the tails (every element sees one formula).
inline __m256i tail_mask(int64_t r) {
  alignas(32) int32_t lanes[8];
  for (int j = 0; j < 8; ++j) lanes[j] = j < r ? -1 : 0;
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
}

inline __m256 silu8(__m256 g) { return gated(g, _mm256_sub_ps(_mm256_setzero_ps(), g)); }

void swiglu(float* out, const float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  if (i == n) return;
  const __m256i m = tail_mask(n - i);
  _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(silu8(_mm256_maskload_ps(gate + i, m)), _mm256_maskload_ps(up + i, m)));
}

void silu(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, silu8(_mm256_loadu_ps(x + i)));
  if (i == n) return;
  const __m256i m = tail_mask(n - i);
  _mm256_maskstore_ps(x + i, m, silu8(_mm256_maskload_ps(x + i, m)));
}

// gelu_tanh(x) = x / (1 + e^(-2 sqrt(2/pi) (x + 0.044715 x^3))) (see ops_vector.h).
inline __m256 geglu8(__m256 x, __m256 u) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 z = _mm256_fmadd_ps(x3, _mm256_set1_ps(-2.0f * 0.7978845608028654f * 0.044715f),
                                   _mm256_mul_ps(x, _mm256_set1_ps(-2.0f * 0.7978845608028654f)));
  return _mm256_mul_ps(gated(x, z), u);
}

void geglu(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, geglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i == n) return;
  const __m256i mask = tail_mask(n - i);
  const __m256 r = geglu8(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask));
  _mm256_maskstore_ps(gate + i, mask, r);
}

// tanh(y): for |y| < 1/8 the odd series to y^7 (next term 0.022 y^9: < 4e-10 relative), else
// (1 - e) / (1 + e) with e = e^(-2 |y|) (relative error a few ulp of 1 over 1 - e >= 0.22),
// with y's sign; NaN in, NaN out.
inline __m256 tanh8(__m256 y) {
  const __m256 sign = _mm256_and_ps(y, _mm256_set1_ps(-0.0f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), y);
  const __m256 a2 = _mm256_mul_ps(a, a);
  __m256 p = _mm256_set1_ps(-17.0f / 315.0f);
  p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(2.0f / 15.0f));
  p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(-1.0f / 3.0f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, a2), a, a);
  const __m256 e = exp256(_mm256_mul_ps(a, _mm256_set1_ps(-2.0f)));
  const __m256 big = _mm256_div_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), e), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 t = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.125f), _CMP_LT_OQ));
  const __m256 r = _mm256_or_ps(t, sign);
  return _mm256_blendv_ps(r, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));  // NaN stays NaN
}

void soft_cap(float* x, int64_t n, float cap) {
  const __m256 vc = _mm256_set1_ps(cap), inv = _mm256_set1_ps(1.0f / cap);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(vc, tanh8(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv))));
  if (i == n) return;
  const __m256i mask = tail_mask(n - i);
  _mm256_maskstore_ps(x + i, mask, _mm256_mul_ps(vc, tanh8(_mm256_mul_ps(_mm256_maskload_ps(x + i, mask), inv))));
}

void add(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) x[i] += y[i];
}

}  // namespace

constinit const VectorOps kAvx2VectorOps{Isa::avx2, &rms_norm, &swiglu, &silu, &geglu, &soft_cap, &add};

}  // namespace edgelm::kernels::x86
