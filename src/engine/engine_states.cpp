// The engine's side of hybrid recurrent models (qwen35; see engine.h): the prefix hook that stops
// a KV prefix match at the longest recurrent-state snapshot inside it, the per-step state slots
// and captures (snapshot loads, rollback states of verifications, prefix snapshots at block
// boundaries), and publishing or discarding those captures after the step's KV commit.
//
// Invariants: a slice continues its slot's state at exactly its pos0 (a loaded snapshot's tokens
// equal the kept KV prefix); a snapshot is published only for tokens the step committed, under
// the hash of the block that ends there, so a later hit continues exactly as a cold run would;
// waiting sequences hold no slot and no pending snapshot load.
#include "core/check.h"
#include "engine/engine.h"

namespace edgelm::engine {

int32_t Engine::match_snapshot(Sequence& s, int32_t matched) {
  const int32_t bs = opts_.block_size, every = opts_.state_snapshot_interval;
  s.restore_tokens = 0;
  hashes_.resize(static_cast<size_t>(matched / bs));
  kv_.block_hashes(s.kv, s.tokens, hashes_);
  for (auto i = static_cast<int32_t>(hashes_.size()) - 1; i >= 0; --i) {
    if ((i + 1) % every != 0) continue;
    int32_t n = 0;
    const uint64_t h = hashes_[static_cast<size_t>(i)];
    if (snapshots_.find(h, &n) == nullptr) continue;
    EDGELM_CHECK(n == (i + 1) * bs, "state snapshot of block ", i, " holds ", n, " tokens");
    kv_.shrink_prefix(s.kv, n);
    s.restore_hash = h;
    s.restore_tokens = n;
    return n;
  }
  kv_.shrink_prefix(s.kv, 0);  // no state to continue from: the whole prompt is computed
  return 0;
}

void Engine::prepare_hybrid(const std::vector<ScheduledSlice>& plan) {
  // Waiting sequences (preempted, or refused at admission after a match) hold no slot: a
  // slot's memory is budgeted per running sequence, and a resumed one restarts from position 0
  // or from a snapshot anyway.
  for (const auto& w : scheduler_.waiting()) {
    w->restore_tokens = 0;  // a refused admission's match is gone; the next one matches again
    if (w->state_slot >= 0) {
      states_.release(w->state_slot);
      w->state_slot = -1;
    }
  }
  // Snapshots are loaded before any capture is reserved (a reservation may reuse an entry).
  for (const ScheduledSlice& sl : plan) {
    Sequence& s = *sl.seq;
    if (s.state_slot < 0) s.state_slot = states_.acquire();
    if (s.restore_tokens == 0) continue;
    int32_t n = 0;
    const float* snap = snapshots_.find(s.restore_hash, &n);
    EDGELM_CHECK(snap != nullptr && n == s.restore_tokens && n == s.kv.n_tokens, "state snapshot for request ", s.id,
                 " at ", s.restore_tokens, " tokens is gone");
    states_.load(s.state_slot, snap, n);
    s.restore_tokens = 0;
  }
  captures_.clear();
  if (slice_caps_.size() < plan.size()) slice_caps_.resize(plan.size());  // never shrunk: entries keep their memory
  const int32_t bs = opts_.block_size;
  const int32_t every = snapshots_.enabled() ? opts_.state_snapshot_interval * bs : 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const ScheduledSlice& sl = plan[i];
    Sequence& s = *sl.seq;
    SliceCaptures& sc = slice_caps_[i];
    sc.begin = captures_.size();
    sc.rollback = -1;
    sc.snapshots.clear();
    const int32_t pos0 = s.kv.n_tokens, end = pos0 + sl.n_tokens;
    if (sl.n_draft > 0) {  // the state after the pending token, to fall back to on a rejection
      sc.rollback = rollback_.acquire();
      captures_.push_back({pos0 + 1, rollback_.data(sc.rollback)});
    }
    // Every snapshot boundary in the slice splits the recurrence, taken or not (a snapshot that
    // exists already, a request that does not cache): the delta rule's chunked form runs over
    // whole aligned chunks of each run (model/deltanet.h), so runs over the same positions must
    // split at the same places for a hit to continue exactly as a cold run.
    const int64_t first = every > 0 ? (int64_t{pos0} / every + 1) * every : 0;  // the first boundary after pos0
    if (every > 0 && first <= end) {
      std::span<const int32_t> toks = s.tokens;
      if (sl.n_draft > 0) {
        hash_tokens_.assign(s.tokens.begin(), s.tokens.end());
        hash_tokens_.insert(hash_tokens_.end(), s.draft.begin(), s.draft.begin() + sl.n_draft);
        toks = hash_tokens_;
      }
      for (int64_t p = first; p <= end; p += every) {
        const auto n = static_cast<int32_t>(p);  // <= end
        const int32_t e = s.kv.cache_prefix ? snapshots_.reserve(kv_.block_hash(s.kv, toks, n / bs - 1)) : -1;
        if (e < 0) {  // already there (or the store is busy with this step's): a split only
          captures_.push_back({n, nullptr});
          continue;
        }
        captures_.push_back({n, snapshots_.data(e)});
        sc.snapshots.emplace_back(e, n);
      }
    }
    sc.end = captures_.size();
  }
  for (size_t i = 0; i < plan.size(); ++i)
    batch_.seqs[i].captures = std::span<const StateCapture>(captures_.data() + slice_caps_[i].begin,
                                                            slice_caps_[i].end - slice_caps_[i].begin);
}

void Engine::finish_captures(size_t i, const Sequence& s, bool ok) {
  SliceCaptures& sc = slice_caps_[i];
  for (const auto& [entry, n] : sc.snapshots) {
    if (ok && n <= s.kv.n_tokens) {
      snapshots_.publish(entry, n);
      if (disk_) write_snapshot(s, entry, n);  // write-through, like its KV blocks
    } else
      snapshots_.discard(entry);
  }
  sc.snapshots.clear();
  if (sc.rollback >= 0) rollback_.release(sc.rollback);
  sc.rollback = -1;
}

}  // namespace edgelm::engine
