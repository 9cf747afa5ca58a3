// The engine's side of the KV disk tier (kv/disk_tier.h): write-through of published blocks,
// and read-back of a new request's prefix blocks that RAM no longer holds.
//
// Reads never block the step loop: add_request asks the tier's reader thread for the blocks
// and marks the sequence disk_wait; the scheduler admits other requests meanwhile; each step
// installs what has been read (allocate, copy in, publish, release: the blocks become cached
// like any evicted-but-kept block) and clears the flag, and the sequence's admission then finds
// them through the ordinary prefix match. If RAM lost an earlier block of the chain meanwhile,
// the match stops there and the rest is computed: never wrong, at most slower.
#include <algorithm>
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

void Engine::ask_disk(Sequence& s) {
  const size_t bs = static_cast<size_t>(opts_.block_size);
  const size_t n_full = s.tokens.size() / bs;
  uint64_t parent = kv::prefix_root(s.req.cache_salt);
  std::vector<kv::DiskBlockKey> keys;
  int64_t in_ram = 0;
  size_t i = 0;
  for (; i < n_full; ++i) {
    const std::span<const int32_t> toks(s.tokens.data() + i * bs, bs);
    const uint64_t h = kv::prefix_block_hash(parent, toks, s.kv.media, static_cast<int64_t>(i), opts_.block_size);
    if (pool_.has_hash(h)) {
      if (keys.empty()) ++in_ram;
    } else if (disk_->contains(h)) {
      keys.push_back({h, parent, std::vector<int32_t>(toks.begin(), toks.end())});
    } else {
      break;
    }
    parent = h;
  }
  tier_ram_blocks_ += in_ram;
  tier_miss_blocks_ += static_cast<int64_t>(n_full - i);
  if (keys.empty()) return;
  // Blocks in RAM after the first one on disk are counted with the read (as disk: they are
  // useful only once the disk ones are back).
  s.disk_asked = static_cast<int32_t>(i) - static_cast<int32_t>(in_ram);
  s.disk_wait = true;
  disk_->submit_read(s.id, std::move(keys));
}

void Engine::install_disk_reads() {
  // Nothing else to do this step: wait a little for the reader instead of spinning.
  bool only_waiting_on_disk = pending_.empty() && scheduler_.running().empty() && !scheduler_.waiting().empty();
  for (const auto& w : scheduler_.waiting()) only_waiting_on_disk = only_waiting_on_disk && w->disk_wait;
  std::vector<kv::DiskReadResult> reads =
      disk_->take_reads(only_waiting_on_disk ? std::chrono::milliseconds(20) : std::chrono::milliseconds(0));
  const size_t bytes = store_.saved_block_bytes();
  for (kv::DiskReadResult& r : reads) {
    Sequence* s = scheduler_.find(static_cast<RequestId>(r.tag));
    if (s == nullptr || !s->disk_wait) continue;  // cancelled or expired meanwhile
    ++disk_fetches_;
    disk_fetch_seconds_ += r.seconds;
    int32_t installed = 0;
    for (const kv::DiskBlock& b : r.blocks) {
      if (b.data.size() != bytes || b.tokens.size() != static_cast<size_t>(opts_.block_size)) break;
      if (!pool_.has_hash(b.hash)) {
        const std::optional<kv::BlockId> id = pool_.allocate();
        if (!id) break;  // every block is in use: the rest is computed
        store_.load_block(*id, b.data.data());
        pool_.publish(*id, b.hash, b.parent, b.tokens);
        pool_.release(*id);  // cached, most recent
      }
      ++installed;
    }
    tier_disk_blocks_ += installed;
    tier_miss_blocks_ += std::max(0, s->disk_asked - installed);
    s->disk_wait = false;
  }
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
