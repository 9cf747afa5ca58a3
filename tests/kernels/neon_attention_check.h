// The NEON attention kernel against the scalar oracle (neon_attention_check.cpp), called by the
// standalone NEON self-test (neon_selftest.cpp).
#pragma once

#include "check_counts.h"

namespace edgelm::kernels {

// Prints one line per failure and a summary; AArch64 builds with the NEON kernels only.
CheckCounts check_neon_attention();

}  // namespace edgelm::kernels
