// The kernels' traits table: one row per element type that edgelm can compute with.
//
// Job: tell callers, for a DType, how to turn a row into floats (to_float), how to produce a
// row from floats (from_float), and how to take the dot product of a row with a row of the
// activation type it pairs with (vec_dot with vec_dot_type). Matmul quantizes its activations
// to vec_dot_type once, then calls vec_dot per weight row.
//
// Invariants:
//  - Every row pointer is a scalar reference kernel (quants_legacy.h, quants_k.h, quants_iq4.h,
//    or the plain float types here). The SIMD variants (isa.h) have the same signatures and are
//    tested against these rows.
//  - n is always a count of elements and a multiple of the type's block size (checked).
//  - Pairings follow the reference implementation: Q4_0/Q5_0/Q8_0/IQ4_NL with Q8_0; Q4_1/Q5_1
//    with Q8_1; K formats and IQ4_XS with Q8_K; F32 with F32; F16 with F16; BF16 with BF16
//    (activations rounded to the weight's 16-bit format, as the reference does). The plain-float dots form
//    each product in double (exact for all three) and accumulate in double.
//  - Q8_1 and Q8_K are activation types: they quantize and dequantize but have no vec_dot of
//    their own (vec_dot is nullptr; vec_dot_type names themselves).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace edgelm::kernels {

struct QuantTraits {
  DType type;
  // [n] stored row -> [n] floats.
  void (*to_float)(const void* src, float* dst, int64_t n);
  // [n] floats -> [n] stored row; nullptr when this build cannot quantize to the type.
  void (*from_float)(const float* src, void* dst, int64_t n);
  // sum_i x[i] * y[i] over n elements; x a row of `type`, y a row of `vec_dot_type`.
  // nullptr for activation-only types.
  float (*vec_dot)(int64_t n, const void* x, const void* y);
  DType vec_dot_type;
};

// The row for `type`, or nullptr when the kernels do not support it at all.
const QuantTraits* quant_traits(DType type);

}  // namespace edgelm::kernels
