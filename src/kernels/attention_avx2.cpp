// AVX2 + FMA + F16C attention kernel (see attention_kernels.h), under the rules of
// kernels_x86.h: compiled with per-file -mavx2 -mfma -mf16c, everything in an anonymous
// namespace, only intrinsics and static helpers, the one external symbol a constinit table that
// attention_kernels() hands out after the CPU check.
//
// Per tile of kAttnTile positions, for each KV head and each group of NQ <= 8 of its query heads
// (head_dim % 8 == 0):
//   K as rows: each row's head slice is loaded 8 elements at a time in its stored type (f32
//      load, f16 vcvtph2ps, q8_0 int8 -> f32 times the block scale) and FMA'd into NQ
//      accumulators, one per query head, so the row is read once for the whole group; the NQ
//      sums are reduced into one vector whose lane g is head g's score (w[t][g]); softmax runs
//      across the heads' lanes, one vector per position.
//   K transposed (AttnKv::k_transposed): per 16 positions of one block (aligned
//      to 16, the lanes outside the tile get -inf) and 4 query heads, one head dimension at a
//      time, the keys of the positions are two 8-lane loads (q8_0: 16 quants times the slots'
//      scales of their group of 32 dimensions) and each head's element one
//      broadcast FMA into each half's accumulator, whose lanes are then the scores (w[g][t]): no
//      horizontal sums. softmax runs
//      across the positions' lanes, one head at a time. (bench_attention on Zen 5, f16, depth
//      2048, one thread, per layer: see README's attention section.)
//   V: per 24 columns and up to 4 heads, the 12 output accumulators stay in registers over the
//      tile's rows, each row's weights broadcast from w (values() below).
#include <immintrin.h>

#include <cstdint>

#include "kernels/attention_x86.h"
#include "kernels/ops_avx2_math.h"

namespace edgelm::kernels::x86 {
namespace {

// Elements [i, i + 8) of a row of the stored type (i % 8 == 0).
template <KvElem T>
inline __m256 load8(const std::byte* row, int64_t i) {
  if constexpr (T == KvElem::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (T == KvElem::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else {
    const std::byte* b = row + (i / kQ8Block) * kQ8BlockBytes;
    uint16_t d;
    __builtin_memcpy(&d, b, sizeof d);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + i % kQ8Block));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(_cvtsh_ss(d)));
  }
}

// Lane g = the sum of a[g]'s lanes, for g < NQ (0 beyond).
template <int NQ>
inline __m256 reduce_heads(const __m256* a) {
  const __m256 z = _mm256_setzero_ps();
  const __m256 t0 = _mm256_hadd_ps(a[0], NQ > 1 ? a[1] : z);
  const __m256 t1 = _mm256_hadd_ps(NQ > 2 ? a[2] : z, NQ > 3 ? a[3] : z);
  const __m256 t2 = _mm256_hadd_ps(NQ > 4 ? a[4] : z, NQ > 5 ? a[5] : z);
  const __m256 t3 = _mm256_hadd_ps(NQ > 6 ? a[6] : z, NQ > 7 ? a[7] : z);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);  // [h0..h3 of the low 128 bits | h0..h3 of the high]
  const __m256 u1 = _mm256_hadd_ps(t2, t3);  // the same for h4..h7
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// cap * tanh(s / cap) per lane, tanh |t| as (1 - e^(-2|t|)) / (1 + e^(-2|t|)) with the sign of t.
inline __m256 softcap256(__m256 s, float cap) {
  const __m256 vcap = _mm256_set1_ps(cap);
  const __m256 t = _mm256_div_ps(s, vcap);
  const __m256 sign = _mm256_and_ps(t, _mm256_set1_ps(-0.0f));
  const __m256 e = exp256(_mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), t), _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 th = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  return _mm256_mul_ps(_mm256_or_ps(th, sign), vcap);
}

// Floats per head of a head-major score tile: the tile's positions start up to 15 lanes into
// their first 16-position group.
constexpr int kW = kAttnTile + 16;

