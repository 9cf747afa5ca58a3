// NEON multi-token GEMM, K formats (256-element super-blocks, Q8_K activations): Q4_K and Q5_K
// (8 sub-blocks of 32 with 6-bit scales and mins), Q6_K (16 sub-blocks of 16 with signed 8-bit
// scales). A piece of the body gemm_neon_impl.h (see there for the method and the layouts),
// compiled once per level with it; nothing else includes it.
//
// Per super-block and (row, token), as the scalar vec_dot (quants_k.cpp): the sub-block dots
// times their integer scales summed in int32 (and for Q4_K / Q5_K the mins times the activation
// sub-block sums), then the scalar kernel's float expression.
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_k.h is a piece of the body of gemm_neon.cpp only"
#endif

namespace {

// ---- Packed activations: per tile of kTok tokens, per super-block --------------------------------

struct ActQ8_K {
  int8_t qs[kTok * kQK_K];
  float d[kTok];
  int32_t bsum[kQK_K / 32][kTok];  // sums of the 32-element sub-blocks, for the mins (Q4_K, Q5_K)
};
static_assert(sizeof(ActQ8_K) % 16 == 0);

size_t q8_k_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(tiles_of(n_tok) * (cols / kQK_K)) * sizeof(ActQ8_K);
}

void q8_k_pack(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const int64_t nb = cols / kQK_K;
  std::memset(packed, 0, q8_k_packed_bytes(cols, n_tok));
  auto* dst = reinterpret_cast<ActQ8_K*>(packed);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* y = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_row_bytes);
    ActQ8_K* tile = dst + (t / kTok) * nb;
    const int i = static_cast<int>(t % kTok);
    for (int64_t b = 0; b < nb; ++b) {
      place_token<kQK_K>(tile[b].qs, i, y[b].qs);
      tile[b].d[i] = y[b].d;
      for (int j = 0; j < kQK_K / 32; ++j) tile[b].bsum[j][i] = y[b].bsums[2 * j] + y[b].bsums[2 * j + 1];
    }
  }
}

// ---- Unpacked weights, per super-block ----------------------------------------------------------

struct alignas(16) UQ4_K {  // Q4_K and Q5_K (the same scales and mins)
  int8_t q[kRows * kQK_K];
  float d[kRows];
  float dmin[kRows];
  int32_t sc[8][kRows];
  int32_t mn[8][kRows];
};
struct alignas(16) UQ6_K {
  int8_t q[kRows * kQK_K];
  float d[kRows];
  int32_t sc[16][kRows];
};

// Q4_K / Q5_K low 4 bits: per 32 quant bytes c = 0..3, the low nibbles are sub-block 2c
// (elements 64c..64c+31) and the high nibbles sub-block 2c+1. Q5_K (kFifth) adds bit 4 of
// element 32j + l from bit j of qh[l].
template <bool kFifth>
inline void unpack_k_nibbles(const uint8_t* qs, const uint8_t* qh, int8_t* q) {
  uint8x16_t h[2] = {};  // qh[0..15], qh[16..31]: l < 16, l >= 16
  if constexpr (kFifth) {
    h[0] = vld1q_u8(qh);
    h[1] = vld1q_u8(qh + 16);
  }
  for (int c = 0; c < 4; ++c)
    for (int s = 0; s < 2; ++s) {  // l in [16 s, 16 s + 16)
      const uint8x16_t v = vld1q_u8(qs + 32 * c + 16 * s);
      uint8x16_t lo = low_nibbles(v), hi = high_nibbles(v);
      if constexpr (kFifth) {
        lo = vorrq_u8(lo, fifth_bit(h[s], vdupq_n_u8(static_cast<uint8_t>(1u << (2 * c)))));
        hi = vorrq_u8(hi, fifth_bit(h[s], vdupq_n_u8(static_cast<uint8_t>(1u << (2 * c + 1)))));
      }
      vst1q_s8(q + 64 * c + 16 * s, vreinterpretq_s8_u8(lo));
      vst1q_s8(q + 64 * c + 32 + 16 * s, vreinterpretq_s8_u8(hi));
    }
}

inline void unpack_q4_k(const BlockQ4_K& x, int8_t* q) { unpack_k_nibbles<false>(x.qs, nullptr, q); }  // [0, 15]
inline void unpack_q5_k(const BlockQ5_K& x, int8_t* q) { unpack_k_nibbles<true>(x.qs, x.qh, q); }      // [0, 31]

inline void unpack_q6_k(const BlockQ6_K& x, int8_t* q) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f), two = vdupq_n_u8(0x03);
  const int8x16_t m32 = vdupq_n_s8(32);
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 2; ++s) {  // l in [16 s, 16 s + 16)
      const uint8x16_t l0 = vld1q_u8(x.ql + 64 * h + 16 * s), l1 = vld1q_u8(x.ql + 64 * h + 32 + 16 * s);
      const uint8x16_t hb = vld1q_u8(x.qh + 32 * h + 16 * s);
      const uint8x16_t k4[4] = {
          vorrq_u8(vandq_u8(l0, low4), vshlq_n_u8(vandq_u8(hb, two), 4)),
          vorrq_u8(vandq_u8(l1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), two), 4)),
          vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), two), 4)),
          vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
      };
      for (int k = 0; k < 4; ++k) vst1q_s8(q + 128 * h + 32 * k + 16 * s, vsubq_s8(vreinterpretq_s8_u8(k4[k]), m32));
    }
}

