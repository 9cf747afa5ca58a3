// NEON (AArch64, baseline ARMv8.0 Advanced SIMD) kernels: vec_dot for F32, Q4_0, Q8_0, Q4_K and
// Q6_K, and the activation quantizers of Q8_0 and Q8_K. Other types fall back to the scalar
// traits rows (kernel_or_scalar in isa.h). The same rows make three tables, one per GEMM
// variant of gemm_neon.cpp (baseline, dotprod, i8mm); neon_kernels(level) hands out a variant's
// table only when the CPU has it.
//
// Invariants (the contract with the scalar oracle, tested by tests/kernels/neon_selftest.cpp
// under qemu and by tests/kernels/test_simd.cpp on an AArch64 host):
//  - Integer parts are exact: int8 x int8 products are widened to int16 (vmull_s8, |p| <= 2^14)
//    and pairwise-added into int32 lanes (vpadalq_s16) before any sum could leave int16.
//  - Legacy formats (32-element blocks) convert each block's 4 int32 lane sums to float and
//    multiply-add them with the block scale dx * dy (rounded once, as in the scalar code) into
//    float lanes: the result differs from the scalar one by float reassociation only.
//  - K formats form each super-block's integer sums exactly, then evaluate the scalar kernel's
//    float expression in its order, super-block after super-block, so they are bit-identical
//    to it. This relies on the library's -ffp-contract=off (no fused multiply-subtract).
//  - F32 keeps 16 independent float lanes (4 accumulators of 4).
//  - The quantizers repeat the scalar float operations element by element (same divisions,
//    products and rounding rules: vcvtaq = roundf, vcvtnq = lrint in the default rounding
//    mode), so their bytes are identical to the scalar ones.
#include "kernels/kernels_neon.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "kernels/fp16.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels::neon {
namespace {

// ---- Helpers ----------------------------------------------------------------------------------

inline void check_blocks(int64_t n, int64_t block) {
  EDGELM_CHECK(n >= 0 && n % block == 0, "row length ", n, " is not a multiple of the block size ", block);
}

// fp16 bits -> float; exact (the hardware conversion, same value as fp16_to_fp32).
inline float half(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

// [16 x s8] . [16 x s8] accumulated into 4 int32 lanes.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_high_s8(a, b));
}

// ---- F32 --------------------------------------------------------------------------------------

float f32_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, 1);
  const auto* x = static_cast<const float*>(vx);
  const auto* y = static_cast<const float*>(vy);
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
    a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
    a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
  }
  for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
  float tail = 0.0f;
  for (; i < n; ++i) tail += x[i] * y[i];
  return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3))) + tail;
}

// ---- Legacy 32-element formats ----------------------------------------------------------------

// Per block: the integer products as 4 int32 lane sums (summing to the block's exact isum).
inline int32x4_t q4_0_block(const BlockQ4_0& x, const BlockQ8_0& y) {
  const uint8x16_t q = vld1q_u8(x.qs);
  const int8x16_t eight = vdupq_n_s8(8);
  // Low nibbles are elements 0..15, high nibbles 16..31; q - 8 in [-8, 7].
  const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), eight);
  const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  const int32x4_t acc = dot16(vdupq_n_s32(0), lo, vld1q_s8(y.qs));
  return dot16(acc, hi, vld1q_s8(y.qs + 16));
}

inline int32x4_t q8_0_block(const BlockQ8_0& x, const BlockQ8_0& y) {
  // |x| <= 128, |y| <= 127 (any weight bit pattern): products fit int16.
  const int32x4_t acc = dot16(vdupq_n_s32(0), vld1q_s8(x.qs), vld1q_s8(y.qs));
  return dot16(acc, vld1q_s8(x.qs + 16), vld1q_s8(y.qs + 16));
}

// sum over blocks of dx * dy * isum, two blocks per step into two accumulators.
template <typename BX, int32x4_t (*Block)(const BX&, const BlockQ8_0&)>
float legacy_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK);
  const auto* x = static_cast<const BX*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const int64_t nb = n / kQK;
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const float s0 = half(x[i].d) * half(y[i].d);
    const float s1 = half(x[i + 1].d) * half(y[i + 1].d);
    acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(Block(x[i], y[i])), s0);
    acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(Block(x[i + 1], y[i + 1])), s1);
  }
  if (i < nb) acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(Block(x[i], y[i])), half(x[i].d) * half(y[i].d));
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

// ---- K formats --------------------------------------------------------------------------------

