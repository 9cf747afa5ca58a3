// AVX-512 attention kernel (see attention_kernels.h), under the rules of kernels_x86.h: compiled
// with the per-file flags of kernels_avx512.cpp (-mavx512f/bw/vl/dq/vnni -mavx2 -mfma -mf16c),
// everything in an anonymous namespace, only intrinsics and static helpers, the one external
// symbol a constinit table that attention_kernels() hands out for avx512 and amx after the CPU
// check.
//
// The algorithm is that of attention_kernels.h (tiles of kAttnTile positions from p0, online
// softmax per tile), so results depend only on the inputs and [p0, p1) as for the other
// variants; they differ from the AVX2 kernel's by float reassociation only. Per tile, for each KV
// head and each group of NQ <= 8 of its query heads (head_dim % 8 == 0):
//   K: two positions per step. Each row's head slice is loaded 16 elements at a time in its
//      stored type (f32 load, f16 vcvtph2ps of 16 halves, q8_0 int8 -> f32 times the block
//      scale; a last 8-column chunk is masked) and FMA'd into 2 * NQ accumulators, so every q
//      chunk serves both rows; one transposing reduction turns the 16 accumulators into one
//      vector whose lane p * 8 + g is head g's score at position t + p (w[t][g] in memory, the
//      AVX2 kernel's layout). A lone last position gets -inf in its half (weight 0).
//   softmax: max over the tile per head, then e^(s - m) for 16 (position, head) lanes at once.
//   K transposed (AttnKv::k_transposed): per 16 positions of one block (aligned
//      to 16, the lanes outside the tile get -inf), one head dimension at a time, the keys of the
//      16 positions are one load (q8_0: 16 quants, their sums over a group of 32 dimensions
//      then times the 16 slots' scales) and each query head's element one embedded-broadcast FMA into
//      that head's accumulator, whose lanes are then the 16 scores (w[g][t]): no reduction;
//      softmax runs across the positions' lanes, one head at a time. A group of at most 4
//      heads scores two 16-position groups in one pass (kKtPass): 8 FMA chains, not 4.
//   V: per 16 columns (32 for at most 4 heads, again 8 chains), the NQ output accumulators stay
//      in registers over the tile's rows, each row's weights broadcast straight from w.
// K transposed: a range's first tile is touched into L1; while each tile is
// computed, its FMA loops prefetch the next tile's K and V lines one at a time (LineCursor).
// K as rows: f16 and f32 rows are touched before the tile, q8_0 rows prefetched while the tile
// before is computed: see kPrefetch.
// GCC 12 reports the undefined pass-through operand of the unmasked AVX-512 intrinsics as
// uninitialized (as in gemm_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/attention_x86.h"

namespace edgelm::kernels::x86 {
namespace {

// e^x, within ~2 ulp for x in [-87.3, 88.3]; 0 below (and for NaN, -inf), e^88.3 above. The
// same polynomial as exp256 (ops_avx2_math.h), 16 lanes.
inline __m512 exp512(__m512 x) {
  const __mmask16 valid = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3f)), _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(valid, p, _mm512_castsi512_ps(e));
}

// e^x for the softmax, where x = score - running max <= 0 (or -inf / NaN, from masked lanes and
// empty ranges): exactly 0 for x < -87.3 (as exp512), NaN and -inf. Degree-6 Taylor on
// r = x - n ln2 (|r| <= ln2 / 2: relative error about 1.2e-7, plus the rounding of ln2 times n,
// which only matters for weights far below the largest) and vscalefps for the 2^n: 11
// instructions against exp512's 17, on the softmax's share of the kernel (about a quarter).
inline __m512 exp512_softmax(__m512 x) {
  const __mmask16 valid = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147180559945309f), x);  // NaN lanes: masked
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 720.0f), r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(valid, p, n);
}

inline float half_to_float(const std::byte* p) {
  uint16_t d;
  __builtin_memcpy(&d, p, sizeof d);
  return _cvtsh_ss(d);
}

