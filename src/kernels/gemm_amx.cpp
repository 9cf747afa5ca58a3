// AMX-INT8 tile GEMM (see gemm.h) for Q8_0, Q4_0 (activations Q8_0) and Q4_K, Q6_K
// (activations Q8_K).
//
// Compiled with -mamx-tile -mamx-int8 and AVX-512 flags (this file only) and reached only
// through isa_kernels(Isa::amx), after the CPU check and the OS grant of the tile state; the
// linkage rules of kernels_x86.h apply (anonymous namespace, intrinsics, no external inline
// code).
//
// Method. Weights and activations are cut into sub-blocks of KS elements (32; 16 for Q6_K,
// whose scales cover 16 elements), the span over which both sides have one scale each:
//   dot(W[r], x[t]) = sum_s wscale[s][r] * ascale[s][t] * isum[s][r][t]
//                     - sum_s wmin[s][r] * amin[s][t]                      (Q4_K only)
// where isum is the exact int8 x int8 dot product of the sub-block. One TDPBSSD computes isum
// for a tile of 16 weight rows x 16 tokens; the epilogue converts it to float and accumulates
// it with the two scales into 16 zmm registers (one per weight row, one lane per token).
//  - Weights are unpacked per 16-row tile into signed int8 (Q4_0: q - 8, Q6_K: q - 32, Q4_K: q
//    with its min moved to the wmin term), [n_sub][16 rows][KS bytes], once for all tokens.
//  - Activations are packed once per matmul into the tile B layout, [tg][s][KS/4][16 x 4
//    bytes]: row kk of a token tile holds bytes 4kk..4kk+3 of each of the 16 tokens.
//  - Two accumulator tiles alternate so that the next sub-block's TDPBSSD overlaps the
//    epilogue of the current one.
// Tile registers: 0-1 accumulators (16 x 16 int32), 2-3 weights (16 x KS int8), 4-5
// activations (KS/4 x 64 int8).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/kernels_x86.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels::x86 {
namespace {

constexpr int kTok = 16;   // tokens of a tile
constexpr int kRows = 16;  // weight rows of a tile

// Keeps the compiler from moving plain loads and stores across a tile instruction whose asm
// does not declare the memory it reads (tileloadd, ldtilecfg).
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// Unpacking streams the weights from memory (16 consecutive rows are contiguous), so it asks
// for the bytes 2 KiB ahead as the vec_dot kernels do.
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p) + 2048;
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

void configure_tiles(int ks) {
  TileConfig c;
  std::memset(&c, 0, sizeof c);
  c.palette_id = 1;
  for (int t = 0; t < 2; ++t) {  // accumulators: 16 weight rows x 16 int32
    c.rows[t] = kRows;
    c.colsb[t] = kTok * 4;
  }
  for (int t = 2; t < 4; ++t) {  // weights: 16 rows x KS int8
    c.rows[t] = kRows;
    c.colsb[t] = static_cast<uint16_t>(ks);
  }
  for (int t = 4; t < 6; ++t) {  // activations: KS/4 rows x (16 tokens x 4 int8)
    c.rows[t] = static_cast<uint8_t>(ks / 4);
    c.colsb[t] = kTok * 4;
  }
  memory_barrier();
  _tile_loadconfig(&c);
}

// ---- Packed activations ---------------------------------------------------------------------

int64_t token_tiles(int64_t n_tok) { return (n_tok + kTok - 1) / kTok; }

// Layout of the packed buffer: B tiles [n_tg][n_sub][KS * 16 bytes], then ascale
// [n_tg][n_sub][16] floats, then amin [n_tg][n_sub][16] floats.
struct PackedLayout {
  int64_t n_sub, n_tg;
  size_t tiles_bytes, scales_bytes;
  PackedLayout(int ks, int64_t cols, int64_t n_tok)
      : n_sub(cols / ks),
        n_tg(token_tiles(n_tok)),
        tiles_bytes(static_cast<size_t>(n_tg * n_sub) * static_cast<size_t>(ks) * kTok),
        scales_bytes(static_cast<size_t>(n_tg * n_sub) * kTok * sizeof(float)) {}
  size_t total() const { return tiles_bytes + 2 * scales_bytes; }
};

