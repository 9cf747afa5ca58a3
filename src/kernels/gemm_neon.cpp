// NEON multi-token GEMM tables (gemm.h) for AArch64: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K, F32, F16, BF16, Q2_K, Q3_K, IQ4_XS, TQ2_0, TQ1_0, IQ4_NL, MXFP4 and the grid IQ formats
// (IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S, IQ1_S, IQ1_M) in three variants, one per instruction
// set, all with load-time packed layouts, from one body (gemm_neon_impl.h with its pieces
// gemm_neon_legacy.h, gemm_neon_k.h, gemm_neon_float.h, gemm_neon_lowbit.h, gemm_neon_iqgrid.h,
// gemm_neon_packed.h, gemm_neon_iqgrid_packed.h; see gemm_neon_impl.h for the method):
//  - kNeonBaseGemms: baseline ARMv8.0 (vmull_s8 + vpadalq_s16), runs on every AArch64 CPU;
//  - kNeonDotprodGemms: SDOT, compiled under `#pragma GCC target("arch=armv8.2-a+dotprod")`;
//  - kNeonI8mmGemms: SMMLA, under `arch=armv8.2-a+i8mm`.
// The pragmas apply to the included body only, so the rest of this file (and the program) stays
// baseline ARMv8.0; the dotprod and i8mm tables are reached only through neon_kernels(level),
// which returns nullptr unless the kernel reports the feature (getauxval: HWCAP_ASIMDDP,
// HWCAP2_I8MM). Every CPU with FEAT_DotProd or FEAT_I8MM implements at least Armv8.2.
#include "kernels/kernels_neon.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>
#include <sys/auxv.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/fp16.h"
#include "kernels/gemm.h"
#include "kernels/iq_grid_neon.h"  // the grid IQ decoders of gemm_neon_iqgrid.h
#include "kernels/quants_fp4.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "kernels/quants_ternary.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif

namespace edgelm::kernels::neon {

namespace base {
#define EDGELM_NEON_GEMM_LEVEL 0
#include "kernels/gemm_neon_impl.h"
#undef EDGELM_NEON_GEMM_LEVEL
}  // namespace base

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
namespace dotprod {
#define EDGELM_NEON_GEMM_LEVEL 1
#include "kernels/gemm_neon_impl.h"
#undef EDGELM_NEON_GEMM_LEVEL
}  // namespace dotprod
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+i8mm")
namespace i8mm {
#define EDGELM_NEON_GEMM_LEVEL 2
#include "kernels/gemm_neon_impl.h"
#undef EDGELM_NEON_GEMM_LEVEL
}  // namespace i8mm
#pragma GCC pop_options

static_assert(kNeonGemmCount == 25);
#define EDGELM_NEON_GEMM_COPY(ns)                                                                                    \
  {                                                                                                                  \
    ns::kGemms[0], ns::kGemms[1], ns::kGemms[2], ns::kGemms[3], ns::kGemms[4], ns::kGemms[5], ns::kGemms[6],         \
        ns::kGemms[7], ns::kGemms[8], ns::kGemms[9], ns::kGemms[10], ns::kGemms[11], ns::kGemms[12], ns::kGemms[13], \
        ns::kGemms[14], ns::kGemms[15], ns::kGemms[16], ns::kGemms[17], ns::kGemms[18], ns::kGemms[19],             \
        ns::kGemms[20], ns::kGemms[21], ns::kGemms[22], ns::kGemms[23], ns::kGemms[24]                               \
  }
constinit const GemmKernel kNeonBaseGemms[kNeonGemmCount] = EDGELM_NEON_GEMM_COPY(base);
constinit const GemmKernel kNeonDotprodGemms[kNeonGemmCount] = EDGELM_NEON_GEMM_COPY(dotprod);
constinit const GemmKernel kNeonI8mmGemms[kNeonGemmCount] = EDGELM_NEON_GEMM_COPY(i8mm);
#undef EDGELM_NEON_GEMM_COPY

bool neon_level_supported(NeonLevel level) {
  switch (level) {
    case NeonLevel::base: return true;  // Advanced SIMD is mandatory on AArch64
    case NeonLevel::dotprod: return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    // The i8mm table also runs the dotprod vec_dot rows (kernels_neon.cpp): every CPU with
    // FEAT_I8MM has FEAT_DotProd (both mandatory from Armv8.6), checked anyway.
    case NeonLevel::i8mm:
      return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0 && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  }
  return false;
}

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
