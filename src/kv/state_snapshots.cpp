#include "kv/state_snapshots.h"

#include "core/check.h"

namespace edgelm::kv {

StateSnapshots::StateSnapshots(int64_t slot_floats, int32_t capacity)
    : slot_floats_(slot_floats), capacity_(capacity), entries_(static_cast<size_t>(capacity > 0 ? capacity : 0)) {
  EDGELM_CHECK(capacity >= 0 && slot_floats >= 0, "StateSnapshots(", slot_floats, ", ", capacity, ")");
  for (int32_t e = capacity_ - 1; e >= 0; --e) free_.push_back(e);  // entry 0 first
  by_hash_.reserve(static_cast<size_t>(capacity_));
}

int32_t StateSnapshots::reserve(uint64_t hash) {
  if (capacity_ == 0 || by_hash_.count(hash) != 0) return -1;
  int32_t e = -1;
  if (!free_.empty()) {
    e = free_.back();
    free_.pop_back();
  } else {  // the least recently used published entry
    for (int32_t i = 0; i < capacity_; ++i) {
      const Entry& x = entries_[static_cast<size_t>(i)];
      if (x.state == State::published && (e < 0 || x.last_use < entries_[static_cast<size_t>(e)].last_use)) e = i;
    }
    if (e < 0) return -1;
    by_hash_.erase(entries_[static_cast<size_t>(e)].hash);
    --n_published_;
    ++n_evictions_;
  }
  Entry& x = entries_[static_cast<size_t>(e)];
  if (!x.data) {
    x.data = std::make_unique<float[]>(static_cast<size_t>(slot_floats_));
    ++n_allocated_;
  }
  x.hash = hash;
  x.n_tokens = 0;
  x.state = State::pending;
  by_hash_.emplace(hash, e);
  return e;
}

void StateSnapshots::publish(int32_t entry, int32_t n_tokens) {
  Entry& x = entries_[static_cast<size_t>(entry)];
  EDGELM_CHECK(x.state == State::pending, "publish of snapshot entry ", entry, ", which is not reserved");
  x.state = State::published;
  x.n_tokens = n_tokens;
  x.last_use = ++clock_;
  ++n_published_;
}

void StateSnapshots::drop(int32_t entry) {
  Entry& x = entries_[static_cast<size_t>(entry)];
  by_hash_.erase(x.hash);
  if (x.state == State::published) --n_published_;
  x.state = State::free;
  free_.push_back(entry);
}

void StateSnapshots::discard(int32_t entry) {
  EDGELM_CHECK(entries_[static_cast<size_t>(entry)].state == State::pending, "discard of snapshot entry ", entry,
               ", which is not reserved");
  drop(entry);
}

const float* StateSnapshots::find(uint64_t hash, int32_t* n_tokens) {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return nullptr;
  Entry& x = entries_[static_cast<size_t>(it->second)];
  if (x.state != State::published) return nullptr;
  x.last_use = ++clock_;
  if (n_tokens != nullptr) *n_tokens = x.n_tokens;
  return x.data.get();
}

bool StateSnapshots::contains(uint64_t hash) const {
  const auto it = by_hash_.find(hash);
  return it != by_hash_.end() && entries_[static_cast<size_t>(it->second)].state == State::published;
}

void StateSnapshots::on_evict(uint64_t hash) {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || entries_[static_cast<size_t>(it->second)].state != State::published) return;
  drop(it->second);
  ++n_evictions_;
}

void StateSnapshots::check_invariants(const BlockPool* pool) const {
  int32_t n_pub = 0, n_pending = 0, n_free = 0;
  size_t n_alloc = 0;
  for (int32_t e = 0; e < capacity_; ++e) {
    const Entry& x = entries_[static_cast<size_t>(e)];
    n_alloc += x.data ? 1 : 0;
    if (x.state == State::free) {
      ++n_free;
      continue;
    }
    EDGELM_CHECK(x.data != nullptr, "snapshot entry ", e, " in use without memory");
    const auto it = by_hash_.find(x.hash);
    EDGELM_CHECK(it != by_hash_.end() && it->second == e, "snapshot entry ", e, " is not in the map under its hash");
    (x.state == State::published ? n_pub : n_pending) += 1;
    EDGELM_CHECK(pool == nullptr || x.state != State::published || pool->has_hash(x.hash), "snapshot entry ", e,
                 " outlives its KV block (hash ", x.hash, ")");
  }
  EDGELM_CHECK(n_pub == n_published_, "snapshot count ", n_published_, " but ", n_pub, " published entries");
  EDGELM_CHECK(static_cast<size_t>(n_pub + n_pending) == by_hash_.size(), "snapshot map has ", by_hash_.size(),
               " entries for ", n_pub + n_pending, " used ones");
  EDGELM_CHECK(static_cast<size_t>(n_free) == free_.size(), "free snapshot list of ", free_.size(), " for ", n_free,
               " free entries");
  EDGELM_CHECK(n_alloc == n_allocated_, "allocated snapshot count ", n_allocated_, " but ", n_alloc);
}

}  // namespace edgelm::kv