inline float hmax8(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

inline float hsum8(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

// K as rows: the scores of the tile's n rows for NQ query heads (q [NQ, D]) into w[t][g];
// returns their max per head (lanes >= NQ: 0).
template <KvElem T, int NQ>
__m256 scores_rows(const std::byte* const* k_rows, int32_t n, int64_t col, int64_t D, const float* q, __m256 vscale,
                   float softcap, float (*w)[8]) {
  __m256 tile_max = _mm256_set1_ps(-__builtin_inff());
  for (int32_t t = 0; t < n; ++t) {
    __m256 a[NQ];
    for (int g = 0; g < NQ; ++g) a[g] = _mm256_setzero_ps();
    for (int64_t c = 0; c < D; c += 8) {
      const __m256 k = load8<T>(k_rows[t], col + c);
      for (int g = 0; g < NQ; ++g) a[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * D + c), k, a[g]);
    }
    __m256 s = _mm256_mul_ps(reduce_heads<NQ>(a), vscale);
    if (softcap > 0.0f) s = softcap256(s, softcap);
    _mm256_store_ps(w[t], s);
    tile_max = _mm256_max_ps(tile_max, s);
  }
  return tile_max;
}

// K transposed, 16 positions (keys, [D dimensions] x 16 adjacent positions) for HN <= 4 query
// heads (q [HN, D]): w[g][0..16) = the scores, lanes outside [lo, hi) -inf. Two 8-position
// halves per key load keep 2 * HN accumulators in flight for every broadcast query element
// (one head's 8 chains with 8 broadcasts per dimension ran at 44 cycles per position, these at
// 35, measured apart on Zen 5).
template <KvElem T, int HN>
inline void scores16(const std::byte* head, size_t slot, size_t bs, int64_t D, const float* q, __m256 vscale,
                     float softcap, int32_t lo, int32_t hi, float (*w)[kW], LineCursor* pf) {
  __m256 a[2 * HN];
#pragma GCC unroll 8
  for (int g = 0; g < 2 * HN; ++g) a[g] = _mm256_setzero_ps();
  LineCursor c = LineCursor::local(pf);
  auto fma_dim = [&](const float* qd, __m256 k0, __m256 k1) {
#pragma GCC unroll 4
    for (int g = 0; g < HN; ++g) {
      const __m256 b = _mm256_broadcast_ss(qd + g * D);
      a[g] = _mm256_fmadd_ps(b, k0, a[g]);
      a[HN + g] = _mm256_fmadd_ps(b, k1, a[HN + g]);
    }
  };
  if constexpr (T == KvElem::q8_0) {
    // Per group of 32 dimensions (KtLayout) the 16 slots' scales, then each dimension's quants
    // times them (the values row_elem gives).
    for (int64_t d0 = 0; d0 < D; d0 += kKtQ8Group) {
      const std::byte* group = head + static_cast<size_t>(d0 / kKtQ8Group) * (2 + kKtQ8Group) * bs;
      const __m256 s0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 2 * slot)));
      const __m256 s1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 2 * slot + 16)));
      const std::byte* qd = group + 2 * bs + slot;  // the slot's quant of the group's first dimension
      for (int j = 0; j < kKtQ8Group; ++j, qd += bs) {
        const __m128i q16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qd));
        const __m256 k0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q16)), s0);
        const __m256 k1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(q16, q16))), s1);
        if (j % 8 == 0) c.step();
        fma_dim(q + d0 + j, k0, k1);
      }
    }
  } else {
    constexpr size_t kElem = T == KvElem::f32 ? 4 : 2;
    const std::byte* keys = head + slot * kElem;
    for (int64_t d = 0; d < D; ++d) {
      const std::byte* kd = keys + static_cast<size_t>(d) * bs * kElem;
      const __m256 k0 = load8<T>(kd, 0), k1 = load8<T>(kd + 8 * kElem, 0);
      if (d % 4 == 0) c.step();
      fma_dim(q + d, k0, k1);
    }
  }
  LineCursor::store(pf, c);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  // Unrolled: with a runtime half the accumulators' array is addressed and GCC stores all of
  // them to the stack on every dimension of the loop above (twice as slow).
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    const __m256i pos = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * half));
    const __m256 outside = _mm256_castsi256_ps(_mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), pos),
                                                               _mm256_cmpgt_epi32(pos, _mm256_set1_epi32(hi - 1))));
