// AVX2 + FMA + F16C kernels: vec_dot for F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, TQ2_0, MXFP4, the seven grid IQ formats (kernels_avx2_iqgrid.h)
// and the activation quantizers of Q8_0, Q8_1 and Q8_K. The
// avx512 and amx tables take the rows they lack from this one (isa.h).
//
// Compiled with -mavx2 -mfma -mf16c (this file only) and reached only through isa_kernels(),
// after the CPU check; see kernels_x86.h for the linkage rules this file keeps.
//
// Invariants (the contract with the scalar oracle, tested by tests/kernels/test_simd.cpp):
//  - Integer parts are exact: every product of quants is summed in int16/int32 without
//    saturation or overflow (bounds are noted where they are tight).
//  - Legacy formats (32-element blocks) convert the 8 int32 lane sums of each block to float
//    and multiply-add them with the block scale dx * dy (rounded once, as in the scalar code)
//    into float lanes: the result differs from the scalar one by float reassociation only.
//  - K formats form each super-block's integer sums exactly, then evaluate the float
//    expression of the scalar kernel in the same order, so they are bit-identical to it.
//  - F32/F16 keep 32 independent float lanes (4 accumulators of 8).
//  - Activation rows (y) have quants in [-127, 127], as every from_float writes them; the
//    sign trick below relies on it. Weight quants (x) may be any bit pattern. Q8_K rows carry
//    bsums consistent with their quants (Q6_K uses them).
//  - The quantizers repeat the scalar float operations (same divisions, products and
//    rounding rules) element by element, so their bytes are identical to the scalar ones.
// Method notes: the shuffle port (port 5) is what limits these loops, so nibbles are unpacked
// with a broadcast load and a blend rather than an insert, and the fp16 scales of eight legacy
// blocks are gathered and converted together, then broadcast per block from memory (a load).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kernels_x86.h"
#include "kernels/quants_fp4.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "kernels/quants_ternary.h"

namespace edgelm::kernels::x86 {
namespace {

// ---- Helpers ----------------------------------------------------------------------------------

inline void check_blocks(int64_t n, int64_t block) {
  if (n < 0 || n % block != 0) [[unlikely]]
    row_length_error(n, block);
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// Decode reads every weight row once; left to the hardware prefetcher the memory bus idles while
// a block is being computed, so each loop step also asks for the weights kPrefetchBytes ahead
// (measured: Q4_0 TinyLlama-shape decode 19 -> 27 tok/s on 2 cores). Prefetches never fault, so
// running past the end of the matrix is harmless.
constexpr size_t kPrefetchBytes = 2048;
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p) + kPrefetchBytes;
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_i32(__m128i s) {
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline int32_t hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// [32 x u8] . [32 x s8] -> [8 x i32], lane k = sum of the products of bytes 4k..4k+3.
// maddubs saturates a pair sum above 32767; callers keep u8 <= 128 and |s8| <= 127
// (2 * 128 * 127 = 32512).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// [32 x s8] . [32 x s8] -> [8 x i32] as |x| . (y * sign(x)). Needs y != -128.
inline __m256i dot_s8s8(__m256i x, __m256i y) { return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

// 16 bytes of packed nibbles -> [32 x u8]: bytes 0..15 = low nibbles (elements 0..15),
// bytes 16..31 = high nibbles (elements 16..31): the legacy element order. A broadcast load
// and a blend instead of an insert keep this off the shuffle port.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i q = _mm256_broadcastsi128_si256(load128(qs));
  return _mm256_and_si256(_mm256_blend_epi32(q, _mm256_srli_epi16(q, 4), 0xf0), _mm256_set1_epi8(0x0f));
}

// The 32 bits of a Q5 qh field -> [32 x u8], byte j = 0xff where bit j is set, else 0.
inline __m256i bits_to_bytes(const uint8_t qh[4]) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte j takes source byte j / 8 (shuffles stay within 128-bit lanes; both lanes hold all 4).
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));  // byte j selects bit j % 8
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// shuffle_epi8 control broadcasting int16 word a over the low 128-bit lane and word b over the
// high one.
inline __m256i words_ab(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(((2 * b + 1) << 8) | (2 * b))),
                          _mm_set1_epi16(static_cast<int16_t>(((2 * a + 1) << 8) | (2 * a))));
}

// ---- F32, F16 ---------------------------------------------------------------------------------

