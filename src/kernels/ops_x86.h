// Internal to the kernels library: the x86 element-wise ops' table (ops_avx2.cpp), under the
// rules of kernels_x86.h (constant-initialized, handed out only after the CPU check).
#pragma once

#include "kernels/ops_vector.h"

namespace edgelm::kernels::x86 {

#if defined(EDGELM_HAVE_X86_KERNELS)
extern const VectorOps kAvx2VectorOps;  // ops_avx2.cpp
#endif

}  // namespace edgelm::kernels::x86
