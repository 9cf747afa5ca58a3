// The NEON kernels of the grid IQ formats (IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S, IQ1_S, IQ1_M:
// kernels_neon_iqgrid.cpp and gemm_neon_iqgrid.h) against the scalar oracle (quants_iq_grid.cpp),
// framework-free so that the standalone AArch64 self-test (neon_selftest.cpp, under qemu) runs
// it. Checks and budgets (those of tests/kernels/test_simd.cpp and test_gemm.cpp for these types):
//  - the NEON table has a vec_dot for each type (resolving with the NEON Q8_K quantizer) and
//    every GEMM variant the CPU has a GEMM for each;
//  - vec_dot bit-identical to the scalar one, and within (2 k + 8) u mag, k = 2 nb + 4 (nb
//    super-blocks), mag = sum_i |x_i| |y_i| over the dequantized rows: random bits with moderate
//    scales on 1, 3, 7, 2, 5 blocks, a 2048-element row quantized from Gaussians by the type's
//    importance-weighted quantizer (unit importances), all-zero blocks and rows, extreme fp16
//    scales (65504, the smallest normal) on both sides, constant-fill quant bytes, and an
//    11008-element row (random bits against quantized Gaussian activations, and extreme scales);
//  - GEMM: matmul_with(variant table) against matmul_with(scalar table) for token counts 1..17
//    on odd and even row counts (quantized Gaussians), random bits, zero blocks, extreme scales,
//    large activations, a 4096-column and an 11264-column shape, and direct run() calls on row
//    ranges that start inside a 4-row group (no row outside the range written); budget
//    (2 cols / 32 + 16) u mag. The reference of each case is computed once for all variants.
// The importance-weighted quantizers are slow under qemu, hence few quantized rows.
#pragma once

#include "check_counts.h"
#include "core/dtype.h"

namespace edgelm::kernels {

// Prints one line per failure (at most a few per type) and a summary per type and level. Call
// only on AArch64 with the NEON kernels built (isa_kernels(Isa::neon) non-null).
CheckCounts check_neon_iqgrid();

// True for the types check_neon_iqgrid covers (neon_selftest.cpp's generic vec_dot loop skips them).
bool is_neon_iqgrid_type(DType type);
// How many GEMM rows per variant they add.
inline constexpr int kNeonIqGridGemms = 7;

}  // namespace edgelm::kernels
