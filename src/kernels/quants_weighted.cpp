// Importance-weighted quantizers (see quants_weighted.h). Four searches serve all formats:
//  - fit_signed: x ~= scale * (L - nmax), L in [0, 2 nmax - 1] (Q3_K, Q6_K, Q4_0, Q5_0 and the
//    super-block scale of Q3_K's signed sub-block scales);
//  - fit_offset: x ~= scale * L - m, L in [0, nmax], m >= 0 (Q2_K, Q4_K, Q5_K, Q4_1, Q5_1);
//  - fit_positive: x ~= scale * L for x >= 0 (the 4/6-bit sub-block scales and mins of Q2_K,
//    Q4_K, Q5_K against the fp16 d / dmin);
//  - fit_iq4: x ~= d * kIq4Values[L] per 32 elements (IQ4_NL, IQ4_XS).
// Each tries a grid of candidate inverse scales, solves the best scale (and offset) for the
// quants each candidate rounds to, keeps the one with the lowest weighted error, then moves one
// quant at a time while that lowers the error. Arithmetic order (and float/double choice) is
// the reference's, so the chosen quants, and the bytes, are the same.
#include "kernels/quants_weighted.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "kernels/fp16.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

int64_t blocks_of(int64_t n, int64_t block) {
  EDGELM_CHECK(n >= 0 && n % block == 0, "row length ", n, " is not a multiple of the block size ", block);
  return n / block;
}

int nearest_int(float v) { return static_cast<int>(std::lrint(v)); }
int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// fit_signed: returns the scale; L[i] = l + nmax with l in [-nmax, nmax - 1]. Candidates:
// -(nmax + 0.1 k) / max and (nmax - 1 + 0.1 k) / max for k in [-9, 9] (max the signed absmax),
// then single-quant moves along the largest weighted gradient.
float fit_signed(int n, int nmax, const float* x, int8_t* L, const float* w) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  // Rounds x with inverse scale `is`, accumulating sum w x l and sum w l^2.
  auto sums = [&](float is, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(is * x[i]), -nmax, nmax - 1);
      *sumlx += w[i] * x[i] * static_cast<float>(l);
      *suml2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  auto assign = [&](float is) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(is * x[i]), -nmax, nmax - 1));
  };
  float sumlx, suml2;
  float iscale = static_cast<float>(-nmax) / max;
  sums(iscale, &sumlx, &suml2);
  assign(iscale);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  float best_sumlx = sumlx, best_suml2 = suml2;
  for (int k = -9; k <= 9; ++k) {
    const float cands[2] = {-(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max,
                            (static_cast<float>(nmax - 1) + 0.1f * static_cast<float>(k)) / max};
    for (const float is : cands) {
      sums(is, &sumlx, &suml2);
      if (suml2 > 0 && sumlx * sumlx > best * suml2) {
        assign(is);
        scale = sumlx / suml2;
        best = scale * sumlx;
        best_sumlx = sumlx;
        best_suml2 = suml2;
      }
    }
  }
  sumlx = best_sumlx;
  suml2 = best_suml2;
  for (int iter = 0; iter < n * (2 * nmax - 1); ++iter) {
    float abs_gmax = 0.0f, gmax = 0.0f;
    int best_j = -1;
    for (int j = 0; j < n; ++j) {
      const int l = L[j] - nmax;
      const float g = scale * w[j] * (x[j] - scale * static_cast<float>(l));
      if ((g > 0 && l < nmax - 1) || (g < 0 && l > -nmax)) {
        if (std::fabs(g) > abs_gmax) {
          abs_gmax = std::fabs(g);
          gmax = g;
          best_j = j;
        }
      }
    }
    if (best_j < 0) break;
    const float wj = w[best_j];
    int l = L[best_j] - nmax;
    float new_sumlx = sumlx, new_suml2 = suml2;
    if (gmax > 0) {
      new_sumlx += wj * x[best_j];
      new_suml2 += wj * static_cast<float>(2 * l + 1);
      l += 1;
    } else {
      new_sumlx -= wj * x[best_j];
      new_suml2 -= wj * static_cast<float>(2 * l - 1);
      l -= 1;
    }
    if (!(new_suml2 > 0 && new_sumlx * new_sumlx > best * new_suml2)) break;
    sumlx = new_sumlx;
    suml2 = new_suml2;
    scale = sumlx / suml2;
    best = scale * sumlx;
    L[best_j] = static_cast<int8_t>(l + nmax);
  }
  return scale;
}

