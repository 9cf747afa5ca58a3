// The 4-bit float GGUF formats MXFP4 (gpt-oss; OCP Microscaling) and NVFP4.
//
// Job: layouts, reference dequantization and quantizer, and a single-token dot product against
// Q8_0 activations; the scalar oracle of any SIMD variant. Both store E2M1 elements (values
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) as 4-bit indices into kFp4Values, which holds
// them doubled as integers, with a scale that halves them back:
//  - MXFP4: 32 elements, one E8M0 exponent e: x = kFp4Values[q] * 2^(e - 128) (the "half" scale);
//    byte j holds element j (low nibble) and j + 16 (high nibble).
//  - NVFP4: 64 elements in 4 sub-blocks of 16, each with an unsigned E4M3 scale s (bit 7 ignored;
//    0 and 0x7f read as 0): x = kFp4Values[q] * s / 2; byte j of sub-block k holds element j
//    (low nibble) and j + 8 (high nibble) of the sub-block.
//
// Invariants: dequantization equals gguf-py's numpy reference bit for bit (every product is
// exact); the quantizers write the bytes gguf-py's do (MXFP4: e = floor(log2 max|x|) - 2 + 127,
// NVFP4: s = E4M3(max|x| / 6) rounded as the reference does; each element the nearest value,
// the lower index on a tie); MXFP4's vec_dot forms each block's exact integer dot of the doubled
// values and adds e8m0_half(e) * d_y * isum block by block, NVFP4's dots the decoded block (both
// equal the dot of the dequantized rows up to float rounding); n a multiple of the block
// (EDGELM_CHECK).
#pragma once

#include <cstdint>

namespace edgelm::kernels {

inline constexpr int8_t kFp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

constexpr int kQKMxfp4 = 32;
constexpr int kQKNvfp4 = 64;

struct BlockMXFP4 {
  uint8_t e;       // E8M0 exponent
  uint8_t qs[16];  // 4-bit indices
};
static_assert(sizeof(BlockMXFP4) == 17);

struct BlockNVFP4 {
  uint8_t d[4];    // UE4M3 scale per 16 elements
  uint8_t qs[32];  // 4-bit indices, 8 bytes per sub-block
};
static_assert(sizeof(BlockNVFP4) == 36);

// 2^(e - 128): the E8M0 scale of doubled values (e = 0, 1 give the subnormals 2^-128, 2^-127).
float e8m0_half(uint8_t e);
// The UE4M3 scale of doubled values, halved: s / 2.
float ue4m3_half(uint8_t s);

void mxfp4_from_float(const float* x, void* y, int64_t n);
void mxfp4_to_float(const void* x, float* y, int64_t n);
float mxfp4_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0
void nvfp4_from_float(const float* x, void* y, int64_t n);
void nvfp4_to_float(const void* x, float* y, int64_t n);
float nvfp4_vec_dot(int64_t n, const void* x, const void* y);  // y: Q8_0

}  // namespace edgelm::kernels
