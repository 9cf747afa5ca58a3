// Conversion of stored tensor rows to float32, per element type. This is the scalar
// reference path; quantized block formats join the table in the kernels issue.
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
