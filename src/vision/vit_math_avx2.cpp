// vit_math.h's loops built with -mavx2 (no -mfma: the same per-element operations as the
// baseline copy). Reached only through vit_math.cpp, when kernels::active_isa() is an x86 SIMD
// ISA, so no AVX2 instruction runs on a CPU that lacks it. softmax_scaled: vit_softmax_simd.h
// over two ymm (GCC left the baseline loop's max scalar, 32 vmaxss per 16 scores).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "vision/vit_math_isa.h"

#define EDGELM_VIT_OWN_SOFTMAX
namespace edgelm::vision::avx2 {
#include "vision/vit_math_loops.inc"
#include "vision/vit_softmax_simd.h"

namespace {

// 16 lanes in two ymm (lanes 0-7, 8-15) for softmax_simd.
struct Ymm2 {
  struct T {
    __m256 lo, hi;
  };
  template <typename F>
  static T each(T a, T b, F f) {
    return {f(a.lo, b.lo), f(a.hi, b.hi)};
  }
  static T load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v.lo), _mm256_storeu_ps(p + 8, v.hi); }
  static T set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static T add(T a, T b) { return each(a, b, [](__m256 x, __m256 y) { return _mm256_add_ps(x, y); }); }
  static T sub(T a, T b) { return each(a, b, [](__m256 x, __m256 y) { return _mm256_sub_ps(x, y); }); }
  static T mul(T a, T b) { return each(a, b, [](__m256 x, __m256 y) { return _mm256_mul_ps(x, y); }); }
  static T max(T a, T b) { return each(a, b, [](__m256 x, __m256 y) { return _mm256_max_ps(x, y); }); }
  static T min(T a, T b) { return each(a, b, [](__m256 x, __m256 y) { return _mm256_min_ps(x, y); }); }
  static T pow2(T n) {
    const auto p = [](__m256 x) {
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(x), _mm256_set1_epi32(127)), 23));
    };
    return {p(n.lo), p(n.hi)};
  }
  static T zero_below(T a, float c, T e) {
    const __m256 vc = _mm256_set1_ps(c);
    return {_mm256_andnot_ps(_mm256_cmp_ps(a.lo, vc, _CMP_LT_OQ), e.lo),
            _mm256_andnot_ps(_mm256_cmp_ps(a.hi, vc, _CMP_LT_OQ), e.hi)};
  }
};

}  // namespace

void softmax_scaled(float* s, int64_t n, float scale) { softmax_simd<Ymm2>(s, n, scale); }

}  // namespace edgelm::vision::avx2
