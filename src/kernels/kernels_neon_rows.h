// Internal to the NEON kernels: the vec_dot rows of the NEON tables that live outside
// kernels_neon.cpp, and the helpers the NEON vec_dot files share. One file per family of formats,
// all baseline ARMv8.0 Advanced SIMD, compiled with no extra flags and only for AArch64
// (EDGELM_HAVE_NEON_KERNELS); kernels_neon.cpp has the invariants they keep and the tables:
//  - kernels_neon.cpp: F32, F16, BF16 vec_dot, the activation quantizers, the tables;
//  - kernels_neon_legacy.cpp: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 vec_dot (32-element blocks);
//  - kernels_neon_k.cpp: Q4_K, Q5_K, Q6_K vec_dot (256-element super-blocks).
// Signatures are those of the traits table (quant_traits.h): y is a row of the type's
// vec_dot_type (Q8_0, Q8_1 or Q8_K).
#pragma once

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

#include "core/check.h"

namespace edgelm::kernels::neon {

// The scalar kernels' row-length check, with the same message.
inline void check_blocks(int64_t n, int64_t block) {
  EDGELM_CHECK(n >= 0 && n % block == 0, "row length ", n, " is not a multiple of the block size ", block);
}

// fp16 bits -> float; exact (the hardware conversion, same value as fp16_to_fp32).
inline float half(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

// [16 x s8] . [16 x s8] accumulated into 4 int32 lanes: products widened to int16 (|p| <= 2^14),
// pairs of them added into int32 lanes.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_high_s8(a, b));
}

// kernels_neon_legacy.cpp
float q4_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0
float q4_1_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_1
float q5_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0
float q5_1_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_1
float q8_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0

// kernels_neon_k.cpp (y: Q8_K)
float q4_k_vec_dot(int64_t n, const void* x, const void* y);
float q5_k_vec_dot(int64_t n, const void* x, const void* y);
float q6_k_vec_dot(int64_t n, const void* x, const void* y);

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
