// Scalar reference kernels of MXFP4 and NVFP4; see quants_fp4.h for the layouts and rules.
#include "kernels/quants_fp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/dequant_dot.h"

namespace edgelm::kernels {
namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The index of the value nearest to x / scale: the first of equal errors, as numpy's argmin.
uint8_t nearest(float x, float scale) {
  int best = 0;
  float best_err = std::fabs(scale * static_cast<float>(kFp4Values[0]) - x);
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(scale * static_cast<float>(kFp4Values[k]) - x);
    if (err < best_err) {
      best_err = err;
      best = k;
    }
  }
  return static_cast<uint8_t>(best);
}

// The reference's float -> UE4M3 of a non-negative scale (clamped to 448): round to nearest by
// the first dropped mantissa bit, subnormals by x * 512 + 0.5, saturating at 0x7e.
uint8_t to_ue4m3(float x) {
  x = std::clamp(x, 0.0f, 448.0f);
  if (!(x > 0.0f)) return 0;
  const uint32_t bits = to_bits(x);
  const int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 7;
  if (exp <= 0) {
    const int man = std::clamp(static_cast<int>(x * 512.0f + 0.5f), 0, 7);
    return static_cast<uint8_t>(man >= 1 ? man : 0);
  }
  if (exp >= 15) return 0x7e;
  int man = static_cast<int>((bits >> 20) & 7) + static_cast<int>((bits >> 19) & 1);
  int e = exp;
  if (man > 7) {
    man = 0;
    e += 1;
  }
  if (e >= 15) return 0x7e;
  return static_cast<uint8_t>((e << 3) | man);
}

void mxfp4_block(const BlockMXFP4& b, float* y) {
  const float d = e8m0_half(b.e);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kFp4Values[b.qs[j] & 0x0f]);
    y[j + 16] = d * static_cast<float>(kFp4Values[b.qs[j] >> 4]);
  }
}

void nvfp4_block(const BlockNVFP4& b, float* y) {
  for (int k = 0; k < 4; ++k) {
    const float d = ue4m3_half(b.d[k]);
    for (int j = 0; j < 8; ++j) {
      y[16 * k + j] = d * static_cast<float>(kFp4Values[b.qs[8 * k + j] & 0x0f]);
      y[16 * k + j + 8] = d * static_cast<float>(kFp4Values[b.qs[8 * k + j] >> 4]);
    }
  }
}

}  // namespace

float e8m0_half(uint8_t e) { return from_bits(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23); }

float ue4m3_half(uint8_t s) {
  if (s == 0 || s == 0x7f) return 0.0f;
  const int exp = (s >> 3) & 0x0f;
  const float man = static_cast<float>(s & 7);
  const float raw = exp == 0 ? man * 0x1p-9f : (1.0f + man / 8.0f) * std::ldexp(1.0f, exp - 7);
  return raw * 0.5f;
}

void mxfp4_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockMXFP4*>(vy);
  for (int64_t i = 0, nb = row_blocks(n, kQKMxfp4); i < nb; ++i) {
    const float* xb = x + i * kQKMxfp4;
    float amax = 0.0f;
    for (int j = 0; j < kQKMxfp4; ++j) amax = std::max(amax, std::fabs(xb[j]));
    // Wraps modulo 256 outside [2^-127, 2^129) as the reference's uint8 conversion does there.
    const uint8_t e =
        amax > 0.0f ? static_cast<uint8_t>(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127) : uint8_t{0};
    const float d = e8m0_half(e);
    y[i].e = e;
    for (int j = 0; j < 16; ++j)
      y[i].qs[j] = static_cast<uint8_t>(nearest(xb[j], d) | (nearest(xb[j + 16], d) << 4));
  }
}

void mxfp4_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockMXFP4*>(vx);
  for (int64_t i = 0, nb = row_blocks(n, kQKMxfp4); i < nb; ++i) mxfp4_block(x[i], y + i * kQKMxfp4);
}

float mxfp4_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockMXFP4*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  float sum = 0.0f;
  for (int64_t i = 0, nb = row_blocks(n, kQKMxfp4); i < nb; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += kFp4Values[x[i].qs[j] & 0x0f] * y[i].qs[j] + kFp4Values[x[i].qs[j] >> 4] * y[i].qs[j + 16];
    sum += e8m0_half(x[i].e) * fp16_to_fp32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

void nvfp4_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockNVFP4*>(vy);
  for (int64_t i = 0, nb = row_blocks(n, kQKNvfp4); i < nb; ++i) {
    for (int k = 0; k < 4; ++k) {
      const float* xb = x + i * kQKNvfp4 + 16 * k;
      float amax = 0.0f;
      for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(xb[j]));
      const uint8_t s = to_ue4m3(amax / 6.0f);
      const float d = ue4m3_half(s);
      y[i].d[k] = s;
      for (int j = 0; j < 8; ++j)
        y[i].qs[8 * k + j] = static_cast<uint8_t>(nearest(xb[j], d) | (nearest(xb[j + 8], d) << 4));
    }
  }
}

void nvfp4_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockNVFP4*>(vx);
  for (int64_t i = 0, nb = row_blocks(n, kQKNvfp4); i < nb; ++i) nvfp4_block(x[i], y + i * kQKNvfp4);
}

float nvfp4_vec_dot(int64_t n, const void* x, const void* y) {
  return dequant_dot_q8_0<BlockNVFP4, kQKNvfp4, nvfp4_block>(n, x, y);
}

}  // namespace edgelm::kernels