#pragma GCC unroll 4
    for (int g = 0; g < HN; ++g) {
      __m256 s = _mm256_mul_ps(a[half * HN + g], vscale);
      if (softcap > 0.0f) s = softcap256(s, softcap);
      _mm256_store_ps(&w[g][8 * half], _mm256_blendv_ps(s, neg_inf, outside));
    }
  }
}

// K transposed: the scores of positions [t0, t0 + n) (one tile) for NQ query heads into
// w[g][off + t], off = t0 % 16, in groups of 16 positions aligned to 16 (inside one block, as
// block_size % kAttnKtBlock == 0); the lanes of the groups outside the tile are -inf. Returns
// the number of 8-lane vectors per head.
template <KvElem T, int NQ>
int32_t scores_kt(const AttnKv& kv, int32_t t0, int32_t n, int64_t col, int64_t D, const float* q, __m256 vscale,
                  float softcap, float (*w)[kW], LineCursor* pf) {
  const int32_t p_first = t0 & ~15, off = t0 - p_first, n_groups = (off + n + 15) / 16;
  const auto bs = static_cast<size_t>(kv.block_size);
  for (int32_t i = 0; i < n_groups; ++i) {
    const int32_t p = p_first + 16 * i;
    const std::byte* head =
        kv.k_base + static_cast<size_t>(kv.blocks[p / kv.block_size]) * kv.block_stride + kv.kt().span(col);
    const auto slot = static_cast<size_t>(p % kv.block_size);
    const int32_t lo = off - 16 * i, hi = off + n - 16 * i;  // lanes of the tile: [lo, hi)
    float(*wi)[kW] = reinterpret_cast<float(*)[kW]>(&w[0][16 * i]);
    if constexpr (NQ >= 4) scores16<T, 4>(head, slot, bs, D, q, vscale, softcap, lo, hi, wi, pf);
    if constexpr (NQ >= 8) scores16<T, 4>(head, slot, bs, D, q + 4 * D, vscale, softcap, lo, hi, wi + 4, pf);
    constexpr int kRest = NQ % 4, kDone = NQ - kRest;
    if constexpr (kRest > 0)
      scores16<T, kRest>(head, slot, bs, D, q + kDone * D, vscale, softcap, lo, hi, wi + kDone, pf);
  }
  return 2 * n_groups;
}

// The online-softmax update of a group from its tile's per-head max (lanes >= NQ: 0): m8, l8 [8
// lanes] and corr (the factor acc is scaled by); `weigh` turns the scores into weights
// e^(s - m') given m' [8] and returns their sums per head.
template <typename Weigh>
inline void softmax_update(__m256 tile_max, float* m8, float* l8, float* corr, Weigh weigh) {
  const __m256 m = _mm256_load_ps(m8);
  const __m256 m_new = _mm256_max_ps(m, tile_max);
  const __m256 c = exp256(_mm256_sub_ps(m, m_new));  // e^(-inf) is 0 for the first tile
  _mm256_store_ps(m8, m_new);
  const __m256 sum = weigh(m8);
  _mm256_store_ps(l8, _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(l8), c), sum));
  _mm256_store_ps(corr, c);
}

