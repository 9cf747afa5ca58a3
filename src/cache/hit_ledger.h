// HitLedger: which cached entry each recent cache-hit answer came from, so feedback on an answer
// (POST /v1/cache/feedback with its response id) reaches the entry and the similarity it was
// served at.
//
// Invariants: at most `capacity` records, the oldest dropped first (a bounded FIFO: feedback is
// for recent answers); ids are the server's response ids (unique across restarts, so an id from
// before a restart is unknown, never another answer's); a record names the namespace of the
// request that got the answer, and take() hands it only to a caller of that namespace. Not
// thread-safe: ResponseCache serializes.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

namespace edgelm::cache {

struct HitRecord {
  std::string ns;       // the request's namespace (ResponseCache: CacheRequest::ns)
  std::string key;      // the entry's exact key
  uint64_t serial = 0;  // the entry's insert serial (a replaced entry is another entry)
  float similarity = 1;
  bool exact = false;  // an exact-level hit
};

class HitLedger {
 public:
  explicit HitLedger(size_t capacity) : capacity_(capacity) {}
  void add(const std::string& id, HitRecord r);
  // The record of `id` if it exists in namespace `ns`; the same answer may be judged again (the
  // latest judgement is what counts, ResponseCache replaces the observation).
  std::optional<HitRecord> find(const std::string& id, const std::string& ns) const;
  size_t size() const { return map_.size(); }
  size_t capacity() const { return capacity_; }
  void clear();

 private:
  size_t capacity_;
  std::unordered_map<std::string, HitRecord> map_;
  std::deque<std::string> order_;  // oldest first
};

}  // namespace edgelm::cache
