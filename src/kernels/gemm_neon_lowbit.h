// NEON multi-token GEMM, low-bit formats: Q2_K, Q3_K, IQ4_XS, TQ2_0, TQ1_0 (256-element
// super-blocks, Q8_K activations) and IQ4_NL, MXFP4 (32-element blocks, Q8_0 activations). A piece
// of the body gemm_neon_impl.h (see there for the method and the layouts), compiled once per level
// with it, after gemm_neon_k.h and gemm_neon_legacy.h (it reuses their packed activations ActQ8_K,
// ActQ8_0 and the legacy packing); nothing else includes it.
//
// Each group of kRows weight rows is unpacked once per matmul into signed bytes (Q2_K q in [0, 3],
// Q3_K q in [-4, 3], IQ4_* the codebook values in [-127, 113], TQ* q - 1 in [-1, 1], MXFP4 the
// doubled E2M1 values in [-12, 12]) plus the integer sub-block scales and the float block scales;
// the level's integer tiles (subblock()) then serve every token tile. Per super-block and
// (row, token), as the scalar vec_dot: the sub-block dots times their integer scales summed in
// int32 (Q2_K: and the mins times the activations' 16-element sums), then d dy qsum (- dmin dy
// msum); per 32-element block, d dy isum. Results differ from the scalar vec_dot by float
// reassociation of the per-block terms only. Q2_K, Q3_K, TQ2_0, TQ1_0 and IQ4_XS also have
// load-time packed forms (FmtQ2_K, FmtQ3_K, FmtTQ2_0, FmtTQ1_0, FmtIQ4_XS below, on
// gemm_neon_packed.h's method: bit-identical to the scalar vec_dot; IQ4_NL's and MXFP4's are in
// gemm_neon_packed.h), which a loaded model uses unless EDGELM_PACK=0.
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_lowbit.h is a piece of the body of gemm_neon.cpp only"
#endif

namespace {

// ---- Packed activations of Q2_K: Q8_K with the 16 sums of 16 elements (its mins' sub-blocks) ----

struct ActQ8_K16 {
  int8_t qs[kTok * kQK_K];
  float d[kTok];
  int32_t bsum[kQK_K / 16][kTok];
};
static_assert(sizeof(ActQ8_K16) % 16 == 0);

size_t q8_k16_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(tiles_of(n_tok) * (cols / kQK_K)) * sizeof(ActQ8_K16);
}

void q8_k16_pack(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const int64_t nb = cols / kQK_K;
  std::memset(packed, 0, q8_k16_packed_bytes(cols, n_tok));  // padding tokens: zero quants, scale, sums
  auto* dst = reinterpret_cast<ActQ8_K16*>(packed);
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* y = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_row_bytes);
    ActQ8_K16* tile = dst + (t / kTok) * nb;
    const int i = static_cast<int>(t % kTok);
    for (int64_t b = 0; b < nb; ++b) {
      place_token<kQK_K>(tile[b].qs, i, y[b].qs);
      tile[b].d[i] = y[b].d;
      for (int j = 0; j < kQK_K / 16; ++j) tile[b].bsum[j][i] = y[b].bsums[j];
    }
  }
}

// ---- Unpacking one row's block ------------------------------------------------------------------

// The integer sub-block scales and mins and the float scales of one row's super-block.
struct LowRowScales {
  float d = 0.0f, dmin = 0.0f;
  int32_t sc[16] = {}, mn[16] = {};
};

// The 2-bit field s (0..3) of every byte of v.
inline uint8x16_t lb_field2(uint8x16_t v, int s) {
  return vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-2 * s))), vdupq_n_u8(3));
}

