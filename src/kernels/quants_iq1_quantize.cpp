// The IQ1_S and IQ1_M quantizers (declared in quants_weighted.h): the ecosystem's method
// (ik_llama.cpp's revision), so that the bytes equal the reference quantizer's.
//
// Both fit the signed weights of a block (32 elements for IQ1_S, 16 for IQ1_M) as
// scale * (q + delta) with q in {-1, 0, 1} and delta = +-0.125 (per block for IQ1_S, per 8 for
// IQ1_M): the values are sorted and every split into the three levels (and every delta sign) is
// scored exactly by weighted least squares from prefix sums; the best split's 8-tuples of levels
// must lie on the 2048-point grid (kIq1sGrid), an off-grid tuple taking the neighbour (among the
// grid points at the three smallest squared distances, quants_grid_search.h) nearest to x by
// weighted distance at the chosen scale and delta, after which the scale (and for IQ1_M the delta
// signs) are refitted. IQ1_S stores 3-bit block scales against d = max / 15 (d stored * 1.125)
// and the delta sign; IQ1_M 3-bit scales per 16 and a super-block scale refitted over the
// decoded values (* 1.085) split into the scales' top nibbles.
// Weights: imatrix * sqrt(sigma2 + x^2) (IQ1_S: sigma2 = 2 mean(x^2) of the super-block; IQ1_M:
// 1.5 mean(x^2) of each 32). The reference quantizes IQ1_S only with importances (and its tool
// IQ1_M too), and so does edgelm.
//
// One deliberate difference (IQ1_M): for a block of 16 whose magnitudes are all below 1e-7 the
// reference ORs in the delta bits left in its scratch array by an earlier block (or row); here
// such a block takes delta bits 0 (its scale is 0, so it decodes to 0 either way).
#include <algorithm>
#include <array>
#include <cfloat>
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

constexpr int kMapSize = 43692;  // 8 two-bit values, each at most 2
constexpr float kDelta = 0.125f;
constexpr float kXp[3] = {-1 + kDelta, kDelta, 1 + kDelta};
constexpr float kXm[3] = {-1 - kDelta, -kDelta, 1 - kDelta};

int nearest_int(float v) { return static_cast<int>(std::lrint(v)); }

// 8 levels per point (stored as 2 l + 1, l = q + 1), the neighbours at the three smallest
// squared distances.
using Iq1Search = GridSearch<8, 2, 3, kMapSize, 2048>;

const Iq1Search& tables() {
  static const Iq1Search t = Iq1Search::build([](int k, int i) {
    const auto b = static_cast<int8_t>((kIq1sGrid[k] >> (8 * i)) & 0xff);  // -1, 0, 1
    EDGELM_CHECK(b >= -1 && b <= 1, "IQ1 grid value ", static_cast<int>(b));
    return 2 * (b + 1) + 1;
  });
  return t;
}

// Level l's value q + delta as the search's magnitude (xx: kXp or kXm).
struct DeltaValue {
  const float* xx;
  float operator()(int l) const { return xx[l]; }
};

// The block's element indices in ascending order of x (stable on ties, as the reference's sort).
template <int N>
std::array<int, N> sorted_order(const float* x) {
  std::array<int, N> idx;
  for (int j = 0; j < N; ++j) idx[static_cast<size_t>(j)] = j;
  std::stable_sort(idx.begin(), idx.end(), [x](int a, int b) { return x[a] < x[b]; });
  return idx;
}

