// The body of the low-bit formats' NEON vec_dot (kernels_neon_lowbit.cpp includes it twice: in
// namespace neon at EDGELM_NEON_DOT_LEVEL 0, baseline ARMv8.0, and in neon::dotprod at level 1,
// under `#pragma GCC target("arch=armv8.2-a+dotprod")`). Nothing else may include it. The only
// difference between the levels is dotq(): 16 int8 products into 4 int32 lanes, by vmull_s8 +
// vpadalq_s16 (level 0) or one SDOT (level 1); both exact, and every caller only sums the lanes
// or scales them all alike, so both levels give the same int32 sums and the same floats.
// See kernels_neon_lowbit.cpp for the methods.
#if !defined(EDGELM_NEON_DOT_LEVEL)
#error "kernels_neon_lowbit_body.h is the body of kernels_neon_lowbit.cpp only"
#endif

namespace {

// [16 x s8] . [16 x s8] accumulated into 4 int32 lanes, exactly.
inline int32x4_t dotq(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if EDGELM_NEON_DOT_LEVEL == 0
  return dot16(acc, a, b);
#else
  return vdotq_s32(acc, a, b);
#endif
}

// The 2-bit field s (0..3) of every byte of v: bits 2s, 2s + 1.
inline uint8x16_t field2(uint8x16_t v, int s) {
  return vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-2 * s))), vdupq_n_u8(3));
}

// Base-3 digit p of TQ1_0's scaled bytes: ((v * 3^p mod 256) * 3) >> 8, minus 1. With
// w = v * 3^p mod 256, floor(3 w / 256) = floor((w + floor(w / 2)) / 128) (3 w / 256 is never
// within 1/256 below an integer when w is odd), which the halving add and a shift by 6 give.
inline int8x16_t trit(uint8x16_t v, uint8x16_t pow3) {
  const uint8x16_t w = vmulq_u8(v, pow3);
  const uint8x16_t t = vshrq_n_u8(vhaddq_u8(w, vshrq_n_u8(w, 1)), 6);
  return vsubq_s8(vreinterpretq_s8_u8(t), vdupq_n_s8(1));
}

// 2^(e - 128), as e8m0_half (quants_fp4.cpp): subnormal for e < 2.
inline float e8m0_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The 32 codebook values of one block of 16 index bytes (low nibbles: elements 0..15, high: 16..31)
// dotted with y[0..31]: exact int32 (|value| <= 127, 32 products).
inline int32x4_t codebook_dot(int32x4_t acc, int8x16_t book, const uint8_t* qs, const int8_t* y) {
  const uint8x16_t v = vld1q_u8(qs);
  acc = dotq(acc, vqtbl1q_s8(book, vandq_u8(v, vdupq_n_u8(0x0f))), vld1q_s8(y));
  return dotq(acc, vqtbl1q_s8(book, vshrq_n_u8(v, 4)), vld1q_s8(y + 16));
}

}  // namespace

// Q2_K: element 128h + 32s + l is field s of qs[32h + l], sub-block (128h + 32s + l) / 16.
// qsum = sum_j (sc_j & 15) dot_j (<= 16 * 3 * 127 * 15 per sub-block), msum = sum_j (sc_j >> 4) bsums_j.
float q2_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockQ2_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n / kQK_K; i < nb; ++i) {
    const uint8x16_t scales = vld1q_u8(x[i].scales);
    uint8_t sc[16];
    vst1q_u8(sc, vandq_u8(scales, vdupq_n_u8(0x0f)));
    const uint8x16_t mins = vshrq_n_u8(scales, 4);
    const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
    const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
    const int16x8_t b0 = vld1q_s16(y[i].bsums), b1 = vld1q_s16(y[i].bsums + 8);
    int32x4_t macc = vmull_s16(vget_low_s16(b0), vget_low_s16(m0));
    macc = vmlal_high_s16(macc, b0, m0);
    macc = vmlal_s16(macc, vget_low_s16(b1), vget_low_s16(m1));
    macc = vmlal_high_s16(macc, b1, m1);
    const int32_t msum = vaddvq_s32(macc);

    int32x4_t qacc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t v0 = vld1q_u8(x[i].qs + 32 * h), v1 = vld1q_u8(x[i].qs + 32 * h + 16);
      for (int s = 0; s < 4; ++s) {
        const int8_t* q8 = y[i].qs + 128 * h + 32 * s;
        const int j = 8 * h + 2 * s;
        const int32x4_t p0 = dotq(vdupq_n_s32(0), vreinterpretq_s8_u8(field2(v0, s)), vld1q_s8(q8));
        const int32x4_t p1 = dotq(vdupq_n_s32(0), vreinterpretq_s8_u8(field2(v1, s)), vld1q_s8(q8 + 16));
        qacc = vmlaq_n_s32(qacc, p0, sc[j]);
        qacc = vmlaq_n_s32(qacc, p1, sc[j + 1]);
      }
    }
    const int32_t qsum = vaddvq_s32(qacc);
    sum += half(x[i].d) * y[i].d * static_cast<float>(qsum) - half(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return sum;
}

