// NEON vec_dot for the legacy 32-element formats: Q4_0, Q5_0 and Q8_0 with Q8_0 activations,
// Q4_1 and Q5_1 with Q8_1 activations (rows of the NEON tables in kernels_neon.cpp, whose
// invariants they keep; see kernels_neon_rows.h).
//
// Per block, as the scalar kernels (quants_legacy.cpp): the exact integer dot product of the
// quants as 4 int32 lane sums (the weights unpacked to signed bytes: Q4_0 q - 8, Q5_0 q - 16,
// Q4_1 0..15, Q5_1 0..31), converted to float and multiply-added with dx * dy (one rounding, as
// the scalar product) into float lanes, two blocks per step into two accumulators. The formats
// with a minimum (x = d q + m) add m * s, s being Q8_1's stored fp16 dy * sum(y): (d, m) and
// (d, s) are the first two fp16 fields of their blocks, so one conversion and one multiply per
// block give both dx * dy and m * s, and the m * s terms are summed in a lane of their own.
// The results differ from the scalar ones by float reassociation only.
#include "kernels/kernels_neon_rows.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/quants_legacy.h"

namespace edgelm::kernels::neon {
namespace {

static_assert(offsetof(BlockQ4_1, m) == 2 && offsetof(BlockQ5_1, m) == 2 && offsetof(BlockQ8_1, s) == 2);

// ---- Unpacking ----------------------------------------------------------------------------------

inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// Packed nibbles: the low ones are elements 0..15 of the block, the high ones 16..31.
inline uint8x16_t low_nibbles(uint8x16_t v) { return vandq_u8(v, vdupq_n_u8(0x0f)); }
inline uint8x16_t high_nibbles(uint8x16_t v) { return vshrq_n_u8(v, 4); }

// Q5's fifth bits: bit j of the little-endian qh belongs to element j. Lane j of *lo (elements
// 0..15) and *hi (16..31) is 0xff where the element's bit is set, else 0.
inline void fifth_bits(const uint8_t qh[4], uint8x16_t* lo, uint8x16_t* hi) {
  // Lane j reads byte j / 8 (lo) or 2 + j / 8 (hi) of qh and tests bit j % 8 of it.
  static constexpr uint8_t kLoBytes[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  static constexpr uint8_t kHiBytes[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  static constexpr uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const uint8x16_t b = vreinterpretq_u8_u32(vdupq_n_u32(bits));
  const uint8x16_t mask = vld1q_u8(kBits);
  *lo = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(kLoBytes)), mask);
  *hi = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(kHiBytes)), mask);
}

// ---- Per block: 4 int32 lanes summing to the exact sum_j q_j y_j (yq: the 32 activation quants)

inline int32x4_t dot32(int8x16_t lo, int8x16_t hi, const int8_t* yq) {
  return dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(yq)), hi, vld1q_s8(yq + 16));
}

inline int32x4_t q4_0_block(const BlockQ4_0& x, const int8_t* yq) {  // q - 8 in [-8, 7]
  const uint8x16_t q = vld1q_u8(x.qs);
  const uint8x16_t eight = vdupq_n_u8(8);
  return dot32(s8(vsubq_u8(low_nibbles(q), eight)), s8(vsubq_u8(high_nibbles(q), eight)), yq);
}

inline int32x4_t q4_1_block(const BlockQ4_1& x, const int8_t* yq) {  // q in [0, 15]
  const uint8x16_t q = vld1q_u8(x.qs);
  return dot32(s8(low_nibbles(q)), s8(high_nibbles(q)), yq);
}

inline int32x4_t q5_0_block(const BlockQ5_0& x, const int8_t* yq) {  // q - 16 in [-16, 15]
  uint8x16_t h_lo, h_hi;
  fifth_bits(x.qh, &h_lo, &h_hi);
  const uint8x16_t q = vld1q_u8(x.qs);
  // (nibble | 16 h) - 16 = nibble - 16 (1 - h): subtract 16 where the fifth bit is clear.
  const uint8x16_t sixteen = vdupq_n_u8(16);
  return dot32(s8(vsubq_u8(low_nibbles(q), vbicq_u8(sixteen, h_lo))),
               s8(vsubq_u8(high_nibbles(q), vbicq_u8(sixteen, h_hi))), yq);
}

