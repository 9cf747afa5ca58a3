// AVX2 + FMA + F16C attention kernel (see attention_kernels.h), under the rules of
// kernels_x86.h: compiled with per-file -mavx2 -mfma -mf16c, everything in an anonymous
// namespace, only intrinsics and static helpers, the one external symbol a constinit table that
// attention_kernels() hands out after the CPU check.
//
// Per tile of kAttnTile positions (head_dim % 8 == 0, NQ <= 8 query heads of one KV head):
//   K: each row's head slice is loaded 8 elements at a time in its stored type (f32 load, f16
//      vcvtph2ps, q8_0 int8 -> f32 times the block scale) and FMA'd into NQ accumulators, one per
//      query head, so the row is read once for the whole group; the NQ sums are reduced into one
//      vector whose lane g is head g's score.
//   softmax: max, rescale and exp run across the heads' lanes, one vector per position.
//   V: per 8 columns, the NQ output accumulators stay in registers over the tile's rows.
#include <immintrin.h>

#include <cstdint>

#include "kernels/attention_x86.h"
#include "kernels/ops_avx2_math.h"

namespace edgelm::kernels::x86 {
namespace {

constexpr int kQ8Block = 32;        // elements per q8_0 block
constexpr int kQ8BlockBytes = 34;   // fp16 scale + 32 int8

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

template <KvElem T, int NQ>
void partial(const AttnKv& kv, const float* q, int32_t /*n_q*/, float scale, int32_t p0, int32_t p1, AttnState out) {
  const int64_t D = kv.head_dim;
  const int64_t c0 = kv.col0;
  for (int64_t i = 0; i < NQ * D; i += 8) _mm256_storeu_ps(out.acc + i, _mm256_setzero_ps());
  __m256 m = _mm256_set1_ps(-__builtin_inff());
  __m256 l = _mm256_setzero_ps();
  bool first = true;
  alignas(32) float w[kAttnTile][8];  // [position in tile, head] scores, then softmax weights
  alignas(32) float corr[8];
  const std::byte* k_rows[kAttnTile];
  const std::byte* v_rows[kAttnTile];
  for (int32_t t0 = p0; t0 < p1; t0 += kAttnTile) {
    const int32_t n = p1 - t0 < kAttnTile ? p1 - t0 : kAttnTile;
    int32_t blk = t0 / kv.block_size, slot = t0 % kv.block_size;
    for (int32_t t = 0; t < n; ++t) {
      const size_t off =
          static_cast<size_t>(kv.blocks[blk]) * kv.block_stride + static_cast<size_t>(slot) * kv.row_bytes;
      k_rows[t] = kv.k_base + off;
      v_rows[t] = kv.v_base + off;
      if (++slot == kv.block_size) {
        slot = 0;
        ++blk;
      }
    }
    // Scores: [n, NQ] in w.
    const __m256 vscale = _mm256_set1_ps(scale);
    __m256 tile_max = _mm256_set1_ps(-__builtin_inff());
    for (int32_t t = 0; t < n; ++t) {
      __m256 acc[NQ];
      for (int g = 0; g < NQ; ++g) acc[g] = _mm256_setzero_ps();
      for (int64_t c = 0; c < D; c += 8) {
        const __m256 k = load8<T>(k_rows[t], c0 + c);
        for (int g = 0; g < NQ; ++g) acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * D + c), k, acc[g]);
      }
      const __m256 s = _mm256_mul_ps(reduce_heads<NQ>(acc), vscale);
      _mm256_store_ps(w[t], s);
      tile_max = _mm256_max_ps(tile_max, s);
    }
    // Online softmax across the heads' lanes.
    const __m256 m_new = _mm256_max_ps(m, tile_max);
    const __m256 c = first ? _mm256_setzero_ps() : exp256(_mm256_sub_ps(m, m_new));
    __m256 sum = _mm256_setzero_ps();
    for (int32_t t = 0; t < n; ++t) {
      const __m256 p = exp256(_mm256_sub_ps(_mm256_load_ps(w[t]), m_new));
      _mm256_store_ps(w[t], p);
      sum = _mm256_add_ps(sum, p);
    }
    l = _mm256_add_ps(_mm256_mul_ps(l, c), sum);
    m = m_new;
    _mm256_store_ps(corr, c);
    first = false;
    // Values: acc = acc * corr + sum_t w[t] v_t, 8 columns at a time.
    for (int64_t col = 0; col < D; col += 8) {
      __m256 o[NQ];
      for (int g = 0; g < NQ; ++g)
        o[g] = _mm256_mul_ps(_mm256_loadu_ps(out.acc + g * D + col), _mm256_broadcast_ss(&corr[g]));
      for (int32_t t = 0; t < n; ++t) {
        const __m256 v = load8<T>(v_rows[t], c0 + col);
        for (int g = 0; g < NQ; ++g) o[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(&w[t][g]), v, o[g]);
      }
      for (int g = 0; g < NQ; ++g) _mm256_storeu_ps(out.acc + g * D + col, o[g]);
    }
  }
  alignas(32) float ms[8], ls[8];
  _mm256_store_ps(ms, m);
  _mm256_store_ps(ls, l);
  for (int g = 0; g < NQ; ++g) {
    out.m[g] = ms[g];
    out.l[g] = ls[g];
  }
}

template <KvElem T>
void partial_type(const AttnKv& kv, const float* q, int32_t n_q, float scale, int32_t p0, int32_t p1, AttnState out) {
  switch (n_q) {
    case 1: return partial<T, 1>(kv, q, n_q, scale, p0, p1, out);
    case 2: return partial<T, 2>(kv, q, n_q, scale, p0, p1, out);
    case 3: return partial<T, 3>(kv, q, n_q, scale, p0, p1, out);
    case 4: return partial<T, 4>(kv, q, n_q, scale, p0, p1, out);
    case 5: return partial<T, 5>(kv, q, n_q, scale, p0, p1, out);
    case 6: return partial<T, 6>(kv, q, n_q, scale, p0, p1, out);
    case 7: return partial<T, 7>(kv, q, n_q, scale, p0, p1, out);
    default: return partial<T, 8>(kv, q, n_q, scale, p0, p1, out);
  }
}

void partial_x8(const AttnKv& kv, const float* q, int32_t n_q, float scale, int32_t p0, int32_t p1, AttnState out) {
  switch (kv.type) {
    case KvElem::f32: return partial_type<KvElem::f32>(kv, q, n_q, scale, p0, p1, out);
    case KvElem::f16: return partial_type<KvElem::f16>(kv, q, n_q, scale, p0, p1, out);
    case KvElem::q8_0: return partial_type<KvElem::q8_0>(kv, q, n_q, scale, p0, p1, out);
  }
}

}  // namespace

constinit const AttentionKernels kAvx2Attention{Isa::avx2, &detail::attention_partial_scalar, &partial_x8};

}  // namespace edgelm::kernels::x86