// Q4_K: per 32 quant bytes (c = 0..3), the low nibbles are sub-block 2c (elements 64c..64c+31)
// and the high nibbles sub-block 2c+1. qsum = sum_j sc_j * dot_j (sc_j <= 63: |qsum| < 2^24),
// msum = sum_j m_j * (bsums_2j + bsums_2j+1).
float q4_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockQ4_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n / kQK_K;
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
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

    int32x4_t qacc = vdupq_n_s32(0);
    const uint8_t* qs = x[i].qs;
    const int8_t* q8 = y[i].qs;
    for (int c = 0; c < 4; ++c, qs += 32, q8 += 64) {
      const uint8x16_t b0 = vld1q_u8(qs), b1 = vld1q_u8(qs + 16);
      int32x4_t lo = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(b0, low4)), vld1q_s8(q8));
      lo = dot16(lo, vreinterpretq_s8_u8(vandq_u8(b1, low4)), vld1q_s8(q8 + 16));
      int32x4_t hi = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vld1q_s8(q8 + 32));
      hi = dot16(hi, vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), vld1q_s8(q8 + 48));
      qacc = vmlaq_n_s32(qacc, lo, sc[2 * c]);
      qacc = vmlaq_n_s32(qacc, hi, sc[2 * c + 1]);
    }
    const int32_t qsum = vaddvq_s32(qacc);
    // The scalar kernel's expression, in its order.
    sum += half(x[i].d) * y[i].d * static_cast<float>(qsum) - half(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return sum;
}

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

// ---- Activation quantizers --------------------------------------------------------------------

// Lane-wise std::max(m, a) (a is |x| >= 0 or NaN): keeps m unless m < a, so NaN never enters,
// as in the scalar loops; the lane maxima are then ordinary non-NaN floats.
inline float32x4_t max_keep(float32x4_t m, float32x4_t a) { return vbslq_f32(vcltq_f32(m, a), a, m); }

// 4 x [4 x i32] -> [16 x i8], truncating as the scalar float -> int8 conversion does for the
// in-range values every finite block produces.
inline int8x16_t narrow_i8(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
  const int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
  return vcombine_s8(vmovn_s16(ab), vmovn_s16(cd));
}

void q8_0_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK);
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(x + 4 * k);
      m = max_keep(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int32x4_t q[8];
    for (int k = 0; k < 8; ++k) q[k] = vcvtaq_s32_f32(vmulq_n_f32(v[k], id));  // roundf: ties away from zero
    vst1q_s8(y[i].qs, narrow_i8(q[0], q[1], q[2], q[3]));
    vst1q_s8(y[i].qs + 16, narrow_i8(q[4], q[5], q[6], q[7]));
  }
}

void q8_k_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK_K);
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < kQK_K / 4; ++k) m = max_keep(m, vabsq_f32(vld1q_f32(x + 4 * k)));
    const float amax = vmaxvq_f32(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The scalar quantizer keeps the first element of largest magnitude (strict >), whose sign
    // sets the sign of d.
    int first = 0;
    while (!(x[first] == amax || x[first] == -amax)) ++first;
    const float iscale = -127.0f / x[first];
    const int32x4_t max127 = vdupq_n_s32(127);
    for (int g = 0; g < kQK_K / 16; ++g) {
      int32x4_t q[4];
      for (int k = 0; k < 4; ++k)  // lrint in the default rounding mode: to nearest even
        q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 16 * g + 4 * k), iscale)), max127);
      vst1q_s8(y[i].qs + 16 * g, narrow_i8(q[0], q[1], q[2], q[3]));
      y[i].bsums[g] = static_cast<int16_t>(vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3]))));
    }
    y[i].d = 1.0f / iscale;
  }
}

constexpr IsaKernelRow kRows[] = {
    {DType::f32, f32_vec_dot, nullptr},
    {DType::q4_0, legacy_vec_dot<BlockQ4_0, q4_0_block>, nullptr},
    {DType::q8_0, legacy_vec_dot<BlockQ8_0, q8_0_block>, q8_0_from_float},
    {DType::q4_k, q4_k_vec_dot, nullptr},
    {DType::q6_k, q6_k_vec_dot, nullptr},
    {DType::q8_k, nullptr, q8_k_from_float},
};

constinit const IsaKernels kNeonDotprodKernels{Isa::neon, kRows, kNeonDotprodGemms};
constinit const IsaKernels kNeonI8mmKernels{Isa::neon, kRows, kNeonI8mmGemms};

}  // namespace

constinit const IsaKernels kNeonKernels{Isa::neon, kRows, kNeonBaseGemms};

const IsaKernels* neon_kernels(NeonLevel level) {
  if (!neon_level_supported(level)) return nullptr;
  switch (level) {
    case NeonLevel::base: return &kNeonKernels;
    case NeonLevel::dotprod: return &kNeonDotprodKernels;
    case NeonLevel::i8mm: return &kNeonI8mmKernels;
  }
  return nullptr;
}

const IsaKernels& best_neon_kernels() {
  static const IsaKernels* const best = [] {
    for (NeonLevel level : {NeonLevel::i8mm, NeonLevel::dotprod})
      if (const IsaKernels* k = neon_kernels(level)) return k;
    return &kNeonKernels;
  }();
  return *best;
}

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