// Q2_K / Q3_K / TQ2_0 2-bit quants: element 128h + 32s + l is field s of qs[32h + l]; `add`
// (a byte per element, in element order, or null) is added and `sub` subtracted.
inline void lb_unpack_2bit(const uint8_t* qs, const uint8x16_t* add, int8_t sub, int8_t* q) {
  const int8x16_t off = vdupq_n_s8(sub);
  for (int h = 0; h < 2; ++h)
    for (int half = 0; half < 2; ++half) {
      const uint8x16_t v = vld1q_u8(qs + 32 * h + 16 * half);
      for (int s = 0; s < 4; ++s) {
        const int e = 128 * h + 32 * s + 16 * half;
        uint8x16_t f = lb_field2(v, s);
        if (add != nullptr) f = vorrq_u8(f, add[e / 16]);
        vst1q_s8(q + e, vsubq_s8(vreinterpretq_s8_u8(f), off));
      }
    }
}

struct Q2KFormat {
  using Block = BlockQ2_K;
  using Act = ActQ8_K16;
  static constexpr int kSub = 16;
  static constexpr bool kScaled = true, kMin = true;
  static void unpack(const Block& x, int8_t* q, LowRowScales& s) {  // q in [0, 3]
    lb_unpack_2bit(x.qs, nullptr, 0, q);
    s.d = fp16_to_fp32(x.d);
    s.dmin = fp16_to_fp32(x.dmin);
    for (int j = 0; j < 16; ++j) {
      s.sc[j] = x.scales[j] & 0x0f;
      s.mn[j] = x.scales[j] >> 4;
    }
  }
};

struct Q3KFormat {
  using Block = BlockQ3_K;
  using Act = ActQ8_K;
  static constexpr int kSub = 16;
  static constexpr bool kScaled = true, kMin = false;
  static void unpack(const Block& x, int8_t* q, LowRowScales& s) {  // q in [-4, 3]
    // 4 where bit e / 32 of hmask[e % 32] is set, per 16 elements e.
    const uint8x16_t hm[2] = {vld1q_u8(x.hmask), vld1q_u8(x.hmask + 16)};
    uint8x16_t add[16];
    for (int k = 0; k < 16; ++k)
      add[k] = vandq_u8(vtstq_u8(hm[k % 2], vdupq_n_u8(static_cast<uint8_t>(1u << (k / 2)))), vdupq_n_u8(4));
    lb_unpack_2bit(x.qs, add, 4, q);
    s.d = fp16_to_fp32(x.d);
    int8_t sc[16];
    q3_k_unpack_scales(x.scales, sc);
    for (int j = 0; j < 16; ++j) s.sc[j] = sc[j] - 32;
  }
};

// ---- Load-time packed Q3_K and Q2_K (gemm_neon_packed.h's method) ------------------------------

// Chunk j (32 elements of the 4 rows, 8 registers) holds sub-blocks 2j, 2j + 1 as the group
// layout orders them; the stored bit widths are kept: a 2-bit plane (2 registers, pack_top2
// with shift 0) and, for Q3_K, the third bit (pack_bit4 of bit 2).
struct PQ3_K {
  uint8_t lo[8][2 * 16];
  uint8_t hi[8][16];
  int8_t sc[16][kRows];  // ls - 32
  uint16_t d[kRows];
};
struct PQ2_K {
  uint8_t qs[8][2 * 16];
  uint8_t scm[16][kRows];  // scale | min << 4, as stored
  uint16_t d[kRows];
  uint16_t dmin[kRows];
};
static_assert(sizeof(PQ3_K) == 456 && sizeof(PQ2_K) == kRows * sizeof(BlockQ2_K));

template <typename F>
void lowk_signed_quants(const typename F::Block& x, int8_t* q) {
  LowRowScales unused;
  F::unpack(x, q, unused);
}

