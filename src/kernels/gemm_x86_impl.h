// Multi-token GEMM (see gemm.h) for x86: the path of prefill and batched decode on every x86
// CPU without AMX. This is the body of three translation units, included once by each:
//  - gemm_avx2.cpp (-mavx2 -mfma -mf16c; EDGELM_GEMM_VNNI 0, EDGELM_GEMM_ZMM 0): int8 products
//    with maddubs, int16 sums widened by madd; kAvx2Gemms, used by the avx2 ISA;
//  - gemm_avxvnni.cpp (the same plus -mavxvnni; VNNI 1, ZMM 0): 256-bit registers as AVX2, the
//    products, sums and widening by the VEX-encoded vpdpbusd; kAvxVnniGemms, used by avxvnni;
//  - gemm_avx512.cpp (AVX-512 flags with VNNI; VNNI 1, ZMM 1): 512-bit registers hold 16
//    rows, vpdpbusd does the product, the sum and the widening in one instruction and never
//    saturates, and 32 registers hold tiles of 8 tokens; kAvx512Gemms, used by avx512 and amx.
// Each includes it inside its own anonymous namespace, so every function here has internal
// linkage and is compiled with that file's flags only (the rules of kernels_x86.h); nothing
// else may include it.
//
// Why not vec_dot per (row, token): a vec_dot of one weight block with one activation block
// ends in a float conversion and a scaled add per (row, token, block), and every token unpacks
// the block again. Here kRows weight rows (8 in a ymm, 16 in a zmm) are interleaved so that
// one 32-bit lane of a register holds 4 consecutive quants of one row: a single maddubs (or
// dpbusd) then multiplies 4 elements of every row with 4 activations of one token (broadcast),
// the products of a whole sub-block are summed before one widening, and one conversion + FMA
// finishes all rows at once. The unpacked rows are reused by every token of the batch.
//
// Method, per run() call and per group of kRows rows:
//  1. repack: the group's rows are unpacked into scratch, per 32-element sub-block, as unsigned
//     bytes (Q8_0 on AVX2: signed) in [8 groups of 4 elements][kRows rows][4 bytes] (32-bit
//     transposes of 8 rows' unpacked bytes at a time), next to the per-row float scales (and
//     int16 sub-block scales and mins for K formats). Weights are read from memory once per
//     matmul.
//  2. tiles of up to kTok tokens: for every sub-block, int16 sums of maddubs products widened
//     with madd by the sub-block scale (VNNI: int32 dpbusd sums times the scale); the formats'
//     offsets (Q4_0: 8, Q5_0: 16, Q6_K: 32, biased Q8_0: 128) are subtracted as offset *
//     sum(activations) in integers, mins added as floats, as the scalar kernels do; every
//     (row, token) integer sum is exact.
// Float types (F32, F16, BF16) interleave kRows rows per 8 columns as floats and FMA against
// broadcast activations.
//
// Bounds (activation quants are in [-127, 127], as every from_float writes them): maddubs
// pairs of q <= 15 are <= 3810, so 8 groups sum to 30480 in int16; q <= 31 flushes every 4
// groups (31496); q <= 63 every 2 (32004); Q8_0 uses |w| . sign(y, w) and widens every group.
// With VNNI every product goes straight into int32 lanes, so Q8_0 is stored biased (w + 128,
// offset 128) like the unsigned formats.
// Results differ from the scalar vec_dot by float reassociation only (tests/kernels/test_gemm.cpp).
//
// The body is in five parts, included here in order: gemm_x86_regs.h (registers),
// gemm_x86_blocks.h (unpacking, activations, the integer dot, legacy formats), gemm_x86_kquants.h
// (K formats), gemm_x86_iqgrid.h (grid IQ formats), and below the float formats and the drivers.
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error "gemm_x86_impl.h is the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif
#pragma once

#include "kernels/gemm_x86_kquants.h"
#include "kernels/gemm_x86_iqgrid.h"

