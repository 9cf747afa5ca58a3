// NEON attention kernel (see attention_kernels.h) for AArch64: baseline ARMv8.0 Advanced SIMD
// only (mandatory on AArch64, so this file needs no extra flags and no CPU check; built only
// where src/kernels/CMakeLists.txt defines EDGELM_HAVE_NEON_KERNELS). attention_kernels(neon)
// hands it out for head_dim % 8 == 0 (partial_x8); other head sizes run the scalar kernel.
//
// The algorithm is the scalar oracle's, per tile of kAttnTile positions, for each KV head and
// each group of NQ <= 8 of its query heads:
//   K transposed (AttnKv::k_transposed): per 16 positions of one block (aligned to 16;
//      lanes outside the tile get -inf) and 4 query heads, 4 head dimensions at a time: the 4
//      query elements of each head are one register, and for each dimension the keys of the 16
//      positions (4 registers, converted from f16 or from q8_0 quants times their slots' scales
//      as they are loaded) are multiplied by a lane of it (FMLA by element) into 16 accumulators
//      whose lanes are the scores: no horizontal sums.
//   K as rows (block sizes not a multiple of 16; q8_0 heads not whole groups of 32): each row's
//      head slice is loaded 4 elements at a time and FMA'd into NQ accumulators, one per query
//      head (the row read once for the group), each reduced with one horizontal add.
//   softmax: per head, the tile max, m' = max(m, tile max), the weights e^(s - m') (a polynomial
//      exp as the x86 kernels use) and their sum.
//   V: per 16 columns and up to 4 heads, 16 accumulators over the tile's rows, each row's 4
//      column registers converted once for the 4 heads (FMLA by a scalar weight).
// Results differ from the scalar kernel by float reassociation only (tests/kernels/neon_selftest.cpp).
#include "kernels/attention_neon.h"
#include "kernels/attention_groups.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/neon_math.h"

namespace edgelm::kernels::neon {
namespace {

// Elements [i, i + 4) of a row of the stored type (i % 4 == 0; q8_0: inside one block).
template <KvElem T>
inline float32x4_t load4(const std::byte* row, int64_t i) {
  if constexpr (T == KvElem::f32) {
    return vld1q_f32(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (T == KvElem::f16) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + i)));
  } else {
    const std::byte* b = row + (i / kQ8Block) * kQ8BlockBytes;
    uint16_t d;
    std::memcpy(&d, b, sizeof d);
    int32_t four;  // exactly the 4 quants: nothing past the block is read
    std::memcpy(&four, b + 2 + i % kQ8Block, sizeof four);
    const int16x8_t q16 = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(four)));
    return vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q16))), fp16_to_fp32(d));
  }
}

inline float capped(float s, float softcap) { return softcap > 0.0f ? softcap * std::tanh(s / softcap) : s; }

// Floats per head of a score tile: the tile's positions start up to 15 lanes into their first
// 16-position group (K transposed).
constexpr int kW = kAttnTile + 16;

// K as rows: w[g][t] = the scores of the tile's n rows for NQ query heads (q [NQ, D]).
template <KvElem T, int NQ>
void scores_rows(const std::byte* const* k_rows, int32_t n, int64_t col, int64_t D, const float* q, float scale,
                 float softcap, float (*w)[kW]) {
  for (int32_t t = 0; t < n; ++t) {
    float32x4_t a[NQ];
    for (int g = 0; g < NQ; ++g) a[g] = vdupq_n_f32(0.0f);
    for (int64_t c = 0; c < D; c += 4) {
      const float32x4_t k = load4<T>(k_rows[t], col + c);
      for (int g = 0; g < NQ; ++g) a[g] = vfmaq_f32(a[g], vld1q_f32(q + g * D + c), k);
    }
    for (int g = 0; g < NQ; ++g) w[g][t] = capped(vaddvq_f32(a[g]) * scale, softcap);
  }
}

