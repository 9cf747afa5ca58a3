// KvManager: per-sequence block tables over a shared BlockPool and KvStore, with prefix reuse,
// copy-on-write and forking — the scheduler's whole view of the KV cache.
//
// A step of the engine, per sequence:
//   match_prefix(seq, prompt)   once, on an empty seq: adopt published blocks of the prompt
//   reserve(seq, n)             make room for positions [n_tokens, n_tokens + n); false = no room
//   (forward writes K/V of those positions through slot() and KvStore::write)
//   commit(seq, tokens)         they are valid now; full blocks get published
//   cancel(seq)                 instead of commit, when the step will not run
//   fork(src, dst) / free(seq)  parallel sampling; finish, abort or preempt-by-recompute
//
// Invariants (check_invariants):
//  - A block's refcount equals the number of times it appears in the live tables; no table
//    holds a block twice.
//  - seq.blocks covers exactly positions [0, n_tokens + n_reserved): reserve adds blocks, commit
//    and cancel drop those past n_tokens again, so an idle sequence holds no spare block.
//  - tokens.size() == n_tokens; the first n_published blocks are full and have been published
//    (or found equal to an already published block).
//  - Written blocks are never shared: reserve copies (CoW) the block holding position n_tokens
//    when it is shared (refcount > 1) or published, so published content is immutable and a
//    sequence's writes are never seen by another.
// Single-threaded; non-owning (pool and store outlive the manager).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_store.h"
#include "kv/prefix_hash.h"

namespace edgelm::kv {

struct SeqKv {
  std::vector<BlockId> blocks;      // [ceil((n_tokens + n_reserved) / block_size)] block table
  int32_t n_tokens = 0;             // positions whose K/V are written
  std::vector<int32_t> tokens;      // [n_tokens] those tokens, for hashing
  uint64_t root = prefix_root("");  // chain start: the tenant's salt (set before match_prefix)
  bool cache_prefix = true;         // false: neither looks up nor publishes blocks
  int32_t n_published = 0;          // leading blocks already published
  uint64_t last_hash = 0;           // hash of block n_published - 1 (valid when n_published > 0)
  int32_t n_reserved = 0;           // positions past n_tokens that reserve() made room for
  // Supplied content (images) by position: mixed into the hash of every block it overlaps
  // (prefix_hash.h), so only sequences with the same content there share those blocks. Set
  // before match_prefix, kept by free().
  std::vector<PrefixMedia> media;
};

class KvManager {
 public:
  KvManager(BlockPool& pool, KvStore& store);

  // On an empty seq: adopts the published blocks that equal the prompt's leading full blocks
  // (when seq.cache_prefix) and returns the new n_tokens, the tokens that need no compute:
  // hits * block_size, or prompt.size() - 1 when the hits cover the whole prompt (the last
  // token is recomputed so that its logits exist). seq.tokens = the first n_tokens of prompt.
  int32_t match_prefix(SeqKv& seq, std::span<const int32_t> prompt);

  // Right after match_prefix (no reservation): keeps only the first n (<= n_tokens) of the
  // matched tokens and releases the blocks past them, as if the match had stopped there (the
  // hit count drops to match). Hybrid models use it to stop at the longest prefix whose
  // recurrent state has a snapshot (kv/state_snapshots.h).
  void shrink_prefix(SeqKv& seq, int32_t n);
  // The prefix hashes (the chain match_prefix and commit use: seq.root, seq.media) of blocks
  // [0, out.size()) of a sequence whose tokens start with `tokens` (at least out.size() full
  // blocks of them, committed or not).
  void block_hashes(const SeqKv& seq, std::span<const int32_t> tokens, std::span<uint64_t> out) const;
  // The hash of block `index` alone, continuing seq's published chain when index >= n_published.
  uint64_t block_hash(const SeqKv& seq, std::span<const int32_t> tokens, int32_t index) const;

  // Blocks reserve(seq, n) would take from the pool, counting a copy-on-write copy.
  int32_t blocks_needed(const SeqKv& seq, int32_t n) const;
  // Room to write positions [n_tokens, n_tokens + n): copy-on-write of the block holding
  // position n_tokens when it is shared or published, then new blocks up to n_tokens + n.
  // All or nothing: on false, seq and the pool are unchanged.
  bool reserve(SeqKv& seq, int32_t n);
  // Block and slot of position pos (which must be covered by seq.blocks).
  std::pair<BlockId, int32_t> slot(const SeqKv& seq, int32_t pos) const;
  // Positions [n_tokens, n_tokens + tokens.size()) have been written (tokens.size() <=
  // n_reserved): appends the tokens, publishes the blocks that became full (when
  // seq.cache_prefix), ends the reservation and releases blocks it no longer needs.
  void commit(SeqKv& seq, std::span<const int32_t> tokens);
  // Ends the reservation without writing anything: releases the blocks past n_tokens.
  void cancel(SeqKv& seq);
  // dst (empty) continues from src (which holds no reservation): it shares all of src's blocks;
  // the first write of either into a shared block copies it.
  void fork(const SeqKv& src, SeqKv& dst);
  // Releases all blocks (tail first, so the LRU evicts a prefix's tail before its head); seq
  // becomes empty but keeps root and cache_prefix, ready for a new match_prefix.
  void free(SeqKv& seq);

  // Pool invariants plus the table invariants above; `live` must be every sequence holding
  // blocks of this pool, `held` every block held outside a table (one reference each, never
  // published: the disk tier's read destinations, engine_disk.cpp). O(n_blocks + total table size).
  void check_invariants(std::span<const SeqKv* const> live, std::span<const BlockId> held = {}) const;

  // Prompt tokens looked up by match_prefix, and those found (for a prefix-cache hit rate).
  int64_t n_prompt_tokens_queried() const { return n_prompt_tokens_queried_; }
  int64_t n_prompt_tokens_hit() const { return n_prompt_tokens_hit_; }

  BlockPool& pool() { return pool_; }
  KvStore& store() { return store_; }

 private:
  int32_t blocks_for(int32_t n_positions) const;
  bool needs_copy(const SeqKv& seq, int32_t n) const;
  void release_tail(SeqKv& seq, size_t keep);

  BlockPool& pool_;
  KvStore& store_;
  int32_t block_size_;
  int64_t n_prompt_tokens_queried_ = 0;
  int64_t n_prompt_tokens_hit_ = 0;
};

}  // namespace edgelm::kv
