// Part of gemm_x86_impl.h (read its comment first): the grid IQ formats (IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S, IQ1_M; quants_iq_grid.h) as groups of kRows rows.
//
// The repack decodes every block of a group to its integer form (the scalar library's *_ints:
// d * sc[16-element sub-block] * q, q int8 with the signs applied, |q| <= 62, sc odd <= 31) and
// stores it in the K formats' WK6 layout: q per 32-element sub-block transposed as the int8 tiles
// take it, the 16 scales as multipliers (set_mult), and as pairs in scp for VNNI's zero point.
// AVX2: |q| . sign(y, q) with maddubs, int16 sums of kFlush groups (pairs <= 2 * 62 * 127; the
// caller picks kFlush from the format's bound), widened by madd with the half's scale. VNNI:
// q + 128 as unsigned bytes, tile_k16 with zero point 128. Every (row, token) block sum is the
// scalar vec_dot's exact isum; the float epilogue differs from it by reassociation only
// (tests/kernels/test_gemm.cpp).
#pragma once
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error "gemm_x86_iqgrid.h is part of gemm_x86_impl.h, the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif

#include "kernels/gemm_x86_kquants.h"
#include "kernels/quants_iq_grid.h"

namespace edgelm::kernels::x86 {
namespace {

// kInts: the format's *_ints; kBlockBytes: its block size in bytes.
template <GridIntsFn kInts, size_t kBlockBytes>
void repack_iq_grid(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const uint8_t* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  auto* out = reinterpret_cast<WK6*>(scratch);
  const int64_t nb = w.cols / kQK_K;
  GridInts g[kRows];
  for (int64_t b = 0; b < nb; ++b) {
    WK6& o = out[b];
    for (int i = 0; i < kRows; ++i) {
      const uint8_t* x = rows[i] + static_cast<size_t>(b) * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(x) + 2 * kBlockBytes, _MM_HINT_T0);
      kInts(x, &g[i]);
      o.d[i] = g[i].d;
      o.dmin[i] = 0.0f;
      for (int j = 0; j < 16; ++j) set_mult(o.sc[j], i, g[i].sc[j]);
      for (int p = 0; p < 8; ++p) {
        o.scp[p][2 * i] = g[i].sc[2 * p];
        o.scp[p][2 * i + 1] = g[i].sc[2 * p + 1];
      }
    }
    for (int s = 0; s < 8; ++s) {
      for (int h = 0; h < kHalves; ++h) {
        __m256i v[8];
        for (int i = 0; i < 8; ++i) {
          v[i] = load256(g[8 * h + i].q + 32 * s);
          if (EDGELM_GEMM_VNNI) v[i] = _mm256_xor_si256(v[i], _mm256_set1_epi8(static_cast<char>(0x80)));
        }
        store_transposed(o.q[s], h, v);
      }
    }
  }
}

#if !EDGELM_GEMM_VNNI
// Signed weights with a multiplier per 16 elements (mult_lo for groups 0-3, mult_hi for 4-7):
// |w| . sign(y, w), int16 sums of kFlush groups (kFlush 2: |w| <= 64; 4: |w| <= 32), widened.
template <int T, int kFlush, typename Groups>
inline void sub_dot_s8_split(Groups q, const int8_t* const y[T], VI mult_lo, VI mult_hi, VI acc[T]) {
#pragma GCC unroll 8
  for (int h = 0; h < 8; h += kFlush) {
    VI p[T];
#pragma GCC unroll 8
    for (int g = h; g < h + kFlush; ++g) {
      const VI w = q(g);
      const VI aw = _mm256_sign_epi8(w, w);
      for (int t = 0; t < T; ++t) {
        const VI pr = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(vi_bcast(y[t] + 4 * g), w));
        p[t] = g == h ? pr : _mm256_add_epi16(p[t], pr);
        in_order(p[t]);
      }
    }
    const VI mult = h < 4 ? mult_lo : mult_hi;
    for (int t = 0; t < T; ++t) add_in_order(acc[t], vi_madd16(p[t], mult));
  }
}
#endif

template <int T, int kFlush>
void tile_iq_grid(const WK6* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
#if EDGELM_GEMM_VNNI
  tile_k16<T, 8, 7>(wb, nb, y, out, ldo, n_rows);  // q + 128: zero point 1 << 7
#else
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const WK6& w = wb[b];
    VI acc[T];
    for (int t = 0; t < T; ++t) acc[t] = vi_zero();
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      sub_dot_s8_split<T, kFlush>(from_scratch(w.q[s]), yq, vi_load(w.sc[2 * s]), vi_load(w.sc[2 * s + 1]), acc);
    }
    const VF d = vf_load(w.d);
    for (int t = 0; t < T; ++t) facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t][b].d)), vf_cvt(acc[t]), facc[t]);
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
#endif
}

// kFlush per format: 4 where |q| <= 15 (IQ3_S, IQ1_S, IQ1_M: 8 * 15 * 127 < 2^15), else 2
// (|q| <= 62: 4 * 62 * 127 = 31496).
template <int kFlush>
struct IqGridTile {
  template <int T>
  struct Of {
    static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
      tile_iq_grid<T, kFlush>(wb, nb, y, out, ldo, n_rows);
    }
  };
};

}  // namespace
}  // namespace edgelm::kernels::x86
