#include "kv/kv_manager.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace edgelm::kv {

KvManager::KvManager(BlockPool& pool, KvStore& store) : pool_(pool), store_(store), block_size_(pool.block_size()) {
  EDGELM_CHECK(store.block_size() == pool.block_size(), "pool block size ", pool.block_size(), " != store block size ",
               store.block_size());
  EDGELM_CHECK(pool.n_blocks() <= store.n_blocks(), "pool has ", pool.n_blocks(), " blocks, store only ",
               store.n_blocks());
}

int32_t KvManager::blocks_for(int32_t n_positions) const {
  return static_cast<int32_t>((static_cast<int64_t>(n_positions) + block_size_ - 1) / block_size_);
}

int32_t KvManager::match_prefix(SeqKv& seq, std::span<const int32_t> prompt) {
  EDGELM_CHECK(
      seq.blocks.empty() && seq.n_tokens == 0 && seq.tokens.empty() && seq.n_reserved == 0 && seq.n_published == 0,
      "match_prefix on a sequence that already holds KV");
  if (!seq.cache_prefix || prompt.empty()) return 0;
  n_prompt_tokens_queried_ += static_cast<int64_t>(prompt.size());

  const size_t bs = static_cast<size_t>(block_size_);
  const size_t n_full = prompt.size() / bs;
  uint64_t parent = seq.root;       // hash of the last hit (root before any)
  uint64_t before_last = seq.root;  // hash of the hit before it
  for (size_t i = 0; i < n_full; ++i) {
    const auto block_tokens = prompt.subspan(i * bs, bs);
    const uint64_t hash = prefix_block_hash(parent, block_tokens, seq.media, static_cast<int64_t>(i), block_size_);
    const auto b = pool_.find_cached(hash, parent, block_tokens);
    if (!b) break;
    seq.blocks.push_back(*b);
    before_last = parent;
    parent = hash;
  }
  const auto hits = static_cast<int32_t>(seq.blocks.size());
  int32_t n = hits * block_size_;
  if (n > 0 && static_cast<size_t>(n) == prompt.size()) --n;  // recompute the last token
  seq.n_tokens = n;
  seq.tokens.assign(prompt.begin(), prompt.begin() + n);
  // With block_size 1 the last hit holds nothing but the recomputed token: give it back.
  release_tail(seq, static_cast<size_t>(blocks_for(n)));
  // Blocks fully covered by n_tokens count as published; in the whole-prompt case the last hit
  // is only partly covered (its last slot will be rewritten into a copy) and is republished, as
  // a no-op duplicate, once that token is committed.
  seq.n_published = n / block_size_;
  seq.last_hash = seq.n_published == hits ? parent : before_last;
  n_prompt_tokens_hit_ += n;
  return n;
}

void KvManager::shrink_prefix(SeqKv& seq, int32_t n) {
  EDGELM_CHECK(n >= 0 && n <= seq.n_tokens && seq.n_reserved == 0, "shrink_prefix to ", n, " of ", seq.n_tokens,
               " tokens (", seq.n_reserved, " reserved)");
  n_prompt_tokens_hit_ -= seq.n_tokens - n;
  seq.n_tokens = n;
  seq.tokens.resize(static_cast<size_t>(n));
  release_tail(seq, static_cast<size_t>(blocks_for(n)));
  seq.n_published = std::min(seq.n_published, n / block_size_);
  uint64_t h = seq.root;
  const size_t bs = static_cast<size_t>(block_size_);
  for (int32_t i = 0; i < seq.n_published; ++i)
    h = prefix_block_hash(h, std::span<const int32_t>(seq.tokens.data() + static_cast<size_t>(i) * bs, bs), seq.media,
                          i, block_size_);
  seq.last_hash = seq.n_published > 0 ? h : 0;
}

void KvManager::block_hashes(const SeqKv& seq, std::span<const int32_t> tokens, std::span<uint64_t> out) const {
  const size_t bs = static_cast<size_t>(block_size_);
  EDGELM_CHECK(tokens.size() >= out.size() * bs, "block_hashes of ", out.size(), " blocks over ", tokens.size(),
               " tokens");
  uint64_t h = seq.root;
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = h = prefix_block_hash(h, tokens.subspan(i * bs, bs), seq.media, static_cast<int64_t>(i), block_size_);
}

