// The IQ2_S quantizer (declared in quants_iq_grid.h and quants_weighted.h): the ecosystem's
// method, so that the bytes equal the reference quantizer's.
//
// Per 16 elements: one sign bit per element (no parity); the magnitudes are fitted as
// scale * (2 l + 1), l in [0, 2], each 8 consecutive l forming a point that must lie on the
// 1024-entry grid (kIq2sGrid). For 19 candidate scales the l are rounded; a point off the grid
// takes its nearest grid neighbour (by weighted distance, among the grid points at the smallest
// squared distance, precomputed once); the best weighted least-squares fit wins, and if it used
// neighbours those points are re-rounded at its scale and the scale refitted. The 16 block scales
// go to 4 bits against d = max / 31 (stored * 0.9875).
// Weights: imatrix * sqrt(sigma2 + x^2), or sigma2 / 4 + x^2 without an imatrix (sigma2 =
// 2 mean(x^2) of the super-block).
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
constexpr float kGroupMaxEps = 1e-8f;

int nearest_int(float v) { return static_cast<int>(std::lrint(v)); }

// 8 odd magnitudes per point, l of 2 bits, the neighbours at the smallest squared distance.
using Iq2sSearch = GridSearch<8, 2, 1, kMapSize, 1024>;

const Iq2sSearch& tables() {
  static const Iq2sSearch t = Iq2sSearch::build([](int k, int i) {
    const int b = static_cast<int>((kIq2sGrid[k] >> (8 * i)) & 0xff);  // 8, 25, 43 for l = 0, 1, 2
    EDGELM_CHECK(b == 8 || b == 25 || b == 43, "IQ2_S grid value ", b);
    return 2 * (b == 8 ? 0 : b == 25 ? 1 : 2) + 1;
  });
  return t;
}

void iq2_s_row(const float* x, void* vy, int64_t n, const float* qw) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  const Iq2sSearch& t = tables();
  auto* y = static_cast<BlockIQ2_S*>(vy);
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    BlockIQ2_S& b = y[ibl];
    b = BlockIQ2_S{};
    float scales[kQK_K / 16];
    float max_scale = 0;
    const float* xbl = x + kQK_K * ibl;
    float sumx2 = 0;
    for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = 2 * sumx2 / kQK_K;

    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      float weight[16], waux[16], xval[16];
      int8_t L[16] = {}, Laux[16];
      uint8_t block_signs[2];
      for (int i = 0; i < 16; ++i)
        weight[i] = qw != nullptr ? qw[kQK_K * ibl + 16 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i])
                                  : 0.25f * sigma2 + xb[i] * xb[i];
      for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 2; ++k) {
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
          const float v = xb[8 * k + i];
          xval[8 * k + i] = v >= 0 ? v : -v;
          if (v < 0) s = static_cast<uint8_t>(s | (1 << i));
        }
        block_signs[k] = s;
      }
      float max = xval[0];
      for (int i = 1; i < 16; ++i) max = std::max(max, xval[i]);
      scales[ib] = 0;
      if (max < kGroupMaxEps) continue;  // grid index 0, signs 0, scale 0

      float best = 0;
      float scale = max / (2 * kMaxQ - 1);
      bool on_grid[2] = {true, true}, on_grid_aux[2];
      for (int is = -9; is <= 9; ++is) {
        const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.1f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 2; ++k)
          on_grid_aux[k] = t.round_point(xval + 8 * k, waux + 8 * k, id, this_scale, kMaxQ, Laux + 8 * k).on_grid;
        const auto [sumqx, sumq2] = odd_level_sums(16, weight, xval, Laux);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, sizeof(L));
          std::memcpy(on_grid, on_grid_aux, sizeof(on_grid));
        }
      }
      if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; ++k)
          if (!on_grid[k]) t.round_point(xval + 8 * k, waux + 8 * k, id, scale, kMaxQ, L + 8 * k);
        const auto [sumqx, sumq2] = odd_level_sums(16, weight, xval, L);
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {  // cannot happen for magnitudes; keeps the stored scale unsigned
        scale = -scale;
        for (uint8_t& s : block_signs) s = static_cast<uint8_t>(~s);
      }
      for (int k = 0; k < 2; ++k) {
        const int gi = t.index_of(L + 8 * k, "IQ2_S");
        const int i8 = 2 * ib + k;
        b.qs[i8] = static_cast<uint8_t>(gi & 255);
        b.qh[i8 / 4] = static_cast<uint8_t>(b.qh[i8 / 4] | ((gi >> 8) << (2 * (i8 % 4))));
        b.signs[i8] = block_signs[k];
      }
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }

    if (max_scale == 0.0f) continue;
    const float d = max_scale / 31;
    b.d = fp32_to_fp16(d * 0.9875f);
    const float id = 1 / d;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
      b.scales[ib / 2] = static_cast<uint8_t>(ib % 2 == 0 ? l : (b.scales[ib / 2] | (l << 4)));
    }
  }
}

}  // namespace

void iq2_s_from_float(const float* x, void* y, int64_t n) { iq2_s_row(x, y, n, nullptr); }

void iq2_s_from_float_weighted(const float* x, void* y, int64_t n, const float* qw) { iq2_s_row(x, y, n, qw); }

}  // namespace edgelm::kernels
