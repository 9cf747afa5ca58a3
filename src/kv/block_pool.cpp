#include "kv/block_pool.h"

#include <algorithm>
#include <bit>

#include "core/check.h"

namespace edgelm::kv {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_size)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      ref_(static_cast<size_t>(std::max(n_blocks, 0)), 0),
      hashed_(ref_.size(), 0),
      hash_(ref_.size(), 0),
      parent_(ref_.size(), 0),
      tokens_(ref_.size() * static_cast<size_t>(std::max(block_size, 0)), 0),
      prev_(ref_.size(), kNone),
      next_(ref_.size(), kNone),
      table_(std::bit_ceil(2 * ref_.size()), kNone) {
  EDGELM_CHECK(n_blocks >= 1 && block_size >= 1, "BlockPool(", n_blocks, ", ", block_size, ")");
  for (BlockId b = 0; b < n_blocks_; ++b) list_push_back(free_, b);
}

// ---- intrusive lists ----

void BlockPool::list_push_back(List& l, BlockId b) {
  prev_[b] = l.tail;
  next_[b] = kNone;
  (l.tail != kNone ? next_[l.tail] : l.head) = b;
  l.tail = b;
  ++l.size;
}

void BlockPool::list_push_front(List& l, BlockId b) {
  prev_[b] = kNone;
  next_[b] = l.head;
  (l.head != kNone ? prev_[l.head] : l.tail) = b;
  l.head = b;
  ++l.size;
}

void BlockPool::list_remove(List& l, BlockId b) {
  (prev_[b] != kNone ? next_[prev_[b]] : l.head) = next_[b];
  (next_[b] != kNone ? prev_[next_[b]] : l.tail) = prev_[b];
  prev_[b] = next_[b] = kNone;
  --l.size;
}

BlockId BlockPool::list_pop_front(List& l) {
  const BlockId b = l.head;
  EDGELM_CHECK(b != kNone, "pop from an empty block list");
  list_remove(l, b);
  return b;
}

// ---- hash map: open addressing, keys read from hash_[block] ----

size_t BlockPool::map_home(uint64_t hash) const {
  // Hashes from prefix_block_hash are already mixed; this fold keeps arbitrary (e.g. sequential)
  // keys from clustering as well.
  const uint64_t h = (hash ^ (hash >> 31)) * 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>(h >> 7) & (table_.size() - 1);
}

int64_t BlockPool::map_find(uint64_t hash) const {
  const size_t mask = table_.size() - 1;
  for (size_t i = map_home(hash);; i = (i + 1) & mask) {
    const BlockId b = table_[i];
    if (b == kNone) return -1;
    if (hash_[b] == hash) return static_cast<int64_t>(i);
  }
}

void BlockPool::map_insert(BlockId b) {
  const size_t mask = table_.size() - 1;
  size_t i = map_home(hash_[b]);
  while (table_[i] != kNone) i = (i + 1) & mask;  // the table is never more than half full
  table_[i] = b;
}

void BlockPool::map_erase(uint64_t hash) {
  const int64_t found = map_find(hash);
  EDGELM_CHECK(found >= 0, "hash ", hash, " not in the map");
  const size_t mask = table_.size() - 1;
  size_t hole = static_cast<size_t>(found);
  // Backward-shift deletion: pull later entries of the probe run into the hole when their home
  // slot does not lie (cyclically) in (hole, j], so every entry stays reachable from its home.
  for (size_t j = (hole + 1) & mask; table_[j] != kNone; j = (j + 1) & mask) {
    const size_t home = map_home(hash_[table_[j]]);
    const bool home_in_range = hole < j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (home_in_range) continue;
    table_[hole] = table_[j];
    hole = j;
  }
  table_[hole] = kNone;
}

// ---- public API ----

void BlockPool::check_block(BlockId b) const {
  EDGELM_CHECK(b >= 0 && b < n_blocks_, "block id ", b, " out of range [0, ", n_blocks_, ")");
}

std::optional<BlockId> BlockPool::allocate() {
  BlockId b;
  if (free_.size > 0) {
    b = list_pop_front(free_);
  } else if (lru_.size > 0) {
    b = list_pop_front(lru_);
    map_erase(hash_[b]);
    hashed_[b] = 0;
    ++n_evictions_;
    if (evict_listener_ != nullptr) evict_listener_->on_evict(hash_[b]);
  } else {
    return std::nullopt;
  }
  ref_[b] = 1;
  return b;
}

void BlockPool::retain(BlockId b) {
  check_block(b);
  EDGELM_CHECK(ref_[b] > 0, "retain of block ", b, " which is not in use");
  ++ref_[b];
}

