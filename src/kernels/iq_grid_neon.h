// Internal to the NEON kernels: the decoders of the grid IQ formats (quants_iq_grid.h) shared by
// their vec_dot (kernels_neon_iqgrid.cpp) and their multi-token GEMM (gemm_neon_iqgrid.h, a
// piece of gemm_neon.cpp, which includes this header at its top, outside the per-level
// namespaces). Baseline ARMv8.0 Advanced SIMD only, so the dotprod and i8mm GEMM variants may
// inline it.
//
// Format::subs(x, f) calls f(ib, q0, q1, lo, hi) for the 8 sub-blocks ib of 32 elements of block
// x, in order: q0, q1 the signed int8 values of elements 32 ib..32 ib+15 and 32 ib+16..32 ib+31
// (grid magnitude with its sign applied, |q| <= 62; IQ1_S / IQ1_M: 8 * grid + delta, |q| <= 9),
// lo and hi the odd scales 2 s + 1 <= 31 of its two 16-element halves (equal where the format
// has one scale per 32 elements: kScale32). Element e of the block is Format::d(x) * scale * q,
// the scalar *_ints' integer form exactly (tests/kernels/neon_iqgrid_check.cpp compares the
// kernels built on it against the scalar oracle).
//
// The grid entries are read with scalar loads straight into vector lanes; the 7-bit sign fields
// of IQ2_XXS / IQ3_XXS / IQ2_XS get their parity bit (making the count of minus signs even) by
// a byte popcount, and every 32 sign bits of a sub-block become byte masks by one table lookup
// (vqtbl1q_u8) and one bit test (vtstq_u8); where forming an index takes several scalar
// operations (IQ3_S, IQ2_S, IQ1_M) the indices are formed 8 at a time in SIMD and stored first.
// The grids themselves (iq_grids.inc, shared with x86 and the scalar code) are inline constexpr
// arrays in this namespace: one copy per program.
#pragma once

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernels_neon_rows.h"
#include "kernels/quants_iq_grid.h"

