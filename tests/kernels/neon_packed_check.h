// The NEON load-time packed GEMMs (src/kernels/gemm_neon_packed.h) against the scalar table,
// framework-free for the standalone AArch64 self-test (neon_selftest.cpp, under qemu).
//
// For every GEMM level the running CPU has (base, dotprod, i8mm) and every packed type (Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, TQ2_0, TQ1_0, IQ4_XS, MXFP4;
// F32, F16, BF16; the grid IQ formats IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S, IQ1_S, IQ1_M, as
// random bits since most have no quantizer without an importance matrix):
//  - the row has the packed members (row group 4, dividing kGemmRowTile), and the packed size is
//    the stored size (Q4_K +2.8%, Q5_K +2.3%, Q3_K and IQ4_XS their scales as bytes, the grid
//    IQ formats exactly; groups of 4 rows, a last short group padded);
//  - matmul_with(level) over pack_matrix_with(level)'s matrix equals matmul_with(scalar), which
//    runs the scalar vec_dot per (row, token), bit for bit (the packed kernels evaluate the
//    scalar float expression in its order), for n_tok 1..17 on row counts that are not
//    multiples of the 4-row group or the 16-row tile, on quantized Gaussians, random bits, zero
//    blocks and extreme fp16 scales; the float types bit-identical to the unpacked matrix's NEON
//    path instead (the per-call GEMM, or the vec_dot row for a tile of 1 token), on column counts
//    with and without 16-column chunks, 4-column quads and a tail;
//  - decode reads the packed layout: with the packed bytes zeroed, matmul of 1 token (and of 5)
//    returns zeros while the stored matrix is unchanged;
//  - run_packed called directly on row ranges [4, 23) and [16, 29) writes those rows only (and
//    equals the scalar vec_dot, float types: the per-call run()).
#pragma once

#include "check_counts.h"

namespace edgelm::kernels {

// Prints one line per failure and one summary line per level and type.
CheckCounts check_neon_packed();

}  // namespace edgelm::kernels
