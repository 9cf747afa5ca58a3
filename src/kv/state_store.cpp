#include "kv/state_store.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace edgelm::kv {

StateStore::StateStore(const model::ModelConfig& config)
    : n_layers_(config.deltanet.interval > 0 ? config.n_recurrent_layers() : 0),
      layer_floats_(config.deltanet.state_floats()),
      conv_floats_(config.deltanet.conv_state_floats()) {}

int32_t StateStore::acquire() {
  EDGELM_CHECK(enabled(), "StateStore::acquire on a model without recurrent layers");
  int32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = new_slot();
  }
  slots_[static_cast<size_t>(slot)].live = true;
  ++n_live_;
  reset(slot);
  return slot;
}

int32_t StateStore::new_slot() {
  slots_.emplace_back();
  Slot& s = slots_.back();
  // Not value-initialized: acquire() and reserve() zero it (reset) right after.
  const size_t bytes = slot_bytes();
  if (bytes >= HugePageBuffer::kHugePage) {
    if (auto mem = HugePageBuffer::allocate(bytes); mem.ok()) {
      s.huge = std::move(*mem);
      // The part past the last whole huge page in small pages, so that it commits what is used.
      const size_t whole = bytes / HugePageBuffer::kHugePage * HugePageBuffer::kHugePage;
      s.huge.small_pages(whole, bytes - whole);
      s.data = reinterpret_cast<float*>(s.huge.data());
    }
  }
  if (s.data == nullptr) {
    s.heap = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(slot_floats()));
    s.data = s.heap.get();
  }
  return static_cast<int32_t>(slots_.size() - 1);
}

void StateStore::reserve(int32_t n) {
  if (!enabled()) return;
  while (static_cast<int32_t>(slots_.size()) < n) {
    const int32_t slot = new_slot();
    reset(slot);
    free_.push_back(slot);
  }
}

void StateStore::release(int32_t slot) {
  EDGELM_CHECK(valid(slot), "StateStore::release of slot ", slot, ", which is not live");
  slots_[static_cast<size_t>(slot)].live = false;
  free_.push_back(slot);
  --n_live_;
}

bool StateStore::valid(int32_t slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < slots_.size() && slots_[static_cast<size_t>(slot)].live;
}

void StateStore::reset(int32_t slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  std::fill(s.data, s.data + static_cast<size_t>(n_layers_) * static_cast<size_t>(layer_floats_), 0.0f);
  s.n_tokens = 0;
}

void StateStore::load(int32_t slot, const float* src, int32_t n_tokens) {
  EDGELM_CHECK(valid(slot), "StateStore::load into slot ", slot, ", which is not live");
  Slot& s = slots_[static_cast<size_t>(slot)];
  std::copy_n(src, slot_floats(), s.data);
  s.n_tokens = n_tokens;
}

size_t StateStore::n_bytes() const { return slots_.size() * slot_bytes(); }

}  // namespace edgelm::kv
