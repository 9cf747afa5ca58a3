// Small helpers the encoder's steps share (vit.cpp and the projector-specific files such as
// gemma4v.cpp): row loops over the pool, token-chunked matmuls, and scratch growth.
//
// Invariants: header-only and internal to src/vision; none allocates except grow(), which only
// ever enlarges a buffer (a warm encode allocates nothing).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "core/grow.h"
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
// A tail of fewer than kernels::kMinGemmTokens rows joins the chunk before it, so that every
// chunk goes through the same GEMM (a lone row would take the vec_dot path, whose rounding differs).
constexpr int64_t kTokenChunk = 1024;

inline int64_t chunk_rows(int64_t t0, int64_t n) {
  const int64_t rest = n - t0;
  return rest - kTokenChunk < kernels::kMinGemmTokens ? rest : kTokenChunk;
}

inline void matmul_chunked(const kernels::WeightMatrix& w, const float* x, int64_t n, float* out, ThreadPool& pool,
                           kernels::MatmulScratch& mm) {
  for (int64_t t0 = 0, c = 0; t0 < n; t0 += c) {
    c = chunk_rows(t0, n);
    kernels::matmul(w, x + t0 * w.cols, c, out + t0 * w.rows, pool, mm);
  }
}

// matmul_many over the same chunks: parts (at most kernels::kMaxMatmulParts) take the same x [n, cols];
// part p's out [n, p.w->rows].
inline void matmul_many_chunked(std::initializer_list<kernels::MatmulPart> parts, const float* x, int64_t n,
                                ThreadPool& pool, kernels::MatmulScratch& mm) {
  kernels::MatmulPart at[kernels::kMaxMatmulParts];
  const int64_t cols = parts.begin()->w->cols;
  for (int64_t t0 = 0, c = 0; t0 < n; t0 += c) {
    c = chunk_rows(t0, n);
    size_t i = 0;
    for (const kernels::MatmulPart& p : parts) at[i++] = {p.w, p.out + t0 * p.w->rows};
    kernels::matmul_many(std::span(at, i), x + t0 * cols, c, pool, mm);
  }
}

using edgelm::grow;

}  // namespace edgelm::vision::detail
