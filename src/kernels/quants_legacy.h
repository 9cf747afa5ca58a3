// The 32-element ("legacy") GGUF block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//
// Job: the byte layouts, and scalar reference quantize / dequantize / dot product for them.
// This is the oracle every SIMD variant is tested against, so it is written for obviousness,
// not speed.
//
// Invariants:
//  - Block layouts are those of the GGUF file format (checked by static_assert against the byte
//    sizes in core/dtype.cpp); fp16 fields are stored as raw IEEE half bits.
//  - Dequantization reproduces the reference implementation bit for bit: the float operations
//    are done in the same order (integer offset first, then `q * d`, then `+ m`), and the
//    kernels library is compiled with -ffp-contract=off so no compiler fuses `q * d + m`.
//  - Quantization follows the reference rounding rules exactly (scale from the signed absmax or
//    from max/min, truncating `+ 0.5` rounding, clamping), so it is byte-identical to the
//    reference quantizer.
//  - Every row function takes n elements, n a multiple of 32 (EDGELM_CHECK; callers validate
//    shapes earlier), and raw pointers so that they fit the traits table (quant_traits.h).
//  - vec_dot(n, x, y): x is a row of the weight type, y a row of its activation type (Q8_0 for
//    the "_0" formats, Q8_1 for the "_1" formats). Per block it forms the exact integer dot
//    product of the quants and scales it once, as the SIMD kernels will.
#pragma once

#include <cstdint>

namespace edgelm::kernels {

constexpr int kQK = 32;  // elements per legacy block

// Q4_0: x = d * (q - 8), q in [0, 15].
struct BlockQ4_0 {
  uint16_t d;           // fp16 scale
  uint8_t qs[kQK / 2];  // [QK] 4-bit quants, two per byte: low nibble = element j, high nibble = element j + 16
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: x = d * q + m, q in [0, 15].
struct BlockQ4_1 {
  uint16_t d;           // fp16 scale
  uint16_t m;           // fp16 minimum (the value of q = 0)
  uint8_t qs[kQK / 2];  // [QK] 4-bit quants, two per byte: low nibble = element j, high nibble = element j + 16
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: x = d * (q - 16), q in [0, 31].
struct BlockQ5_0 {
  uint16_t d;           // fp16 scale
  uint8_t qh[4];        // [QK] bit 4 of each quant: bit j of the little-endian u32 = element j
  uint8_t qs[kQK / 2];  // [QK] low 4 bits, two per byte: low nibble = element j, high nibble = element j + 16
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: x = d * q + m, q in [0, 31].
struct BlockQ5_1 {
  uint16_t d;           // fp16 scale
  uint16_t m;           // fp16 minimum
  uint8_t qh[4];        // [QK] bit 4 of each quant: bit j of the little-endian u32 = element j
  uint8_t qs[kQK / 2];  // [QK] low 4 bits, two per byte: low nibble = element j, high nibble = element j + 16
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_0: x = d * q, q in [-127, 127].
struct BlockQ8_0 {
  uint16_t d;      // fp16 scale
  int8_t qs[kQK];  // [QK] quants, element j = qs[j]
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q8_1: x = d * q; the activation type of Q4_1/Q5_1, which carries s = d * sum(q) so that a
// dot product with an offset (`m`) format needs no second pass over the quants.
struct BlockQ8_1 {
  uint16_t d;      // fp16 scale
  uint16_t s;      // fp16 of d * sum(qs)
  int8_t qs[kQK];  // [QK] quants, element j = qs[j]
};
static_assert(sizeof(BlockQ8_1) == 36);

// Rows: src/dst hold n / 32 consecutive blocks.
void q4_0_from_float(const float* x, void* y, int64_t n);
void q4_0_to_float(const void* x, float* y, int64_t n);
float q4_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0

void q4_1_from_float(const float* x, void* y, int64_t n);
void q4_1_to_float(const void* x, float* y, int64_t n);
float q4_1_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_1

void q5_0_from_float(const float* x, void* y, int64_t n);
void q5_0_to_float(const void* x, float* y, int64_t n);
float q5_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0

void q5_1_from_float(const float* x, void* y, int64_t n);
void q5_1_to_float(const void* x, float* y, int64_t n);
float q5_1_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_1

void q8_0_from_float(const float* x, void* y, int64_t n);
void q8_0_to_float(const void* x, float* y, int64_t n);
float q8_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0

void q8_1_from_float(const float* x, void* y, int64_t n);
void q8_1_to_float(const void* x, float* y, int64_t n);

}  // namespace edgelm::kernels
