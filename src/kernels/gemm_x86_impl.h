// Multi-token GEMM (see gemm.h) for x86: the path of prefill and batched decode on every x86
// CPU without AMX. This is the body of three translation units, included once by each:
//  - gemm_avx2.cpp (-mavx2 -mfma -mf16c; EDGELM_GEMM_VNNI 0, EDGELM_GEMM_ZMM 0): int8 products
//    with maddubs, int16 sums widened by madd; kAvx2Gemms, used by the avx2 ISA;
//  - gemm_avxvnni.cpp (the same plus -mavxvnni; VNNI 1, ZMM 0): 256-bit registers as AVX2, the
//    products, sums and widening by the VEX-encoded vpdpbusd; kAvxVnniGemms, used by avxvnni;
//  - gemm_avx512.cpp (AVX-512 flags with VNNI; VNNI 1, ZMM 1): 512-bit registers hold 16
//    rows, vpdpbusd does the product, the sum and the widening in one instruction and never
//    saturates, and 32 registers hold tiles of 8 tokens; kAvx512Gemms, used by avx512 and amx.
// Each includes it inside its own anonymous namespace, so every function here has internal
// linkage and is compiled with that file's flags only (the rules of kernels_x86.h); nothing
// else may include it.
//
// Why not vec_dot per (row, token): a vec_dot of one weight block with one activation block
// ends in a float conversion and a scaled add per (row, token, block), and every token unpacks
// the block again. Here kRows weight rows (8 in a ymm, 16 in a zmm) are interleaved so that
// one 32-bit lane of a register holds 4 consecutive quants of one row: a single maddubs (or
// dpbusd) then multiplies 4 elements of every row with 4 activations of one token (broadcast),
// the products of a whole sub-block are summed before one widening, and one conversion + FMA
// finishes all rows at once. The unpacked rows are reused by every token of the batch.
//
// Method, per run() call and per group of kRows rows:
//  1. repack: the group's rows are unpacked into scratch, per 32-element sub-block, as unsigned
//     bytes (Q8_0 on AVX2: signed) in [8 groups of 4 elements][kRows rows][4 bytes] (32-bit
//     transposes of 8 rows' unpacked bytes at a time), next to the per-row float scales (and
//     int16 sub-block scales and mins for K formats). Weights are read from memory once per
//     matmul.
//  2. tiles of up to kTok tokens: for every sub-block, int16 sums of maddubs products widened
//     with madd by the sub-block scale (VNNI: int32 dpbusd sums times the scale); the formats'
//     offsets (Q4_0: 8, Q5_0: 16, Q6_K: 32, biased Q8_0: 128) are subtracted as offset *
//     sum(activations) in integers, mins added as floats, as the scalar kernels do; every
//     (row, token) integer sum is exact.
// Float types (F32, F16, BF16) interleave kRows rows per 8 columns as floats and FMA against
// broadcast activations.
//
// Bounds (activation quants are in [-127, 127], as every from_float writes them): maddubs
// pairs of q <= 15 are <= 3810, so 8 groups sum to 30480 in int16; q <= 31 flushes every 4
// groups (31496); q <= 63 every 2 (32004); Q8_0 uses |w| . sign(y, w) and widens every group.
// With VNNI every product goes straight into int32 lanes, so Q8_0 is stored biased (w + 128,
// offset 128) like the unsigned formats.
// Results differ from the scalar vec_dot by float reassociation only (tests/kernels/test_gemm.cpp).
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error "gemm_x86_impl.h is the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/kernels_x86.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels::x86 {
namespace {

// ---- Registers of one group: kRows 32-bit lanes, one per weight row ------------------------------

#if EDGELM_GEMM_ZMM
constexpr int kRows = 16;  // zmm
using VI = __m512i;
using VF = __m512;
inline VI vi_load(const void* p) { return _mm512_loadu_si512(p); }
inline VI vi_zero() { return _mm512_setzero_si512(); }
inline VI vi_set1(int32_t v) { return _mm512_set1_epi32(v); }
inline VI vi_add(VI a, VI b) { return _mm512_add_epi32(a, b); }
inline VI vi_sub(VI a, VI b) { return _mm512_sub_epi32(a, b); }
inline VI vi_shl5(VI a) { return _mm512_slli_epi32(a, 5); }
template <int k>
inline VI vi_shl(VI a) { return _mm512_slli_epi32(a, k); }
inline VI vi_shl16(VI a) { return _mm512_slli_epi32(a, 16); }
inline VI vi_mullo(VI a, VI b) { return _mm512_mullo_epi32(a, b); }
inline VI vi_madd16(VI a, VI b) { return _mm512_madd_epi16(a, b); }
inline VF vf_load(const float* p) { return _mm512_load_ps(p); }
inline VF vf_zero() { return _mm512_setzero_ps(); }
inline VF vf_set1(float v) { return _mm512_set1_ps(v); }
inline VF vf_cvt(VI a) { return _mm512_cvtepi32_ps(a); }
inline VF vf_add(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF vf_mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF vf_fmadd(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
inline VF vf_fnmadd(VF a, VF b, VF c) { return _mm512_fnmadd_ps(a, b, c); }
inline void vf_store_rows(float* out, VF v, int n_rows) {
  _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << n_rows) - 1), v);
}
inline VI vi_and(VI a, VI b) { return _mm512_and_si512(a, b); }
inline VI vi_or(VI a, VI b) { return _mm512_or_si512(a, b); }
inline VI vi_srl16(VI a, int n) { return _mm512_srl_epi16(a, _mm_cvtsi32_si128(n)); }
inline VI vi_sll16(VI a, int n) { return _mm512_sll_epi16(a, _mm_cvtsi32_si128(n)); }
inline VI vi_set1_8(char c) { return _mm512_set1_epi8(c); }
inline VI vi_u8_to_32(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline VI vi_s8_to_32(const int8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline VF vf_half(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline void vi_store(void* p, VI v) { _mm512_storeu_si512(p, v); }
inline VI vi_dpbusd(VI acc, VI u8, VI s8) { return _mm512_dpbusd_epi32(acc, u8, s8); }
inline void vf_store(float* p, VF v) { _mm512_storeu_ps(p, v); }
#else
constexpr int kRows = 8;  // ymm
using VI = __m256i;
using VF = __m256;
inline VI vi_load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline VI vi_zero() { return _mm256_setzero_si256(); }
inline VI vi_set1(int32_t v) { return _mm256_set1_epi32(v); }
inline VI vi_add(VI a, VI b) { return _mm256_add_epi32(a, b); }
inline VI vi_sub(VI a, VI b) { return _mm256_sub_epi32(a, b); }
inline VI vi_shl5(VI a) { return _mm256_slli_epi32(a, 5); }
template <int k>
inline VI vi_shl(VI a) { return _mm256_slli_epi32(a, k); }
inline VI vi_shl16(VI a) { return _mm256_slli_epi32(a, 16); }
inline VI vi_madd16(VI a, VI b) { return _mm256_madd_epi16(a, b); }
inline VI vi_mullo(VI a, VI b) { return _mm256_mullo_epi32(a, b); }
inline VF vf_load(const float* p) { return _mm256_load_ps(p); }
inline VF vf_zero() { return _mm256_setzero_ps(); }
inline VF vf_set1(float v) { return _mm256_set1_ps(v); }
inline VF vf_cvt(VI a) { return _mm256_cvtepi32_ps(a); }
inline VF vf_add(VF a, VF b) { return _mm256_add_ps(a, b); }
inline VF vf_mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
inline VF vf_fmadd(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
inline VF vf_fnmadd(VF a, VF b, VF c) { return _mm256_fnmadd_ps(a, b, c); }
inline void vf_store_rows(float* out, VF v, int n_rows) {
  if (n_rows == kRows) {
    _mm256_storeu_ps(out, v);
    return;
  }
  alignas(32) float tmp[kRows];
  _mm256_store_ps(tmp, v);
  for (int i = 0; i < n_rows; ++i) out[i] = tmp[i];
}
inline VI vi_and(VI a, VI b) { return _mm256_and_si256(a, b); }
inline VI vi_or(VI a, VI b) { return _mm256_or_si256(a, b); }
inline VI vi_srl16(VI a, int n) { return _mm256_srl_epi16(a, _mm_cvtsi32_si128(n)); }
inline VI vi_sll16(VI a, int n) { return _mm256_sll_epi16(a, _mm_cvtsi32_si128(n)); }
inline VI vi_set1_8(char c) { return _mm256_set1_epi8(c); }
inline VI vi_u8_to_32(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline VI vi_s8_to_32(const int8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline VF vf_half(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline void vi_store(void* p, VI v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
#if EDGELM_GEMM_VNNI
inline VI vi_dpbusd(VI acc, VI u8, VI s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
#endif
inline void vf_store(float* p, VF v) { _mm256_storeu_ps(p, v); }
#endif
constexpr int kHalves = kRows / 8;               // 8-row transposes per group
constexpr int kGroupBytes = 4 * kRows;           // one group of 4 elements of every row
constexpr int kSubBytes = 8 * kGroupBytes;       // one 32-element sub-block of every row
constexpr int kTok = EDGELM_GEMM_ZMM ? 8 : 4;  // tokens of a tile (32 or 16 registers)

inline VI vi_bcast(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return vi_set1(v);
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// v[r] = 8 dwords of row r -> v[g] = dword g of rows 0..7.
inline void transpose8(__m256i v[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);      // r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5]
    t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);  // r0[2] r1[2] r0[3] r1[3] | r0[6] ...
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);          // [0] of 4 rows | [4]
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);      // [1] | [5]
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);  // [2] | [6]
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);  // [3] | [7]
  }
  for (int g = 0; g < 4; ++g) {
    v[g] = _mm256_permute2x128_si256(u[g], u[g + 4], 0x20);
    v[g + 4] = _mm256_permute2x128_si256(u[g], u[g + 4], 0x31);
  }
}

// Transposes the 8 rows of half `h` (v[i] = row 8h + i, 8 dwords) into `q`, laid out as
// [8 dword columns][kRows rows][4 bytes]: column g of row r at q + g * kGroupBytes + 4 * r.
inline void store_transposed(uint8_t* q, int h, __m256i v[8]) {
  transpose8(v);
  for (int g = 0; g < 8; ++g) store256(q + g * kGroupBytes + 32 * h, v[g]);
}

// The group's row pointers; missing rows of a last partial group repeat its last row (their
// lanes are computed but never stored).
template <typename B>
inline void group_rows(const GemmWeights& w, int64_t r0, int n_rows, const B* rows[kRows]) {
  for (int i = 0; i < kRows; ++i)
    rows[i] = reinterpret_cast<const B*>(w.data + static_cast<size_t>(r0 + (i < n_rows ? i : n_rows - 1)) * w.row_bytes);
}

// Row r's multiplier m in 32-bit lane r of a multiplier vector: for madd (AVX2) both int16
// halves are m; for mullo_epi32 (VNNI) the lane is m as an int32.
inline void set_mult(int16_t* v, int r, int m) {
  v[2 * r] = static_cast<int16_t>(m);
  v[2 * r + 1] = EDGELM_GEMM_VNNI ? static_cast<int16_t>(m < 0 ? -1 : 0) : static_cast<int16_t>(m);
}

// ---- Unpacked quants of one 32-element sub-block of one row, [32 x u8] in element order ---------

inline __m256i nibbles(const uint8_t* qs) {  // low nibbles = elements 0..15, high = 16..31
  const __m256i q = _mm256_broadcastsi128_si256(load128(qs));
  return _mm256_and_si256(_mm256_blend_epi32(q, _mm256_srli_epi16(q, 4), 0xf0), _mm256_set1_epi8(0x0f));
}

inline __m256i bits_to_bytes(const uint8_t qh[4]) {  // byte j = 0xff where bit j is set
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

inline __m256i quants_q4_0(const BlockQ4_0& x) { return nibbles(x.qs); }
inline __m256i quants_q4_1(const BlockQ4_1& x) { return nibbles(x.qs); }
inline __m256i quants_q8_0(const BlockQ8_0& x) { return load256(x.qs); }
inline __m256i quants_q8_0_biased(const BlockQ8_0& x) {  // w + 128 in [0, 255]
  return _mm256_xor_si256(load256(x.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
}
// IQ4_NL: the codebook values of the nibble indices, signed (AVX2: Q8_0's signed path) or
// biased to v + 128 (VNNI: Q8_0's biased path, offset 128).
inline __m256i quants_iq4_nl(const BlockIQ4_NL& x) {
  const __m256i table = _mm256_broadcastsi128_si256(load128(kIq4Values));
  return _mm256_shuffle_epi8(table, nibbles(x.qs));
}
inline __m256i quants_iq4_nl_biased(const BlockIQ4_NL& x) {
  return _mm256_xor_si256(quants_iq4_nl(x), _mm256_set1_epi8(static_cast<char>(0x80)));
}
template <typename B>
inline __m256i quants_q5(const B& x) {
  return _mm256_or_si256(nibbles(x.qs), _mm256_and_si256(bits_to_bytes(x.qh), _mm256_set1_epi8(16)));
}

// ---- Packed activations -----------------------------------------------------------------------

// One 32-element block of a Q8_0 / Q8_1 activation row with what the kernels need of it.
struct ActQ8 {
  float d;       // scale
  float s;       // Q8_1: the stored s (d * sum, as fp16); Q8_0: 0
  int32_t bias;  // -offset * sum(qs), the weight format's zero point applied to this block
  int32_t pad;
  int8_t qs[kQK];
};
static_assert(sizeof(ActQ8) == 48);

// One super-block of a Q8_K activation row.
struct ActQ8K {
  float d;
  int32_t pad[3];
  int16_t b32[8];   // sums of the 8 32-element sub-blocks
  int16_t b16[16];  // the row's bsums (16-element sums)
  int8_t qs[kQK_K];
};
static_assert(sizeof(ActQ8K) == 320);

template <typename Act>
size_t act_packed_bytes(int64_t cols, int64_t n_tok) {
  constexpr int64_t block = sizeof(Act) == sizeof(ActQ8) ? kQK : kQK_K;
  return static_cast<size_t>(n_tok) * static_cast<size_t>(cols / block) * sizeof(Act);
}

template <typename BY, bool kHasS, int kOffset>
void pack_q8(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const int64_t nb = cols / kQK;
  auto* out = reinterpret_cast<ActQ8*>(packed);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* y = reinterpret_cast<const BY*>(act + static_cast<size_t>(t) * act_row_bytes);
    for (int64_t i = 0; i < nb; ++i, ++out) {
      out->d = half(y[i].d);
      if constexpr (kHasS)
        out->s = half(y[i].s);
      else
        out->s = 0.0f;
      const __m256i q = load256(y[i].qs);
      const int32_t sum =
          hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1)));
      out->bias = -kOffset * sum;
      out->pad = 0;
      store256(out->qs, q);
    }
  }
}

void pack_q8_k(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const int64_t nb = cols / kQK_K;
  auto* out = reinterpret_cast<ActQ8K*>(packed);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* y = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_row_bytes);
    for (int64_t i = 0; i < nb; ++i, ++out) {
      out->d = y[i].d;
      out->pad[0] = out->pad[1] = out->pad[2] = 0;
      for (int j = 0; j < 8; ++j) out->b32[j] = static_cast<int16_t>(y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
      std::memcpy(out->b16, y[i].bsums, sizeof out->b16);
      std::memcpy(out->qs, y[i].qs, sizeof out->qs);
    }
  }
}

// ---- Integer sub-block dot of kRows rows x T tokens --------------------------------------------

// The 8 groups of one sub-block, as sub_dot_u8 / sub_dot_s8 take them: Groups(g) returns
// group g (4 elements of every row, one row per 32-bit lane). from_scratch reads the unpacked
// [8 groups][kRows rows][4 bytes] layout of the per-call kernels; the load-time packed tiles
// (gemm_x86_packed.h) pass lambdas that unpack their own layout in registers.
inline auto from_scratch(const uint8_t* q) {
  return [q](int g) { return vi_load(q + g * kGroupBytes); };
}

// Lane r = (int16 lo[r], int16 hi[r]) from int32 lanes: a madd16 operand pairing two values
// of each row.
inline VI pair16(VI lo, VI hi) { return vi_or(vi_and(lo, vi_set1(0xffff)), vi_shl16(hi)); }
inline VI pair_s8(const int8_t* lo, const int8_t* hi) { return pair16(vi_s8_to_32(lo), vi_s8_to_32(hi)); }
// Row r's sub-block multiplier in 32-bit lane r (the set_mult convention) from kRows 8-bit
// values: int32 for mullo (VNNI), both int16 halves for madd (AVX2).
inline VI mult_of(VI m32) { return EDGELM_GEMM_VNNI ? m32 : pair16(m32, m32); }
inline VI mult_u8(const uint8_t* m) { return mult_of(vi_u8_to_32(m)); }
inline VI mult_s8(const int8_t* m) { return mult_of(vi_s8_to_32(m)); }

// An empty asm that takes v in a register: the compiler may not reassociate the sums of a chain
// through it. Without it GCC turns each token's chain of int16 adds into a tree over all the
// group's products, which keeps 4x more of them live than the 16 ymm registers hold (the tile
// then spills to the stack on every block and runs at half speed). add_in_order: acc += x so.
inline void in_order(VI& v) { __asm__("" : "+v"(v)); }
inline void add_in_order(VI& acc, VI x) {
  acc = vi_add(acc, x);
  in_order(acc);
}

#if EDGELM_GEMM_VNNI
// acc[t] += per-row int32 sums of one sub-block: the 8 groups of q (unsigned bytes) against the
// 32 activation quants at y[t], the sums of groups 0-3 times mult_lo and of groups 4-7 times
// mult_hi (kScaled false: both 1, no multiply; kSplit false: mult_lo for all). The T tokens are
// T independent dpbusd chains. kFlush only matters to AVX2.
template <int T, int kFlush, bool kScaled = true, bool kSplit = false, typename Groups>
inline void sub_dot_u8(Groups q, const int8_t* const y[T], VI mult_lo, VI mult_hi, VI acc[T]) {
  if constexpr (kScaled && kSplit) {
    VI a[T], b[T];
    for (int t = 0; t < T; ++t) a[t] = b[t] = vi_zero();
    for (int g = 0; g < 4; ++g) {
      const VI w0 = q(g), w1 = q(g + 4);
      for (int t = 0; t < T; ++t) {
        a[t] = vi_dpbusd(a[t], w0, vi_bcast(y[t] + 4 * g));
        b[t] = vi_dpbusd(b[t], w1, vi_bcast(y[t] + 4 * (g + 4)));
      }
    }
    for (int t = 0; t < T; ++t) acc[t] = vi_add(acc[t], vi_add(vi_mullo(a[t], mult_lo), vi_mullo(b[t], mult_hi)));
  } else if constexpr (kScaled) {
    VI a[T];
    for (int t = 0; t < T; ++t) a[t] = vi_zero();
    for (int g = 0; g < 8; ++g) {
      const VI w = q(g);
      for (int t = 0; t < T; ++t) a[t] = vi_dpbusd(a[t], w, vi_bcast(y[t] + 4 * g));
    }
    for (int t = 0; t < T; ++t) acc[t] = vi_add(acc[t], vi_mullo(a[t], mult_lo));
  } else {
    for (int g = 0; g < 8; ++g) {
      const VI w = q(g);
      for (int t = 0; t < T; ++t) acc[t] = vi_dpbusd(acc[t], w, vi_bcast(y[t] + 4 * g));
    }
  }
}
#else
// AVX2: int16 sums of kFlush groups of maddubs products at a time, widened by madd with the
// int16 multipliers (mult_lo for groups 0-3, mult_hi for 4-7; kScaled false: pass ones).
template <int T, int kFlush, bool kScaled = true, bool kSplit = false, typename Groups>
inline void sub_dot_u8(Groups q, const int8_t* const y[T], VI mult_lo, VI mult_hi, VI acc[T]) {
#pragma GCC unroll 8
  for (int h = 0; h < 8; h += kFlush) {
    VI p[T];
#pragma GCC unroll 8
    for (int g = h; g < h + kFlush; ++g) {
      const VI w = q(g);
      for (int t = 0; t < T; ++t) {
        const VI pr = _mm256_maddubs_epi16(w, vi_bcast(y[t] + 4 * g));
        p[t] = g == h ? pr : _mm256_add_epi16(p[t], pr);
        in_order(p[t]);
      }
    }
    const VI mult = h < 4 ? mult_lo : mult_hi;
    for (int t = 0; t < T; ++t) add_in_order(acc[t], vi_madd16(p[t], mult));
  }
}

// Signed weights with a per-row sub-block multiplier (IQ4_XS): |w| . sign(y, w) per group
// (pairs <= 2 * 127 * 127), widened by madd with `mult` at once (|mult| <= 32: < 2^21 a lane).
template <int T, typename Groups>
inline void sub_dot_s8_scaled(Groups q, const int8_t* const y[T], VI mult, VI acc[T]) {
  for (int g = 0; g < 8; ++g) {
    const VI w = q(g);
    const VI aw = _mm256_sign_epi8(w, w);
    for (int t = 0; t < T; ++t) {
      const VI pr = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(vi_bcast(y[t] + 4 * g), w));
      add_in_order(acc[t], vi_madd16(pr, mult));
    }
  }
}

// The same for signed weights (Q8_0), multiplier 1: |w| . sign(y, w), widened every group.
template <int T, typename Groups>
inline void sub_dot_s8(Groups q, const int8_t* const y[T], VI acc[T]) {
  const VI ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 8; ++g) {
    const VI w = q(g);
    const VI aw = _mm256_sign_epi8(w, w);
    for (int t = 0; t < T; ++t) {
      const VI pr = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(vi_bcast(y[t] + 4 * g), w));
      add_in_order(acc[t], vi_madd16(pr, ones));
    }
  }
}
#endif

