// Quantizers for the K formats Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (weights) and Q8_K (activations).
//
// Weights: each sub-block gets a scale (and for Q4_K/Q5_K a min) from a weighted least-squares
// search over a handful of candidate scales: for each candidate the quants are fixed by
// rounding, the best (scale, min) for those quants is solved in closed form, and the candidate
// with the lowest weighted squared error wins. The sub-block scales are then quantized to 6 or
// 8 bits against the super-block's fp16 d/dmin, and the quants recomputed with the scales as
// stored, so that rounding of the scales does not compound with stale quants.
//
// Weights of the error: Q4_K/Q5_K weigh element i by rms(sub-block) + |x_i| (large values
// matter more, but small ones are not ignored); Q2_K by |x_i|; Q3_K and Q6_K by x_i^2. These are
// the choices of the reference quantizer without an importance matrix. Q2_K (16 sub-blocks of 16,
// 4-bit scales and mins against d / dmin) and Q3_K (16 sub-blocks of 16, signed 6-bit scales
// against d) reuse the same fits with their own ranges; their bytes need not equal the
// reference quantizer's (tests check the layout by round trips and the error by budgets).
//
// Q8_K follows the reference rule exactly: d = max / -127 from the signed absmax, quants
// rounded to nearest (ties to even), so that the max maps to -127 and nothing overflows int8.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/fp16.h"
#include "kernels/quants_k.h"

namespace edgelm::kernels {
namespace {

// Below this magnitude a group is treated as all zeros (its scale would be denormal noise).
constexpr float kGroupMaxEps = 1e-15f;

int64_t n_super_blocks(int64_t n) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  return n / kQK_K;
}

// Round to nearest, ties to even (the default rounding mode).
int nearest_int(float v) { return static_cast<int>(std::lrint(v)); }

int clamp_int(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

// The searches below run in float with the reference quantizer's operation order (products
// left to right, sums in element order), so that on the same input they make the same choices
// and write the same bytes; the search itself is what gives the low error, not the order.

// Fits x[i] ~= scale * L[i] - neg_min, L[i] in [0, nmax], neg_min >= 0, minimizing
// sum w[i] * err^2. Candidates: the plain (max - min) / nmax grid, then inverse scales
// (nmax + rmin + rdelta * k) / (max - origin), k in [0, nstep], where origin is the best offset
// found so far (initially the minimum), so later candidates refine around an improved fit.
// For each candidate the quants are fixed by rounding and the best (scale, offset) for them is
// the closed-form weighted least-squares solution. Returns scale; writes L and neg_min.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep) {
  float lo = x[0], hi = x[0];
  float sum_w = 0.0f, sum_x = 0.0f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);  // the offset can only move values down: a min above 0 is wasted range
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *neg_min = -lo;
    return 0.0f;
  }

  // Quants for inverse scale `iscale` counted up from `origin`.
  auto quantize_with = [&](float iscale, float origin, uint8_t* out) {
    for (int i = 0; i < n; ++i)
      out[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - origin)), 0, nmax));
  };
  auto weighted_error = [&](const uint8_t* q, float scale, float offset) {
    float e = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * q[i] + offset - x[i];
      e += w[i] * (diff * diff);
    }
    return e;
  };

  const float iscale0 = nmax / (hi - lo);
  float best_scale = 1.0f / iscale0;
  float best_offset = lo;
  quantize_with(iscale0, lo, L);
  float best_err = weighted_error(L, best_scale, best_offset);

  uint8_t cand[kQK_K];
  for (int k = 0; k <= nstep; ++k) {
    const float origin = best_offset;
    if (hi - origin <= 0) break;  // cannot happen for a sensible fit; keeps the division positive
    quantize_with((rmin + rdelta * k + nmax) / (hi - origin), origin, cand);
    float sl = 0, sll = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      sl += w[i] * cand[i];
      sll += w[i] * cand[i] * cand[i];
      sxl += w[i] * cand[i] * x[i];
    }
    const float det = sum_w * sll - sl * sl;
    if (det <= 0) continue;  // all quants equal: no unique fit, and the plain grid covers it
    float scale = (sum_w * sxl - sum_x * sl) / det;
    float offset = (sll * sum_x - sl * sxl) / det;
    if (offset > 0) {  // the format cannot add an offset: refit the scale alone
      offset = 0;
      scale = sxl / sll;
    }
    const float err = weighted_error(cand, scale, offset);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      best_offset = offset;
      std::copy(cand, cand + n, L);
    }
  }
  *neg_min = -best_offset;
  return best_scale;
}

