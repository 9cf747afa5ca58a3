// Part of kernels_avx2.cpp and of gemm_x86_impl.h (read kernels_x86.h's rules first): the AVX2
// decoders of the grid IQ formats (quants_iq_grid.h), shared by their vec_dot
// (kernels_avx2_iqgrid.h) and their GEMM repack (gemm_x86_iqgrid.h).
//
// Format::subs(x, f) calls f(ib, v, mask, mult, lo, hi) for the 8 sub-blocks ib of 32 elements of
// block x, in order: v the 32 grid magnitudes (unsigned, <= 62) and mask their signs (0xff where
// negative) — or, for IQ1_S/IQ1_M (kSignedV), v the signed values 8 * grid + delta (|v| <= 9)
// and mask 0 —, lo and hi the odd scales of its two 16-element halves, mult them as madd
// multipliers. Element e of the block is Format::d(x) * scale * value, the scalar *_ints' integer
// form exactly (tests/kernels/test_simd.cpp and test_gemm.cpp compare against it).
//
// The grid entries are looked up with scalar loads: AVX2 gathers measured slower on Zen 3. Where
// forming an index takes several scalar operations (IQ3_S, IQ2_S, IQ1_M) the indices are formed
// 8 at a time in SIMD and stored, so the scalar side only loads; IQ2_XS's sign bytes, parity bit
// included, are completed in SIMD and expanded like IQ3_S's stored sign bits; the 16-element
// scales of IQ2_XS and IQ2_S are decoded once per block and picked per sub-block by a shuffle.
#pragma once
#if !defined(EDGELM_KERNELS_AVX2_TU) && !defined(EDGELM_GEMM_TABLE)
#error "iq_grid_x86.h is part of kernels_avx2.cpp and gemm_x86_impl.h only"
#endif

#include "kernels/quants_iq_grid.h"

namespace edgelm::kernels::x86 {
namespace {

#include "kernels/iq_grids.inc"

// The 8 signs of an IQ2_XXS/IQ3_XXS group from its 7 stored bits (the 8th makes the count of
// minus signs even), as a byte mask: 0xff where the element is negative.
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

inline int64_t sign_mask(uint32_t seven_bits) { return static_cast<int64_t>(kSignMasks.m[seven_bits & 127]); }

// Scales of the two 16-element halves of a sub-block as madd multipliers.
inline __m256i scales_lo_hi(int lo, int hi) {
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(lo)), _mm_set1_epi16(static_cast<int16_t>(hi)));
}
inline __m256i scale32(int s) { return _mm256_set1_epi16(static_cast<int16_t>(s)); }

// The 16 odd scales 2 s + 1 of 8 bytes of 4-bit scales (low nibble first) as bytes, in both
// 128-bit lanes; mult_of_half picks sub-block ib's pair as madd multipliers with one shuffle
// (byte 2 ib into the low lane's int16s, 2 ib + 1 into the high lane's).
inline __m256i scale_bytes16(const uint8_t* scales) {
  uint64_t b;
  std::memcpy(&b, scales, 8);
  const __m128i v = _mm_cvtsi64_si128(static_cast<long long>(b));
  const __m128i nib = _mm_and_si128(_mm_unpacklo_epi8(v, _mm_srli_epi16(v, 4)), _mm_set1_epi8(0x0f));
  return _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(nib, nib), _mm_set1_epi8(1)));
}
struct HalfCtrl {
  int8_t c[8][32];
};
constexpr HalfCtrl make_half_ctrl() {
  HalfCtrl t{};
  for (int ib = 0; ib < 8; ++ib)
    for (int j = 0; j < 32; ++j) t.c[ib][j] = static_cast<int8_t>(j % 2 == 1 ? -128 : 2 * ib + (j >= 16 ? 1 : 0));
  return t;
}
constexpr HalfCtrl kHalfCtrl = make_half_ctrl();
inline __m256i mult_of_half(__m256i scale_bytes, int ib) {
  return _mm256_shuffle_epi8(scale_bytes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kHalfCtrl.c[ib])));
}

