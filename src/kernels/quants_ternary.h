// The ternary GGUF formats TQ1_0 and TQ2_0 (BitNet b1.58-style weights: each element is
// d * {-1, 0, 1}, one fp16 d per 256 elements).
//
// Job: layouts, reference dequantization and quantizer, and a single-token dot product against
// Q8_K activations; the scalar oracle of any SIMD variant.
//  - TQ2_0: 2 bits per element, q + 1 in {0, 1, 2}; byte j of 32-byte chunk c holds elements
//    128 c + 32 s + j in bits 2 s (s = 0..3).
//  - TQ1_0: 5 trits per byte (4 in the last 4 bytes) in base 3, stored scaled so that a
//    multiplication by 3^p and a shift read trit p: byte = ceil(256 v / 243) for the base-3
//    number v = sum q_p 3^(4-p); trit p = ((byte * 3^p mod 256) * 3) >> 8. Elements: bytes 0..31
//    give 32 p + j (p = 0..4), bytes 32..47 give 160 + 16 p + j, the 4 qh bytes 240 + 4 p + j
//    (p = 0..3).
//
// Invariants: dequantization equals gguf-py's numpy reference bit for bit (d * q); the quantizer
// writes the bytes gguf-py's does (d = max |x|, q = round-half-away(x / d)); vec_dot forms each
// block's exact integer dot sum((q - 1) y) and adds d_x * d_y * isum block by block in float (the
// SIMD variants reproduce it bit for bit); n a multiple of 256 (EDGELM_CHECK).
#pragma once

#include <cstdint>

namespace edgelm::kernels {

struct BlockTQ1_0 {
  uint8_t qs[48];  // 5 trits per byte
  uint8_t qh[4];   // 4 trits per byte
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54);

struct BlockTQ2_0 {
  uint8_t qs[64];  // 2 bits per element
  uint16_t d;
};
static_assert(sizeof(BlockTQ2_0) == 66);

void tq1_0_from_float(const float* x, void* y, int64_t n);
void tq1_0_to_float(const void* x, float* y, int64_t n);
float tq1_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_K
void tq2_0_from_float(const float* x, void* y, int64_t n);
void tq2_0_to_float(const void* x, float* y, int64_t n);
float tq2_0_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_K

}  // namespace edgelm::kernels