float f32_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, 1);
  const auto* x = static_cast<const float*>(vx);
  const auto* y = static_cast<const float*>(vy);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead(x + i, 128);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
  float tail = 0.0f;
  for (; i < n; ++i) tail += x[i] * y[i];
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

inline __m256 load_f16x8(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }
inline __m256 load_bf16x8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}
inline float bf16_half(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// F16 and BF16 rows (against activations rounded to the same type). Products of two halves are
// exact in float (11- or 8-bit significands, exponents in range), so the only roundings are
// those of the sums, as for F32.
template <bool kBf16>
float half_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, 1);
  const auto* x = static_cast<const uint16_t*>(vx);
  const auto* y = static_cast<const uint16_t*>(vy);
  const auto load = [](const uint16_t* p) { return kBf16 ? load_bf16x8(p) : load_f16x8(p); };
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead(x + i, 64);
    a0 = _mm256_fmadd_ps(load(x + i), load(y + i), a0);
    a1 = _mm256_fmadd_ps(load(x + i + 8), load(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(load(x + i + 16), load(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(load(x + i + 24), load(y + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load(x + i), load(y + i), a0);
  float tail = 0.0f;
  for (; i < n; ++i) tail += kBf16 ? bf16_half(x[i]) * bf16_half(y[i]) : half(x[i]) * half(y[i]);
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

// F32 -> F16 with round to nearest even (F16C), byte-identical to fp32_to_fp16: the same
// rounding of normals, subnormals and overflow; only NaN differs (F16C keeps the payload), so
// NaN lanes are replaced by the scalar's quiet NaN 0x7e00 with the sign.
__m128i f16x8_from(__m256 x) {
  const __m128i r = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  if (_mm256_movemask_ps(nan) == 0) return r;
  const __m256i sign = _mm256_srli_epi32(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(INT32_MIN)), 16);
  const __m256i qnan = _mm256_or_si256(sign, _mm256_set1_epi32(0x7e00));
  const __m256i nan32 = _mm256_castps_si256(nan);
  // 32-bit lanes -> 16-bit, in the conversion's lane order.
  const __m128i mask16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
  const __m128i q16 = _mm_packus_epi32(_mm256_castsi256_si128(qnan), _mm256_extracti128_si256(qnan, 1));
  return _mm_blendv_epi8(r, q16, mask16);
}

// F32 -> BF16 with round to nearest even, as fp32_to_bf16 (NaN: the truncated bits with the
// quiet bit set).
__m128i bf16x8_from(__m256 xf) {
  const __m256i x = _mm256_castps_si256(xf);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  r = _mm256_blendv_epi8(r, qnan, nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

// A row of n floats to 16-bit halves, 8 at a time (the tail through a zero-padded copy).
template <__m128i (*Convert)(__m256)>
void halves_from_float(const float* src, void* dst, int64_t n) {
  check_blocks(n, 1);
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), Convert(_mm256_loadu_ps(src + i)));
  if (i < n) {
    alignas(32) float x[8] = {};
    alignas(16) uint16_t r[8];
    std::memcpy(x, src + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm_store_si128(reinterpret_cast<__m128i*>(r), Convert(_mm256_load_ps(x)));
    std::memcpy(h + i, r, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

// ---- Legacy 32-element formats ----------------------------------------------------------------

// Per block: the integer products as [8 x i32] lane sums (summing to the block's exact isum).
// Formats with an offset (Q4_0: q - 8, Q5_0: q - 16) dot the unsigned quant and subtract
// offset * y in the int16 pair sums: two maddubs and a subtraction (which any vector port runs)
// instead of dot_s8s8's two sign ops and one maddubs (ports 0/1 only), one multiply-port uop
// less. Pairs <= 2 * 31 * 127 and 2 * 16 * 127: neither they nor their difference saturate.
inline __m256i dot_offset(__m256i q, __m256i y, char offset) {
  const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(_mm256_set1_epi8(offset), y));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

inline __m256i q4_0_block(const BlockQ4_0& x, const BlockQ8_0& y) {
  return dot_offset(unpack_nibbles(x.qs), load256(y.qs), 8);
}

inline __m256i q4_1_block(const BlockQ4_1& x, const BlockQ8_1& y) {
  return dot_u8s8(unpack_nibbles(x.qs), load256(y.qs));
}

// The 5-bit quants of a Q5 block, [32 x u8] in [0, 31].
template <typename B>
inline __m256i q5_quants(const B& x) {
  return _mm256_or_si256(unpack_nibbles(x.qs), _mm256_and_si256(bits_to_bytes(x.qh), _mm256_set1_epi8(16)));
}

inline __m256i q5_0_block(const BlockQ5_0& x, const BlockQ8_0& y) {
  return dot_offset(q5_quants(x), load256(y.qs), 16);
}

inline __m256i q5_1_block(const BlockQ5_1& x, const BlockQ8_1& y) { return dot_u8s8(q5_quants(x), load256(y.qs)); }

inline __m256i q8_0_block(const BlockQ8_0& x, const BlockQ8_0& y) { return dot_s8s8(load256(x.qs), load256(y.qs)); }

// The IQ4 codebook in both 128-bit lanes: shuffle_epi8 with 4-bit indices looks values up.
inline __m256i iq4_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
}

// 16 bytes of IQ4 indices (legacy nibble order) -> [32 x s8] codebook values in element order.
inline __m256i iq4_values(const uint8_t* qs, __m256i table) { return _mm256_shuffle_epi8(table, unpack_nibbles(qs)); }

// Values in [-127, 113]: dot_s8s8's |x| . sign(y, x) holds (pairs <= 2 * 127 * 127).
inline __m256i iq4_nl_block(const BlockIQ4_NL& x, const BlockQ8_0& y) {
  return dot_s8s8(iq4_values(x.qs, iq4_table()), load256(y.qs));
}

// 8 fp16 fields at byte kOffset of 8 consecutive kStride-byte blocks, as floats. Each lane
// gathers 4 bytes, starting at the field (field in the low half) when that stays inside the
// block, else ending with it, so no read leaves the row.
template <size_t kStride, size_t kOffset>
inline __m256 gather_half8(const void* first) {
  constexpr int s = static_cast<int>(kStride);
  const __m256i offsets = _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s);
  const auto* base = static_cast<const uint8_t*>(first);
  constexpr bool kLow = kOffset + 4 <= kStride;
  const __m256i g =
      _mm256_i32gather_epi32(reinterpret_cast<const int*>(base + (kLow ? kOffset : kOffset - 2)), offsets, 1);
  // The wanted 16 bits of each lane to the low 8 bytes of each 128-bit lane, then together.
  const char lo = kLow ? 0 : 2;
  const __m256i pick =
      _mm256_setr_epi8(lo, lo + 1, lo + 4, lo + 5, lo + 8, lo + 9, lo + 12, lo + 13, -1, -1, -1, -1, -1, -1, -1, -1, lo,
                       lo + 1, lo + 4, lo + 5, lo + 8, lo + 9, lo + 12, lo + 13, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(g, pick), 0x08);  // qwords 0, 2
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// sum over blocks of dx * dy * isum (+ m * s for the formats with a min). Eight blocks per
// step: their scales dx * dy are computed together (gathers + one conversion) and stored, so
// each block's broadcast is a plain load instead of a shuffle (the shuffle port is what limits
// these loops); the blocks alternate between two accumulators.
template <typename BX, typename BY, __m256i (*Block)(const BX&, const BY&), bool kHasMin>
float legacy_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK);
  const auto* x = static_cast<const BX*>(vx);
  const auto* y = static_cast<const BY*>(vy);
  const int64_t nb = n / kQK;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc_min = acc0;
  alignas(32) float scale[8];
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    prefetch_ahead(x + i, 8 * sizeof(BX));
    _mm256_store_ps(scale, _mm256_mul_ps(gather_half8<sizeof(BX), offsetof(BX, d)>(x + i),
                                         gather_half8<sizeof(BY), offsetof(BY, d)>(y + i)));
    if constexpr (kHasMin)
      acc_min = _mm256_fmadd_ps(gather_half8<sizeof(BX), offsetof(BX, m)>(x + i),
                                gather_half8<sizeof(BY), offsetof(BY, s)>(y + i), acc_min);
    for (int k = 0; k < 8; k += 2) {
      acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(scale + k), _mm256_cvtepi32_ps(Block(x[i + k], y[i + k])), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_broadcast_ss(scale + k + 1), _mm256_cvtepi32_ps(Block(x[i + k + 1], y[i + k + 1])),
                             acc1);
    }
  }
  float mins = 0.0f;
  for (; i < nb; ++i) {
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half(x[i].d) * half(y[i].d)), _mm256_cvtepi32_ps(Block(x[i], y[i])), acc0);
    if constexpr (kHasMin) mins += half(x[i].m) * half(y[i].s);
  }
  return hsum(_mm256_add_ps(acc0, acc1)) + (hsum(acc_min) + mins);
}

// ---- K formats --------------------------------------------------------------------------------

// The 8 six-bit scales and 8 mins of a Q4_K/Q5_K super-block, one byte each (see
// k4_get_scale_min for the packing), computed four at a time in 32-bit words.
inline void k4_scales_mins(const uint8_t* q, uint64_t* scales, uint64_t* mins) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t sc_lo = a & 0x3f3f3f3f, mn_lo = b & 0x3f3f3f3f;
  const uint32_t sc_hi = (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030);
  *scales = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
  *mins = mn_lo | static_cast<uint64_t>(mn_hi) << 32;
}