// Heads [g0, g0 + HN) of values() below, columns [j, j + 8 * C): the HN * C accumulators stay in
// registers over the tile's rows; each weight broadcast serves C column vectors.
template <KvElem T, int HN, int C, int kTS, int kGS>
inline void values_block(const std::byte* const* v_rows, int32_t n, int64_t col, int64_t j, int64_t D, int g0,
                         const float* w, const float* corr, float* acc, LineCursor& pf) {
  __m256 o[HN * C];
#pragma GCC unroll 12
  for (int x = 0; x < HN * C; ++x) {
    const int g = g0 + x / C, c = x % C;
    o[x] = _mm256_mul_ps(_mm256_loadu_ps(acc + g * D + j + 8 * c), _mm256_broadcast_ss(&corr[g]));
  }
  // q8_0, 16 columns inside one block (C == 2, col + j % 16 == 0): the scale converted once.
  const bool q8_pair = T == KvElem::q8_0 && C == 2 && (col + j) % 16 == 0;
  for (int32_t t = 0; t < n; ++t) {
    __m256 v[C];
    if (q8_pair) {
      const std::byte* b = v_rows[t] + ((col + j) / kQ8Block) * kQ8BlockBytes;
      uint16_t h;
      __builtin_memcpy(&h, b, sizeof h);
      const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + (col + j) % kQ8Block));
      v[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
      v[C - 1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(q, q))), d);
    } else {
#pragma GCC unroll 3
      for (int c = 0; c < C; ++c) v[c] = load8<T>(v_rows[t], col + j + 8 * c);
    }
    if (t % 2 == 0) pf.step();
#pragma GCC unroll 4
    for (int h = 0; h < HN; ++h) {
      const __m256 wb = _mm256_broadcast_ss(&w[t * kTS + (g0 + h) * kGS]);
#pragma GCC unroll 3
      for (int c = 0; c < C; ++c) o[h * C + c] = _mm256_fmadd_ps(wb, v[c], o[h * C + c]);
    }
  }
#pragma GCC unroll 12
  for (int x = 0; x < HN * C; ++x) _mm256_storeu_ps(acc + (g0 + x / C) * D + j + 8 * (x % C), o[x]);
}

// acc [NQ, D] = acc * corr + sum_t w(t, g) v_t with the weight of position t and head g at
// w[t * kTS + g * kGS]. Up to 4 heads at a time over 24 columns (then 16, then 8): per 12 FMAs
// 3 V loads and 4 weight broadcasts, 12 accumulators + 3 V + 1 weight in the 16 ymm registers.
// 8 heads over 8 columns took 1 and 8 loads per 8 FMAs (17 instructions), 4 heads over 16
// columns 2 and 4; 24 columns were 3-6% faster than 16 (bench_attention f16_kt/avx2/1x2048 on
// Zen 5, alternating: median 270 -> 254 us under load, 199-204 -> 191-199 quiet). Each
// accumulator sums the same products in the same order either way (bit-identical results).
template <KvElem T, int NQ, int kTS, int kGS>
void values(const std::byte* const* v_rows, int32_t n, int64_t col, int64_t D, const float* w, const float* corr,
            float* acc, LineCursor* pf = nullptr) {
  LineCursor c = LineCursor::local(pf);
  constexpr int kFirst = NQ < 4 ? NQ : 4, kSecond = NQ - kFirst < 4 ? NQ - kFirst : 4;
  int64_t j = 0;
  if constexpr (T == KvElem::q8_0) {  // 16 columns a block, one scale for both halves (see values_block)
    for (; j + 16 <= D && (col + j) % 16 == 0; j += 16) {
      values_block<T, kFirst, 2, kTS, kGS>(v_rows, n, col, j, D, 0, w, corr, acc, c);
      if constexpr (kSecond > 0) values_block<T, kSecond, 2, kTS, kGS>(v_rows, n, col, j, D, 4, w, corr, acc, c);
    }
  }
  for (; j + 24 <= D; j += 24) {
    values_block<T, kFirst, 3, kTS, kGS>(v_rows, n, col, j, D, 0, w, corr, acc, c);
    if constexpr (kSecond > 0) values_block<T, kSecond, 3, kTS, kGS>(v_rows, n, col, j, D, 4, w, corr, acc, c);
  }
  if (j + 16 <= D) {
    values_block<T, kFirst, 2, kTS, kGS>(v_rows, n, col, j, D, 0, w, corr, acc, c);
    if constexpr (kSecond > 0) values_block<T, kSecond, 2, kTS, kGS>(v_rows, n, col, j, D, 4, w, corr, acc, c);
    j += 16;
  }
  if (j < D) {
    values_block<T, kFirst, 1, kTS, kGS>(v_rows, n, col, j, D, 0, w, corr, acc, c);
    if constexpr (kSecond > 0) values_block<T, kSecond, 1, kTS, kGS>(v_rows, n, col, j, D, 4, w, corr, acc, c);
  }
  LineCursor::store(pf, c);
}

