// Multi-token GEMM (gemm.h) for AArch64: the body of the three NEON variants, included by
// gemm_neon.cpp once per variant inside its own namespace, each under its own instruction set:
//  - EDGELM_NEON_GEMM_LEVEL 0: baseline ARMv8.0 (vmull_s8 products, vpadalq_s16 into int32);
//  - 1: +dotprod (SDOT, vdotq_laneq_s32: 4 products of every lane summed into it);
//  - 2: +i8mm (SMMLA, vmmlaq_s32: a 2x8 by 8x2 int8 product into a 2x2 int32 tile).
// Nothing else may include it; only gemm_neon.cpp's tables reach it, after the CPU check.
//
// Why not vec_dot per (row, token): every token would unpack every weight block again and end
// each block in a float conversion and a scaled add. Here a group of kRows = 4 weight rows is
// unpacked once per matmul into signed bytes (the formats' offsets subtracted: Q4_0 q - 8, Q6_K
// q - 32; Q4_K nibbles 0..15) and interleaved so that one register serves all 4 rows:
//  - levels 0 and 1: register k of a sub-block holds elements 4k..4k+3 of rows 0..3 (one row per
//    32-bit lane); a token's 4 activations are broadcast (level 0: ld1r) or picked by lane
//    (level 1: SDOT by element), so one instruction advances the sums of all 4 rows;
//  - level 2: register (c, p) holds elements 8c..8c+7 of rows 2p and 2p+1; the activations of two
//    tokens are interleaved the same way (pack()), and one SMMLA gives 2 tokens x 2 rows.
// Every sub-block's sum is an exact int32 (int8 x int8 products, at most 32 of them, into
// int32), and every weight block then costs one float conversion and one FMA for 4 rows x 1
// token. K formats combine their sub-block sums with the integer sub-block scales (and mins
// with the activations' block sums) in int32 first, exactly as the scalar kernel does, then
// evaluate the scalar kernel's float expression per super-block. The results differ from the
// scalar vec_dot by float reassociation of the per-block terms only (tests/kernels/neon_selftest.cpp).
//
// F32 keeps float lanes: 4 rows x 4 tokens of 4-column FMAs, one reduction per (row, token).
//
// Tiles: kTok = 4 tokens per tile; pack() pads the last tile with zero tokens (scale 0), whose
// outputs are never stored. Rows: any range; a last group of fewer than 4 rows repeats its last
// row and stores only the rows it has.
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_impl.h is the body of gemm_neon.cpp only"
#endif

namespace {

constexpr int kRows = 4;  // weight rows per group (one per 32-bit lane)
constexpr int kTok = 4;   // tokens per tile
constexpr bool kMmla = EDGELM_NEON_GEMM_LEVEL == 2;

// ---- Packed activations: per tile of kTok tokens, per block -------------------------------------

// qs layouts (kBlk elements per token):
//  - levels 0, 1: [kTok tokens][kBlk];
//  - level 2: [kTok / 2 pairs][kBlk / 8 chunks][2 tokens][8].
struct ActQ8_0 {
  int8_t qs[kTok * kQK];
  float d[kTok];
};
struct ActQ8_K {
  int8_t qs[kTok * kQK_K];
  float d[kTok];
  int32_t bsum[kQK_K / 32][kTok];  // sums of the 32-element sub-blocks, for the mins (Q4_K)
};
static_assert(sizeof(ActQ8_0) % 16 == 0 && sizeof(ActQ8_K) % 16 == 0);

template <int kBlk>
void place_token(int8_t* qs, int t, const int8_t* src) {
  if constexpr (!kMmla) {
    std::memcpy(qs + t * kBlk, src, kBlk);
  } else {
    int8_t* pair = qs + (t / 2) * 2 * kBlk + (t % 2) * 8;
    for (int c = 0; c < kBlk / 8; ++c) std::memcpy(pair + 16 * c, src + 8 * c, 8);
  }
}

int64_t tiles_of(int64_t n_tok) { return (n_tok + kTok - 1) / kTok; }

size_t q8_0_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(tiles_of(n_tok) * (cols / kQK)) * sizeof(ActQ8_0);
}

void q8_0_pack(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const int64_t nb = cols / kQK;
  std::memset(packed, 0, q8_0_packed_bytes(cols, n_tok));  // padding tokens: zero quants, zero scale
  auto* dst = reinterpret_cast<ActQ8_0*>(packed);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* y = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_row_bytes);
    ActQ8_0* tile = dst + (t / kTok) * nb;
    const int i = static_cast<int>(t % kTok);
    for (int64_t b = 0; b < nb; ++b) {
      place_token<kQK>(tile[b].qs, i, y[b].qs);
      tile[b].d[i] = fp16_to_fp32(y[b].d);
    }
  }
}

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