// Integer sums of one super-block: int32 lanes of the scaled quant products, and 4 lanes of
// the min (or offset) products -> their two totals.
inline void reduce_sums(__m256i acc, __m128i mins4, int32_t* q, int32_t* m) {
  const __m128i a4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  __m128i t = _mm_add_epi32(_mm_unpacklo_epi32(a4, mins4), _mm_unpackhi_epi32(a4, mins4));  // q, m interleaved
  t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));                                           // lane 0: q, lane 1: m
  *q = _mm_cvtsi128_si32(t);
  *m = _mm_extract_epi32(t, 1);
}

// Integer sums of up to 8 super-blocks, awaiting their float terms.
struct KPending {
  alignas(32) int32_t q[8];
  alignas(32) int32_t m[8];
};

// sum += d_i * yd_i * q_i - dmin_i * yd_i * m_i over 8 super-blocks: the terms lane-wise with
// the scalar kernel's operations in its order, then added to the sum in block order, so the
// result is bit-identical to the scalar kernel's.
template <typename Block, bool kMins>
inline float k_finish8(const Block* x, const BlockQ8_K* y, const KPending& p, float sum) {
  constexpr int s = sizeof(BlockQ8_K);
  const __m256 yd = _mm256_i32gather_ps(&y->d, _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s), 1);
  const __m256 d = gather_half8<sizeof(Block), offsetof(Block, d)>(x);
  __m256 t = _mm256_mul_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(load256(p.q)));
  if constexpr (kMins) {
    const __m256 dmin = gather_half8<sizeof(Block), offsetof(Block, dmin)>(x);
    t = _mm256_sub_ps(t, _mm256_mul_ps(_mm256_mul_ps(dmin, yd), _mm256_cvtepi32_ps(load256(p.m))));
  }
  alignas(32) float terms[8];
  _mm256_store_ps(terms, t);
  for (int k = 0; k < 8; ++k) sum += terms[k];
  return sum;
}

