#include "cache/semantic_index.h"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <exception>

namespace edgelm::cache {

struct SemanticIndex::Impl {
  explicit Impl(int dim, size_t cap) : space(static_cast<size_t>(dim)), hnsw(&space, cap, 16, 100) { hnsw.setEf(64); }
  hnswlib::InnerProductSpace space;
  hnswlib::HierarchicalNSW<float> hnsw;
  std::vector<uint64_t> free_labels;  // markDelete'd, to be overwritten
  uint64_t next_label = 0;
};

SemanticIndex::SemanticIndex(int dim, size_t initial_capacity)
    : impl_(std::make_unique<Impl>(dim, std::max<size_t>(initial_capacity, 1))), dim_(dim) {}

SemanticIndex::~SemanticIndex() = default;

Result<uint64_t> SemanticIndex::add(std::span<const float> v) {
  if (v.size() != static_cast<size_t>(dim_))
    return make_error("embedding has {} dimensions, the index {}", v.size(), dim_);
  try {
    uint64_t label;
    if (!impl_->free_labels.empty()) {
      label = impl_->free_labels.back();
      impl_->free_labels.pop_back();
    } else {
      if (impl_->hnsw.cur_element_count >= impl_->hnsw.max_elements_)
        impl_->hnsw.resizeIndex(impl_->hnsw.max_elements_ * 2);
      label = impl_->next_label++;
    }
    impl_->hnsw.addPoint(v.data(), label);  // an existing (deleted) label is updated and undeleted
    ++live_;
    return label;
  } catch (const std::exception& e) {
    return make_error("semantic index: {}", e.what());
  }
}

void SemanticIndex::remove(uint64_t label) {
  try {
    impl_->hnsw.markDelete(label);
    impl_->free_labels.push_back(label);
    --live_;
  } catch (const std::exception&) {
    // Unknown or already deleted label: nothing to remove.
  }
}

std::vector<std::pair<uint64_t, float>> SemanticIndex::search(std::span<const float> q, size_t k) const {
  std::vector<std::pair<uint64_t, float>> out;
  if (q.size() != static_cast<size_t>(dim_) || live_ == 0 || k == 0) return out;
  try {
    auto pq = impl_->hnsw.searchKnn(q.data(), std::min(k, live_));
    while (!pq.empty()) {
      out.emplace_back(pq.top().second, 1.0f - pq.top().first);
      pq.pop();
    }
  } catch (const std::exception&) {
    return {};
  }
  std::reverse(out.begin(), out.end());  // the queue pops the farthest first
  return out;
}

float dot(std::span<const float> a, std::span<const float> b) {
  const size_t n = std::min(a.size(), b.size());
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}

}  // namespace edgelm::cache