template <int KS>
size_t packed_bytes(int64_t cols, int64_t n_tok) {
  return PackedLayout(KS, cols, n_tok).total();
}

// Writes token n's KS quants of sub-block s into its column of the B tile.
template <int KS>
inline void put_token(uint8_t* tile, int n, const int8_t* q) {
  for (int kk = 0; kk < KS / 4; ++kk) std::memcpy(tile + kk * kTok * 4 + n * 4, q + kk * 4, 4);
}

// Q8_0 activations, KS = 32: one sub-block per block.
void pack_q8_0(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  constexpr int KS = 32;
  const PackedLayout L(KS, cols, n_tok);
  std::memset(packed, 0, L.total());
  auto* ascale = reinterpret_cast<float*>(packed + L.tiles_bytes);
  for (int64_t tg = 0; tg < L.n_tg; ++tg)
    for (int n = 0; n < kTok && tg * kTok + n < n_tok; ++n) {
      const auto* blocks = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(tg * kTok + n) * act_row_bytes);
      for (int64_t s = 0; s < L.n_sub; ++s) {
        const int64_t i = tg * L.n_sub + s;
        put_token<KS>(packed + static_cast<size_t>(i) * KS * kTok, n, blocks[s].qs);
        ascale[i * kTok + n] = half(blocks[s].d);
      }
    }
}

// Q8_K activations, KS = 32 or 16; amin = d * sum of the sub-block's quants (for Q4_K's mins).
template <int KS>
void pack_q8_k(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const PackedLayout L(KS, cols, n_tok);
  std::memset(packed, 0, L.total());
  auto* ascale = reinterpret_cast<float*>(packed + L.tiles_bytes);
  auto* amin = reinterpret_cast<float*>(packed + L.tiles_bytes + L.scales_bytes);
  constexpr int kSubPerSuper = kQK_K / KS;
  for (int64_t tg = 0; tg < L.n_tg; ++tg)
    for (int n = 0; n < kTok && tg * kTok + n < n_tok; ++n) {
      const auto* blocks = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(tg * kTok + n) * act_row_bytes);
      for (int64_t s = 0; s < L.n_sub; ++s) {
        const BlockQ8_K& b = blocks[s / kSubPerSuper];
        const int off = static_cast<int>(s % kSubPerSuper) * KS;
        const int64_t i = tg * L.n_sub + s;
        put_token<KS>(packed + static_cast<size_t>(i) * KS * kTok, n, b.qs + off);
        ascale[i * kTok + n] = b.d;
        int32_t sum = 0;
        for (int g = off / 16; g < (off + KS) / 16; ++g) sum += b.bsums[g];
        amin[i * kTok + n] = b.d * static_cast<float>(sum);
      }
    }
}

// ---- Weight unpacking -----------------------------------------------------------------------

// One 16-row weight tile: q [n_sub][16][KS] int8, scale and min [n_sub][16] floats.
struct WeightTile {
  int8_t* q;
  float* scale;
  float* min;
};

template <int KS>
size_t scratch_bytes(int64_t cols) {
  const int64_t n_sub = cols / KS;
  return static_cast<size_t>(n_sub) * kRows * (KS + 2 * sizeof(float)) + 64;
}

template <int KS>
WeightTile weight_tile(uint8_t* scratch, int64_t cols) {
  const int64_t n_sub = cols / KS;
  auto* q = reinterpret_cast<int8_t*>(scratch);
  auto* scale = reinterpret_cast<float*>(scratch + static_cast<size_t>(n_sub) * kRows * KS);
  return {q, scale, scale + n_sub * kRows};
}

inline void store128(int8_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
inline void store256(int8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Row r of the tile from one stored row of `cols` elements.
void unpack_q8_0(const uint8_t* row, int64_t cols, int r, WeightTile& t) {
  const auto* x = reinterpret_cast<const BlockQ8_0*>(row);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    if (b % 2 == 0) prefetch_ahead(x + b, 2 * sizeof(BlockQ8_0));
    std::memcpy(t.q + (b * kRows + r) * kQK, x[b].qs, kQK);
    t.scale[b * kRows + r] = half(x[b].d);
  }
}

void unpack_q4_0(const uint8_t* row, int64_t cols, int r, WeightTile& t) {
  const auto* x = reinterpret_cast<const BlockQ4_0*>(row);
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    if (b % 4 == 0) prefetch_ahead(x + b, 4 * sizeof(BlockQ4_0));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs));
    int8_t* dst = t.q + (b * kRows + r) * kQK;
    store128(dst, _mm_sub_epi8(_mm_and_si128(qs, low4), eight));
    store128(dst + 16, _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), low4), eight));
    t.scale[b * kRows + r] = half(x[b].d);
  }
}

