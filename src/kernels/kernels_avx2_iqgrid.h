// Part of kernels_avx2.cpp (read its comment and kernels_x86.h's rules first): AVX2 vec_dot of
// the grid IQ formats (quants_iq_grid.h) against Q8_K: IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S,
// IQ1_S, IQ1_M.
//
// Each 32-element sub-block: the grid entries of its indices gathered by scalar loads into one
// register (unsigned magnitudes <= 62), the signs moved onto the activations (sign_epi8 with
// +-1: y in [-127, 127], so negation is exact), maddubs (pairs <= 2 * 62 * 127 < 2^15), madd
// with the odd 16-element scales 2 s + 1 <= 31. The per-block isum is the scalar oracle's exact
// integer, and sum += d * d_y * isum is its float expression in its order, so the result is
// bit-identical to the scalar vec_dot (tests/kernels/test_simd.cpp).
#pragma once
#ifndef EDGELM_KERNELS_AVX2_TU
#error "kernels_avx2_iqgrid.h is part of kernels_avx2.cpp only"
#endif

#include "kernels/quants_iq_grid.h"

namespace edgelm::kernels::x86 {
namespace {

#include "kernels/iq_grids.inc"

// The 8 signs of an IQ2_XXS/IQ2_XS/IQ3_XXS group from its 7 stored bits (the 8th makes the
// count of minus signs even), as a byte mask: 0xff where the element is negative.
constexpr uint64_t sign_mask_of(int i) {
  int parity = 0;
  for (int b = 0; b < 7; ++b) parity ^= (i >> b) & 1;
  const int bits = i | (parity << 7);
  uint64_t m = 0;
  for (int j = 0; j < 8; ++j)
    if ((bits >> j) & 1) m |= uint64_t{0xff} << (8 * j);
  return m;
}
struct SignMasks {
  uint64_t m[128];
};
constexpr SignMasks make_sign_masks() {
  SignMasks t{};
  for (int i = 0; i < 128; ++i) t.m[i] = sign_mask_of(i);
  return t;
}
constexpr SignMasks kSignMasks = make_sign_masks();

inline uint64_t sign_mask(uint32_t seven_bits) { return kSignMasks.m[seven_bits & 127]; }

// y with the sign of each byte flipped where mask (0xff / 0) is set.
inline __m256i apply_signs(__m256i y, __m256i mask) {
  return _mm256_sign_epi8(y, _mm256_or_si256(mask, _mm256_set1_epi8(1)));
}

// Scales of the two 16-element halves of a sub-block as madd multipliers.
inline __m256i scales_lo_hi(int lo, int hi) {
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(lo)), _mm_set1_epi16(static_cast<int16_t>(hi)));
}

// One sub-block: magnitudes g (u8), sign mask, the activations, the scale multipliers.
inline __m256i grid_sub(__m256i g, __m256i mask, const int8_t* y, __m256i mult) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(g, apply_signs(load256(y), mask)), mult);
}

// The fp16 bits of a block's scale (IQ1_M spreads them over the top nibbles of its scale words).
template <typename Block>
inline uint16_t d_bits(const Block& x) {
  return x.d;
}
inline uint16_t d_bits(const BlockIQ1_M& x) {
  uint16_t sc[4];
  std::memcpy(sc, x.scales, sizeof sc);
  return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

// Rows of Block; BlockSums(x, y, &acc) adds the 8 int32 lanes of one block's scaled sums.
// kFactorLog2: the power of two of the format's float d (the scalar *_ints' d).
template <typename Block, void (*BlockSums)(const Block&, const BlockQ8_K&, __m256i*), int kFactorLog2>
float grid_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const Block*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const float factor = kFactorLog2 == 0 ? 1.0f : kFactorLog2 == -2 ? 0.25f : 0.125f;
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prefetch_ahead(&x[i], sizeof(Block));
    __m256i acc = _mm256_setzero_si256();
    BlockSums(x[i], y[i], &acc);
    const float d = half(d_bits(x[i])) * factor;
    sum += d * y[i].d * static_cast<float>(hsum_i32(acc));
  }
  return sum;
}

// IQ3_S: per sub-block ib, 8 grid indices qs[8 ib + l] | (bit l of qh[ib]) << 8, one sign bit per
// element (signs[4 ib ..]), one 4-bit scale per sub-block.
inline __m256i grid8(const uint32_t* grid, const int32_t* idx) {
  return _mm256_setr_epi32(static_cast<int>(grid[idx[0]]), static_cast<int>(grid[idx[1]]), static_cast<int>(grid[idx[2]]),
                           static_cast<int>(grid[idx[3]]), static_cast<int>(grid[idx[4]]), static_cast<int>(grid[idx[5]]),
                           static_cast<int>(grid[idx[6]]), static_cast<int>(grid[idx[7]]));
}

