#include "cache/exact_cache.h"

namespace edgelm::cache {

size_t CacheEntry::bytes() const {
  return key.size() + sem_ns.size() + query.size() + response.size() + finish_reason.size() + embedder.size() +
         vector.size() * sizeof(float) + ErrorBound::kMaxObservations * sizeof(HitObservation) + 128;  // + bookkeeping
}

CacheEntry* ExactCache::find(const std::string& key, double now_s, std::vector<CacheEntry>& removed) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  if (it->second->expires_s > 0 && now_s >= it->second->expires_s) {
    bytes_ -= it->second->bytes();
    removed.push_back(std::move(*it->second));
    lru_.erase(it->second);
    map_.erase(it);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return &*it->second;
}

std::vector<CacheEntry> ExactCache::put(CacheEntry e) {
  std::vector<CacheEntry> evicted;
  if (auto old = erase(e.key)) evicted.push_back(std::move(*old));
  if (max_entries_ == 0 || e.bytes() > max_bytes_) {
    evicted.push_back(std::move(e));
    return evicted;
  }
  while (!lru_.empty() && (map_.size() + 1 > max_entries_ || bytes_ + e.bytes() > max_bytes_)) {
    CacheEntry& last = lru_.back();
    bytes_ -= last.bytes();
    map_.erase(last.key);
    evicted.push_back(std::move(last));
    lru_.pop_back();
  }
  bytes_ += e.bytes();
  lru_.push_front(std::move(e));
  map_[lru_.front().key] = lru_.begin();
  return evicted;
}

std::optional<CacheEntry> ExactCache::erase(const std::string& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  bytes_ -= it->second->bytes();
  CacheEntry e = std::move(*it->second);
  lru_.erase(it->second);
  map_.erase(it);
  return e;
}

CacheEntry* ExactCache::peek(const std::string& key) {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &*it->second;
}

std::vector<CacheEntry> ExactCache::clear() {
  std::vector<CacheEntry> out(std::make_move_iterator(lru_.begin()), std::make_move_iterator(lru_.end()));
  lru_.clear();
  map_.clear();
  bytes_ = 0;
  return out;
}

std::vector<std::string> ExactCache::keys_mru() const {
  std::vector<std::string> out;
  for (const CacheEntry& e : lru_) out.push_back(e.key);
  return out;
}

}  // namespace edgelm::cache