inline __m256i grid8(const uint32_t* grid, const int32_t* idx) {
  return _mm256_setr_epi32(static_cast<int>(grid[idx[0]]), static_cast<int>(grid[idx[1]]),
                           static_cast<int>(grid[idx[2]]), static_cast<int>(grid[idx[3]]),
                           static_cast<int>(grid[idx[4]]), static_cast<int>(grid[idx[5]]),
                           static_cast<int>(grid[idx[6]]), static_cast<int>(grid[idx[7]]));
}
inline __m256i grid4(const uint64_t* grid, const int32_t* idx) {
  return _mm256_setr_epi64x(static_cast<int64_t>(grid[idx[0]]), static_cast<int64_t>(grid[idx[1]]),
                            static_cast<int64_t>(grid[idx[2]]), static_cast<int64_t>(grid[idx[3]]));
}
inline __m256i load_idx8(const uint8_t* q) {  // 8 bytes -> 8 int32 lanes
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
}
// Two qh-style values a, b as int32 lanes (a x 4, b x 4).
inline __m256i bytes_4x2(int a, int b) { return _mm256_setr_m128i(_mm_set1_epi32(a), _mm_set1_epi32(b)); }

// IQ3_S: per sub-block ib, 8 grid indices qs[8 ib + l] | (bit l of qh[ib]) << 8, one sign bit per
// element (signs[4 ib ..]), one 4-bit scale per sub-block.
struct Iq3S {
  using Block = BlockIQ3_S;
  static constexpr bool kSignedV = false;
  static float d(const Block& x) { return half(x.d); }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    alignas(32) int32_t idx[64];
    const __m256i shifts = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1);
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i hi =
          _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(x.qh[ib]), shifts), _mm256_set1_epi32(256));
      _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 8 * ib), _mm256_or_si256(load_idx8(x.qs + 8 * ib), hi));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const int s = 1 + 2 * ((x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f);
      f(ib, grid8(kIq3sGrid, idx + 8 * ib), bits_to_bytes(x.signs + 4 * ib), scale32(s), s, s);
    }
  }
};

// IQ2_XS: per 8 elements a u16, 9-bit grid index and 7-bit sign index; 4-bit scales per 16.
struct Iq2Xs {
  using Block = BlockIQ2_XS;
  static constexpr bool kSignedV = false;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  // The 32 sign bytes: the 7 stored bits and bit 7 = their parity, looked up per nibble of
  // bits 0-3 xor 4-6.
  static void signs(const uint16_t* qs, uint8_t out[32]) {
    const __m256i parity = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0,
                                            -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    __m256i full[2];
    for (int k = 0; k < 2; ++k) {
      const __m256i q = load256(qs + 16 * k);
      const __m256i s7 = _mm256_srli_epi16(q, 9);
      const __m256i nib = _mm256_and_si256(_mm256_xor_si256(s7, _mm256_srli_epi16(q, 13)), _mm256_set1_epi16(0x0f));
      full[k] = _mm256_or_si256(s7, _mm256_shuffle_epi8(parity, nib));  // high bytes stay 0
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                        _mm256_permute4x64_epi64(_mm256_packus_epi16(full[0], full[1]), 0xd8));
  }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    alignas(32) uint8_t sg[32];
    signs(x.qs, sg);
    const __m256i mults = scale_bytes16(x.scales);
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t* q = x.qs + 4 * ib;
      const __m256i g = _mm256_setr_epi64x(
          static_cast<int64_t>(kIq2xsGrid[q[0] & 511]), static_cast<int64_t>(kIq2xsGrid[q[1] & 511]),
          static_cast<int64_t>(kIq2xsGrid[q[2] & 511]), static_cast<int64_t>(kIq2xsGrid[q[3] & 511]));
      const int lo = 2 * (x.scales[ib] & 15) + 1, hi = 2 * (x.scales[ib] >> 4) + 1;
      f(ib, g, bits_to_bytes(sg + 4 * ib), mult_of_half(mults, ib), lo, hi);
    }
  }
};