uint64_t KvManager::block_hash(const SeqKv& seq, std::span<const int32_t> tokens, int32_t index) const {
  const size_t bs = static_cast<size_t>(block_size_);
  EDGELM_CHECK(index >= 0 && tokens.size() >= (static_cast<size_t>(index) + 1) * bs, "block_hash of block ", index,
               " over ", tokens.size(), " tokens");
  int32_t i = 0;
  uint64_t h = seq.root;
  if (seq.n_published > 0 && index >= seq.n_published) {
    i = seq.n_published;
    h = seq.last_hash;
  }
  for (; i <= index; ++i)
    h = prefix_block_hash(h, tokens.subspan(static_cast<size_t>(i) * bs, bs), seq.media, i, block_size_);
  return h;
}

bool KvManager::needs_copy(const SeqKv& seq, int32_t n) const {
  if (n <= 0) return false;
  const auto idx = static_cast<size_t>(seq.n_tokens / block_size_);
  if (idx >= seq.blocks.size()) return false;
  const BlockId b = seq.blocks[idx];
  return pool_.ref_count(b) > 1 || pool_.is_published(b);
}

int32_t KvManager::blocks_needed(const SeqKv& seq, int32_t n) const {
  EDGELM_CHECK(n >= 0 && n <= std::numeric_limits<int32_t>::max() - seq.n_tokens, "cannot reserve ", n,
               " positions after ", seq.n_tokens);
  const int32_t grow = std::max<int32_t>(0, blocks_for(seq.n_tokens + n) - static_cast<int32_t>(seq.blocks.size()));
  return grow + (needs_copy(seq, n) ? 1 : 0);
}

bool KvManager::reserve(SeqKv& seq, int32_t n) {
  const int32_t need = blocks_needed(seq, n);
  if (n == 0) return true;
  if (need > pool_.n_free()) return false;
  // From here on every allocate() succeeds: n_free() counts free and cached blocks.
  if (needs_copy(seq, n)) {
    const auto idx = static_cast<size_t>(seq.n_tokens / block_size_);
    const BlockId old = seq.blocks[idx];
    const BlockId copy = *pool_.allocate();
    store_.copy_block(copy, old);
    pool_.release(old);  // still held by others, or cached with its content intact
    seq.blocks[idx] = copy;
  }
  const auto target = static_cast<size_t>(blocks_for(seq.n_tokens + n));
  while (seq.blocks.size() < target) seq.blocks.push_back(*pool_.allocate());
  seq.n_reserved = std::max(seq.n_reserved, n);
  return true;
}

std::pair<BlockId, int32_t> KvManager::slot(const SeqKv& seq, int32_t pos) const {
  EDGELM_CHECK(pos >= 0 && static_cast<int64_t>(pos) < static_cast<int64_t>(seq.blocks.size()) * block_size_,
               "position ", pos, " is not covered by the sequence's ", seq.blocks.size(), " blocks");
  return {seq.blocks[static_cast<size_t>(pos / block_size_)], pos % block_size_};
}

void KvManager::release_tail(SeqKv& seq, size_t keep) {
  while (seq.blocks.size() > keep) {
    pool_.release(seq.blocks.back());
    seq.blocks.pop_back();
  }
}

void KvManager::commit(SeqKv& seq, std::span<const int32_t> tokens) {
  EDGELM_CHECK(tokens.size() <= static_cast<size_t>(seq.n_reserved), "commit of ", tokens.size(), " tokens with only ",
               seq.n_reserved, " reserved");
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
  seq.n_tokens += static_cast<int32_t>(tokens.size());
  if (seq.cache_prefix) {
    const size_t bs = static_cast<size_t>(block_size_);
    while (seq.n_published < seq.n_tokens / block_size_) {
      const auto i = static_cast<size_t>(seq.n_published);
      const std::span<const int32_t> block_tokens(seq.tokens.data() + i * bs, bs);
      const uint64_t parent = i == 0 ? seq.root : seq.last_hash;
      const uint64_t hash = prefix_block_hash(parent, block_tokens, seq.media, static_cast<int64_t>(i), block_size_);
      pool_.publish(seq.blocks[i], hash, parent, block_tokens);
      seq.last_hash = hash;
      ++seq.n_published;
    }
  }
  cancel(seq);
}