// fit_offset: returns the scale, writes L in [0, nmax] and *neg_min = m >= 0. The error is
// accumulated in double. Candidates (rmin + rdelta k + nmax) / (max - min) for k in [0, nstep],
// `min` the best offset so far; then single-quant moves along the largest residual while the
// closed-form fit improves (and never straight back).
float fit_offset(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin, float rdelta,
                 int nstep) {
  float min = x[0], max = x[0];
  double sum_w = w[0];
  double sum_x = sum_w * static_cast<double>(x[0]);
  double sum_x2 = sum_w * static_cast<double>(x[0]) * static_cast<double>(x[0]);
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const double wi = w[i];
    sum_w += wi;
    sum_x += wi * static_cast<double>(x[i]);
    sum_x2 += wi * static_cast<double>(x[i]) * static_cast<double>(x[i]);
  }
  if (min > 0) min = 0;
  if (max - min < 1e-10f) {
    std::memset(L, 0, static_cast<size_t>(n));
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  double best_err = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    double diff = static_cast<double>(scale) * L[i] + static_cast<double>(min) - static_cast<double>(x[i]);
    diff = diff * diff;
    best_err += static_cast<double>(w[i]) * diff;
  }
  uint8_t cand[kQK_K];
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (max - min);
    double sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      cand[i] = static_cast<uint8_t>(l);
      const double wi = w[i];
      sum_l += wi * l;
      sum_l2 += wi * l * l;
      sum_xl += wi * l * static_cast<double>(x[i]);
    }
    const double det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    double s = (sum_w * sum_xl - sum_x * sum_l) / det;
    double m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0) {
      m = 0;
      s = sum_xl / sum_l2;
    }
    const double err =
        sum_x2 - 2 * s * sum_xl - 2 * m * sum_x + 2 * s * m * sum_l + s * s * sum_l2 + m * m * sum_w;
    if (err < best_err) {
      std::memcpy(L, cand, static_cast<size_t>(n));
      best_err = err;
      scale = static_cast<float>(s);
      min = static_cast<float>(m);
    }
  }

  double sum_l = 0, sum_l2 = 0, sum_xl = 0;
  for (int i = 0; i < n; ++i) {
    const int l = L[i];
    const double wi = w[i];
    sum_l += wi * l;
    sum_l2 += wi * l * l;
    sum_xl += wi * l * static_cast<double>(x[i]);
  }
  const double ds = scale, dm = min;
  double best = 2 * ds * sum_xl + 2 * dm * sum_x - 2 * ds * dm * sum_l - ds * ds * sum_l2 - dm * dm * sum_w;
  int last_j = -1, last_dir = 0;
  for (int it = 0; it < nmax * n; ++it) {
    float gmax = 0;
    int best_j = -1, dir = 0;
    for (int j = 0; j < n; ++j) {
      const float g = x[j] - scale * L[j] - min;
      if (g > 0 && L[j] < nmax && g > gmax) {
        gmax = g;
        best_j = j;
        dir = 1;
      } else if (g < 0 && L[j] > 0 && -g > gmax) {
        gmax = -g;
        best_j = j;
        dir = -1;
      }
    }
    if (best_j < 0 || (best_j == last_j && dir == -last_dir)) break;
    const double wj = w[best_j];
    sum_l += wj * dir;
    sum_l2 += wj * (2 * L[best_j] * dir + 1);
    sum_xl += wj * static_cast<double>(x[best_j]) * dir;
    const double det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) break;
    double s = (sum_w * sum_xl - sum_x * sum_l) / det;
    double m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0) {
      m = 0;
      s = sum_xl / sum_l2;
    }
    if (s < 0) break;
    const double score = 2 * s * sum_xl + 2 * m * sum_x - 2 * s * m * sum_l - s * s * sum_l2 - m * m * sum_w;
    if (score <= best) break;
    best = score;
    scale = static_cast<float>(s);
    min = static_cast<float>(m);
    L[best_j] = static_cast<uint8_t>(L[best_j] + dir);
    last_j = best_j;
    last_dir = dir;
  }
  *neg_min = -min;
  return scale;
}

}  // namespace