inline void iq3_s_sums(const BlockIQ3_S& x, const BlockQ8_K& y, __m256i* acc) {
  // The 64 indices qs[k] | (bit k % 8 of qh[k / 8]) << 8 formed 8 at a time in int32 lanes and
  // stored, so the scalar side only loads (the grid lookups are what limits this loop).
  const __m256i shifts = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1);
  const __m256i bit8 = _mm256_set1_epi32(256);
  alignas(32) int32_t idx[64];
  for (int ib = 0; ib < 8; ++ib) {
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.qs + 8 * ib)));
    const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(x.qh[ib]), shifts), bit8);
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 8 * ib), _mm256_or_si256(lo, hi));
  }
  for (int ib = 0; ib < 8; ++ib) {
    const int s = 1 + 2 * ((x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f);
    *acc = _mm256_add_epi32(*acc, grid_sub(grid8(kIq3sGrid, idx + 8 * ib), bits_to_bytes(x.signs + 4 * ib),
                                           y.qs + 32 * ib, _mm256_set1_epi16(static_cast<int16_t>(s))));
  }
}

// IQ2_XS: per 8 elements a u16, 9-bit grid index and 7-bit sign index; 4-bit scales per 16.
// The 32 sign bytes of a block are completed in SIMD (bit 7 = the parity of the 7 stored bits,
// looked up per nibble of bits 0-3 xor 4-6) and expanded per sub-block like IQ3_S's.
inline void iq2_xs_signs(const uint16_t* qs, uint8_t out[32]) {
  const __m256i parity = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0, -128,
                                          -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
  __m256i full[2];
  for (int k = 0; k < 2; ++k) {
    const __m256i q = load256(qs + 16 * k);
    const __m256i s7 = _mm256_srli_epi16(q, 9);
    const __m256i nib = _mm256_and_si256(_mm256_xor_si256(s7, _mm256_srli_epi16(q, 13)), _mm256_set1_epi16(0x0f));
    full[k] = _mm256_or_si256(s7, _mm256_shuffle_epi8(parity, nib));  // high bytes stay 0
  }
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(full[0], full[1]), 0xd8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
}

inline void iq2_xs_sums(const BlockIQ2_XS& x, const BlockQ8_K& y, __m256i* acc) {
  alignas(32) uint8_t signs[32];
  iq2_xs_signs(x.qs, signs);
  for (int ib = 0; ib < 8; ++ib) {
    const uint16_t* q = x.qs + 4 * ib;
    const __m256i g = _mm256_setr_epi64x(
        static_cast<int64_t>(kIq2xsGrid[q[0] & 511]), static_cast<int64_t>(kIq2xsGrid[q[1] & 511]),
        static_cast<int64_t>(kIq2xsGrid[q[2] & 511]), static_cast<int64_t>(kIq2xsGrid[q[3] & 511]));
    const int sc = x.scales[ib];
    *acc = _mm256_add_epi32(*acc, grid_sub(g, bits_to_bytes(signs + 4 * ib), y.qs + 32 * ib,
                                           scales_lo_hi(2 * (sc & 15) + 1, 2 * (sc >> 4) + 1)));
  }
}

// IQ2_XXS: per sub-block two u32, the 4 grid indices (bytes) and 4 x 7 sign bits + a 4-bit scale.
inline void iq2_xxs_sums(const BlockIQ2_XXS& x, const BlockQ8_K& y, __m256i* acc) {
  const auto* q = reinterpret_cast<const uint8_t*>(x.qs);
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux;
    std::memcpy(&aux, q + 8 * ib + 4, 4);
    const uint8_t* idx = q + 8 * ib;
    const __m256i g = _mm256_setr_epi64x(static_cast<int64_t>(kIq2xxsGrid[idx[0]]), static_cast<int64_t>(kIq2xxsGrid[idx[1]]),
                                         static_cast<int64_t>(kIq2xxsGrid[idx[2]]), static_cast<int64_t>(kIq2xxsGrid[idx[3]]));
    const __m256i m = _mm256_setr_epi64x(static_cast<int64_t>(sign_mask(aux)), static_cast<int64_t>(sign_mask(aux >> 7)),
                                         static_cast<int64_t>(sign_mask(aux >> 14)), static_cast<int64_t>(sign_mask(aux >> 21)));
    const int s = 2 * static_cast<int>(aux >> 28) + 1;
    *acc = _mm256_add_epi32(*acc, grid_sub(g, m, y.qs + 32 * ib, _mm256_set1_epi16(static_cast<int16_t>(s))));
  }
}