// Elements [i, i + 16) of a row of the stored type (i % 8 == 0); with kTail only [i, i + 8),
// the upper 8 lanes 0. Nothing past the elements used is read.
template <KvElem T, bool kTail>
inline __m512 load16(const std::byte* row, int64_t i) {
  if constexpr (T == KvElem::f32) {
    const float* p = reinterpret_cast<const float*>(row) + i;
    return kTail ? _mm512_maskz_loadu_ps(0x00FF, p) : _mm512_loadu_ps(p);
  } else if constexpr (T == KvElem::f16) {
    const auto* p = reinterpret_cast<const __m256i*>(row + 2 * i);
    return _mm512_cvtph_ps(kTail ? _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
                                 : _mm256_loadu_si256(p));
  } else {
    const std::byte* b = row + (i / kQ8Block) * kQ8BlockBytes;
    const int64_t in = i % kQ8Block;
    if (kTail || in <= kQ8Block - 16) {  // one block
      const __m128i q = kTail ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + in))
                              : _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + in));
      return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(half_to_float(b)));
    }
    // The last 8 elements of one block and the first 8 of the next, each with its scale.
    const std::byte* b2 = b + kQ8BlockBytes;
    const __m128i q = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + in)),
                                         _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b2 + 2)));
    const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(half_to_float(b)), _mm256_set1_ps(half_to_float(b2)), 1);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
  }
}

template <bool kTail>
inline __m512 loadq(const float* p) {
  return kTail ? _mm512_maskz_loadu_ps(0x00FF, p) : _mm512_loadu_ps(p);
}