// One IQ1_S block of 32: returns the scale, writes the 4 grid indices and the delta sign (+1/-1).
float iq1s_block(const Iq1Search& t, const float* xb, const float* weight, uint16_t* index, int* shift) {
  constexpr int n = 32;
  float max = std::fabs(xb[0]);
  for (int i = 1; i < n; ++i) max = std::max(max, std::fabs(xb[i]));
  if (max < 1e-12f) {
    *shift = 1;
    for (int k = 0; k < n / 8; ++k) index[k] = 0;
    return 0;
  }
  const std::array<int, n> idx = sorted_order<n>(xb);
  float sumx[n + 1], sumw[n + 1];
  sumx[0] = sumw[0] = 0;
  for (int j = 0; j < n; ++j) {
    const int i = idx[static_cast<size_t>(j)];
    sumx[j + 1] = sumx[j] + weight[i] * xb[i];
    sumw[j + 1] = sumw[j] + weight[i];
  }
  float best = -FLT_MIN, scale = max;
  int besti1 = -1, besti2 = -1, best_shift = 0;
  for (int i1 = 0; i1 <= n; ++i1) {
    for (int i2 = i1; i2 <= n; ++i2) {
      for (const int s : {1, -1}) {
        const float* xx = s == 1 ? kXp : kXm;
        const float sumqx = (sumx[i1] - sumx[0]) * xx[0] + (sumx[i2] - sumx[i1]) * xx[1] + (sumx[n] - sumx[i2]) * xx[2];
        const float sumq2 = (sumw[i1] - sumw[0]) * xx[0] * xx[0] + (sumw[i2] - sumw[i1]) * xx[1] * xx[1] +
                            (sumw[n] - sumw[i2]) * xx[2] * xx[2];
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          besti1 = i1;
          besti2 = i2;
          best_shift = s;
        }
      }
    }
  }
  EDGELM_CHECK(besti1 >= 0 && besti2 >= 0 && best_shift != 0, "IQ1_S: no split fits the block");
  int8_t L[n];
  for (int j = 0; j < n; ++j) L[idx[static_cast<size_t>(j)]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
  if (scale < 0) {
    for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
    scale = -scale;
    best_shift = -best_shift;
  }
  const float* xx = best_shift == 1 ? kXp : kXm;
  bool all_on_grid = true;
  for (int k = 0; k < n / 8; ++k) {
    const GridPoint p = t.snap(xb + 8 * k, weight + 8 * k, scale, L + 8 * k, DeltaValue{xx});
    all_on_grid = all_on_grid && p.on_grid;
    index[k] = static_cast<uint16_t>(p.index);
  }
  if (!all_on_grid) {
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < n / 8; ++k) {
      for (int j = 0; j < 8; ++j) {
        const float q = xx[t.level(index[k], j)];
        sumqx += weight[8 * k + j] * q * xb[8 * k + j];
        sumq2 += weight[8 * k + j] * q * q;
      }
    }
    if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
  }
  *shift = best_shift;
  return scale;
}

void iq1_s_row(const float* x, void* vy, int64_t n, const float* qw) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  EDGELM_CHECK(qw != nullptr, "IQ1_S needs importance weights");
  const Iq1Search& t = tables();
  auto* y = static_cast<BlockIQ1_S*>(vy);
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    BlockIQ1_S& b = y[ibl];
    b = BlockIQ1_S{};
    const float* xbl = x + kQK_K * ibl;
    float sumx2 = 0;
    for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = 2 * sumx2 / kQK_K;
    float scales[kQK_K / 32];
    int shifts[kQK_K / 32];
    float max_scale = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      float weight[32];
      for (int i = 0; i < 32; ++i) weight[i] = qw[kQK_K * ibl + 32 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      uint16_t index[4];
      scales[ib] = iq1s_block(t, xb, weight, index, &shifts[ib]);
      uint16_t h = 0;
      for (int k = 0; k < 4; ++k) {
        b.qs[4 * ib + k] = static_cast<uint8_t>(index[k] & 255);
        h = static_cast<uint16_t>(h | ((index[k] >> 8) << (3 * k)));
      }
      b.qh[ib] = h;
      max_scale = std::max(max_scale, scales[ib]);
    }
    if (max_scale == 0.0f) continue;
    const float d = max_scale / 15;
    b.d = fp32_to_fp16(d * 1.125f);
    const float id = 1 / d;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
      if (shifts[ib] == -1) l |= 8;
      b.qh[ib] = static_cast<uint16_t>(b.qh[ib] | (l << 12));
    }
  }
}

