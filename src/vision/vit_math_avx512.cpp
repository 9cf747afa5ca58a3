// vit_math.h's loops built with -mavx512f -mavx512dq and 512-bit vectors preferred (and
// -ffp-contract=off: AVX-512F brings FMA, which must fuse nothing here), so the same per-element
// operations as the baseline copy and the same bits; the reductions keep
// their explicit 16 lanes. Reached only through vit_math.cpp, when kernels::active_isa() is
// avx512 or amx, so no AVX-512 instruction runs on a CPU that lacks it. Twice the elements per
// instruction of the AVX2 copy: softmax over the attention scores is the encoder's largest
// element-wise cost.
//
// softmax_scaled: vit_softmax_simd.h over one zmm (GCC left the baseline loop's max scalar).
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

#include "vision/vit_softmax_simd.h"

namespace {

// 16 lanes in one zmm for softmax_simd.
struct Zmm {
  using T = __m512;
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T min(T a, T b) { return _mm512_min_ps(a, b); }
  static T pow2(T n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static T zero_below(T a, float c, T e) {
    return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(a, _mm512_set1_ps(c), _CMP_LT_OQ), _mm512_setzero_ps());
  }
};

}  // namespace

void softmax_scaled(float* s, int64_t n, float scale) { softmax_simd<Zmm>(s, n, scale); }

}  // namespace edgelm::vision::avx512
