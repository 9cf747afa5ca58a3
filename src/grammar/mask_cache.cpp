// Shared-prefix walks over the sorted vocabulary and the token-classification cache (see
// mask_cache.h for the contract).
#include "grammar/mask_cache.h"

#include <algorithm>
#include <chrono>

namespace edgelm::grammar::detail {
namespace {

constexpr uint8_t kUnderflow = 1, kOverflow = 2;

void prepare(WalkScratch& w, const TokenIndex& t, const StackSet& start) {
  const size_t depth = t.max_piece_len() + 1;
  if (w.levels.size() < depth) w.levels.resize(depth);
  if (w.flag.size() < depth) w.flag.resize(depth);
  w.levels[0] = start;
  w.flag[0] = 0;
}

std::atomic<uint32_t> g_key_depth{kDefaultKeyDepth};

}  // namespace

uint32_t mask_key_depth() { return g_key_depth.load(); }
void set_mask_key_depth(uint32_t depth) { g_key_depth.store(std::max(depth, 1u)); }

MaskEntry classify_all(const Program& g, const TokenIndex& t, const StackSet& start, bool local, WalkScratch& w) {
  prepare(w, t, start);
  const auto sorted = t.sorted();
  const size_t n = sorted.size();
  std::vector<int32_t> accepted;
  MaskEntry e;
  uint32_t valid = 0;  // levels[0..valid] hold the states of the previous token's prefixes
  for (size_t i = 0; i < n;) {
    const std::string& p = t.piece(sorted[i]);
    const uint32_t len = static_cast<uint32_t>(p.size());
    uint32_t d = std::min(t.lcp(i), valid);
    bool dead = false;
    while (d < len) {
      if (w.levels[d].empty()) {
        dead = true;
        break;
      }
      advance(g, w.levels[d], static_cast<uint8_t>(p[d]), w.levels[d + 1], local);
      w.flag[d + 1] =
          w.flag[d] | (w.levels[d + 1].underflow() ? kUnderflow : 0) | (w.levels[d + 1].overflow() ? kOverflow : 0);
      ++d;
    }
    valid = d;
    const bool reached = !dead && (!w.levels[d].empty() || w.levels[d].underflow());
    if (reached && !(w.flag[d] & kOverflow)) {
      accepted.push_back(sorted[i]);  // some path consumed every byte without the context
    } else if (w.flag[d]) {
      e.uncertain.push_back(static_cast<uint32_t>(i));
    } else if (dead) {
      // Rejected with every token sharing the dead prefix p[0..d).
      size_t j = d > t.lcp(i) ? t.subtree_end(i, d) : i + 1;
      while (j < n && t.lcp(j) >= d) ++j;
      i = j;
      continue;
    }
    ++i;
  }
  if (accepted.size() * 32 >= static_cast<size_t>(t.n_tokens())) {
    e.bits.assign((static_cast<size_t>(t.n_tokens()) + 63) / 64, 0);
    for (int32_t id : accepted) e.bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  } else {
    std::sort(accepted.begin(), accepted.end());
    e.ids = std::move(accepted);
  }
  return e;
}

void accept_subset(const Program& g, const TokenIndex& t, const StackSet& start, const std::vector<uint32_t>& subset,
                   WalkScratch& w, uint64_t* bits) {
  prepare(w, t, start);
  const auto sorted = t.sorted();
  const std::string* prev = nullptr;
  uint32_t valid = 0;
  for (uint32_t idx : subset) {
    const int32_t id = sorted[idx];
    const std::string& p = t.piece(id);
    const uint32_t len = static_cast<uint32_t>(p.size());
    uint32_t d = 0;
    if (prev != nullptr) {
      const uint32_t lim = std::min(valid, len);
      while (d < lim && (*prev)[d] == p[d]) ++d;
    }
    while (d < len && !w.levels[d].empty()) {
      advance(g, w.levels[d], static_cast<uint8_t>(p[d]), w.levels[d + 1], false);
      w.flag[d + 1] = w.flag[d] | (w.levels[d + 1].overflow() ? kOverflow : 0);
      ++d;
    }
    valid = d;
    prev = &p;
    if (d == len && !w.levels[d].empty() && !w.flag[d]) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
}

std::shared_ptr<const MaskEntry> MaskCache::get(const uint32_t* stk, uint32_t len, uint32_t partial) {
  const uint32_t k = std::min(len, depth_);
  std::vector<uint32_t> key;
  key.reserve(k + 2);
  key.push_back(partial);
  key.push_back(k == len ? 1 : 0);
  key.insert(key.end(), stk + (len - k), stk + len);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  StackSet start;
  start.emit(stk + (len - k), k, nullptr, 0, partial);
  WalkScratch w;
  auto entry = std::make_shared<const MaskEntry>(classify_all(g_, t_, start, k < len, w));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++builds_;
  build_ms_ += ms;
  auto [it, inserted] = map_.emplace(std::move(key), entry);
  if (!inserted) return it->second;
  if (bytes_ + entry->bytes() > kMaxBytes) {
    map_.erase(it);
    return entry;
  }
  bytes_ += entry->bytes();
  return entry;
}

MaskCache::Stats MaskCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {map_.size(), bytes_, builds_, build_ms_};
}

}  // namespace edgelm::grammar::detail