// fit_positive: x >= 0 (sub-block scales or mins) ~= scale * L, L in [0, nmax]. Candidates
// (nmax + 0.1 k) / max for k in [-4, 4], then up to 5 sweeps that re-round each L[i] against the
// fit of the others. Returns the scale (the fp16 d or dmin before rounding).
float fit_positive(int n, int nmax, const float* x, uint8_t* L, const float* w) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < 1e-16f) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * L[i];
    best_mse += w[i] * diff * diff;
  }
  for (int k = -4; k <= 4; ++k) {
    if (k == 0) continue;
    const float is = (0.1f * static_cast<float>(k) + static_cast<float>(nmax)) / max;
    const float s = 1 / is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(is * x[i]));
      const float diff = x[i] - s * static_cast<float>(l);
      mse += w[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    sumlx += w[i] * x[i] * static_cast<float>(l);
    suml2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int sweep = 0; sweep < 5; ++sweep) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      float slx = sumlx - w[i] * x[i] * L[i];
      float sl2 = suml2 - w[i] * L[i] * L[i];
      if (!(slx > 0 && sl2 > 0)) continue;
      const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
      if (new_l == L[i]) continue;
      slx += w[i] * x[i] * static_cast<float>(new_l);
      sl2 += w[i] * static_cast<float>(new_l) * static_cast<float>(new_l);
      if (slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<uint8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  return sumlx / suml2;
}

namespace {

// Per-element weights qw[i] * sqrt(sigma2 + x[i]^2).
void element_weights(const float* x, const float* qw, int n, float sigma2, float* out) {
  for (int i = 0; i < n; ++i) out[i] = qw[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

float sum_of(const float* v, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += v[i];
  return s;
}

float sum_sq(const float* x, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// Index of the codebook entry nearest v (a tie goes to the larger entry).
int iq4_nearest(float v) {
  for (int i = 0; i < 15; ++i)
    if (v - kIq4Values[i] < kIq4Values[i + 1] - v) return i;
  return 15;
}

// fit_iq4 for one block of 32: returns d, writes L (codebook indices). Candidates: the signed
// absmax on either end of the codebook, shifted by k in [-7, 7]; then single-index moves with
// the smallest step to the next entry along the weighted gradient.
float fit_iq4(const float* x, const float* w, uint8_t* L) {
  constexpr int n = 32;
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;  // L is assigned later from the scale (0)
  auto sums = [&](float id, float* sumqx, float* sumq2) {
    *sumqx = *sumq2 = 0;
    for (int j = 0; j < n; ++j) {
      const float q = kIq4Values[iq4_nearest(id * x[j])];
      *sumqx += w[j] * q * x[j];
      *sumq2 += w[j] * q * q;
    }
  };
  auto assign = [&](float id) {
    for (int j = 0; j < n; ++j) L[j] = static_cast<uint8_t>(iq4_nearest(id * x[j]));
  };
  float d = -max / static_cast<float>(kIq4Values[0]);
  float sumqx, sumq2;
  sums(1 / d, &sumqx, &sumq2);
  assign(1 / d);
  d = sumqx / sumq2;
  float best = d * sumqx;
  float best_sumqx = sumqx, best_sumq2 = sumq2;
  for (int k = -7; k <= 7; ++k) {
    const float ids[2] = {static_cast<float>(k + kIq4Values[0]) / max, static_cast<float>(k + kIq4Values[15]) / max};
    for (const float id : ids) {
      sums(id, &sumqx, &sumq2);
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
        best_sumqx = sumqx;
        best_sumq2 = sumq2;
        assign(id);
      }
    }
  }
  sumqx = best_sumqx;
  sumq2 = best_sumq2;
  for (int iter = 0; iter < 32 * n; ++iter) {
    float min_step = std::numeric_limits<float>::infinity();
    int best_j = -1, dir = 0;
    for (int j = 0; j < n; ++j) {
      const float g = d * w[j] * (x[j] - d * kIq4Values[L[j]]);
      if (g > 0 && L[j] < 15) {
        const float step = static_cast<float>(kIq4Values[L[j] + 1] - kIq4Values[L[j]]) / g;
        if (step < min_step) {
          min_step = step;
          best_j = j;
          dir = 1;
        }
      } else if (g < 0 && L[j] > 0) {
        const float step = static_cast<float>(kIq4Values[L[j] - 1] - kIq4Values[L[j]]) / g;
        if (step < min_step) {
          min_step = step;
          best_j = j;
          dir = -1;
        }
      }
    }
    if (best_j < 0) break;
    const int from = kIq4Values[L[best_j]], to = kIq4Values[L[best_j] + dir];
    const float new_sumqx = sumqx + w[best_j] * x[best_j] * static_cast<float>(to - from);
    const float new_sumq2 = sumq2 + w[best_j] * static_cast<float>(to * to - from * from);
    if (!(new_sumq2 > 0 && new_sumqx * new_sumqx > best * new_sumq2)) break;
    sumqx = new_sumqx;
    sumq2 = new_sumq2;
    d = sumqx / sumq2;
    best = d * sumqx;
    L[best_j] = static_cast<uint8_t>(L[best_j] + dir);
  }
  return d;
}

void pack_k_low2(const uint8_t* L, uint8_t* qs) {  // Q2_K/Q3_K: element 128 h + 32 s + l at bits 2 s of qs[32 h + l]
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* q = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>((q[0] & 3) | ((q[32] & 3) << 2) | ((q[64] & 3) << 4) | ((q[96] & 3) << 6));
    }
}

// Shared by Q4_K / Q5_K: weighted fits of the 8 sub-blocks, then of their scales and mins.
void k4_weighted(const float* x, const float* qw, int nmax, uint16_t* d_out, uint16_t* dmin_out,
                 uint8_t packed[kKScaleBytes], uint8_t L[kQK_K]) {
  const float sigma2 = 2 * sum_sq(x, kQK_K) / kQK_K;
  float w[32], sw[8], scales[8], mins[8];
  for (int j = 0; j < 8; ++j) {
    element_weights(x + 32 * j, qw + 32 * j, 32, sigma2, w);
    sw[j] = sum_of(w, 32);
    scales[j] = fit_offset(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36);
  }
  uint8_t ls[8], lm[8];
  const float d_block = fit_positive(8, 63, scales, ls, sw);
  const float m_block = fit_positive(8, 63, mins, lm, sw);
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min<uint8_t>(63, ls[j]);
    lm[j] = std::min<uint8_t>(63, lm[j]);
  }
  k4_pack_scale_min(ls, lm, packed);
  *d_out = fp32_to_fp16(d_block);
  *dmin_out = fp32_to_fp16(m_block);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_get_scale_min(j, packed, &sc, &m);
    const float d = fp16_to_fp32(*d_out) * sc;
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(*dmin_out) * m;
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
  }
}

