// NEON (AArch64, baseline ARMv8.0 Advanced SIMD) kernels: vec_dot for F32, F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4 and
// the grid IQ formats (IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S, IQ1_S, IQ1_M), and the activation
// quantizers of Q8_0, Q8_1, Q8_K, F16 and BF16. This file has the float formats, the quantizers
// and the tables; the legacy formats' vec_dot are in kernels_neon_legacy.cpp, the K formats' in
// kernels_neon_k.cpp (kernels_neon_rows.h), the low-bit formats' in kernels_neon_lowbit.cpp
// (kernels_neon_lowbit.h: bit-identical to the scalar rows; in a baseline and a dotprod variant),
// the grid IQ formats' in kernels_neon_iqgrid.cpp (kernels_neon_iqgrid.h; bit-identical to the
// scalar ones, baseline only). Other types fall back to the scalar traits rows (kernel_or_scalar
// in isa.h). The same rows (the dotprod and i8mm tables with the low-bit formats' dotprod
// vec_dot) make three tables, one per GEMM variant of
// gemm_neon.cpp (baseline, dotprod, i8mm); neon_kernels(level) hands out a variant's table only
// when the CPU has it.
//
// Invariants (the contract with the scalar oracle, tested by tests/kernels/neon_selftest.cpp
// under qemu and by tests/kernels/test_simd.cpp on an AArch64 host):
//  - Integer parts are exact: int8 x int8 products are widened to int16 (vmull_s8, |p| <= 2^14)
//    and pairwise-added into int32 lanes (vpadalq_s16) before any sum could leave int16.
//  - Legacy formats (32-element blocks) convert each block's 4 int32 lane sums to float and
//    multiply-add them with the block scale dx * dy (rounded once, as in the scalar code) into
//    float lanes; Q4_1 and Q5_1 add m * s (rounded once) in a lane of their own. The result
//    differs from the scalar one by float reassociation only.
//  - K formats form each super-block's integer sums exactly, then evaluate the scalar kernel's
//    float expression in its order, super-block after super-block, so they are bit-identical
//    to it. This relies on the library's -ffp-contract=off (no fused multiply-subtract).
//  - F32, F16 and BF16 keep 16 independent float lanes (4 accumulators of 4), the 16-bit formats
//    converted to f32 exactly (F16 by FCVTL, BF16 by a 16-bit shift) and every product fused
//    (exact for F16 and BF16 products even before the fusion, barring BF16 underflow).
//  - The quantizers repeat the scalar float operations element by element (same divisions,
//    products and rounding rules: vcvtaq = roundf, vcvtnq = lrint in the default rounding
//    mode; F16 by FCVTN, which rounds to nearest even as fp32_to_fp16, with NaN rewritten to the
//    scalar's quiet NaN; BF16 by the scalar's integer rounding), so their bytes are identical
//    to the scalar ones.
#include "kernels/kernels_neon.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/kernels_neon_lowbit.h"
#include "kernels/kernels_neon_iqgrid.h"
#include "kernels/kernels_neon_rows.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels::neon {
namespace {

// ---- Float formats ----------------------------------------------------------------------------

// The element types: 4 consecutive elements as float lanes, and one element as a float.
struct F32Elems {
  using T = float;
  static float32x4_t load4(const float* p) { return vld1q_f32(p); }
  static float load1(const float* p) { return *p; }
};
struct F16Elems {
  using T = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static float load1(const uint16_t* p) { return fp16_to_fp32(*p); }
};
struct BF16Elems {
  using T = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static float load1(const uint16_t* p) { return bf16_to_fp32(*p); }
};

template <typename E>
float float_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, 1);
  const auto* x = static_cast<const typename E::T*>(vx);
  const auto* y = static_cast<const typename E::T*>(vy);
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = vfmaq_f32(a0, E::load4(x + i), E::load4(y + i));
    a1 = vfmaq_f32(a1, E::load4(x + i + 4), E::load4(y + i + 4));
    a2 = vfmaq_f32(a2, E::load4(x + i + 8), E::load4(y + i + 8));
    a3 = vfmaq_f32(a3, E::load4(x + i + 12), E::load4(y + i + 12));
  }
  for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, E::load4(x + i), E::load4(y + i));
  float tail = 0.0f;
  for (; i < n; ++i) tail += E::load1(x + i) * E::load1(y + i);
  return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3))) + tail;
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

// One 32-element block of Q8_0 / Q8_1: d = amax / 127 and the quants roundf(x / d), as the
// scalar quantizers compute them.
struct Q8Block {
  float d;
  int8x16_t lo, hi;  // elements 0..15, 16..31
};

inline Q8Block q8_block(const float* x) {
  float32x4_t v[8];
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int k = 0; k < 8; ++k) {
    v[k] = vld1q_f32(x + 4 * k);
    m = max_keep(m, vabsq_f32(v[k]));
  }
  const float amax = vmaxvq_f32(m);
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int32x4_t q[8];
  for (int k = 0; k < 8; ++k) q[k] = vcvtaq_s32_f32(vmulq_n_f32(v[k], id));  // roundf: ties away from zero
  return {d, narrow_i8(q[0], q[1], q[2], q[3]), narrow_i8(q[4], q[5], q[6], q[7])};
}