// Fits x[i] ~= scale * (L[i] - nmax), L[i] - nmax in [-nmax, nmax - 1], weighting by x^2.
// Candidates: inverse scales -(nmax + 0.1 k) / max for k in [-9, 9], with max the signed
// absmax (so the largest element lands on the asymmetric end -nmax). For fixed quants the
// best scale is sxl / sll and the weighted error drops by sxl^2 / sll: the candidate with the
// largest drop wins. Returns scale.
float fit_scale_symmetric(int n, int nmax, const float* x, uint8_t* L) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto sums = [&](float iscale, uint8_t* out, float* sxl, float* sll) {
    *sxl = *sll = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      out[i] = static_cast<uint8_t>(l + nmax);
      const float w = x[i] * x[i];
      *sxl += w * x[i] * l;
      *sll += w * l * l;
    }
  };
  float sxl, sll;
  sums(-nmax / max, L, &sxl, &sll);
  float scale = sll != 0.0f ? sxl / sll : 0.0f;
  float best = scale * sxl;
  uint8_t cand[kQK_K];
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;  // the plain grid above
    sums(-(nmax + 0.1f * k) / max, cand, &sxl, &sll);
    if (sll > 0 && sxl * sxl > best * sll) {
      std::copy(cand, cand + n, L);
      scale = sxl / sll;
      best = scale * sxl;
    }
  }
  return scale;
}

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. Writes d, dmin,
// the packed scales, and L[256] (quants in [0, nmax]) recomputed with the scales as stored.
void quantize_k4_scales(const float* x, int nmax, float rmin, float rdelta, int nstep, uint16_t* d_out,
                        uint16_t* dmin_out, uint8_t packed[kKScaleBytes], uint8_t L[kQK_K]) {
  float scales[8], mins[8];
  float w[32];
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], rmin, rdelta, nstep);
  }
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(clamp_int(nearest_int(inv_scale * scales[j]), 0, 63));
    lm[j] = static_cast<uint8_t>(clamp_int(nearest_int(inv_min * mins[j]), 0, 63));
  }
  k4_pack_scale_min(ls, lm, packed);
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);

  const float d = fp16_to_fp32(*d_out);
  const float dmin = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * ls[j];
    // A zero scale decodes every quant of the sub-block to -ml: keep the fit's quants (the
    // reference does too, so the bytes stay identical).
    if (dl == 0.0f) continue;
    const float ml = dmin * lm[j];
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + l] + ml) / dl), 0, nmax));
  }
}

}  // namespace

void q2_k_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ2_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    float scales[16], mins[16], w[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    BlockQ2_K& b = y[i];
    const float inv_scale = max_scale > 0 ? 15.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 15.0f / max_min : 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int ls = clamp_int(nearest_int(inv_scale * scales[j]), 0, 15);
      const int lm = clamp_int(nearest_int(inv_min * mins[j]), 0, 15);
      b.scales[j] = static_cast<uint8_t>(ls | (lm << 4));
    }
    b.d = fp32_to_fp16(max_scale / 15.0f);
    b.dmin = fp32_to_fp16(max_min / 15.0f);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(b.scales[j] & 0x0f);
      if (dl == 0.0f) continue;  // decodes to -ml whatever the quants: keep the fit's
      const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + l] + ml) / dl), 0, 3));
    }
    // Element 128 h + 32 s + l at bits 2 s of qs[32 h + l].
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const uint8_t* q = L + 128 * h + l;
        b.qs[32 * h + l] = static_cast<uint8_t>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
      }
  }
}

