// Element-wise operations of the forward pass between the matmuls: RMSNorm, SwiGLU's product,
// the residual add; per ISA, chosen at run time like the matmul kernels (isa.h).
//
// Job: the engine's batched forward calls these per token row; the reference forward keeps the
// plain loops of model/ops.h, and the scalar variant here computes exactly those expressions.
//
// Invariants:
//  - add is exact (bit-identical on every ISA). rms_norm sums squares in double on every ISA;
//    the SIMD variant sums in another order, and its per-element x * scale * weight is the
//    scalar's (two roundings, no FMA). swiglu's and silu's SIMD exp is within a few ulp of std::exp.
//  - geglu's SIMD variant evaluates GELU-tanh as x / (1 + e^(-2 sqrt(2/pi) (x + 0.044715 x^3))),
//    which equals the scalar's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); it is within
//    about 1e-6 of x's magnitude (relative 1e-6 where tanh is not near -1; more accurate than
//    the 1 + tanh form where it is).
//  - soft_cap's SIMD tanh is within ~4e-7 relative (a short odd series below |y| = 1/8, the
//    exponential form above).
//  - The NEON variant (ops_neon.cpp) computes the AVX2 variant's formulas 4 lanes at a time.
//  - The AVX2 variant (ops_avx2.cpp) is compiled with per-file -mavx2 -mfma -mf16c under the
//    rules of kernels_x86.h and reached only after the CPU check.
//  - None allocates; out may alias x.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace edgelm::kernels {

struct VectorOps {
  Isa isa;
  // out[i] = x[i] * (1 / sqrt(mean(x^2) + eps)) * weight[i], i < n.
  void (*rms_norm)(float* out, const float* x, const float* weight, int64_t n, float eps);
  // out[i] = gate[i] / (1 + e^-gate[i]) * up[i], i < n; out may alias gate or up.
  void (*swiglu)(float* out, const float* gate, const float* up, int64_t n);
  // x[i] = x[i] / (1 + e^-x[i]), i < n (SiLU alone: Gated DeltaNet's convolution output).
  void (*silu)(float* x, int64_t n);
  // gate[i] = gelu_tanh(gate[i]) * up[i], i < n (Gemma's FFN).
  void (*geglu)(float* gate, const float* up, int64_t n);
  // x[i] = cap * tanh(x[i] / cap), i < n (Gemma's final logit soft-cap).
  void (*soft_cap)(float* x, int64_t n, float cap);
  // x[i] += y[i], i < n.
  void (*add)(float* x, const float* y, int64_t n);
};

// The ops of `isa` (avx2, avxvnni, avx512 and amx share the AVX2 ones; neon has its own,
// ops_neon.cpp), or nullptr when the CPU cannot run them.
const VectorOps* vector_ops(Isa isa);
// Those of the active ISA; never null.
const VectorOps& active_vector_ops();

}  // namespace edgelm::kernels
