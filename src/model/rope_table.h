// Rotary position embedding (RoPE) from tables computed once per model.
//
// Job: rotate the first n_rot dims of each head of one token by its position, without a pow,
// cos or sin per token: pair i turns by pos * base^(-2i/n_rot); the table holds cos and sin of
// that angle for positions [0, n_pos), computed at load with exactly the expressions of the
// original per-token code (float angle = float(pos) * pow(base, -2i/n_rot), then std::cos /
// std::sin of it), so a rotation from the table is bit-identical to computing it on the spot.
// Positions past the table (contexts sized beyond it) compute the same values on the spot.
//
// Layouts: norm rotates pairs (2i, 2i+1); neox pairs (i, i + n_rot/2).
// Memory: n_pos * n_rot / 2 * 8 bytes: the model's trained context (at least kMinPositions so
// that contexts sized past it stay in the table), at most kMaxBytes.
// Immutable after construction; apply() may run concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch.h"

namespace edgelm::model {

class RopeTable {
 public:
  static constexpr int32_t kMinPositions = 4096;
  static constexpr int64_t kMaxBytes = int64_t{4} << 20;

  RopeTable() = default;
  explicit RopeTable(const ModelConfig& c);

  // v: [n_heads, head_dim] of one token at position pos (>= 0), rotated in place.
  void apply(float* v, int32_t n_heads, int32_t head_dim, int32_t pos) const;

  int32_t n_pos() const { return n_pos_; }

 private:
  RopeStyle style_ = RopeStyle::norm;
  int32_t n_rot_ = 0;
  int32_t n_pos_ = 0;
  std::vector<float> inv_freq_;  // [n_rot / 2] base^(-2i/n_rot)
  std::vector<float> cos_sin_;   // [n_pos, n_rot / 2, 2] cos and sin of pos * inv_freq[i]
};

}  // namespace edgelm::model
