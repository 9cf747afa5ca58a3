// AVX-512 (F/BW/VL/DQ + VNNI) kernels: vec_dot for F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K, Q6_K and the activation quantizers of Q8_0, Q8_1 and Q8_K.
//
// Compiled with -mavx512{f,bw,vl,dq,vnni} -mavx2 -mfma -mf16c (this file only) and reached only
// through isa_kernels(), after the CPU check; see kernels_x86.h for the linkage rules.
//
// Invariants: as kernels_avx2.cpp (exact integer parts; legacy formats differ from the scalar
// result by float reassociation only; K formats are bit-identical to it; F32/F16 keep 64
// independent float lanes; activation quants in [-127, 127]; quantizers byte-identical).
// Differences in method:
//  - VNNI dpbusd (u8 x s8, summed in fours into int32, no intermediate saturation) replaces
//    maddubs + madd; formats with a signed offset (Q4_0: q - 8, Q5_0: q - 16) dot the unsigned
//    quant and subtract offset * sum(y), itself one dpbusd.
//  - Legacy formats stay at one 32-element block per 256-bit register (AVX512VL encodings of
//    VNNI and the masked byte add): measured no faster with two blocks per 512-bit register,
//    which needs extra merges to pair blocks and runs on two ports instead of three.
//  - K formats use 512-bit registers (64 elements = two sub-blocks each) and apply their integer
//    sub-block scales with dpwssd (int16 pairs into int32); their float terms are finished eight
//    super-blocks at a time with the scalar kernel's operation order (bit-identical results).
//  - fp16 scales of eight blocks are gathered and converted together; per-block values are then
//    broadcast from memory, which costs a load rather than a shuffle.
// GCC 12 reports -W(maybe-)uninitialized inside its own AVX-512 headers (the deliberately
// undefined upper halves of the cast and reduce intrinsics); the warning points into the header,
// so it is silenced before the header is read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kernels_x86.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

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

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// [256 bits at a | 256 bits at b].
inline __m512i load_2x256(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}

// 8 fp16 fields at byte kOffset of 8 consecutive kStride-byte blocks, as floats. Each lane
// gathers 4 bytes, starting at the field (field in the low half) when that stays inside the
// block, else ending with it, so no read leaves the row.
template <size_t kStride, size_t kOffset>
inline __m256 gather_half8(const void* first) {
  constexpr int s = static_cast<int>(kStride);
  const __m256i offsets = _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s);
  const auto* base = static_cast<const uint8_t*>(first);
  if constexpr (kOffset + 4 <= kStride) {
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base + kOffset), offsets, 1);
    return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(g));  // vpmovdw keeps the low halves
  } else {
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base + kOffset - 2), offsets, 1);
    return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(g, 16)));
  }
}

// ---- F32, F16 ---------------------------------------------------------------------------------

inline __mmask16 tail_mask(int64_t count) { return static_cast<__mmask16>((1u << count) - 1); }  // count < 16

