// Scalar reference dequantization and dot products for the K super-block formats; see
// quants_k.h for the layouts and the bit-exactness rules. Each format has one unpack function
// that turns a super-block into plain integer quants in element order; to_float and vec_dot
// both go through it, so the bit layout is written down exactly once per format.
#include "kernels/quants_k.h"

#include "core/check.h"
#include "kernels/fp16.h"

namespace edgelm::kernels {
namespace {

int64_t n_super_blocks(int64_t n) {
  EDGELM_CHECK(n >= 0 && n % kQK_K == 0, "row length ", n, " is not a multiple of the block size ", kQK_K);
  return n / kQK_K;
}

// [QK_K] 2-bit quants of Q2_K/Q3_K: element 128 * h + 32 * s + l (half h, shift s, l < 32)
// sits at bits 2 * s of qs[32 * h + l].
void unpack_2bit(const uint8_t* qs, uint8_t q[kQK_K]) {
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int l = 0; l < 32; ++l) q[128 * h + 32 * s + l] = (qs[32 * h + l] >> (2 * s)) & 3;
}

// [QK_K] 4-bit quants of Q4_K/Q5_K (low 4 bits for Q5_K): byte 32 * c + l holds element
// 64 * c + l (low nibble) and 64 * c + 32 + l (high nibble).
void unpack_4bit(const uint8_t* qs, uint8_t q[kQK_K]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = qs[32 * c + l] & 0x0f;
      q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
    }
  }
}

// Bit b of bits[l] is a flag of element 32 * b + l (Q3_K hmask, Q5_K qh).
bool high_bit(const uint8_t* bits, int e) { return (bits[e % 32] >> (e / 32)) & 1; }

// Q2_K: q in [0, 3].
void q2_k_unpack(const BlockQ2_K& b, uint8_t q[kQK_K]) { unpack_2bit(b.qs, q); }

// Q3_K: q in [-4, 3]: the two low bits, minus 4 where the high bit is clear.
void q3_k_unpack(const BlockQ3_K& b, int8_t q[kQK_K]) {
  uint8_t low[kQK_K];
  unpack_2bit(b.qs, low);
  for (int e = 0; e < kQK_K; ++e) q[e] = static_cast<int8_t>(low[e] - (high_bit(b.hmask, e) ? 0 : 4));
}

// Q4_K: q in [0, 15].
void q4_k_unpack(const BlockQ4_K& b, uint8_t q[kQK_K]) { unpack_4bit(b.qs, q); }

// Q5_K: q in [0, 31].
void q5_k_unpack(const BlockQ5_K& b, uint8_t q[kQK_K]) {
  unpack_4bit(b.qs, q);
  for (int e = 0; e < kQK_K; ++e) q[e] = static_cast<uint8_t>(q[e] | (high_bit(b.qh, e) ? 16 : 0));
}

// Q6_K: q in [-32, 31]. Per half h and l < 32, elements l + 32 * k (k = 0..3) take their low
// nibble from ql[64 * h + 32 * (k & 1) + l] (low nibble for k < 2, high for k >= 2) and their
// high 2 bits from bits 2 * k of qh[32 * h + l].
void q6_k_unpack(const BlockQ6_K& b, int8_t q[kQK_K]) {
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t ql = b.ql[64 * h + 32 * (k & 1) + l];
        const int lo = k < 2 ? (ql & 0x0f) : (ql >> 4);
        const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
        q[128 * h + 32 * k + l] = static_cast<int8_t>((lo | (hi << 4)) - 32);
      }
    }
  }
}

// Exact integer dot product of 16 or 32 quants with Q8_K quants.
template <typename Q>
int32_t dot_int(const Q* q, const int8_t* y, int len) {
  int32_t s = 0;
  for (int l = 0; l < len; ++l) s += static_cast<int32_t>(q[l]) * y[l];
  return s;
}

}  // namespace

void k4_pack_scale_min(const uint8_t sc[8], const uint8_t m[8], uint8_t q[kKScaleBytes]) {
  for (int j = 0; j < 8; ++j) EDGELM_CHECK(sc[j] < 64 && m[j] < 64, "6-bit scale out of range");
  for (int j = 0; j < 4; ++j) {
    // Low 6 bits of bytes 0..7 hold scales/mins 0..3; their top 2 bits carry the top of 4..7.
    q[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

void q3_k_unpack_scales(const uint8_t q[kKScaleBytes], int8_t scales[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (q[j] & 0x0f) : (q[j - 8] >> 4);
    const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>(low | (high << 4));
  }
}

void q3_k_pack_scale(uint8_t q[kKScaleBytes], int j, int value) {
  EDGELM_CHECK(j >= 0 && j < 16 && value >= 0 && value < 64, "Q3_K scale ", j, " out of range: ", value);
  const int shift = j < 8 ? 0 : 4;
  q[j % 8] = static_cast<uint8_t>((q[j % 8] & ~(0x0f << shift)) | ((value & 0x0f) << shift));
  const int hshift = 2 * (j / 4);
  q[8 + j % 4] = static_cast<uint8_t>((q[8 + j % 4] & ~(3 << hshift)) | ((value >> 4) << hshift));
}

// ---- Q2_K -------------------------------------------------------------------------------------

void q2_k_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ2_K*>(vx);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    uint8_t q[kQK_K];
    q2_k_unpack(x[i], q);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(x[i].scales[j] & 0x0f);
      const float ml = dmin * static_cast<float>(x[i].scales[j] >> 4);
      for (int l = 0; l < 16; ++l) y[16 * j + l] = dl * static_cast<float>(q[16 * j + l]) - ml;
    }
  }
}