struct FmtQ3_K {
  using BX = BlockQ3_K;
  using PB = PQ3_K;
  using Act = ActQ8_K;
  static constexpr int64_t kBlock = kQK_K;
  static constexpr int kChunks = 8;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) {
    alignas(16) int8_t u[kRows * kQK_K];
    group_block<BX, kQK_K, lowk_signed_quants<Q3KFormat>>(rows, b, u);  // q in [-4, 3]
    for (int j = 0; j < 8; ++j) {
      pack_top2<4, 0>(u + 128 * j, o.lo[j]);
      pack_bit4<4, 2>(u + 128 * j, o.hi[j]);
    }
    for (int r = 0; r < kRows; ++r) {
      int8_t sc[16];
      q3_k_unpack_scales(rows[r][b].scales, sc);
      o.d[r] = rows[r][b].d;
      for (int j = 0; j < 16; ++j) o.sc[j][r] = static_cast<int8_t>(sc[j] - 32);
    }
  }
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    uint8x16_t r[8];
    load_two_bits(w.lo[j], r);
    add_bit2(w.hi[j], r);
    to_signed<4>(r, q);
  }
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    k16_tile<FmtQ3_K, T>(wb, nb, a, f, pre);
  }
};

// Q2_K: q in [0, 3], per 16-element sub-block a 4-bit scale and a 4-bit min (times the
// activations' 16-element sums), then (d dy) qsum - (dmin dy) msum, as the scalar vec_dot.
struct FmtQ2_K {
  using BX = BlockQ2_K;
  using PB = PQ2_K;
  using Act = ActQ8_K16;
  static constexpr int64_t kBlock = kQK_K;
  static constexpr int kChunks = 8;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) {
    alignas(16) int8_t u[kRows * kQK_K];
    group_block<BX, kQK_K, lowk_signed_quants<Q2KFormat>>(rows, b, u);
    for (int j = 0; j < 8; ++j) pack_top2<0, 0>(u + 128 * j, o.qs[j]);
    for (int r = 0; r < kRows; ++r) {
      o.d[r] = rows[r][b].d;
      o.dmin[r] = rows[r][b].dmin;
      for (int j = 0; j < 16; ++j) o.scm[j][r] = rows[r][b].scales[j];
    }
  }
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    uint8x16_t r[8];
    load_two_bits(w.qs[j], r);
    to_signed<0>(r, q);
  }
  // |qsum| <= 256 * 3 * 127 * 15 and |msum| <= 16 * 15 * 16 * 128: int32.
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    for (int64_t b = 0; b < nb; ++b) {
      const PB& w = wb[b];
      int32x4_t qs[kTok], ms[kTok];
      for (int t = 0; t < T; ++t) qs[t] = ms[t] = vdupq_n_s32(0);
      for (int j = 0; j < 8; ++j) {
        const uint16x8_t s16 = vmovl_u8(vld1_u8(&w.scm[2 * j][0]));  // sub-blocks 2j, 2j + 1
        const int32x4_t b0 = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s16)));
        const int32x4_t b1 = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(s16)));
        const int32x4_t fifteen = vdupq_n_s32(15);
        const int32x4_t sc0 = vandq_s32(b0, fifteen), sc1 = vandq_s32(b1, fifteen);
        const int32x4_t mn0 = vshrq_n_s32(b0, 4), mn1 = vshrq_n_s32(b1, 4);
        int8x16_t q[8];
        chunk_or_pre<FmtQ2_K>(w, b, j, pre, q);
        int32x4_t i0[kTok], i1[kTok];
        subblock_regs<16, kQK_K, T>(q, a[b].qs, 32 * j, i0);
        subblock_regs<16, kQK_K, T>(q + 4, a[b].qs, 32 * j + 16, i1);
        for (int t = 0; t < T; ++t) {
          qs[t] = vmlaq_s32(vmlaq_s32(qs[t], i0[t], sc0), i1[t], sc1);
          ms[t] = vmlaq_n_s32(vmlaq_n_s32(ms[t], mn0, a[b].bsum[2 * j][t]), mn1, a[b].bsum[2 * j + 1][t]);
        }
      }
      const float32x4_t d = half4(w.d), dmin = half4(w.dmin);
      for (int t = 0; t < T; ++t) {
        const float dy = a[b].d[t];
        const float32x4_t v = vsubq_f32(vmulq_f32(vmulq_n_f32(d, dy), vcvtq_f32_s32(qs[t])),
                                        vmulq_f32(vmulq_n_f32(dmin, dy), vcvtq_f32_s32(ms[t])));
        f[t] = vaddq_f32(f[t], v);
      }
    }
  }
};

