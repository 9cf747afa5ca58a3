// The lattice ("grid") IQ formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M.
//
// Job: the byte layouts of these GGUF types, the reference dequantization and a single-token dot
// product against Q8_K activations, so a file holding any of them loads and runs (the unsloth
// "dynamic" quants mix them with K quants). They are the scalar oracle of any SIMD variant.
//
// Each format stores, per group of 8 (IQ2, IQ1) or 4 (IQ3) elements, an index into a published
// grid of magnitude patterns (iq_grids.inc), and signs: 7 bits per 8 elements through the
// even-parity table ksigns (IQ2_XXS, IQ2_XS, IQ3_XXS), one bit per element (IQ2_S, IQ3_S), or
// none but a shared +-1/8 shift (IQ1: x = dl * (grid + delta)).
//
// Invariants:
//  - Layouts are those of the file format (static_assert on the byte sizes); fp16 fields are raw
//    half bits (IQ1_M spreads its fp16 scale over the top nibbles of its 4 scale words).
//  - Dequantization reproduces gguf-py's numpy reference (gguf.quants) bit for bit: the scale
//    first (d * (0.5 + s) * 0.25, d * (1 + 2 s), d * (2 s + 1)), then scale * grid * sign, or
//    dl * (grid + delta) (the kernels library is compiled with -ffp-contract=off).
//  - The integer form (the *_ints functions): a block is d * sc[e / 16] * q[e] with one float d
//    (the fp16 scale times a power of two: 1/8, 1/4 or 1), small odd integer scales sc
//    (2 s + 1 <= 31) and int8 q (grid * sign, |q| <= 62; IQ1: 8 * grid +- 1, |q| <= 9). Every
//    product above is exact or rounds the same real value as the published formula, so
//    to_float, which evaluates (d * sc) * q, is the reference bit for bit.
//  - vec_dot(n, x, y) with y a row of Q8_K: per block the exact integer sum
//    isum = sum_j sc[j] * sum_e q[e] y[e], then sum += d * d_y * isum in float, block by block.
//    The SIMD kernels form the same isum and float expression, so they are bit-identical to it
//    (tests/kernels/test_simd.cpp); it equals the dot of the dequantized rows up to float rounding
//    (tests/kernels/test_quants_grid.cpp).
//  - No quantizer: these formats are written by llama.cpp's quantizer with an importance matrix;
//    edgelm reads them (quant_traits' from_float is null, `edgelm quantize` refuses them).
//  - Every row function takes n elements, n a multiple of 256 (EDGELM_CHECK).
#pragma once

#include <cstdint>

namespace edgelm::kernels {

struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[32];  // per 32 elements, two u32: 4 grid indices (bytes); 4 x 7 sign bits + 4-bit scale
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[32];     // per 8 elements: 9-bit grid index, 7-bit sign index
  uint8_t scales[8];   // 4-bit scale per 16 elements (low nibble first)
};
static_assert(sizeof(BlockIQ2_XS) == 74);

struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[32];      // low 8 bits of the 10-bit grid index of each 8 elements
  uint8_t signs[32];   // one sign bit per element
  uint8_t qh[8];       // top 2 bits of the grid indices, 4 per byte
  uint8_t scales[8];   // 4-bit scale per 16 elements
};
static_assert(sizeof(BlockIQ2_S) == 82);

struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[64];                 // grid index of each 4 elements
  uint8_t scales_and_signs[32];   // per 32 elements a u32: 4 x 7 sign bits + 4-bit scale
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[64];     // low 8 bits of the 9-bit grid index of each 4 elements
  uint8_t qh[8];      // top bits, 8 per byte
  uint8_t signs[32];  // one sign bit per element
  uint8_t scales[4];  // 4-bit scale per 32 elements
};
static_assert(sizeof(BlockIQ3_S) == 110);

struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[32];   // low 8 bits of the 11-bit grid index of each 8 elements
  uint16_t qh[8];   // per 32 elements: 4 x 3 index bits, 3-bit scale (bits 12..14), delta sign (bit 15)
};
static_assert(sizeof(BlockIQ1_S) == 50);

struct BlockIQ1_M {
  uint8_t qs[32];      // low 8 bits of the 11-bit grid index of each 8 elements
  uint8_t qh[16];      // per nibble: 3 index bits and the delta sign of one 8-element group
  uint8_t scales[8];   // 4 u16: 3-bit scales per 16 elements, and the fp16 d in their top nibbles
};
static_assert(sizeof(BlockIQ1_M) == 56);

// Rows of n / 256 blocks; y of vec_dot is a row of Q8_K.
void iq2_xxs_to_float(const void* x, float* y, int64_t n);
void iq2_xs_to_float(const void* x, float* y, int64_t n);
void iq2_s_to_float(const void* x, float* y, int64_t n);
void iq3_xxs_to_float(const void* x, float* y, int64_t n);
void iq3_s_to_float(const void* x, float* y, int64_t n);
void iq1_s_to_float(const void* x, float* y, int64_t n);
void iq1_m_to_float(const void* x, float* y, int64_t n);
float iq2_xxs_vec_dot(int64_t n, const void* x, const void* y);
float iq2_xs_vec_dot(int64_t n, const void* x, const void* y);
float iq2_s_vec_dot(int64_t n, const void* x, const void* y);
float iq3_xxs_vec_dot(int64_t n, const void* x, const void* y);
float iq3_s_vec_dot(int64_t n, const void* x, const void* y);
float iq1_s_vec_dot(int64_t n, const void* x, const void* y);
float iq1_m_vec_dot(int64_t n, const void* x, const void* y);

// The quantizers without an importance matrix (the reference's methods and bytes; with one see
// quants_weighted.h): IQ3_S (quants_iq3s_quantize.cpp, weights x^2), IQ3_XXS
// (quants_iq3xxs_quantize.cpp, weights x^2) and IQ2_S (quants_iq2s_quantize.cpp). IQ2_XXS and
// IQ2_XS, IQ1_S and IQ1_M are written only with an importance matrix (quants_weighted.h), as the
// reference (its tool for IQ1_M) requires.
void iq3_s_from_float(const float* x, void* y, int64_t n);
void iq3_xxs_from_float(const float* x, void* y, int64_t n);
void iq2_s_from_float(const float* x, void* y, int64_t n);

// The integer form of one block (see the invariants), which the SIMD decoders reproduce.
struct GridInts {
  float d;
  int8_t sc[16];    // per 16 elements
  int8_t q[256];
};
using GridIntsFn = void (*)(const void* block, GridInts* out);
void iq2_xxs_ints(const void* block, GridInts* out);
void iq2_xs_ints(const void* block, GridInts* out);
void iq2_s_ints(const void* block, GridInts* out);
void iq3_xxs_ints(const void* block, GridInts* out);
void iq3_s_ints(const void* block, GridInts* out);
void iq1_s_ints(const void* block, GridInts* out);
void iq1_m_ints(const void* block, GridInts* out);

}  // namespace edgelm::kernels