// IQ3_XXS: 8 grid indices (u32 entries of 4 magnitudes) per sub-block, its u32 of 4 x 7 sign
// bits (each covering 8 elements) + a 4-bit scale.
inline void iq3_xxs_sums(const BlockIQ3_XXS& x, const BlockQ8_K& y, __m256i* acc) {
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux;
    std::memcpy(&aux, x.scales_and_signs + 4 * ib, 4);
    const uint8_t* q = x.qs + 8 * ib;
    const __m256i g = _mm256_setr_epi32(
        static_cast<int>(kIq3xxsGrid[q[0]]), static_cast<int>(kIq3xxsGrid[q[1]]), static_cast<int>(kIq3xxsGrid[q[2]]),
        static_cast<int>(kIq3xxsGrid[q[3]]), static_cast<int>(kIq3xxsGrid[q[4]]), static_cast<int>(kIq3xxsGrid[q[5]]),
        static_cast<int>(kIq3xxsGrid[q[6]]), static_cast<int>(kIq3xxsGrid[q[7]]));
    const __m256i m = _mm256_setr_epi64x(static_cast<int64_t>(sign_mask(aux)), static_cast<int64_t>(sign_mask(aux >> 7)),
                                         static_cast<int64_t>(sign_mask(aux >> 14)), static_cast<int64_t>(sign_mask(aux >> 21)));
    const int s = 2 * static_cast<int>(aux >> 28) + 1;
    *acc = _mm256_add_epi32(*acc, grid_sub(g, m, y.qs + 32 * ib, _mm256_set1_epi16(static_cast<int16_t>(s))));
  }
}

// IQ2_S: 10-bit grid indices (qs | 2 bits of qh), one sign bit per element, 4-bit scales per 16.
inline __m256i grid4(const uint64_t* grid, const int32_t* idx) {
  return _mm256_setr_epi64x(static_cast<int64_t>(grid[idx[0]]), static_cast<int64_t>(grid[idx[1]]),
                            static_cast<int64_t>(grid[idx[2]]), static_cast<int64_t>(grid[idx[3]]));
}

// Two qh-style bytes a, b as int32 lanes (a x 4, b x 4).
inline __m256i bytes_4x2(int a, int b) { return _mm256_setr_m128i(_mm_set1_epi32(a), _mm_set1_epi32(b)); }

inline void iq2_s_sums(const BlockIQ2_S& x, const BlockQ8_K& y, __m256i* acc) {
  // Index g = qs[g] | ((qh[g / 4] >> 2 (g % 4)) & 3) << 8, 8 at a time in SIMD (see IQ3_S).
  alignas(32) int32_t idx[32];
  const __m256i shifts = _mm256_setr_epi32(8, 6, 4, 2, 8, 6, 4, 2);
  for (int p = 0; p < 4; ++p) {
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.qs + 8 * p)));
    const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(bytes_4x2(x.qh[2 * p], x.qh[2 * p + 1]), shifts),
                                        _mm256_set1_epi32(0x300));
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 8 * p), _mm256_or_si256(lo, hi));
  }
  for (int ib = 0; ib < 8; ++ib) {
    const int sc = x.scales[ib];
    *acc = _mm256_add_epi32(*acc, grid_sub(grid4(kIq2sGrid, idx + 4 * ib), bits_to_bytes(x.signs + 4 * ib),
                                           y.qs + 32 * ib, scales_lo_hi(2 * (sc & 15) + 1, 2 * (sc >> 4) + 1)));
  }
}

// IQ1_S / IQ1_M: q = 8 * grid + delta8 (grid bytes -1, 0, 1: sign_epi8 of 8 by them is 8 * grid;
// q is odd, never 0), |q| <= 9, dotted by the sign trick like the other formats.
inline __m256i iq1_values(__m256i grid, __m256i delta) {
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta);
}
inline __m256i iq1_sub(__m256i q, const int8_t* y, __m256i mult) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(load256(y), q));
  return _mm256_madd_epi16(p, mult);
}
inline int64_t delta_bytes(bool negative) { return negative ? -1 : 0x0101010101010101; }

