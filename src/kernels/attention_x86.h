// Internal to the kernels library: the x86 attention kernels' tables (attention_avx2.cpp,
// attention_avx512.cpp), under
// the rules of kernels_x86.h (constant-initialized, handed out only after the CPU check).
#pragma once

#include "kernels/attention_kernels.h"

namespace edgelm::kernels::x86 {

#if defined(EDGELM_HAVE_X86_KERNELS)
extern const AttentionKernels kAvx2Attention;    // attention_avx2.cpp
extern const AttentionKernels kAvx512Attention;  // attention_avx512.cpp (avx512 and amx)
#endif

}  // namespace edgelm::kernels::x86
