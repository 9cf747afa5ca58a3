// The IQ2_XS quantizer (declared in quants_iq_grid.h and quants_weighted.h): the ecosystem's
// method (ik_llama.cpp's revision), so that the bytes equal the reference quantizer's.
//
// Per 16 elements: the signs are stored apart as 7 bits per 8 (the 8th implied by even parity:
// with an odd count of negatives the element of least weighted x^2 is taken with the wrong sign);
// the magnitudes are fitted as scale * (2 l + 1), l in [0, 2], each 8 consecutive l forming a point
// that must lie on the 512-entry grid (kIq2xsGrid). A first scale comes from the best split of the
// sorted magnitudes into the levels 1, 3, 5; 15 candidate scales around it round the l, an off-grid
// point taking its nearest grid neighbour (by weighted distance, among the grid points at the two
// smallest squared distances, precomputed once); the best weighted least-squares fit wins and is
// refined by up to 3 re-roundings at its own scale. The 16 block scales go to 4 bits against
// max / 31, then the super-block scale is refitted over the decoded values (times 1.05).
// Weights: imatrix * sqrt(sigma2 + x^2) (sigma2 = mean(x^2) of the super-block). The reference
// refuses IQ2_XS without an importance matrix, and so does edgelm (the unweighted branch below,
// sigma2 / 4 + x^2, is its formula but has no entry point).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

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

// The grid search (quants_grid_search.h: 8 odd magnitudes 2 l + 1 per point, l of 2 bits, the
// neighbours at the two smallest squared distances) and the sign table.
struct Iq2xsTables {
  GridSearch<8, 2, 2, kMapSize, 512> search;
  std::array<uint8_t, 128> signs;  // 7 stored bits -> 8 signs (even parity)
};

const Iq2xsTables& tables() {
  static const Iq2xsTables t = [] {
    Iq2xsTables r;
    r.search = GridSearch<8, 2, 2, kMapSize, 512>::build([](int k, int i) {
      const int b = static_cast<int>((kIq2xsGrid[k] >> (8 * i)) & 0xff);  // 8, 25, 43 for l = 0, 1, 2
      EDGELM_CHECK(b == 8 || b == 25 || b == 43, "IQ2_XS grid value ", b);
      return 2 * (b == 8 ? 0 : b == 25 ? 1 : 2) + 1;
    });
    for (int i = 0; i < 128; ++i) {
      int parity = 0;
      for (int b = 0; b < 7; ++b) parity ^= (i >> b) & 1;
      r.signs[static_cast<size_t>(i)] = static_cast<uint8_t>(i | (parity << 7));
    }
    return r;
  }();
  return t;
}

void block_weights(const float* xb, const float* qw, float sigma2, float* weight) {
  for (int i = 0; i < 16; ++i) weight[i] = qw != nullptr ? qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]) : 0.25f * sigma2 + xb[i] * xb[i];
}

