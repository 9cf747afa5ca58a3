// Part of gemm_x86_impl.h (read its comment first): unpacking one 32-element sub-block to
// bytes, the packed activations, the integer sub-block dot of kRows rows x T tokens, and the
// legacy formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL: 32-element blocks).
#pragma once
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error "gemm_x86_blocks.h is part of gemm_x86_impl.h, the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif

#include "kernels/gemm_x86_regs.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels::x86 {
namespace {

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

}  // namespace
}  // namespace edgelm::kernels::x86