// out lane L = the sum of the lanes of in[4 * (L % 4) + L / 4]: four rounds of pairwise
// shuffle-and-add (256-bit halves, 128-bit blocks, pairs, single lanes).
inline __m512 reduce16(const __m512* in) {
  __m512 w[8], z[4], r[2];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(in[2 * i], in[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(in[2 * i], in[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int j = 0; j < 4; ++j)  // block k of z[j]: input 4j + k
    z[j] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int j = 0; j < 2; ++j)
    r[j] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * j], z[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(z[2 * j], z[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// a [2 * 8] (position p, head g at p * 8 + g) += q [NQ, D] . the rows' columns [c, c + 16).
template <KvElem T, int NQ, bool kTail>
inline void dot_step(const std::byte* r0, const std::byte* r1, int64_t col, int64_t c, int64_t D, const float* q,
                     __m512* a) {
  const __m512 k0 = load16<T, kTail>(r0, col + c);
  const __m512 k1 = load16<T, kTail>(r1, col + c);
  for (int g = 0; g < NQ; ++g) {
    const __m512 qg = loadq<kTail>(q + g * D + c);
    a[g] = _mm512_fmadd_ps(qg, k0, a[g]);
    a[8 + g] = _mm512_fmadd_ps(qg, k1, a[8 + g]);
  }
}

// acc [NQ, D] columns [j, j + 16 * C) = acc * corr + sum_t w(t, g) v_t, the weight of position t
// and head g at w[t * kTS + g * kGS]; C column chunks at once (kTail: one chunk of 8 columns).
template <KvElem T, int NQ, int C, bool kTail, int kTS, int kGS>
inline void value_step(const std::byte* const* v_rows, int32_t n, int64_t col, int64_t j, int64_t D, const float* w,
                       const float* corr, float* acc, LineCursor* pf = nullptr) {
  static_assert(!kTail || C == 1);
  __m512 o[C][NQ];
  for (int x = 0; x < C; ++x)
    for (int g = 0; g < NQ; ++g)
      o[x][g] = _mm512_mul_ps(loadq<kTail>(acc + g * D + j + 16 * x), _mm512_set1_ps(corr[g]));
  LineCursor c = LineCursor::local(pf);
  // q8_0, two chunks that are one whole block (C == 2, col + j on a block boundary): the block's
  // scale converted once for both.
  const bool q8_pair = T == KvElem::q8_0 && C == 2 && (col + j) % kQ8Block == 0;
  for (int64_t t = 0; t < n; ++t) {
    __m512 v[C];
    if (q8_pair) {
      const std::byte* b = v_rows[t] + ((col + j) / kQ8Block) * kQ8BlockBytes;
      uint16_t h;
      __builtin_memcpy(&h, b, sizeof h);
      const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
      v[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), d);
      v[C - 1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), d);
    } else {
      for (int x = 0; x < C; ++x) v[x] = load16<T, kTail>(v_rows[t], col + j + 16 * x);
    }
    // One line prefetched per chunk (q8_0: per row, its 32 columns are half a line).
    for (int x = 0; x < (T == KvElem::q8_0 ? 1 : C); ++x) c.step();
    const float* wt = w + t * kTS;
    for (int g = 0; g < NQ; ++g) {
      const __m512 wb = _mm512_set1_ps(wt[g * kGS]);
      for (int x = 0; x < C; ++x) o[x][g] = _mm512_fmadd_ps(wb, v[x], o[x][g]);
    }
  }
  LineCursor::store(pf, c);
  for (int x = 0; x < C; ++x)
    for (int g = 0; g < NQ; ++g) {
      if (kTail) {
        _mm512_mask_storeu_ps(acc + g * D + j + 16 * x, 0x00FF, o[x][g]);
      } else {
        _mm512_storeu_ps(acc + g * D + j + 16 * x, o[x][g]);
      }
    }
}

// cap * tanh(s / cap) per lane, tanh |t| as (1 - e^(-2|t|)) / (1 + e^(-2|t|)) with the sign of t.
inline __m512 softcap512(__m512 s, float cap) {
  const __m512 vcap = _mm512_set1_ps(cap);
  const __m512 t = _mm512_div_ps(s, vcap);
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i ti = _mm512_castps_si512(t);
  const __m512 abs_t = _mm512_castsi512_ps(_mm512_andnot_si512(sign_bit, ti));
  const __m512 e = exp512(_mm512_mul_ps(abs_t, _mm512_set1_ps(-2.0f)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 th = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512 signed_th =
      _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(th), _mm512_and_si512(ti, sign_bit)));
  return _mm512_mul_ps(signed_th, vcap);
}

// Floats per head of a head-major score tile: the tile's positions start up to 15 lanes into
// their first 16-position group.
constexpr int kW = kAttnTile + 16;

// All of the tile's values for the weights at w[t * kTS + g * kGS] (see value_step).
template <KvElem T, int NQ, int kTS, int kGS>
inline void values(const std::byte* const* v_rows, int32_t n, int64_t col, int64_t D, const float* w, const float* corr,
                   float* acc, LineCursor* pf = nullptr) {
  // Two column chunks at once when the group has at most 4 heads: 8 FMA chains (see kKtPass).
  constexpr int C = NQ <= 4 ? 2 : 1;
  const int64_t D16 = D & ~int64_t{15};
  int64_t j = 0;
  for (; j + 16 * C <= D16; j += 16 * C) value_step<T, NQ, C, false, kTS, kGS>(v_rows, n, col, j, D, w, corr, acc, pf);
  for (; j < D16; j += 16) value_step<T, NQ, 1, false, kTS, kGS>(v_rows, n, col, j, D, w, corr, acc, pf);
  if (D16 < D) value_step<T, NQ, 1, true, kTS, kGS>(v_rows, n, col, D16, D, w, corr, acc, pf);
}

// Groups of 16 positions scored in one pass of the head dimensions: two when a group has at most
// 4 query heads, so 8 FMA chains are in flight (4 chains wait on the FMA latency: bench_attention
// qwen35 f16_kt 1x512, 4 heads of 256 dims), else one (8 chains already; two groups of 8 heads
// measured no faster).
template <int NQ>
constexpr int kKtPass = NQ <= 4 ? 2 : 1;

// K transposed: the scores of positions [t0, t0 + n) (one tile) for NQ query heads into
// w[g][off + t], off = t0 % 16, in groups of 16 positions aligned to 16 (inside one block, as
// block_size % kAttnKtBlock == 0); the lanes of the groups outside the tile are -inf. Returns
// the number of groups. Every score is the same sum in the same order whatever the pass width.
template <KvElem T, int NQ>
int32_t scores_kt(const AttnKv& kv, int32_t t0, int32_t n, int64_t col, int64_t D, const float* q, __m512 vscale,
                  float softcap, float (*w)[kW], LineCursor* pf) {
  const KtLayout kt = kv.kt();
  const int32_t p_first = t0 & ~15, off = t0 - p_first, n_groups = (off + n + 15) / 16;
  const size_t bs = static_cast<size_t>(kv.block_size);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  // The head's keys in the block of group i's positions, and the group's first slot there.
  auto head_keys = [&](int32_t i) {
    const int32_t p = p_first + 16 * i;
    return kv.k_base + static_cast<size_t>(kv.blocks[p / kv.block_size]) * kv.block_stride + kt.span(col);
  };
  auto first_slot = [&](int32_t i) { return static_cast<size_t>((p_first + 16 * i) % kv.block_size); };
  // Groups [i, i + G): one pass over the dimensions, then the scores out.
  auto pass = [&]<int G>(int32_t i) {
    __m512 a[G][NQ];
    for (int x = 0; x < G; ++x)
      for (int g = 0; g < NQ; ++g) a[x][g] = _mm512_setzero_ps();
    LineCursor c = LineCursor::local(pf);
    if constexpr (T == KvElem::q8_0) {
      // Per group of 32 dimensions: each dimension's 16 quants (as floats) FMA'd into per-group
      // sums, which are then scaled by the 16 slots' scales into the scores: sum_g d_g (q . k_g)
      // rather than the oracle's sum of q_i (k_i d_g), the same up to float rounding.
      for (int64_t d0 = 0; d0 < D; d0 += kKtQ8Group) {
        const std::byte* quants[G];
        __m512 part[G][NQ];
        for (int x = 0; x < G; ++x) {
          quants[x] = head_keys(i + x) + kt.span(d0) + 2 * bs + first_slot(i + x);
          for (int g = 0; g < NQ; ++g) part[x][g] = _mm512_setzero_ps();
        }
        // Two dimensions a step, and one line prefetched per 32 (G == 2) or 64 bytes of quants read
        // (the cursor's branch outside the FMAs: between them GCC spilled the broadcasts).
        for (int j = 0; j < kKtQ8Group; j += 2) {
          if (G == 2 || j % 4 == 0) c.step();
#pragma GCC unroll 2
          for (int jj = j; jj < j + 2; ++jj) {
            __m512 k[G];
            for (int x = 0; x < G; ++x) {
              const __m128i q8 =
                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(quants[x] + static_cast<size_t>(jj) * bs));
              k[x] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8));
            }
            for (int g = 0; g < NQ; ++g) {
              const __m512 qb = _mm512_set1_ps(q[g * D + d0 + jj]);
              for (int x = 0; x < G; ++x) part[x][g] = _mm512_fmadd_ps(qb, k[x], part[x][g]);
            }
          }
        }
        for (int x = 0; x < G; ++x) {
          const __m512 scales = _mm512_cvtph_ps(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(head_keys(i + x) + kt.span(d0) + 2 * first_slot(i + x))));
          for (int g = 0; g < NQ; ++g) a[x][g] = _mm512_fmadd_ps(part[x][g], scales, a[x][g]);
        }
      }
    } else {
      constexpr size_t kElem = T == KvElem::f32 ? 4 : 2;
      const size_t dim_stride = bs * kElem;  // bytes from one dimension to the next
      const std::byte* keys[G];
      for (int x = 0; x < G; ++x) keys[x] = head_keys(i + x) + first_slot(i + x) * kElem;
      for (int64_t d = 0; d < D; ++d) {
        for (int x = 0; x < G; ++x) {
          const __m512 k = load16<T, false>(keys[x] + static_cast<size_t>(d) * dim_stride, 0);
          if (G == 2 || d % 2 == 0) c.step();
          for (int g = 0; g < NQ; ++g) a[x][g] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * D + d]), k, a[x][g]);
        }
      }
    }
    LineCursor::store(pf, c);
    for (int x = 0; x < G; ++x) {
      // Lane L is tile position 16 * (i + x) + L - off: inside the tile when 0 <= it < n.
      const int32_t lo = off - 16 * (i + x), hi = off + n - 16 * (i + x);
      const uint32_t below = lo <= 0 ? 0u : (1u << lo) - 1u;       // lo < 16
      const uint32_t upto = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;  // hi > 0
      const auto outside = static_cast<__mmask16>(~(upto & ~below) & 0xFFFFu);
      for (int g = 0; g < NQ; ++g) {
        __m512 s = _mm512_mul_ps(a[x][g], vscale);
        if (softcap > 0.0f) s = softcap512(s, softcap);
        _mm512_store_ps(&w[g][16 * (i + x)], _mm512_mask_mov_ps(s, outside, neg_inf));
      }
    }
  };
  int32_t i = 0;
  for (; i + kKtPass<NQ> <= n_groups; i += kKtPass<NQ>) pass.template operator()<kKtPass<NQ>>(i);
  for (; i < n_groups; ++i) pass.template operator()<1>(i);
  return n_groups;
}