// One head dimension of scores16: the 16 keys k[0..4) times lane J of each head's query register.
template <int HN, int J>
inline void fma_dim(float32x4_t (*a)[4], const float32x4_t* k, const float32x4_t* qv) {
  for (int g = 0; g < HN; ++g)
    for (int v = 0; v < 4; ++v) a[g][v] = vfmaq_laneq_f32(a[g][v], k[v], qv[g], J);
}

// K transposed, 16 positions ([D dimensions] x 16 adjacent positions at keys, dim_stride bytes
// apart) for HN <= 4 query heads (q [HN, D]): w[g][0..16) = the scores, lanes outside [lo, hi)
// -inf.
// The 16 keys of positions [slot, slot + 16) of a transposed block (KtLayout) for element d of
// the head whose keys start at head: f32 / f16 loaded, q8_0 quants times the slots' scales of
// their group (s: those scales, loaded by the caller once per group).
template <KvElem T>
inline void keys16(const std::byte* head, size_t slot, size_t bs, int64_t d, const float32x4_t* s, float32x4_t* k) {
  if constexpr (T == KvElem::q8_0) {
    const std::byte* group = head + static_cast<size_t>(d / kKtQ8Group) * (2 + kKtQ8Group) * bs;
    const int8x16_t q8 =
        vld1q_s8(reinterpret_cast<const int8_t*>(group + 2 * bs + static_cast<size_t>(d % kKtQ8Group) * bs + slot));
    const int16x8_t lo = vmovl_s8(vget_low_s8(q8)), hi = vmovl_s8(vget_high_s8(q8));
    k[0] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), s[0]);
    k[1] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), s[1]);
    k[2] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), s[2]);
    k[3] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), s[3]);
  } else {
    constexpr size_t kElem = T == KvElem::f32 ? 4 : 2;
    const std::byte* kd = head + (static_cast<size_t>(d) * bs + slot) * kElem;
    for (int v = 0; v < 4; ++v) k[v] = load4<T>(kd + 4 * v * kElem, 0);
  }
}

template <KvElem T, int HN>
void scores16(const std::byte* head, size_t slot, size_t bs, int64_t D, const float* q, float scale, float softcap,
              int32_t lo, int32_t hi, float (*w)[kW]) {
  float32x4_t a[HN][4];
  for (int g = 0; g < HN; ++g)
    for (int v = 0; v < 4; ++v) a[g][v] = vdupq_n_f32(0.0f);
  float32x4_t s[4] = {};  // q8_0: the slots' scales of the current group
  for (int64_t d = 0; d < D; d += 4) {
    if (T == KvElem::q8_0 && d % kKtQ8Group == 0) {
      const std::byte* group = head + static_cast<size_t>(d / kKtQ8Group) * (2 + kKtQ8Group) * bs;
      for (int v = 0; v < 4; ++v) s[v] = load4<KvElem::f16>(group + 2 * slot, 4 * v);
    }
    float32x4_t qv[HN];
    for (int g = 0; g < HN; ++g) qv[g] = vld1q_f32(q + g * D + d);
    float32x4_t k[4][4];
    for (int j = 0; j < 4; ++j) keys16<T>(head, slot, bs, d + j, s, k[j]);
    fma_dim<HN, 0>(a, k[0], qv);
    fma_dim<HN, 1>(a, k[1], qv);
    fma_dim<HN, 2>(a, k[2], qv);
    fma_dim<HN, 3>(a, k[3], qv);
  }
  for (int g = 0; g < HN; ++g)
    for (int v = 0; v < 4; ++v) {
      float s[4];
      vst1q_f32(s, vmulq_n_f32(a[g][v], scale));
      for (int x = 0; x < 4; ++x) {
        const int lane = 4 * v + x;
        w[g][lane] = lane < lo || lane >= hi ? -INFINITY : capped(s[x], softcap);
      }
    }
}

