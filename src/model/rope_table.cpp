#include "model/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace edgelm::model {
namespace {

// YaRN: the (fractional) rotary dimension index whose pair turns n_turns times over ctx
// positions: n_rot * ln(ctx / (n_turns * 2 pi)) / (2 ln base).
double yarn_dim(double n_turns, int32_t n_rot, double base, int32_t ctx) {
  return n_rot * std::log(ctx / (n_turns * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

// Turns rotary pair i of every head by (c, s): dims (2i, 2i+1) in the norm layout, (i, i + half) in neox.
inline void rotate_pair(float* v, int32_t n_heads, int32_t head_dim, bool norm, int32_t i, int32_t half, float c,
                        float s) {
  const int32_t a = norm ? 2 * i : i;
  const int32_t b = norm ? 2 * i + 1 : i + half;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* x = v + static_cast<int64_t>(h) * head_dim;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

}  // namespace

RopeTable::RopeTable(const ModelConfig& c, const float* freq_factors)
    : RopeTable(c, c.rope_base, c.rope_scaling, freq_factors, 1.0f, c.n_rot) {}

RopeTable RopeTable::local(const ModelConfig& c) {
  return RopeTable(c, c.local_rope_base, RopeScaling{}, nullptr, 1.0f, c.n_rot_swa > 0 ? c.n_rot_swa : c.n_rot);
}

RopeTable RopeTable::longrope(const ModelConfig& c, const float* factors) {
  return RopeTable(c, c.rope_base, RopeScaling{}, factors, c.longrope_attn_factor, c.n_rot);
}

RopeTable::RopeTable(const ModelConfig& c, float base, const RopeScaling& rs, const float* freq_factors,
                     float extra_mscale, int32_t n_rot)
    : style_(c.arch != nullptr ? c.arch->rope_style : RopeStyle::norm), n_rot_(n_rot) {
  const int32_t half = n_rot_ / 2;
  if (half <= 0) return;
  // YaRN's ramp over pair indices: 0 (keep the frequency) below `low`, 1 (frequency / factor)
  // above `high`.
  double low = 0, high = 1;
  if (rs.type == RopeScalingType::yarn) {
    low = std::max(0.0, std::floor(yarn_dim(rs.beta_fast, n_rot_, base, rs.original_ctx)));
    high = std::min(static_cast<double>(n_rot_ - 1), std::ceil(yarn_dim(rs.beta_slow, n_rot_, base, rs.original_ctx)));
    if (high <= low) high = low + 0.001;
    if (rs.factor > 1.0f)
      mscale_ = rs.attn_factor * (1.0f + rs.log_mul * std::log(rs.factor));
    else
      mscale_ = rs.attn_factor;
  }
  mscale_ *= extra_mscale;
  inv_freq_.resize(static_cast<size_t>(half));
  section_.resize(static_cast<size_t>(half));
  for (int32_t i = 0; i < half; ++i) {
    float f = std::pow(base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot_));
    if (freq_factors != nullptr) f /= freq_factors[i];
    switch (rs.type) {
      case RopeScalingType::none: break;
      case RopeScalingType::linear: f /= rs.factor; break;
      case RopeScalingType::yarn: {
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        f = static_cast<float>(f * (1.0 - ramp) + f / static_cast<double>(rs.factor) * ramp);
        break;
      }
    }
    section_[static_cast<size_t>(i)] = static_cast<uint8_t>(c.rope_pair_section(i));
    if (!c.text_rotates_pair(i)) f = 0.0f;  // M-RoPE's fourth section: position 0 for every token
    inv_freq_[static_cast<size_t>(i)] = f;
  }
  const int64_t by_bytes = kMaxBytes / (static_cast<int64_t>(half) * 2 * static_cast<int64_t>(sizeof(float)));
  n_pos_ = static_cast<int32_t>(std::min<int64_t>(std::max(c.n_ctx_train, kMinPositions), by_bytes));
  cos_sin_.resize(static_cast<size_t>(n_pos_) * static_cast<size_t>(half) * 2);
  for (int32_t pos = 0; pos < n_pos_; ++pos) {
    float* row = &cos_sin_[static_cast<size_t>(pos) * static_cast<size_t>(half) * 2];
    for (int32_t i = 0; i < half; ++i) {
      const float theta = static_cast<float>(pos) * inv_freq_[static_cast<size_t>(i)];
      row[2 * i] = std::cos(theta) * mscale_;
      row[2 * i + 1] = std::sin(theta) * mscale_;
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
      c = std::cos(theta) * mscale_;
      s = std::sin(theta) * mscale_;
    }
    rotate_pair(v, n_heads, head_dim, style_ == RopeStyle::norm, i, half, c, s);
  }
}

void RopeTable::apply(float* v, int32_t n_heads, int32_t head_dim, const RopePos& pos) const {
  if (pos.is_text()) {
    apply(v, n_heads, head_dim, pos.t);
    return;
  }
  const int32_t half = n_rot_ / 2;
  const int32_t sec_pos[4] = {pos.t, pos.h, pos.w, 0};
  for (int32_t i = 0; i < half; ++i) {
    const int32_t p = sec_pos[section_[static_cast<size_t>(i)]];
    float c, s;
    if (p < n_pos_) {
      const float* row = &cos_sin_[(static_cast<size_t>(p) * static_cast<size_t>(half) + static_cast<size_t>(i)) * 2];
      c = row[0];
      s = row[1];
    } else {
      const float theta = static_cast<float>(p) * inv_freq_[static_cast<size_t>(i)];
      c = std::cos(theta) * mscale_;
      s = std::sin(theta) * mscale_;
    }
    rotate_pair(v, n_heads, head_dim, style_ == RopeStyle::norm, i, half, c, s);
  }
}

}  // namespace edgelm::model