// One IQ1_M block of 16: returns the scale, writes the 2 grid indices and the delta signs k
// (0: +,+  1: +,-  2: -,+  3: -,-; first and second 8).
float iq1m_block(const Iq1Search& t, const float* xb, const float* weight, uint16_t* index, int* shift) {
  constexpr int n = 16;
  const std::array<int, n> idx = sorted_order<n>(xb);
  float sumw1[n + 1], sumw2[n + 1], sumx1[n + 1], sumx2[n + 1];
  sumw1[0] = sumw2[0] = sumx1[0] = sumx2[0] = 0;
  for (int j = 0; j < n; ++j) {
    const int i = idx[static_cast<size_t>(j)];
    const bool first = i < n / 2;
    sumw1[j + 1] = sumw1[j] + (first ? weight[i] : 0.0f);
    sumx1[j + 1] = sumx1[j] + (first ? weight[i] * xb[i] : 0.0f);
    sumw2[j + 1] = sumw2[j] + (first ? 0.0f : weight[i]);
    sumx2[j + 1] = sumx2[j] + (first ? 0.0f : weight[i] * xb[i]);
  }
  // The sums of one half at split (i1, i2) with level values xx.
  auto qx = [](const float* s, int i1, int i2, const float* xx) {
    return (s[i1] - s[0]) * xx[0] + (s[i2] - s[i1]) * xx[1] + (s[n] - s[i2]) * xx[2];
  };
  auto q2 = [](const float* s, int i1, int i2, const float* xx) {
    return (s[i1] - s[0]) * xx[0] * xx[0] + (s[i2] - s[i1]) * xx[1] * xx[1] + (s[n] - s[i2]) * xx[2] * xx[2];
  };
  float best = 0, scale = 0;
  int besti1 = -1, besti2 = -1, best_k = -1;
  for (int i1 = 0; i1 <= n; ++i1) {
    for (int i2 = i1; i2 <= n; ++i2) {
      for (int k = 0; k < 4; ++k) {
        const float* xa = k < 2 ? kXp : kXm;
        const float* xc = k % 2 == 0 ? kXp : kXm;
        const float sumqx = qx(sumx1, i1, i2, xa) + qx(sumx2, i1, i2, xc);
        const float sumq2 = q2(sumw1, i1, i2, xa) + q2(sumw2, i1, i2, xc);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          besti1 = i1;
          besti2 = i2;
          best_k = k;
        }
      }
    }
  }
  EDGELM_CHECK(besti1 >= 0 && besti2 >= 0 && best_k >= 0, "IQ1_M: no split fits the block");
  int8_t L[n];
  for (int j = 0; j < n; ++j) L[idx[static_cast<size_t>(j)]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
  if (scale < 0) {
    for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
    scale = -scale;
    best_k = 3 - best_k;
  }
  bool all_on_grid = true;
  for (int k = 0; k < n / 8; ++k) {
    const float* xx = k == 0 ? (best_k < 2 ? kXp : kXm) : (best_k % 2 == 0 ? kXp : kXm);
    const GridPoint p = t.snap(xb + 8 * k, weight + 8 * k, scale, L + 8 * k, DeltaValue{xx});
    all_on_grid = all_on_grid && p.on_grid;
    index[k] = static_cast<uint16_t>(p.index);
  }
  if (!all_on_grid) {
    float sumqx[4] = {}, sumq2[4] = {};
    for (int j = 0; j < n; ++j) {
      const float w = weight[j];
      const float qp = kXp[L[j]], qm = kXm[L[j]];
      sumqx[0] += w * xb[j] * qp;
      sumq2[0] += w * qp * qp;
      sumqx[3] += w * xb[j] * qm;
      sumq2[3] += w * qm * qm;
      sumqx[j < 8 ? 1 : 2] += w * xb[j] * qp;
      sumq2[j < 8 ? 1 : 2] += w * qp * qp;
      sumqx[j < 8 ? 2 : 1] += w * xb[j] * qm;
      sumq2[j < 8 ? 2 : 1] += w * qm * qm;
    }
    best = 0;
    for (int k = 0; k < 4; ++k) {
      if (sumqx[k] > 0 && sumq2[k] > 0 && sumqx[k] * sumqx[k] > best * sumq2[k]) {
        scale = sumqx[k] / sumq2[k];
        best = scale * sumqx[k];
        best_k = k;
      }
    }
  }
  *shift = best_k;
  return scale;
}

