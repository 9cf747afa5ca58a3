// StateSnapshots: copies of hybrid models' recurrent states (kv/state_store.h) taken at KV block
// boundaries, so that a later request sharing the prefix can continue from the snapshot instead
// of recomputing the whole prefix (a recurrent state, unlike K/V, cannot be rebuilt from blocks).
//
// Job: hold at most capacity() snapshots, each the whole state of a sequence (every recurrent
// layer's conv tail and delta-rule matrices, StateStore::slot_bytes()) after it absorbed the
// tokens up to the end of one full KV block, keyed by that block's prefix hash (prefix_hash.h:
// the chain already mixes the tenant salt and any media, so lookups are tenant-scoped for free).
// A snapshot is written in two phases: reserve() hands out an entry the forward writes into,
// publish() makes it findable once the step that computed it has committed its KV; discard()
// drops a reservation whose step did not keep those tokens.
//
// Invariants:
//  - At most one entry (pending or published) per hash; find() sees published entries only.
//  - A snapshot lives no longer than a KV block published under its hash: the engine registers
//    the store as the BlockPool's EvictListener, and on_evict() drops the snapshot of every
//    evicted block. (A block may stay without a snapshot: only every interval-th block has one,
//    and the store's own LRU may drop one when it is full.)
//  - When full, reserve() reuses the least recently used published entry (use = publish or
//    find); pending entries are never taken. Entry memory is allocated on first use and reused.
// Persistence: with the KV disk tier (kv/disk_tier.h) the engine writes each published snapshot
// through to disk as a block of kind "state" under the same hash, and installs one read back
// (reserve + publish) after its KV chain is back in the pool (engine/engine_disk.cpp).
// Cost: find/reserve/publish/on_evict are O(1) expected (a hash map), eviction O(capacity).
// Single-threaded: the engine's step loop (the forward writes reserved entries' data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace edgelm::kv {

class StateSnapshots final : public EvictListener {
 public:
  StateSnapshots() = default;
  // slot_floats: the floats of one state (StateStore::slot_bytes() / 4); capacity >= 0.
  StateSnapshots(int64_t slot_floats, int32_t capacity);

  bool enabled() const { return capacity_ > 0; }
  int32_t capacity() const { return capacity_; }

  // An entry for the state at the end of the block named `hash`, to be written through data()
  // and then published or discarded; -1 when `hash` already has one (pending or published) or
  // the store is full of pending entries.
  int32_t reserve(uint64_t hash);
  float* data(int32_t entry) { return entries_[static_cast<size_t>(entry)].data.get(); }
  // The reserved entry now holds the state after n_tokens tokens: findable.
  void publish(int32_t entry, int32_t n_tokens);
  void discard(int32_t entry);

  // The published snapshot of the block named `hash` (marks it used), or nullptr; n_tokens: the
  // tokens it has absorbed.
  const float* find(uint64_t hash, int32_t* n_tokens = nullptr);
  bool contains(uint64_t hash) const;

  // The block published under `hash` left the pool: its snapshot (if any, published) goes.
  void on_evict(uint64_t hash) override;

  int32_t n_snapshots() const { return n_published_; }
  // Memory held by the entries allocated so far (published, pending or free for reuse).
  size_t n_bytes() const { return n_allocated_ * static_cast<size_t>(slot_floats_) * sizeof(float); }
  int64_t n_evictions() const { return n_evictions_; }

  // EDGELM_CHECKs that the map and the entries agree and the counts add up, and with `pool`
  // that every published snapshot's block is still published there.
  void check_invariants(const BlockPool* pool = nullptr) const;

 private:
  enum class State : uint8_t { free, pending, published };
  struct Entry {
    std::unique_ptr<float[]> data;  // [slot_floats], allocated on first use
    uint64_t hash = 0;
    int32_t n_tokens = 0;
    uint64_t last_use = 0;
    State state = State::free;
  };
  void drop(int32_t entry);

  int64_t slot_floats_ = 0;
  int32_t capacity_ = 0;
  std::vector<Entry> entries_;  // [capacity]
  std::vector<int32_t> free_;   // free entries, allocated ones last (reused first)
  std::unordered_map<uint64_t, int32_t> by_hash_;
  uint64_t clock_ = 0;
  int32_t n_published_ = 0;
  size_t n_allocated_ = 0;
  int64_t n_evictions_ = 0;
};

}  // namespace edgelm::kv
