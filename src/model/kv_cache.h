// Contiguous key/value cache of one sequence, for the reference forward pass.
// Layout per layer: K and V each [n_ctx, n_embd_kv] float32, row p holding position p.
// (The paged, shared, batched cache of the engine is a separate structure in kv/.)
#pragma once

#include <vector>

#include "model/arch.h"

namespace edgelm::model {

class KvCache {
 public:
  KvCache(const ModelConfig& c, int32_t n_ctx)
      : n_ctx_(n_ctx),
        n_embd_kv_(c.n_embd_kv()),
        k_(static_cast<size_t>(c.n_layer) * n_ctx * c.n_embd_kv()),
        v_(k_.size()) {}

  int32_t n_ctx() const { return n_ctx_; }
  // Positions [0, n_past) hold valid entries.
  int32_t n_past() const { return n_past_; }
  void set_n_past(int32_t n) { n_past_ = n; }
  void clear() { n_past_ = 0; }

  float* k(int32_t layer, int32_t pos) { return k_.data() + offset(layer, pos); }  // [n_embd_kv]
  float* v(int32_t layer, int32_t pos) { return v_.data() + offset(layer, pos); }  // [n_embd_kv]

  size_t n_bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  size_t offset(int32_t layer, int32_t pos) const {
    return (static_cast<size_t>(layer) * n_ctx_ + static_cast<size_t>(pos)) * n_embd_kv_;
  }
  int32_t n_ctx_;
  int32_t n_embd_kv_;
  int32_t n_past_ = 0;
  std::vector<float> k_, v_;
};

}  // namespace edgelm::model