// One tile (positions [t0, t0 + n), rows v_rows and, for K as rows, k_rows) for one KV head's
// group of NQ query heads (q [NQ, D]): updates the group's running max m8 [8 lanes], sum l8 [8
// lanes] and accumulator acc [NQ, D]. softcap > 0: scores soft-capped after the scale.
template <KvElem T, int NQ>
void tile_group(const AttnKv& kv, int32_t t0, const std::byte* const* k_rows, const std::byte* const* v_rows, int32_t n,
                int64_t col, int64_t D, const float* q, __m256 vscale, float softcap, float* m8, float* l8, float* acc,
                LineCursor* pf) {
  alignas(32) float corr[8];
  if (kv.k_transposed) {
    alignas(32) float w[NQ][kW];  // [head, lane of the tile's groups] scores, then weights
    const int32_t n_groups = scores_kt<T, NQ>(kv, t0, n, col, D, q, vscale, softcap, w, pf);  // of 8 lanes
    alignas(32) float tmax[8] = {};
    for (int g = 0; g < NQ; ++g) {
      __m256 x = _mm256_load_ps(w[g]);
      for (int32_t i = 1; i < n_groups; ++i) x = _mm256_max_ps(x, _mm256_load_ps(&w[g][8 * i]));
      tmax[g] = hmax8(x);
    }
    softmax_update(_mm256_load_ps(tmax), m8, l8, corr, [&](const float* m_new) {
      alignas(32) float sums[8] = {};
      for (int g = 0; g < NQ; ++g) {
        const __m256 mg = _mm256_broadcast_ss(&m_new[g]);
        __m256 sum = _mm256_setzero_ps();
        for (int32_t i = 0; i < n_groups; ++i) {
          const __m256 p = exp256(_mm256_sub_ps(_mm256_load_ps(&w[g][8 * i]), mg));  // -inf lanes: 0
          _mm256_store_ps(&w[g][8 * i], p);
          sum = _mm256_add_ps(sum, p);
        }
        sums[g] = hsum8(sum);
      }
      return _mm256_load_ps(sums);
    });
    values<T, NQ, 1, kW>(v_rows, n, col, D, &w[0][t0 % 16], corr, acc, pf);
    return;
  }
  alignas(32) float w[kAttnTile][8];  // [position in tile, head] scores, then softmax weights
  const __m256 tile_max = scores_rows<T, NQ>(k_rows, n, col, D, q, vscale, softcap, w);
  softmax_update(tile_max, m8, l8, corr, [&](const float* m_new) {
    const __m256 mv = _mm256_load_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (int32_t t = 0; t < n; ++t) {
      const __m256 p = exp256(_mm256_sub_ps(_mm256_load_ps(w[t]), mv));
      _mm256_store_ps(w[t], p);
      sum = _mm256_add_ps(sum, p);
    }
    return sum;
  });
  values<T, NQ, 8, 1>(v_rows, n, col, D, &w[0][0], corr, acc);
}

