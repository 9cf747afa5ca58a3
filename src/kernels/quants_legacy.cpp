// Scalar reference kernels for the 32-element block formats; see quants_legacy.h for the
// layouts and the bit-exactness rules these functions keep.
#include "kernels/quants_legacy.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/check.h"
#include "kernels/fp16.h"

namespace edgelm::kernels {
namespace {

constexpr int kHalf = kQK / 2;

int64_t n_blocks(int64_t n) {
  EDGELM_CHECK(n >= 0 && n % kQK == 0, "row length ", n, " is not a multiple of the block size ", kQK);
  return n / kQK;
}

// The signed value of largest magnitude; the first one wins ties, as in the reference quantizer
// (this decides the sign of d, hence the bytes).
float signed_absmax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 | static_cast<uint32_t>(qh[2]) << 16 |
         static_cast<uint32_t>(qh[3]) << 24;
}

void store_qh(uint32_t v, uint8_t qh[4]) {
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(v >> (8 * i));
}

// The 5-bit quants of element j and j + 16 of a Q5 block.
void q5_unpack(const uint8_t* qs, uint32_t qh, int j, int* q0, int* q1) {
  *q0 = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
  *q1 = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
}

}  // namespace

// ---- Q4_0 -------------------------------------------------------------------------------------

void q4_0_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_0*>(vy);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    // The largest-magnitude element maps to q = 0 exactly (d = max / -8), which spends the
    // asymmetric end of [-8, 7] on the element that needs it.
    const float max = signed_absmax(x);
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kHalf; ++j) {
      // Truncation of (v + 8.5) is round-half-up of v + 8 for v > -8.5: the reference rule.
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[j] * id + 8.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[j + kHalf] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void q4_0_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(vx);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = (x[i].qs[j] & 0x0f) - 8;
      const int q1 = (x[i].qs[j] >> 4) - 8;
      y[j] = static_cast<float>(q0) * d;
      y[j + kHalf] = static_cast<float>(q1) * d;
    }
  }
}

float q4_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ4_0*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const int64_t nb = n_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0;  // |isum| <= 32 * 8 * 127: exact
    for (int j = 0; j < kHalf; ++j) {
      isum += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
      isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + kHalf];
    }
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

// ---- Q4_1 -------------------------------------------------------------------------------------

void q4_1_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(vy);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kHalf; ++j) {
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>((x[j + kHalf] - min) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void q4_1_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_1*>(vx);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0f) * d + m;
      y[j + kHalf] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

float q4_1_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ4_1*>(vx);
  const auto* y = static_cast<const BlockQ8_1*>(vy);
  const int64_t nb = n_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < kHalf; ++j) {
      isum += (x[i].qs[j] & 0x0f) * y[i].qs[j];
      isum += (x[i].qs[j] >> 4) * y[i].qs[j + kHalf];
    }
    // sum_j (d q_j + m) dy y_j = d dy sum(q y) + m (dy sum(y)), and dy sum(y) is the stored s.
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum) +
           fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
  }
  return sum;
}

// ---- Q5_0 -------------------------------------------------------------------------------------

void q5_0_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(vy);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float max = signed_absmax(x);
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(31, static_cast<int8_t>(x[j] * id + 16.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(31, static_cast<int8_t>(x[j + kHalf] * id + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
    }
    store_qh(qh, y[i].qh);
  }
}

void q5_0_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(vx);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kHalf; ++j) {
      int q0, q1;
      q5_unpack(x[i].qs, qh, j, &q0, &q1);
      y[j] = static_cast<float>(q0 - 16) * d;
      y[j + kHalf] = static_cast<float>(q1 - 16) * d;
    }
  }
}

float q5_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ5_0*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const int64_t nb = n_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_qh(x[i].qh);
    int32_t isum = 0;
    for (int j = 0; j < kHalf; ++j) {
      int q0, q1;
      q5_unpack(x[i].qs, qh, j, &q0, &q1);
      isum += (q0 - 16) * y[i].qs[j] + (q1 - 16) * y[i].qs[j + kHalf];
    }
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

// ---- Q5_1 -------------------------------------------------------------------------------------

void q5_1_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(vy);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      // (x - min) * id <= 31 up to rounding, so the clamp only guards against that rounding.
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(31, static_cast<uint8_t>((x[j] - min) * id + 0.5f)));
      const uint8_t q1 =
          static_cast<uint8_t>(std::min<int>(31, static_cast<uint8_t>((x[j + kHalf] - min) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + kHalf);
    }
    store_qh(qh, y[i].qh);
  }
}

void q5_1_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(vx);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kHalf; ++j) {
      int q0, q1;
      q5_unpack(x[i].qs, qh, j, &q0, &q1);
      y[j] = static_cast<float>(q0) * d + m;
      y[j + kHalf] = static_cast<float>(q1) * d + m;
    }
  }
}

float q5_1_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ5_1*>(vx);
  const auto* y = static_cast<const BlockQ8_1*>(vy);
  const int64_t nb = n_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_qh(x[i].qh);
    int32_t isum = 0;
    for (int j = 0; j < kHalf; ++j) {
      int q0, q1;
      q5_unpack(x[i].qs, qh, j, &q0, &q1);
      isum += q0 * y[i].qs[j] + q1 * y[i].qs[j + kHalf];
    }
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum) +
           fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
  }
  return sum;
}

// ---- Q8_0 -------------------------------------------------------------------------------------

void q8_0_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    // roundf: halves away from zero, as the reference; |x * id| <= 127 up to rounding.
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void q8_0_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

float q8_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  const int64_t nb = n_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += x[i].qs[j] * y[i].qs[j];
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

// ---- Q8_1 -------------------------------------------------------------------------------------

void q8_1_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int32_t qsum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      qsum += y[i].qs[j];
    }
    // s uses the unrounded d, as the reference does.
    y[i].s = fp32_to_fp16(static_cast<float>(qsum) * d);
  }
}

void q8_1_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  const int64_t nb = n_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

}  // namespace edgelm::kernels
