// StateStore: the recurrent state of a hybrid model's Gated DeltaNet layers (model/deltanet.h),
// one slot per live sequence, beside the paged KvStore that holds its attention layers' K/V.
//
// Job: own each slot's float32 state (per recurrent layer: the convolution tail, then the
// delta-rule matrices; DeltaNetConfig::state_floats), zeroed when a slot is acquired or reset,
// and the number of tokens the state has absorbed, so that a forward can refuse to continue a
// sequence from any other position (a recurrent state cannot be rewound or shared like KV blocks).
//
// Invariants: a slot's memory is allocated on first use (in huge pages when it is at least one)
// and reused after release (a warm engine
// allocates nothing per step); slots are addressed by small ints, valid from acquire() to
// release(); the store of a model without recurrent layers has no slots (enabled() false).
// Single-threaded except conv()/ssm() of distinct slots, which forwards use concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/huge_pages.h"
#include "model/arch.h"

namespace edgelm::kv {

class StateStore {
 public:
  StateStore() = default;
  explicit StateStore(const model::ModelConfig& config);

  // Whether the model has recurrent layers (else no slot can be acquired).
  bool enabled() const { return n_layers_ > 0; }
  // A slot for a new sequence: zero state at position 0.
  int32_t acquire();
  void release(int32_t slot);
  bool valid(int32_t slot) const;
  // Zero state at position 0 (a sequence restarting from its first token).
  void reset(int32_t slot);
  // Allocates (and writes, so that its pages are committed) free slots until the store holds
  // n: the slots a warm engine would already have (EngineOptions::prefault_kv).
  void reserve(int32_t n);

  // Tokens the slot's state has absorbed (the position its sequence continues from).
  int32_t n_tokens(int32_t slot) const { return slots_[static_cast<size_t>(slot)].n_tokens; }
  void set_n_tokens(int32_t slot, int32_t n) { slots_[static_cast<size_t>(slot)].n_tokens = n; }

  // rec: a recurrent layer's index (ModelConfig::recurrent_index).
  float* conv(int32_t slot, int32_t rec) {
    return slots_[static_cast<size_t>(slot)].data + static_cast<size_t>(rec) * static_cast<size_t>(layer_floats_);
  }
  float* ssm(int32_t slot, int32_t rec) { return conv(slot, rec) + conv_floats_; }
  // The whole slot: [n_layers, layer_floats], each layer's conv tail then its delta-rule matrices
  // (the layout StateCapture and StateSnapshots copy).
  float* data(int32_t slot) { return slots_[static_cast<size_t>(slot)].data; }
  int64_t slot_floats() const { return int64_t{n_layers_} * layer_floats_; }
  int64_t layer_floats() const { return layer_floats_; }
  int64_t conv_floats() const { return conv_floats_; }
  // Slot `slot` takes the state `src` ([slot_floats]) after n_tokens tokens.
  void load(int32_t slot, const float* src, int32_t n_tokens);

  size_t slot_bytes() const {
    return static_cast<size_t>(n_layers_) * static_cast<size_t>(layer_floats_) * sizeof(float);
  }
  int32_t n_live() const { return n_live_; }
  size_t n_bytes() const;  // memory held by all slots, live or free

 private:
  // Appends a slot with its memory allocated (not zeroed); returns its index.
  int32_t new_slot();
  // A slot of at least a huge page lives in huge pages (HugePageBuffer: every decode step streams
  // the whole state in and out, and on 4 KiB pages each page is a TLB miss), a smaller one (and
  // any where the mapping fails) on the heap.
  struct Slot {
    HugePageBuffer huge;
    std::unique_ptr<float[]> heap;
    float* data = nullptr;  // [n_layers, layer_floats], in one of the two
    int32_t n_tokens = 0;
    bool live = false;
  };
  int32_t n_layers_ = 0;
  int64_t layer_floats_ = 0, conv_floats_ = 0;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;
  int32_t n_live_ = 0;
};

}  // namespace edgelm::kv