// Q5_0 / Q5_1: the fifth bits into the little-endian u32 qh, low nibbles as Q4_0.
void pack_5bit(const uint8_t* L, uint8_t qh_out[4], uint8_t qs[16]) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0x0f) | ((L[j + 16] & 0x0f) << 4));
    qh |= static_cast<uint32_t>((L[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((L[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

}  // namespace

void q2_k_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ2_K*>(vy);
  const int64_t nb = blocks_of(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, qw += kQK_K) {
    const float sigma2 = 0.75f * sum_sq(x, kQK_K) / kQK_K;
    uint8_t L[kQK_K];
    float w[16], sw[16], scales[16], mins[16];
    for (int j = 0; j < 16; ++j) {
      element_weights(x + 16 * j, qw + 16 * j, 16, sigma2, w);
      sw[j] = sum_of(w, 16);
      scales[j] = fit_offset(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.9f, 0.05f, 36);
    }
    uint8_t ls[16], lm[16];
    const float dm = fit_positive(16, 15, scales, ls, sw);
    const float mm = fit_positive(16, 15, mins, lm, sw);
    BlockQ2_K& b = y[i];
    b.d = fp32_to_fp16(dm);
    b.dmin = fp32_to_fp16(mm);
    for (int j = 0; j < 16; ++j) {
      // The quants are rounded against the float scales, before their fp16 rounding.
      const float d = dm * ls[j];
      const float m = mm * lm[j];
      const float id = d != 0.0f ? 1 / d : 0.0f;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + l] + m) * id), 0, 3));
      b.scales[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
    }
    pack_k_low2(L, b.qs);
  }
}

