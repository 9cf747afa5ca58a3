// The scalar dot product of formats whose oracle is their dequantization (NVFP4): a block is
// decoded to floats by the format's own decoder and dotted with the Q8_0 activation quants, the
// activation scale applied once per block; a float dot, so it equals the dot of the dequantized
// rows up to float rounding. Also row_blocks, the row-length check of the scalar kernels.
#pragma once

#include <cstdint>

#include "core/check.h"
#include "kernels/fp16.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {

// n / block for a row length n that must be a multiple of block.
inline int64_t row_blocks(int64_t n, int64_t block) {
  EDGELM_CHECK(n >= 0 && n % block == 0, "row length ", n, " is not a multiple of ", block);
  return n / block;
}

// Rows of Block (kBlock elements each, a multiple of 32) against a row of Q8_0.
template <class Block, int kBlock, void (*Decode)(const Block&, float*)>
float dequant_dot_q8_0(int64_t n, const void* vx, const void* vy) {
  static_assert(kBlock % kQK == 0);
  const auto* x = static_cast<const Block*>(vx);
  const auto* y = static_cast<const BlockQ8_0*>(vy);
  float w[kBlock];
  double sum = 0.0;
  for (int64_t i = 0, nb = row_blocks(n, kBlock); i < nb; ++i) {
    Decode(x[i], w);
    for (int s = 0; s < kBlock / kQK; ++s) {
      const BlockQ8_0& q = y[i * (kBlock / kQK) + s];
      float acc = 0.0f;
      for (int j = 0; j < kQK; ++j) acc += w[s * kQK + j] * static_cast<float>(q.qs[j]);
      sum += static_cast<double>(acc) * fp16_to_fp32(q.d);
    }
  }
  return static_cast<float>(sum);
}

}  // namespace edgelm::kernels