// ---- Unpacked weights of one group of kRows rows, per block --------------------------------------

// q layouts (kBlk elements per row, 4 * kBlk bytes; the elements from e on start at q + 4 e):
//  - levels 0, 1: [kBlk / 4 dwords][kRows rows][4];
//  - level 2: [kBlk / 8 chunks][kRows / 2 pairs][2 rows][8].
struct alignas(16) UQ32 {
  int8_t q[kRows * kQK];
  float d[kRows];
};
struct alignas(16) UQ4_K {
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

// Rows r[0..3] of n bytes each (n a multiple of 16, in element order) -> the group layout.
void interleave(const int8_t* const r[kRows], int n, int8_t* dst) {
  for (int e = 0; e < n; e += 16, dst += 64) {
    const int32x4_t a = vreinterpretq_s32_s8(vld1q_s8(r[0] + e)), b = vreinterpretq_s32_s8(vld1q_s8(r[1] + e));
    const int32x4_t c = vreinterpretq_s32_s8(vld1q_s8(r[2] + e)), d = vreinterpretq_s32_s8(vld1q_s8(r[3] + e));
    if constexpr (!kMmla) {  // 4x4 transpose of dwords
      const int64x2_t ab0 = vreinterpretq_s64_s32(vzip1q_s32(a, b)), cd0 = vreinterpretq_s64_s32(vzip1q_s32(c, d));
      const int64x2_t ab1 = vreinterpretq_s64_s32(vzip2q_s32(a, b)), cd1 = vreinterpretq_s64_s32(vzip2q_s32(c, d));
      vst1q_s8(dst, vreinterpretq_s8_s64(vzip1q_s64(ab0, cd0)));
      vst1q_s8(dst + 16, vreinterpretq_s8_s64(vzip2q_s64(ab0, cd0)));
      vst1q_s8(dst + 32, vreinterpretq_s8_s64(vzip1q_s64(ab1, cd1)));
      vst1q_s8(dst + 48, vreinterpretq_s8_s64(vzip2q_s64(ab1, cd1)));
    } else {  // 8-byte halves of row pairs
      const int64x2_t a6 = vreinterpretq_s64_s32(a), b6 = vreinterpretq_s64_s32(b);
      const int64x2_t c6 = vreinterpretq_s64_s32(c), d6 = vreinterpretq_s64_s32(d);
      vst1q_s8(dst, vreinterpretq_s8_s64(vzip1q_s64(a6, b6)));
      vst1q_s8(dst + 16, vreinterpretq_s8_s64(vzip1q_s64(c6, d6)));
      vst1q_s8(dst + 32, vreinterpretq_s8_s64(vzip2q_s64(a6, b6)));
      vst1q_s8(dst + 48, vreinterpretq_s8_s64(vzip2q_s64(c6, d6)));
    }
  }
}

// ---- The integer kernel: one sub-block of kN elements, 4 rows x kTok tokens -----------------------

// wq: the group's q from element e on (block base + 4 e); aq: the tile's block qs (kBlk elements
// per token). isum[t] lane r = exact sum over the sub-block of w[r][i] * a[t][i].
template <int kN, int kBlk>
inline void subblock(const int8_t* wq, const int8_t* aq, int e, int32x4_t isum[kTok]) {
  static_assert(kN % 16 == 0);
#if EDGELM_NEON_GEMM_LEVEL == 0
  int8x16_t w[kN / 4];
  for (int k = 0; k < kN / 4; ++k) w[k] = vld1q_s8(wq + 16 * k);
  for (int t = 0; t < kTok; ++t) {
    const int8_t* a = aq + t * kBlk + e;
    int32x4_t lo = vdupq_n_s32(0), hi = lo;  // lanes: rows 0, 0, 1, 1 / 2, 2, 3, 3
    for (int k = 0; k < kN / 4; ++k) {
      int32_t a4;
      std::memcpy(&a4, a + 4 * k, 4);
      const int8x8_t b = vreinterpret_s8_s32(vdup_n_s32(a4));
      lo = vpadalq_s16(lo, vmull_s8(vget_low_s8(w[k]), b));  // |p| <= 2^14: pairs fit int16
      hi = vpadalq_s16(hi, vmull_s8(vget_high_s8(w[k]), b));
    }
    isum[t] = vpaddq_s32(lo, hi);
  }
#elif EDGELM_NEON_GEMM_LEVEL == 1
  int8x16_t w[kN / 4];
  for (int k = 0; k < kN / 4; ++k) w[k] = vld1q_s8(wq + 16 * k);
  for (int t = 0; t < kTok; ++t) {
    const int8_t* a = aq + t * kBlk + e;
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < kN / 16; ++j) {
      const int8x16_t y = vld1q_s8(a + 16 * j);
      acc = vdotq_laneq_s32(acc, w[4 * j], y, 0);
      acc = vdotq_laneq_s32(acc, w[4 * j + 1], y, 1);
      acc = vdotq_laneq_s32(acc, w[4 * j + 2], y, 2);
      acc = vdotq_laneq_s32(acc, w[4 * j + 3], y, 3);
    }
    isum[t] = acc;
  }
#else
  int8x16_t w0[kN / 8], w1[kN / 8];  // rows 0, 1 / rows 2, 3
  for (int c = 0; c < kN / 8; ++c) {
    w0[c] = vld1q_s8(wq + 32 * c);
    w1[c] = vld1q_s8(wq + 32 * c + 16);
  }
  for (int p = 0; p < kTok / 2; ++p) {
    const int8_t* a = aq + p * 2 * kBlk + 2 * e;
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = acc0;  // lanes: t0 r0, t0 r1, t1 r0, t1 r1 (r2, r3)
    for (int c = 0; c < kN / 8; ++c) {
      const int8x16_t y = vld1q_s8(a + 16 * c);
      acc0 = vmmlaq_s32(acc0, y, w0[c]);
      acc1 = vmmlaq_s32(acc1, y, w1[c]);
    }
    const int64x2_t s0 = vreinterpretq_s64_s32(acc0), s1 = vreinterpretq_s64_s32(acc1);
    isum[2 * p] = vreinterpretq_s32_s64(vzip1q_s64(s0, s1));
    isum[2 * p + 1] = vreinterpretq_s32_s64(vzip2q_s64(s0, s1));
  }
#endif
}

