// Scalar reference kernels of IQ4_NL and IQ4_XS; see quants_iq4.h for the layouts and rules.
//
// Quantizer, per 32 elements: the candidates are inverse scales that put the element of
// largest magnitude on or near the codebook's end (-127), -(127 - k) / max for k in
// [-kTries, kTries], plus the plain max / -127 grid; for each candidate every element takes its
// nearest codebook entry, the best scale for those indices is the weighted least-squares
// sum(w q x) / sum(w q^2), and the candidate whose fit lowers the weighted squared error most
// wins. The stored scale is then rounded (fp16, or 6 bits against the super-block's d for
// IQ4_XS) and the indices are chosen again against the scale as stored.
#include "kernels/quants_iq4.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/fp16.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {
namespace {

constexpr int kTries = 7;              // candidate scales on each side of the plain grid
constexpr float kGroupMaxEps = 1e-15f;  // below this magnitude a group is all zeros

int64_t n_blocks(int64_t n, int64_t block) {
  EDGELM_CHECK(n >= 0 && n % block == 0, "row length ", n, " is not a multiple of the block size ", block);
  return n / block;
}

// Index of the codebook entry nearest to v (the lower one on a tie).
int nearest_index(float v) {
  if (v <= kIq4Values[0]) return 0;
  if (v >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;  // kIq4Values[lo] < v <= kIq4Values[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v > kIq4Values[mid])
      lo = mid;
    else
      hi = mid;
  }
  return v - kIq4Values[lo] <= kIq4Values[hi] - v ? lo : hi;
}

// The best scale for 32 elements x with weights w (see the file comment); writes the indices
// chosen for it to L. Returns 0 (and indices of the smallest magnitude) for an all-zero group.
float fit_group(const float* x, const float* w, uint8_t* L) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + 32, static_cast<uint8_t>(nearest_index(0.0f)));
    return 0.0f;
  }
  // Indices for inverse scale `iscale`, and the weighted sums of the fit.
  auto try_scale = [&](float iscale, uint8_t* out, float* sqx, float* sq2) {
    *sqx = *sq2 = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_index(iscale * x[i]);
      out[i] = static_cast<uint8_t>(l);
      const float q = kIq4Values[l];
      *sqx += w[i] * q * x[i];
      *sq2 += w[i] * q * q;
    }
  };
  float sqx, sq2;
  try_scale(static_cast<float>(kIq4Values[0]) / max, L, &sqx, &sq2);
  float scale = sq2 > 0 ? sqx / sq2 : 0.0f;
  float best = scale * sqx;  // the drop of the weighted squared error
  uint8_t cand[32];
  for (int k = -kTries; k <= kTries; ++k) {
    try_scale((k + kIq4Values[0]) / max, cand, &sqx, &sq2);
    if (sq2 > 0 && sqx * sqx > best * sq2) {
      scale = sqx / sq2;
      best = scale * sqx;
      std::copy(cand, cand + 32, L);
    }
  }
  return scale;
}

void square_weights(const float* x, float* w) {
  for (int i = 0; i < 32; ++i) w[i] = x[i] * x[i];
}

// Indices of 32 elements against the scale as stored (dl); a zero scale keeps `L` as it is.
void reindex(const float* x, float dl, uint8_t* L) {
  if (dl == 0.0f) return;
  const float inv = 1.0f / dl;
  for (int i = 0; i < 32; ++i) L[i] = static_cast<uint8_t>(nearest_index(inv * x[i]));
}

// 32 indices -> 16 bytes in the legacy nibble order.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

// Exact integer dot product of the codebook values of 32 packed indices with 32 int8 quants.
int32_t dot_values(const uint8_t* qs, const int8_t* y) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) {
    s += kIq4Values[qs[j] & 0x0f] * y[j];
    s += kIq4Values[qs[j] >> 4] * y[j + 16];
  }
  return s;
}

}  // namespace

// ---- IQ4_NL -----------------------------------------------------------------------------------

void iq4_nl_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockIQ4_NL*>(vy);
  const int64_t nb = n_blocks(n, kQK4_NL);
  for (int64_t i = 0; i < nb; ++i, x += kQK4_NL) {
    float w[32];
    uint8_t L[32];
    square_weights(x, w);
    const float scale = fit_group(x, w, L);
    y[i].d = fp32_to_fp16(scale);
    reindex(x, fp16_to_fp32(y[i].d), L);
    pack_nibbles(L, y[i].qs);
  }
}

void iq4_nl_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_NL*>(vx);
  const int64_t nb = n_blocks(n, kQK4_NL);
  for (int64_t i = 0; i < nb; ++i, y += kQK4_NL) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4Values[x[i].qs[j] & 0x0f]);
      y[j + 16] = d * static_cast<float>(kIq4Values[x[i].qs[j] >> 4]);
    }
  }
}

float iq4_nl_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockIQ4_NL*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const int64_t nb = n_blocks(n, kQK4_NL);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i)
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(dot_values(x[i].qs, y[i].qs));
  return sum;
}

// ---- IQ4_XS -----------------------------------------------------------------------------------

void iq4_xs_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockIQ4_XS*>(vy);
  const int64_t nb = n_blocks(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[8];
    uint8_t L[kQK_K];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int j = 0; j < 8; ++j) {
      float w[32];
      square_weights(x + 32 * j, w);
      scales[j] = fit_group(x + 32 * j, w, L + 32 * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockIQ4_XS& b = y[i];
    b = BlockIQ4_XS{};
    // The largest scale maps to -32, the asymmetric end of the 6-bit range, as the quants do.
    b.d = fp32_to_fp16(-max_scale / 32.0f);
    const float d = fp16_to_fp32(b.d);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 8; ++j) {
      const int l = std::clamp(static_cast<int>(std::lrint(inv * scales[j])), -32, 31);
      reindex(x + 32 * j, d * static_cast<float>(l), L + 32 * j);
      const int ls = l + 32;
      b.scales_l[j / 2] = static_cast<uint8_t>(b.scales_l[j / 2] | ((ls & 0x0f) << (4 * (j % 2))));
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((ls >> 4) << (2 * j)));
      pack_nibbles(L + 32 * j, b.qs + 16 * j);
    }
  }
}

void iq4_xs_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_XS*>(vx);
  const int64_t nb = n_blocks(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 8; ++j, y += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[i], j) - 32);
      const uint8_t* qs = x[i].qs + 16 * j;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * static_cast<float>(kIq4Values[qs[l] & 0x0f]);
        y[l + 16] = dl * static_cast<float>(kIq4Values[qs[l] >> 4]);
      }
    }
  }
}

float iq4_xs_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockIQ4_XS*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n_blocks(n, kQK_K);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t qsum = 0;  // <= 8 * 32 * 32 * 127 * 127: fits
    for (int j = 0; j < 8; ++j)
      qsum += (iq4_xs_scale(x[i], j) - 32) * dot_values(x[i].qs + 16 * j, y[i].qs + 32 * j);
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(qsum);
  }
  return sum;
}

}  // namespace edgelm::kernels
