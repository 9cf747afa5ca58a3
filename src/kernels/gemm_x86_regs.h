// Part of gemm_x86_impl.h (read its comment first): the registers of one group of kRows weight
// rows (ymm or zmm by EDGELM_GEMM_ZMM), their integer/float operations and the small load and
// scale helpers every format's kernel uses.
#pragma once
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error "gemm_x86_regs.h is part of gemm_x86_impl.h, the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/kernels_x86.h"

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
inline VI vi_xor(VI a, VI b) { return _mm512_xor_si512(a, b); }
// 16 bytes at p in every 128-bit lane, and a byte lookup in such a table (indices 0..15).
inline VI vi_bcast16(const void* p) { return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
inline VI vi_lookup16(VI table, VI idx) { return _mm512_shuffle_epi8(table, idx); }
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
inline VI vi_xor(VI a, VI b) { return _mm256_xor_si256(a, b); }
inline VI vi_bcast16(const void* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
inline VI vi_lookup16(VI table, VI idx) { return _mm256_shuffle_epi8(table, idx); }
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

}  // namespace
}  // namespace edgelm::kernels::x86
