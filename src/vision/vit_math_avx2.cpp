// vit_math.h's loops built with -mavx2 (no -mfma: the same per-element operations as the
// baseline copy). Reached only through vit_math.cpp, when kernels::active_isa() is an x86 SIMD
// ISA, so no AVX2 instruction runs on a CPU that lacks it.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "vision/vit_math_isa.h"

namespace edgelm::vision::avx2 {
#include "vision/vit_math_loops.inc"
}  // namespace edgelm::vision::avx2
