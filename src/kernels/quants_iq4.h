// The non-linear 4-bit GGUF formats IQ4_NL and IQ4_XS.
//
// Job: the byte layouts, the 16-entry codebook they share, and the scalar reference dequantize,
// dot product and quantizer of both. This is the oracle every SIMD variant is tested against,
// so it is written for obviousness, not speed.
//
// Invariants:
//  - Block layouts are those of the GGUF file format (static_assert on the byte sizes); fp16
//    fields are raw IEEE half bits. A 4-bit quant is an index into kIq4Values (int8), not a
//    value: x = scale * kIq4Values[q].
//  - Nibble order is the legacy one within every 32 elements: byte j of a 32-element group
//    holds element j (low nibble) and element j + 16 (high nibble).
//  - Dequantization reproduces the reference bit for bit: IQ4_NL `d * value`; IQ4_XS per
//    32-element sub-block `dl = d * (ls - 32)` first, then `dl * value` (the kernels library is
//    compiled with -ffp-contract=off).
//  - Pairings follow the reference: IQ4_NL with Q8_0 (32-element blocks), IQ4_XS with Q8_K.
//    vec_dot forms each block's (sub-block's) exact integer dot product of codebook values and
//    activation quants; IQ4_NL scales it by d_x * d_y per block, IQ4_XS applies the integer
//    sub-block scale and then d_x * d_y once per super-block.
//  - Quantizers write the same layout as the reference quantizer and use the ecosystem's
//    method (per 32 elements, a weighted least-squares choice among candidate scales, each
//    element mapped to its nearest codebook entry, weights x^2), so the files load in any
//    GGUF reader; their bytes need not equal the reference quantizer's.
//  - Every row function takes n elements, n a multiple of the block size (EDGELM_CHECK).
#pragma once

#include <cstdint>

namespace edgelm::kernels {

// The codebook of IQ4_NL and IQ4_XS, ascending (a published constant of the format).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

constexpr int kQK4_NL = 32;  // elements per IQ4_NL block

// IQ4_NL: x = d * kIq4Values[q], 32 elements.
struct BlockIQ4_NL {
  uint16_t d;               // fp16 scale
  uint8_t qs[kQK4_NL / 2];  // [32] 4-bit indices: low nibble = element j, high nibble = element j + 16
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: 256 elements in 8 sub-blocks of 32, x = d * (ls_j - 32) * kIq4Values[q], ls_j a
// 6-bit sub-block scale.
struct BlockIQ4_XS {
  uint16_t d;            // fp16 super-block scale
  uint16_t scales_h;     // bits 2j, 2j + 1: the top 2 bits of ls_j
  uint8_t scales_l[4];   // nibble j % 2 of byte j / 2: the low 4 bits of ls_j
  uint8_t qs[256 / 2];   // [256] 4-bit indices; sub-block j at qs[16 j ..], nibble order as IQ4_NL
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The 6-bit scale ls_j (0..63, biased by 32) of IQ4_XS sub-block j (0..7).
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// Rows: src/dst hold n / 32 (IQ4_NL) or n / 256 (IQ4_XS) consecutive blocks.
void iq4_nl_from_float(const float* x, void* y, int64_t n);
void iq4_nl_to_float(const void* x, float* y, int64_t n);
float iq4_nl_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0

void iq4_xs_from_float(const float* x, void* y, int64_t n);
void iq4_xs_to_float(const void* x, float* y, int64_t n);
float iq4_xs_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_K

}  // namespace edgelm::kernels