// The super-block formats of 8 chunks of 32 with one signed byte scale per chunk or none (IQ4_XS:
// PB with sc[8][kRows]; TQ2_0, TQ1_0: q - 1 in [-1, 1], kChunkScales false), PB with d[kRows]:
// per super-block the chunk dots (times their scales) summed in int32 (|.| < 2^24), then (d dy)
// qsum, as the scalar vec_dot.
template <typename F, int T>
inline void chunk32_tile(const typename F::PB* wb, int64_t nb, const typename F::Act* a, float32x4_t f[kTok],
                         const int8_t* pre) {
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::PB& w = wb[b];
    int32x4_t qs[kTok];
    for (int t = 0; t < T; ++t) qs[t] = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
      int8x16_t q[8];
      chunk_or_pre<F>(w, b, j, pre, q);
      int32x4_t isum[kTok];
      subblock_regs<32, kQK_K, T>(q, a[b].qs, 32 * j, isum);
      if constexpr (F::kChunkScales) {
        const int32x4_t sc = vmovl_s16(vget_low_s16(vmovl_s8(vld1_s8(&w.sc[j][0]))));  // lanes 0-3: the 4 rows
        for (int t = 0; t < T; ++t) qs[t] = vmlaq_s32(qs[t], isum[t], sc);
      } else {
        for (int t = 0; t < T; ++t) qs[t] = vaddq_s32(qs[t], isum[t]);
      }
    }
    const float32x4_t d = half4(w.d);
    for (int t = 0; t < T; ++t) f[t] = vaddq_f32(f[t], vmulq_f32(vmulq_n_f32(d, a[b].d[t]), vcvtq_f32_s32(qs[t])));
  }
}

// TQ2_0: the 2-bit plane of q (to_signed<1>).
struct PQTQ2_0 {
  uint8_t qs[8][2 * 16];
  uint16_t d[kRows];
};
static_assert(sizeof(PQTQ2_0) == kRows * sizeof(BlockTQ2_0));

struct TQ2Format;
struct FmtTQ2_0 {
  using BX = BlockTQ2_0;
  using PB = PQTQ2_0;
  using Act = ActQ8_K;
  static constexpr int64_t kBlock = kQK_K;
  static constexpr int kChunks = 8;
  static constexpr bool kChunkScales = false;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o);
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    uint8x16_t r[8];
    load_two_bits(w.qs[j], r);
    to_signed<1>(r, q);
  }
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    chunk32_tile<FmtTQ2_0, T>(wb, nb, a, f, pre);
  }
};

struct IQ4XSFormat {
  using Block = BlockIQ4_XS;
  using Act = ActQ8_K;
  static constexpr int kSub = 32;
  static constexpr bool kScaled = true, kMin = false;
  static void unpack(const Block& x, int8_t* q, LowRowScales& s) {  // codebook values
    const int8x16_t book = vld1q_s8(kIq4Values);
    for (int j = 0; j < 8; ++j) {
      const uint8x16_t v = vld1q_u8(x.qs + 16 * j);
      vst1q_s8(q + 32 * j, vqtbl1q_s8(book, low_nibbles(v)));
      vst1q_s8(q + 32 * j + 16, vqtbl1q_s8(book, high_nibbles(v)));
      s.sc[j] = iq4_xs_scale(x, j) - 32;
    }
    s.d = fp16_to_fp32(x.d);
  }
};

struct TQ2Format {
  using Block = BlockTQ2_0;
  using Act = ActQ8_K;
  static constexpr int kSub = 32;
  static constexpr bool kScaled = false, kMin = false;
  static void unpack(const Block& x, int8_t* q, LowRowScales& s) {  // q - 1 in [-1, 1]
    lb_unpack_2bit(x.qs, nullptr, 1, q);
    s.d = fp16_to_fp32(x.d);
  }
};