// The scale and quants of q8_block(x) into a BlockQ8_0 or BlockQ8_1.
template <typename Block>
inline Q8Block store_q8(const float* x, Block& y) {
  const Q8Block b = q8_block(x);
  y.d = fp32_to_fp16(b.d);
  vst1q_s8(y.qs, b.lo);
  vst1q_s8(y.qs + 16, b.hi);
  return b;
}

void q8_0_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK);
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) store_q8(x, y[i]);
}

void q8_1_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK);
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const Q8Block b = store_q8(x, y[i]);
    // The int8 quants' sum (|.| <= 16 * 128 per half: int16), times the unrounded d.
    const int32_t qsum = vaddlvq_s8(b.lo) + vaddlvq_s8(b.hi);
    y[i].s = fp32_to_fp16(static_cast<float>(qsum) * b.d);
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

// F16: FCVTN rounds to nearest even in the default rounding mode, overflows to infinity and
// makes half subnormals exactly as fp32_to_fp16; only NaN differs (FCVTN keeps payload bits),
// so NaN lanes get the scalar's quiet NaN 0x7e00 with the input's sign.
void f16_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, 1);
  auto* y = static_cast<uint16_t*>(vy);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(v));
    const uint16x4_t sign = vand_u16(vshrn_n_u32(vreinterpretq_u32_f32(v), 16), vdup_n_u16(0x8000));
    const uint16x4_t is_number = vmovn_u32(vceqq_f32(v, v));
    vst1_u16(y + i, vbsl_u16(is_number, h, vorr_u16(sign, vdup_n_u16(0x7e00))));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

// BF16: the scalar integer rounding (bits + 0x7fff + bit 16, top half: to nearest even) and its
// NaN rule (the top half with the quiet bit 0x40 set), lane by lane.
void bf16_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, 1);
  auto* y = static_cast<uint16_t*>(vy);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint32x4_t b = vreinterpretq_u32_f32(vld1q_f32(x + i));
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(b, 16), vdupq_n_u32(1));
    const uint16x4_t rounded = vshrn_n_u32(vaddq_u32(vaddq_u32(b, vdupq_n_u32(0x7fff)), odd), 16);
    const uint16x4_t quiet = vorr_u16(vshrn_n_u32(b, 16), vdup_n_u16(0x40));
    const uint16x4_t is_nan = vmovn_u32(vcgtq_u32(vandq_u32(b, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000)));
    vst1_u16(y + i, vbsl_u16(is_nan, quiet, rounded));
  }
  for (; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

constexpr IsaKernelRow kRows[] = {
    {DType::f32, float_vec_dot<F32Elems>, nullptr},
    {DType::f16, float_vec_dot<F16Elems>, f16_from_float},
    {DType::bf16, float_vec_dot<BF16Elems>, bf16_from_float},
    {DType::q4_0, q4_0_vec_dot, nullptr},
    {DType::q4_1, q4_1_vec_dot, nullptr},
    {DType::q5_0, q5_0_vec_dot, nullptr},
    {DType::q5_1, q5_1_vec_dot, nullptr},
    {DType::q8_0, q8_0_vec_dot, q8_0_from_float},
    {DType::q8_1, nullptr, q8_1_from_float},
    {DType::q4_k, q4_k_vec_dot, nullptr},
    {DType::q5_k, q5_k_vec_dot, nullptr},
    {DType::q6_k, q6_k_vec_dot, nullptr},
    {DType::q8_k, nullptr, q8_k_from_float},
    // kernels_neon_lowbit.cpp
    {DType::q2_k, q2_k_vec_dot, nullptr},
    {DType::q3_k, q3_k_vec_dot, nullptr},
    {DType::iq4_nl, iq4_nl_vec_dot, nullptr},
    {DType::iq4_xs, iq4_xs_vec_dot, nullptr},
    {DType::tq1_0, tq1_0_vec_dot, nullptr},
    {DType::tq2_0, tq2_0_vec_dot, nullptr},
    {DType::mxfp4, mxfp4_vec_dot, nullptr},
    // kernels_neon_iqgrid.cpp
    {DType::iq3_s, iq3_s_vec_dot, nullptr},
    {DType::iq2_xs, iq2_xs_vec_dot, nullptr},
    {DType::iq2_xxs, iq2_xxs_vec_dot, nullptr},
    {DType::iq3_xxs, iq3_xxs_vec_dot, nullptr},
    {DType::iq2_s, iq2_s_vec_dot, nullptr},
    {DType::iq1_s, iq1_s_vec_dot, nullptr},
    {DType::iq1_m, iq1_m_vec_dot, nullptr},
};

// The dotprod and i8mm levels (every i8mm CPU has dotprod: neon_level_supported) take the
// low-bit formats' SDOT vec_dot (kernels_neon_lowbit.h).
constexpr auto kDotprodRows = with_dotprod_rows(kRows);
constinit const IsaKernels kNeonDotprodKernels{Isa::neon, kDotprodRows, kNeonDotprodGemms};
constinit const IsaKernels kNeonI8mmKernels{Isa::neon, kDotprodRows, kNeonI8mmGemms};

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