// ---- Legacy formats (32-element blocks) --------------------------------------------------------

// One block of a group of kRows rows.
struct alignas(64) WLegacy {
  float d[kRows];
  float m[kRows];  // Q4_1 / Q5_1 minimum
  uint8_t q[kSubBytes];
};

template <typename BX, __m256i (*Quants)(const BX&), bool kMin>
void repack_legacy(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const BX* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  auto* out = reinterpret_cast<WLegacy*>(scratch);
  const int64_t nb = w.cols / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    for (int i = 0; i < kRows; ++i) {
      out[b].d[i] = half(rows[i][b].d);
      if constexpr (kMin)
        out[b].m[i] = half(rows[i][b].m);
      else
        out[b].m[i] = 0.0f;
    }
    for (int h = 0; h < kHalves; ++h) {
      __m256i v[8];
      for (int i = 0; i < 8; ++i) {
        const BX& x = rows[8 * h + i][b];
        _mm_prefetch(reinterpret_cast<const char*>(&x) + 1024, _MM_HINT_T0);
        v[i] = Quants(x);
      }
      store_transposed(out[b].q, h, v);
    }
  }
}

// kOffset: the unsigned quants' zero point (its bias is in the packed activations); kFlush 0:
// signed (Q8_0 on AVX2).
template <int T, int kFlush, bool kMin>
void tile_legacy(const WLegacy* wb, int64_t nb, const ActQ8* const y[T], float* out, int64_t ldo, int n_rows) {
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* yq[T];
    VI acc[T];
    for (int t = 0; t < T; ++t) {
      yq[t] = y[t][b].qs;
      acc[t] = vi_set1(y[t][b].bias);
    }
#if !EDGELM_GEMM_VNNI
    if constexpr (kFlush == 0) {
      sub_dot_s8<T>(from_scratch(wb[b].q), yq, acc);
    } else {
      const VI ones = _mm256_set1_epi16(1);
      sub_dot_u8<T, kFlush, false>(from_scratch(wb[b].q), yq, ones, ones, acc);
    }
#else
    sub_dot_u8<T, kFlush, false>(from_scratch(wb[b].q), yq, vi_zero(), vi_zero(), acc);
#endif
    const VF d = vf_load(wb[b].d);
    for (int t = 0; t < T; ++t) {
      facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t][b].d)), vf_cvt(acc[t]), facc[t]);
      if constexpr (kMin) facc[t] = vf_fmadd(vf_load(wb[b].m), vf_set1(y[t][b].s), facc[t]);
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// ---- K formats (256-element super-blocks) -------------------------------------------------------