namespace edgelm::kernels::neon {
namespace grids {
#include "kernels/iq_grids.inc"
}  // namespace grids

namespace iqgrid {

// Byte j of a sub-block's 4 spread bytes goes to elements 8 j .. 8 j + 7.
alignas(16) inline constexpr uint8_t kSpreadLo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
alignas(16) inline constexpr uint8_t kSpreadHi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
alignas(16) inline constexpr uint8_t kBitOf[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};

// The 4 bytes of `four` spread over 32 elements (byte j to elements 8 j..8 j+7): lo, hi halves.
inline void spread4(uint32_t four, uint8x16_t& lo, uint8x16_t& hi) {
  const uint8x16_t b = vreinterpretq_u8_u32(vdupq_n_u32(four));
  lo = vqtbl1q_u8(b, vld1q_u8(kSpreadLo));
  hi = vqtbl1q_u8(b, vld1q_u8(kSpreadHi));
}

// The 32 sign bits of a sub-block (bit e set: element e negative) as byte masks (0xff negative).
inline void sign_masks(uint32_t bits, uint8x16_t& m0, uint8x16_t& m1) {
  uint8x16_t lo, hi;
  spread4(bits, lo, hi);
  const uint8x16_t bit = vld1q_u8(kBitOf);
  m0 = vtstq_u8(lo, bit);
  m1 = vtstq_u8(hi, bit);
}

// g with the lanes of mask m negated (two's complement: (g ^ m) - m; |g| <= 62, exact).
inline int8x16_t apply_signs(uint8x16_t g, uint8x16_t m) {
  return vreinterpretq_s8_u8(vsubq_u8(veorq_u8(g, m), m));
}

// The magnitudes of a sub-block with its sign bits applied: q0, q1.
inline void signed_sub(uint8x16_t g0, uint8x16_t g1, uint32_t sign_bits, int8x16_t& q0, int8x16_t& q1) {
  uint8x16_t m0, m1;
  sign_masks(sign_bits, m0, m1);
  q0 = apply_signs(g0, m0);
  q1 = apply_signs(g1, m1);
}

// Each byte s (7 sign bits) with bit 7 set to its parity: the 8 signs of a group, the count of
// minus signs even (the ksigns rule).
inline uint8x16_t with_parity(uint8x16_t s7) {
  return vorrq_u8(s7, vshlq_n_u8(vandq_u8(vcntq_u8(s7), vdupq_n_u8(1)), 7));
}

// Per lane, the 4 x 7 sign bits of a u32 (bits 0..27, the IQ2_XXS / IQ3_XXS layout) as 4 sign
// bytes with their parity bits.
inline uint32x4_t xxs_sign_bytes(uint32x4_t aux) {
  const uint32x4_t b = vorrq_u32(
      vorrq_u32(vandq_u32(aux, vdupq_n_u32(0x7f)), vandq_u32(vshlq_n_u32(aux, 1), vdupq_n_u32(0x7f00))),
      vorrq_u32(vandq_u32(vshlq_n_u32(aux, 2), vdupq_n_u32(0x7f0000)),
                vandq_u32(vshlq_n_u32(aux, 3), vdupq_n_u32(0x7f000000))));
  return vreinterpretq_u32_u8(with_parity(vreinterpretq_u8_u32(b)));
}

// Two 8-byte grid entries as one register.
inline uint8x16_t grid2(const uint64_t* grid, uint32_t a, uint32_t b) {
  return vreinterpretq_u8_u64(vcombine_u64(vld1_u64(grid + a), vld1_u64(grid + b)));
}
// Four 4-byte grid entries as one register.
inline uint8x16_t grid4(const uint32_t* grid, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  uint32x4_t v = vld1q_dup_u32(grid + a);
  v = vld1q_lane_u32(grid + b, v, 1);
  v = vld1q_lane_u32(grid + c, v, 2);
  v = vld1q_lane_u32(grid + d, v, 3);
  return vreinterpretq_u8_u32(v);
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// IQ1: q = 8 * grid + delta (grid bytes int8 -1, 0, 1; delta +-1 per lane).
inline int8x16_t iq1_values(uint8x16_t grid, int8x16_t delta) {
  return vaddq_s8(vshlq_n_s8(vreinterpretq_s8_u8(grid), 3), delta);
}

// IQ3_S: per sub-block ib, 8 grid indices qs[8 ib + l] | (bit l of qh[ib]) << 8, one sign bit per
// element (signs[4 ib ..]), one 4-bit scale per sub-block.
struct Iq3S {
  using Block = BlockIQ3_S;
  static constexpr bool kScale32 = true;
  static float d(const Block& x) { return half(x.d); }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    alignas(16) uint16_t idx[64];
    const int16x8_t shifts = {8, 7, 6, 5, 4, 3, 2, 1};
    const uint16x8_t bit8 = vdupq_n_u16(0x100);
    for (int ib = 0; ib < 8; ++ib) {
      const uint16x8_t hi = vandq_u16(vshlq_u16(vdupq_n_u16(x.qh[ib]), shifts), bit8);
      vst1q_u16(idx + 8 * ib, vorrq_u16(vmovl_u8(vld1_u8(x.qs + 8 * ib)), hi));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t* i = idx + 8 * ib;
      const uint8x16_t g0 = grid4(grids::kIq3sGrid, i[0], i[1], i[2], i[3]);
      const uint8x16_t g1 = grid4(grids::kIq3sGrid, i[4], i[5], i[6], i[7]);
      int8x16_t q0, q1;
      signed_sub(g0, g1, load_u32(x.signs + 4 * ib), q0, q1);
      const int s = 1 + 2 * ((x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f);
      f(ib, q0, q1, s, s);
    }
  }
};

// IQ2_XS: per 8 elements a u16, 9-bit grid index and 7-bit sign index; 4-bit scales per 16.
struct Iq2Xs {
  using Block = BlockIQ2_XS;
  static constexpr bool kScale32 = false;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    alignas(16) uint8_t sg[32];  // sign byte of group g, parity included
    for (int k = 0; k < 2; ++k) {
      const uint8x8_t a = vmovn_u16(vshrq_n_u16(vld1q_u16(x.qs + 16 * k), 9));
      const uint8x8_t b = vmovn_u16(vshrq_n_u16(vld1q_u16(x.qs + 16 * k + 8), 9));
      vst1q_u8(sg + 16 * k, with_parity(vcombine_u8(a, b)));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t* q = x.qs + 4 * ib;
      const uint8x16_t g0 = grid2(grids::kIq2xsGrid, q[0] & 511u, q[1] & 511u);
      const uint8x16_t g1 = grid2(grids::kIq2xsGrid, q[2] & 511u, q[3] & 511u);
      int8x16_t q0, q1;
      signed_sub(g0, g1, load_u32(sg + 4 * ib), q0, q1);
      f(ib, q0, q1, 2 * (x.scales[ib] & 15) + 1, 2 * (x.scales[ib] >> 4) + 1);
    }
  }
};

// IQ2_XXS: per sub-block two u32, the 4 grid indices (bytes) and 4 x 7 sign bits + a 4-bit scale.
struct Iq2Xxs {
  using Block = BlockIQ2_XXS;
  static constexpr bool kScale32 = true;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    const auto* q = reinterpret_cast<const uint8_t*>(x.qs);
    alignas(16) uint32_t sg[8], aux[8];
    for (int k = 0; k < 2; ++k) {
      const uint32x4x2_t v = vld2q_u32(reinterpret_cast<const uint32_t*>(q + 32 * k));  // idx, aux pairs
      vst1q_u32(aux + 4 * k, v.val[1]);
      vst1q_u32(sg + 4 * k, xxs_sign_bytes(v.val[1]));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* idx = q + 8 * ib;
      const uint8x16_t g0 = grid2(grids::kIq2xxsGrid, idx[0], idx[1]);
      const uint8x16_t g1 = grid2(grids::kIq2xxsGrid, idx[2], idx[3]);
      int8x16_t q0, q1;
      signed_sub(g0, g1, sg[ib], q0, q1);
      const int s = 2 * static_cast<int>(aux[ib] >> 28) + 1;
      f(ib, q0, q1, s, s);
    }
  }
};

// IQ3_XXS: 8 grid indices (u32 entries of 4 magnitudes) per sub-block, its u32 of 4 x 7 sign
// bits (each covering 8 elements) + a 4-bit scale.
struct Iq3Xxs {
  using Block = BlockIQ3_XXS;
  static constexpr bool kScale32 = true;
  static float d(const Block& x) { return half(x.d) * 0.25f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    alignas(16) uint32_t sg[8], aux[8];
    for (int k = 0; k < 2; ++k) {
      const uint32x4_t a = vreinterpretq_u32_u8(vld1q_u8(x.scales_and_signs + 16 * k));
      vst1q_u32(aux + 4 * k, a);
      vst1q_u32(sg + 4 * k, xxs_sign_bytes(a));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* q = x.qs + 8 * ib;
      const uint8x16_t g0 = grid4(grids::kIq3xxsGrid, q[0], q[1], q[2], q[3]);
      const uint8x16_t g1 = grid4(grids::kIq3xxsGrid, q[4], q[5], q[6], q[7]);
      int8x16_t q0, q1;
      signed_sub(g0, g1, sg[ib], q0, q1);
      const int s = 2 * static_cast<int>(aux[ib] >> 28) + 1;
      f(ib, q0, q1, s, s);
    }
  }
};

// IQ2_S: 10-bit grid indices (qs | 2 bits of qh), one sign bit per element, 4-bit scales per 16.
struct Iq2S {
  using Block = BlockIQ2_S;
  static constexpr bool kScale32 = false;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    alignas(16) uint16_t idx[32];  // g: qs[g] | ((qh[g / 4] >> 2 (g % 4)) & 3) << 8
    const int16x8_t shifts = {8, 6, 4, 2, 8, 6, 4, 2};
    const uint16x8_t top2 = vdupq_n_u16(0x300);
    for (int p = 0; p < 4; ++p) {
      const uint16x8_t h = vcombine_u16(vdup_n_u16(x.qh[2 * p]), vdup_n_u16(x.qh[2 * p + 1]));
      vst1q_u16(idx + 8 * p, vorrq_u16(vmovl_u8(vld1_u8(x.qs + 8 * p)), vandq_u16(vshlq_u16(h, shifts), top2)));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t* i = idx + 4 * ib;
      const uint8x16_t g0 = grid2(grids::kIq2sGrid, i[0], i[1]);
      const uint8x16_t g1 = grid2(grids::kIq2sGrid, i[2], i[3]);
      int8x16_t q0, q1;
      signed_sub(g0, g1, load_u32(x.signs + 4 * ib), q0, q1);
      f(ib, q0, q1, 2 * (x.scales[ib] & 15) + 1, 2 * (x.scales[ib] >> 4) + 1);
    }
  }
};