inline int32x4_t q5_1_block(const BlockQ5_1& x, const int8_t* yq) {  // q in [0, 31]
  uint8x16_t h_lo, h_hi;
  fifth_bits(x.qh, &h_lo, &h_hi);
  const uint8x16_t q = vld1q_u8(x.qs);
  const uint8x16_t sixteen = vdupq_n_u8(16);
  return dot32(s8(vorrq_u8(low_nibbles(q), vandq_u8(h_lo, sixteen))),
               s8(vorrq_u8(high_nibbles(q), vandq_u8(h_hi, sixteen))), yq);
}

inline int32x4_t q8_0_block(const BlockQ8_0& x, const int8_t* yq) {
  // |x| <= 128, |y| <= 127 (any weight bit pattern): products fit int16.
  return dot32(vld1q_s8(x.qs), vld1q_s8(x.qs + 16), yq);
}

// ---- The row ------------------------------------------------------------------------------------

// The first two fp16 fields of a block as floats: (d, m) of Q4_1 / Q5_1, (d, s) of Q8_1.
template <typename B>
inline float32x2_t first_halves(const B& b) {
  uint32_t v;
  std::memcpy(&v, &b, 4);
  return vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u32(vdup_n_u32(v))));
}

// sum over blocks of dx * dy * isum, plus m * s for the formats with a minimum (BY = BlockQ8_1).
template <typename BX, typename BY, int32x4_t (*Block)(const BX&, const int8_t*)>
float legacy_vec_dot(int64_t n, const void* vx, const void* vy) {
  constexpr bool kMin = std::is_same_v<BY, BlockQ8_1>;
  check_blocks(n, kQK);
  const auto* x = static_cast<const BX*>(vx);
  const auto* y = static_cast<const BY*>(vy);
  const int64_t nb = n / kQK;
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0;
  float32x2_t mins = vdup_n_f32(0.0f);  // lane 1: the sum of m * s (lane 0 unused)
  auto block = [&](int64_t i, float32x4_t acc) {
    const float32x4_t isum = vcvtq_f32_s32(Block(x[i], y[i].qs));
    if constexpr (kMin) {
      const float32x2_t p = vmul_f32(first_halves(x[i]), first_halves(y[i]));  // dx * dy, m * s
      mins = vadd_f32(mins, p);
      return vfmaq_lane_f32(acc, isum, p, 0);
    } else {
      return vfmaq_n_f32(acc, isum, half(x[i].d) * half(y[i].d));
    }
  };
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    acc0 = block(i, acc0);
    acc1 = block(i + 1, acc1);
  }
  if (i < nb) acc0 = block(i, acc0);
  const float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
  return kMin ? sum + vget_lane_f32(mins, 1) : sum;
}

}  // namespace

float q4_0_vec_dot(int64_t n, const void* x, const void* y) {
  return legacy_vec_dot<BlockQ4_0, BlockQ8_0, q4_0_block>(n, x, y);
}
float q4_1_vec_dot(int64_t n, const void* x, const void* y) {
  return legacy_vec_dot<BlockQ4_1, BlockQ8_1, q4_1_block>(n, x, y);
}
float q5_0_vec_dot(int64_t n, const void* x, const void* y) {
  return legacy_vec_dot<BlockQ5_0, BlockQ8_0, q5_0_block>(n, x, y);
}
float q5_1_vec_dot(int64_t n, const void* x, const void* y) {
  return legacy_vec_dot<BlockQ5_1, BlockQ8_1, q5_1_block>(n, x, y);
}
float q8_0_vec_dot(int64_t n, const void* x, const void* y) {
  return legacy_vec_dot<BlockQ8_0, BlockQ8_0, q8_0_block>(n, x, y);
}

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
