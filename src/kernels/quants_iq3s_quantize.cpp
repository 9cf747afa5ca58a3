// The IQ3_S quantizer (declared in quants_iq_grid.h and quants_weighted.h): the ecosystem's
// method, so that the bytes equal the reference quantizer's.
//
// Per 32 elements the signs are stored apart and the magnitudes |x| fitted as scale * (2 l + 1),
// l in [0, 7], with every 4 consecutive l forming a point that must lie on the 512-entry grid
// (kIq3sGrid). For 19 candidate scales the l are rounded; a 4-tuple off the grid is replaced by
// its nearest grid neighbour (by weighted distance, among the grid points at the three smallest
// squared distances from it, precomputed once); the candidate with the best weighted
// least-squares fit wins, and if it used neighbours the quants are re-rounded at its scale and
// the scale refitted. The 8 block scales go to 4 bits against d = max / 31 (stored * 1.033).
// Weights: imatrix * sqrt(sigma2 + x^2) (sigma2 = 2 mean(x^2) of the super-block), or x^2
// without an imatrix.
//
// One deliberate difference: the reference does not advance its output position past an
// all-zero block of 32 (a later block's indices land in its place); here every block keeps its
// own slot, so such rows decode correctly (and differ from the reference's bytes).
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

constexpr int kBlock = 32;
constexpr int kMaxQ = 8;
constexpr int kMapSize = 4096;  // 4 three-bit values

int nearest_int(float v) { return static_cast<int>(std::lrint(v)); }

// The grid search (quants_grid_search.h): 4 odd magnitudes per point, l of 3 bits, the
// neighbours at the 3 smallest squared distances.
using Iq3sTables = GridSearch<4, 3, 3, kMapSize, 512>;

const Iq3sTables& tables() {
  static const Iq3sTables t =
      Iq3sTables::build([](int k, int i) { return static_cast<int>((kIq3sGrid[k] >> (8 * i)) & 0xff); });
  return t;
}

void iq3_s_row(const float* x, void* vy, int64_t n, const float* qw) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  const Iq3sTables& t = tables();
  auto* y = static_cast<BlockIQ3_S*>(vy);
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    BlockIQ3_S& b = y[ibl];
    b = BlockIQ3_S{};
    const float* xbl = x + kQK_K * ibl;
    float sumx2 = 0;
    for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = 2 * sumx2 / kQK_K;
    float scales[kQK_K / kBlock];
    float max_scale = 0;
    for (int ib = 0; ib < kQK_K / kBlock; ++ib) {
      const float* xb = xbl + kBlock * ib;
      float weight[kBlock], waux[kBlock], xval[kBlock];
      int8_t L[kBlock] = {}, Laux[kBlock];  // L stays 0 (on the grid) if no candidate fits (all weights 0)
      uint8_t signs[kBlock / 8];
      for (int i = 0; i < kBlock; ++i)
        weight[i] = qw != nullptr ? qw[kQK_K * ibl + kBlock * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
      for (int i = 0; i < kBlock; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < kBlock / 8; ++k) {
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
          const float v = xb[8 * k + i];
          xval[8 * k + i] = v >= 0 ? v : -v;
          if (v < 0) s = static_cast<uint8_t>(s | (1 << i));
        }
        signs[k] = s;
      }
      float max = xval[0];
      for (int i = 1; i < kBlock; ++i) max = std::max(max, xval[i]);
      scales[ib] = 0;
      if (max == 0.0f) continue;  // all zero: grid index 0 at the smallest scale, as the reference
      float best = 0;
      float scale = max / (2 * kMaxQ - 1);
      bool on_grid[kBlock / 4] = {}, on_grid_aux[kBlock / 4];
      for (int is = -9; is <= 9; ++is) {
        const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < kBlock / 4; ++k)
          on_grid_aux[k] = t.round_point(xval + 4 * k, waux + 4 * k, id, this_scale, kMaxQ, Laux + 4 * k).on_grid;
        const auto [sumqx, sumq2] = odd_level_sums(kBlock, weight, xval, Laux);
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
        for (int k = 0; k < kBlock / 4; ++k) t.round_point(xval + 4 * k, waux + 4 * k, id, scale, kMaxQ, L + 4 * k);
        const auto [sumqx, sumq2] = odd_level_sums(kBlock, weight, xval, L);
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {  // cannot happen for magnitudes; keeps the stored scale unsigned
        scale = -scale;
        for (uint8_t& s : signs) s = static_cast<uint8_t>(~s);
      }
      for (int k = 0; k < kBlock / 4; ++k) {
        const int gi = t.index_of(L + 4 * k, "IQ3_S");
        const int slot = ib * (kBlock / 4) + k;
        b.qs[slot] = static_cast<uint8_t>(gi & 255);
        b.qh[slot / 8] = static_cast<uint8_t>(b.qh[slot / 8] | ((gi >> 8) << (slot % 8)));
      }
      std::memcpy(b.signs + ib * (kBlock / 8), signs, sizeof(signs));
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) continue;
    const float d = max_scale / 31;
    b.d = fp32_to_fp16(d * 1.033f);
    const float id = 1 / d;
    for (int ib = 0; ib < kQK_K / kBlock; ib += 2) {
      const int l1 = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
      const int l2 = std::clamp(nearest_int(0.5f * (id * scales[ib + 1] - 1)), 0, 15);
      b.scales[ib / 2] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
  }
}

}  // namespace

void iq3_s_from_float(const float* x, void* y, int64_t n) { iq3_s_row(x, y, n, nullptr); }

void iq3_s_from_float_weighted(const float* x, void* y, int64_t n, const float* qw) { iq3_s_row(x, y, n, qw); }

}  // namespace edgelm::kernels
