// Small helpers the encoder's steps share (vit.cpp and the projector-specific files such as
// gemma4v.cpp): row loops over the pool, token-chunked matmuls, and scratch growth.
//
// Invariants: header-only and internal to src/vision; none allocates except grow(), which only
// ever enlarges a buffer (a warm encode allocates nothing).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace edgelm::vision::detail {

// Calls fn(t) for every t < n over the pool (rows of an element-wise step).
template <typename Fn>
void for_rows(ThreadPool& pool, int64_t n, Fn&& fn) {
  pool.parallel_for(static_cast<size_t>(n), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) fn(static_cast<int64_t>(t));
  });
}

// matmul over row chunks of kTokenChunk: the kernels' copies of the activations (converted to
// the weight's type, then packed into tiles) stay those of one chunk, not of all 4096 patches
// (Gemma 3's FFN: 35 + 70 MB at once), at the cost of reading each weight n / kTokenChunk times.
constexpr int64_t kTokenChunk = 1024;

inline void matmul_chunked(const kernels::WeightMatrix& w, const float* x, int64_t n, float* out, ThreadPool& pool,
                           kernels::MatmulScratch& mm) {
  for (int64_t t0 = 0; t0 < n; t0 += kTokenChunk)
    kernels::matmul(w, x + t0 * w.cols, std::min(kTokenChunk, n - t0), out + t0 * w.rows, pool, mm);
}

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace edgelm::vision::detail
