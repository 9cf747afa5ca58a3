// Part of gemm_x86_impl.h (read its comment first): the grid IQ formats (IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S, IQ1_M; quants_iq_grid.h) as groups of kRows rows.
//
// The repack decodes every block of a group to its integer form with the AVX2 decoders of
// iq_grid_x86.h (the scalar *_ints' d * sc[16-element sub-block] * q, q int8 with the signs
// applied, sc odd <= 31) and stores it in
// the K formats' WK6 layout, as Q3_K and Q6_K are: q + (1 << kShift) as unsigned bytes per
// 32-element sub-block, transposed as the tiles take them, the 16 scales as multipliers
// (set_mult) and as pairs in scp for the zero point, which tile_k16 subtracts as
// (1 << kShift) * sum_j sc_j * bsums_j. kShift 4 where |q| <= 15 (IQ3_S, IQ1_S, IQ1_M: q + 16 in
// [1, 31], AVX2 int16 sums of 4 groups, 8 * 31 * 127 < 2^15), 6 where |q| <= 62 (the IQ2 formats,
// IQ3_XXS: q + 64 in [2, 126], pairs <= 2 * 126 * 127 < 2^15, widened every group). Every
// (row, token) block sum is the scalar vec_dot's exact isum; the float epilogue differs from it
// by reassociation only (tests/kernels/test_gemm.cpp).
#pragma once
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error \
    "gemm_x86_iqgrid.h is part of gemm_x86_impl.h, the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif

#include "kernels/gemm_x86_kquants.h"
#include "kernels/iq_grid_x86.h"

namespace edgelm::kernels::x86 {
namespace {

// Format: a decoder of iq_grid_x86.h; q stored as q + (1 << kShift).
template <typename Format, int kShift>
void repack_iq_grid(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  using Block = typename Format::Block;
  const Block* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  auto* out = reinterpret_cast<WK6*>(scratch);
  const int64_t nb = w.cols / kQK_K;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(1 << kShift)), one = _mm256_set1_epi8(1);
  __m256i q[kRows][8];
  for (int64_t b = 0; b < nb; ++b) {
    WK6& o = out[b];
    for (int i = 0; i < kRows; ++i) {
      const Block& x = rows[i][b];
      _mm_prefetch(reinterpret_cast<const char*>(&x) + 2 * sizeof(Block), _MM_HINT_T0);
      o.d[i] = Format::d(x);
      o.dmin[i] = 0.0f;
      Format::subs(x, [&](int ib, __m256i v, __m256i mask, __m256i, int lo, int hi) {
        const __m256i sv = Format::kSignedV ? v : _mm256_sign_epi8(v, _mm256_or_si256(mask, one));
        q[i][ib] = _mm256_add_epi8(sv, bias);
        set_mult(o.sc[2 * ib], i, lo);
        set_mult(o.sc[2 * ib + 1], i, hi);
        o.scp[ib][2 * i] = static_cast<int16_t>(lo);
        o.scp[ib][2 * i + 1] = static_cast<int16_t>(hi);
      });
    }
    for (int s = 0; s < 8; ++s) {
      for (int h = 0; h < kHalves; ++h) {
        __m256i v[8];
        for (int i = 0; i < 8; ++i) v[i] = q[8 * h + i][s];
        store_transposed(o.q[s], h, v);
      }
    }
  }
}

// tile_k16 with zero point 1 << kShift; kFlush: the int16 groups of AVX2 (IqGridTile).
template <int kShift, int kFlush>
struct IqGridTile {
  template <int T>
  struct Of {
    static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
      tile_k16<T, kFlush, kShift>(wb, nb, y, out, ldo, n_rows);
    }
  };
};

}  // namespace
}  // namespace edgelm::kernels::x86
