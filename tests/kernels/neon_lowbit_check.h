// The NEON kernels of the low-bit formats (Q2_K, Q3_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4:
// kernels_neon_lowbit.cpp, gemm_neon_lowbit.h) against the scalar oracle, part of the standalone
// NEON self-test (neon_selftest.cpp; no GoogleTest, runs under qemu-user).
//  - vec_dot, in the table of every level the CPU has (base: the baseline rows; dotprod, i8mm:
//    the SDOT rows): bit-identical to the scalar vec_dot (kernels_neon_lowbit.h says why) on random-bit
//    rows (moderate and extreme scale fields), quantized Gaussians, all-zero blocks and rows,
//    1, 3 and 7 blocks and a long (11008-element) row.
//  - GEMM, every variant the CPU has (base, dotprod, i8mm; the others are counted by
//    neon_selftest's level check): matmul_with(variant) against matmul_with(scalar table) on
//    token counts 1..17, odd row counts, random bits, zero blocks, extreme scales; budget as
//    tests/kernels/test_gemm.cpp: (2 nb + 16) u mag, nb the sub-blocks of a row (16 elements for
//    Q2_K and Q3_K, 32 for the others), mag = sum_i (|w_i| + 2 |min_i|) |a_i| (Q2_K's mins); and
//    run() called directly on row ranges that start inside a 4-row group (only those rows written).
#pragma once

#include "check_counts.h"

namespace edgelm::kernels {

// Prints one line per failure and a summary per type. Needs an AArch64 build with the NEON kernels.
CheckCounts check_neon_lowbit();

}  // namespace edgelm::kernels
