// Internal to the kernels library: the NEON (AArch64 Advanced SIMD) kernel table.
//
// Advanced SIMD is mandatory in ARMv8-A, so kernels_neon.cpp is compiled with no extra flags
// and only baseline ARMv8.0 instructions (no dotprod / i8mm): unlike the x86 SIMD sources it
// cannot run an instruction the CPU lacks, and the x86 linkage rules (kernels_x86.h) are not
// needed. It is built only for AArch64 targets (src/kernels/CMakeLists.txt defines
// EDGELM_HAVE_NEON_KERNELS there), with kernels_neon_legacy.cpp and kernels_neon_k.cpp (the
// legacy and K formats' vec_dot rows, kernels_neon_rows.h) and kernels_neon_lowbit.cpp (the
// low-bit formats', kernels_neon_lowbit.h), and isa_kernels(Isa::neon) hands out
// its table.
//
// The vec_dot rows (single-token decode of matrices not packed at load) and the multi-token
// GEMMs (gemm_neon.cpp) cover the same weight types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4 (these with load-time
// packed layouts, which every matmul of a packed matrix takes, decode included; the low-bit ones
// from Q2_K on: kernels_neon_lowbit.cpp, gemm_neon_lowbit.h) and the grid IQ formats (IQ3_S, IQ2_XS, IQ2_XXS,
// IQ3_XXS, IQ2_S, IQ1_S, IQ1_M: kernels_neon_iqgrid.cpp, gemm_neon_iqgrid.h); every activation
// type they use (Q8_0, Q8_1, Q8_K, F16, BF16) has a NEON quantizer. Other types run the scalar
// vec_dot. The GEMMs come in three
// variants: baseline, dotprod (SDOT) and i8mm (SMMLA). Those two are compiled for their
// extensions by pragmas on their code only, and are reached only through neon_kernels(level),
// which checks the CPU first. There are three tables, one GEMM variant each, with the same
// vec_dot rows but for the low-bit formats, whose dotprod rows the dotprod and i8mm tables have; isa_kernels(Isa::neon)
// is best_neon_kernels(), the most capable level this CPU has.
#pragma once

#include "kernels/isa.h"

namespace edgelm::kernels::neon {

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
enum class NeonLevel { base, dotprod, i8mm };

// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F32, F16, BF16, Q2_K, Q3_K, IQ4_XS, TQ2_0,
// TQ1_0, IQ4_NL, MXFP4, IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S, IQ1_S, IQ1_M in each variant
// (gemm_neon.cpp).
inline constexpr int kNeonGemmCount = 25;
extern const GemmKernel kNeonBaseGemms[kNeonGemmCount];
extern const GemmKernel kNeonDotprodGemms[kNeonGemmCount];
extern const GemmKernel kNeonI8mmGemms[kNeonGemmCount];

// True when the CPU (per the kernel's hwcaps) can run the GEMMs of `level` (and the dotprod
// vec_dot rows of the dotprod and i8mm tables: i8mm requires dotprod too); base always.
bool neon_level_supported(NeonLevel level);

extern const IsaKernels kNeonKernels;  // baseline GEMMs; kernels_neon.cpp
// The table whose GEMMs are those of `level`, or nullptr when the CPU lacks that level.
const IsaKernels* neon_kernels(NeonLevel level);
// The table of the most capable supported level (decided once).
const IsaKernels& best_neon_kernels();
#endif

}  // namespace edgelm::kernels::neon
