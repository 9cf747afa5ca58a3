// NEON vec_dot for the K formats (256-element super-blocks, Q8_K activations): Q4_K and Q5_K (8
// sub-blocks of 32 with 6-bit scales and mins), Q6_K (16 sub-blocks of 16 with signed 8-bit
// scales). Rows of the NEON tables in kernels_neon.cpp, whose invariants they keep (see
// kernels_neon_rows.h).
//
// Per super-block, as the scalar kernels (quants_k.cpp): the sub-block dot products times their
// integer scales summed exactly in int32 lanes (and for Q4_K / Q5_K the mins times the
// activations' sub-block sums), then the scalar kernel's float expression, in its order,
// super-block after super-block: bit-identical to the scalar result.
#include "kernels/kernels_neon_rows.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <type_traits>

#include "kernels/quants_k.h"

namespace edgelm::kernels::neon {
namespace {

// Q4_K / Q5_K: per 32 quant bytes (c = 0..3), the low nibbles are sub-block 2c (elements
// 64c..64c+31) and the high nibbles sub-block 2c+1; Q5_K adds bit 4 of element 32j + l from bit j
// of qh[l]. qsum = sum_j sc_j * dot_j (sc_j <= 63, q <= 31: |qsum| < 2^26),
// msum = sum_j m_j * (bsums_2j + bsums_2j+1).
template <typename BX>  // BlockQ4_K or BlockQ5_K
float k4_vec_dot(int64_t n, const void* vx, const void* vy) {
  constexpr bool kFifth = std::is_same_v<BX, BlockQ5_K>;
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BX*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n / kQK_K;
  const uint8x16_t low4 = vdupq_n_u8(0x0f), bit4 = vdupq_n_u8(0x10);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) k4_get_scale_min(j, x[i].scales, &sc[j], &mn[j]);
    // Mins: pairs of bsums (|.| <= 32 * 127, int16) times the 6-bit mins.
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(y[i].bsums), vld1q_s16(y[i].bsums + 8));
    const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    int32x4_t macc = vmull_s16(vget_low_s16(pairs), vget_low_s16(m16));
    macc = vmlal_high_s16(macc, pairs, m16);
    const int32_t msum = vaddvq_s32(macc);

    // Q5_K: qh[0..15] and qh[16..31] (l < 16, l >= 16), shifted right by 2c at chunk c so that
    // bit 0 belongs to sub-block 2c and bit 1 to 2c+1.
    uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
    if constexpr (kFifth) {
      h0 = vld1q_u8(x[i].qh);
      h1 = vld1q_u8(x[i].qh + 16);
    }
    int32x4_t qacc = vdupq_n_s32(0);
    const uint8_t* qs = x[i].qs;
    const int8_t* q8 = y[i].qs;
    for (int c = 0; c < 4; ++c, qs += 32, q8 += 64) {
      const uint8x16_t b0 = vld1q_u8(qs), b1 = vld1q_u8(qs + 16);
      uint8x16_t l0 = vandq_u8(b0, low4), l1 = vandq_u8(b1, low4);
      uint8x16_t u0 = vshrq_n_u8(b0, 4), u1 = vshrq_n_u8(b1, 4);
      if constexpr (kFifth) {
        l0 = vorrq_u8(l0, vandq_u8(vshlq_n_u8(h0, 4), bit4));
        l1 = vorrq_u8(l1, vandq_u8(vshlq_n_u8(h1, 4), bit4));
        u0 = vorrq_u8(u0, vandq_u8(vshlq_n_u8(h0, 3), bit4));
        u1 = vorrq_u8(u1, vandq_u8(vshlq_n_u8(h1, 3), bit4));
        h0 = vshrq_n_u8(h0, 2);
        h1 = vshrq_n_u8(h1, 2);
      }
      int32x4_t lo = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(l0), vld1q_s8(q8));
      lo = dot16(lo, vreinterpretq_s8_u8(l1), vld1q_s8(q8 + 16));
      int32x4_t hi = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(u0), vld1q_s8(q8 + 32));
      hi = dot16(hi, vreinterpretq_s8_u8(u1), vld1q_s8(q8 + 48));
      qacc = vmlaq_n_s32(qacc, lo, sc[2 * c]);
      qacc = vmlaq_n_s32(qacc, hi, sc[2 * c + 1]);
    }
    const int32_t qsum = vaddvq_s32(qacc);
    // The scalar kernel's expression, in its order.
    sum += half(x[i].d) * y[i].d * static_cast<float>(qsum) - half(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return sum;
}

}  // namespace

float q4_k_vec_dot(int64_t n, const void* x, const void* y) { return k4_vec_dot<BlockQ4_K>(n, x, y); }
float q5_k_vec_dot(int64_t n, const void* x, const void* y) { return k4_vec_dot<BlockQ5_K>(n, x, y); }

// Q6_K: per half h (128 elements) and k = 0..3, elements 128h + 32k + l (l < 32) take their
// low nibble from ql[64h + 32(k & 1) + l] (low nibble for k < 2, high for k >= 2) and their
// top 2 bits from bits 2k of qh[32h + l]; l < 16 is sub-block 8h + 2k, l >= 16 the next one.
// The signed quant q - 32 in [-32, 31] is dotted with y directly.
float q6_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockQ6_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n / kQK_K;
  const uint8x16_t low4 = vdupq_n_u8(0x0f), two = vdupq_n_u8(0x03);
  const int8x16_t m32 = vdupq_n_s8(32);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32x4_t qacc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      const int8_t* sc = x[i].scales + 8 * h;
      const int8_t* q8 = y[i].qs + 128 * h;
      for (int half_l = 0; half_l < 2; ++half_l) {  // l in [16 half_l, 16 half_l + 16)
        const uint8x16_t l0 = vld1q_u8(ql + 16 * half_l), l1 = vld1q_u8(ql + 32 + 16 * half_l);
        const uint8x16_t hb = vld1q_u8(qh + 16 * half_l);
        const uint8x16_t qk[4] = {
            vorrq_u8(vandq_u8(l0, low4), vshlq_n_u8(vandq_u8(hb, two), 4)),
            vorrq_u8(vandq_u8(l1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), two), 4)),
            vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), two), 4)),
            vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
        };
        for (int k = 0; k < 4; ++k) {
          const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(qk[k]), m32);
          // 16 products of <= 32 * 127; times |scale| <= 128: |qsum| < 2^28.
          const int32x4_t p = dot16(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * k + 16 * half_l));
          qacc = vmlaq_n_s32(qacc, p, sc[2 * k + half_l]);
        }
      }
    }
    sum += half(x[i].d) * y[i].d * static_cast<float>(vaddvq_s32(qacc));
  }
  return sum;
}

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
