// Contiguous key/value cache of one sequence, for the reference forward pass.
// Layout per layer with K/V (ModelConfig::kv_layer): K and V each [n_ctx, n_embd_kv] float32,
// row p holding position p. Hybrid models' recurrent layers instead keep a state (conv tail and
// delta-rule matrices, DeltaNetConfig::state_floats per layer), zero for an empty sequence.
// (The paged, shared, batched cache of the engine is a separate structure in kv/.)
#pragma once

#include <algorithm>
#include <vector>

#include "model/arch.h"

namespace edgelm::model {

class KvCache {
 public:
  KvCache(const ModelConfig& c, int32_t n_ctx)
      : n_ctx_(n_ctx),
        n_embd_kv_(c.n_embd_kv()),
        k_(static_cast<size_t>(c.n_kv_layers()) * n_ctx * c.n_embd_kv()),
        v_(k_.size()),
        state_floats_(c.deltanet.state_floats()),
        conv_floats_(c.deltanet.conv_state_floats()),
        state_(static_cast<size_t>(c.n_recurrent_layers()) * static_cast<size_t>(state_floats_)) {}

  int32_t n_ctx() const { return n_ctx_; }
  // Positions [0, n_past) hold valid entries.
  int32_t n_past() const { return n_past_; }
  // Only forward() moves it ahead; a recurrent state cannot be rolled back, so truncation
  // (n < n_past) is for models without recurrent layers.
  void set_n_past(int32_t n) { n_past_ = n; }
  void clear() {
    n_past_ = 0;
    std::fill(state_.begin(), state_.end(), 0.0f);
  }
  bool has_recurrent_state() const { return !state_.empty(); }

  // kv_layer: the layer's K/V index (ModelConfig::kv_layer).
  float* k(int32_t kv_layer, int32_t pos) { return k_.data() + offset(kv_layer, pos); }  // [n_embd_kv]
  float* v(int32_t kv_layer, int32_t pos) { return v_.data() + offset(kv_layer, pos); }  // [n_embd_kv]
  // rec: the layer's recurrent index (ModelConfig::recurrent_index).
  float* conv_state(int32_t rec) { return state_.data() + static_cast<size_t>(rec) * state_floats_; }
  float* ssm_state(int32_t rec) { return conv_state(rec) + conv_floats_; }

  size_t n_bytes() const { return (k_.size() + v_.size() + state_.size()) * sizeof(float); }

 private:
  size_t offset(int32_t layer, int32_t pos) const {
    return (static_cast<size_t>(layer) * n_ctx_ + static_cast<size_t>(pos)) * n_embd_kv_;
  }
  int32_t n_ctx_;
  int32_t n_embd_kv_;
  int32_t n_past_ = 0;
  std::vector<float> k_, v_;
  int64_t state_floats_ = 0, conv_floats_ = 0;
  std::vector<float> state_;  // [n_recurrent_layers, state_floats]
};

}  // namespace edgelm::model