// IQ2_XXS: per sub-block two u32, the 4 grid indices (bytes) and 4 x 7 sign bits + a 4-bit scale.
struct Iq2Xxs {
  using Block = BlockIQ2_XXS;
  static constexpr bool kSignedV = false;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    const auto* q = reinterpret_cast<const uint8_t*>(x.qs);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t aux;
      std::memcpy(&aux, q + 8 * ib + 4, 4);
      const uint8_t* idx = q + 8 * ib;
      const __m256i g =
          _mm256_setr_epi64x(static_cast<int64_t>(kIq2xxsGrid[idx[0]]), static_cast<int64_t>(kIq2xxsGrid[idx[1]]),
                             static_cast<int64_t>(kIq2xxsGrid[idx[2]]), static_cast<int64_t>(kIq2xxsGrid[idx[3]]));
      const __m256i m =
          _mm256_setr_epi64x(sign_mask(aux), sign_mask(aux >> 7), sign_mask(aux >> 14), sign_mask(aux >> 21));
      const int s = 2 * static_cast<int>(aux >> 28) + 1;
      f(ib, g, m, scale32(s), s, s);
    }
  }
};

// IQ3_XXS: 8 grid indices (u32 entries of 4 magnitudes) per sub-block, its u32 of 4 x 7 sign
// bits (each covering 8 elements) + a 4-bit scale.
struct Iq3Xxs {
  using Block = BlockIQ3_XXS;
  static constexpr bool kSignedV = false;
  static float d(const Block& x) { return half(x.d) * 0.25f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t aux;
      std::memcpy(&aux, x.scales_and_signs + 4 * ib, 4);
      const uint8_t* q = x.qs + 8 * ib;
      const __m256i g = _mm256_setr_epi32(static_cast<int>(kIq3xxsGrid[q[0]]), static_cast<int>(kIq3xxsGrid[q[1]]),
                                          static_cast<int>(kIq3xxsGrid[q[2]]), static_cast<int>(kIq3xxsGrid[q[3]]),
                                          static_cast<int>(kIq3xxsGrid[q[4]]), static_cast<int>(kIq3xxsGrid[q[5]]),
                                          static_cast<int>(kIq3xxsGrid[q[6]]), static_cast<int>(kIq3xxsGrid[q[7]]));
      const __m256i m =
          _mm256_setr_epi64x(sign_mask(aux), sign_mask(aux >> 7), sign_mask(aux >> 14), sign_mask(aux >> 21));
      const int s = 2 * static_cast<int>(aux >> 28) + 1;
      f(ib, g, m, scale32(s), s, s);
    }
  }
};

// IQ2_S: 10-bit grid indices (qs | 2 bits of qh), one sign bit per element, 4-bit scales per 16.
struct Iq2S {
  using Block = BlockIQ2_S;
  static constexpr bool kSignedV = false;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    alignas(32) int32_t idx[32];  // g: qs[g] | ((qh[g / 4] >> 2 (g % 4)) & 3) << 8
    const __m256i shifts = _mm256_setr_epi32(8, 6, 4, 2, 8, 6, 4, 2);
    for (int p = 0; p < 4; ++p) {
      const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(bytes_4x2(x.qh[2 * p], x.qh[2 * p + 1]), shifts),
                                          _mm256_set1_epi32(0x300));
      _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 8 * p), _mm256_or_si256(load_idx8(x.qs + 8 * p), hi));
    }
    const __m256i mults = scale_bytes16(x.scales);
    for (int ib = 0; ib < 8; ++ib) {
      const int lo = 2 * (x.scales[ib] & 15) + 1, hi = 2 * (x.scales[ib] >> 4) + 1;
      f(ib, grid4(kIq2sGrid, idx + 4 * ib), bits_to_bytes(x.signs + 4 * ib), mult_of_half(mults, ib), lo, hi);
    }
  }
};