namespace edgelm::kernels::x86 {
namespace {

// ---- Float formats (F32, F16, BF16) -----------------------------------------------------------

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

// The activations (already rounded to the weight's type by matmul) as padded float rows.
template <DType kType>
void pack_float(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  auto* out = reinterpret_cast<float*>(packed);
  const int64_t stride = padded8(cols);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t c = 0; c < stride; c += 8)
      _mm256_storeu_ps(out + t * stride + c, float8<kType>(act + static_cast<size_t>(t) * act_row_bytes, c, cols));
}

// [padded cols / 8][8 columns][kRows rows] floats.
template <DType kType>
void repack_float(const GemmWeights& w, int64_t r0, int n_rows, uint8_t* scratch) {
  const uint8_t* rows[kRows];
  group_rows(w, r0, n_rows, rows);
  uint8_t* out = scratch;
  for (int64_t c = 0; c < w.cols; c += 8, out += 8 * kGroupBytes) {
    for (int h = 0; h < kHalves; ++h) {
      __m256i v[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_castps_si256(float8<kType>(rows[8 * h + i], c, w.cols));
      store_transposed(out, h, v);
    }
  }
}

template <int T>
void tile_float(const float* wb, int64_t cols, const float* const y[T], float* out, int64_t ldo, int n_rows) {
  VF a0[T], a1[T];  // two chains per token hide the FMA latency
  for (int t = 0; t < T; ++t) a0[t] = a1[t] = vf_zero();
  const int64_t n = padded8(cols);
  for (int64_t c = 0; c < n; c += 8, wb += 8 * kRows) {
    for (int k = 0; k < 8; k += 2) {
      const VF w0 = vf_load(wb + kRows * k), w1 = vf_load(wb + kRows * (k + 1));
      for (int t = 0; t < T; ++t) {
        a0[t] = vf_fmadd(w0, vf_set1(y[t][c + k]), a0[t]);
        a1[t] = vf_fmadd(w1, vf_set1(y[t][c + k + 1]), a1[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, vf_add(a0[t], a1[t]), n_rows);
}

// ---- Drivers -----------------------------------------------------------------------------------

size_t legacy_scratch(int64_t cols) { return static_cast<size_t>(cols / kQK) * sizeof(WLegacy); }
size_t k4_scratch(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(WK4); }
size_t k6_scratch(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(WK6); }
size_t float_scratch(int64_t cols) { return static_cast<size_t>(padded8(cols)) * kRows * sizeof(float); }

// Tile<n>::run for the last n < kTok tokens of a group.
template <template <int> class Tile, int T = kTok - 1, typename WB, typename Act>
inline void run_tail(int n, const WB* wb, int64_t n_wb, const Act* const* y, float* out, int64_t ldo, int n_rows) {
  if constexpr (T >= 1) {
    if (n == T)
      Tile<T>::run(wb, n_wb, y, out, ldo, n_rows);
    else
      run_tail<Tile, T - 1>(n, wb, n_wb, y, out, ldo, n_rows);
  }
}

// All token tiles of one group of rows: out[t * ldo + i] for its rows i < n_rows.
template <template <int> class Tile, typename WB, typename Act>
void run_tiles(const WB* wb, int64_t n_wb, const Act* act, int64_t n_act, int64_t n_tok, float* out, int64_t ldo,
               int n_rows) {
  int64_t t = 0;
  for (; t + kTok <= n_tok; t += kTok) {
    const Act* y[kTok];
    for (int j = 0; j < kTok; ++j) y[j] = act + (t + j) * n_act;
    Tile<kTok>::run(wb, n_wb, y, out + t * ldo, ldo, n_rows);
  }
  if (t < n_tok) {
    const Act* y[kTok];
    for (int j = 0; t + j < n_tok; ++j) y[j] = act + (t + j) * n_act;
    run_tail<Tile>(static_cast<int>(n_tok - t), wb, n_wb, y, out + t * ldo, ldo, n_rows);
  }
}

// Repack each group of kRows rows of [r0, r1), then run its token tiles. n_act: packed
// activation elements per token; n_wb: what the tile function iterates over (blocks, columns).
template <typename Act, typename WB, void (*Repack)(const GemmWeights&, int64_t, int, uint8_t*),
          template <int> class Tile>
void run_groups(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch, int64_t n_act, int64_t n_wb) {
  const auto* act = reinterpret_cast<const Act*>(packed);
  const auto* wb = reinterpret_cast<const WB*>(scratch);
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const int n_rows = static_cast<int>(min64(kRows, r1 - g0));
    Repack(w, g0, n_rows, scratch);
    run_tiles<Tile>(wb, n_wb, act, n_act, n_tok, out + g0, ldo, n_rows);
  }
}

template <int kFlush, bool kMin>
struct LegacyTile {
  template <int T>
  struct Of {
    static void run(const WLegacy* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
      tile_legacy<T, kFlush, kMin>(wb, nb, y, out, ldo, n_rows);
    }
  };
};

template <int kFlush>
struct K4Tile {
  template <int T>
  struct Of {
    static void run(const WK4* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
      tile_k4<T, kFlush>(wb, nb, y, out, ldo, n_rows);
    }
  };
};

template <int T>
struct K6Tile {
  static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_q6_k<T, 2>(wb, nb, y, out, ldo, n_rows);
  }
};

// Q3_K: zero point 4; Q2_K: mins. Both flush the int16 sums every 4 groups (the split
// multipliers change there); pairs stay far below int16's range (2 * 7 * 127).
template <int T>
struct K3Tile {
  static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_k16<T, 4, 2>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct K2Tile {
  static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_k16<T, 4, 0, true>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct IQ4XSTile {
  static void run(const WK4* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_iq4_xs<T>(wb, nb, y, out, ldo, n_rows);
  }
};

template <int T>
struct FloatTile {
  static void run(const float* wb, int64_t cols, const float* const* y, float* out, int64_t ldo, int n_rows) {
    tile_float<T>(wb, cols, y, out, ldo, n_rows);
  }
};

template <typename BX, __m256i (*Quants)(const BX&), int kFlush, bool kMin>
void run_legacy(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK;
  run_groups<ActQ8, WLegacy, repack_legacy<BX, Quants, kMin>, LegacyTile<kFlush, kMin>::template Of>(
      w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

template <bool kFive, typename Block>
void run_k4(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
            int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  run_groups<ActQ8K, WK4, repack_k4<kFive, Block>, K4Tile<kFive ? 4 : 8>::template Of>(w, packed, n_tok, r0, r1, out,
                                                                                       ldo, scratch, nb, nb);
}

void run_q6_k(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
              int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  run_groups<ActQ8K, WK6, repack_q6_k, K6Tile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

template <bool kThree, typename Block>
void run_k2(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
            int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  if constexpr (kThree)
    run_groups<ActQ8K, WK6, repack_k2<true, Block>, K3Tile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
  else
    run_groups<ActQ8K, WK6, repack_k2<false, Block>, K2Tile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

void run_iq4_xs(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  run_groups<ActQ8K, WK4, repack_iq4_xs, IQ4XSTile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

// The grid IQ formats (gemm_x86_iqgrid.h): zero point 16 (|q| <= 15) or 64 (|q| <= 62).
template <typename Format, bool kSmall>
void run_iq_grid(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                 int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  constexpr int kShift = kSmall ? 4 : 6, kFlush = kSmall ? 4 : 1;
  run_groups<ActQ8K, WK6, repack_iq_grid<Format, kShift>, IqGridTile<kShift, kFlush>::template Of>(
      w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
}

template <DType kType>
void run_float(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
               int64_t ldo, uint8_t* scratch) {
  run_groups<float, float, repack_float<kType>, FloatTile>(w, packed, n_tok, r0, r1, out, ldo, scratch,
                                                           padded8(w.cols), w.cols);
}

}  // namespace
}  // namespace edgelm::kernels::x86
