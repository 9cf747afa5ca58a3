// BlockPool: the metadata of the paged KV cache's blocks (the data itself lives in KvStore).
//
// Job: hand out fixed-size blocks, count their references, and keep the content of released
// blocks findable by prefix hash until the space is needed (LRU eviction), as in vLLM's prefix
// cache. Single-threaded: owned and driven by the engine's step loop.
//
// Every block is in exactly one state:
//   free    refcount 0, no hash, on the free list              (content meaningless)
//   cached  refcount 0, hashed,  on the LRU list, in the map   (content valid, reusable)
//   used    refcount > 0, hashed or not, on no list            (held by sequences)
// A hashed ("published") block is full and immutable: its parent hash and block_size tokens are
// stored so that find_cached can verify a hit, and the hash map holds at most one block per
// hash. Released blocks go to the most-recent end of the LRU list; allocate() takes the free
// list first, then evicts the least recently released cached block (dropping its hash).
//
// Cost: every operation is O(1) (O(block_size) where tokens are compared or stored) and does not
// allocate: the lists are intrusive over per-block arrays, and the hash map is open addressing
// (linear probing, backward-shift deletion) over a fixed table of at least 2 * n_blocks slots.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace edgelm::kv {

using BlockId = int32_t;

// Told when a cached block is evicted (allocate() takes it and drops its hash), e.g. so that
// what is keyed by the block's hash (kv/state_snapshots.h) goes with it.
class EvictListener {
 public:
  virtual ~EvictListener() = default;
  virtual void on_evict(uint64_t hash) = 0;
};

// Told when a block becomes published (newly hashed: not when an equal block already held the
// hash), e.g. so that the disk tier (kv/disk_tier.h) can persist it while its content is known.
class PublishListener {
 public:
  virtual ~PublishListener() = default;
  virtual void on_publish(BlockId b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) = 0;
};

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, int32_t block_size);  // both >= 1 (EDGELM_CHECK)

  // A block with refcount 1: a free one first, else the least recently released cached one
  // (which loses its hash). nullopt when every block is used.
  std::optional<BlockId> allocate();
  // Another reference to a used block.
  void retain(BlockId b);
  // Drops a reference; at 0 a hashed block becomes cached (most recent), an unhashed one free.
  void release(BlockId b);
  int32_t ref_count(BlockId b) const;
  bool is_published(BlockId b) const;
  // Whether some block is published under `hash` (no side effect: not a prefix query).
  bool has_hash(uint64_t hash) const { return map_find(hash) >= 0; }

  // The block published under `hash` if its stored parent hash and tokens equal `parent` and
  // `tokens` (so a 64-bit collision never yields a wrong block); it is retained (a cached block
  // becomes used). Counts a prefix query, and a hit when found.
  std::optional<BlockId> find_cached(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  // Records used block b (full: tokens.size() == block_size) under `hash`. When another block
  // already holds `hash` nothing changes and b stays unhashed; publishing b again under its own
  // hash is a no-op. Re-publishing b under a different hash is a bug.
  void publish(BlockId b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);

  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  int32_t n_free() const { return free_.size + lru_.size; }  // allocatable now (free + cached)
  int32_t n_cached() const { return lru_.size; }
  int32_t n_used() const { return n_blocks_ - free_.size - lru_.size; }
  // find_cached calls, and those that found a block (for a hit-ratio metric).
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }
  int64_t n_evictions() const { return n_evictions_; }
  // Called on every eviction from now on (null: none); must outlive the pool or be reset.
  void set_evict_listener(EvictListener* l) { evict_listener_ = l; }
  void set_publish_listener(PublishListener* l) { publish_listener_ = l; }
  // Drops every cached block's hash (they become free); returns how many. Used blocks keep theirs.
  int32_t drop_cached();

  // EDGELM_CHECKs that the states partition the blocks, that the lists, the hash map and the
  // per-block fields agree, and that the counts add up. O(n_blocks).
  void check_invariants() const;

 private:
  static constexpr BlockId kNone = -1;

  struct List {  // intrusive, doubly linked through prev_ / next_
    BlockId head = kNone;
    BlockId tail = kNone;
    int32_t size = 0;
  };
  void list_push_back(List& l, BlockId b);
  void list_push_front(List& l, BlockId b);
  void list_remove(List& l, BlockId b);
  BlockId list_pop_front(List& l);

  size_t map_home(uint64_t hash) const;
  // Slot of the table holding `hash`, or -1.
  int64_t map_find(uint64_t hash) const;
  void map_insert(BlockId b);  // under hash_[b], which must be absent
  void map_erase(uint64_t hash);

  void check_block(BlockId b) const;

  int32_t n_blocks_;
  int32_t block_size_;
  std::vector<int32_t> ref_;      // [n_blocks] reference count
  std::vector<uint8_t> hashed_;   // [n_blocks] 1 when published (in the map)
  std::vector<uint64_t> hash_;    // [n_blocks] the block's hash, valid when hashed
  std::vector<uint64_t> parent_;  // [n_blocks] its parent's hash, valid when hashed
  std::vector<int32_t> tokens_;   // [n_blocks, block_size] its tokens, valid when hashed
  std::vector<BlockId> prev_;     // [n_blocks] list links (free or LRU list), kNone at ends
  std::vector<BlockId> next_;     // [n_blocks]
  std::vector<BlockId> table_;    // [capacity, a power of two >= 2 * n_blocks] kNone or a hashed block
  List free_;                     // order of reuse: head first
  List lru_;                      // head = least recently released
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t n_evictions_ = 0;
  EvictListener* evict_listener_ = nullptr;
  PublishListener* publish_listener_ = nullptr;
};

}  // namespace edgelm::kv
