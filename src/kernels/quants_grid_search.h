// The search structure the grid IQ quantizers share (quants_iq2xxs_quantize.cpp,
// quants_iq2xs_quantize.cpp, quants_iq2s_quantize.cpp, quants_iq3xxs_quantize.cpp,
// quants_iq3s_quantize.cpp; quants_iq1_quantize.cpp with its own level values): a
// kGridSize-point grid of N-element points whose elements are odd magnitudes 2 l + 1 (l of kBits
// bits), a map from every N-tuple of l to its grid index, and for a tuple off the grid its
// neighbour list: the grid points at the kNear smallest squared distances from it, sorted by
// (distance, index). This is the published quantizers' search (the reference builds the same
// tables once per type), so the bytes they write follow from it. The quantizers' one step on
// it: round N magnitudes at a candidate scale to levels (round_point), look the tuple up, and
// take the best neighbour if it is off the grid (snap).
//
// Invariants: map[u] >= 0 is u's grid index; map[u] < 0 is -(1 + offset) of u's list in
// `neighbours`, whose first entry is the list's length (>= 1).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/check.h"

namespace edgelm::kernels {

// A rounded point: its grid index, and whether the rounding itself landed on the grid (else it
// was moved to a neighbour).
struct GridPoint {
  int index;
  bool on_grid;
};

// The magnitude of level l in the grids of odd magnitudes: 2 l + 1.
struct OddValue {
  float operator()(int l) const { return static_cast<float>(2 * l + 1); }
};

// kMapSize: the tuples mapped, [0, kMapSize) (the reference's table sizes: every tuple, or for
// the IQ2 grids up to the largest valid one). kGridSize: 256 (IQ2_XXS, IQ3_XXS), 512 (IQ2_XS,
// IQ3_S), 1024 (IQ2_S) or 2048 (IQ1_S, IQ1_M) points.
template <int N, int kBits, int kNear, int kMapSize, int kGridSize>
struct GridSearch {
  int8_t grid[kGridSize][N];
  std::vector<int> map;
  std::vector<uint16_t> neighbours;

  // mag(k, i): element i of grid point k as its odd magnitude 2 l + 1.
  template <typename Mag>
  static GridSearch build(Mag mag) {
    GridSearch r;
    r.map.assign(static_cast<size_t>(kMapSize), -1);
    for (int k = 0; k < kGridSize; ++k) {
      int index = 0;
      for (int i = 0; i < N; ++i) {
        r.grid[k][i] = static_cast<int8_t>(mag(k, i));
        index |= ((r.grid[k][i] - 1) / 2) << (kBits * i);
      }
      r.map[static_cast<size_t>(index)] = k;
    }
    std::vector<std::pair<int, int>> dist(kGridSize);
    for (int u = 0; u < kMapSize; ++u) {
      if (r.map[static_cast<size_t>(u)] >= 0) continue;
      int pos[N];
      for (int i = 0; i < N; ++i) pos[i] = 2 * ((u >> (kBits * i)) & ((1 << kBits) - 1)) + 1;
      for (int j = 0; j < kGridSize; ++j) {
        int d2 = 0;
        for (int i = 0; i < N; ++i) d2 += (r.grid[j][i] - pos[i]) * (r.grid[j][i] - pos[i]);
        dist[static_cast<size_t>(j)] = {d2, j};
      }
      std::sort(dist.begin(), dist.end());
      r.map[static_cast<size_t>(u)] = -static_cast<int>(r.neighbours.size() + 1);
      const size_t count_at = r.neighbours.size();
      r.neighbours.push_back(0);
      int d2 = dist[0].first, have = 1;
      for (const auto& dj : dist) {
        if (dj.first > d2) {
          if (have == kNear) break;
          d2 = dj.first;
          ++have;
        }
        r.neighbours.push_back(static_cast<uint16_t>(dj.second));
      }
      r.neighbours[count_at] = static_cast<uint16_t>(r.neighbours.size() - count_at - 1);
    }
    return r;
  }

  // Point k's element i as its level l (the inverse of 2 l + 1).
  int level(int k, int i) const { return (grid[k][i] - 1) / 2; }

  // The N levels L (each below 2^kBits) as a map index.
  static int tuple_of(const int8_t* L) {
    int u = 0;
    for (int i = 0; i < N; ++i) u |= L[i] << (kBits * i);
    return u;
  }

