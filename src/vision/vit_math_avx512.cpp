// vit_math.h's loops built with -mavx512f -mavx512dq and 512-bit vectors preferred (and
// -ffp-contract=off: AVX-512F brings FMA, which must fuse nothing here), so the same per-element
// operations as the baseline copy and the same bits; the reductions keep
// their explicit 16 lanes. Reached only through vit_math.cpp, when kernels::active_isa() is
// avx512 or amx, so no AVX-512 instruction runs on a CPU that lacks it. Twice the elements per
// instruction of the AVX2 copy: softmax over the attention scores is the encoder's largest
// element-wise cost.
//
// softmax_scaled is written out in intrinsics here: GCC left its max loop scalar (16 vmaxss per 16
// scores) and ran the sum as a pass of its own. The same operations per element in the same
// order (exp_inline's, no FMA; MAXPS / MINPS with the operands in the order that gives std::max /
// std::min's result for every input, NaN included), the same 16-lane reductions, the sum taken
// in the exponential's pass: the same bits as the baseline copy (VitMath.SimdCopiesEqualBaseline
// BitForBit), in fewer passes over the scores.
// GCC 12 reports the undefined pass-through operand of the unmasked AVX-512 intrinsics as
// uninitialized (as in kernels/gemm_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "vision/vit_math_isa.h"

#define EDGELM_VIT_OWN_SOFTMAX
namespace edgelm::vision::avx512 {
#include "vision/vit_math_loops.inc"

namespace {

// exp_inline on 16 lanes, operation for operation.
inline __m512 exp16(__m512 x) {
  // std::max(x, c) is (x < c) ? c : x, which is MAXPS(c, x); std::min(x, c) is MINPS(c, x).
  x = _mm512_min_ps(_mm512_set1_ps(80.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
  const __m512 shift = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), shift), shift);
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693145751953125f))),
                                 _mm512_mul_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f)));
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

}  // namespace

void softmax_scaled(float* s, int64_t n, float scale) {
  constexpr int64_t kLanes = 16;
  const int64_t n16 = n / kLanes * kLanes;
  alignas(64) float lanes[kLanes];
  // The maximum: lane j over s[i + j], then the tail into lane 0, then lanes 0..15 in order.
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n16; i += kLanes) mx = _mm512_max_ps(_mm512_loadu_ps(s + i), mx);  // std::max(mx, s)
  _mm512_store_ps(lanes, mx);
  for (int64_t i = n16; i < n; ++i) lanes[0] = std::max(lanes[0], s[i]);
  float m = lanes[0];
  for (int64_t j = 1; j < kLanes; ++j) m = std::max(m, lanes[j]);
  m *= scale;
  constexpr float kNegligible = -64.0f;  // as the baseline copy: weights under e^-64 are 0
  const __m512 vscale = _mm512_set1_ps(scale), vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n16; i += kLanes) {
    const __m512 a = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(s + i), vscale), vm);
    const __mmask16 small = _mm512_cmp_ps_mask(a, _mm512_set1_ps(kNegligible), _CMP_LT_OQ);
    const __m512 e = _mm512_mask_mov_ps(exp16(a), small, _mm512_setzero_ps());
    _mm512_storeu_ps(s + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  _mm512_store_ps(lanes, sum);
  for (int64_t i = n16; i < n; ++i) {
    const float a = s[i] * scale - m;
    s[i] = a < kNegligible ? 0.0f : exp_inline(a);
    lanes[0] += s[i];
  }
  float total = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) total += lanes[j];
  const float inv = 1.0f / total;
  const __m512 vinv = _mm512_set1_ps(inv);
  for (int64_t i = 0; i < n16; i += kLanes) _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), vinv));
  for (int64_t i = n16; i < n; ++i) s[i] *= inv;
}

}  // namespace edgelm::vision::avx512
