// vit_math.h's loops for the baseline instruction set (every CPU; the oracle of the AVX2 copy).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "vision/vit_math_isa.h"

namespace edgelm::vision::generic {
#include "vision/vit_math_loops.inc"
}  // namespace edgelm::vision::generic