// IQ1_S: per sub-block a u16 qh: 4 x 3 index bits, a 3-bit scale, the delta sign (bit 15). (Its
// indices formed in SIMD, as IQ2_S's are, measured slower: 1.9 -> 2.0 ms at 4096 x 4096.)
inline void iq1_s_sums(const BlockIQ1_S& x, const BlockQ8_K& y, __m256i* acc) {
  for (int ib = 0; ib < 8; ++ib) {
    const int qh = x.qh[ib];
    const uint8_t* q = x.qs + 4 * ib;
    const __m256i g = _mm256_setr_epi64x(static_cast<int64_t>(kIq1sGrid[q[0] | ((qh << 8) & 0x700)]),
                                         static_cast<int64_t>(kIq1sGrid[q[1] | ((qh << 5) & 0x700)]),
                                         static_cast<int64_t>(kIq1sGrid[q[2] | ((qh << 2) & 0x700)]),
                                         static_cast<int64_t>(kIq1sGrid[q[3] | ((qh >> 1) & 0x700)]));
    const __m256i delta = _mm256_set1_epi64x(delta_bytes((qh & 0x8000) != 0));
    const int s = 2 * ((qh >> 12) & 7) + 1;
    *acc = _mm256_add_epi32(*acc, iq1_sub(iq1_values(g, delta), y.qs + 32 * ib, _mm256_set1_epi16(static_cast<int16_t>(s))));
  }
}

// IQ1_M: per 8 elements a nibble of qh (3 index bits, the delta sign), 3-bit scales per 16
// elements in the low 12 bits of the 4 scale words.
inline void iq1_m_sums(const BlockIQ1_M& x, const BlockQ8_K& y, __m256i* acc) {
  uint16_t sc[4];
  std::memcpy(sc, x.scales, sizeof sc);
  alignas(32) int32_t idx[32];
  const __m256i spread = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), shifts = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
  for (int p = 0; p < 4; ++p) {  // index k = qs[k] | (nibble k of qh & 7) << 8
    uint32_t h4;
    std::memcpy(&h4, x.qh + 4 * p, 4);
    const __m256i nib = _mm256_srlv_epi32(
        _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(h4))), spread), shifts);
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.qs + 8 * p)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 8 * p),
                       _mm256_or_si256(lo, _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(7)), 8)));
  }
  for (int ib = 0; ib < 8; ++ib) {
    const int h0 = x.qh[2 * ib], h1 = x.qh[2 * ib + 1];
    const __m256i delta = _mm256_setr_epi64x(delta_bytes((h0 & 0x08) != 0), delta_bytes((h0 & 0x80) != 0),
                                             delta_bytes((h1 & 0x08) != 0), delta_bytes((h1 & 0x80) != 0));
    const int w = sc[ib / 2] >> (6 * (ib % 2));  // halves 2 ib, 2 ib + 1: 3 bits each
    *acc = _mm256_add_epi32(*acc, iq1_sub(iq1_values(grid4(kIq1sGrid, idx + 4 * ib), delta), y.qs + 32 * ib,
                                          scales_lo_hi(2 * (w & 7) + 1, 2 * ((w >> 3) & 7) + 1)));
  }
}

float iq1_s_vec_dot(int64_t n, const void* vx, const void* vy) {
  return grid_vec_dot<BlockIQ1_S, iq1_s_sums, -3>(n, vx, vy);
}
float iq1_m_vec_dot(int64_t n, const void* vx, const void* vy) {
  return grid_vec_dot<BlockIQ1_M, iq1_m_sums, -3>(n, vx, vy);
}
float iq3_s_vec_dot(int64_t n, const void* vx, const void* vy) {
  return grid_vec_dot<BlockIQ3_S, iq3_s_sums, 0>(n, vx, vy);
}
float iq2_xs_vec_dot(int64_t n, const void* vx, const void* vy) {
  return grid_vec_dot<BlockIQ2_XS, iq2_xs_sums, -3>(n, vx, vy);
}
float iq2_xxs_vec_dot(int64_t n, const void* vx, const void* vy) {
  return grid_vec_dot<BlockIQ2_XXS, iq2_xxs_sums, -3>(n, vx, vy);
}
float iq3_xxs_vec_dot(int64_t n, const void* vx, const void* vy) {
  return grid_vec_dot<BlockIQ3_XXS, iq3_xxs_sums, -2>(n, vx, vy);
}
float iq2_s_vec_dot(int64_t n, const void* vx, const void* vy) {
  return grid_vec_dot<BlockIQ2_S, iq2_s_sums, -3>(n, vx, vy);
}

}  // namespace
}  // namespace edgelm::kernels::x86