void KvManager::cancel(SeqKv& seq) {
  seq.n_reserved = 0;
  release_tail(seq, static_cast<size_t>(blocks_for(seq.n_tokens)));
}

void KvManager::fork(const SeqKv& src, SeqKv& dst) {
  EDGELM_CHECK(&src != &dst && dst.blocks.empty() && dst.n_tokens == 0 && dst.n_reserved == 0,
               "fork into a sequence that already holds KV");
  EDGELM_CHECK(src.n_reserved == 0, "fork of a sequence with ", src.n_reserved,
               " reserved positions (commit or cancel first)");
  for (BlockId b : src.blocks) pool_.retain(b);
  dst = src;
}

void KvManager::free(SeqKv& seq) {
  release_tail(seq, 0);
  seq.n_tokens = 0;
  seq.tokens.clear();
  seq.n_published = 0;
  seq.last_hash = 0;
  seq.n_reserved = 0;
}

void KvManager::check_invariants(std::span<const SeqKv* const> live, std::span<const BlockId> held) const {
  pool_.check_invariants();
  const auto n_blocks = static_cast<size_t>(pool_.n_blocks());
  std::vector<int32_t> refs(n_blocks, 0);
  std::vector<size_t> seen_in(n_blocks, SIZE_MAX);  // last sequence a block appeared in
  const size_t bs = static_cast<size_t>(block_size_);
  for (size_t s = 0; s < live.size(); ++s) {
    const SeqKv& seq = *live[s];
    EDGELM_CHECK(seq.n_tokens >= 0 && seq.n_reserved >= 0, "seq ", s, ": negative counts");
    EDGELM_CHECK(seq.tokens.size() == static_cast<size_t>(seq.n_tokens), "seq ", s, ": ", seq.tokens.size(),
                 " tokens for n_tokens ", seq.n_tokens);
    EDGELM_CHECK(seq.blocks.size() == static_cast<size_t>(blocks_for(seq.n_tokens + seq.n_reserved)), "seq ", s, ": ",
                 seq.blocks.size(), " blocks for ", seq.n_tokens, " tokens + ", seq.n_reserved, " reserved");
    EDGELM_CHECK(seq.n_published >= 0 && seq.n_published <= seq.n_tokens / block_size_, "seq ", s, ": n_published ",
                 seq.n_published, " past its full blocks");
    EDGELM_CHECK(seq.cache_prefix || seq.n_published == 0, "seq ", s, ": published without cache_prefix");
    for (size_t i = 0; i < seq.blocks.size(); ++i) {
      const BlockId b = seq.blocks[i];
      EDGELM_CHECK(b >= 0 && static_cast<size_t>(b) < n_blocks, "seq ", s, ": block id ", b, " out of range");
      EDGELM_CHECK(seen_in[b] != s, "seq ", s, ": block ", b, " appears twice in one table");
      seen_in[b] = s;
      ++refs[b];
      // Blocks being written must be private and unpublished (CoW happened in reserve).
      if (seq.n_reserved > 0 && i >= static_cast<size_t>(seq.n_tokens / block_size_))
        EDGELM_CHECK(pool_.ref_count(b) == 1 && !pool_.is_published(b), "seq ", s, ": block ", b,
                     " will be written but is shared or published");
    }
    uint64_t hash = seq.root;
    for (size_t i = 0; i < static_cast<size_t>(seq.n_published); ++i)
      hash = prefix_block_hash(hash, std::span<const int32_t>(seq.tokens.data() + i * bs, bs), seq.media,
                               static_cast<int64_t>(i), block_size_);
    EDGELM_CHECK(seq.n_published == 0 || hash == seq.last_hash, "seq ", s, ": last_hash is not the chain's");
  }
  for (const BlockId b : held) {
    EDGELM_CHECK(b >= 0 && static_cast<size_t>(b) < n_blocks, "held block id ", b, " out of range");
    EDGELM_CHECK(!pool_.is_published(b), "held block ", b, " is published");
    ++refs[b];
  }
  for (size_t b = 0; b < n_blocks; ++b)
    EDGELM_CHECK(refs[b] == pool_.ref_count(static_cast<BlockId>(b)), "block ", b, " has refcount ",
                 pool_.ref_count(static_cast<BlockId>(b)), " but ", refs[b], " table entries");
}

}  // namespace edgelm::kv
