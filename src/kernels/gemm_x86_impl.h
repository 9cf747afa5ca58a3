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
// Float types (F32, F16, BF16) interleave 2 kRows rows per column as floats and FMA against
// broadcast activations (gemm_x86_float.h).
//
// Bounds (activation quants are in [-127, 127], as every from_float writes them): maddubs
// pairs of q <= 15 are <= 3810, so 8 groups sum to 30480 in int16; q <= 31 flushes every 4
// groups (31496); q <= 63 every 2 (32004); Q8_0 uses |w| . sign(y, w) and widens every group.
// With VNNI every product goes straight into int32 lanes, so Q8_0 is stored biased (w + 128,
// offset 128) like the unsigned formats.
// Results differ from the scalar vec_dot by float reassociation only (tests/kernels/test_gemm.cpp).
//
// The body is in six parts, included here in order: gemm_x86_regs.h (registers),
// gemm_x86_float.h (the float formats), gemm_x86_blocks.h (unpacking, activations, the integer
// dot, legacy formats), gemm_x86_kquants.h (K formats), gemm_x86_iqgrid.h (grid IQ formats), and
// below the drivers.
#if !defined(EDGELM_GEMM_VNNI) || !defined(EDGELM_GEMM_ZMM) || !defined(EDGELM_GEMM_TABLE)
#error "gemm_x86_impl.h is the body of gemm_avx2.cpp, gemm_avxvnni.cpp and gemm_avx512.cpp only"
#endif
#pragma once

#include <algorithm>

#include "kernels/gemm_x86_float.h"
#include "kernels/gemm_x86_kquants.h"
#include "kernels/gemm_x86_iqgrid.h"

namespace edgelm::kernels::x86 {
namespace {

// ---- Drivers -----------------------------------------------------------------------------------

size_t legacy_scratch(int64_t cols) { return static_cast<size_t>(cols / kQK) * sizeof(WLegacy); }
// (Q4_K and Q5_K on the AMX tiles extract a super-block of kRows rows into two copies of its
// quants, 2 * kQK_K * kRows bytes: gemm_x86_amx.h's split multipliers.)
size_t k4_scratch(int64_t cols) {
  return static_cast<size_t>(cols / kQK_K) * std::max(sizeof(WK4), size_t{2} * kQK_K * kRows);
}
// (Q6_K on the AMX tiles: three copies, gemm_x86_amx.h's amx_q6_k.)
size_t k6_scratch(int64_t cols) {
  return static_cast<size_t>(cols / kQK_K) * std::max(sizeof(WK6), size_t{3} * kQK_K * kRows);
}

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
// TQ2_0: q in [0, 2], zero point 1, no sub-block scales (tile_tq2_0).
template <int T>
struct KT2Tile {
  static void run(const WK6* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_tq2_0<T>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct IQ4XSTile {
  static void run(const WK4* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_iq4_xs<T>(wb, nb, y, out, ldo, n_rows);
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
  if constexpr (std::is_same_v<Block, BlockTQ2_0>)
    run_groups<ActQ8K, WK6, repack_k2<true, Block>, KT2Tile>(w, packed, n_tok, r0, r1, out, ldo, scratch, nb, nb);
  else if constexpr (kThree)
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

}  // namespace
}  // namespace edgelm::kernels::x86
