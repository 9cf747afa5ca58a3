// Contiguous key/value cache of one sequence, for the reference forward pass.
// Layout per layer with K/V (ModelConfig::kv_layer): K and V each [n_ctx, width] float32, row p
// holding position p; width is the layer's K/V width (ModelConfig::kv_n_embd: n_embd_kv, or per
// layer for Gemma 4). Gemma 4's shared-KV layers have no K/V of their own (they read their
// source layer's). Hybrid models' recurrent layers instead keep a state (conv tail and
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
        state_floats_(c.deltanet.state_floats()),
        conv_floats_(c.deltanet.conv_state_floats()),
        state_(static_cast<size_t>(c.n_recurrent_layers()) * static_cast<size_t>(state_floats_)) {
    size_t total = 0;
    for (int32_t kv = 0; kv < c.n_kv_layers(); ++kv) {
      width_.push_back(c.kv_n_embd(kv));
      layer_off_.push_back(total);
      total += static_cast<size_t>(n_ctx) * static_cast<size_t>(width_.back());
    }
    k_.resize(total);
    v_.resize(total);
  }

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
  float* k(int32_t kv_layer, int32_t pos) { return k_.data() + offset(kv_layer, pos); }  // [width(kv_layer)]
  float* v(int32_t kv_layer, int32_t pos) { return v_.data() + offset(kv_layer, pos); }  // [width(kv_layer)]
  int32_t width(int32_t kv_layer) const { return width_[static_cast<size_t>(kv_layer)]; }
  // rec: the layer's recurrent index (ModelConfig::recurrent_index).
  float* conv_state(int32_t rec) { return state_.data() + static_cast<size_t>(rec) * state_floats_; }
  float* ssm_state(int32_t rec) { return conv_state(rec) + conv_floats_; }

  size_t n_bytes() const { return (k_.size() + v_.size() + state_.size()) * sizeof(float); }

 private:
  size_t offset(int32_t layer, int32_t pos) const {
    const auto l = static_cast<size_t>(layer);
    return layer_off_[l] + static_cast<size_t>(pos) * static_cast<size_t>(width_[l]);
  }
  int32_t n_ctx_;
  std::vector<int32_t> width_;     // [n_kv_layers] floats per row
  std::vector<size_t> layer_off_;  // [n_kv_layers] first float of each layer's rows
  int32_t n_past_ = 0;
  std::vector<float> k_, v_;
  int64_t state_floats_ = 0, conv_floats_ = 0;
  std::vector<float> state_;  // [n_recurrent_layers, state_floats]
};

}  // namespace edgelm::model