// One tile (positions [t0, t0 + n), rows v_rows and, for K as rows, k_rows) for one KV head's
// group of NQ query heads (q [NQ, D]): updates the group's running max m8 [8 lanes], sum l8 [8
// lanes] and accumulator acc [NQ, D]. softcap > 0: scores soft-capped after the scale.
template <KvElem T, int NQ>
void tile_group(const AttnKv& kv, int32_t t0, const std::byte* const* k_rows, const std::byte* const* v_rows, int32_t n,
                int64_t col, int64_t D, const float* q, __m512 vscale, float softcap, float* m8, float* l8, float* acc,
                LineCursor* pf) {
  alignas(32) float corr[8];
  if (kv.k_transposed) {
    alignas(64) float w[NQ][kW];  // [head, lane of the tile's groups] scores, then weights
    const int32_t n_groups = scores_kt<T, NQ>(kv, t0, n, col, D, q, vscale, softcap, w, pf);
    alignas(32) float tmax[8] = {}, m_new[8], sums[8] = {};
    for (int g = 0; g < NQ; ++g) {
      __m512 x = _mm512_load_ps(w[g]);
      for (int32_t i = 1; i < n_groups; ++i) x = _mm512_max_ps(x, _mm512_load_ps(&w[g][16 * i]));
      tmax[g] = _mm512_reduce_max_ps(x);
    }
    const __m256 m = _mm256_load_ps(m8);
    const __m256 mn = _mm256_max_ps(m, _mm256_load_ps(tmax));
    const __m256 c = _mm512_castps512_ps256(exp512_softmax(_mm512_castps256_ps512(_mm256_sub_ps(m, mn))));
    _mm256_store_ps(m_new, mn);
    for (int g = 0; g < NQ; ++g) {
      const __m512 mg = _mm512_set1_ps(m_new[g]);
      __m512 sum = _mm512_setzero_ps();
      for (int32_t i = 0; i < n_groups; ++i) {
        const __m512 p = exp512_softmax(_mm512_sub_ps(_mm512_load_ps(&w[g][16 * i]), mg));  // -inf lanes: 0
        _mm512_store_ps(&w[g][16 * i], p);
        sum = _mm512_add_ps(sum, p);
      }
      sums[g] = _mm512_reduce_add_ps(sum);
    }
    _mm256_store_ps(l8, _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(l8), c), _mm256_load_ps(sums)));
    _mm256_store_ps(m8, mn);
    _mm256_store_ps(corr, c);
    values<T, NQ, 1, kW>(v_rows, n, col, D, &w[0][t0 % 16], corr, acc, pf);
    return;
  }
  alignas(64) float w[kAttnTile][8];  // [position in tile, head] scores, then softmax weights
  const int64_t D16 = D & ~int64_t{15};
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 tile_max = neg_inf;
  for (int32_t t = 0; t < n; t += 2) {
    const bool lone = t + 1 == n;  // the tile's last position has no partner
    const std::byte* r0 = k_rows[t];
    const std::byte* r1 = lone ? r0 : k_rows[t + 1];
    __m512 a[16];
    for (auto& x : a) x = _mm512_setzero_ps();
    for (int64_t c = 0; c < D16; c += 16) dot_step<T, NQ, false>(r0, r1, col, c, D, q, a);
    if (D16 < D) dot_step<T, NQ, true>(r0, r1, col, D16, D, q, a);
    __m512 in[16];
    for (int i = 0; i < 16; ++i) in[i] = a[4 * (i % 4) + i / 4];
    __m512 s = _mm512_mul_ps(reduce16(in), vscale);
    if (softcap > 0.0f) s = softcap512(s, softcap);
    if (lone) s = _mm512_mask_mov_ps(s, 0xFF00, neg_inf);
    _mm512_store_ps(w[t], s);  // w[t] and w[t + 1] (a lone position's partner stays in w's padding)
    tile_max = _mm512_max_ps(tile_max, s);
  }
  // Online softmax across the heads' lanes; e^(-inf) is 0 for the first tile.
  const __m256 tmax8 = _mm256_max_ps(_mm512_castps512_ps256(tile_max), _mm512_extractf32x8_ps(tile_max, 1));
  const __m256 m = _mm256_load_ps(m8);
  const __m256 m_new = _mm256_max_ps(m, tmax8);
  const __m256 c = _mm512_castps512_ps256(exp512_softmax(_mm512_castps256_ps512(_mm256_sub_ps(m, m_new))));
  const __m512 m_new16 = _mm512_broadcast_f32x8(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int32_t t = 0; t < n; t += 2) {
    const __m512 p = exp512_softmax(_mm512_sub_ps(_mm512_load_ps(w[t]), m_new16));
    _mm512_store_ps(w[t], p);
    sum = _mm512_add_ps(sum, p);
  }
  const __m256 sum8 = _mm256_add_ps(_mm512_castps512_ps256(sum), _mm512_extractf32x8_ps(sum, 1));
  _mm256_store_ps(l8, _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(l8), c), sum8));
  _mm256_store_ps(m8, m_new);
  _mm256_store_ps(corr, c);
  values<T, NQ, 8, 1>(v_rows, n, col, D, &w[0][0], corr, acc);
}

