// SemanticIndex: approximate nearest neighbours over unit vectors (hnswlib HNSW, inner-product
// space: distance = 1 - dot, so similarity = cosine for unit vectors).
//
// Invariants: every vector has dim() floats; labels are small integers handed out by add() and
// reused after remove() (hnswlib 0.6 has no replace_deleted: a removed label is markDelete'd and
// its slot is overwritten in place by the next add, so the graph never grows beyond the most
// vectors ever live at once); search() never returns a removed label. The capacity grows by
// doubling (resizeIndex). Not thread-safe: the owner (ResponseCache) serializes calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/result.h"

namespace edgelm::cache {

class SemanticIndex {
 public:
  explicit SemanticIndex(int dim, size_t initial_capacity = 16);
  ~SemanticIndex();
  SemanticIndex(const SemanticIndex&) = delete;
  SemanticIndex& operator=(const SemanticIndex&) = delete;

  int dim() const { return dim_; }
  size_t size() const { return live_; }

  // Errors: wrong length; hnswlib failures (allocation).
  Result<uint64_t> add(std::span<const float> v);
  void remove(uint64_t label);
  // Up to k live (label, similarity) pairs, most similar first. A wrong-length query: none.
  std::vector<std::pair<uint64_t, float>> search(std::span<const float> q, size_t k) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int dim_;
  size_t live_ = 0;
};

float dot(std::span<const float> a, std::span<const float> b);

}  // namespace edgelm::cache
