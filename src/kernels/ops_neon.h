// Internal to the kernels library: the NEON element-wise ops' table (ops_neon.cpp), handed out by
// vector_ops(Isa::neon) on AArch64 builds with EDGELM_HAVE_NEON_KERNELS.
#pragma once

#include "kernels/ops_vector.h"

namespace edgelm::kernels::neon {

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
extern const VectorOps kNeonVectorOps;  // ops_neon.cpp
#endif

}  // namespace edgelm::kernels::neon