float f32_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, 1);
  const auto* x = static_cast<const float*>(vx);
  const auto* y = static_cast<const float*>(vy);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch_ahead(x + i, 256);
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
  if (i < n) {  // masked loads do not touch (or fault on) the lanes past the end
    const __mmask16 m = tail_mask(n - i);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

inline __m512 f16x16(__m256i h) { return _mm512_cvtph_ps(h); }
inline __m512 bf16x16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

// F16 and BF16 rows (against activations rounded to the same type). Products of two halves are
// exact in float, so only the sums round, as for F32.
template <bool kBf16>
float half_vec_dot(int64_t n, const void* vx, const void* vy) {
  check_blocks(n, 1);
  const auto* x = static_cast<const uint16_t*>(vx);
  const auto* y = static_cast<const uint16_t*>(vy);
  const auto cvt = [](__m256i h) { return kBf16 ? bf16x16(h) : f16x16(h); };
  const auto load = [&](const uint16_t* p) { return cvt(load256(p)); };
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch_ahead(x + i, 128);
    a0 = _mm512_fmadd_ps(load(x + i), load(y + i), a0);
    a1 = _mm512_fmadd_ps(load(x + i + 16), load(y + i + 16), a1);
    a2 = _mm512_fmadd_ps(load(x + i + 32), load(y + i + 32), a2);
    a3 = _mm512_fmadd_ps(load(x + i + 48), load(y + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load(x + i), load(y + i), a0);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    a1 = _mm512_fmadd_ps(cvt(_mm256_maskz_loadu_epi16(m, x + i)), cvt(_mm256_maskz_loadu_epi16(m, y + i)), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// ---- Legacy 32-element formats ----------------------------------------------------------------

// 16 bytes of packed nibbles -> [32 x u8]: bytes 0..15 = low nibbles (elements 0..15), bytes
// 16..31 = high nibbles (elements 16..31). Broadcast load + blend: no shuffle-port work.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i q = _mm256_broadcastsi128_si256(load128(qs));
  return _mm256_and_si256(_mm256_blend_epi32(q, _mm256_srli_epi16(q, 4), 0xf0), _mm256_set1_epi8(0x0f));
}

inline __m256i dpbusd(__m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u8, s8); }

// Per block: [8 x i32] lane sums of the integer products (summing to the exact isum).
// sum (q - offset) y = sum q y - offset * sum y for the offset formats, q unsigned.
inline __m256i dot_offset(__m256i q, __m256i y, char offset) {
  return _mm256_sub_epi32(dpbusd(q, y), dpbusd(_mm256_set1_epi8(offset), y));
}

// The 5-bit quants of a Q5 block, [32 x u8] in [0, 31]: qh is the byte mask of the fifth bits.
template <typename B>
inline __m256i q5_quants(const B& x) {
  uint32_t bits;
  std::memcpy(&bits, x.qh, 4);
  const __m256i lo = unpack_nibbles(x.qs);
  return _mm256_mask_add_epi8(lo, _cvtu32_mask32(bits), lo, _mm256_set1_epi8(16));
}

inline __m256i q4_0_block(const BlockQ4_0& x, const BlockQ8_0& y) {
  return dot_offset(unpack_nibbles(x.qs), load256(y.qs), 8);
}
inline __m256i q4_1_block(const BlockQ4_1& x, const BlockQ8_1& y) {
  return dpbusd(unpack_nibbles(x.qs), load256(y.qs));
}
inline __m256i q5_0_block(const BlockQ5_0& x, const BlockQ8_0& y) {
  return dot_offset(q5_quants(x), load256(y.qs), 16);
}
inline __m256i q5_1_block(const BlockQ5_1& x, const BlockQ8_1& y) { return dpbusd(q5_quants(x), load256(y.qs)); }

// s8 x s8 as |x| . (y * sign(x)); needs y != -128.
inline __m256i q8_0_block(const BlockQ8_0& x, const BlockQ8_0& y) {
  const __m256i q = load256(x.qs);
  return dpbusd(_mm256_sign_epi8(q, q), _mm256_sign_epi8(load256(y.qs), q));
}

// sum over blocks of dx * dy * isum (+ m * s for the formats with a min). One block per
// 256-bit register: a legacy block is 32 elements, and on these CPUs 256-bit integer work has
// three ports where 512-bit work has two, so wider registers would only add the shuffles that
// pair blocks up. Eight blocks per step: their scales are computed together and stored, so each
// block's broadcast is a plain load; the blocks alternate between two accumulators.
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
  __m256 sum = _mm256_add_ps(acc0, acc1);
  if constexpr (kHasMin) sum = _mm256_add_ps(sum, acc_min);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s) + mins;
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

// Each 32-bit lane's value in both of its 16-bit halves: the scale operand of dpwssd, whose
// int16 pairs then all take the lane's scale. vpermd on these moves scales at 1 uop where
// vpermw on words costs 2.
inline __m512i dup_words(__m512i v) {
  return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(v, 16));
}