// The same for one super-block (the last nb % 8).
template <typename Block, bool kMins>
inline float k_finish1(const Block& x, const BlockQ8_K& y, int32_t q, int32_t m, float sum) {
  if constexpr (kMins)
    return sum + (half(x.d) * y.d * static_cast<float>(q) - half(x.dmin) * y.d * static_cast<float>(m));
  else
    return sum + half(x.d) * y.d * static_cast<float>(q);
}

// Drives a K kernel: `block(x_i, y_i, &q, &m)` forms super-block i's integer sums; the float
// terms are finished 8 super-blocks at a time.
template <typename Block, bool kMins, typename BlockSums>
inline float k_vec_dot(int64_t n, const void* vx, const void* vy, BlockSums block) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const Block*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n / kQK_K;
  float sum = 0.0f;
  KPending p;
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    prefetch_ahead(x + i, 8 * sizeof(Block));
    for (int k = 0; k < 8; ++k) block(x[i + k], y[i + k], &p.q[k], &p.m[k]);
    sum = k_finish8<Block, kMins>(x + i, y + i, p, sum);
  }
  for (; i < nb; ++i) {
    int32_t q, m;
    block(x[i], y[i], &q, &m);
    sum = k_finish1<Block, kMins>(x[i], y[i], q, m, sum);
  }
  return sum;
}

