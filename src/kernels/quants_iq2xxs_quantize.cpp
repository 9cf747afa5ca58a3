// The IQ2_XXS quantizer (declared in quants_weighted.h): the ecosystem's method (ik_llama.cpp's
// revision), so that the bytes equal the reference quantizer's.
//
// Per 32 elements: the signs are stored apart as 7 bits per 8 (even parity, quants_grid_search.h);
// the magnitudes are fitted as scale * (2 l + 1), l in [0, 2], each 8 consecutive l forming a
// point that must lie on the 256-entry grid (kIq2xxsGrid). A first scale comes from the weighted
// positive fit of the magnitudes to 0..4 (fit_positive); 13 candidate scales around it round the
// l, an off-grid point taking its nearest grid neighbour (by weighted distance, among the grid
// points at the two smallest squared distances); the best weighted least-squares fit wins, then
// every point is re-rounded at its scale and the scale refitted. The 8 block scales go to 4 bits
// against d = max / 31, stored in the top nibble of each block's sign word.
// Weights: imatrix * sqrt(sigma2 + x^2) (sigma2 = mean(x^2) of the super-block). The reference
// refuses IQ2_XXS without an importance matrix, and so does edgelm (the unweighted branch,
// sigma2 / 4 + x^2, is its formula but has no entry point).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/fp16.h"
#include "kernels/quants_grid_search.h"
#include "kernels/quants_iq_grid.h"
#include "kernels/quants_k.h"
#include "kernels/quants_weighted.h"

namespace edgelm::kernels {
namespace {

#include "kernels/iq_grids.inc"

constexpr int kMaxQ = 3;
constexpr int kMapSize = 43692;  // 8 two-bit values, each at most 2
constexpr float kGroupMaxEps = 1e-15f;

int nearest_int(float v) { return static_cast<int>(std::lrint(v)); }

// 8 odd magnitudes per point, l of 2 bits, the neighbours at the two smallest squared distances.
using Iq2xxsSearch = GridSearch<8, 2, 2, kMapSize, 256>;

const Iq2xxsSearch& tables() {
  static const Iq2xxsSearch t = Iq2xxsSearch::build([](int k, int i) {
    const int b = static_cast<int>((kIq2xxsGrid[k] >> (8 * i)) & 0xff);  // 8, 25, 43 for l = 0, 1, 2
    EDGELM_CHECK(b == 8 || b == 25 || b == 43, "IQ2_XXS grid value ", b);
    return 2 * (b == 8 ? 0 : b == 25 ? 1 : 2) + 1;
  });
  return t;
}

void iq2_xxs_row(const float* x, void* vy, int64_t n, const float* qw) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  const Iq2xxsSearch& t = tables();
  auto* y = static_cast<BlockIQ2_XXS*>(vy);
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    BlockIQ2_XXS& b = y[ibl];
    b.d = fp32_to_fp16(0.0f);
    uint32_t q2[2 * (kQK_K / 32)] = {};
    float scales[kQK_K / 32];
    float max_scale = 0;
    const float* xbl = x + kQK_K * ibl;
    float sumx2 = 0;
    for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = sumx2 / kQK_K;

    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      float weight[32], waux[32], xval[32];
      int8_t L[32] = {}, Laux[32];
      uint8_t block_signs[4];
      for (int i = 0; i < 32; ++i)
        weight[i] = qw != nullptr ? qw[kQK_K * ibl + 32 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i])
                                  : 0.25f * sigma2 + xb[i] * xb[i];
      for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 4; ++k) block_signs[k] = even_parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
      float max = xval[0];
      for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
      scales[ib] = 0;
      if (max < kGroupMaxEps) continue;  // grid index 0, signs 0, scale 0 (q2 stays 0)

      uint8_t Lqp[32];
      float scale = fit_positive(32, kMaxQ + 1, xval, Lqp, weight);
      const float eff_max = scale * kMaxQ;
      float best = 0;
      for (int is = -6; is <= 6; ++is) {
        const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.1f) / eff_max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 4; ++k) t.round_point(xval + 8 * k, waux + 8 * k, id, this_scale, kMaxQ, Laux + 8 * k);
        const auto [sumqx, sumq2] = odd_level_sums(32, weight, xval, Laux);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, sizeof(L));
        }
      }
      if (scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 4; ++k) t.round_point(xval + 8 * k, waux + 8 * k, id, scale, kMaxQ, L + 8 * k);
        const auto [sumqx, sumq2] = odd_level_sums(32, weight, xval, L);
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {  // keeps the stored scale unsigned
        scale = -scale;
        for (uint8_t& s : block_signs) s = static_cast<uint8_t>(~s & 127);
      }
      for (int k = 0; k < 4; ++k) {
        const int gi = t.index_of(L + 8 * k, "IQ2_XXS");
        q2[2 * ib] |= static_cast<uint32_t>(gi) << (8 * k);
        q2[2 * ib + 1] |= static_cast<uint32_t>(block_signs[k]) << (7 * k);
      }
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }

    if (max_scale == 0.0f) {
      std::memset(b.qs, 0, sizeof(b.qs));
      continue;
    }
    const float d = max_scale / 31;
    b.d = fp32_to_fp16(d);
    const float id = 1 / d;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
      q2[2 * ib + 1] |= static_cast<uint32_t>(l) << 28;
    }
    static_assert(sizeof(q2) == sizeof(b.qs));
    std::memcpy(b.qs, q2, sizeof(b.qs));
  }
}

}  // namespace

void iq2_xxs_from_float_weighted(const float* x, void* y, int64_t n, const float* qw) { iq2_xxs_row(x, y, n, qw); }

}  // namespace edgelm::kernels
