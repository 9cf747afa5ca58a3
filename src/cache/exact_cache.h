// ExactCache: the cached answers, keyed by their exact key (normalize_key.h), in LRU order,
// bounded by entry count and by bytes, with an optional expiry per entry.
//
// Invariants: size() <= max_entries and bytes() <= max_bytes after every put() (the least
// recently used entries go first; an entry larger than max_bytes alone is refused and returned
// as evicted); find() moves a hit to the front; an expired entry is never returned (find()
// removes it and reports it). Every removal is reported to the caller, which keeps its own
// side structures (vectors, the SQLite file) in step. Not thread-safe: ResponseCache serializes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/error_bound.h"
#include "cache/guards.h"

namespace edgelm::cache {

struct CacheEntry {
  std::string key;        // exact key
  std::string sem_ns;     // semantic namespace (namespace + model + params + context)
  std::string query;      // the query text the semantic level and the guards compare
  std::string response;   // the answer text
  std::string finish_reason;  // "stop" or "length"
  int32_t prompt_tokens = 0, completion_tokens = 0;
  double created_s = 0;   // wall clock, seconds since the epoch
  double expires_s = 0;   // 0: never
  std::vector<float> vector;  // the query's embedding (empty: exact level only)
  std::string embedder;       // name of the embedder that made `vector`
  GuardFeatures guards;       // of `query`
  int64_t label = -1;         // slot in the semantic index of sem_ns; -1: none
  uint64_t serial = 0;        // insert number (a replaced entry is a new entry); not persisted
  std::vector<HitObservation> observations;  // feedback on its semantic hits, oldest first (persisted)

  size_t bytes() const;
};

class ExactCache {
 public:
  ExactCache(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The live entry for key (moved to the front), or null. Expired entries met are removed and
  // appended to `removed`. The pointer is valid until the next mutation.
  CacheEntry* find(const std::string& key, double now_s, std::vector<CacheEntry>& removed);
  // Inserts or replaces; returns what was evicted (or `e` itself when it can never fit).
  std::vector<CacheEntry> put(CacheEntry e);
  std::optional<CacheEntry> erase(const std::string& key);
  // The entry without touching its recency or expiry (feedback), or null.
  CacheEntry* peek(const std::string& key);
  std::vector<CacheEntry> clear();

  size_t size() const { return map_.size(); }
  size_t bytes() const { return bytes_; }
  // Keys from most to least recently used (tests, stats).
  std::vector<std::string> keys_mru() const;

 private:
  using List = std::list<CacheEntry>;
  size_t max_entries_, max_bytes_;
  size_t bytes_ = 0;
  List lru_;  // front: most recent
  std::unordered_map<std::string, List::iterator> map_;
};

}  // namespace edgelm::cache
