// The IQ3_XXS quantizer (declared in quants_iq_grid.h and quants_weighted.h): the ecosystem's
// method, so that the bytes equal the reference quantizer's.
//
// Per 32 elements: the signs are stored as 7 bits per 8 (even parity, quants_grid_search.h); the
// magnitudes are fitted as scale * (2 l + 1), l in [0, 7], every 4 consecutive l forming a point
// that must lie on the 256-entry grid (kIq3xxsGrid). For 31 candidate scales the l are rounded; a
// point off the grid takes its nearest grid neighbour (by weighted distance, among the grid points
// at the two smallest squared distances, precomputed once); the candidate with the best weighted
// least-squares fit wins, and if it used neighbours those points are re-rounded at its scale and
// the scale refitted. The 8 block scales go to 4 bits against d = max / 31 (stored * 1.0125), in
// the top nibble of each block's sign word.
// Weights: imatrix * sqrt(sigma2 + x^2) (sigma2 = 2 mean(x^2) of the super-block), or x^2
// without an imatrix.
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

constexpr int kMaxQ = 8;
constexpr int kMapSize = 4096;  // 4 three-bit values
constexpr float kGroupMaxEps = 1e-8f;

int nearest_int(float v) { return static_cast<int>(std::lrint(v)); }

// 4 odd magnitudes per point, l of 3 bits, the neighbours at the two smallest squared distances.
using Iq3xxsSearch = GridSearch<4, 3, 2, kMapSize, 256>;

const Iq3xxsSearch& tables() {
  static const Iq3xxsSearch t = Iq3xxsSearch::build([](int k, int i) {
    const int b = static_cast<int>((kIq3xxsGrid[k] >> (8 * i)) & 0xff);  // 4, 12, ..., 52, 62 for l = 0..7
    EDGELM_CHECK(b == 62 || (b >= 4 && b <= 52 && (b - 4) % 8 == 0), "IQ3_XXS grid value ", b);
    return 2 * (b == 62 ? 7 : (b - 4) / 8) + 1;
  });
  return t;
}

void iq3_xxs_row(const float* x, void* vy, int64_t n, const float* qw) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  const Iq3xxsSearch& t = tables();
  auto* y = static_cast<BlockIQ3_XXS*>(vy);
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    BlockIQ3_XXS& b = y[ibl];
    b.d = fp32_to_fp16(0.0f);
    uint8_t qs[sizeof(b.qs)] = {};
    uint32_t scales_and_signs[kQK_K / 32] = {};
    float scales[kQK_K / 32];
    float max_scale = 0;
    const float* xbl = x + kQK_K * ibl;
    float sumx2 = 0;
    for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = 2 * sumx2 / kQK_K;

    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      float weight[32], waux[32], xval[32];
      int8_t L[32] = {}, Laux[32];
      uint8_t block_signs[4];
      for (int i = 0; i < 32; ++i)
        weight[i] = qw != nullptr ? qw[kQK_K * ibl + 32 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
      for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 4; ++k) block_signs[k] = even_parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
      float max = xval[0];
      for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
      scales[ib] = 0;
      if (max < kGroupMaxEps) continue;  // grid index 0, signs 0, scale 0

      float best = 0;
      float scale = max / (2 * kMaxQ - 1);
      bool on_grid[8] = {}, on_grid_aux[8];
      for (int is = -15; is <= 15; ++is) {
        const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 8; ++k)
          on_grid_aux[k] = t.round_point(xval + 4 * k, waux + 4 * k, id, this_scale, kMaxQ, Laux + 4 * k).on_grid;
        const auto [sumqx, sumq2] = odd_level_sums(32, weight, xval, Laux);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, sizeof(L));
          std::memcpy(on_grid, on_grid_aux, sizeof(on_grid));
        }
      }
      const bool any_off = std::find(std::begin(on_grid), std::end(on_grid), false) != std::end(on_grid);
      if (any_off && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 8; ++k)
          if (!on_grid[k]) t.round_point(xval + 4 * k, waux + 4 * k, id, scale, kMaxQ, L + 4 * k);
        const auto [sumqx, sumq2] = odd_level_sums(32, weight, xval, L);
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {  // cannot happen for magnitudes; keeps the stored scale unsigned
        scale = -scale;
        for (uint8_t& s : block_signs) s = static_cast<uint8_t>(~s & 127);
      }
      for (int k = 0; k < 8; ++k) {
        const int gi = t.index_of(L + 4 * k, "IQ3_XXS");
        qs[8 * ib + k] = static_cast<uint8_t>(gi);
      }
      scales_and_signs[ib] = block_signs[0] | (block_signs[1] << 7) | (block_signs[2] << 14) |
                             (static_cast<uint32_t>(block_signs[3]) << 21);
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }

    if (max_scale == 0.0f) {
      std::memset(b.qs, 0, sizeof(b.qs));
      std::memset(b.scales_and_signs, 0, sizeof(b.scales_and_signs));
      continue;
    }
    const float d = max_scale / 31;
    b.d = fp32_to_fp16(d * 1.0125f);
    const float id = 1 / d;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
      scales_and_signs[ib] |= static_cast<uint32_t>(l) << 28;
    }
    std::memcpy(b.qs, qs, sizeof(b.qs));
    static_assert(sizeof(scales_and_signs) == sizeof(b.scales_and_signs));
    std::memcpy(b.scales_and_signs, scales_and_signs, sizeof(b.scales_and_signs));
  }
}

}  // namespace

void iq3_xxs_from_float(const float* x, void* y, int64_t n) { iq3_xxs_row(x, y, n, nullptr); }

void iq3_xxs_from_float_weighted(const float* x, void* y, int64_t n, const float* qw) { iq3_xxs_row(x, y, n, qw); }

}  // namespace edgelm::kernels