// ---- Per-format unpacking of one row's block into element order ----------------------------------

inline void unpack_q8_0(const BlockQ8_0& x, int8_t* q, float* d) {
  std::memcpy(q, x.qs, kQK);
  *d = fp16_to_fp32(x.d);
}

inline void unpack_q4_0(const BlockQ4_0& x, int8_t* q, float* d) {
  const uint8x16_t v = vld1q_u8(x.qs);
  const int8x16_t eight = vdupq_n_s8(8);
  vst1q_s8(q, vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), eight));
  vst1q_s8(q + 16, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight));
  *d = fp16_to_fp32(x.d);
}

inline void unpack_q4_k(const BlockQ4_K& x, int8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t v = vld1q_u8(x.qs + 32 * c + 16 * h);
      vst1q_s8(q + 64 * c + 16 * h, vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))));
      vst1q_s8(q + 64 * c + 32 + 16 * h, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)));
    }
}

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

// ---- Output -------------------------------------------------------------------------------------

inline void store_rows(float* out, float32x4_t v, int n_rows) {
  if (n_rows == kRows) {
    vst1q_f32(out, v);
    return;
  }
  float tmp[kRows];
  vst1q_f32(tmp, v);
  for (int r = 0; r < n_rows; ++r) out[r] = tmp[r];
}

// ---- Legacy formats (32-element blocks, Q8_0 activations) ----------------------------------------

template <typename BX, void (*Unpack)(const BX&, int8_t*, float*)>
size_t legacy_scratch_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQK) * sizeof(UQ32);
}

template <typename BX, void (*Unpack)(const BX&, int8_t*, float*)>
void legacy_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK;
  auto* u = reinterpret_cast<UQ32*>(scratch);
  const auto* act = reinterpret_cast<const ActQ8_0*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const BX* rows[kRows];
    for (int r = 0; r < kRows; ++r)
      rows[r] = reinterpret_cast<const BX*>(w.data + static_cast<size_t>(g + (r < n_rows ? r : n_rows - 1)) * w.row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK];
      for (int r = 0; r < kRows; ++r) Unpack(rows[r][b], q[r], &u[b].d[r]);
      const int8_t* qr[kRows] = {q[0], q[1], q[2], q[3]};
      interleave(qr, kQK, u[b].q);
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const ActQ8_0* a = act + (t0 / kTok) * nb;
      float32x4_t f[kTok];
      for (float32x4_t& v : f) v = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        int32x4_t isum[kTok];
        subblock<kQK, kQK>(u[b].q, a[b].qs, 0, isum);
        const float32x4_t dw = vld1q_f32(u[b].d);
        for (int t = 0; t < kTok; ++t) f[t] = vfmaq_f32(f[t], vcvtq_f32_s32(isum[t]), vmulq_n_f32(dw, a[b].d[t]));
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) store_rows(out + (t0 + t) * ldo + g, f[t], n_rows);
    }
  }
}

// ---- K formats (256-element super-blocks, Q8_K activations) --------------------------------------

size_t q4_k_scratch_bytes(int64_t cols) { return static_cast<size_t>(cols / kQK_K) * sizeof(UQ4_K); }

