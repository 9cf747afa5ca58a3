// Rotary position embedding (RoPE) from tables computed once per model.
//
// Job: rotate the first n_rot dims of each head of one token by its position, without a pow,
// cos or sin per token: pair i turns by pos * inv_freq[i]; the table holds cos and sin of that
// angle for positions [0, n_pos), computed at load with exactly the expressions of the
// original per-token code (float angle = float(pos) * inv_freq[i], then std::cos / std::sin of
// it), so a rotation from the table is bit-identical to computing it on the spot. Positions
// past the table (contexts sized beyond it) compute the same values on the spot.
//
// Frequencies: inv_freq[i] = base^(-2i/n_rot) (float pow), 0 for pairs a text position does
// not turn (ModelConfig::text_rotates_pair: Qwen3.5's M-RoPE sections), then divided by the file's
// per-dimension factor rope_freqs[i] (Llama 3.1+), then the config's RopeScaling (arch.h):
// linear divides by the factor, yarn blends freq and freq / factor by its ramp. Every path to
// attention (Model::forward, the engine's batched forward) rotates through this table, so all
// of them see the scaling. Unscaled models get exactly the unscaled floats (factor 1, mscale 1).
// YaRN's mscale multiplies cos and sin (q and k each scaled by it, as the published YaRN does).
//
// Other tables of one model (Model::rope_for): Gemma 3's local layers rotate with their own base
// and no scaling (local()); Phi-3's LongRoPE divides each frequency by a short or long factor
// and multiplies cos and sin by its attention factor (longrope()).
//
// Layouts: norm rotates pairs (2i, 2i+1); neox pairs (i, i + n_rot/2). Dims past n_rot (partial
// rotary, Phi-4-mini) are left as they are.
// Memory: n_pos * n_rot / 2 * 8 bytes: the model's trained context (at least kMinPositions so
// that contexts sized past it stay in the table), at most kMaxBytes.
// Immutable after construction; apply() may run concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch.h"
#include "model/mrope.h"

namespace edgelm::model {

class RopeTable {
 public:
  static constexpr int32_t kMinPositions = 4096;
  static constexpr int64_t kMaxBytes = int64_t{4} << 20;

  RopeTable() = default;
  // freq_factors: [n_rot / 2] (rope_freqs.weight) or null.
  explicit RopeTable(const ModelConfig& c, const float* freq_factors = nullptr);
  // Base c.local_rope_base, no scaling, no factors; c.n_rot_swa rotary dims when set (Gemma 4).
  static RopeTable local(const ModelConfig& c);
  // Base c.rope_base, each frequency divided by factors[i] ([n_rot / 2]), cos and sin times
  // c.longrope_attn_factor; the config's rope_scaling is not applied.
  static RopeTable longrope(const ModelConfig& c, const float* factors);

  // v: [n_heads, head_dim] of one token at position pos (>= 0), rotated in place.
  void apply(float* v, int32_t n_heads, int32_t head_dim, int32_t pos) const;
  // The same at an M-RoPE position (model/mrope.h): pair i turns by the position of its section
  // (ModelConfig::rope_pair_section), from the same table rows; a text triple is apply(pos).
  void apply(float* v, int32_t n_heads, int32_t head_dim, const RopePos& pos) const;

  int32_t n_pos() const { return n_pos_; }
  float mscale() const { return mscale_; }
  bool empty() const { return n_rot_ == 0; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

 private:
  // The table of base `base` with `scaling` over n_rot dims, frequencies divided by
  // freq_factors (if any), cos and sin times `extra_mscale` (on top of YaRN's).
  RopeTable(const ModelConfig& c, float base, const RopeScaling& scaling, const float* freq_factors, float extra_mscale,
            int32_t n_rot);

  RopeStyle style_ = RopeStyle::norm;
  int32_t n_rot_ = 0;
  int32_t n_pos_ = 0;
  float mscale_ = 1.0f;          // multiplies cos and sin (YaRN); 1 otherwise
  std::vector<uint8_t> section_;  // [n_rot / 2] the M-RoPE section of pair i (0 t, 1 h, 2 w, 3 none)
  std::vector<float> inv_freq_;  // [n_rot / 2] rotation per position of pair i, scaling applied
  std::vector<float> cos_sin_;   // [n_pos, n_rot / 2, 2] mscale * cos and sin of pos * inv_freq[i]
};

}  // namespace edgelm::model
