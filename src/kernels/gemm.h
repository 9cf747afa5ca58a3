// Tiled matrix x matrix kernels for prefill and batched decode.
//
// Job: compute out[t, r] = W[r, :] . x[t, :] for many tokens at once with the CPU's matrix
// engine, where one weight row per vec_dot call would leave it idle. matmul() (matmul.h) picks a
// GemmKernel when the active ISA has one for the weight type and the batch is large enough;
// otherwise it runs vec_dot per (row, token).
//
// Data flow of one matmul through a GemmKernel:
//   1. matmul quantizes the activations to the weight's vec_dot_type with the ISA's quantizer
//      (byte-identical to the scalar one): [n_tok] rows of Q8_0 or Q8_K.
//   2. pack() rearranges those rows into the kernel's tile layout (once per matmul).
//   3. run() is called in parallel on disjoint row ranges; each call unpacks 16 weight rows at
//      a time into signed 8-bit tiles plus float scales (in a caller-provided scratch buffer)
//      and multiplies them with every token tile.
//
// Invariants:
//  - The integer part of every sub-block dot product is exact (8-bit x 8-bit into int32, no
//    saturation), as in vec_dot; results differ from the scalar vec_dot only by float
//    reassociation of the per-sub-block scaling and summation. tests/kernels/test_gemm.cpp
//    checks every kernel against the scalar reference within the per-type error budget.
//  - This header is baseline code; the kernels live in files compiled with extra instruction
//    flags and are reached only through isa_kernels() after the CPU (and OS) check, so the
//    structs here carry no inline code of their own (see kernels_x86.h for the linkage rules).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace edgelm::kernels {

// A weight matrix as the GEMM kernels see it: `rows` rows of `cols` elements, row r at
// data + r * row_bytes.
struct GemmWeights {
  const uint8_t* data;
  size_t row_bytes;
  int64_t rows;
  int64_t cols;
};

struct GemmKernel {
  DType type;  // the weight type; activations arrive in quant_traits(type)->vec_dot_type
  // Bytes of the packed activations of n_tok tokens of `cols` elements.
  size_t (*packed_bytes)(int64_t cols, int64_t n_tok);
  // act: [n_tok] rows of act_row_bytes each (the quantized activations) -> packed.
  void (*pack)(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed);
  // Bytes of scratch one run() call needs for rows of `cols` elements.
  size_t (*scratch_bytes)(int64_t cols);
  // out[t * ldo + r] for t < n_tok and r in [r0, r1); any row range is allowed, but ranges
  // that start on a multiple of kGemmRowTile waste no work.
  void (*run)(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
              int64_t ldo, uint8_t* scratch);

  // Load-time packing (all null / 0 where the kernel has none): the weights rearranged once
  // into the kernel's interleaved layout (about the stored size), so that every matmul, one
  // token included, streams them once without unpacking per call.
  int64_t packed_row_group = 0;  // rows per interleaved group; pack and run ranges start on one
  // Bytes of the packed form of a [rows, cols] matrix.
  size_t (*packed_weight_bytes)(int64_t rows, int64_t cols) = nullptr;
  // Packs rows [r0, r1) of w into dst (the whole packed matrix); r0 a multiple of packed_row_group.
  void (*pack_weights)(const GemmWeights& w, int64_t r0, int64_t r1, uint8_t* dst) = nullptr;
  // As run(), from the packed matrix pw of a [rows, cols] matrix; r0 a multiple of packed_row_group.
  // scratch: scratch_bytes(cols) bytes when n_tok >= packed_unpack_tokens > 0, else unused (may
  // be null).
  void (*run_packed)(const uint8_t* pw, int64_t rows, int64_t cols, const uint8_t* packed, int64_t n_tok, int64_t r0,
                     int64_t r1, float* out, int64_t ldo, uint8_t* scratch) = nullptr;
  // From this many tokens on (0: never), run_packed unpacks each group of packed rows into
  // scratch once and runs the per-call tiles over it: where the packed layout keeps bits that
  // take several instructions to extract (Q4_K, Q5_K, Q6_K), the packed tiles would redo that for
  // every tile of tokens, which a long prefill pays many times over.
  int64_t packed_unpack_tokens = 0;
};

// Weight rows processed together by run(); parallel splits should be multiples of it (and it is
// a multiple of every packed_row_group).
constexpr int64_t kGemmRowTile = 16;

}  // namespace edgelm::kernels
