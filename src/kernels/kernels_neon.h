// Internal to the kernels library: the NEON (AArch64 Advanced SIMD) kernel table.
//
// Advanced SIMD is mandatory in ARMv8-A, so kernels_neon.cpp is compiled with no extra flags
// and only baseline ARMv8.0 instructions (no dotprod / i8mm): unlike the x86 SIMD sources it
// cannot run an instruction the CPU lacks, and the x86 linkage rules (kernels_x86.h) are not
// needed. It is built only for AArch64 targets (src/kernels/CMakeLists.txt defines
// EDGELM_HAVE_NEON_KERNELS there), and isa_kernels(Isa::neon) hands out its table.
#pragma once

#include "kernels/isa.h"

namespace edgelm::kernels::neon {

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
extern const IsaKernels kNeonKernels;  // kernels_neon.cpp
#endif

}  // namespace edgelm::kernels::neon