// Q4_K and Q5_K share everything but the fifth bit. Per 32 quant bytes (c = 0..3), the low
// nibbles are sub-block 2c (elements 64c..64c+31) and the high nibbles sub-block 2c+1.
template <bool kFive, typename Block>
float k4_vec_dot(int64_t n, const void* vx, const void* vy) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
  auto block = [&](const Block& x, const BlockQ8_K& y, int32_t* q, int32_t* m) {
    uint64_t scales, mins;
    k4_scales_mins(x.scales, &scales, &mins);
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins)));
    const __m128i pairs = _mm_hadd_epi16(load128(y.bsums), load128(y.bsums + 8));  // |.| <= 32 * 127
    const __m128i mins4 = _mm_madd_epi16(pairs, m16);
    // [sc0..sc7 | sc0..sc7] as int16.
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scales))));
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFive) hbits = load256(x.qh);  // bit 2c / 2c+1 of byte l: element 64c + l / 64c + 32 + l
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
    for (int c = 0; c < 4; ++c) {
      const __m256i qv = load256(x.qs + 32 * c);
      __m256i lo = _mm256_and_si256(qv, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), low4);
      if constexpr (kFive) {
        // Bits 0 and 1 of each byte (after 2c bits of shifting) to bit 4; the 16-bit shifts
        // carry bits across bytes only into positions the masks drop.
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), bit4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), bit4));
        hbits = _mm256_srli_epi16(hbits, 2);
      }
      // maddubs pairs <= 2 * 31 * 127; madd by a scale <= 63 gives <= 2^19 per int32 lane.
      const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(y.qs + 64 * c)),
                                            _mm256_shuffle_epi8(sc, words_ab(2 * c, 2 * c)));
      const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(y.qs + 64 * c + 32)),
                                            _mm256_shuffle_epi8(sc, words_ab(2 * c + 1, 2 * c + 1)));
      acc0 = _mm256_add_epi32(acc0, plo);
      acc1 = _mm256_add_epi32(acc1, phi);
    }
    reduce_sums(_mm256_add_epi32(acc0, acc1), mins4, q, m);
  };
  return k_vec_dot<Block, true>(n, vx, vy, block);
}

// Q6_K: per half h (128 elements) and k = 0..3, elements 128h + 32k + l (l < 32) take their
// low nibble from ql[64h + 32(k & 1) + l] (low nibble for k < 2, high for k >= 2) and their
// top 2 bits from bits 2k of qh[32h + l]. The unsigned quant q' = q + 32 in [0, 63] is dotted
// with y, and 32 * sum_j sc_j * bsums_j is subtracted once per super-block.
float q6_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  auto block = [&](const BlockQ6_K& x, const BlockQ8_K& y, int32_t* q, int32_t* unused) {
    const __m128i sc8 = load128(x.scales);
    const __m256i prod = _mm256_madd_epi16(load256(y.bsums), _mm256_cvtepi8_epi16(sc8));  // sc_j * bsums_j, paired
    const __m128i offset4 = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(x.ql + 64 * h), ql1 = load256(x.ql + 64 * h + 32);
      const __m256i qh = load256(x.qh + 32 * h);
      // [sc(8h) .. sc(8h+7) | same] as int16.
      const __m256i sc = _mm256_broadcastsi128_si256(
          _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.scales + 8 * h))));
      const __m256i qk[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
      };
      for (int k = 0; k < 4; ++k) {
        // maddubs pairs <= 2 * 63 * 127; madd by |scale| <= 128 stays below 2^22. Lanes 0-7
        // are sub-block 8h + 2k, lanes 8-15 sub-block 8h + 2k + 1.
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(qk[k], load256(y.qs + 128 * h + 32 * k)),
                                            _mm256_shuffle_epi8(sc, words_ab(2 * k, 2 * k + 1)));
        if (k % 2 == 0)
          acc0 = _mm256_add_epi32(acc0, p);
        else
          acc1 = _mm256_add_epi32(acc1, p);
      }
    }
    int32_t qsum, offset;
    reduce_sums(_mm256_add_epi32(acc0, acc1), offset4, &qsum, &offset);
    *q = qsum - 32 * offset;  // |.| < 2^28 before the subtraction
    *unused = 0;
  };
  return k_vec_dot<BlockQ6_K, false>(n, vx, vy, block);
}

// Of 16 int8 sub-block scales, the 8 of half h (128 elements) as int16 in both 128-bit lanes,
// for words_ab to pick two from.
inline __m256i scales16_half(const int8_t* sc8, int h) {
  return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc8 + 8 * h))));
}