void iq1_m_row(const float* x, void* vy, int64_t n, const float* qw) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  const Iq1Search& t = tables();
  constexpr uint8_t kMasks[4] = {0x00, 0x80, 0x08, 0x88};
  auto* y = static_cast<BlockIQ1_M*>(vy);
  for (int64_t ibl = 0; ibl < n / kQK_K; ++ibl) {
    BlockIQ1_M& b = y[ibl];
    b = BlockIQ1_M{};
    const float* xbl = x + kQK_K * ibl;
    float sigma2_of[kQK_K / 32];
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      float sumx2 = 0;
      for (int i = 0; i < 32; ++i) sumx2 += xbl[32 * ib + i] * xbl[32 * ib + i];
      sigma2_of[ib] = 1.5f * sumx2 / 32;
    }
    auto weights = [&](int ib, float* weight) {
      const float* xb = xbl + 16 * ib;
      for (int i = 0; i < 16; ++i)
        weight[i] = qw != nullptr ? qw[kQK_K * ibl + 16 * ib + i] * std::sqrt(sigma2_of[ib / 2] + xb[i] * xb[i])
                                  : xb[i] * xb[i];
    };
    float scales[kQK_K / 16];
    int shifts[kQK_K / 16] = {};
    float max_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      float weight[16];
      weights(ib, weight);
      float max = std::fabs(xb[0]), sumwx = 0;
      for (int i = 1; i < 16; ++i) {  // (the reference's sum leaves out element 0)
        max = std::max(max, std::fabs(xb[i]));
        sumwx += weight[i] * std::fabs(xb[i]);
      }
      scales[ib] = 0;
      if (max < 1e-7f) continue;
      if (sumwx == 0)  // zero importance wherever x is not zero: fit x^2 instead
        for (int i = 0; i < 16; ++i) weight[i] = xb[i] * xb[i];
      uint16_t index[2];
      scales[ib] = iq1m_block(t, xb, weight, index, &shifts[ib]);
      b.qs[2 * ib] = static_cast<uint8_t>(index[0] & 255);
      b.qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
      b.qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
      max_scale = std::max(max_scale, scales[ib]);
    }
    if (max_scale == 0.0f) continue;
    uint16_t sc[4] = {};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
      sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
      b.qh[ib] = static_cast<uint8_t>(b.qh[ib] | kMasks[shifts[ib]]);
      const float* xb = xbl + 16 * ib;
      float weight[16];
      weights(ib, weight);
      for (int k = 0; k < 2; ++k) {
        const float* xx = k == 0 ? (shifts[ib] < 2 ? kXp : kXm) : (shifts[ib] % 2 == 0 ? kXp : kXm);
        const int gi = b.qs[2 * ib + k] | ((b.qh[ib] << (8 - 4 * k)) & 0x700);
        for (int j = 0; j < 8; ++j) {
          const float q = xx[t.level(gi, j)] * static_cast<float>(2 * l + 1);
          sumqx += weight[8 * k + j] * q * xb[8 * k + j];
          sumq2 += weight[8 * k + j] * q * q;
        }
      }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const uint16_t h = fp32_to_fp16(d * 1.085f);
    sc[0] = static_cast<uint16_t>(sc[0] | ((h & 0x000f) << 12));
    sc[1] = static_cast<uint16_t>(sc[1] | ((h & 0x00f0) << 8));
    sc[2] = static_cast<uint16_t>(sc[2] | ((h & 0x0f00) << 4));
    sc[3] = static_cast<uint16_t>(sc[3] | (h & 0xf000));
    static_assert(sizeof(sc) == sizeof(b.scales));
    std::memcpy(b.scales, sc, sizeof(sc));
  }
}

}  // namespace

void iq1_s_from_float_weighted(const float* x, void* y, int64_t n, const float* qw) { iq1_s_row(x, y, n, qw); }

void iq1_m_from_float_weighted(const float* x, void* y, int64_t n, const float* qw) { iq1_m_row(x, y, n, qw); }

}  // namespace edgelm::kernels
