// The logit scans (sample/logit_scan.h) and argmax against the plain loops they replace,
// framework-free so that test_logit_scan.cpp (GoogleTest, SSE2 on x86) and the standalone
// AArch64 self-test (tests/kernels/neon_selftest.cpp, NEON under qemu) run the same checks:
// vocabulary-sized and short vectors with the winner, ties, NaN and infinities in the first
// lane, the middle of a 16-float step and the scalar tail; exact equality throughout.
#pragma once

#include "../kernels/check_counts.h"

namespace edgelm::sample {

// Prints one line per failure (at most a few).
kernels::CheckCounts check_logit_scan();

}  // namespace edgelm::sample