// One super-block of a group of kRows rows, Q4_K / Q5_K.
struct alignas(64) WK4 {
  float d[kRows];
  float dmin[kRows];
  int16_t sc[8][2 * kRows];  // per sub-block s: row r's scale as the multiplier of lane r (set_mult)
  int16_t mn[4][2 * kRows];  // per pair p: row r's mins of sub-blocks 2p, 2p + 1 in lanes 2r, 2r + 1
  uint8_t q[8][kSubBytes];
};

// One super-block of a group of kRows rows of a format with 16-element sub-blocks: Q6_K, Q3_K
// (scales, unsigned quants with a zero point) and Q2_K (scales and mins).
struct alignas(64) WK6 {
  float d[kRows];
  float dmin[kRows];          // Q2_K's dmin; 0 for Q6_K and Q3_K
  int16_t sc[16][2 * kRows];  // per 16-element sub-block j: row r's scale as the multiplier of lane r
  int16_t scp[8][2 * kRows];  // per pair p: row r's scales (Q2_K: mins) of sub-blocks 2p, 2p + 1 in
                              // lanes 2r, 2r + 1
  uint8_t q[8][kSubBytes];
};

// The 8 six-bit scales and mins of a Q4_K/Q5_K super-block (the packing of quants_k.h's
// k4_get_scale_min, which as an inline header function must not be instantiated here).
inline void k4_scales(const uint8_t* q, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0x0f) | ((q[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

template <bool kFive, typename Block>
void repack_k4(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const Block* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  auto* out = reinterpret_cast<WK4*>(scratch);
  const int64_t nb = w.cols / kQK_K;
  const __m256i low4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < nb; ++b) {
    WK4& o = out[b];
    for (int i = 0; i < kRows; ++i) {
      const Block& x = rows[i][b];
      _mm_prefetch(reinterpret_cast<const char*>(&x) + 2 * sizeof(Block), _MM_HINT_T0);
      o.d[i] = half(x.d);
      o.dmin[i] = half(x.dmin);
      uint8_t sc[8], mn[8];
      k4_scales(x.scales, sc, mn);
      for (int s = 0; s < 8; ++s) set_mult(o.sc[s], i, sc[s]);
      for (int p = 0; p < 4; ++p) {
        o.mn[p][2 * i] = mn[2 * p];
        o.mn[p][2 * i + 1] = mn[2 * p + 1];
      }
    }
    for (int s = 0; s < 8; ++s) {
      const int c = s / 2;
      for (int h = 0; h < kHalves; ++h) {
        __m256i v[8];
        for (int i = 0; i < 8; ++i) {
          const Block& x = rows[8 * h + i][b];
          const __m256i qv = load256(x.qs + 32 * c);
          v[i] = _mm256_and_si256(s % 2 == 0 ? qv : _mm256_srli_epi16(qv, 4), low4);
          if constexpr (kFive) {
            const __m256i hb = _mm256_srl_epi16(load256(x.qh), _mm_cvtsi32_si128(s));
            v[i] = _mm256_or_si256(v[i], _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
          }
        }
        store_transposed(o.q[s], h, v);
      }
    }
  }
}

void repack_q6_k(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const BlockQ6_K* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  auto* out = reinterpret_cast<WK6*>(scratch);
  const int64_t nb = w.cols / kQK_K;
  const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
  for (int64_t b = 0; b < nb; ++b) {
    WK6& o = out[b];
    for (int i = 0; i < kRows; ++i) {
      const BlockQ6_K& x = rows[i][b];
      _mm_prefetch(reinterpret_cast<const char*>(&x) + 2 * sizeof(BlockQ6_K), _MM_HINT_T0);
      o.d[i] = half(x.d);
      o.dmin[i] = 0.0f;
      for (int j = 0; j < 16; ++j) set_mult(o.sc[j], i, x.scales[j]);
      for (int p = 0; p < 8; ++p) {
        o.scp[p][2 * i] = x.scales[2 * p];
        o.scp[p][2 * i + 1] = x.scales[2 * p + 1];
      }
    }
    // Sub-block s = 4h + k holds elements 128h + 32k + l: low nibble of ql[64h + 32(k & 1) + l]
    // (high nibble for k >= 2), top bits (qh[32h + l] >> 2k) & 3.
    for (int s = 0; s < 8; ++s) {
      const int hh = s / 4, k = s % 4;
      for (int h = 0; h < kHalves; ++h) {
        __m256i v[8];
        for (int i = 0; i < 8; ++i) {
          const BlockQ6_K& x = rows[8 * h + i][b];
          const __m256i ql = load256(x.ql + 64 * hh + 32 * (k & 1));
          const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
          const __m256i hi =
              _mm256_and_si256(_mm256_srl_epi16(load256(x.qh + 32 * hh), _mm_cvtsi32_si128(2 * k)), three);
          v[i] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        }
        store_transposed(o.q[s], h, v);
      }
    }
  }
}

// Q2_K and Q3_K into WK6: sub-block s of 32 elements (128h + 32k + l, k = s % 4) are bits 2k of
// qs[32h + l]; Q3_K adds 4 where bit s of hmask[l] is set (q' = q + 4 in [0, 7], zero point 4,
// scales ls - 32), Q2_K keeps q in [0, 3] with its 4-bit scales and mins.
template <bool kThree, typename Block>
void repack_k2(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const Block* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  auto* out = reinterpret_cast<WK6*>(scratch);
  const int64_t nb = w.cols / kQK_K;
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < nb; ++b) {
    WK6& o = out[b];
    for (int i = 0; i < kRows; ++i) {
      const Block& x = rows[i][b];
      _mm_prefetch(reinterpret_cast<const char*>(&x) + 2 * sizeof(Block), _MM_HINT_T0);
      o.d[i] = half(x.d);
      int sc[16], mn[16] = {};
      if constexpr (kThree) {
        o.dmin[i] = 0.0f;
        for (int j = 0; j < 16; ++j) {
          const int low = j < 8 ? (x.scales[j] & 0x0f) : (x.scales[j - 8] >> 4);
          const int high = (x.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
          sc[j] = (low | (high << 4)) - 32;
        }
      } else {
        o.dmin[i] = half(x.dmin);
        for (int j = 0; j < 16; ++j) {
          sc[j] = x.scales[j] & 0x0f;
          mn[j] = x.scales[j] >> 4;
        }
      }
      for (int j = 0; j < 16; ++j) set_mult(o.sc[j], i, sc[j]);
      for (int p = 0; p < 8; ++p) {
        o.scp[p][2 * i] = static_cast<int16_t>(kThree ? sc[2 * p] : mn[2 * p]);
        o.scp[p][2 * i + 1] = static_cast<int16_t>(kThree ? sc[2 * p + 1] : mn[2 * p + 1]);
      }
    }
    for (int s = 0; s < 8; ++s) {
      const int hh = s / 4, k = s % 4;
      for (int h = 0; h < kHalves; ++h) {
        __m256i v[8];
        for (int i = 0; i < 8; ++i) {
          const Block& x = rows[8 * h + i][b];
          v[i] = _mm256_and_si256(_mm256_srl_epi16(load256(x.qs + 32 * hh), _mm_cvtsi32_si128(2 * k)), three);
          if constexpr (kThree) {
            const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(load256(x.hmask), _mm_cvtsi32_si128(s)), one);
            v[i] = _mm256_or_si256(v[i], _mm256_slli_epi16(hb, 2));
          }
        }
        store_transposed(o.q[s], h, v);
      }
    }
  }
}

// IQ4_XS into WK4: per 32-element sub-block the codebook values (signed; VNNI: biased to
// v + 128), the scales ls - 32 as multipliers, and (for VNNI's zero point) the scales again as
// pairs in `mn`; dmin 0.
void repack_iq4_xs(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const BlockIQ4_XS* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  auto* out = reinterpret_cast<WK4*>(scratch);
  const int64_t nb = w.cols / kQK_K;
  const __m256i table = _mm256_broadcastsi128_si256(load128(kIq4Values));
  for (int64_t b = 0; b < nb; ++b) {
    WK4& o = out[b];
    for (int i = 0; i < kRows; ++i) {
      const BlockIQ4_XS& x = rows[i][b];
      _mm_prefetch(reinterpret_cast<const char*>(&x) + 2 * sizeof(BlockIQ4_XS), _MM_HINT_T0);
      o.d[i] = half(x.d);
      o.dmin[i] = 0.0f;
      int sc[8];
      for (int j = 0; j < 8; ++j)
        sc[j] = (((x.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((x.scales_h >> (2 * j)) & 3) << 4)) - 32;
      for (int s = 0; s < 8; ++s) set_mult(o.sc[s], i, sc[s]);
      for (int p = 0; p < 4; ++p) {
        o.mn[p][2 * i] = static_cast<int16_t>(sc[2 * p]);
        o.mn[p][2 * i + 1] = static_cast<int16_t>(sc[2 * p + 1]);
      }
    }
    for (int s = 0; s < 8; ++s) {
      for (int h = 0; h < kHalves; ++h) {
        __m256i v[8];
        for (int i = 0; i < 8; ++i) {
          v[i] = _mm256_shuffle_epi8(table, nibbles(rows[8 * h + i][b].qs + 16 * s));
          if (EDGELM_GEMM_VNNI) v[i] = _mm256_xor_si256(v[i], _mm256_set1_epi8(static_cast<char>(0x80)));
        }
        store_transposed(o.q[s], h, v);
      }
    }
  }
}

template <int T, int kFlush>
void tile_k4(const WK4* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const WK4& w = wb[b];
    VI acc[T], mins[T];
    for (int t = 0; t < T; ++t) acc[t] = mins[t] = vi_zero();
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      const VI sc = vi_load(w.sc[s]);
      sub_dot_u8<T, kFlush>(from_scratch(w.q[s]), yq, sc, sc, acc);
    }
    for (int p = 0; p < 4; ++p) {
      const VI mn = vi_load(w.mn[p]);
      for (int t = 0; t < T; ++t) add_in_order(mins[t], vi_madd16(mn, vi_bcast(y[t][b].b32 + 2 * p)));
    }
    const VF d = vf_load(w.d), dmin = vf_load(w.dmin);
    for (int t = 0; t < T; ++t) {
      const VF yd = vf_set1(y[t][b].d);
      facc[t] = vf_fmadd(vf_mul(d, yd), vf_cvt(acc[t]), facc[t]);
      facc[t] = vf_fnmadd(vf_mul(dmin, yd), vf_cvt(mins[t]), facc[t]);
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// The formats of WK6. kShift: the zero point as a shift (Q6_K: 32 = 1 << 5, Q3_K: 4 = 1 << 2),
// subtracted as zero point * sum_j scale_j * bsums_j; kMins (Q2_K, kShift unused): scp holds the
// mins, subtracted as dmin * sum_j min_j * bsums_j in float, as the scalar kernel does.
template <int T, int kFlush, int kShift, bool kMins = false>
void tile_k16(const WK6* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const WK6& w = wb[b];
    VI acc[T], offs[T];
    for (int t = 0; t < T; ++t) acc[t] = offs[t] = vi_zero();
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      sub_dot_u8<T, kFlush, true, true>(from_scratch(w.q[s]), yq, vi_load(w.sc[2 * s]), vi_load(w.sc[2 * s + 1]), acc);
    }
    for (int p = 0; p < 8; ++p) {
      const VI sc = vi_load(w.scp[p]);
      for (int t = 0; t < T; ++t) add_in_order(offs[t], vi_madd16(sc, vi_bcast(y[t][b].b16 + 2 * p)));
    }
    const VF d = vf_load(w.d);
    for (int t = 0; t < T; ++t) {
      const VF yd = vf_set1(y[t][b].d);
      if constexpr (kMins) {
        facc[t] = vf_fmadd(vf_mul(d, yd), vf_cvt(acc[t]), facc[t]);
        facc[t] = vf_fnmadd(vf_mul(vf_load(w.dmin), yd), vf_cvt(offs[t]), facc[t]);
      } else {
        const VI is = vi_sub(acc[t], vi_shl<kShift>(offs[t]));  // q' = q + (1 << kShift)
        facc[t] = vf_fmadd(vf_mul(d, yd), vf_cvt(is), facc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

template <int T, int kFlush>
void tile_q6_k(const WK6* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  tile_k16<T, kFlush, 5>(wb, nb, y, out, ldo, n_rows);
}

// IQ4_XS (WK4 of repack_iq4_xs): signed values times the signed sub-block scales. AVX2: the sign
// trick, widened per group; VNNI: dpbusd of v + 128, then 128 * sum_s scale_s * sum_s(y)
// subtracted (|.| < 2^28).
template <int T>
void tile_iq4_xs(const WK4* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const WK4& w = wb[b];
    VI acc[T];
    for (int t = 0; t < T; ++t) acc[t] = vi_zero();
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      const VI sc = vi_load(w.sc[s]);
#if EDGELM_GEMM_VNNI
      sub_dot_u8<T, 8>(from_scratch(w.q[s]), yq, sc, sc, acc);
#else
      sub_dot_s8_scaled<T>(from_scratch(w.q[s]), yq, sc, acc);
#endif
    }
#if EDGELM_GEMM_VNNI
    VI offs[T];
    for (int t = 0; t < T; ++t) offs[t] = vi_zero();
    for (int p = 0; p < 4; ++p) {
      const VI sc = vi_load(w.mn[p]);
      for (int t = 0; t < T; ++t) add_in_order(offs[t], vi_madd16(sc, vi_bcast(y[t][b].b32 + 2 * p)));
    }
    for (int t = 0; t < T; ++t) acc[t] = vi_sub(acc[t], vi_shl<7>(offs[t]));
#endif
    const VF d = vf_load(w.d);
    for (int t = 0; t < T; ++t) facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t][b].d)), vf_cvt(acc[t]), facc[t]);
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// ---- Float formats (F32, F16, BF16) -----------------------------------------------------------

// Columns are padded to a multiple of 8 with zeros on both sides.
inline int64_t padded8(int64_t cols) { return (cols + 7) / 8 * 8; }

inline __m256 bf16x8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}

// Columns [c, c + 8) of a float-type row as floats (zeros past `cols`).
template <DType kType>
inline __m256 float8(const void* row, int64_t c, int64_t cols) {
  if (c + 8 <= cols) {
    if constexpr (kType == DType::f32) return _mm256_loadu_ps(static_cast<const float*>(row) + c);
    if constexpr (kType == DType::f16) return _mm256_cvtph_ps(load128(static_cast<const uint16_t*>(row) + c));
    if constexpr (kType == DType::bf16) return bf16x8(static_cast<const uint16_t*>(row) + c);
  }
  alignas(32) float tmp[8] = {};
  for (int64_t j = c; j < cols; ++j) {
    if constexpr (kType == DType::f32) tmp[j - c] = static_cast<const float*>(row)[j];
    if constexpr (kType == DType::f16) tmp[j - c] = half(static_cast<const uint16_t*>(row)[j]);
    if constexpr (kType == DType::bf16) {
      const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(row)[j]) << 16;
      std::memcpy(&tmp[j - c], &bits, 4);
    }
  }
  return _mm256_load_ps(tmp);
}

template <DType kType>
size_t float_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(n_tok * padded8(cols)) * sizeof(float);
}

