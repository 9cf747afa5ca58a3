// Matrix multiplication of stored weights (any type of the traits table) with float
// activations: out[t, r] = sum_i W[r, i] * x[t, i].
//
// The activations are converted once per call to the type the weight's vec_dot pairs with
// (e.g. Q8_0 for Q4_0 weights, Q8_K for K-quants, F32 for F32), then every weight row is read
// once and dotted with all n_tok activation rows while it is in cache: a decode step (n_tok 1)
// streams the weights exactly once, a prefill of n tokens reuses each row n times.
// Rows are split evenly over the thread pool.
//
// With n_tok >= kMinGemmTokens and a multi-token GEMM for the weight type in the ISA (gemm.h:
// AVX2, AVX-512 VNNI, AMX tiles, NEON), the same product runs through that kernel instead; with a
// matrix packed at load for that kernel (pack_matrix_into), every n_tok does. Their results differ
// from the vec_dot path by float reassociation only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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
  // The same matrix packed at load for a GEMM kernel's interleaved layout (pack_matrix_into), or
  // null. matmul uses it whenever the ISA it runs with has that kernel for the type; `data`
  // stays the oracle's view (and every other ISA's).
  const uint8_t* packed = nullptr;
  const GemmKernel* packed_kernel = nullptr;
  // The caller accepts products within 2^-15 of FP32 (IsaKernels::relaxed_gemms) for speed: the
  // vision encoder's attention scores and weighted values, where the ISA has such a GEMM.
  bool relaxed = false;

  explicit operator bool() const { return data != nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  size_t n_bytes() const { return static_cast<size_t>(rows) * row_bytes; }
};

// True when matmul supports weights of `type`.
bool can_matmul(DType type);

// Reusable buffers of one caller (not thread-safe; one per forward pass).
struct MatmulScratch {
  std::vector<uint8_t> activations;  // at least [n_tok, row_bytes(vec_dot_type, cols)] (core/grow.h)
  std::vector<uint8_t> packed;       // the activations in a GemmKernel's tile layout
  // Per pool thread (ThreadPool::thread_index()): a GemmKernel's tile scratch. Grown by the
  // calling thread before the loop, so a warm step allocates nothing whichever thread runs
  // which tiles.
  std::vector<std::vector<uint8_t>> tile;
};

// Smallest batch that goes through a multi-token GEMM when one exists (a single token streams
// each weight row once through vec_dot, which is what decode wants).
constexpr int64_t kMinGemmTokens = 2;

// out: [n_tok, w.rows] (row stride w.rows); x: [n_tok, w.cols].
void matmul(const WeightMatrix& w, const float* x, int64_t n_tok, float* out, ThreadPool& pool, MatmulScratch& scratch);
// The same with the kernels of `k` instead of the active ISA's (tests compare ISAs with it).
void matmul_with(const IsaKernels& k, const WeightMatrix& w, const float* x, int64_t n_tok, float* out,
                 ThreadPool& pool, MatmulScratch& scratch);

// One matrix of matmul_many: out [n_tok, w->rows] = x W^T.
struct MatmulPart {
  const WeightMatrix* w;
  float* out;
};
// Most parts one matmul_many call takes.
constexpr size_t kMaxMatmulParts = 8;
// The products of up to kMaxMatmulParts matrices with the same input x [n_tok, cols] (one layer's Q, K and V;
// gate and up): consecutive parts whose weights take the same activations (width, quantized
// type, GEMM tile layout) share one conversion of x and run as one parallel loop over all their
// row tiles, so a decode step pays one dispatch instead of one per matrix and the small K and V
// matrices do not each split over the threads alone. Every output equals matmul's for its part.
void matmul_many(std::span<const MatmulPart> parts, const float* x, int64_t n_tok, ThreadPool& pool,
                 MatmulScratch& scratch);
void matmul_many_with(const IsaKernels& k, std::span<const MatmulPart> parts, const float* x, int64_t n_tok,
                      ThreadPool& pool, MatmulScratch& scratch);

// A weight matrix packed for a GEMM kernel (see GemmKernel::pack_weights); empty (data null)
// when the kernel has no packed layout for the type.
struct PackedMatrix {
  std::unique_ptr<uint8_t[]> data;
  size_t n_bytes = 0;
  const GemmKernel* kernel = nullptr;
};

// Packing for the active ISA's GEMM of w.type into memory the caller owns (the model packs all
// its matrices into one huge-page arena; rows split over `pool`): packed_matrix_bytes is 0 where
// the active ISA has no packed form for w.type; pack_matrix_into writes that many bytes at dst
// (64-byte aligned) and points w.packed and w.packed_kernel at them. It packs in slabs of rows
// (about kPackSlabBytes of the stored matrix each) and calls on_slab(r0, r1) after each, so that
// the caller can hand a slab's source pages back before the next is read.
constexpr size_t kPackSlabBytes = size_t{8} << 20;
size_t packed_matrix_bytes(const WeightMatrix& w);
void pack_matrix_into(WeightMatrix& w, uint8_t* dst, ThreadPool& pool,
                      const std::function<void(int64_t r0, int64_t r1)>& on_slab = {});
// w packed for the GEMM of `k`, in memory of its own (tests pack for each ISA); set w.packed and
// w.packed_kernel from the result to have matmul use it.
PackedMatrix pack_matrix_with(const IsaKernels& k, const WeightMatrix& w, ThreadPool& pool);

// Row r of w as floats ([w.cols]), e.g. an embedding lookup.
void get_row(const WeightMatrix& w, int64_t r, float* out);

}  // namespace edgelm::kernels