// Whole 16-row tiles of the legacy formats, vectorized across rows: the 16 rows of a tile are
// consecutive in memory, row r at base + r * row_bytes. Four rows' blocks share one 512-bit
// register; the 16 fp16 scales of a block column come in with one gather. Used when all 16 rows
// exist (the last, partial tile of a matrix goes row by row).
inline __m512i row_offsets(size_t row_bytes) {
  const auto rb = static_cast<int>(row_bytes);
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(rb));
}

// 16 fp16 fields at `field` + r * row_bytes -> 16 floats at out (4-byte gathers stay inside the
// block: the field is followed by at least 2 bytes of quants).
inline void gather_scales16(const uint8_t* field, __m512i offsets, float* out) {
  const __m512i g = _mm512_i32gather_epi32(offsets, field, 1);
  _mm512_storeu_ps(out, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
}

void unpack_tile_q4_0(const uint8_t* base, size_t row_bytes, int64_t cols, WeightTile& t) {
  const __m512i offsets = row_offsets(row_bytes);
  const __m512i low4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
  // [lo_a hi_a lo_b hi_b] from the 128-bit lanes a, b of lo and hi.
  const __m512i idx_ab = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                idx_cd = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const uint8_t* blk = base + static_cast<size_t>(b) * sizeof(BlockQ4_0);
    if (b % 4 == 0)  // 16 streams, one per row: ask for each row's bytes 512 ahead
      for (int r = 0; r < kRows; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + static_cast<size_t>(r) * row_bytes + 512, _MM_HINT_T0);
    int8_t* dst = t.q + b * kRows * kQK;
    for (int r = 0; r < kRows; r += 4) {
      const uint8_t* q = blk + offsetof(BlockQ4_0, qs) + static_cast<size_t>(r) * row_bytes;
      __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + row_bytes)), 1);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * row_bytes)), 2);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 3 * row_bytes)), 3);
      const __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      _mm512_storeu_si512(dst + r * kQK, _mm512_sub_epi8(_mm512_permutex2var_epi64(lo, idx_ab, hi), eight));
      _mm512_storeu_si512(dst + (r + 2) * kQK, _mm512_sub_epi8(_mm512_permutex2var_epi64(lo, idx_cd, hi), eight));
    }
    gather_scales16(blk + offsetof(BlockQ4_0, d), offsets, t.scale + b * kRows);
  }
}

void unpack_tile_q8_0(const uint8_t* base, size_t row_bytes, int64_t cols, WeightTile& t) {
  const __m512i offsets = row_offsets(row_bytes);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const uint8_t* blk = base + static_cast<size_t>(b) * sizeof(BlockQ8_0);
    if (b % 2 == 0)  // 16 streams, one per row: ask for each row's bytes 512 ahead
      for (int r = 0; r < kRows; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + static_cast<size_t>(r) * row_bytes + 512, _MM_HINT_T0);
    int8_t* dst = t.q + b * kRows * kQK;
    for (int r = 0; r < kRows; ++r)
      store256(dst + r * kQK, load256(blk + offsetof(BlockQ8_0, qs) + static_cast<size_t>(r) * row_bytes));
    gather_scales16(blk + offsetof(BlockQ8_0, d), offsets, t.scale + b * kRows);
  }
}

