// The 256-element super-block ("K") GGUF formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the
// activation type Q8_K.
//
// Job: the byte layouts, scalar reference dequantize and dot product for all of them, and
// quantizers for all of them (quants_k_quantize.cpp). This is the oracle every
// SIMD variant is tested against, so it is written for obviousness, not speed.
//
// Invariants:
//  - Block layouts are those of the GGUF file format (static_assert on the byte sizes); fp16
//    fields are raw IEEE half bits. A super-block splits into sub-blocks (16 of 16 elements for
//    Q2_K/Q3_K/Q6_K, 8 of 32 for Q4_K/Q5_K), each with a small integer scale (and min) that
//    multiplies the super-block's fp16 `d` (and `dmin`).
//  - Dequantization reproduces the reference implementation bit for bit: per sub-block it forms
//    `dl = d * scale` and `ml = dmin * min` first, then `dl * q - ml` (Q6_K: `d * scale * q`,
//    left to right); the kernels library is compiled with -ffp-contract=off so nothing is fused.
//  - Quantizers write the same layout as the reference. The scales and mins come from a
//    weighted least-squares search over candidate scales (the ecosystem's method), run in float
//    with the reference's operation order, so on real weights the Q4_K/Q5_K/Q6_K bytes are
//    identical to the reference quantizer's (tested on shared/models/interop); Q2_K and Q3_K
//    use the same searches without that promise; Q8_K follows the reference rule.
//  - Every row function takes n elements, n a multiple of 256 (EDGELM_CHECK).
//  - vec_dot(n, x, y): x a row of the weight type, y a row of Q8_K. Per sub-block it forms the
//    exact integer dot product and applies the integer scale, then the float scales once per
//    super-block.
#pragma once

#include <cstdint>

namespace edgelm::kernels {

constexpr int kQK_K = 256;        // elements per super-block
constexpr int kKScaleBytes = 12;  // packed 6-bit scales of Q3_K, Q4_K, Q5_K

// Q2_K: x = d * (sc & 15) * q - dmin * (sc >> 4), q in [0, 3], 16 sub-blocks of 16.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // [16] per sub-block: low nibble = scale, high nibble = min
  uint8_t qs[kQK_K / 4];       // [QK_K] 2-bit quants; see q2_k_to_float for the element order
  uint16_t d;                  // fp16 super-block scale for the scales
  uint16_t dmin;               // fp16 super-block scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: x = d * (sc - 32) * (q - 4 * !hbit), q low bits in [0, 3], 16 sub-blocks of 16.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];      // [QK_K] high bits: bit b of hmask[l] belongs to element 32 * b + l
  uint8_t qs[kQK_K / 4];         // [QK_K] low 2 bits; see q3_k_to_float for the element order
  uint8_t scales[kKScaleBytes];  // [16] 6-bit scales, see q3_k_unpack_scales
  uint16_t d;                    // fp16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K: x = d * sc_j * q - dmin * m_j, q in [0, 15], 8 sub-blocks of 32.
struct BlockQ4_K {
  uint16_t d;                    // fp16 super-block scale for the scales
  uint16_t dmin;                 // fp16 super-block scale for the mins
  uint8_t scales[kKScaleBytes];  // [8 scales + 8 mins] 6 bits each, see k4_get_scale_min
  uint8_t qs[kQK_K / 2];         // [QK_K] 4-bit quants: byte 32 * c + l holds element 64 * c + l in the
                                 // low nibble and element 64 * c + 32 + l in the high nibble
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: as Q4_K with a fifth bit per quant, q in [0, 31].
struct BlockQ5_K {
  uint16_t d;                    // fp16 super-block scale for the scales
  uint16_t dmin;                 // fp16 super-block scale for the mins
  uint8_t scales[kKScaleBytes];  // [8 scales + 8 mins] 6 bits each, see k4_get_scale_min
  uint8_t qh[kQK_K / 8];         // [QK_K] bit 4: bit b of qh[l] belongs to element 32 * b + l
  uint8_t qs[kQK_K / 2];         // [QK_K] low 4 bits, nibble order as Q4_K
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: x = d * sc_j * (q - 32), q in [0, 63], 16 sub-blocks of 16 with signed 8-bit scales.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // [QK_K] low 4 bits; per half h (128 elements): byte 64 * h + l holds
                              // element l (low nibble) and l + 64 (high), byte 64 * h + 32 + l holds
                              // elements l + 32 and l + 96, for l in [0, 32)
  uint8_t qh[kQK_K / 4];      // [QK_K] high 2 bits; byte 32 * h + l holds those of elements l, l + 32,
                              // l + 64, l + 96 of half h at bits 0-1, 2-3, 4-5, 6-7
  int8_t scales[kQK_K / 16];  // [16] sub-block scales
  uint16_t d;                 // fp16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: x = d * q; the activation type of all K formats. bsums lets mins be applied without
// revisiting the quants.
struct BlockQ8_K {
  float d;                    // fp32 scale
  int8_t qs[kQK_K];           // [QK_K] quants in [-127, 127], element j = qs[j]
  int16_t bsums[kQK_K / 16];  // [16] sum of qs[16 * g .. 16 * g + 15]
};
static_assert(sizeof(BlockQ8_K) == 292);

// Scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K/Q5_K: 8 six-bit scales
// and 8 six-bit mins. For j < 4 they are the low 6 bits of bytes j and j + 4; for j >= 4 their
// low 4 bits are the nibbles of byte j + 4 (scale low, min high) and their top 2 bits are the
// top 2 bits of bytes j - 4 (scale) and j (min).
inline void k4_get_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Inverse of k4_get_scale_min for all 8 pairs; every value must be < 64.
void k4_pack_scale_min(const uint8_t sc[8], const uint8_t m[8], uint8_t q[kKScaleBytes]);

// The 16 six-bit Q3_K scales, still biased by 32: the low 4 bits of scale j are the low (j < 8)
// or high (j >= 8) nibble of byte j % 8; its top 2 bits are bits 2 * (j / 4) of byte 8 + j % 4.
void q3_k_unpack_scales(const uint8_t q[kKScaleBytes], int8_t scales[16]);

// Sets the biased scale j (0..15, value 0..63) of the 12 packed Q3_K bytes, the inverse of
// q3_k_unpack_scales for that scale; the other scales' bits are untouched.
void q3_k_pack_scale(uint8_t q[kKScaleBytes], int j, int value);

// Rows: src/dst hold n / 256 consecutive super-blocks.
void q2_k_from_float(const float* x, void* y, int64_t n);
void q2_k_to_float(const void* x, float* y, int64_t n);
float q2_k_vec_dot(int64_t n, const void* x, const void* y);

void q3_k_from_float(const float* x, void* y, int64_t n);
void q3_k_to_float(const void* x, float* y, int64_t n);
float q3_k_vec_dot(int64_t n, const void* x, const void* y);

void q4_k_from_float(const float* x, void* y, int64_t n);
void q4_k_to_float(const void* x, float* y, int64_t n);
float q4_k_vec_dot(int64_t n, const void* x, const void* y);

void q5_k_from_float(const float* x, void* y, int64_t n);
void q5_k_to_float(const void* x, float* y, int64_t n);
float q5_k_vec_dot(int64_t n, const void* x, const void* y);

void q6_k_from_float(const float* x, void* y, int64_t n);
void q6_k_to_float(const void* x, float* y, int64_t n);
float q6_k_vec_dot(int64_t n, const void* x, const void* y);

void q8_k_from_float(const float* x, void* y, int64_t n);
void q8_k_to_float(const void* x, float* y, int64_t n);

}  // namespace edgelm::kernels