void q3_k_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ3_K*>(vy);
  const int64_t nb = blocks_of(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, qw += kQK_K) {
    const float sigma2 = 2 * sum_sq(x, kQK_K) / kQK_K;
    int8_t L[kQK_K];
    float w[16], sw[16], scales[16];
    for (int j = 0; j < 16; ++j) {
      element_weights(x + 16 * j, qw + 16 * j, 16, sigma2, w);
      sw[j] = sum_of(w, 16);
      scales[j] = fit_signed(16, 4, x + 16 * j, L + 16 * j, w);
    }
    BlockQ3_K& b = y[i];
    std::memset(b.scales, 0, sizeof(b.scales));
    int8_t ls[16];  // biased by 32
    const float d_block = fit_signed(16, 32, scales, ls, sw);
    for (int j = 0; j < 16; ++j) q3_k_pack_scale(b.scales, j, ls[j]);
    b.d = fp32_to_fp16(d_block);
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(b.d) * static_cast<float>(ls[j] - 32);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
    }
    std::memset(b.hmask, 0, sizeof(b.hmask));
    uint8_t low[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      if (L[e] > 3) b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | (1 << (e / 32)));
      low[e] = static_cast<uint8_t>(L[e] & 3);
    }
    pack_k_low2(low, b.qs);
  }
}

void q4_k_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ4_K*>(vy);
  const int64_t nb = blocks_of(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, qw += kQK_K) {
    uint8_t L[kQK_K];
    k4_weighted(x, qw, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void q5_k_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ5_K*>(vy);
  const int64_t nb = blocks_of(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, qw += kQK_K) {
    uint8_t L[kQK_K];
    k4_weighted(x, qw, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void q6_k_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ6_K*>(vy);
  const int64_t nb = blocks_of(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, qw += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_signed(16, 32, x + 16 * j, L + 16 * j, qw + 16 * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs < kGroupMaxEps) {
      y[i] = BlockQ6_K{};
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * y[i].scales[j];
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const int8_t* q = L + 128 * h + l;
        y[i].ql[64 * h + l] = static_cast<uint8_t>((q[0] & 0x0f) | ((q[64] & 0x0f) << 4));
        y[i].ql[64 * h + 32 + l] = static_cast<uint8_t>((q[32] & 0x0f) | ((q[96] & 0x0f) << 4));
        y[i].qh[32 * h + l] =
            static_cast<uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
      }
    }
  }
}

void q4_0_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ4_0*>(vy);
  const int64_t nb = blocks_of(n, kQK);
  const float sigma2 = sum_sq(x, n) / static_cast<float>(n);
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + kQK * i;
    float w[kQK];
    int8_t L[kQK];
    element_weights(xb, qw + kQK * i, kQK, sigma2, w);
    y[i].d = fp32_to_fp16(fit_signed(kQK, 8, xb, L, w));
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
  }
}

void q4_1_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ4_1*>(vy);
  const int64_t nb = blocks_of(n, kQK);
  const float sigma2 = sum_sq(x, n) / static_cast<float>(n);
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + kQK * i;
    float w[kQK], neg_min;
    uint8_t L[kQK];
    element_weights(xb, qw + kQK * i, kQK, sigma2, w);
    y[i].d = fp32_to_fp16(fit_offset(kQK, 15, xb, w, L, &neg_min, -0.9f, 0.05f, 36));
    y[i].m = fp32_to_fp16(-neg_min);
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
  }
}

void q5_0_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ5_0*>(vy);
  const int64_t nb = blocks_of(n, kQK);
  const float sigma2 = sum_sq(x, n) / static_cast<float>(n);
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + kQK * i;
    float w[kQK];
    int8_t L[kQK];
    element_weights(xb, qw + kQK * i, kQK, sigma2, w);
    y[i].d = fp32_to_fp16(fit_signed(kQK, 16, xb, L, w));
    uint8_t u[kQK];
    for (int j = 0; j < kQK; ++j) u[j] = static_cast<uint8_t>(L[j]);
    pack_5bit(u, y[i].qh, y[i].qs);
  }
}