// IQ1_S: per sub-block a u16 qh: 4 x 3 index bits, a 3-bit scale, the delta sign (bit 15).
struct Iq1S {
  using Block = BlockIQ1_S;
  static constexpr bool kScale32 = true;
  static float d(const Block& x) { return half(x.d) * 0.125f; }
  template <typename F>
  static void subs(const Block& x, F&& f) {
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t qh = x.qh[ib];
      const uint8_t* q = x.qs + 4 * ib;
      const uint8x16_t g0 = grid2(grids::kIq1sGrid, q[0] | ((qh << 8) & 0x700), q[1] | ((qh << 5) & 0x700));
      const uint8x16_t g1 = grid2(grids::kIq1sGrid, q[2] | ((qh << 2) & 0x700), q[3] | ((qh >> 1) & 0x700));
      const int8x16_t delta = vdupq_n_s8((qh & 0x8000) ? -1 : 1);
      const int s = 2 * static_cast<int>((qh >> 12) & 7) + 1;
      f(ib, iq1_values(g0, delta), iq1_values(g1, delta), s, s);
    }
  }
};

// IQ1_M: per 8 elements a nibble of qh (3 index bits, the delta sign), 3-bit scales per 16
// elements in the low 12 bits of the 4 scale words, the fp16 d in their top nibbles.
struct Iq1M {
  using Block = BlockIQ1_M;
  static constexpr bool kScale32 = false;
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
    // Nibble k of qh (k = 0..31, low nibble first) belongs to group k.
    const uint8x16_t h = vld1q_u8(x.qh);
    const uint8x16_t lo = vandq_u8(h, vdupq_n_u8(0x0f)), hi = vshrq_n_u8(h, 4);
    const uint8x16_t nib[2] = {vzip1q_u8(lo, hi), vzip2q_u8(lo, hi)};
    alignas(16) uint16_t idx[32];
    alignas(16) uint8_t delta[32];  // -1 or +1 per group
    for (int k = 0; k < 2; ++k) {
      const uint8x16_t top = vandq_u8(nib[k], vdupq_n_u8(7));
      const uint8x16_t q = vld1q_u8(x.qs + 16 * k);
      vst1q_u16(idx + 16 * k, vorrq_u16(vmovl_u8(vget_low_u8(q)), vshll_n_u8(vget_low_u8(top), 8)));
      vst1q_u16(idx + 16 * k + 8, vorrq_u16(vmovl_high_u8(q), vshll_n_u8(vget_high_u8(top), 8)));
      // +1, or -1 (0xff) where the nibble's bit 3 is set: 1 | mask.
      vst1q_u8(delta + 16 * k, vorrq_u8(vtstq_u8(nib[k], vdupq_n_u8(8)), vdupq_n_u8(1)));
    }
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t* i = idx + 4 * ib;
      uint8x16_t d0, d1;
      spread4(load_u32(delta + 4 * ib), d0, d1);
      const uint8x16_t g0 = grid2(grids::kIq1sGrid, i[0], i[1]);
      const uint8x16_t g1 = grid2(grids::kIq1sGrid, i[2], i[3]);
      const int w = sc[ib / 2] >> (6 * (ib % 2));  // halves 2 ib, 2 ib + 1: 3 bits each
      f(ib, iq1_values(g0, vreinterpretq_s8_u8(d0)), iq1_values(g1, vreinterpretq_s8_u8(d1)), 2 * (w & 7) + 1,
        2 * ((w >> 3) & 7) + 1);
    }
  }
};

}  // namespace iqgrid
}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
