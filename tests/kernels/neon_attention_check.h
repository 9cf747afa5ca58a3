// The NEON attention kernel against the scalar oracle (neon_attention_check.cpp), called by the
// standalone NEON self-test (neon_selftest.cpp).
#pragma once

namespace edgelm::kernels {

struct CheckCounts {
  int passed = 0;
  int failed = 0;
};

// Prints one line per failure and a summary; AArch64 builds with the NEON kernels only.
CheckCounts check_neon_attention();

}  // namespace edgelm::kernels
