// The scalar attention kernel (the oracle), the fold and finish of partial states, and the
// choice of kernels by ISA (see attention_kernels.h).
#include "kernels/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "kernels/attention_neon.h"
#if defined(EDGELM_HAVE_X86_KERNELS)
#include "kernels/attention_x86.h"
#endif
#include "kernels/fp16.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {
namespace {

// Element i of a row of the stored type.
float row_elem(KvElem type, const std::byte* row, int64_t i) {
  switch (type) {
    case KvElem::f32: {
      float x;
      std::memcpy(&x, row + 4 * i, sizeof x);
      return x;
    }
    case KvElem::f16: {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, sizeof h);
      return fp16_to_fp32(h);
    }
    case KvElem::q8_0: {
      const std::byte* b = row + static_cast<size_t>(i / kQK) * sizeof(BlockQ8_0);
      uint16_t d;
      std::memcpy(&d, b, sizeof d);
      const auto q = static_cast<int8_t>(b[2 + i % kQK]);
      return static_cast<float>(q) * fp16_to_fp32(d);  // as q8_0_to_float: q * d
    }
  }
  return 0.0f;
}

// Element i of the K row of position pos, in either K layout (AttnKv::k_transposed).
float k_elem(const AttnKv& kv, int32_t pos, int64_t i) {
  if (!kv.k_transposed) return row_elem(kv.type, kv.k_base + kv.offset(pos), i);
  const std::byte* block = kv.k_base + static_cast<size_t>(kv.blocks[pos / kv.block_size]) * kv.block_stride;
  const int32_t slot = pos % kv.block_size;
  if (kv.type != KvElem::q8_0) return row_elem(kv.type, block, i * kv.block_size + slot);
  uint16_t d;
  std::memcpy(&d, block + kv.kt().q8_scale(i, slot), sizeof d);
  const auto q = static_cast<int8_t>(block[kv.kt().elem(i, slot)]);
  return static_cast<float>(q) * fp16_to_fp32(d);  // as row_elem
}

constexpr AttentionKernels kScalarAttention{Isa::scalar, &detail::attention_partial_scalar,
                                            &detail::attention_partial_scalar};

}  // namespace

namespace detail {

// One KV head (the slice at kv.col0), n_q <= kAttnGroupHeads query heads.
static void partial_one_head(const AttnKv& kv, const float* q, int32_t n_q, float scale, int32_t p0, int32_t p1,
                             AttnState out) {
  const int64_t D = kv.head_dim;
  for (int32_t h = 0; h < n_q; ++h) {
    out.m[h] = -std::numeric_limits<float>::infinity();
    out.l[h] = 0.0f;
  }
  std::fill(out.acc, out.acc + n_q * D, 0.0f);
  float s[kAttnGroupHeads][kAttnTile];  // [head, position in tile] scores, then weights
  for (int32_t t0 = p0; t0 < p1; t0 += kAttnTile) {
    const int32_t n = std::min(kAttnTile, p1 - t0);
    for (int32_t t = 0; t < n; ++t) {
      for (int32_t h = 0; h < n_q; ++h) {
        float dot = 0.0f;
        for (int64_t i = 0; i < D; ++i) dot += q[h * D + i] * k_elem(kv, t0 + t, kv.col0 + i);
        s[h][t] = dot * scale;
        if (kv.softcap > 0.0f) s[h][t] = kv.softcap * std::tanh(s[h][t] / kv.softcap);
      }
    }
    for (int32_t h = 0; h < n_q; ++h) {
      float tile_max = s[h][0];
      for (int32_t t = 1; t < n; ++t) tile_max = std::max(tile_max, s[h][t]);
      const float m_new = std::max(out.m[h], tile_max);
      const float corr = std::isinf(out.m[h]) ? 0.0f : std::exp(out.m[h] - m_new);
      float sum = 0.0f;
      for (int32_t t = 0; t < n; ++t) {
        s[h][t] = std::exp(s[h][t] - m_new);
        sum += s[h][t];
      }
      out.l[h] = out.l[h] * corr + sum;
      out.m[h] = m_new;
      for (int64_t i = 0; i < D; ++i) out.acc[h * D + i] *= corr;
    }
    for (int32_t t = 0; t < n; ++t) {
      const std::byte* row = kv.v_base + kv.offset(t0 + t);
      for (int64_t i = 0; i < D; ++i) {
        const float x = row_elem(kv.type, row, kv.col0 + i);
        for (int32_t h = 0; h < n_q; ++h) out.acc[h * D + i] += s[h][t] * x;
      }
    }
  }
}

void attention_partial_scalar(const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa, float scale, int32_t p0,
                              int32_t p1, AttnState out) {
  const int64_t D = kv.head_dim;
  for (int32_t h = 0; h < n_kv; ++h) {
    AttnKv one = kv;
    one.col0 = kv.col0 + h * D;
    for (int32_t g = 0; g < gqa; g += kAttnGroupHeads) {
      const int64_t j = int64_t{h} * gqa + g;
      partial_one_head(one, q + j * D, std::min(kAttnGroupHeads, gqa - g), scale, p0, p1,
                       AttnState{out.m + j, out.l + j, out.acc + j * D});
    }
  }
}

}  // namespace detail