// Q2_K and Q3_K share the 2-bit layout: the 32 elements 128h + 32s + l (l < 32) are bits 2s of
// qs[32h + l]; chunk c = 4h + s is sub-blocks 2c (bytes 0-15) and 2c + 1 (bytes 16-31).
// Q2_K: q in [0, 3] times the 4-bit scale, minus the 4-bit min times the sub-block's bsums.
float q2_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const __m256i three = _mm256_set1_epi8(3);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  auto block = [&](const BlockQ2_K& x, const BlockQ8_K& y, int32_t* q, int32_t* m) {
    const __m128i raw = load128(x.scales);
    alignas(16) int8_t sc[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm_and_si128(raw, low4));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), low4));
    const __m256i mprod = _mm256_madd_epi16(load256(y.bsums), mins16);  // |bsums| <= 16 * 127
    const __m128i mins4 = _mm_add_epi32(_mm256_castsi256_si128(mprod), _mm256_extracti128_si256(mprod, 1));
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
    for (int h = 0; h < 2; ++h) {
      const __m256i qv = load256(x.qs + 32 * h);
      const __m256i scv = scales16_half(sc, h);
      for (int s = 0; s < 4; ++s) {
        const __m256i qs = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * s), three);
        // maddubs pairs <= 2 * 3 * 127; madd by a scale <= 15.
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(qs, load256(y.qs + 128 * h + 32 * s)),
                                            _mm256_shuffle_epi8(scv, words_ab(2 * s, 2 * s + 1)));
        if (s % 2 == 0)
          acc0 = _mm256_add_epi32(acc0, p);
        else
          acc1 = _mm256_add_epi32(acc1, p);
      }
    }
    reduce_sums(_mm256_add_epi32(acc0, acc1), mins4, q, m);
  };
  return k_vec_dot<BlockQ2_K, true>(n, vx, vy, block);
}

// The 16 Q3_K scales minus their bias of 32 (see q3_k_unpack_scales), four at a time in 32-bit
// words: byte i of word k is scale 4k + i.
inline void q3_k_scales(const uint8_t* q, int8_t out[16]) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t w[4] = {
      (a & 0x0f0f0f0f) | ((c & 0x03030303) << 4),
      (b & 0x0f0f0f0f) | (((c >> 2) & 0x03030303) << 4),
      ((a >> 4) & 0x0f0f0f0f) | (((c >> 4) & 0x03030303) << 4),
      ((b >> 4) & 0x0f0f0f0f) | (((c >> 6) & 0x03030303) << 4),
  };
  const __m128i v = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)), _mm_set1_epi8(32));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);
}

// Q3_K: the unsigned q' = q + 4 in [0, 7] (low 2 bits, plus 4 where the hmask bit is set) is
// dotted with y, and 4 * sum_j sc_j * bsums_j is subtracted once per super-block. The hmask
// bit of element 32c + l is bit c of hmask[l].
float q3_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  auto block = [&](const BlockQ3_K& x, const BlockQ8_K& y, int32_t* q, int32_t* unused) {
    alignas(16) int8_t sc[16];
    q3_k_scales(x.scales, sc);
    const __m256i prod = _mm256_madd_epi16(load256(y.bsums), _mm256_cvtepi8_epi16(load128(sc)));
    const __m128i offset4 = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
    const __m256i hm = load256(x.hmask);
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
    for (int h = 0; h < 2; ++h) {
      const __m256i qv = load256(x.qs + 32 * h);
      const __m256i scv = scales16_half(sc, h);
      for (int s = 0; s < 4; ++s) {
        const int c = 4 * h + s;
        // 16-bit shifts: the bits crossing from the neighbouring byte land above bit 0 and 1.
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * s), three);
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(c)), one);
        const __m256i qs = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
        // maddubs pairs <= 2 * 7 * 127; madd by |scale| <= 32.
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(qs, load256(y.qs + 32 * c)),
                                            _mm256_shuffle_epi8(scv, words_ab(2 * s, 2 * s + 1)));
        if (s % 2 == 0)
          acc0 = _mm256_add_epi32(acc0, p);
        else
          acc1 = _mm256_add_epi32(acc1, p);
      }
    }
    int32_t qsum, offset;
    reduce_sums(_mm256_add_epi32(acc0, acc1), offset4, &qsum, &offset);
    *q = qsum - 4 * offset;
    *unused = 0;
  };
  return k_vec_dot<BlockQ3_K, false>(n, vx, vy, block);
}

