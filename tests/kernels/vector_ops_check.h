// The element-wise ops of the forward pass (kernels/ops_vector.h) of one ISA against the scalar
// variant, framework-free so that test_vector_ops.cpp (GoogleTest, x86) and the standalone
// AArch64 self-test (neon_selftest.cpp, under qemu) run the same checks.
// Budgets: add exact; rms_norm within 4 ulp of the output (double sums in another order, the same
// two float roundings per element); swiglu, silu and geglu within 1e-6 relative to
// max(|gate|, 1) |up| (vector exp within a few ulp; geglu's exp form against the tanh form);
// soft_cap within 1e-6 relative; at the edges (zeros, tiny, huge, infinities, NaN) against
// double-precision definitions.
#pragma once

#include "check_counts.h"
#include "kernels/isa.h"

namespace edgelm::kernels {

// Prints one line per failure (at most a few per op) and the worst gated-activation error. The
// ISA must be supported by the running CPU.
CheckCounts check_vector_ops(Isa isa);

}  // namespace edgelm::kernels
