// The engine's side of the KV disk tier (kv/disk_tier.h): write-through of published blocks
// (and of hybrid models' recurrent-state snapshots), and read-back of a new request's prefix
// blocks that RAM no longer holds.
//
// Reads never block the step loop: add_request allocates a KV block for each block to read
// (one reference, unpublished, held in disk_dest_ under the request id), asks the tier's reader
// threads to read each file straight into its block (kv/disk_tier.h: preadv into the block's
// pieces, checksum over the bytes in place) and marks the sequence disk_wait; the scheduler
// admits other requests meanwhile; each step installs what has been read (publish, release: the
// blocks become cached like any evicted-but-kept block; a block not read, or bad, is released
// unpublished, i.e. free, and its bytes are never used) and clears the flag, and the sequence's
// admission then finds them through the ordinary prefix match. If RAM lost an earlier block of
// the chain meanwhile, the match stops there and the rest is computed: never wrong, at most
// slower. A request cancelled meanwhile still gets its blocks installed when the read is done
// (they are valid), and its destinations are never released while the reader may write them.
//
// At start, when the disk holds blocks of this namespace, a background thread commits the KV
// memory of as many blocks (the free list hands blocks out in index order, so the first ones):
// a fresh process's KV memory is untouched, and faulting in (zeroing) its huge pages inside the
// first disk hit measured as the largest part of that hit's cost (README, KV disk tier).
//
// Hybrid models (qwen35): a KV prefix is usable only up to a recurrent-state snapshot at its end
// (engine_states.cpp), so the tier persists snapshots too, as a second kind of block written
// when the snapshot is published (same hash as the block it ends, same namespace, plus the
// state layout and the snapshot interval). A request asks for the KV blocks up to the longest
// snapshot point whose blocks and snapshot are all in RAM or on disk, and for the disk
// snapshots up to there; the reader returns the longest snapshot whose chain came back intact
// (a bad one falls back to the next shorter). The engine installs the KV blocks, then the
// snapshot into StateSnapshots under its block's hash, and the ordinary match_snapshot picks
// the longest prefix that has both: a KV block is never used with a state not computed from
// exactly its chain (the hash names the chain, the namespace the model and settings).
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/engine.h"
#include "kv/prefix_hash.h"