// IQ4_XS: per 32-element sub-block j the codebook values (signed) dotted with y by the sign
// trick, widened by madd with the sub-block scale ls_j - 32 (pairs <= 2 * 127 * 127 times
// |scale| <= 32: < 2^21 per lane).
float iq4_xs_vec_dot(int64_t n, const void* vx, const void* vy) {
  const __m256i table = iq4_table();
  auto block = [&](const BlockIQ4_XS& x, const BlockQ8_K& y, int32_t* q, int32_t* unused) {
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
    const uint32_t sh = x.scales_h;
    for (int j = 0; j < 8; j += 2) {
      const int ls0 = ((x.scales_l[j / 2] & 0x0f) | (((sh >> (2 * j)) & 3) << 4)) - 32;
      const int ls1 = ((x.scales_l[j / 2] >> 4) | (((sh >> (2 * j + 2)) & 3) << 4)) - 32;
      const __m256i v0 = iq4_values(x.qs + 16 * j, table), v1 = iq4_values(x.qs + 16 * j + 16, table);
      const __m256i y0 = load256(y.qs + 32 * j), y1 = load256(y.qs + 32 * j + 32);
      const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(v0, v0), _mm256_sign_epi8(y0, v0));
      const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(v1, v1), _mm256_sign_epi8(y1, v1));
      acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(p0, _mm256_set1_epi16(static_cast<int16_t>(ls0))));
      acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(p1, _mm256_set1_epi16(static_cast<int16_t>(ls1))));
    }
    *q = hsum_i32(_mm256_add_epi32(acc0, acc1));
    *unused = 0;
  };
  return k_vec_dot<BlockIQ4_XS, false>(n, vx, vy, block);
}

// ---- Activation quantizers --------------------------------------------------------------------

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// roundf of 8 floats: to nearest, halves away from zero. t = trunc(p) and p - t are exact, so
// the comparison with 0.5 decides exactly as roundf does (adding 0.5 first would not be exact).
inline __m256i round_half_away(__m256 p) {
  const __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(p, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(p, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));  // +-1
  return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

// 4 x [8 x i32] in element order -> [32 x i8] in element order (values within int8).
inline __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  // packs interleave per 128-bit lane: [a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7] as dwords.
  const __m256i v = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Max |x| over 32 floats, ignoring NaN as std::max(amax, |x|) does: max_ps returns its second
// operand (the running max) when the first is NaN.
inline float absmax32(const __m256 v[4]) {
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) m = _mm256_max_ps(abs_ps(v[k]), m);
  return hmax(m);
}

// The shared part of Q8_0 and Q8_1: one block's fp16 d and quants. Returns the float d (Q8_1
// derives s from it, unrounded, as the scalar quantizer does) and sum(q).
struct Q8Block {
  float d;
  int32_t qsum;
};

inline Q8Block q8_block(const float* x, uint16_t* d_out, int8_t* qs) {
  __m256 v[4];
  for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
  const float d = absmax32(v) / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);  // = fp32_to_fp16 for every non-NaN d
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = round_half_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i8(q[0], q[1], q[2], q[3]));
  return {d, hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])))};
}

void q8_0_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK);
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i) q8_block(x + kQK * i, &y[i].d, y[i].qs);
}

void q8_1_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK);
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const Q8Block b = q8_block(x + kQK * i, &y[i].d, y[i].qs);
    y[i].s = _cvtss_sh(static_cast<float>(b.qsum) * b.d, _MM_FROUND_TO_NEAREST_INT);
  }
}

void q8_k_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK_K);
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K / 8; ++k) m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + 8 * k)), m);
    const float amax = hmax(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The scalar quantizer keeps the first element of largest magnitude (strict >), whose sign
    // sets the sign of d: find that element.
    int first = 0;
    for (int k = 0; k < kQK_K / 8; ++k) {
      const __m256 hit = _mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * k)), _mm256_set1_ps(amax), _CMP_EQ_OQ);
      const int mask = _mm256_movemask_ps(hit);
      if (mask != 0) {
        first = 8 * k + __builtin_ctz(static_cast<unsigned>(mask));
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int c = 0; c < kQK_K / 32; ++c) {  // 32 elements = 2 bsums groups per step
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        // cvtps rounds to nearest even (MXCSR default), as lrint does in the scalar code.
        q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * c + 8 * k))),
                                _mm256_set1_epi32(127));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + 32 * c), pack_i8(q[0], q[1], q[2], q[3]));
      y[i].bsums[2 * c] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[2 * c + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
    }
    y[i].d = 1.0f / iscale;
  }
}

// ---- TQ2_0 and MXFP4 ----------------------------------------------------------------------------

