// Internal to the NEON kernels: the vec_dot rows of the low-bit formats (Q2_K, Q3_K, IQ4_NL,
// IQ4_XS, TQ1_0, TQ2_0, MXFP4), defined in kernels_neon_lowbit.cpp in two levels: baseline ARMv8.0
// (namespace neon, rows of kRows in kernels_neon.cpp) and dotprod (namespace neon::dotprod, SDOT,
// compiled under a target pragma on its code only, so reached only through the dotprod and i8mm
// tables: with_dotprod_rows() below puts them into those tables' rows). Compiled only for AArch64
// (EDGELM_HAVE_NEON_KERNELS).
//
// Invariant: every one of these formats' scalar vec_dot (quants_k.cpp, quants_iq4.cpp,
// quants_ternary.cpp, quants_fp4.cpp) forms an exact int32 sum per block (or super-block) and
// then adds one float expression per block; the NEON rows form the same integer sums exactly
// (vmull_s8 + vpadalq_s16, or SDOT; 16-entry codebooks by vqtbl1q_s8) and evaluate the same float
// expression in the same order, so they are bit-identical to the scalar rows at both levels.
// Signatures are those of the traits table (quant_traits.h).
#pragma once

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"

namespace edgelm::kernels::neon {

// Baseline ARMv8.0.
float q2_k_vec_dot(int64_t n, const void* x, const void* y);    // y: Q8_K
float q3_k_vec_dot(int64_t n, const void* x, const void* y);    // y: Q8_K
float iq4_nl_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0
float iq4_xs_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_K
float tq1_0_vec_dot(int64_t n, const void* x, const void* y);   // y: Q8_K
float tq2_0_vec_dot(int64_t n, const void* x, const void* y);   // y: Q8_K
float mxfp4_vec_dot(int64_t n, const void* x, const void* y);   // y: Q8_0

// ARMv8.2 + dotprod: only for a CPU with FEAT_DotProd.
namespace dotprod {
float q2_k_vec_dot(int64_t n, const void* x, const void* y);
float q3_k_vec_dot(int64_t n, const void* x, const void* y);
float iq4_nl_vec_dot(int64_t n, const void* x, const void* y);
float iq4_xs_vec_dot(int64_t n, const void* x, const void* y);
float tq1_0_vec_dot(int64_t n, const void* x, const void* y);
float tq2_0_vec_dot(int64_t n, const void* x, const void* y);
float mxfp4_vec_dot(int64_t n, const void* x, const void* y);
}  // namespace dotprod

inline constexpr IsaKernelRow kLowbitDotprodRows[] = {
    {DType::q2_k, dotprod::q2_k_vec_dot, nullptr},     {DType::q3_k, dotprod::q3_k_vec_dot, nullptr},
    {DType::iq4_nl, dotprod::iq4_nl_vec_dot, nullptr}, {DType::iq4_xs, dotprod::iq4_xs_vec_dot, nullptr},
    {DType::tq1_0, dotprod::tq1_0_vec_dot, nullptr},   {DType::tq2_0, dotprod::tq2_0_vec_dot, nullptr},
    {DType::mxfp4, dotprod::mxfp4_vec_dot, nullptr},
};

// `rows` with the vec_dot of every type of kLowbitDotprodRows replaced by its dotprod one (same
// order, same quantizers): the rows of the NEON tables whose level implies dotprod.
template <size_t N>
constexpr std::array<IsaKernelRow, N> with_dotprod_rows(const IsaKernelRow (&rows)[N]) {
  std::array<IsaKernelRow, N> out{};
  for (size_t i = 0; i < N; ++i) {
    out[i] = rows[i];
    for (const IsaKernelRow& d : kLowbitDotprodRows)
      if (d.type == rows[i].type) out[i].vec_dot = d.vec_dot;
  }
  return out;
}

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