namespace edgelm::engine {

void Engine::DiskWriter::on_publish(kv::BlockId b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  kv::DiskTier& disk = *engine->disk_;
  if (disk.contains(hash)) return;  // on disk already (or read back from there)
  kv::DiskBlock block;
  block.hash = hash;
  block.parent = parent;
  block.tokens.assign(tokens.begin(), tokens.end());
  block.data.resize(engine->store_.saved_block_bytes());
  engine->store_.save_block(b, block.data.data());
  disk.enqueue_write(std::move(block));  // dropped and counted when the queue is full
}

void Engine::write_snapshot(const Sequence& s, int32_t entry, int32_t n_tokens) {
  const int32_t bs = opts_.block_size;
  const int32_t index = n_tokens / bs - 1;
  const uint64_t hash = kv_.block_hash(s.kv, s.kv.tokens, index);
  // On disk already (or read back from there), or the tier is off: no ~state-sized copy.
  if (!disk_->enabled() || disk_->contains(hash, kv::DiskKind::state)) return;
  kv::DiskBlock block;
  block.kind = kv::DiskKind::state;
  block.hash = hash;
  block.parent = index == 0 ? s.kv.root : kv_.block_hash(s.kv, s.kv.tokens, index - 1);
  block.tokens.assign(s.kv.tokens.begin() + static_cast<ptrdiff_t>(index) * bs,
                      s.kv.tokens.begin() + static_cast<ptrdiff_t>(index + 1) * bs);
  block.absorbed = static_cast<uint32_t>(n_tokens);
  block.data.resize(states_.slot_bytes());
  std::memcpy(block.data.data(), snapshots_.data(entry), block.data.size());
  disk_->enqueue_write(std::move(block));  // dropped and counted when the queue is full
}

void Engine::ask_disk(Sequence& s) {
  const size_t bs = static_cast<size_t>(opts_.block_size);
  const size_t n_full = s.tokens.size() / bs;
  const bool hybrid = states_.enabled();
  const auto every = static_cast<size_t>(std::max(1, opts_.state_snapshot_interval));
  uint64_t parent = kv::prefix_root(s.req.cache_salt);
  std::vector<kv::DiskBlockKey> keys, snaps;
  // The prefix worth reading: every available block (hybrid models: up to the longest snapshot
  // point whose snapshot is in RAM or on disk) and the KV keys inside it.
  size_t use = 0, use_keys = 0;
  bool use_disk_state = false;
  size_t ram_after = SIZE_MAX;  // KV keys up to the longest snapshot RAM holds
  int64_t in_ram = 0;
  for (size_t i = 0; i < n_full; ++i) {
    const std::span<const int32_t> toks(s.tokens.data() + i * bs, bs);
    const uint64_t h = kv::prefix_block_hash(parent, toks, s.kv.media, static_cast<int64_t>(i), opts_.block_size);
    if (pool_.has_hash(h)) {
      if (keys.empty()) ++in_ram;
    } else if (disk_->contains(h)) {
      keys.push_back({kv::DiskKind::kv, h, parent, std::vector<int32_t>(toks.begin(), toks.end())});
    } else {
      break;
    }
    if (!hybrid) {
      use = i + 1;
      use_keys = keys.size();
    } else if ((i + 1) % every == 0) {
      if (snapshots_.contains(h)) {
        use = i + 1;
        use_keys = keys.size();
        use_disk_state = false;
        ram_after = keys.size();
      } else if (disk_->contains(h, kv::DiskKind::state)) {
        kv::DiskBlockKey k{kv::DiskKind::state, h, parent, std::vector<int32_t>(toks.begin(), toks.end())};
        k.absorbed = static_cast<uint32_t>((i + 1) * bs);
        k.after = keys.size();
        snaps.push_back(std::move(k));
        use = i + 1;
        use_keys = keys.size();
        use_disk_state = true;
      }
    }
    parent = h;
  }
  keys.resize(use_keys);
  // The destinations: as many blocks as can be had now (the rest of the chain is computed).
  std::vector<kv::BlockId> dest;
  dest.reserve(keys.size());
  for (kv::DiskBlockKey& k : keys) {
    const std::optional<kv::BlockId> id = pool_.allocate();
    if (!id) break;
    dest.push_back(*id);
    k.dest = store_.block_pieces(*id);
  }
  keys.resize(dest.size());
  in_ram = std::min<int64_t>(in_ram, static_cast<int64_t>(use));
  tier_ram_blocks_ += in_ram;
  tier_miss_blocks_ += static_cast<int64_t>(n_full - use);
  // Nothing to read: no block, and no snapshot needed (RAM holds the longest point's).
  if (keys.empty() && !use_disk_state) {
    for (const kv::BlockId b : dest) pool_.release(b);
    return;
  }
  // Blocks in RAM after the first one on disk are counted with the read (as disk: they are
  // useful only once the disk ones are back).
  s.disk_asked = static_cast<int32_t>(use) - static_cast<int32_t>(in_ram);
  s.disk_state = use_disk_state;
  s.disk_ram_keys = ram_after == SIZE_MAX ? -1 : static_cast<int32_t>(ram_after);
  s.disk_wait = true;
  disk_dest_[s.id] = std::move(dest);
  disk_->submit_read(s.id, std::move(keys), std::move(snaps), ram_after);
}

bool Engine::install_snapshot(const kv::DiskBlock& b) {
  const int32_t bs = opts_.block_size;
  // A snapshot lives no longer than its KV block in RAM (StateSnapshots' invariant), and it must
  // be the shape of this model's state at a block boundary of this interval.
  if (opts_.state_snapshot_interval <= 0 || b.data.size() != states_.slot_bytes() || !pool_.has_hash(b.hash) ||
      b.absorbed == 0 ||
      b.absorbed % static_cast<uint32_t>(bs * opts_.state_snapshot_interval) != 0)
    return false;
  if (snapshots_.contains(b.hash)) return true;
  const int32_t e = snapshots_.reserve(b.hash);
  if (e < 0) return false;
  std::memcpy(snapshots_.data(e), b.data.data(), b.data.size());
  snapshots_.publish(e, static_cast<int32_t>(b.absorbed));
  return true;
}

void Engine::install_disk_reads() {
  // Nothing else to do this step: wait a little for the reader instead of spinning.
  bool only_waiting_on_disk = pending_.empty() && scheduler_.running().empty() && !scheduler_.waiting().empty();
  for (const auto& w : scheduler_.waiting()) only_waiting_on_disk = only_waiting_on_disk && w->disk_wait;
  std::vector<kv::DiskReadResult> reads =
      disk_->take_reads(only_waiting_on_disk ? std::chrono::milliseconds(20) : std::chrono::milliseconds(0));
  for (kv::DiskReadResult& r : reads) {
    std::vector<kv::BlockId> dest;
    if (auto it = disk_dest_.find(r.tag); it != disk_dest_.end()) {
      dest = std::move(it->second);
      disk_dest_.erase(it);
    }
    // The blocks read (in place, verified) are published: cached, most recent; when another
    // block got the hash meanwhile, publish leaves this one unhashed and it goes back free, as
    // do the destinations of blocks not read or bad.
    int32_t installed = 0;
    for (size_t i = 0; i < dest.size(); ++i) {
      const bool good = i == static_cast<size_t>(installed) && i < r.blocks.size() &&
                        r.blocks[i].tokens.size() == static_cast<size_t>(opts_.block_size);
      if (good) {
        pool_.publish(dest[i], r.blocks[i].hash, r.blocks[i].parent, r.blocks[i].tokens);
        ++installed;
      }
      pool_.release(dest[i]);
    }
    // The snapshot read back, its chain installed (kept like the blocks when the request is gone).
    const bool state_ok = states_.enabled() && r.has_state && r.state_after <= static_cast<size_t>(installed) &&
                          install_snapshot(r.state);
    Sequence* s = scheduler_.find(static_cast<RequestId>(r.tag));
    if (s == nullptr || !s->disk_wait) continue;  // cancelled or expired meanwhile
    ++disk_fetches_;
    disk_fetch_seconds_ += r.seconds;
    int32_t usable = installed;
    if (states_.enabled()) {
      // The KV blocks serve this request only up to a snapshot: the one read back (its chain
      // installed), else the longest one RAM holds.
      if (state_ok)
        usable = static_cast<int32_t>(r.state_after);
      else if (s->disk_state)
        usable = std::min(installed, std::max(0, s->disk_ram_keys));
    }
    tier_disk_blocks_ += usable;
    tier_miss_blocks_ += std::max(0, s->disk_asked - usable);
    s->disk_wait = false;
    s->disk_state = false;
  }
}

void Engine::populate_for_disk() {
  const int64_t n = std::min<int64_t>(disk_->count(kv::DiskKind::kv), store_.n_blocks());
  if (n <= 0) return;
  kv_populate_ = std::jthread([this, n] { store_.populate_blocks(0, static_cast<int32_t>(n)); });
}

std::pair<int32_t, int64_t> Engine::flush_prefix_cache(bool ram, bool disk) {
  const int32_t n_ram = ram ? pool_.drop_cached() : 0;
  const int64_t n_disk = disk && disk_ ? disk_->clear() : 0;
  return {n_ram, n_disk};
}

void Engine::drain_disk_writes() {
  if (disk_) disk_->drain_writes();
}

}  // namespace edgelm::engine