// ---- Q4_K, Q5_K ---------------------------------------------------------------------------------

size_t k_min_scratch_bytes(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(UQ4_K); }

// Per super-block, as the scalar kernel: qsum = sum_j sc_j dot_j and msum = sum_j m_j bsum_j in
// int32, then d dy qsum - dmin dy msum. BX: BlockQ4_K or BlockQ5_K, Unpack its quants.
template <typename BX, void (*Unpack)(const BX&, int8_t*)>
void k_min_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
               int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  auto* u = reinterpret_cast<UQ4_K*>(scratch);
  const auto* act = reinterpret_cast<const ActQ8_K*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const BX* rows[kRows];
    group_rows(w, g, n_rows, rows);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK_K];
      for (int r = 0; r < kRows; ++r) {
        const BX& x = rows[r][b];
        Unpack(x, q[r]);
        u[b].d[r] = fp16_to_fp32(x.d);
        u[b].dmin[r] = fp16_to_fp32(x.dmin);
        for (int j = 0; j < 8; ++j) {
          uint8_t sc = 0, mn = 0;
          k4_get_scale_min(j, x.scales, &sc, &mn);
          u[b].sc[j][r] = sc;
          u[b].mn[j][r] = mn;
        }
      }
      const int8_t* qr[kRows] = {q[0], q[1], q[2], q[3]};
      interleave(qr, kQK_K, u[b].q);
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const ActQ8_K* a = act + (t0 / kTok) * nb;
      float32x4_t f[kTok];
      for (float32x4_t& v : f) v = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        int32x4_t qs[kTok], ms[kTok];
        for (int t = 0; t < kTok; ++t) qs[t] = ms[t] = vdupq_n_s32(0);
        // |sc dot| <= 63 * 32 * 31 * 127 per sub-block: |qsum| < 2^26 (Q5_K; Q4_K < 2^25)
        for (int j = 0; j < 8; ++j) {
          int32x4_t isum[kTok];
          subblock<32, kQK_K>(u[b].q + 4 * 32 * j, a[b].qs, 32 * j, isum);
          const int32x4_t sc = vld1q_s32(u[b].sc[j]), mn = vld1q_s32(u[b].mn[j]);
          for (int t = 0; t < kTok; ++t) {
            qs[t] = vmlaq_s32(qs[t], isum[t], sc);
            ms[t] = vmlaq_n_s32(ms[t], mn, a[b].bsum[j][t]);
          }
        }
        const float32x4_t d = vld1q_f32(u[b].d), dmin = vld1q_f32(u[b].dmin);
        for (int t = 0; t < kTok; ++t) {
          f[t] = vfmaq_f32(f[t], vcvtq_f32_s32(qs[t]), vmulq_n_f32(d, a[b].d[t]));
          f[t] = vfmsq_f32(f[t], vcvtq_f32_s32(ms[t]), vmulq_n_f32(dmin, a[b].d[t]));
        }
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) store_rows(out + (t0 + t) * ldo + g, f[t], n_rows);
    }
  }
}

// ---- Q6_K ---------------------------------------------------------------------------------------

size_t q6_k_scratch_bytes(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(UQ6_K); }

// Per super-block: qsum = sum_j sc_j dot_j over 16 sub-blocks of 16 (|qsum| < 2^28), d dy qsum.
void q6_k_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
              int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  auto* u = reinterpret_cast<UQ6_K*>(scratch);
  const auto* act = reinterpret_cast<const ActQ8_K*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const BlockQ6_K* rows[kRows];
    group_rows(w, g, n_rows, rows);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK_K];
      for (int r = 0; r < kRows; ++r) {
        const BlockQ6_K& x = rows[r][b];
        unpack_q6_k(x, q[r]);
        u[b].d[r] = fp16_to_fp32(x.d);
        for (int j = 0; j < 16; ++j) u[b].sc[j][r] = x.scales[j];
      }
      const int8_t* qr[kRows] = {q[0], q[1], q[2], q[3]};
      interleave(qr, kQK_K, u[b].q);
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const ActQ8_K* a = act + (t0 / kTok) * nb;
      float32x4_t f[kTok];
      for (float32x4_t& v : f) v = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        int32x4_t qs[kTok];
        for (int32x4_t& v : qs) v = vdupq_n_s32(0);
        for (int j = 0; j < 16; ++j) {
          int32x4_t isum[kTok];
          subblock<16, kQK_K>(u[b].q + 4 * 16 * j, a[b].qs, 16 * j, isum);
          const int32x4_t sc = vld1q_s32(u[b].sc[j]);
          for (int t = 0; t < kTok; ++t) qs[t] = vmlaq_s32(qs[t], isum[t], sc);
        }
        const float32x4_t d = vld1q_f32(u[b].d);
        for (int t = 0; t < kTok; ++t) f[t] = vfmaq_f32(f[t], vcvtq_f32_s32(qs[t]), vmulq_n_f32(d, a[b].d[t]));
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) store_rows(out + (t0 + t) * ldo + g, f[t], n_rows);
    }
  }
}

}  // namespace