// Tiles prefetched ahead of the one computed.
constexpr int kAhead = 1;  // 2 measured no better (DRAM-bound at depth 2048)

// Row pointers (K and V) of the tile of positions [t0, min(t0 + kAttnTile, p1)).
inline int32_t tile_rows(const AttnKv& kv, int32_t t0, int32_t p1, const std::byte** k, const std::byte** v) {
  const int32_t n = p1 - t0 < kAttnTile ? p1 - t0 : kAttnTile;
  int32_t blk = t0 / kv.block_size, slot = t0 % kv.block_size;
  for (int32_t t = 0; t < n; ++t) {
    const size_t off = static_cast<size_t>(kv.blocks[blk]) * kv.block_stride + static_cast<size_t>(slot) * kv.row_bytes;
    k[t] = kv.k_base + off;
    v[t] = kv.v_base + off;
    if (++slot == kv.block_size) {
      slot = 0;
      ++blk;
    }
  }
  return n;
}

// How a tile's rows reach the cache (bench_attention on Zen 5, depth 2048 over 22 layers, one
// thread, 128-position items, per layer): f16 and f32 rows are touched (touch_rows) just before
// the tile is computed (f16: 256-306 -> 196-208 us against prefetching the next tile, 140 from
// cache); q8_0 rows (half the bytes, more work per byte) do better with the next tile
// prefetched during the current one (235-243 against 240-258). With K transposed (f16, the
// store's layout) the next tile's lines are prefetched one per step of the FMA loops instead
// (LineCursor), which keeps the misses in flight without bursts: 22x2048/split128 from DRAM
// 319-379 -> 291-300 us, 1 layer from cache unchanged (220-248), bench_attention alternating.
template <KvElem T>
constexpr bool kPrefetch = T == KvElem::q8_0;

