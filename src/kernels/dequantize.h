// Conversion of stored tensor rows to float32, per element type: a thin front over the
// to_float column of the traits table (quant_traits.h), so every type with a scalar
// dequantizer (plain floats, legacy and K block formats) is supported here automatically.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace edgelm::kernels {

// True when to_float supports `type`.
bool can_dequantize(DType type);

// Converts n elements (a multiple of the type's block size) starting at src to floats.
// Precondition: can_dequantize(type).
void to_float(DType type, const void* src, float* dst, int64_t n);

}  // namespace edgelm::kernels