// The activations (already rounded to the weight's type by matmul) as padded float rows.
template <DType kType>
void pack_float(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  auto* out = reinterpret_cast<float*>(packed);
  const int64_t stride = padded8(cols);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t c = 0; c < stride; c += 8)
      _mm256_storeu_ps(out + t * stride + c, float8<kType>(act + static_cast<size_t>(t) * act_row_bytes, c, cols));
}

// [padded cols / 8][8 columns][kRows rows] floats.
template <DType kType>
void repack_float(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const uint8_t* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  uint8_t* out = scratch;
  for (int64_t c = 0; c < w.cols; c += 8, out += 8 * kGroupBytes) {
    for (int h = 0; h < kHalves; ++h) {
      __m256i v[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_castps_si256(float8<kType>(rows[8 * h + i], c, w.cols));
      store_transposed(out, h, v);
    }
  }
}

template <int T>
void tile_float(const float* wb, int64_t cols, const float* const y[T], float* out, int64_t ldo, int n_rows) {
  VF a0[T], a1[T];  // two chains per token hide the FMA latency
  for (int t = 0; t < T; ++t) a0[t] = a1[t] = vf_zero();
  const int64_t n = padded8(cols);
  for (int64_t c = 0; c < n; c += 8, wb += 8 * kRows) {
    for (int k = 0; k < 8; k += 2) {
      const VF w0 = vf_load(wb + kRows * k), w1 = vf_load(wb + kRows * (k + 1));
      for (int t = 0; t < T; ++t) {
        a0[t] = vf_fmadd(w0, vf_set1(y[t][c + k]), a0[t]);
        a1[t] = vf_fmadd(w1, vf_set1(y[t][c + k + 1]), a1[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, vf_add(a0[t], a1[t]), n_rows);
}

// ---- Drivers -----------------------------------------------------------------------------------

size_t legacy_scratch(int64_t cols) { return static_cast<size_t>(cols / kQK) * sizeof(WLegacy); }
size_t k4_scratch(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(WK4); }
size_t k6_scratch(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(WK6); }
size_t float_scratch(int64_t cols) { return static_cast<size_t>(padded8(cols)) * kRows * sizeof(float); }

// Tile<n>::run for the last n < kTok tokens of a group.
template <template <int> class Tile, int T = kTok - 1, typename WB, typename Act>
inline void run_tail(int n, const WB* wb, int64_t n_wb, const Act* const* y, float* out, int64_t ldo, int n_rows) {
  if constexpr (T >= 1) {
    if (n == T)
      Tile<T>::run(wb, n_wb, y, out, ldo, n_rows);
    else
      run_tail<Tile, T - 1>(n, wb, n_wb, y, out, ldo, n_rows);
  }
}

// All token tiles of one group of rows: out[t * ldo + i] for its rows i < n_rows.
template <template <int> class Tile, typename WB, typename Act>
void run_tiles(const WB* wb, int64_t n_wb, const Act* act, int64_t n_act, int64_t n_tok, float* out, int64_t ldo,
               int n_rows) {
  int64_t t = 0;
  for (; t + kTok <= n_tok; t += kTok) {
    const Act* y[kTok];
    for (int j = 0; j < kTok; ++j) y[j] = act + (t + j) * n_act;
    Tile<kTok>::run(wb, n_wb, y, out + t * ldo, ldo, n_rows);
  }
  if (t < n_tok) {
    const Act* y[kTok];
    for (int j = 0; t + j < n_tok; ++j) y[j] = act + (t + j) * n_act;
    run_tail<Tile>(static_cast<int>(n_tok - t), wb, n_wb, y, out + t * ldo, ldo, n_rows);
  }
}

// Repack each group of kRows rows of [r0, r1), then run its token tiles. n_act: packed
// activation elements per token; n_wb: what the tile function iterates over (blocks, columns).
template <typename Act, typename WB, void (*Repack)(const GemmWeights&, int64_t, int, uint8_t*),
          template <int> class Tile>
void run_groups(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch, int64_t n_act, int64_t n_wb) {
  const auto* act = reinterpret_cast<const Act*>(packed);
  const auto* wb = reinterpret_cast<const WB*>(scratch);
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const int n_rows = static_cast<int>(min64(kRows, r1 - g0));
    Repack(w, g0, n_rows, scratch);
    run_tiles<Tile>(wb, n_wb, act, n_act, n_tok, out + g0, ldo, n_rows);
  }
}

template <int kFlush, bool kMin>
struct LegacyTile {
  template <int T>
  struct Of {
    static void run(const WLegacy* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
      tile_legacy<T, kFlush, kMin>(wb, nb, y, out, ldo, n_rows);
    }
  };
};

template <int kFlush>
struct K4Tile {
  template <int T>
  struct Of {
    static void run(const WK4* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
      tile_k4<T, kFlush>(wb, nb, y, out, ldo, n_rows);
    }
  };
};

template <int T>
struct K6Tile {
  static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_q6_k<T, 2>(wb, nb, y, out, ldo, n_rows);
  }
};

// Q3_K: zero point 4; Q2_K: mins. Both flush the int16 sums every 4 groups (the split
// multipliers change there); pairs stay far below int16's range (2 * 7 * 127).
template <int T>
struct K3Tile {
  static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_k16<T, 4, 2>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct K2Tile {
  static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_k16<T, 4, 0, true>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct IQ4XSTile {
  static void run(const WK4* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_iq4_xs<T>(wb, nb, y, out, ldo, n_rows);
  }
};

template <int T>
struct FloatTile {
  static void run(const float* wb, int64_t cols, const float* const* y, float* out, int64_t ldo, int n_rows) {
    tile_float<T>(wb, cols, y, out, ldo, n_rows);
  }
};

template <typename BX, __m256i (*Quants)(const BX&), int kFlush, bool kMin>
void run_legacy(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK;
  run_groups<ActQ8, WLegacy, repack_legacy<BX, Quants, kMin>, LegacyTile<kFlush, kMin>::template Of>(
      w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

template <bool kFive, typename Block>
void run_k4(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
            int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  run_groups<ActQ8K, WK4, repack_k4<kFive, Block>, K4Tile<kFive ? 4 : 8>::template Of>(w, packed, n_tok, r0, r1, out,
                                                                                       ldo, scratch, nb, nb);
}

void run_q6_k(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
              int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  run_groups<ActQ8K, WK6, repack_q6_k, K6Tile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

template <bool kThree, typename Block>
void run_k2(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
            int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  if constexpr (kThree)
    run_groups<ActQ8K, WK6, repack_k2<true, Block>, K3Tile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
  else
    run_groups<ActQ8K, WK6, repack_k2<false, Block>, K2Tile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

void run_iq4_xs(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  run_groups<ActQ8K, WK4, repack_iq4_xs, IQ4XSTile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

template <DType kType>
void run_float(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
               int64_t ldo, uint8_t* scratch) {
  run_groups<float, float, repack_float<kType>, FloatTile>(w, packed, n_tok, r0, r1, out, ldo, scratch,
                                                           padded8(w.cols), w.cols);
}

}  // namespace
}  // namespace edgelm::kernels::x86
