// Part of gemm_x86_impl.h (read its comment first): the K formats (256-element super-blocks:
// Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS) as groups of kRows rows.
#pragma once
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error "gemm_x86_kquants.h is part of gemm_x86_impl.h, the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif

#include "kernels/gemm_x86_blocks.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_ternary.h"

namespace edgelm::kernels::x86 {
namespace {

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

// Q2_K, Q3_K and TQ2_0 into WK6: sub-block s of 32 elements (128h + 32k + l, k = s % 4) are bits
// 2k of qs[32h + l]; Q3_K adds 4 where bit s of hmask[l] is set (q' = q + 4 in [0, 7], zero point
// 4, scales ls - 32), Q2_K keeps q in [0, 3] with its 4-bit scales and mins; TQ2_0 (kThree's
// zero-point form) keeps q in [0, 2] with zero point 1 and every scale 1, one d per 256.
template <bool kThree, typename Block>
void repack_k2(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  constexpr bool kTernary = std::is_same_v<Block, BlockTQ2_0>;
  static_assert(kThree || !kTernary);
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
      if constexpr (kTernary) {
        o.dmin[i] = 0.0f;
        for (int j = 0; j < 16; ++j) sc[j] = 1;
      } else if constexpr (kThree) {
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
          if constexpr (kThree && !kTernary) {
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

// One TQ2_0 block b for T tokens: q in [0, 2] with zero point 1 and no sub-block scales, so the
// sums of q . y unscaled (AVX2: the 8 groups' maddubs pairs summed in int16, 8 * 2 * 2 * 127 <
// 2^15), minus the activations' sum, then facc += (d y.d) times that. groups(s): sub-block s's
// groups (the unpacked scratch or the packed layout's lambda), d: the block's scales.
template <int T, typename Groups>
inline void tq2_block(Groups groups, VF d, const ActQ8K* const y[T], int64_t b, VF facc[T]) {
#if !EDGELM_GEMM_VNNI
  const VI ones = _mm256_set1_epi16(1);
#else
  const VI ones = vi_zero();  // unused
#endif
  VI acc[T];
  for (int t = 0; t < T; ++t) acc[t] = vi_zero();
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    const int8_t* yq[T];
    for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
    sub_dot_u8<T, 8, false>(groups(s), yq, ones, ones, acc);
  }
  for (int t = 0; t < T; ++t) {
    int32_t ysum = 0;
    for (int j = 0; j < 16; ++j) ysum += y[t][b].b16[j];
    facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t][b].d)), vf_cvt(vi_sub(acc[t], vi_set1(ysum))), facc[t]);
  }
}

// TQ2_0 over WK6 (repack_k2 / unpack_tq2_0: the quants as bytes, d as floats; the unit
// multipliers unused): tq2_block per block, as tile_packed_tq2_0, so the same bits.
template <int T>
void tile_tq2_0(const WK6* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const WK6& w = wb[b];
    tq2_block<T>([&w](int s) { return from_scratch(w.q[s]); }, vf_load(w.d), y, b, facc);
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

}  // namespace
}  // namespace edgelm::kernels::x86