// Q3_K: the 2-bit field as Q2_K, plus 4 where bit 4h + s of hmask[l] is set, minus 4: q in [-4, 3].
// qsum = sum_j (sc_j - 32) dot_j (|.| <= 16 * 4 * 127 * 32 per sub-block).
float q3_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockQ3_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const uint8x16_t four = vdupq_n_u8(4);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n / kQK_K; i < nb; ++i) {
    int8_t sc[16];
    q3_k_unpack_scales(x[i].scales, sc);
    const uint8x16_t hm0 = vld1q_u8(x[i].hmask), hm1 = vld1q_u8(x[i].hmask + 16);
    int32x4_t qacc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t v0 = vld1q_u8(x[i].qs + 32 * h), v1 = vld1q_u8(x[i].qs + 32 * h + 16);
      for (int s = 0; s < 4; ++s) {
        const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << (4 * h + s)));
        const uint8x16_t q0 = vorrq_u8(field2(v0, s), vandq_u8(vtstq_u8(hm0, bit), four));
        const uint8x16_t q1 = vorrq_u8(field2(v1, s), vandq_u8(vtstq_u8(hm1, bit), four));
        const int8_t* q8 = y[i].qs + 128 * h + 32 * s;
        const int j = 8 * h + 2 * s;
        const int32x4_t p0 =
            dotq(vdupq_n_s32(0), vsubq_s8(vreinterpretq_s8_u8(q0), vreinterpretq_s8_u8(four)), vld1q_s8(q8));
        const int32x4_t p1 =
            dotq(vdupq_n_s32(0), vsubq_s8(vreinterpretq_s8_u8(q1), vreinterpretq_s8_u8(four)), vld1q_s8(q8 + 16));
        qacc = vmlaq_n_s32(qacc, p0, sc[j] - 32);
        qacc = vmlaq_n_s32(qacc, p1, sc[j + 1] - 32);
      }
    }
    sum += half(x[i].d) * y[i].d * static_cast<float>(vaddvq_s32(qacc));
  }
  return sum;
}

// IQ4_NL: per 32-element block, the codebook values' exact dot, times dx * dy (scalar order).
float iq4_nl_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK4_NL);
  const auto* x = static_cast<const BlockIQ4_NL*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const int8x16_t book = vld1q_s8(kIq4Values);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n / kQK4_NL; i < nb; ++i) {
    const int32_t isum = vaddvq_s32(codebook_dot(vdupq_n_s32(0), book, x[i].qs, y[i].qs));
    sum += half(x[i].d) * half(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

// IQ4_XS: sub-block j is IQ4_NL-like over qs[16 j ..]; qsum = sum_j (ls_j - 32) dot_j
// (|.| <= 8 * 32 * 32 * 127 * 127 < 2^31).
float iq4_xs_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockIQ4_XS*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int8x16_t book = vld1q_s8(kIq4Values);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n / kQK_K; i < nb; ++i) {
    int32x4_t qacc = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
      const int32x4_t p = codebook_dot(vdupq_n_s32(0), book, x[i].qs + 16 * j, y[i].qs + 32 * j);
      qacc = vmlaq_n_s32(qacc, p, iq4_xs_scale(x[i], j) - 32);
    }
    sum += half(x[i].d) * y[i].d * static_cast<float>(vaddvq_s32(qacc));
  }
  return sum;
}

// TQ2_0: element 128c + 32s + l is field s of qs[32c + l], minus 1.
float tq2_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockTQ2_0*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int8x16_t one = vdupq_n_s8(1);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n / kQK_K; i < nb; ++i) {
    int32x4_t acc = vdupq_n_s32(0);  // |.| <= 256 * 127
    for (int c = 0; c < 2; ++c) {
      const uint8x16_t v0 = vld1q_u8(x[i].qs + 32 * c), v1 = vld1q_u8(x[i].qs + 32 * c + 16);
      for (int s = 0; s < 4; ++s) {
        const int8_t* q8 = y[i].qs + 128 * c + 32 * s;
        acc = dotq(acc, vsubq_s8(vreinterpretq_s8_u8(field2(v0, s)), one), vld1q_s8(q8));
        acc = dotq(acc, vsubq_s8(vreinterpretq_s8_u8(field2(v1, s)), one), vld1q_s8(q8 + 16));
      }
    }
    sum += half(x[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

// TQ1_0: digit p of bytes 0..31 is element 32p + j, of bytes 32..47 element 160 + 16p + j, of the
// 4 qh bytes element 240 + 4p + j (p < 4): there one register holds the 4 bytes 4 times over,
// lane 4p + j multiplied by 3^p.
float tq1_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockTQ1_0*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  static constexpr uint8_t kPow3Lanes[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
  const uint8x16_t pow_lanes = vld1q_u8(kPow3Lanes);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n / kQK_K; i < nb; ++i) {
    const uint8x16_t v0 = vld1q_u8(x[i].qs), v1 = vld1q_u8(x[i].qs + 16), v2 = vld1q_u8(x[i].qs + 32);
    const int8_t* q8 = y[i].qs;
    int32x4_t acc = vdupq_n_s32(0);  // |.| <= 256 * 127
    for (int p = 0; p < 5; ++p) {
      const uint8x16_t pw = vdupq_n_u8(kPow3[p]);
      acc = dotq(acc, trit(v0, pw), vld1q_s8(q8 + 32 * p));
      acc = dotq(acc, trit(v1, pw), vld1q_s8(q8 + 32 * p + 16));
      acc = dotq(acc, trit(v2, pw), vld1q_s8(q8 + 160 + 16 * p));
    }
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    acc = dotq(acc, trit(vreinterpretq_u8_u32(vdupq_n_u32(qh)), pow_lanes), vld1q_s8(q8 + 240));
    sum += half(x[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

// MXFP4: the doubled E2M1 values by table (|.| <= 12), times 2^(e - 128) * dy (scalar order).
float mxfp4_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQKMxfp4);
  const auto* x = static_cast<const BlockMXFP4*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const int8x16_t book = vld1q_s8(kFp4Values);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n / kQKMxfp4; i < nb; ++i) {
    const int32_t isum = vaddvq_s32(codebook_dot(vdupq_n_s32(0), book, x[i].qs, y[i].qs));
    sum += e8m0_scale(x[i].e) * half(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}