// K transposed: the scores of positions [t0, t0 + n) for NQ query heads into w[g][t0 % 16 + t]
// (whole 16-position groups; the lanes outside the tile -inf); returns the lanes written per head.
template <KvElem T, int NQ>
int32_t scores_kt(const AttnKv& kv, int32_t t0, int32_t n, int64_t col, int64_t D, const float* q, float scale,
                  float (*w)[kW]) {
  const int32_t p_first = t0 & ~15, off = t0 - p_first, n_groups = (off + n + 15) / 16;
  const auto bs = static_cast<size_t>(kv.block_size);
  for (int32_t i = 0; i < n_groups; ++i) {
    const int32_t p = p_first + 16 * i;
    const std::byte* head =
        kv.k_base + static_cast<size_t>(kv.blocks[p / kv.block_size]) * kv.block_stride + kv.kt().span(col);
    const auto slot = static_cast<size_t>(p % kv.block_size);
    const int32_t lo = off - 16 * i, hi = off + n - 16 * i;
    auto* wi = reinterpret_cast<float(*)[kW]>(&w[0][16 * i]);
    if constexpr (NQ >= 4) scores16<T, 4>(head, slot, bs, D, q, scale, kv.softcap, lo, hi, wi);
    if constexpr (NQ >= 8) scores16<T, 4>(head, slot, bs, D, q + 4 * D, scale, kv.softcap, lo, hi, wi + 4);
    constexpr int kRest = NQ % 4, kDone = NQ - kRest;
    if constexpr (kRest > 0)
      scores16<T, kRest>(head, slot, bs, D, q + kDone * D, scale, kv.softcap, lo, hi, wi + kDone);
  }
  return 16 * n_groups;
}

// Heads [g0, g0 + HN), columns [j, j + 4C): acc = acc * corr + sum_t w[g][t] v_t, the HN * C
// accumulators in registers over the tile's rows.
template <KvElem T, int HN, int C>
void values_block(const std::byte* const* v_rows, int32_t n, int64_t col, int64_t j, int64_t D, int g0,
                  const float (*w)[kW], const float* corr, float* acc) {
  float32x4_t o[HN][C];
  for (int h = 0; h < HN; ++h)
    for (int c = 0; c < C; ++c) o[h][c] = vmulq_n_f32(vld1q_f32(acc + (g0 + h) * D + j + 4 * c), corr[g0 + h]);
  for (int32_t t = 0; t < n; ++t) {
    float32x4_t v[C];
    for (int c = 0; c < C; ++c) v[c] = load4<T>(v_rows[t], col + j + 4 * c);
    for (int h = 0; h < HN; ++h) {
      const float wt = w[g0 + h][t];
      for (int c = 0; c < C; ++c) o[h][c] = vfmaq_n_f32(o[h][c], v[c], wt);
    }
  }
  for (int h = 0; h < HN; ++h)
    for (int c = 0; c < C; ++c) vst1q_f32(acc + (g0 + h) * D + j + 4 * c, o[h][c]);
}

template <KvElem T, int HN>
void values_heads(const std::byte* const* v_rows, int32_t n, int64_t col, int64_t D, int g0, const float (*w)[kW],
                  const float* corr, float* acc) {
  int64_t j = 0;
  for (; j + 16 <= D; j += 16) values_block<T, HN, 4>(v_rows, n, col, j, D, g0, w, corr, acc);
  if (j + 8 <= D) {
    values_block<T, HN, 2>(v_rows, n, col, j, D, g0, w, corr, acc);
    j += 8;
  }
  if (j < D) values_block<T, HN, 1>(v_rows, n, col, j, D, g0, w, corr, acc);
}

