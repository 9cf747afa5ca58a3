// Pass/fail counts of the framework-free kernel checks (neon_attention_check.cpp,
// vector_ops_check.cpp), which both the GoogleTest binaries and the standalone AArch64 self-test
// (neon_selftest.cpp, run under qemu without GoogleTest) call.
#pragma once

namespace edgelm::kernels {

struct CheckCounts {
  int passed = 0;
  int failed = 0;
};

}  // namespace edgelm::kernels
