// Part of kernels_avx2.cpp (read its comment and kernels_x86.h's rules first): AVX2 vec_dot of
// the grid IQ formats (quants_iq_grid.h) against Q8_K: IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S,
// IQ1_S, IQ1_M, over the decoders of iq_grid_x86.h.
//
// Each 32-element sub-block: the magnitudes (unsigned, <= 62) against the activations with the
// signs moved onto them (sign_epi8 with +-1: y in [-127, 127], so negation is exact; IQ1: the
// signed values |v| . sign(y, v)), maddubs (pairs <= 2 * 62 * 127 < 2^15), madd with the odd
// 16-element scales 2 s + 1 <= 31. The per-block isum is the scalar oracle's exact integer, and
// sum += d * d_y * isum is its float expression in its order, so the result is bit-identical to
// the scalar vec_dot (tests/kernels/test_simd.cpp).
#pragma once
#ifndef EDGELM_KERNELS_AVX2_TU
#error "kernels_avx2_iqgrid.h is part of kernels_avx2.cpp only"
#endif

#include "kernels/iq_grid_x86.h"

namespace edgelm::kernels::x86 {
namespace {

template <typename Format>
float grid_vec_dot(int64_t n, const void* vx, const void* vy) {
  using Block = typename Format::Block;
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const Block*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prefetch_ahead(&x[i], sizeof(Block));
    __m256i acc = _mm256_setzero_si256();
    const int8_t* yq = y[i].qs;
    Format::subs(x[i], [&](int ib, __m256i v, __m256i mask, __m256i mult, int, int) {
      const __m256i ys = load256(yq + 32 * ib);
      __m256i p;
      if constexpr (Format::kSignedV)
        p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(ys, v));
      else
        p = _mm256_maddubs_epi16(v, _mm256_sign_epi8(ys, _mm256_or_si256(mask, _mm256_set1_epi8(1))));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, mult));
    });
    sum += Format::d(x[i]) * y[i].d * static_cast<float>(hsum_i32(acc));
  }
  return sum;
}

float iq3_s_vec_dot(int64_t n, const void* vx, const void* vy) { return grid_vec_dot<Iq3S>(n, vx, vy); }
float iq2_xs_vec_dot(int64_t n, const void* vx, const void* vy) { return grid_vec_dot<Iq2Xs>(n, vx, vy); }
float iq2_xxs_vec_dot(int64_t n, const void* vx, const void* vy) { return grid_vec_dot<Iq2Xxs>(n, vx, vy); }
float iq3_xxs_vec_dot(int64_t n, const void* vx, const void* vy) { return grid_vec_dot<Iq3Xxs>(n, vx, vy); }
float iq2_s_vec_dot(int64_t n, const void* vx, const void* vy) { return grid_vec_dot<Iq2S>(n, vx, vy); }
float iq1_s_vec_dot(int64_t n, const void* vx, const void* vy) { return grid_vec_dot<Iq1S>(n, vx, vy); }
float iq1_m_vec_dot(int64_t n, const void* vx, const void* vy) { return grid_vec_dot<Iq1M>(n, vx, vy); }

}  // namespace
}  // namespace edgelm::kernels::x86