void BlockPool::release(BlockId b) {
  check_block(b);
  EDGELM_CHECK(ref_[b] > 0, "release of block ", b, " which is not in use");
  if (--ref_[b] > 0) return;
  if (hashed_[b]) {
    list_push_back(lru_, b);  // cached, most recent
  } else {
    list_push_front(free_, b);  // reused first
  }
}

int32_t BlockPool::ref_count(BlockId b) const {
  check_block(b);
  return ref_[b];
}

bool BlockPool::is_published(BlockId b) const {
  check_block(b);
  return hashed_[b] != 0;
}

std::optional<BlockId> BlockPool::find_cached(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  ++prefix_queries_;
  if (static_cast<int32_t>(tokens.size()) != block_size_) return std::nullopt;
  const int64_t slot = map_find(hash);
  if (slot < 0) return std::nullopt;
  const BlockId b = table_[static_cast<size_t>(slot)];
  const int32_t* stored = tokens_.data() + static_cast<size_t>(b) * block_size_;
  if (parent_[b] != parent || !std::equal(tokens.begin(), tokens.end(), stored)) return std::nullopt;
  if (ref_[b] == 0) list_remove(lru_, b);
  ++ref_[b];
  ++prefix_hits_;
  return b;
}

void BlockPool::publish(BlockId b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  check_block(b);
  EDGELM_CHECK(ref_[b] > 0, "publish of block ", b, " which is not in use");
  EDGELM_CHECK(static_cast<int32_t>(tokens.size()) == block_size_, "publish of ", tokens.size(),
               " tokens into a block of ", block_size_);
  if (hashed_[b]) {
    EDGELM_CHECK(hash_[b] == hash, "block ", b, " re-published under a different hash");
    return;
  }
  if (map_find(hash) >= 0) return;  // an equal (or colliding) block is already published
  hashed_[b] = 1;
  hash_[b] = hash;
  parent_[b] = parent;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
  map_insert(b);
  if (publish_listener_ != nullptr) publish_listener_->on_publish(b, hash, parent, tokens);
}

int32_t BlockPool::drop_cached() {
  int32_t n = 0;
  while (lru_.size > 0) {
    const BlockId b = list_pop_front(lru_);
    map_erase(hash_[b]);
    hashed_[b] = 0;
    if (evict_listener_ != nullptr) evict_listener_->on_evict(hash_[b]);
    list_push_back(free_, b);
    ++n;
  }
  return n;
}

void BlockPool::check_invariants() const {
  // Walk both lists, checking links and membership; each block may appear at most once.
  std::vector<uint8_t> on_list(static_cast<size_t>(n_blocks_), 0);  // 1 free, 2 lru
  auto walk = [&](const List& l, uint8_t tag) {
    int32_t n = 0;
    BlockId prev = kNone;
    for (BlockId b = l.head; b != kNone; prev = b, b = next_[b]) {
      check_block(b);
      EDGELM_CHECK(on_list[b] == 0, "block ", b, " is on a list twice");
      EDGELM_CHECK(prev_[b] == prev, "broken prev link at block ", b);
      on_list[b] = tag;
      EDGELM_CHECK(++n <= n_blocks_, "cycle in a block list");
    }
    EDGELM_CHECK(l.tail == prev, "list tail is not the last block");
    EDGELM_CHECK(n == l.size, "list size ", l.size, " but ", n, " blocks on it");
  };
  walk(free_, 1);
  walk(lru_, 2);

  int32_t n_hashed = 0, n_used = 0;
  for (BlockId b = 0; b < n_blocks_; ++b) {
    EDGELM_CHECK(ref_[b] >= 0, "negative refcount at block ", b);
    if (hashed_[b]) {
      ++n_hashed;
      const int64_t slot = map_find(hash_[b]);
      EDGELM_CHECK(slot >= 0 && table_[static_cast<size_t>(slot)] == b, "published block ", b,
                   " is not reachable in the hash map");
    }
    if (ref_[b] > 0) {
      ++n_used;
      EDGELM_CHECK(on_list[b] == 0, "used block ", b, " is on a list");
    } else if (hashed_[b]) {
      EDGELM_CHECK(on_list[b] == 2, "cached block ", b, " is not on the LRU list");
    } else {
      EDGELM_CHECK(on_list[b] == 1, "free block ", b, " is not on the free list");
    }
  }
  int32_t n_entries = 0;
  for (BlockId b : table_) {
    if (b == kNone) continue;
    check_block(b);
    EDGELM_CHECK(hashed_[b], "hash map entry for unpublished block ", b);
    ++n_entries;
  }
  EDGELM_CHECK(n_entries == n_hashed, "hash map has ", n_entries, " entries for ", n_hashed, " published blocks");
  EDGELM_CHECK(free_.size + lru_.size + n_used == n_blocks_, "free ", free_.size, " + cached ", lru_.size, " + used ",
               n_used, " != ", n_blocks_);
}

}  // namespace edgelm::kv