// The 6-bit scale and min of sub-block j of a Q4_K super-block (same bit layout as the scalar
// k4_get_scale_min; restated here because that one is an external inline function).
inline void q4_k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void unpack_q4_k(const uint8_t* row, int64_t cols, int r, WeightTile& t) {
  const auto* x = reinterpret_cast<const BlockQ4_K*>(row);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < cols / kQK_K; ++i) {
    prefetch_ahead(x + i, sizeof(BlockQ4_K));
    const float d = half(x[i].d), dmin = half(x[i].dmin);
    for (int c = 0; c < 4; ++c) {
      const __m256i qs = load256(x[i].qs + 32 * c);
      const int64_t s = i * 8 + 2 * c;  // sub-blocks 2c (low nibbles) and 2c + 1 (high)
      store256(t.q + (s * kRows + r) * 32, _mm256_and_si256(qs, low4));
      store256(t.q + ((s + 1) * kRows + r) * 32, _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4));
    }
    for (int j = 0; j < 8; ++j) {
      int sc = 0, m = 0;
      q4_k_scale_min(j, x[i].scales, &sc, &m);
      t.scale[(i * 8 + j) * kRows + r] = d * static_cast<float>(sc);
      t.min[(i * 8 + j) * kRows + r] = dmin * static_cast<float>(m);
    }
  }
}

void unpack_q6_k(const uint8_t* row, int64_t cols, int r, WeightTile& t) {
  const auto* x = reinterpret_cast<const BlockQ6_K*>(row);
  const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < cols / kQK_K; ++i) {
    prefetch_ahead(x + i, sizeof(BlockQ6_K));
    const float d = half(x[i].d);
    for (int h = 0; h < 2; ++h) {
      const __m256i a = load256(x[i].ql + 64 * h), b = load256(x[i].ql + 64 * h + 32);
      const __m256i hb = load256(x[i].qh + 32 * h);
      // Elements 128h + 32g + l, l in [0, 32), for g = 0..3.
      __m256i v[4];
      v[0] = _mm256_or_si256(_mm256_and_si256(a, low4), _mm256_slli_epi16(_mm256_and_si256(hb, low2), 4));
      v[1] = _mm256_or_si256(_mm256_and_si256(b, low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), low2), 4));
      v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), low2), 4));
      v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), low2), 4));
      for (int g = 0; g < 4; ++g) {
        const __m256i q = _mm256_sub_epi8(v[g], off);
        const int64_t s = i * 16 + h * 8 + 2 * g;  // two 16-element sub-blocks
        store128(t.q + (s * kRows + r) * 16, _mm256_castsi256_si128(q));
        store128(t.q + ((s + 1) * kRows + r) * 16, _mm256_extracti128_si256(q, 1));
      }
    }
    for (int j = 0; j < 16; ++j) t.scale[(i * 16 + j) * kRows + r] = d * static_cast<float>(x[i].scales[j]);
  }
}

// ---- The tile loop ----------------------------------------------------------------------------

// acc[r] += float(isum[r][:]) * wscale[r] * ascale[:] (- wmin[r] * amin[:]).
template <bool kMin>
inline void epilogue(const int32_t* isum, const float* wscale, const float* wmin, const float* ascale,
                     const float* amin, __m512* acc) {
  const __m512 as = _mm512_loadu_ps(ascale);
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(isum + r * kTok));
    acc[r] = _mm512_fmadd_ps(v, _mm512_mul_ps(_mm512_set1_ps(wscale[r]), as), acc[r]);
  }
  if constexpr (kMin) {
    const __m512 am = _mm512_loadu_ps(amin);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) acc[r] = _mm512_fnmadd_ps(_mm512_set1_ps(wmin[r]), am, acc[r]);
  }
}

using UnpackTileFn = void (*)(const uint8_t* base, size_t row_bytes, int64_t cols, WeightTile& t);