// TQ1_0's base-3 digit p of every byte: ((v * 3^p mod 256) * 3) >> 8, minus 1 (the exact
// product's high byte).
inline int8x16_t lb_trit(uint8x16_t v, uint8x16_t pow3) {
  const uint8x16_t w = vmulq_u8(v, pow3);
  const uint8x16_t three = vdupq_n_u8(3);
  const uint8x16_t t = vcombine_u8(vshrn_n_u16(vmull_u8(vget_low_u8(w), vget_low_u8(three)), 8),
                                   vshrn_n_u16(vmull_high_u8(w, three), 8));
  return vsubq_s8(vreinterpretq_s8_u8(t), vdupq_n_s8(1));
}

struct TQ1Format {
  using Block = BlockTQ1_0;
  using Act = ActQ8_K;
  static constexpr int kSub = 32;
  static constexpr bool kScaled = false, kMin = false;
  // Digit p of bytes 0..31: element 32p + j; of bytes 32..47: 160 + 16p + j; of the 4 qh bytes:
  // 240 + 4p + j (p < 4).
  static void unpack(const Block& x, int8_t* q, LowRowScales& s) {  // q - 1 in [-1, 1]
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    static constexpr uint8_t kPow3Lanes[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    const uint8x16_t v0 = vld1q_u8(x.qs), v1 = vld1q_u8(x.qs + 16), v2 = vld1q_u8(x.qs + 32);
    for (int p = 0; p < 5; ++p) {
      const uint8x16_t pw = vdupq_n_u8(kPow3[p]);
      vst1q_s8(q + 32 * p, lb_trit(v0, pw));
      vst1q_s8(q + 32 * p + 16, lb_trit(v1, pw));
      vst1q_s8(q + 160 + 16 * p, lb_trit(v2, pw));
    }
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    vst1q_s8(q + 240, lb_trit(vreinterpretq_u8_u32(vdupq_n_u32(qh)), vld1q_u8(kPow3Lanes)));
    s.d = fp16_to_fp32(x.d);
  }
};

void FmtTQ2_0::pack(const BX* const rows[kRows], int64_t b, PB& o) {
  alignas(16) int8_t u[kRows * kQK_K];
  group_block<BX, kQK_K, lowk_signed_quants<TQ2Format>>(rows, b, u);  // q - 1 in [-1, 1]
  for (int j = 0; j < 8; ++j) pack_top2<1, 0>(u + 128 * j, o.qs[j]);
  for (int r = 0; r < kRows; ++r) o.d[r] = rows[r][b].d;
}

// TQ1_0: the file's base-3 bytes, regrouped so that one lb_trit per register decodes a chunk.
// Every chunk's registers 0-3 hold its elements 0-15 and registers 4-7 the same (row, lane)
// places' elements 16-31 (interleave(), both levels' layouts), so:
//  - chunk j < 5 is digit j of qs bytes 0..31: those 32 bytes of the 4 rows in the group layout
//    of 32 elements (lo, 8 registers), each register decoded with 3^j;
//  - chunks 5, 6 are digits 0, 1 and 2, 3 of qs bytes 32..47 (elements 160 + 16p + l): those 16
//    bytes in the group layout of 16 elements (hi, 4 registers), decoded into registers 0-3 with
//    the first digit and 4-7 with the second; chunk 7's registers 0-3 are their digit 4;
//  - chunk 7's registers 4-7 (elements 240 + 4p + l, digit p of qh[l]) come from the 4 rows'
//    qh as stored, [row][4] in one register: levels 0, 1 (register 4 + p: elements 240 + 4p ..
//    243 + 4p of rows 0..3, a row per dword) decode it with 3^p; level 2 (register 4 + 2c + p:
//    elements 240 + 8c .. 247 + 8c of rows 2p, 2p + 1) repeats each row's dword and decodes
//    digit 2c in its first 4 lanes, 2c + 1 in the next 4.
struct PQTQ1_0 {
  uint8_t lo[8 * 16];
  uint8_t hi[4 * 16];
  uint8_t qh[kRows][4];
  uint16_t d[kRows];
};
static_assert(sizeof(PQTQ1_0) == kRows * sizeof(BlockTQ1_0));

struct FmtTQ1_0 {
  using BX = BlockTQ1_0;
  using PB = PQTQ1_0;
  using Act = ActQ8_K;
  static constexpr int64_t kBlock = kQK_K;
  static constexpr int kChunks = 8;
  static constexpr bool kChunkScales = false;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) {
    const int8_t* lo[kRows];
    const int8_t* hi[kRows];
    for (int r = 0; r < kRows; ++r) {
      lo[r] = reinterpret_cast<const int8_t*>(rows[r][b].qs);
      hi[r] = lo[r] + 32;
      std::memcpy(o.qh[r], rows[r][b].qh, 4);
      o.d[r] = rows[r][b].d;
    }
    interleave(lo, 32, reinterpret_cast<int8_t*>(o.lo));
    interleave(hi, 16, reinterpret_cast<int8_t*>(o.hi));
  }
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    if (j < 5) {
      const uint8x16_t pw = vdupq_n_u8(kPow3[j]);
      for (int i = 0; i < 8; ++i) q[i] = lb_trit(vld1q_u8(w.lo + 16 * i), pw);
      return;
    }
    const int p = 2 * (j - 5);  // the digit of hi in registers 0-3
    const uint8x16_t pw0 = vdupq_n_u8(kPow3[p]);
    for (int i = 0; i < 4; ++i) {
      const uint8x16_t v = vld1q_u8(w.hi + 16 * i);
      q[i] = lb_trit(v, pw0);
      if (j < 7) q[i + 4] = lb_trit(v, vdupq_n_u8(kPow3[p + 1]));
    }
    if (j < 7) return;
    const uint8x16_t h = vld1q_u8(&w.qh[0][0]);
    if constexpr (!kMmla) {
      for (int k = 0; k < 4; ++k) q[4 + k] = lb_trit(h, vdupq_n_u8(kPow3[k]));
    } else {
      static constexpr uint8_t kPw[2][16] = {{1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3},
                                             {9, 9, 9, 9, 27, 27, 27, 27, 9, 9, 9, 9, 27, 27, 27, 27}};
      const uint32x4_t h32 = vreinterpretq_u32_u8(h);
      const uint8x16_t r01 = vreinterpretq_u8_u32(vzip1q_u32(h32, h32));  // rows 0, 0, 1, 1
      const uint8x16_t r23 = vreinterpretq_u8_u32(vzip2q_u32(h32, h32));  // rows 2, 2, 3, 3
      for (int c = 0; c < 2; ++c) {
        const uint8x16_t pw = vld1q_u8(kPw[c]);
        q[4 + 2 * c] = lb_trit(r01, pw);
        q[5 + 2 * c] = lb_trit(r23, pw);
      }
    }
  }
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    chunk32_tile<FmtTQ1_0, T>(wb, nb, a, f, pre);
  }
};

