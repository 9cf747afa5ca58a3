// Part of gemm_x86_impl.h (read its comment first): the float formats (F32, F16, BF16).
//
// Weights are converted to float per group of kFloatRows = 2 kRows rows (16 on AVX2, 32 with
// zmm) and interleaved per column: [padded cols / 8][8 columns][kFloatRows rows] floats, so one
// column of the group is two aligned vector loads. A tile of kFloatTok tokens keeps
// 2 x kFloatTok accumulators (one per register half and token: 12 on AVX2, 24 with zmm) and per
// column does 2 weight loads, kFloatTok broadcasts of the tokens' activations and 2 kFloatTok
// FMAs. That is 2 + kFloatTok loads per 2 kFloatTok FMAs: with two 256-bit loads and two FMAs per
// cycle (Zen 3), the FMAs, not the loads, bound the tile, where the earlier one-register tile
// (kRows rows x 4 tokens: 5 loads per 4 FMAs) was bound by its loads. Each accumulator gets one
// FMA every kFloatTok cycles or so, above the FMA latency, so a single chain per (row, token) is
// enough: the sum over the columns runs in column order (results differ from the scalar dot by
// reassociation only, tests/kernels/test_gemm.cpp).
// Activations arrive rounded to the weight's type by matmul (as the reference engine rounds them
// for F16 weights) and are stored as padded float rows.
#pragma once

#include "kernels/gemm_x86_regs.h"

namespace edgelm::kernels::x86 {
namespace {

constexpr int kFloatRows = 2 * kRows;
constexpr int kFloatTok = EDGELM_GEMM_ZMM ? 12 : 6;

// Columns are padded to a multiple of 8 with zeros on both sides.
inline int64_t padded8(int64_t cols) { return (cols + 7) / 8 * 8; }

inline __m256 bf16x8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}

// Columns [c, c + 8) of a float-type row as floats (zeros past `cols`).
template <DType kType>
inline __m256 float8(const void* row, int64_t c, int64_t cols) {
  if (c + 8 <= cols) {
    if constexpr (kType == DType::f32) return _mm256_loadu_ps(static_cast<const float*>(row) + c);
    if constexpr (kType == DType::f16) return _mm256_cvtph_ps(load128(static_cast<const uint16_t*>(row) + c));
    if constexpr (kType == DType::bf16) return bf16x8(static_cast<const uint16_t*>(row) + c);
  }
  alignas(32) float tmp[8] = {};
  for (int64_t j = c; j < cols; ++j) {
    if constexpr (kType == DType::f32) tmp[j - c] = static_cast<const float*>(row)[j];
    if constexpr (kType == DType::f16) tmp[j - c] = half(static_cast<const uint16_t*>(row)[j]);
    if constexpr (kType == DType::bf16) {
      const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(row)[j]) << 16;
      std::memcpy(&tmp[j - c], &bits, 4);
    }
  }
  return _mm256_load_ps(tmp);
}

template <DType kType>
size_t float_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(n_tok * padded8(cols)) * sizeof(float);
}

// The activations as padded float rows.
template <DType kType>
void pack_float(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  auto* out = reinterpret_cast<float*>(packed);
  const int64_t stride = padded8(cols);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t c = 0; c < stride; c += 8)
      _mm256_storeu_ps(out + t * stride + c, float8<kType>(act + static_cast<size_t>(t) * act_row_bytes, c, cols));
}

size_t float_scratch(int64_t cols) { return static_cast<size_t>(padded8(cols)) * kFloatRows * sizeof(float); }

// Rows [r0, r0 + n_rows) (n_rows <= kFloatRows; missing rows repeat the last one and are never
// stored) as [padded cols / 8][8 columns][kFloatRows rows] floats.
template <DType kType>
void repack_float(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const uint8_t* rows[kFloatRows];
  for (int i = 0; i < kFloatRows; ++i)
    rows[i] = w.data + static_cast<size_t>(r0 + (i < n_rows ? i : n_rows - 1)) * w.row_bytes;
  auto* out = reinterpret_cast<float*>(scratch);
  for (int64_t c = 0; c < w.cols; c += 8, out += 8 * kFloatRows) {
    for (int h = 0; h < kFloatRows / 8; ++h) {
      __m256i v[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_castps_si256(float8<kType>(rows[8 * h + i], c, w.cols));
      transpose8(v);  // v[g] = column c + g of rows 8h .. 8h + 7
      for (int g = 0; g < 8; ++g) store256(out + g * kFloatRows + 8 * h, v[g]);
    }
  }
}

// out[t * ldo + i] for the T tokens y[t] and the group's rows i < n_rows.
template <int T>
void tile_float(const float* wb, int64_t cols, const float* const* y, float* out, int64_t ldo, int n_rows) {
  VF lo[T], hi[T];
  for (int t = 0; t < T; ++t) lo[t] = hi[t] = vf_zero();
  const int64_t n = padded8(cols);
  for (int64_t c = 0; c < n; ++c, wb += kFloatRows) {
    const VF w0 = vf_load(wb), w1 = vf_load(wb + kRows);
    for (int t = 0; t < T; ++t) {
      const VF b = vf_set1(y[t][c]);
      lo[t] = vf_fmadd(w0, b, lo[t]);
      hi[t] = vf_fmadd(w1, b, hi[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    vf_store_rows(out + t * ldo, lo[t], n_rows < kRows ? n_rows : kRows);
    if (n_rows > kRows) vf_store_rows(out + t * ldo + kRows, hi[t], n_rows - kRows);
  }
}

template <int T = kFloatTok - 1>
inline void float_tail(int n, const float* wb, int64_t cols, const float* const* y, float* out, int64_t ldo,
                       int n_rows) {
  if constexpr (T >= 1) {
    if (n == T)
      tile_float<T>(wb, cols, y, out, ldo, n_rows);
    else
      float_tail<T - 1>(n, wb, cols, y, out, ldo, n_rows);
  }
}

template <DType kType>
void run_float(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
               int64_t ldo, uint8_t* scratch) {
  const auto* act = reinterpret_cast<const float*>(packed);
  const auto* wb = reinterpret_cast<const float*>(scratch);
  const int64_t stride = padded8(w.cols);
  for (int64_t g0 = r0; g0 < r1; g0 += kFloatRows) {
    const int n_rows = static_cast<int>(min64(kFloatRows, r1 - g0));
    repack_float<kType>(w, g0, n_rows, scratch);
    const float* y[kFloatTok];
    int64_t t = 0;
    for (; t + kFloatTok <= n_tok; t += kFloatTok) {
      for (int j = 0; j < kFloatTok; ++j) y[j] = act + (t + j) * stride;
      tile_float<kFloatTok>(wb, w.cols, y, out + t * ldo + g0, ldo, n_rows);
    }
    if (t < n_tok) {
      for (int j = 0; t + j < n_tok; ++j) y[j] = act + (t + j) * stride;
      float_tail(static_cast<int>(n_tok - t), wb, w.cols, y, out + t * ldo + g0, ldo, n_rows);
    }
  }
}

}  // namespace
}  // namespace edgelm::kernels::x86
