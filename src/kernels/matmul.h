// Matrix multiplication of stored weights (any type of the traits table) with float
// activations: out[t, r] = sum_i W[r, i] * x[t, i].
//
// The activations are converted once per call to the type the weight's vec_dot pairs with
// (e.g. Q8_0 for Q4_0 weights, Q8_K for K-quants, F32 for F32), then every weight row is read
// once and dotted with all n_tok activation rows while it is in cache: a decode step (n_tok 1)
// streams the weights exactly once, a prefill of n tokens reuses each row n times.
// Rows are split evenly over the thread pool.
//
// With n_tok >= kMinGemmTokens and a tile GEMM for the weight type in the active ISA (gemm.h:
// AMX on CPUs that have it), the same product runs through that kernel instead; its results
// differ from the vec_dot path by float reassociation only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace edgelm::kernels {

// A weight matrix as stored: `rows` rows of `cols` elements of `type` ([rows, cols]),
// row r starting at data + r * row_bytes.
struct WeightMatrix {
  DType type = DType::f32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;

  explicit operator bool() const { return data != nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  size_t n_bytes() const { return static_cast<size_t>(rows) * row_bytes; }
};

// True when matmul supports weights of `type`.
bool can_matmul(DType type);

// Reusable buffers of one caller (not thread-safe; one per forward pass).
struct MatmulScratch {
  std::vector<uint8_t> activations;  // [n_tok, row_bytes(vec_dot_type, cols)]
  std::vector<uint8_t> packed;       // the activations in a GemmKernel's tile layout
};

// Smallest batch that goes through a multi-token GEMM when one exists (a single token streams
// each weight row once through vec_dot, which is what decode wants).
constexpr int64_t kMinGemmTokens = 2;

// out: [n_tok, w.rows] (row stride w.rows); x: [n_tok, w.cols].
void matmul(const WeightMatrix& w, const float* x, int64_t n_tok, float* out, ThreadPool& pool, MatmulScratch& scratch);
// The same with the kernels of `k` instead of the active ISA's (tests compare ISAs with it).
void matmul_with(const IsaKernels& k, const WeightMatrix& w, const float* x, int64_t n_tok, float* out,
                 ThreadPool& pool, MatmulScratch& scratch);

// Row r of w as floats ([w.cols]), e.g. an embedding lookup.
void get_row(const WeightMatrix& w, int64_t r, float* out);

}  // namespace edgelm::kernels