// [lane a x 8 | lane b x 8] as a vpermd index.
inline __m512i index2(int a, int b) { return _mm512_inserti64x4(_mm512_set1_epi32(a), _mm256_set1_epi32(b), 1); }

// Integer sums of one super-block: int32 lanes of the scaled quant products, and 4 lanes of
// the min (or offset) products -> their two totals.
inline void reduce_sums(__m512i acc, __m128i mins4, int32_t* q, int32_t* m) {
  const __m256i a8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
  const __m128i a4 = _mm_add_epi32(_mm256_castsi256_si128(a8), _mm256_extracti128_si256(a8, 1));
  __m128i t = _mm_add_epi32(_mm_unpacklo_epi32(a4, mins4), _mm_unpackhi_epi32(a4, mins4));  // [q q m m] mixed
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
  __m256 t =
      _mm256_mul_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p.q))));
  if constexpr (kMins) {
    const __m256 dmin = gather_half8<sizeof(Block), offsetof(Block, dmin)>(x);
    t = _mm256_sub_ps(t, _mm256_mul_ps(_mm256_mul_ps(dmin, yd),
                                       _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p.m)))));
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

// Drives a K kernel: `block(i, &q, &m)` forms super-block i's integer sums; the float terms
// are finished 8 super-blocks at a time.
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

// Q4_K and Q5_K. One 64-byte load covers quant chunks 2c' and 2c'+1 (c' = 0, 1): its low
// nibbles are sub-blocks 4c' and 4c'+2 (elements 128c' + 0..31 and + 64..95), its high nibbles
// sub-blocks 4c'+1 and 4c'+3 (+ 32..63 and + 96..127); the y halves are loaded to match.
template <bool kFive, typename Block>
float k4_vec_dot(int64_t n, const void* vx, const void* vy) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
  __m512i scale_lo[2], scale_hi[2], bit_lo[2], bit_hi[2];
  for (int c = 0; c < 2; ++c) {
    scale_lo[c] = index2(4 * c, 4 * c + 2);  // int16 lanes 0-15 / 16-31 = dword lanes 0-7 / 8-15
    scale_hi[c] = index2(4 * c + 1, 4 * c + 3);
    // qh bit b of byte l belongs to element 32b + l.
    bit_lo[c] = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (4 * c))),
                                   _mm256_set1_epi8(static_cast<char>(1 << (4 * c + 2))), 1);
    bit_hi[c] = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (4 * c + 1))),
                                   _mm256_set1_epi8(static_cast<char>(1 << (4 * c + 3))), 1);
  }
  auto block = [&](const Block& x, const BlockQ8_K& y, int32_t* q, int32_t* m) {
    uint64_t scales, mins;
    k4_scales_mins(x.scales, &scales, &mins);
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins)));
    const __m128i pairs = _mm_hadd_epi16(load128(y.bsums), load128(y.bsums + 8));  // |.| <= 32 * 127
    const __m128i mins4 = _mm_madd_epi16(pairs, m16);
    const __m512i sc =
        dup_words(_mm512_zextsi256_si512(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(scales)))));
    __m512i hbits = _mm512_setzero_si512();
    if constexpr (kFive) hbits = _mm512_broadcast_i64x4(load256(x.qh));  // [qh | qh]
    // Chunk pair c: maddubs pairs <= 2 * 31 * 127 (no saturation), times scales <= 63 into
    // int32 lanes [sub-block a x 8 | b x 8]. The first pair starts the sums with a plain madd
    // (dpwssd from zero would need a zeroed register copy).
    auto chunk = [&](int c, __m512i* plo, __m512i* phi, __m512i* slo, __m512i* shi) {
      const __m512i qv = load512(x.qs + 64 * c);
      __m512i lo = _mm512_and_si512(qv, low4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(qv, 4), low4);
      if constexpr (kFive) {
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hbits, bit_lo[c]), lo, bit4);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hbits, bit_hi[c]), hi, bit4);
      }
      *plo = _mm512_maddubs_epi16(lo, load_2x256(y.qs + 128 * c, y.qs + 128 * c + 64));
      *phi = _mm512_maddubs_epi16(hi, load_2x256(y.qs + 128 * c + 32, y.qs + 128 * c + 96));
      *slo = _mm512_permutexvar_epi32(scale_lo[c], sc);
      *shi = _mm512_permutexvar_epi32(scale_hi[c], sc);
    };
    __m512i plo, phi, slo, shi;
    chunk(0, &plo, &phi, &slo, &shi);
    __m512i acc0 = _mm512_madd_epi16(plo, slo), acc1 = _mm512_madd_epi16(phi, shi);
    chunk(1, &plo, &phi, &slo, &shi);
    acc0 = _mm512_dpwssd_epi32(acc0, plo, slo);
    acc1 = _mm512_dpwssd_epi32(acc1, phi, shi);
    reduce_sums(_mm512_add_epi32(acc0, acc1), mins4, q, m);
  };
  return k_vec_dot<Block, true>(n, vx, vy, block);
}