  // The grid index of the levels L, which must lie on the grid (`what` names the caller).
  int index_of(const int8_t* L, const char* what) const {
    const int gi = map[static_cast<size_t>(tuple_of(L))];
    EDGELM_CHECK(gi >= 0, what, ": a point off the grid");
    return gi;
  }

  // The neighbour of off-grid tuple u closest to xval by the weighted squared distance of
  // scale * value(l) from it (weights w; the first of equals); writes its levels to L and
  // returns its grid index. value(l) is the level's magnitude: 2 l + 1 unless given.
  template <typename Value = OddValue>
  int best_neighbour(int u, const float* xval, const float* w, float scale, int8_t* L, Value value = {}) const {
    const uint16_t* list = neighbours.data() + (-map[static_cast<size_t>(u)] - 1);
    float best_d2 = FLT_MAX;
    int best = -1;
    for (int j = 1; j <= list[0]; ++j) {
      float d2 = 0;
      for (int i = 0; i < N; ++i) {
        const float diff = scale * value(level(list[j], i)) - xval[i];
        d2 += w[i] * diff * diff;
      }
      if (d2 < best_d2) {
        best_d2 = d2;
        best = list[j];
      }
    }
    EDGELM_CHECK(best >= 0, "grid quantizer: no neighbour at a finite distance");
    for (int i = 0; i < N; ++i) L[i] = static_cast<int8_t>(level(best, i));
    return best;
  }

  // The levels L as a grid point: their index if on the grid, else (L rewritten) the best
  // neighbour's, as best_neighbour.
  template <typename Value = OddValue>
  GridPoint snap(const float* xval, const float* w, float scale, int8_t* L, Value value = {}) const {
    const int u = tuple_of(L);
    const int gi = map[static_cast<size_t>(u)];
    if (gi >= 0) return {gi, true};
    return {best_neighbour(u, xval, w, scale, L, value), false};
  }

  // Rounds the N magnitudes xval at inverse scale id to levels l = round((id x - 1) / 2) clamped
  // to [0, max_q) (round to nearest even, as lrint in the default rounding mode), written to L,
  // and snaps them to the grid at `scale` (normally 1 / id).
  GridPoint round_point(const float* xval, const float* w, float id, float scale, int max_q, int8_t* L) const {
    for (int i = 0; i < N; ++i)
      L[i] = static_cast<int8_t>(std::clamp(static_cast<int>(std::lrint(0.5f * (id * xval[i] - 1))), 0, max_q - 1));
    return snap(xval, w, scale, L);
  }
};

// The weighted least-squares sums of fitting x by scale * (2 l + 1): sumqx = sum w x q and
// sumq2 = sum w q^2 over n elements, q = 2 L[i] + 1, in element order (the published quantizers'
// order, which their bytes depend on).
struct OddLevelSums {
  float sumqx = 0, sumq2 = 0;
};
inline OddLevelSums odd_level_sums(int n, const float* w, const float* x, const int8_t* L) {
  OddLevelSums r;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * L[i] + 1);
    r.sumqx += w[i] * x[i] * q;
    r.sumq2 += w[i] * q * q;
  }
  return r;
}

// The signs of 8 elements stored as 7 bits (IQ2_XXS, IQ2_XS, IQ3_XXS): the 8th is implied by even
// parity, so with an odd count of negatives the element of least w x^2 (the first of equals) is
// taken with the wrong sign. Writes |x| (that element negated) to xval; returns the 7 bits.
inline uint8_t even_parity_signs(const float* x, const float* w, float* xval) {
  int nflip = 0;
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    xval[i] = x[i] >= 0 ? x[i] : -x[i];
    if (x[i] < 0) {
      ++nflip;
      s = static_cast<uint8_t>(s | (1 << i));
    }
  }
  if (nflip % 2 != 0) {
    int imin = 0;
    float min = w[0] * x[0] * x[0];
    for (int i = 1; i < 8; ++i) {
      const float ax = w[i] * x[i] * x[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s = static_cast<uint8_t>(s ^ (1 << imin));
  }
  return static_cast<uint8_t>(s & 127);
}

}  // namespace edgelm::kernels