void q3_k_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ3_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];  // q + 4 in [0, 7]
    float scales[16];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_scale_symmetric(16, 4, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ3_K& b = y[i];
    b = BlockQ3_K{};
    if (amax_scale < kGroupMaxEps) {
      // d = 0 decodes everything to 0; the quants are 0 too (q = 4: high bits set).
      std::fill(std::begin(b.hmask), std::end(b.hmask), 0xff);
      for (int j = 0; j < 16; ++j) q3_k_pack_scale(b.scales, j, 32);
      continue;
    }
    // The largest scale maps to -32 (the asymmetric end of the 6-bit range).
    const float iscale = -32.0f / max_scale;
    int8_t ls[16];
    for (int j = 0; j < 16; ++j) {
      ls[j] = static_cast<int8_t>(clamp_int(nearest_int(iscale * scales[j]), -32, 31));
      q3_k_pack_scale(b.scales, j, ls[j] + 32);
    }
    b.d = fp32_to_fp16(1.0f / iscale);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(ls[j]);
      if (dl == 0.0f) continue;  // decodes to 0 whatever the quants: keep the fit's
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(clamp_int(nearest_int(x[16 * j + l] / dl), -4, 3) + 4);
    }
    // High bit (q >= 0, i.e. L >= 4) of element 32 b + l at bit b of hmask[l]; low 2 bits as Q2_K.
    for (int e = 0; e < kQK_K; ++e)
      if (L[e] >= 4) b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | (1 << (e / 32)));
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const uint8_t* q = L + 128 * h + l;
        b.qs[32 * h + l] =
            static_cast<uint8_t>((q[0] & 3) | ((q[32] & 3) << 2) | ((q[64] & 3) << 4) | ((q[96] & 3) << 6));
      }
  }
}

void q4_k_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_k4_scales(x, 15, -1.0f, 0.1f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void q5_k_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_k4_scales(x, 31, -0.5f, 0.1f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::fill(std::begin(y[i].qh), std::end(y[i].qh), 0);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        // Bit b of qh[l] is bit 4 of element 32 * b + l; here b = 2c and 2c + 1.
        y[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void q6_k_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    float scales[16];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_scale_symmetric(16, 32, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (amax_scale < kGroupMaxEps) {
      y[i] = BlockQ6_K{};  // all (near) zero: d = 0, and all-zero bytes like the reference
      continue;
    }
    // The largest scale maps to -128 (the asymmetric end of int8), like the quants.
    const float iscale = -128.0f / max_scale;
    y[i].d = fp32_to_fp16(1.0f / iscale);
    for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    const float d = fp16_to_fp32(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * y[i].scales[j];
      if (dl == 0.0f) continue;  // decodes to 0 whatever the quants: keep the fit's, as the reference
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(clamp_int(nearest_int(x[16 * j + l] / dl), -32, 31) + 32);
    }
    // Element 128 h + 32 k + l: low nibble into ql[64 h + 32 (k & 1) + l] (low for k < 2, high
    // otherwise), high 2 bits into bits 2k of qh[32 h + l].
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t* q = L + 128 * h + l;
        y[i].ql[64 * h + l] = static_cast<uint8_t>((q[0] & 0x0f) | ((q[64] & 0x0f) << 4));
        y[i].ql[64 * h + 32 + l] = static_cast<uint8_t>((q[32] & 0x0f) | ((q[96] & 0x0f) << 4));
        y[i].qh[32 * h + l] =
            static_cast<uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
      }
    }
  }
}

void q8_k_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float amax = 0.0f, max = 0.0f;
    for (int e = 0; e < kQK_K; ++e) {
      if (std::fabs(x[e]) > amax) {
        amax = std::fabs(x[e]);
        max = x[e];
      }
    }
    if (amax == 0.0f) {
      y[i] = BlockQ8_K{};
      continue;
    }
    const float iscale = -127.0f / max;
    for (int e = 0; e < kQK_K; ++e) y[i].qs[e] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[e])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace edgelm::kernels