// TQ2_0: the 2-bit fields q + 1 in {0, 1, 2} as unsigned bytes times the activations (maddubs
// pairs <= 2 * 2 * 127), minus the sum of the activations; the same exact isum and float
// expression as the scalar row, so bit for bit equal.
template <int kShift>
inline __m256i tq2_part(__m256i bytes, const int8_t* y) {
  const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bytes, kShift), _mm256_set1_epi8(3));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(y)), _mm256_set1_epi16(1));
}

float tq2_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK_K);
  const auto* x = static_cast<const BlockTQ2_0*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
      const __m256i b = load256(x[i].qs + 32 * c);
      const int8_t* yc = y[i].qs + 128 * c;
      acc = _mm256_add_epi32(acc, _mm256_add_epi32(tq2_part<0>(b, yc), tq2_part<2>(b, yc + 32)));
      acc = _mm256_add_epi32(acc, _mm256_add_epi32(tq2_part<4>(b, yc + 64), tq2_part<6>(b, yc + 96)));
    }
    const __m256i bs = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)),
                                         _mm256_set1_epi16(1));
    const int32_t isum = hsum_i32(_mm256_sub_epi32(acc, bs));
    sum += half(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

// MXFP4: the doubled E2M1 values looked up like IQ4_NL's codebook (in [-12, 12]: dot_s8s8 holds),
// one exact isum per block, then e8m0_half(e) * d_y * isum in the scalar row's order.
float mxfp4_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, kQK);
  const auto* x = static_cast<const BlockMXFP4*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Values)));
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int32_t isum = hsum_i32(dot_s8s8(_mm256_shuffle_epi8(table, unpack_nibbles(x[i].qs)), load256(y[i].qs)));
    sum += e8m0_half(x[i].e) * half(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace
}  // namespace edgelm::kernels::x86

#define EDGELM_KERNELS_AVX2_TU
#include "kernels/kernels_avx2_iqgrid.h"

namespace edgelm::kernels::x86 {
namespace {

constexpr IsaKernelRow kRows[] = {
    {DType::f32, f32_vec_dot, nullptr},
    {DType::f16, half_vec_dot<false>, halves_from_float<f16x8_from>},
    {DType::bf16, half_vec_dot<true>, halves_from_float<bf16x8_from>},
    {DType::q4_0, legacy_vec_dot<BlockQ4_0, BlockQ8_0, q4_0_block, false>, nullptr},
    {DType::q4_1, legacy_vec_dot<BlockQ4_1, BlockQ8_1, q4_1_block, true>, nullptr},
    {DType::q5_0, legacy_vec_dot<BlockQ5_0, BlockQ8_0, q5_0_block, false>, nullptr},
    {DType::q5_1, legacy_vec_dot<BlockQ5_1, BlockQ8_1, q5_1_block, true>, nullptr},
    {DType::q8_0, legacy_vec_dot<BlockQ8_0, BlockQ8_0, q8_0_block, false>, q8_0_from_float},
    {DType::q8_1, nullptr, q8_1_from_float},
    {DType::iq4_nl, legacy_vec_dot<BlockIQ4_NL, BlockQ8_0, iq4_nl_block, false>, nullptr},
    {DType::q2_k, q2_k_vec_dot, nullptr},
    {DType::q3_k, q3_k_vec_dot, nullptr},
    {DType::q4_k, k4_vec_dot<false, BlockQ4_K>, nullptr},
    {DType::q5_k, k4_vec_dot<true, BlockQ5_K>, nullptr},
    {DType::q6_k, q6_k_vec_dot, nullptr},
    {DType::iq4_xs, iq4_xs_vec_dot, nullptr},
    {DType::tq2_0, tq2_0_vec_dot, nullptr},
    {DType::mxfp4, mxfp4_vec_dot, nullptr},
    {DType::iq3_s, iq3_s_vec_dot, nullptr},
    {DType::iq2_xs, iq2_xs_vec_dot, nullptr},
    {DType::iq2_xxs, iq2_xxs_vec_dot, nullptr},
    {DType::iq3_xxs, iq3_xxs_vec_dot, nullptr},
    {DType::iq2_s, iq2_s_vec_dot, nullptr},
    {DType::iq1_s, iq1_s_vec_dot, nullptr},
    {DType::iq1_m, iq1_m_vec_dot, nullptr},
    {DType::q8_k, nullptr, q8_k_from_float},
};

}  // namespace

constinit const IsaKernels kAvx2Kernels{Isa::avx2, kRows, kAvx2Gemms};

}  // namespace edgelm::kernels::x86