// One tile (positions [t0, t0 + n), rows k_rows / v_rows) for one KV head's group of NQ query
// heads (q [NQ, D]): updates the group's running max m [NQ], sum l [NQ] and acc [NQ, D].
template <KvElem T, int NQ>
void tile_group(const AttnKv& kv, int32_t t0, const std::byte* const* k_rows, const std::byte* const* v_rows, int32_t n,
                int64_t col, int64_t D, const float* q, float scale, float* m, float* l, float* acc) {
  alignas(16) float w[NQ][kW];
  int32_t off = 0, lanes = n;  // w[g][off + t] is position t0 + t; [0, lanes) written
  if (kv.k_transposed) {
    off = t0 % 16;
    lanes = scores_kt<T, NQ>(kv, t0, n, col, D, q, scale, w);
  } else {
    scores_rows<T, NQ>(k_rows, n, col, D, q, scale, kv.softcap, w);
  }
  float corr[NQ];
  for (int g = 0; g < NQ; ++g) {
    float tile_max = -INFINITY;
    for (int32_t t = 0; t < n; ++t) tile_max = w[g][off + t] > tile_max ? w[g][off + t] : tile_max;
    const float m_new = m[g] > tile_max ? m[g] : tile_max;
    corr[g] = std::isinf(m[g]) ? 0.0f : std::exp(m[g] - m_new);
    const float32x4_t mv = vdupq_n_f32(m_new);
    float32x4_t sum = vdupq_n_f32(0.0f);
    int32_t i = 0;
    for (; i + 4 <= lanes; i += 4) {  // whole vectors; -inf lanes give 0
      const float32x4_t p = exp4(vsubq_f32(vld1q_f32(&w[g][i]), mv));
      vst1q_f32(&w[g][i], p);
      sum = vaddq_f32(sum, p);
    }
    float s = vaddvq_f32(sum);
    for (; i < lanes; ++i) {
      w[g][i] = std::exp(w[g][i] - m_new);
      s += w[g][i];
    }
    l[g] = l[g] * corr[g] + s;
    m[g] = m_new;
  }
  const auto* wt = reinterpret_cast<const float(*)[kW]>(&w[0][off]);
  constexpr int kFirst = NQ < 4 ? NQ : 4, kSecond = NQ - kFirst;
  values_heads<T, kFirst>(v_rows, n, col, D, 0, wt, corr, acc);
  if constexpr (kSecond > 0) values_heads<T, kSecond>(v_rows, n, col, D, 4, wt, corr, acc);
}

template <KvElem T>
void partial_typed(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0, int32_t p1,
                   AttnState out) {
  const int64_t D = kv.head_dim;
  for (int32_t j = 0; j < n_kv * gqa; ++j) {
    out.m[j] = -INFINITY;
    out.l[j] = 0.0f;
  }
  std::memset(out.acc, 0,
              static_cast<size_t>(n_kv) * static_cast<size_t>(gqa) * static_cast<size_t>(D) * sizeof(float));
  const std::byte* rows[2][kAttnTile];  // [K, V][position in tile]
  for (int32_t t0 = p0; t0 < p1; t0 += kAttnTile) {
    const int32_t n = p1 - t0 < kAttnTile ? p1 - t0 : kAttnTile;
    for (int32_t t = 0; t < n; ++t) {
      const size_t o = kv.offset(t0 + t);
      rows[0][t] = kv.k_base + o;
      rows[1][t] = kv.v_base + o;
    }
    for (int32_t h = 0; h < n_kv; ++h)
      for (int32_t g = 0; g < gqa; g += kAttnGroupHeads) {
        const int64_t j = int64_t{h} * gqa + g;
        const int64_t col = kv.col0 + h * D;
        with_group_heads(gqa - g < kAttnGroupHeads ? gqa - g : kAttnGroupHeads, [&]<int NQ>() {
          tile_group<T, NQ>(kv, t0, rows[0], rows[1], n, col, D, q + j * D, scale, out.m + j, out.l + j,
                            out.acc + j * D);
        });
      }
  }
}

void partial_x8(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0, int32_t p1,
                AttnState out) {
  with_kv_elem(kv.type, [&]<KvElem T>() { partial_typed<T>(kv, q, n_kv, gqa, scale, p0, p1, out); });
}

}  // namespace

constinit const AttentionKernels kNeonAttention{Isa::neon, &detail::attention_partial_scalar, &partial_x8};

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
