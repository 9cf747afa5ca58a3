// vit_math.h's loops built with -mavx512f -mavx512dq and 512-bit vectors preferred (and
// -ffp-contract=off: AVX-512F brings FMA, which must fuse nothing here), so the same per-element
// operations as the baseline copy and the same bits; the reductions keep
// their explicit 16 lanes. Reached only through vit_math.cpp, when kernels::active_isa() is
// avx512 or amx, so no AVX-512 instruction runs on a CPU that lacks it. Twice the elements per
// instruction of the AVX2 copy: softmax over the attention scores is the encoder's largest
// element-wise cost.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "vision/vit_math_isa.h"

namespace edgelm::vision::avx512 {
#include "vision/vit_math_loops.inc"
}  // namespace edgelm::vision::avx512