const AttentionKernels* attention_kernels(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  switch (isa) {
    case Isa::avx2:
    case Isa::avxvnni:
#if defined(EDGELM_HAVE_X86_KERNELS)
      return &x86::kAvx2Attention;
#else
      return nullptr;
#endif
    case Isa::avx512:
    case Isa::amx:
#if defined(EDGELM_HAVE_X86_KERNELS)
      return &x86::kAvx512Attention;  // amx implies avx512 (isa.h)
#else
      return nullptr;
#endif
    case Isa::neon:
#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
      return &neon::kNeonAttention;
#else
      return nullptr;  // not reached: isa_supported(neon) is false off AArch64
#endif
    case Isa::scalar: return &kScalarAttention;
  }
  return nullptr;
}

const AttentionKernels& active_attention_kernels() {
  static const AttentionKernels* const k = attention_kernels(active_isa());
  return *k;
}

void attention_partial(const AttentionKernels& k, const AttnKv& kv, const float* q, int32_t n_kv, int32_t gqa,
                       float scale, int32_t p0, int32_t p1, AttnState out) {
  EDGELM_CHECK(p0 >= 0 && p0 < p1 && n_kv >= 1 && gqa >= 1, "attention_partial: bad range [", p0, ", ", p1,
               ") or heads ", n_kv, " x ", gqa);
  const AttnPartialFn fn = kv.head_dim % 8 == 0 ? k.partial_x8 : k.partial;
  const int64_t D = kv.head_dim;
  const int32_t groups_per_kv = (gqa + kAttnGroupHeads - 1) / kAttnGroupHeads;
  EDGELM_CHECK(groups_per_kv <= kAttnMaxGroups, "attention_partial: ", gqa, " query heads per KV head");
  const int32_t kv_per_call = kAttnMaxGroups / groups_per_kv;
  for (int32_t h = 0; h < n_kv; h += kv_per_call) {
    AttnKv part = kv;
    part.col0 = kv.col0 + h * D;
    const int64_t j = int64_t{h} * gqa;
    fn(part, q + j * D, std::min(kv_per_call, n_kv - h), gqa, scale, p0, p1,
       AttnState{out.m + j, out.l + j, out.acc + j * D});
  }
}

void attention_fold(int32_t n_q, int32_t head_dim, AttnState state, const float* m, const float* l, const float* acc) {
  for (int32_t h = 0; h < n_q; ++h) {
    const float m_new = std::max(state.m[h], m[h]);
    // e^0 is 1 exactly: the side that holds the max skips the exp.
    const float ca = state.l[h] > 0.0f ? (state.m[h] == m_new ? 1.0f : std::exp(state.m[h] - m_new)) : 0.0f;
    const float cb = l[h] > 0.0f ? (m[h] == m_new ? 1.0f : std::exp(m[h] - m_new)) : 0.0f;
    float* a = state.acc + static_cast<int64_t>(h) * head_dim;
    const float* b = acc + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < head_dim; ++i) a[i] = a[i] * ca + b[i] * cb;
    state.l[h] = state.l[h] * ca + l[h] * cb;
    state.m[h] = m_new;
  }
}

void attention_finish(int32_t n_q, int32_t head_dim, const float* l, const float* acc, float* out) {
  for (int32_t h = 0; h < n_q; ++h) {
    const float inv = 1.0f / l[h];
    for (int32_t i = 0; i < head_dim; ++i) out[h * head_dim + i] = acc[h * head_dim + i] * inv;
  }
}

}  // namespace edgelm::kernels