// Per super-block, as the scalar kernel: qsum = sum_j sc_j dot_j and msum = sum_j m_j bsum_j in
// int32, then d dy qsum - dmin dy msum.
void q4_k_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
              int64_t ldo, uint8_t* scratch) {
  const int64_t nb = w.cols / kQK_K;
  auto* u = reinterpret_cast<UQ4_K*>(scratch);
  const auto* act = reinterpret_cast<const ActQ8_K*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const BlockQ4_K* rows[kRows];
    for (int r = 0; r < kRows; ++r)
      rows[r] = reinterpret_cast<const BlockQ4_K*>(w.data +
                                                   static_cast<size_t>(g + (r < n_rows ? r : n_rows - 1)) * w.row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK_K];
      for (int r = 0; r < kRows; ++r) {
        const BlockQ4_K& x = rows[r][b];
        unpack_q4_k(x, q[r]);
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
        for (int j = 0; j < 8; ++j) {  // |sc dot| <= 63 * 32 * 15 * 127 per sub-block: |qsum| < 2^25
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
    for (int r = 0; r < kRows; ++r)
      rows[r] = reinterpret_cast<const BlockQ6_K*>(w.data +
                                                   static_cast<size_t>(g + (r < n_rows ? r : n_rows - 1)) * w.row_bytes);
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

// ---- F32 (float activations) ---------------------------------------------------------------------

// Packed: the activation rows as they are, the last tile padded with zero rows: [tiles * kTok][cols].
size_t f32_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(tiles_of(n_tok) * kTok * cols) * sizeof(float);
}

void f32_pack(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  std::memset(packed, 0, f32_packed_bytes(cols, n_tok));
  for (int64_t t = 0; t < n_tok; ++t)
    std::memcpy(packed + static_cast<size_t>(t * cols) * sizeof(float), act + static_cast<size_t>(t) * act_row_bytes,
                static_cast<size_t>(cols) * sizeof(float));
}

size_t f32_scratch_bytes(int64_t) { return 0; }

// 4 rows x 4 tokens of float lanes (4 columns each) per step, reduced once at the end; the
// columns past the last multiple of 4 are added in scalar order after the reduction.
void f32_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
             int64_t ldo, uint8_t*) {
  const int64_t cols = w.cols, c4 = cols / 4 * 4;
  const auto* x = reinterpret_cast<const float*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const float* rows[kRows];
    for (int r = 0; r < kRows; ++r)
      rows[r] = reinterpret_cast<const float*>(w.data +
                                               static_cast<size_t>(g + (r < n_rows ? r : n_rows - 1)) * w.row_bytes);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const float* xt = x + t0 * cols;
      float32x4_t acc[kRows][kTok];
      for (auto& a : acc)
        for (float32x4_t& v : a) v = vdupq_n_f32(0.0f);
      for (int64_t i = 0; i < c4; i += 4) {
        float32x4_t wr[kRows], xv[kTok];
        for (int r = 0; r < kRows; ++r) wr[r] = vld1q_f32(rows[r] + i);
        for (int t = 0; t < kTok; ++t) xv[t] = vld1q_f32(xt + t * cols + i);
        for (int r = 0; r < kRows; ++r)
          for (int t = 0; t < kTok; ++t) acc[r][t] = vfmaq_f32(acc[r][t], wr[r], xv[t]);
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) {
        float32x4_t v = vpaddq_f32(vpaddq_f32(acc[0][t], acc[1][t]), vpaddq_f32(acc[2][t], acc[3][t]));
        if (c4 < cols) {
          float tail[kRows] = {};
          for (int r = 0; r < kRows; ++r)
            for (int64_t i = c4; i < cols; ++i) tail[r] += rows[r][i] * xt[t * cols + i];
          v = vaddq_f32(v, vld1q_f32(tail));
        }
        store_rows(out + (t0 + t) * ldo + g, v, n_rows);
      }
    }
  }
}

}  // namespace

// The GEMM rows of this variant (gemm_neon.cpp gathers them into the tables).
constexpr GemmKernel kGemms[kNeonGemmCount] = {
    {DType::q8_0, q8_0_packed_bytes, q8_0_pack, legacy_scratch_bytes<BlockQ8_0, unpack_q8_0>,
     legacy_run<BlockQ8_0, unpack_q8_0>},
    {DType::q4_0, q8_0_packed_bytes, q8_0_pack, legacy_scratch_bytes<BlockQ4_0, unpack_q4_0>,
     legacy_run<BlockQ4_0, unpack_q4_0>},
    {DType::q4_k, q8_k_packed_bytes, q8_k_pack, q4_k_scratch_bytes, q4_k_run},
    {DType::q6_k, q8_k_packed_bytes, q8_k_pack, q6_k_scratch_bytes, q6_k_run},
    {DType::f32, f32_packed_bytes, f32_pack, f32_scratch_bytes, f32_run},
};