// IQ1_S / IQ1_M: v = 8 * grid + delta8 (grid bytes -1, 0, 1: sign_epi8 of 8 by them is 8 * grid;
// v is odd, never 0).
inline __m256i iq1_values(__m256i grid, __m256i delta) {
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta);
}
inline int64_t delta_bytes(bool negative) { return negative ? -1 : 0x0101010101010101; }

// IQ1_S: per sub-block a u16 qh: 4 x 3 index bits, a 3-bit scale, the delta sign (bit 15). (Its
// indices formed in SIMD, as IQ2_S's are, measured slower in vec_dot: 1.9 -> 2.0 ms at 4096^2.)
struct Iq1S {
  using Block = BlockIQ1_S;
  static constexpr bool kSignedV = true;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    for (int ib = 0; ib < 8; ++ib) {
      const int qh = x.qh[ib];
      const uint8_t* q = x.qs + 4 * ib;
      const __m256i g = _mm256_setr_epi64x(static_cast<int64_t>(kIq1sGrid[q[0] | ((qh << 8) & 0x700)]),
                                           static_cast<int64_t>(kIq1sGrid[q[1] | ((qh << 5) & 0x700)]),
                                           static_cast<int64_t>(kIq1sGrid[q[2] | ((qh << 2) & 0x700)]),
                                           static_cast<int64_t>(kIq1sGrid[q[3] | ((qh >> 1) & 0x700)]));
      const __m256i delta = _mm256_set1_epi64x(delta_bytes((qh & 0x8000) != 0));
      const int s = 2 * ((qh >> 12) & 7) + 1;
      f(ib, iq1_values(g, delta), _mm256_setzero_si256(), scale32(s), s, s);
    }
  }
};

// IQ1_M: per 8 elements a nibble of qh (3 index bits, the delta sign), 3-bit scales per 16
// elements in the low 12 bits of the 4 scale words, the fp16 d in their top nibbles.
struct Iq1M {
  using Block = BlockIQ1_M;
  static constexpr bool kSignedV = true;
  static float d(const Block& x) {
    uint16_t sc[4];
    std::memcpy(sc, x.scales, sizeof sc);
    return half(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                      (sc[3] & 0xf000))) *
           0.125f;
  }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    uint16_t sc[4];
    std::memcpy(sc, x.scales, sizeof sc);
    alignas(32) int32_t idx[32];  // k: qs[k] | (nibble k of qh & 7) << 8
    const __m256i spread = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3),
                  shifts = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
    for (int p = 0; p < 4; ++p) {
      uint32_t h4;
      std::memcpy(&h4, x.qh + 4 * p, 4);
      const __m256i nib = _mm256_srlv_epi32(
          _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(h4))), spread), shifts);
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(idx + 8 * p),
          _mm256_or_si256(load_idx8(x.qs + 8 * p), _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(7)), 8)));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const int h0 = x.qh[2 * ib], h1 = x.qh[2 * ib + 1];
      const __m256i delta = _mm256_setr_epi64x(delta_bytes((h0 & 0x08) != 0), delta_bytes((h0 & 0x80) != 0),
                                               delta_bytes((h1 & 0x08) != 0), delta_bytes((h1 & 0x80) != 0));
      const int w = sc[ib / 2] >> (6 * (ib % 2));  // halves 2 ib, 2 ib + 1: 3 bits each
      const int lo = 2 * (w & 7) + 1, hi = 2 * ((w >> 3) & 7) + 1;
      f(ib, iq1_values(grid4(kIq1sGrid, idx + 4 * ib), delta), _mm256_setzero_si256(), scales_lo_hi(lo, hi), lo, hi);
    }
  }
};

}  // namespace
}  // namespace edgelm::kernels::x86