// The bytes [b0, b1) of every row, into L2.
inline void prefetch_rows(const std::byte* const* r, int32_t n, size_t b0, size_t b1) {
  for (int32_t t = 0; t < n; ++t)
    for (size_t b = b0; b < b1; b += 64) _mm_prefetch(reinterpret_cast<const char*>(r[t] + b), _MM_HINT_T1);
}

// Tiles outermost: a tile's rows are used by every KV head before the next tile is read. The
// next tile's rows are prefetched while the current one is computed (each KV head reads a slice
// of every row, a strided pattern the hardware prefetchers do not run ahead of), spread over the
// KV heads' groups so the requests do not all queue at once.
template <KvElem T>
void partial_typed(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0, int32_t p1,
                   AttnState out) {
  const int64_t D = kv.head_dim;
  const int32_t per_kv = (gqa + kAttnGroupHeads - 1) / kAttnGroupHeads;
  const int32_t n_groups = n_kv * per_kv;
  alignas(32) float m8[kAttnMaxGroups][8], l8[kAttnMaxGroups][8];
  for (int32_t gi = 0; gi < n_groups; ++gi)
    for (int j = 0; j < 8; ++j) {
      m8[gi][j] = -__builtin_inff();
      l8[gi][j] = 0.0f;
    }
  for (int64_t i = 0; i < int64_t{n_kv} * gqa * D; i += 8) _mm256_storeu_ps(out.acc + i, _mm256_setzero_ps());
  const __m512 vscale = _mm512_set1_ps(scale);
  // Row pointers of a ring of kAhead + 1 tiles: the current one and the kAhead after it, whose
  // rows are prefetched (the one kAhead tiles ahead while the current one is computed).
  const std::byte* rows[kAhead + 1][2][kAttnTile];  // [tile % (kAhead + 1)][K, V][position in tile]
  int32_t n_rows[kAhead + 1] = {};
  for (int a = 0; a < kAhead; ++a) {
    const int32_t t = p0 + a * kAttnTile;
    if (t >= p1) break;
    n_rows[a] = tile_rows(kv, t, p1, rows[a][0], rows[a][1]);
    prefetch_rows(rows[a][0], n_rows[a], 0, kv.row_bytes);
    prefetch_rows(rows[a][1], n_rows[a], 0, kv.row_bytes);
  }
  for (int32_t t0 = p0, cur = 0; t0 < p1; t0 += kAttnTile, cur = cur == kAhead ? 0 : cur + 1) {
    const int32_t n = n_rows[cur];
    const int far = cur == 0 ? kAhead : cur - 1;  // (cur + kAhead) % (kAhead + 1)
    const bool more = t0 + kAhead * kAttnTile < p1;
    n_rows[far] = more ? tile_rows(kv, t0 + kAhead * kAttnTile, p1, rows[far][0], rows[far][1]) : 0;
    const std::byte* const* k_rows = rows[cur][0];
    const std::byte* const* v_rows = rows[cur][1];
    LineCursor cursor;
    LineCursor* pf = nullptr;
    if (kv.k_transposed) {
      if (t0 == p0) {  // the first tile is touched; each one prefetches the next from its FMA loops
        touch_k_blocks(kv, t0, n, int64_t{n_kv} * D);
        touch_rows(v_rows, n, kv.row_bytes);
      }
      if (more) {
        const int32_t f0 = t0 + kAttnTile, f1 = f0 + kAttnTile < p1 ? f0 + kAttnTile : p1;
        add_tile_runs(kv, f0, f1, int64_t{n_kv} * D, cursor);
        pf = &cursor;
      } else if (kv.prefetch_end > p1) {  // the last tile: the first of the caller's next range
        add_tile_runs(kv, p1, p1 + kAttnTile < kv.prefetch_end ? p1 + kAttnTile : kv.prefetch_end, int64_t{n_kv} * D,
                      cursor);
        pf = &cursor;
      }
    } else if (!kPrefetch<T>) {
      touch_rows(k_rows, n, kv.row_bytes);
      touch_rows(v_rows, n, kv.row_bytes);
    }
    for (int32_t h = 0, gi = 0; h < n_kv; ++h)
      for (int32_t g = 0; g < gqa; g += kAttnGroupHeads, ++gi) {
        if (kPrefetch<T> && more && !kv.k_transposed) {  // this group's share of the far tile's rows
          const size_t b0 = (kv.row_bytes * gi / n_groups) & ~size_t{63};
          const size_t b1 = gi + 1 == n_groups ? kv.row_bytes : (kv.row_bytes * (gi + 1) / n_groups) & ~size_t{63};
          prefetch_rows(rows[far][0], n_rows[far], b0, b1);
          prefetch_rows(rows[far][1], n_rows[far], b0, b1);
        }
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

constinit const AttentionKernels kAvx512Attention{Isa::avx512, &detail::attention_partial_scalar, &partial_x8};

}  // namespace edgelm::kernels::x86