// IQ4_XS: the codebook indices as nibbles in Q4_K's chunk layout (chunk j = 32-element sub-block
// j), looked up when a chunk is loaded; the 6-bit sub-block scales as ls - 32 bytes (+1.5%). Per
// super-block the sub-block dots times their scales summed in int32, then (d dy) qsum, as the
// scalar vec_dot.
struct PQIQ4_XS {
  uint8_t qs[8][4 * 16];
  int8_t sc[8][kRows];
  uint16_t d[kRows];
};
static_assert(sizeof(PQIQ4_XS) == 552);

inline void unpack_iq4_xs_index(const BlockIQ4_XS& x, int8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const uint8x16_t v = vld1q_u8(x.qs + 16 * j);
    vst1q_s8(q + 32 * j, vreinterpretq_s8_u8(low_nibbles(v)));
    vst1q_s8(q + 32 * j + 16, vreinterpretq_s8_u8(high_nibbles(v)));
  }
}

struct FmtIQ4_XS {
  using BX = BlockIQ4_XS;
  using PB = PQIQ4_XS;
  using Act = ActQ8_K;
  static constexpr int64_t kBlock = kQK_K;
  static constexpr int kChunks = 8;
  static constexpr bool kChunkScales = true;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) {
    alignas(16) int8_t u[kRows * kQK_K];
    group_block<BX, kQK_K, unpack_iq4_xs_index>(rows, b, u);
    for (int j = 0; j < 8; ++j) pack_nibbles<0>(u + 128 * j, o.qs[j]);
    for (int r = 0; r < kRows; ++r) {
      o.d[r] = rows[r][b].d;
      for (int j = 0; j < 8; ++j) o.sc[j][r] = static_cast<int8_t>(iq4_xs_scale(rows[r][b], j) - 32);
    }
  }
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    uint8x16_t r[8];
    load_nibbles(w.qs[j], r);
    const int8x16_t book = vld1q_s8(kIq4Values);
    for (int i = 0; i < 8; ++i) q[i] = vqtbl1q_s8(book, r[i]);
  }
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    chunk32_tile<FmtIQ4_XS, T>(wb, nb, a, f, pre);
  }
};