void q5_1_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockQ5_1*>(vy);
  const int64_t nb = blocks_of(n, kQK);
  const float sigma2 = sum_sq(x, n) / static_cast<float>(n);
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + kQK * i;
    float w[kQK], neg_min;
    uint8_t L[kQK];
    element_weights(xb, qw + kQK * i, kQK, sigma2, w);
    y[i].d = fp32_to_fp16(fit_offset(kQK, 31, xb, w, L, &neg_min, -0.9f, 0.05f, 36));
    y[i].m = fp32_to_fp16(-neg_min);
    pack_5bit(L, y[i].qh, y[i].qs);
  }
}

void iq4_nl_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockIQ4_NL*>(vy);
  const int64_t nb = blocks_of(n, kQK4_NL);
  for (int64_t i = 0; i < nb; ++i, x += kQK4_NL, qw += kQK4_NL) {
    const float sigma2 = sum_sq(x, kQK4_NL) * (2.f / kQK4_NL);
    float w[kQK4_NL];
    uint8_t L[kQK4_NL];
    element_weights(x, qw, kQK4_NL, sigma2, w);
    const float d = fit_iq4(x, w, L);
    y[i].d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < kQK4_NL; ++j) L[j] = static_cast<uint8_t>(iq4_nearest(id * x[j]));
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
  }
}

void iq4_xs_from_float_weighted(const float* x, void* vy, int64_t n, const float* qw) {
  auto* y = static_cast<BlockIQ4_XS*>(vy);
  const int64_t nb = blocks_of(n, kQK_K);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, qw += kQK_K) {
    const float sigma2 = sum_sq(x, kQK_K) * (2.f / kQK_K);
    float w[32], scales[8];
    uint8_t L[kQK_K];
    float max_scale = 0, amax_scale = 0;
    for (int j = 0; j < 8; ++j) {
      element_weights(x + 32 * j, qw + 32 * j, 32, sigma2, w);
      scales[j] = fit_iq4(x + 32 * j, w, L + 32 * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockIQ4_XS& b = y[i];
    b.scales_h = 0;
    std::memset(b.scales_l, 0, sizeof(b.scales_l));
    const float d = -max_scale / 32;
    b.d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < 8; ++j) {
      const int l = clamp_int(nearest_int(id * scales[j]), -32, 31);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      for (int e = 0; e < 32; ++e) L[32 * j + e] = static_cast<uint8_t>(iq4_nearest(idl * x[32 * j + e]));
      const int ls = l + 32;
      b.scales_l[j / 2] = static_cast<uint8_t>(b.scales_l[j / 2] | ((ls & 0x0f) << (4 * (j % 2))));
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((ls >> 4) << (2 * j)));
    }
    for (int s = 0; s < 8; ++s)
      for (int j = 0; j < 16; ++j) b.qs[16 * s + j] = static_cast<uint8_t>(L[32 * s + j] | (L[32 * s + 16 + j] << 4));
  }
}

WeightedQuantizer weighted_quantizer(DType type) {
  switch (type) {
    case DType::q2_k: return q2_k_from_float_weighted;
    case DType::q3_k: return q3_k_from_float_weighted;
    case DType::q4_k: return q4_k_from_float_weighted;
    case DType::q5_k: return q5_k_from_float_weighted;
    case DType::q6_k: return q6_k_from_float_weighted;
    case DType::q4_0: return q4_0_from_float_weighted;
    case DType::q4_1: return q4_1_from_float_weighted;
    case DType::q5_0: return q5_0_from_float_weighted;
    case DType::q5_1: return q5_1_from_float_weighted;
    case DType::iq4_nl: return iq4_nl_from_float_weighted;
    case DType::iq4_xs: return iq4_xs_from_float_weighted;
    case DType::iq3_s: return iq3_s_from_float_weighted;
    case DType::iq2_xs: return iq2_xs_from_float_weighted;
    case DType::iq2_xxs: return iq2_xxs_from_float_weighted;
    case DType::iq2_s: return iq2_s_from_float_weighted;
    case DType::iq3_xxs: return iq3_xxs_from_float_weighted;
    case DType::iq1_s: return iq1_s_from_float_weighted;
    case DType::iq1_m: return iq1_m_from_float_weighted;
    default: return nullptr;
  }
}

}  // namespace edgelm::kernels
