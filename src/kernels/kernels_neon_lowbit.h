// Internal to the NEON kernels: the vec_dot rows of the low-bit formats (Q2_K, Q3_K, IQ4_NL,
// IQ4_XS, TQ1_0, TQ2_0, MXFP4), defined in kernels_neon_lowbit.cpp and added to the NEON tables
// (kRows in kernels_neon.cpp). Baseline ARMv8.0 Advanced SIMD, compiled only for AArch64
// (EDGELM_HAVE_NEON_KERNELS).
//
// Invariant: every one of these formats' scalar vec_dot (quants_k.cpp, quants_iq4.cpp,
// quants_ternary.cpp, quants_fp4.cpp) forms an exact int32 sum per block (or super-block) and
// then adds one float expression per block; the NEON rows form the same integer sums exactly
// (vmull_s8 + vpadalq_s16, 16-entry codebooks by vqtbl1q_s8) and evaluate the same float
// expression in the same order, so they are bit-identical to the scalar rows.
// Signatures are those of the traits table (quant_traits.h).
#pragma once

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <cstdint>

namespace edgelm::kernels::neon {

float q2_k_vec_dot(int64_t n, const void* x, const void* y);    // y: Q8_K
float q3_k_vec_dot(int64_t n, const void* x, const void* y);    // y: Q8_K
float iq4_nl_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0
float iq4_xs_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_K
float tq1_0_vec_dot(int64_t n, const void* x, const void* y);   // y: Q8_K
float tq2_0_vec_dot(int64_t n, const void* x, const void* y);   // y: Q8_K
float mxfp4_vec_dot(int64_t n, const void* x, const void* y);   // y: Q8_0

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