// ---- Super-block formats (Q8_K activations) -----------------------------------------------------

template <int kSub>
struct alignas(16) ULowK {
  int8_t q[kRows * kQK_K];
  float d[kRows];
  float dmin[kRows];
  int32_t sc[kQK_K / kSub][kRows];
  int32_t mn[kQK_K / kSub][kRows];
};

template <typename F>
size_t lowk_scratch_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQK_K) * sizeof(ULowK<F::kSub>);
}

template <typename F>
size_t lowk_packed_bytes(int64_t cols, int64_t n_tok) {
  if constexpr (std::is_same_v<typename F::Act, ActQ8_K16>)
    return q8_k16_packed_bytes(cols, n_tok);
  else
    return q8_k_packed_bytes(cols, n_tok);
}

template <typename F>
void lowk_pack(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  if constexpr (std::is_same_v<typename F::Act, ActQ8_K16>)
    q8_k16_pack(act, act_row_bytes, cols, n_tok, packed);
  else
    q8_k_pack(act, act_row_bytes, cols, n_tok, packed);
}

// Per super-block: qsum = sum_j sc_j dot_j (kScaled; else the plain sum of the dots) and, for
// kMin, msum = sum_j m_j bsum_j, in int32; then d dy qsum (- dmin dy msum). Bounds: Q2_K
// |qsum| <= 256 * 3 * 127 * 15, Q3_K 256 * 4 * 127 * 32, IQ4_XS 256 * 127 * 127 * 32 < 2^31.
template <typename F>
void lowk_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
              int64_t ldo, uint8_t* scratch) {
  using BX = typename F::Block;
  using Act = typename F::Act;
  constexpr int kSub = F::kSub, kNs = kQK_K / kSub;
  const int64_t nb = w.cols / kQK_K;
  auto* u = reinterpret_cast<ULowK<kSub>*>(scratch);
  const auto* act = reinterpret_cast<const Act*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const BX* rows[kRows];
    group_rows(w, g, n_rows, rows);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK_K];
      for (int r = 0; r < kRows; ++r) {
        LowRowScales s;
        F::unpack(rows[r][b], q[r], s);
        u[b].d[r] = s.d;
        u[b].dmin[r] = s.dmin;
        for (int j = 0; j < kNs; ++j) {
          u[b].sc[j][r] = s.sc[j];
          u[b].mn[j][r] = s.mn[j];
        }
      }
      const int8_t* qr[kRows] = {q[0], q[1], q[2], q[3]};
      interleave(qr, kQK_K, u[b].q);
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const Act* a = act + (t0 / kTok) * nb;
      float32x4_t f[kTok];
      for (float32x4_t& v : f) v = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        int32x4_t qs[kTok], ms[kTok];
        for (int t = 0; t < kTok; ++t) qs[t] = ms[t] = vdupq_n_s32(0);
        for (int j = 0; j < kNs; ++j) {
          int32x4_t isum[kTok];
          subblock<kSub, kQK_K>(u[b].q + 4 * kSub * j, a[b].qs, kSub * j, isum);
          if constexpr (F::kScaled) {
            const int32x4_t sc = vld1q_s32(u[b].sc[j]);
            for (int t = 0; t < kTok; ++t) qs[t] = vmlaq_s32(qs[t], isum[t], sc);
          } else {
            for (int t = 0; t < kTok; ++t) qs[t] = vaddq_s32(qs[t], isum[t]);
          }
          if constexpr (F::kMin) {
            const int32x4_t mn = vld1q_s32(u[b].mn[j]);
            for (int t = 0; t < kTok; ++t) ms[t] = vmlaq_n_s32(ms[t], mn, a[b].bsum[j][t]);
          }
        }
        const float32x4_t d = vld1q_f32(u[b].d);
        for (int t = 0; t < kTok; ++t) f[t] = vfmaq_f32(f[t], vcvtq_f32_s32(qs[t]), vmulq_n_f32(d, a[b].d[t]));
        if constexpr (F::kMin) {
          const float32x4_t dmin = vld1q_f32(u[b].dmin);
          for (int t = 0; t < kTok; ++t) f[t] = vfmsq_f32(f[t], vcvtq_f32_s32(ms[t]), vmulq_n_f32(dmin, a[b].d[t]));
        }
      }
      for (int t = 0; t < kTok && t0 + t < n_tok; ++t) store_rows(out + (t0 + t) * ldo + g, f[t], n_rows);
    }
  }
}