// Tiles outermost: a tile's rows are used by every KV head (whole rows stream through the
// cache once) before the next tile is read.
template <KvElem T>
void partial_typed(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0, int32_t p1,
                   AttnState out) {
  const int64_t D = kv.head_dim;
  const int32_t per_kv = (gqa + kAttnGroupHeads - 1) / kAttnGroupHeads;
  alignas(32) float m8[kAttnMaxGroups][8], l8[kAttnMaxGroups][8];
  for (int32_t gi = 0; gi < n_kv * per_kv; ++gi)
    for (int j = 0; j < 8; ++j) {
      m8[gi][j] = -__builtin_inff();
      l8[gi][j] = 0.0f;
    }
  for (int64_t i = 0; i < int64_t{n_kv} * gqa * D; i += 8) _mm256_storeu_ps(out.acc + i, _mm256_setzero_ps());
  const __m256 vscale = _mm256_set1_ps(scale);
  const std::byte* rows[2][kAttnTile];  // [K, V][position in tile] of the current tile
  auto fill = [&](const std::byte*(*r)[kAttnTile], int32_t t0) {
    const int32_t n = p1 - t0 < kAttnTile ? p1 - t0 : kAttnTile;
    int32_t blk = t0 / kv.block_size, slot = t0 % kv.block_size;
    for (int32_t t = 0; t < n; ++t) {
      const size_t off =
          static_cast<size_t>(kv.blocks[blk]) * kv.block_stride + static_cast<size_t>(slot) * kv.row_bytes;
      r[0][t] = kv.k_base + off;
      r[1][t] = kv.v_base + off;
      if (++slot == kv.block_size) {
        slot = 0;
        ++blk;
      }
    }
  };
  for (int32_t t0 = p0; t0 < p1; t0 += kAttnTile) {
    const int32_t n = p1 - t0 < kAttnTile ? p1 - t0 : kAttnTile;
    fill(rows, t0);
    const std::byte* const* k_rows = rows[0];
    const std::byte* const* v_rows = rows[1];
    // K as rows: the tile's rows into L1 before they are computed on (touch_rows; bench_attention
    // on Zen 5, depth 2048 over 22 layers, one thread, 128-position items, per layer: f16 475 ->
    // 285 us, q8_0 440 -> 275 us against prefetching the next tile during this one).
    // K transposed: only a range's first tile is touched; each tile's FMA loops prefetch the
    // next one's lines (LineCursor, as in the AVX-512 kernel; f16_kt 22x2048/split128 from DRAM
    // 486-519 -> 404-494 us, alternating; from cache unchanged).
    LineCursor cursor;
    LineCursor* pf = nullptr;
    if (kv.k_transposed) {
      if (t0 == p0) {
        touch_k_blocks(kv, t0, n, int64_t{n_kv} * D);
        touch_rows(v_rows, n, kv.row_bytes);
      }
      if (t0 + kAttnTile < p1) {
        add_tile_runs(kv, t0 + kAttnTile, t0 + 2 * kAttnTile < p1 ? t0 + 2 * kAttnTile : p1, int64_t{n_kv} * D, cursor);
        pf = &cursor;
      } else if (kv.prefetch_end > p1) {  // the last tile: the first of the caller's next range
        add_tile_runs(kv, p1, p1 + kAttnTile < kv.prefetch_end ? p1 + kAttnTile : kv.prefetch_end, int64_t{n_kv} * D,
                      cursor);
        pf = &cursor;
      }
    } else {
      touch_rows(k_rows, n, kv.row_bytes);
      touch_rows(v_rows, n, kv.row_bytes);
    }
    for (int32_t h = 0, gi = 0; h < n_kv; ++h)
      for (int32_t g = 0; g < gqa; g += kAttnGroupHeads, ++gi) {
        const int64_t j = int64_t{h} * gqa + g;
        const int nq = gqa - g < kAttnGroupHeads ? gqa - g : kAttnGroupHeads;
        with_group_heads(nq, [&]<int NQ>() {
          tile_group<T, NQ>(kv, t0, k_rows, v_rows, n, kv.col0 + h * D, D, q + j * D, vscale, kv.softcap, m8[gi],
                            l8[gi], out.acc + j * D, pf);
        });
      }
  }
  for (int32_t h = 0, gi = 0; h < n_kv; ++h)
    for (int32_t g = 0; g < gqa; g += kAttnGroupHeads, ++gi)
      for (int32_t x = 0; x < kAttnGroupHeads && g + x < gqa; ++x) {
        out.m[h * gqa + g + x] = m8[gi][x];
        out.l[h * gqa + g + x] = l8[gi][x];
      }
}

void partial_x8(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0, int32_t p1,
                AttnState out) {
  with_kv_elem(kv.type, [&]<KvElem T>() { partial_typed<T>(kv, q, n_kv, gqa, scale, p0, p1, out); });
}

}  // namespace

constinit const AttentionKernels kAvx2Attention{Isa::avx2, &detail::attention_partial_scalar, &partial_x8};

}  // namespace edgelm::kernels::x86