// Q6_K (element order in kernels_avx2.cpp): per half h, one register holds k = 0, 1 (elements
// 128h + 0..63) and one k = 2, 3 (128h + 64..127); the 64 ql bytes of the half are, in order,
// exactly the low nibbles of the first and the high nibbles of the second. The unsigned quant
// q' = q + 32 is dotted, and 32 * sum_j sc_j * bsums_j subtracted per super-block.
float q6_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
  // qh bits 2k..2k+1 to bits 4..5: k = 0, 1 shift left by 4, 2; k = 2, 3 shift right by 0, 2.
  const __m512i shl01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr23 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
  // Sub-block 16 elements = 8 int16 pairs-sums = 4 dword lanes: dwords 4j..4j+3 -> sub-block 8h + 4part + j.
  __m512i scale_index[2][2];
  for (int h = 0; h < 2; ++h)
    for (int part = 0; part < 2; ++part) {
      const int b = 8 * h + 4 * part;
      scale_index[h][part] = _mm512_setr_epi32(b, b, b, b, b + 1, b + 1, b + 1, b + 1, b + 2, b + 2, b + 2, b + 2,
                                               b + 3, b + 3, b + 3, b + 3);
    }
  auto block = [&](const BlockQ6_K& x, const BlockQ8_K& y, int32_t* q, int32_t* offset) {
    const __m128i sc8 = load128(x.scales);
    // 16 int32 of sum_j sc_j * bsums_j, halved by madd to 8 -> 4 lanes.
    const __m256i prod = _mm256_madd_epi16(load256(y.bsums), _mm256_cvtepi8_epi16(sc8));
    const __m128i offset4 = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
    const __m512i sc = dup_words(_mm512_cvtepi8_epi32(sc8));
    // Half h: maddubs pairs <= 2 * 63 * 127, times |scale| <= 128 into int32 (< 2^28 in all).
    // The first half starts the sums with a plain madd, as in k4_vec_dot.
    auto half_sums = [&](int h, __m512i* p01, __m512i* p23, __m512i* s01, __m512i* s23) {
      const __m512i ql = load512(x.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(load256(x.qh + 32 * h));
      const __m512i q01 =
          _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl01), bits45));
      const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                          _mm512_and_si512(_mm512_srlv_epi16(qh, shr23), bits45));
      *p01 = _mm512_maddubs_epi16(q01, load512(y.qs + 128 * h));
      *p23 = _mm512_maddubs_epi16(q23, load512(y.qs + 128 * h + 64));
      *s01 = _mm512_permutexvar_epi32(scale_index[h][0], sc);
      *s23 = _mm512_permutexvar_epi32(scale_index[h][1], sc);
    };
    __m512i p01, p23, s01, s23;
    half_sums(0, &p01, &p23, &s01, &s23);
    __m512i acc0 = _mm512_madd_epi16(p01, s01), acc1 = _mm512_madd_epi16(p23, s23);
    half_sums(1, &p01, &p23, &s01, &s23);
    acc0 = _mm512_dpwssd_epi32(acc0, p01, s01);
    acc1 = _mm512_dpwssd_epi32(acc1, p23, s23);
    int32_t qsum, off;
    reduce_sums(_mm512_add_epi32(acc0, acc1), offset4, &qsum, &off);
    *q = qsum - 32 * off;
    *offset = 0;
  };
  return k_vec_dot<BlockQ6_K, false>(n, vx, vy, block);
}