// ---- 32-element block formats (Q8_0 activations) ------------------------------------------------

struct IQ4NLFormat {
  using Block = BlockIQ4_NL;
  static float scale(const Block& x) { return fp16_to_fp32(x.d); }
  static void unpack(const Block& x, int8_t* q) {  // codebook values
    const int8x16_t book = vld1q_s8(kIq4Values);
    const uint8x16_t v = vld1q_u8(x.qs);
    vst1q_s8(q, vqtbl1q_s8(book, low_nibbles(v)));
    vst1q_s8(q + 16, vqtbl1q_s8(book, high_nibbles(v)));
  }
};

struct MXFP4Format {
  using Block = BlockMXFP4;
  static float scale(const Block& x) { return e8m0_half(x.e); }
  static void unpack(const Block& x, int8_t* q) {  // doubled E2M1 values
    const int8x16_t book = vld1q_s8(kFp4Values);
    const uint8x16_t v = vld1q_u8(x.qs);
    vst1q_s8(q, vqtbl1q_s8(book, low_nibbles(v)));
    vst1q_s8(q + 16, vqtbl1q_s8(book, high_nibbles(v)));
  }
};

// Per block and (row, token): the exact int32 dot times dx dy (legacy_run without a minimum,
// with the format's scale in place of the fp16 d).
template <typename F>
void block32_run(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                 int64_t ldo, uint8_t* scratch) {
  using BX = typename F::Block;
  const int64_t nb = w.cols / kQK;
  auto* u = reinterpret_cast<UQ32*>(scratch);
  const auto* act = reinterpret_cast<const ActQ8_0*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const BX* rows[kRows];
    group_rows(w, g, n_rows, rows);
    for (int64_t b = 0; b < nb; ++b) {
      alignas(16) int8_t q[kRows][kQK];
      for (int r = 0; r < kRows; ++r) {
        F::unpack(rows[r][b], q[r]);
        u[b].d[r] = F::scale(rows[r][b]);
      }
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

}  // namespace