template <int KS, void (*kUnpack)(const uint8_t*, int64_t, int, WeightTile&), UnpackTileFn kUnpackTile, bool kMin>
void run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out, int64_t ldo,
         uint8_t* scratch) {
  const PackedLayout L(KS, w.cols, n_tok);
  const int64_t n_sub = L.n_sub;
  const auto* ascale_all = reinterpret_cast<const float*>(packed + L.tiles_bytes);
  const auto* amin_all = reinterpret_cast<const float*>(packed + L.tiles_bytes + L.scales_bytes);
  WeightTile wt = weight_tile<KS>(scratch, w.cols);
  alignas(64) int32_t isum[kRows * kTok];
  alignas(64) float result[kRows * kTok];
  configure_tiles(KS);

  for (int64_t rt = r0; rt < r1; rt += kRows) {
    const int nr = static_cast<int>(r1 - rt < kRows ? r1 - rt : kRows);
    if (kUnpackTile != nullptr && nr == kRows) {
      kUnpackTile(w.data + static_cast<size_t>(rt) * w.row_bytes, w.row_bytes, w.cols, wt);
    } else {
      for (int r = 0; r < nr; ++r) kUnpack(w.data + static_cast<size_t>(rt + r) * w.row_bytes, w.cols, r, wt);
    }
    for (int r = nr; r < kRows; ++r)  // padding rows contribute zeros
      for (int64_t s = 0; s < n_sub; ++s) {
        std::memset(wt.q + (s * kRows + r) * KS, 0, KS);
        wt.scale[s * kRows + r] = 0.0f;
        wt.min[s * kRows + r] = 0.0f;
      }
    memory_barrier();

    for (int64_t tg = 0; tg < L.n_tg; ++tg) {
      const uint8_t* btiles = packed + static_cast<size_t>(tg * n_sub) * KS * kTok;
      const float* ascale = ascale_all + tg * n_sub * kTok;
      const float* amin = amin_all + tg * n_sub * kTok;
      __m512 acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
      auto a_tile = [&](int64_t s) { return wt.q + s * kRows * KS; };
      auto b_tile = [&](int64_t s) { return btiles + static_cast<size_t>(s) * KS * kTok; };
      auto finish = [&](int64_t s) {
        epilogue<kMin>(isum, wt.scale + s * kRows, wt.min + s * kRows, ascale + s * kTok, amin + s * kTok, acc);
      };

      // Sub-block s accumulates in tile s % 2; the next one's product is issued before the
      // current one's epilogue so that the two overlap.
      _tile_zero(0);
      _tile_loadd(2, a_tile(0), KS);
      _tile_loadd(4, b_tile(0), kTok * 4);
      _tile_dpbssd(0, 2, 4);
      for (int64_t s = 0; s < n_sub; s += 2) {
        const bool has_next = s + 1 < n_sub;
        if (has_next) {
          _tile_zero(1);
          _tile_loadd(3, a_tile(s + 1), KS);
          _tile_loadd(5, b_tile(s + 1), kTok * 4);
          _tile_dpbssd(1, 3, 5);
        }
        _tile_stored(0, isum, kTok * 4);
        finish(s);
        if (!has_next) break;
        if (s + 2 < n_sub) {
          _tile_zero(0);
          _tile_loadd(2, a_tile(s + 2), KS);
          _tile_loadd(4, b_tile(s + 2), kTok * 4);
          _tile_dpbssd(0, 2, 4);
        }
        _tile_stored(1, isum, kTok * 4);
        finish(s + 1);
      }

      // acc[r] lane n = out[token tg*16 + n][row rt + r].
      for (int r = 0; r < kRows; ++r) _mm512_store_ps(result + r * kTok, acc[r]);
      const int nt = static_cast<int>(n_tok - tg * kTok < kTok ? n_tok - tg * kTok : kTok);
      for (int n = 0; n < nt; ++n) {
        float* o = out + (tg * kTok + n) * ldo + rt;
        for (int r = 0; r < nr; ++r) o[r] = result[r * kTok + n];
      }
    }
  }
  _tile_release();
}

}  // namespace

constinit const GemmKernel kAmxGemms[kAmxGemmCount] = {
    {DType::q8_0, packed_bytes<32>, pack_q8_0, scratch_bytes<32>, run<32, unpack_q8_0, unpack_tile_q8_0, false>},
    {DType::q4_0, packed_bytes<32>, pack_q8_0, scratch_bytes<32>, run<32, unpack_q4_0, unpack_tile_q4_0, false>},
    {DType::q4_k, packed_bytes<32>, pack_q8_k<32>, scratch_bytes<32>, run<32, unpack_q4_k, nullptr, true>},
    {DType::q6_k, packed_bytes<16>, pack_q8_k<16>, scratch_bytes<16>, run<16, unpack_q6_k, nullptr, false>},
};

}  // namespace edgelm::kernels::x86
