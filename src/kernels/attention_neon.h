// Internal to the kernels library: the NEON attention kernel's table (attention_neon.cpp),
// built for AArch64 only; attention_kernels(Isa::neon) hands it out.
#pragma once

#include "kernels/attention_kernels.h"

namespace edgelm::kernels::neon {

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
extern const AttentionKernels kNeonAttention;
#endif

}  // namespace edgelm::kernels::neon
