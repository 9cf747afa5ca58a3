// Importance-weighted quantizers: the same formats as the plain from_float quantizers, with the
// error of every element weighted by an importance (the mean squared activation that column of
// the weight meets, from an importance matrix; model/imatrix.h).
//
// Job: for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M, quantize one row given `qw`, the row's [n] importances (the same for every row of a matrix).
//
// Invariants:
//  - The methods are the ecosystem's published imatrix quantizers (llama.cpp's, in the revision
//    ik_llama.cpp ships), run in float/double with the same operation order, so that with the
//    same weights and importances the bytes equal llama-quantize's (tests/kernels check a golden
//    recorded from it). Per element the weight of the error is qw[i] * sqrt(sigma2 + x[i]^2),
//    sigma2 a multiple of the mean square of the super-block (or of the row for the 32-element
//    formats); Q6_K uses qw[i] alone.
//  - The sub-block scales are fitted by weighted least squares over candidate scales with a
//    greedy one-quant-at-a-time refinement; the super-block scales of Q2_K/Q4_K/Q5_K (and the
//    signed ones of Q3_K) are fitted the same way, weighting each sub-block by its summed weight.
//  - Every row function takes n elements, n a multiple of the block size (EDGELM_CHECK);
//    qw is [n], finite and >= 0.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace edgelm::kernels {

using WeightedQuantizer = void (*)(const float* x, void* y, int64_t n, const float* qw);

void q2_k_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q3_k_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q4_k_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q5_k_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q6_k_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q4_0_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q4_1_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q5_0_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void q5_1_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void iq4_nl_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void iq4_xs_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);
void iq3_s_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);   // quants_iq3s_quantize.cpp
void iq2_xs_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);  // quants_iq2xs_quantize.cpp
void iq2_xxs_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);  // quants_iq2xxs_quantize.cpp
void iq2_s_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);    // quants_iq2s_quantize.cpp
void iq3_xxs_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);  // quants_iq3xxs_quantize.cpp
void iq1_s_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);    // quants_iq1_quantize.cpp
void iq1_m_from_float_weighted(const float* x, void* y, int64_t n, const float* qw);    // quants_iq1_quantize.cpp

// The positive-scale fit the K-quants use for their sub-block scales and IQ2_XXS for its first
// scale (the reference's make_qp_quants): x >= 0 ~= scale * L, L in [0, nmax], weights w; writes
// L and returns the scale (0 when max x < 1e-16).
float fit_positive(int n, int nmax, const float* x, uint8_t* L, const float* w);

// The weighted quantizer of `type`, or nullptr when the type has none (F16, Q8_0, ... ignore an
// importance matrix, as the reference quantizer does).
WeightedQuantizer weighted_quantizer(DType type);

}  // namespace edgelm::kernels
