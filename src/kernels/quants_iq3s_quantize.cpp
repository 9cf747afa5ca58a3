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
#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/check.h"
#include "kernels/fp16.h"
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

// The grid as 4 odd magnitudes per entry, the map from a 4-tuple of l (3 bits each) to its grid
// index, or for a tuple off the grid -(1 + offset of its neighbour list), the list being its
// length followed by the grid indices at the 3 smallest squared distances, sorted by
// (distance, index).
struct Iq3sTables {
  int8_t grid[512][4];
  int map[kMapSize];
  std::vector<uint16_t> neighbours;
};

const Iq3sTables& tables() {
  static const Iq3sTables t = [] {
    Iq3sTables r;
    const uint32_t* g = kIq3sGrid;
    std::fill(std::begin(r.map), std::end(r.map), -1);
    for (int k = 0; k < 512; ++k) {
      int index = 0;
      for (int i = 0; i < 4; ++i) {
        r.grid[k][i] = static_cast<int8_t>((g[k] >> (8 * i)) & 0xff);
        index |= ((r.grid[k][i] - 1) / 2) << (3 * i);
      }
      r.map[index] = k;
    }
    std::vector<std::pair<int, int>> dist(512);
    for (int u = 0; u < kMapSize; ++u) {
      if (r.map[u] >= 0) continue;
      int pos[4];
      for (int i = 0; i < 4; ++i) pos[i] = 2 * ((u >> (3 * i)) & 7) + 1;
      for (int j = 0; j < 512; ++j) {
        int d2 = 0;
        for (int i = 0; i < 4; ++i) d2 += (r.grid[j][i] - pos[i]) * (r.grid[j][i] - pos[i]);
        dist[static_cast<size_t>(j)] = {d2, j};
      }
      std::sort(dist.begin(), dist.end());
      r.map[u] = -static_cast<int>(r.neighbours.size() + 1);
      const size_t count_at = r.neighbours.size();
      r.neighbours.push_back(0);
      int d2 = dist[0].first, have = 1;
      for (const auto& [d, j] : dist) {
        if (d > d2) {
          if (have == 3) break;
          d2 = d;
          ++have;
        }
        r.neighbours.push_back(static_cast<uint16_t>(j));
      }
      r.neighbours[count_at] = static_cast<uint16_t>(r.neighbours.size() - count_at - 1);
    }
    return r;
  }();
  return t;
}

// The neighbour of off-grid tuple `u` closest to x / scale (weights w); writes its l to L.
int best_neighbour(const Iq3sTables& t, int u, const float* xval, const float* w, float scale, int8_t* L) {
  const uint16_t* list = t.neighbours.data() + (-t.map[u] - 1);
  float best_d2 = FLT_MAX;
  int best = -1;
  for (int j = 1; j <= list[0]; ++j) {
    float d2 = 0;
    for (int i = 0; i < 4; ++i) {
      const float diff = scale * static_cast<float>(t.grid[list[j]][i]) - xval[i];
      d2 += w[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best = list[j];
    }
  }
  EDGELM_CHECK(best >= 0, "IQ3_S: empty neighbour list");
  for (int i = 0; i < 4; ++i) L[i] = static_cast<int8_t>((t.grid[best][i] - 1) / 2);
  return best;
}

int tuple_of(const int8_t* L) {
  int u = 0;
  for (int i = 0; i < 4; ++i) u |= L[i] << (3 * i);
  return u;
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
        for (int k = 0; k < kBlock / 4; ++k) {
          for (int i = 0; i < 4; ++i)
            Laux[4 * k + i] =
                static_cast<int8_t>(std::clamp(nearest_int(0.5f * (id * xval[4 * k + i] - 1)), 0, kMaxQ - 1));
          const int u = tuple_of(Laux + 4 * k);
          on_grid_aux[k] = t.map[u] >= 0;
          if (!on_grid_aux[k]) best_neighbour(t, u, xval + 4 * k, waux + 4 * k, this_scale, Laux + 4 * k);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < kBlock; ++i) {
          const float q = static_cast<float>(2 * Laux[i] + 1);
          sumqx += weight[i] * xval[i] * q;
          sumq2 += weight[i] * q * q;
        }
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
        for (int k = 0; k < kBlock / 4; ++k) {
          for (int i = 0; i < 4; ++i)
            L[4 * k + i] =
                static_cast<int8_t>(std::clamp(nearest_int(0.5f * (id * xval[4 * k + i] - 1)), 0, kMaxQ - 1));
          const int u = tuple_of(L + 4 * k);
          if (t.map[u] < 0) best_neighbour(t, u, xval + 4 * k, waux + 4 * k, scale, L + 4 * k);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < kBlock; ++i) {
          const float q = static_cast<float>(2 * L[i] + 1);
          sumqx += weight[i] * xval[i] * q;
          sumq2 += weight[i] * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {  // cannot happen for magnitudes; keeps the stored scale unsigned
        scale = -scale;
        for (uint8_t& s : signs) s = static_cast<uint8_t>(~s);
      }
      for (int k = 0; k < kBlock / 4; ++k) {
        const int gi = t.map[tuple_of(L + 4 * k)];
        EDGELM_CHECK(gi >= 0, "IQ3_S: a point off the grid");
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