// ---- Activation quantizers --------------------------------------------------------------------

// roundf of 16 floats (halves away from zero), exactly: t = trunc(p) and p - t are exact.
inline __m512i round_half_away(__m512 p) {
  const __m512 t = _mm512_roundscale_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(p, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_and_ps(p, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));  // +-1
  return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

// Q8_0 / Q8_1 block: fp16 d and quants; returns the float d and sum(q). max_ps returns its
// second operand (the running max) for a NaN first operand, ignoring NaN as the scalar code.
struct Q8Block {
  float d;
  int32_t qsum;
};

inline Q8Block q8_block(const float* x, uint16_t* d_out, int8_t* qs) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const __m512 m = _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps()));
  const float d = _mm512_reduce_max_ps(m) / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);  // = fp32_to_fp16 for every non-NaN d
  const __m512i q0 = round_half_away(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
  const __m512i q1 = round_half_away(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));  // in [-127, 127]: no truncation
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
  return {d, _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1))};
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
    y[i].s = _cvtss_sh(static_cast<float>(b.qsum) * b.d, _MM_FROUND_TO_NEAREST_INT);  // from the unrounded d
  }
}

void q8_k_from_float(const float* x, void* vy, int64_t n) {
  check_blocks(n, kQK_K);
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m512 m = _mm512_setzero_ps();
    for (int g = 0; g < 16; ++g) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * g)), m);
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The first element of largest magnitude sets the sign of d, as in the scalar quantizer.
    int first = 0;
    for (int g = 0; g < 16; ++g) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * g)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        first = 16 * g + __builtin_ctz(static_cast<unsigned>(hit));
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    for (int g = 0; g < 16; ++g) {  // one register = one bsums group of 16
      // cvtps rounds to nearest even (MXCSR default), as lrint does in the scalar code.
      const __m512i q =
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(x + 16 * g))),
                           _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16 * g), _mm512_cvtepi32_epi8(q));
      y[i].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    y[i].d = 1.0f / iscale;
  }
}

constexpr IsaKernelRow kRows[] = {
    {DType::f32, f32_vec_dot, nullptr},
    {DType::f16, half_vec_dot<false>, nullptr},
    {DType::bf16, half_vec_dot<true>, nullptr},
    {DType::q4_0, legacy_vec_dot<BlockQ4_0, BlockQ8_0, q4_0_block, false>, nullptr},
    {DType::q4_1, legacy_vec_dot<BlockQ4_1, BlockQ8_1, q4_1_block, true>, nullptr},
    {DType::q5_0, legacy_vec_dot<BlockQ5_0, BlockQ8_0, q5_0_block, false>, nullptr},
    {DType::q5_1, legacy_vec_dot<BlockQ5_1, BlockQ8_1, q5_1_block, true>, nullptr},
    {DType::q8_0, legacy_vec_dot<BlockQ8_0, BlockQ8_0, q8_0_block, false>, q8_0_from_float},
    {DType::q8_1, nullptr, q8_1_from_float},
    {DType::q4_k, k4_vec_dot<false, BlockQ4_K>, nullptr},
    {DType::q5_k, k4_vec_dot<true, BlockQ5_K>, nullptr},
    {DType::q6_k, q6_k_vec_dot, nullptr},
    {DType::q8_k, nullptr, q8_k_from_float},
};

}  // namespace

constinit const IsaKernels kAvx512Kernels{Isa::avx512, kRows, kAvx512Gemms, &kAvx2Kernels};

}  // namespace edgelm::kernels::x86
