// Scalar reference kernels of TQ1_0 and TQ2_0; see quants_ternary.h for the layouts and rules.
#include "kernels/quants_ternary.h"

#include <cmath>

#include "kernels/dequant_dot.h"

namespace edgelm::kernels {
namespace {

constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};

int64_t n_blocks(int64_t n) { return row_blocks(n, kQK_K); }

// Trit p (0..2) of a TQ1_0 byte.
inline int trit(uint8_t byte, int p) {
  const auto v = static_cast<uint8_t>(byte * kPow3[p]);  // mod 256
  return (static_cast<uint16_t>(v) * 3) >> 8;
}

// The element order of TQ1_0: for each element, its byte and trit (see the header).
template <class F>
void tq1_for_each(F&& f) {
  for (int p = 0; p < 5; ++p)
    for (int j = 0; j < 32; ++j) f(32 * p + j, j, p);
  for (int p = 0; p < 5; ++p)
    for (int j = 0; j < 16; ++j) f(160 + 16 * p + j, 32 + j, p);
  for (int p = 0; p < 4; ++p)
    for (int j = 0; j < 4; ++j) f(240 + 4 * p + j, 48 + j, p);
}

void tq1_block(const BlockTQ1_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&b);  // qs then qh: the first 52 bytes
  tq1_for_each([&](int e, int byte, int p) { y[e] = d * static_cast<float>(trit(bytes[byte], p) - 1); });
}

void tq2_block(const BlockTQ2_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int c = 0; c < 2; ++c)
    for (int s = 0; s < 4; ++s)
      for (int j = 0; j < 32; ++j)
        y[128 * c + 32 * s + j] = d * static_cast<float>(((b.qs[32 * c + j] >> (2 * s)) & 3) - 1);
}

// d = max |x| and q + 1 = round-half-away(x / d) + 1 in {0, 1, 2}, as the reference quantizer.
float ternary(const float* x, uint8_t* q) {
  float amax = 0.0f;
  for (int j = 0; j < kQK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax == 0.0f ? 0.0f : 1.0f / amax;
  for (int j = 0; j < kQK_K; ++j) q[j] = static_cast<uint8_t>(static_cast<int>(std::round(x[j] * id)) + 1);
  return amax;
}

}  // namespace

void tq1_0_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockTQ1_0*>(vy);
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) {
    uint8_t q[kQK_K];
    const float d = ternary(x + i * kQK_K, q);
    uint16_t v[52] = {};  // base-3 numbers of the 52 bytes, most significant trit first
    constexpr uint16_t kWeight[5] = {81, 27, 9, 3, 1};
    tq1_for_each([&](int e, int byte, int p) { v[byte] = static_cast<uint16_t>(v[byte] + q[e] * kWeight[p]); });
    auto* bytes = reinterpret_cast<uint8_t*>(&y[i]);  // qs then qh
    for (int b = 0; b < 52; ++b) bytes[b] = static_cast<uint8_t>((v[b] * 256 + 242) / 243);
    y[i].d = fp32_to_fp16(d);
  }
}

void tq1_0_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockTQ1_0*>(vx);
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) tq1_block(x[i], y + i * kQK_K);
}

float tq1_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockTQ1_0*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&x[i]);
    int32_t isum = 0;
    tq1_for_each([&](int e, int byte, int p) { isum += (trit(bytes[byte], p) - 1) * y[i].qs[e]; });
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

void tq2_0_from_float(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockTQ2_0*>(vy);
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) {
    uint8_t q[kQK_K];
    const float d = ternary(x + i * kQK_K, q);
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 32; ++j) {
        uint8_t b = 0;
        for (int s = 0; s < 4; ++s) b = static_cast<uint8_t>(b | (q[128 * c + 32 * s + j] << (2 * s)));
        y[i].qs[32 * c + j] = b;
      }
    y[i].d = fp32_to_fp16(d);
  }
}

void tq2_0_to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockTQ2_0*>(vx);
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) tq2_block(x[i], y + i * kQK_K);
}

float tq2_0_vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const BlockTQ2_0*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  float sum = 0.0f;
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) {
    int32_t isum = 0;
    for (int c = 0; c < 2; ++c)
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 32; ++j)
          isum += (((x[i].qs[32 * c + j] >> (2 * s)) & 3) - 1) * y[i].qs[128 * c + 32 * s + j];
    sum += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace edgelm::kernels