float q2_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ2_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t q[kQK_K];
    q2_k_unpack(x[i], q);
    int32_t qsum = 0;  // sum_j sc_j * (q . y)_j
    int32_t msum = 0;  // sum_j m_j * sum(y)_j
    for (int j = 0; j < 16; ++j) {
      qsum += (x[i].scales[j] & 0x0f) * dot_int(q + 16 * j, y[i].qs + 16 * j, 16);
      msum += (x[i].scales[j] >> 4) * y[i].bsums[j];
    }
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(qsum) -
           fp16_to_fp32(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return sum;
}

// ---- Q3_K -------------------------------------------------------------------------------------

void q3_k_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ3_K*>(vx);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(x[i].d);
    int8_t scales[16];
    q3_k_unpack_scales(x[i].scales, scales);
    int8_t q[kQK_K];
    q3_k_unpack(x[i], q);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(scales[j] - 32);
      for (int l = 0; l < 16; ++l) y[16 * j + l] = dl * static_cast<float>(q[16 * j + l]);
    }
  }
}

float q3_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ3_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t scales[16];
    q3_k_unpack_scales(x[i].scales, scales);
    int8_t q[kQK_K];
    q3_k_unpack(x[i], q);
    int32_t qsum = 0;
    for (int j = 0; j < 16; ++j) qsum += (scales[j] - 32) * dot_int(q + 16 * j, y[i].qs + 16 * j, 16);
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(qsum);
  }
  return sum;
}

// ---- Q4_K -------------------------------------------------------------------------------------

void q4_k_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(vx);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    uint8_t q[kQK_K];
    q4_k_unpack(x[i], q);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k4_get_scale_min(j, x[i].scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * static_cast<float>(q[32 * j + l]) - ml;
    }
  }
}

float q4_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ4_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t q[kQK_K];
    q4_k_unpack(x[i], q);
    int32_t qsum = 0;  // <= 8 * 63 * 32 * 15 * 127: fits
    int32_t msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k4_get_scale_min(j, x[i].scales, &sc, &m);
      qsum += sc * dot_int(q + 32 * j, y[i].qs + 32 * j, 32);
      msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(qsum) -
           fp16_to_fp32(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return sum;
}

// ---- Q5_K -------------------------------------------------------------------------------------

void q5_k_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_K*>(vx);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    uint8_t q[kQK_K];
    q5_k_unpack(x[i], q);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k4_get_scale_min(j, x[i].scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * static_cast<float>(q[32 * j + l]) - ml;
    }
  }
}

float q5_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ5_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t q[kQK_K];
    q5_k_unpack(x[i], q);
    int32_t qsum = 0;  // <= 8 * 63 * 32 * 31 * 127: fits
    int32_t msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k4_get_scale_min(j, x[i].scales, &sc, &m);
      qsum += sc * dot_int(q + 32 * j, y[i].qs + 32 * j, 32);
      msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(qsum) -
           fp16_to_fp32(x[i].dmin) * y[i].d * static_cast<float>(msum);
  }
  return sum;
}

// ---- Q6_K -------------------------------------------------------------------------------------

void q6_k_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(vx);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(x[i].d);
    int8_t q[kQK_K];
    q6_k_unpack(x[i], q);
    for (int e = 0; e < kQK_K; ++e)
      y[e] = d * static_cast<float>(x[i].scales[e / 16]) * static_cast<float>(q[e]);  // (d * sc) * q
  }
}

float q6_k_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockQ6_K*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  const int64_t nb = n_super_blocks(n);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[kQK_K];
    q6_k_unpack(x[i], q);
    int32_t qsum = 0;  // <= 16 * 128 * 16 * 32 * 127: fits
    for (int j = 0; j < 16; ++j) qsum += x[i].scales[j] * dot_int(q + 16 * j, y[i].qs + 16 * j, 16);
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(qsum);
  }
  return sum;
}

// ---- Q8_K -------------------------------------------------------------------------------------

void q8_k_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const int64_t nb = n_super_blocks(n);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K)
    for (int e = 0; e < kQK_K; ++e) y[e] = x[i].d * static_cast<float>(x[i].qs[e]);
}

}  // namespace edgelm::kernels