void iq2_xs_row(const float* x, void* vy, int64_t n, const float* qw) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  const Iq2xsTables& t = tables();
  auto* y = static_cast<BlockIQ2_XS*>(vy);
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    BlockIQ2_XS& b = y[ibl];
    b.d = fp32_to_fp16(0.0f);
    std::memset(b.scales, 0, sizeof(b.scales));
    uint16_t q2[kQK_K / 8] = {};
    float scales[kQK_K / 16];
    float max_scale = 0;
    const float* xbl = x + kQK_K * ibl;
    const float* qwbl = qw != nullptr ? qw + kQK_K * ibl : nullptr;
    float sumx2 = 0;
    for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = sumx2 / kQK_K;

    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      float weight[16], waux[16], xval[16];
      int8_t L[16] = {}, Laux[16];
      uint8_t block_signs[2];
      block_weights(xb, qwbl != nullptr ? qwbl + 16 * ib : nullptr, sigma2, weight);
      for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 2; ++k) block_signs[k] = even_parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
      float max = xval[0];
      for (int i = 1; i < 16; ++i) max = std::max(max, xval[i]);
      scales[ib] = 0;
      if (max < kGroupMaxEps) continue;  // grid index 0, signs 0 (q2 stays 0)

      // The best split of the sorted magnitudes into levels 1, 3, 5 (stable order on ties).
      std::array<std::pair<float, int>, 16> sorted;
      for (int j = 0; j < 16; ++j) sorted[static_cast<size_t>(j)] = {xval[j], j};
      std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& c) { return a.first < c.first; });
      float sumx[17], sumw[17];
      sumx[0] = sumw[0] = 0;
      for (int j = 0; j < 16; ++j) {
        const int i = sorted[static_cast<size_t>(j)].second;
        sumx[j + 1] = sumx[j] + weight[i] * xval[i];
        sumw[j + 1] = sumw[j] + weight[i];
      }
      float best = 0, scale = 0;
      for (int i1 = 0; i1 <= 16; ++i1) {
        for (int i2 = i1; i2 <= 16; ++i2) {
          const float sumqx = (sumx[i1] - sumx[0]) * 1 + (sumx[i2] - sumx[i1]) * 3 + (sumx[16] - sumx[i2]) * 5;
          const float sumq2 = (sumw[i1] - sumw[0]) * 1 + (sumw[i2] - sumw[i1]) * 9 + (sumw[16] - sumw[i2]) * 25;
          if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
          }
        }
      }
      best = 0;
      const float eff_max = scale * (2 * kMaxQ - 1);
      int index[2] = {0, 0}, aux_index[2];
      for (int is = -7; is <= 7; ++is) {
        const float id = (static_cast<float>(2 * kMaxQ - 1) + static_cast<float>(is) * 0.1f) / eff_max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 2; ++k)
          aux_index[k] = t.search.round_point(xval + 8 * k, waux + 8 * k, id, this_scale, kMaxQ, Laux + 8 * k).index;
        const auto [sumqx, sumq2] = odd_level_sums(16, weight, xval, Laux);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, sizeof(L));
          index[0] = aux_index[0];
          index[1] = aux_index[1];
        }
      }
      if (scale != 0.0f) {
        for (int iter = 0; iter < 3; ++iter) {
          const float id = 1 / scale;
          bool changed = false;
          for (int k = 0; k < 2; ++k) {
            aux_index[k] = t.search.round_point(xval + 8 * k, waux + 8 * k, id, scale, kMaxQ, Laux + 8 * k).index;
            if (aux_index[k] != index[k]) changed = true;
          }
          if (!changed) break;
          const auto [sumqx, sumq2] = odd_level_sums(16, weight, xval, Laux);
          if (!(sumq2 > 0 && sumqx * sumqx > best * sumq2)) break;
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, sizeof(L));
          index[0] = aux_index[0];
          index[1] = aux_index[1];
        }
      }
      if (scale < 0) {
        scale = -scale;
        for (uint8_t& s : block_signs) s = static_cast<uint8_t>(~s & 127);
      }
      for (int k = 0; k < 2; ++k) {
        const int gi = t.search.index_of(L + 8 * k, "IQ2_XS");
        q2[2 * ib + k] = static_cast<uint16_t>(gi | (block_signs[k] << 9));
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
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
      b.scales[ib / 2] = static_cast<uint8_t>(ib % 2 == 0 ? l : (b.scales[ib / 2] | (l << 4)));
      l = 2 * l + 1;
      const float* xb = xbl + 16 * ib;
      float weight[16];
      block_weights(xb, qwbl != nullptr ? qwbl + 16 * ib : nullptr, sigma2, weight);
      for (int k = 0; k < 2; ++k) {
        const int gi = q2[2 * ib + k] & 511;
        const uint8_t signs = t.signs[static_cast<size_t>(q2[2 * ib + k] >> 9)];
        for (int j = 0; j < 8; ++j) {
          const auto g = static_cast<float>((kIq2xsGrid[gi] >> (8 * j)) & 0xff);
          const float q = 0.125f * static_cast<float>(l) * g * ((signs >> j) & 1 ? -1.f : 1.f);
          sumqx += weight[8 * k + j] * q * xb[8 * k + j];
          sumq2 += weight[8 * k + j] * q * q;
        }
      }
    }
    std::memcpy(b.qs, q2, sizeof(b.qs));
    if (sumq2 > 0) b.d = fp32_to_fp16(1.05f * sumqx / sumq2);
  }
}

}  // namespace

void iq2_xs_from_float_weighted(const float* x, void* y, int64_t n, const float* qw) { iq2_xs_row(x, y, n, qw); }

}  // namespace edgelm::kernels
