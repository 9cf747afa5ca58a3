#include "model/rope_table.h"

#include <algorithm>
#include <cmath>

namespace edgelm::model {

RopeTable::RopeTable(const ModelConfig& c) : style_(c.arch != nullptr ? c.arch->rope_style : RopeStyle::norm), n_rot_(c.n_rot) {
  const int32_t half = n_rot_ / 2;
  if (half <= 0) return;
  inv_freq_.resize(static_cast<size_t>(half));
  for (int32_t i = 0; i < half; ++i)
    inv_freq_[static_cast<size_t>(i)] = std::pow(c.rope_base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot_));
  const int64_t by_bytes = kMaxBytes / (static_cast<int64_t>(half) * 2 * static_cast<int64_t>(sizeof(float)));
  n_pos_ = static_cast<int32_t>(std::min<int64_t>(std::max(c.n_ctx_train, kMinPositions), by_bytes));
  cos_sin_.resize(static_cast<size_t>(n_pos_) * static_cast<size_t>(half) * 2);
  for (int32_t pos = 0; pos < n_pos_; ++pos) {
    float* row = &cos_sin_[static_cast<size_t>(pos) * static_cast<size_t>(half) * 2];
    for (int32_t i = 0; i < half; ++i) {
      const float theta = static_cast<float>(pos) * inv_freq_[static_cast<size_t>(i)];
      row[2 * i] = std::cos(theta);
      row[2 * i + 1] = std::sin(theta);
    }
  }
}

void RopeTable::apply(float* v, int32_t n_heads, int32_t head_dim, int32_t pos) const {
  const int32_t half = n_rot_ / 2;
  const float* row = pos < n_pos_ ? &cos_sin_[static_cast<size_t>(pos) * static_cast<size_t>(half) * 2] : nullptr;
  for (int32_t i = 0; i < half; ++i) {
    float c, s;
    if (row != nullptr) {
      c = row[2 * i];
      s = row[2 * i + 1];
    } else {
      const float theta = static_cast<float>(pos) * inv_freq_[static_cast<size_t>(i)];
      c = std::cos(theta);
      s = std::sin(theta);
    }
    const int32_t a = style_ == RopeStyle::norm ? 2 * i : i;
    const int32_t b = style_ == RopeStyle::norm ? 2 * i + 1 : i + half;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* x = v + static_cast<int64_t>(h) * head_dim;
      const float x0 = x[a], x1 = x[b];
      x[a] = x0 * c - x1 * s;
      x[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace edgelm::model
