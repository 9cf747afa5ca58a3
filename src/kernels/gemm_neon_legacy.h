// NEON multi-token GEMM, legacy formats (32-element blocks): Q8_0, Q4_0, Q5_0 with Q8_0
// activations, Q4_1 and Q5_1 with Q8_1 activations. A piece of the body gemm_neon_impl.h (see
// there for the method and the layouts), compiled once per level with it; nothing else includes it.
//
// Per block and (row, token), as the scalar vec_dot (quants_legacy.cpp): the exact int32 sum of
// the quants' products, times dx * dy; the formats with a minimum (x = d q + m) add m * s, s
// being the activation block's stored fp16 dy * sum(y) (Q8_1), so that the min needs no pass
// over the activation quants.
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_legacy.h is a piece of the body of gemm_neon.cpp only"
#endif

namespace {

// ---- Packed activations: per tile of kTok tokens, per block ------------------------------------

struct ActQ8_0 {
  int8_t qs[kTok * kQK];
  float d[kTok];
};
struct ActQ8_1 {
  int8_t qs[kTok * kQK];
  float d[kTok];
  float s[kTok];  // Q8_1's s (fp16 of dy * sum(qs)), for the mins of Q4_1 / Q5_1
};
static_assert(sizeof(ActQ8_0) % 16 == 0 && sizeof(ActQ8_1) % 16 == 0);

// The weight formats whose activations are Q8_1 are those with a minimum.
template <typename Act>
constexpr bool kWithMin = std::is_same_v<Act, ActQ8_1>;

template <typename Act>
size_t legacy_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(tiles_of(n_tok) * (cols / kQK)) * sizeof(Act);
}

// BY: the activation block (BlockQ8_0 or BlockQ8_1), Act its packed form.
template <typename BY, typename Act>
void legacy_pack(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const int64_t nb = cols / kQK;
  std::memset(packed, 0, legacy_packed_bytes<Act>(cols, n_tok));  // padding tokens: zero quants, scale, s
  auto* dst = reinterpret_cast<Act*>(packed);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* y = reinterpret_cast<const BY*>(act + static_cast<size_t>(t) * act_row_bytes);
    Act* tile = dst + (t / kTok) * nb;
    const int i = static_cast<int>(t % kTok);
    for (int64_t b = 0; b < nb; ++b) {
      place_token<kQK>(tile[b].qs, i, y[b].qs);
      tile[b].d[i] = fp16_to_fp32(y[b].d);
      if constexpr (kWithMin<Act>) tile[b].s[i] = fp16_to_fp32(y[b].s);
    }
  }
}

// ---- Unpacked weights ---------------------------------------------------------------------------

struct alignas(16) UQ32 {
  int8_t q[kRows * kQK];
  float d[kRows];
  float m[kRows];  // Q4_1 / Q5_1 minimum; unused by the others
};

// One row's block -> its 32 quants in element order (low nibbles are elements 0..15, high
// nibbles 16..31; Q5's 5th bit of element j is bit j of the little-endian qh).
inline void unpack_q8_0(const BlockQ8_0& x, int8_t* q) { std::memcpy(q, x.qs, kQK); }

inline void unpack_q4_0(const BlockQ4_0& x, int8_t* q) {  // q - 8 in [-8, 7]
  const uint8x16_t v = vld1q_u8(x.qs);
  const int8x16_t eight = vdupq_n_s8(8);
  vst1q_s8(q, vsubq_s8(vreinterpretq_s8_u8(low_nibbles(v)), eight));
  vst1q_s8(q + 16, vsubq_s8(vreinterpretq_s8_u8(high_nibbles(v)), eight));
}

inline void unpack_q4_1(const BlockQ4_1& x, int8_t* q) {  // q in [0, 15]
  const uint8x16_t v = vld1q_u8(x.qs);
  vst1q_s8(q, vreinterpretq_s8_u8(low_nibbles(v)));
  vst1q_s8(q + 16, vreinterpretq_s8_u8(high_nibbles(v)));
}

// The 5-bit quants q in [0, 31] of a Q5_0 / Q5_1 block: lo = elements 0..15, hi = 16..31.
inline void q5_quants(const uint8_t qs[kQK / 2], const uint8_t qh[4], uint8x16_t* lo, uint8x16_t* hi) {
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit);
  // Element j (< 16) tests bit j % 8 of qh[j / 8]; element 16 + j of qh[2 + j / 8].
  const uint8x16_t h01 = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
  const uint8x16_t h23 = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
  const uint8x16_t v = vld1q_u8(qs);
  *lo = vorrq_u8(low_nibbles(v), fifth_bit(h01, bit));
  *hi = vorrq_u8(high_nibbles(v), fifth_bit(h23, bit));
}

inline void unpack_q5_0(const BlockQ5_0& x, int8_t* q) {  // q - 16 in [-16, 15]
  uint8x16_t lo, hi;
  q5_quants(x.qs, x.qh, &lo, &hi);
  const int8x16_t sixteen = vdupq_n_s8(16);
  vst1q_s8(q, vsubq_s8(vreinterpretq_s8_u8(lo), sixteen));
  vst1q_s8(q + 16, vsubq_s8(vreinterpretq_s8_u8(hi), sixteen));
}

inline void unpack_q5_1(const BlockQ5_1& x, int8_t* q) {  // q in [0, 31]
  uint8x16_t lo, hi;
  q5_quants(x.qs, x.qh, &lo, &hi);
  vst1q_s8(q, vreinterpretq_s8_u8(lo));
  vst1q_s8(q + 16, vreinterpretq_s8_u8(hi));
}

// ---- The GEMM -------------------------------------------------------------------------------------

size_t legacy_scratch_bytes(int64_t cols) { return static_cast<size_t>(cols / kQK) * sizeof(UQ32); }

// BX: the weight block, Act: the packed activations (ActQ8_1 for the formats with a minimum).
template <typename BX, typename Act, void (*Unpack)(const BX&, int8_t*)>
void legacy_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch) {
  constexpr bool kMin = kWithMin<Act>;
  const int64_t nb = w.cols / kQK;
  auto* u = reinterpret_cast<UQ32*>(scratch);
  const auto* act = reinterpret_cast<const Act*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const BX* rows[kRows];
    group_rows(w, g, n_rows, rows);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK];
      for (int r = 0; r < kRows; ++r) {
        const BX& x = rows[r][b];
        Unpack(x, q[r]);
        u[b].d[r] = fp16_to_fp32(x.d);
        if constexpr (kMin) u[b].m[r] = fp16_to_fp32(x.m);
      }
      const int8_t* qr[kRows] = {q[0], q[1], q[2], q[3]};
      interleave(qr, kQK, u[b].q);
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const Act* a = act + (t0 / kTok) * nb;
      float32x4_t f[kTok];
      for (float32x4_t& v : f) v = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        int32x4_t isum[kTok];
        subblock<kQK, kQK>(u[b].q, a[b].qs, 0, isum);
        const float32x4_t dw = vld1q_f32(u[b].d);
        for (int t = 0; t < kTok; ++t) f[t] = vfmaq_f32(f[t], vcvtq_f32_s32(isum[t]), vmulq_n_f32(dw, a[b].d[t]));
        if constexpr (kMin) {  // + m s: the min times the activation block's dy sum(y)
          const float32x4_t mw = vld1q_f32(u[b].m);
          for (int t = 0; t < kTok; ++t) f[t] = vfmaq_n_f32(f[t], mw, a[b].s[t]);
        }
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) store_rows(out + (t0 + t) * ldo + g, f[t], n_rows);
    }
  }
}

}  // namespace
