// NEON load-time packed weights (gemm.h: pack_weights / run_packed) for Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, IQ4_NL, MXFP4, Q4_K, Q5_K, Q6_K, and F32, F16, BF16 (their own section below). A piece of the body
// gemm_neon_impl.h (see there for the per-call method and the register layouts), compiled once
// per level with it, after gemm_neon_legacy.h, gemm_neon_k.h and gemm_neon_float.h (it uses their
// activation tiles, unpackers and lane types); nothing else includes it. A packed matrix is only
// valid for the level that packed it (matmul checks WeightMatrix::packed_kernel).
//
// Why: the per-call GEMM unpacks and interleaves every group of 4 weight rows on every matmul, and
// a single token (decode) took the vec_dot rows, which read 4 rows' blocks from 4 places and
// unpack each block per call. Here each matrix is rearranged once, at load, into the per-call
// GEMM's interleaved register order (interleave(): the same layout the level's integer kernel
// reads), group of 4 rows after group, block after block, so that every matmul, decode included,
// streams one contiguous array and gets each register of 4 rows' quants from one load and one or
// two ALU operations.
//
// Layout of one block of a group (PQ* below): decode is bandwidth-bound, so the stored bit widths
// are kept (x86's packed layouts make the same choice, gemm_x86_packed.h):
//  - 4-bit quants (Q4_0, Q4_1, and the low bits of Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) two registers per
//    16 bytes: of the 8 registers R0..R7 that hold a 32-element chunk of the 4 rows (in the level's
//    order), byte l of packed register i (i < 4) is R_i[l] | R_{i+4}[l] << 4: one AND and one
//    shift give both;
//  - the fifth bit (Q5_0, Q5_1, Q5_K): one 16-byte register per chunk, bit i of byte l is the
//    fifth bit of R_i[l] (a test, an AND and an OR per register);
//  - Q6_K's top 2 bits: two registers per chunk, bits 2i..2i+1 of byte l of register h are the
//    top bits of R_{4h+i}[l];
//  - Q8_0: the interleaved bytes as they are;
//  - block scales d (and m, dmin) stay fp16, 4 rows side by side (one FCVTL gives the 4 lanes);
//    the K formats' 6-bit sub-block scales and mins become one byte each, [sub-block][row].
// Sizes against the stored rows: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K exactly equal; Q4_K 592
// bytes per 4 super-blocks against 576 (+2.8%), Q5_K 720 against 704 (+2.3%): the 12-byte
// packed 6-bit scales as 8-bit ones, which saves unpacking them on every call.
//
// Arithmetic: the integer sums are exact (as the per-call kernel's), and the float epilogue is the
// scalar vec_dot's expression in its order, without fused multiply-adds (the library is built
// with -ffp-contract=off): per block, (dx dy) isum (+ m s for Q4_1, Q5_1); per super-block,
// (d dy) qsum - (dmin dy) msum (Q6_K: (d dy) qsum), each added to the row's running sum block
// after block. So every output is bit-identical to the scalar vec_dot of its row and token, at any
// token count (tests/kernels/neon_packed_check.cpp checks it): decode loses nothing against the
// vec_dot rows (the K formats' NEON vec_dot is bit-identical too, the legacy ones within budget).
//
// Tokens: the activations come packed by the per-call GEMM's pack() (same tiles of kTok = 4
// tokens); a tile of T < kTok real tokens (a decode step: T = 1) runs a kernel instantiated for T,
// so the padding tokens cost nothing (i8mm: SMMLA takes tokens in pairs, an odd T computes one
// padding token). From kUnpackTokens tokens on, each group's quants are decoded once into scratch
// (below). Rows: groups of 4 (packed_row_group); a last group of fewer rows repeats its last row
// and stores only the rows it has.
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_packed.h is a piece of the body of gemm_neon.cpp only"
#endif

namespace {

// ---- The integer kernel over registers, T tokens ------------------------------------------------

// subblock() of gemm_neon_impl.h with the weights already in registers (w: the kN / 4 registers
// of the sub-block in the group layout) and only the first T tokens of the tile (T <= kTok).
template <int kN, int kBlk, int T>
inline void subblock_regs(const int8x16_t* w, const int8_t* aq, int e, int32x4_t isum[kTok]) {
  static_assert(kN % 16 == 0 && T >= 1 && T <= kTok);
#if EDGELM_NEON_GEMM_LEVEL == 0
  for (int t = 0; t < T; ++t) {
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
  for (int t = 0; t < T; ++t) {
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
  for (int p = 0; p < (T + 1) / 2; ++p) {  // register (c, pair) is w[2 c + pair]
    const int8_t* a = aq + p * 2 * kBlk + 2 * e;
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = acc0;  // lanes: t0 r0, t0 r1, t1 r0, t1 r1 (r2, r3)
    for (int c = 0; c < kN / 8; ++c) {
      const int8x16_t y = vld1q_s8(a + 16 * c);
      acc0 = vmmlaq_s32(acc0, y, w[2 * c]);
      acc1 = vmmlaq_s32(acc1, y, w[2 * c + 1]);
    }
    const int64x2_t s0 = vreinterpretq_s64_s32(acc0), s1 = vreinterpretq_s64_s32(acc1);
    isum[2 * p] = vreinterpretq_s32_s64(vzip1q_s64(s0, s1));
    isum[2 * p + 1] = vreinterpretq_s32_s64(vzip2q_s64(s0, s1));
  }
#endif
}

// ---- Packed chunks: 32 elements of 4 rows = 8 registers -----------------------------------------

// Pack side: u is a chunk of the group layout (128 signed bytes from interleave()), kOff the
// format's offset (the stored quant is u + kOff, in [0, 2^bits)).
template <int kOff>
void pack_nibbles(const int8_t* u, uint8_t* dst) {
  const uint8x16_t off = vdupq_n_u8(static_cast<uint8_t>(kOff)), low4 = vdupq_n_u8(0x0f);
  for (int i = 0; i < 4; ++i) {
    const uint8x16_t lo = vaddq_u8(vreinterpretq_u8_s8(vld1q_s8(u + 16 * i)), off);
    const uint8x16_t hi = vaddq_u8(vreinterpretq_u8_s8(vld1q_s8(u + 16 * (i + 4))), off);
    vst1q_u8(dst + 16 * i, vorrq_u8(vandq_u8(lo, low4), vshlq_n_u8(hi, 4)));
  }
}
template <int kOff, int kBit = 4>
void pack_bit4(const int8_t* u, uint8_t* dst) {  // bit i of byte l: bit kBit of R_i[l] + kOff
  uint8_t h[16] = {};
  for (int i = 0; i < 8; ++i)
    for (int l = 0; l < 16; ++l)
      h[l] = static_cast<uint8_t>(h[l] | (((static_cast<uint8_t>(u[16 * i + l] + kOff) >> kBit) & 1u) << i));
  std::memcpy(dst, h, 16);
}
// Register h, bits 2i..2i+1 of byte l: bits kShift, kShift + 1 of R_{4h+i}[l] + kOff (Q6_K's top
// bits: kShift 4; the 2-bit planes of Q2_K and Q3_K: 0).
template <int kOff, int kShift = 4>
void pack_top2(const int8_t* u, uint8_t* dst) {
  uint8_t t[32] = {};
  for (int i = 0; i < 8; ++i)
    for (int l = 0; l < 16; ++l)
      t[16 * (i / 4) + l] = static_cast<uint8_t>(
          t[16 * (i / 4) + l] | (((static_cast<uint8_t>(u[16 * i + l] + kOff) >> kShift) & 3u) << (2 * (i % 4))));
  std::memcpy(dst, t, 32);
}

// Run side: the chunk's 8 registers as unsigned quants.
inline void load_nibbles(const uint8_t* src, uint8x16_t r[8]) {
  for (int i = 0; i < 4; ++i) {
    const uint8x16_t v = vld1q_u8(src + 16 * i);
    r[i] = low_nibbles(v);
    r[i + 4] = high_nibbles(v);
  }
}
inline void add_bit4(const uint8_t* src, uint8x16_t r[8]) {
  const uint8x16_t h = vld1q_u8(src);
  for (int i = 0; i < 8; ++i) r[i] = vorrq_u8(r[i], fifth_bit(h, vdupq_n_u8(static_cast<uint8_t>(1u << i))));
}
inline void add_top2(const uint8_t* src, uint8x16_t r[8]) {
  const uint8x16_t three = vdupq_n_u8(3);
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t v = vld1q_u8(src + 16 * h);
    r[4 * h] = vorrq_u8(r[4 * h], vshlq_n_u8(vandq_u8(v, three), 4));
    r[4 * h + 1] = vorrq_u8(r[4 * h + 1], vshlq_n_u8(vandq_u8(vshrq_n_u8(v, 2), three), 4));
    r[4 * h + 2] = vorrq_u8(r[4 * h + 2], vshlq_n_u8(vandq_u8(vshrq_n_u8(v, 4), three), 4));
    r[4 * h + 3] = vorrq_u8(r[4 * h + 3], vshlq_n_u8(vshrq_n_u8(v, 6), 4));
  }
}
// The 2-bit plane of pack_top2<kOff, 0> back into the chunk's 8 registers (values 0..3), and
// pack_bit4<kOff, 2>'s plane on top of it as bit 2 (Q3_K's third bit).
inline void load_two_bits(const uint8_t* src, uint8x16_t r[8]) {
  const uint8x16_t three = vdupq_n_u8(3);
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t v = vld1q_u8(src + 16 * h);
    r[4 * h] = vandq_u8(v, three);
    r[4 * h + 1] = vandq_u8(vshrq_n_u8(v, 2), three);
    r[4 * h + 2] = vandq_u8(vshrq_n_u8(v, 4), three);
    r[4 * h + 3] = vshrq_n_u8(v, 6);
  }
}
inline void add_bit2(const uint8_t* src, uint8x16_t r[8]) {
  const uint8x16_t h = vld1q_u8(src);
  for (int i = 0; i < 8; ++i)
    r[i] = vorrq_u8(r[i], vandq_u8(vtstq_u8(h, vdupq_n_u8(static_cast<uint8_t>(1u << i))), vdupq_n_u8(4)));
}

// Unsigned quants -> the signed bytes the integer kernel takes (q - kOff).
template <int kOff>
inline void to_signed(const uint8x16_t r[8], int8x16_t s[8]) {
  for (int i = 0; i < 8; ++i) {
    s[i] = vreinterpretq_s8_u8(r[i]);
    if constexpr (kOff != 0) s[i] = vsubq_s8(s[i], vdupq_n_s8(static_cast<int8_t>(kOff)));
  }
}

inline float32x4_t half4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

// The group layout (interleave()) of block b of the 4 rows: kN elements per row, 4 kN bytes.
template <typename BX, int kN, void (*Unpack)(const BX&, int8_t*)>
void group_block(const BX* const rows[kRows], int64_t b, int8_t* u) {
  alignas(16) int8_t q[kRows][kN];
  for (int r = 0; r < kRows; ++r) Unpack(rows[r][b], q[r]);
  const int8_t* qr[kRows] = {q[0], q[1], q[2], q[3]};
  interleave(qr, kN, u);
}

// Chunk j of block b: decoded from the packed block w (pre null), or loaded from pre, the group's
// chunks decoded beforehand (decode_group: 128 bytes each, block after block).
template <typename F, typename PB>
inline void chunk_or_pre(const PB& w, int64_t b, int j, const int8_t* pre, int8x16_t q[8]) {
  if (pre == nullptr) {
    F::chunk(w, j, q);
    return;
  }
  const int8_t* p = pre + (b * F::kChunks + j) * 128;
  for (int i = 0; i < 8; ++i) q[i] = vld1q_s8(p + 16 * i);
}

// ---- Legacy formats (32-element blocks) ---------------------------------------------------------

struct PQ8_0 {
  int8_t qs[8 * 16];
  uint16_t d[kRows];
};
struct PQ4_0 {
  uint8_t qs[4 * 16];
  uint16_t d[kRows];
};
struct PQ4_1 {
  uint8_t qs[4 * 16];
  uint16_t d[kRows];
  uint16_t m[kRows];
};
struct PQ5_0 {
  uint8_t qs[4 * 16];
  uint8_t qh[16];
  uint16_t d[kRows];
};
struct PQ5_1 {
  uint8_t qs[4 * 16];
  uint8_t qh[16];
  uint16_t d[kRows];
  uint16_t m[kRows];
};
static_assert(sizeof(PQ8_0) == kRows * sizeof(BlockQ8_0) && sizeof(PQ4_0) == kRows * sizeof(BlockQ4_0) &&
              sizeof(PQ4_1) == kRows * sizeof(BlockQ4_1) && sizeof(PQ5_0) == kRows * sizeof(BlockQ5_0) &&
              sizeof(PQ5_1) == kRows * sizeof(BlockQ5_1));

// A legacy format: BX the stored block, PB its packed group block, Act the packed activations,
// Unpack the per-call unpacker (signed quants, q - kOff), kOff the offset, kBits 4, 5 or 8.
// kBook (IQ4_NL: kIq4Values, MXFP4: kFp4Values): the 4-bit fields are indices into that codebook
// (Unpack gives the indices), looked up when a chunk is loaded. The block scale is the fp16 d, or
// (MXFP4, a PB with e) the E8M0 exponent's e8m0_half.
template <typename BX_, typename PB_, typename Act_, void (*Unpack)(const BX_&, int8_t*), int kOff_, int kBits,
          const int8_t* kBook = nullptr>
struct LegacyFormat {
  using BX = BX_;
  using PB = PB_;
  using Act = Act_;
  static constexpr int64_t kBlock = kQK;
  static constexpr int kOff = kOff_;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) {
    alignas(16) int8_t u[kRows * kQK];
    group_block<BX, kQK, Unpack>(rows, b, u);
    if constexpr (kBits == 8) {
      std::memcpy(o.qs, u, sizeof(u));
    } else {
      pack_nibbles<kOff>(u, o.qs);
      if constexpr (kBits == 5) pack_bit4<kOff>(u, o.qh);
    }
    for (int r = 0; r < kRows; ++r) {
      if constexpr (requires { o.e; })
        o.e[r] = rows[r][b].e;
      else
        o.d[r] = rows[r][b].d;
      if constexpr (kWithMin<Act>) o.m[r] = rows[r][b].m;
    }
  }
  static float32x4_t scale4(const PB& w) {
    if constexpr (requires { w.e; }) {
      const float s[kRows] = {e8m0_half(w.e[0]), e8m0_half(w.e[1]), e8m0_half(w.e[2]), e8m0_half(w.e[3])};
      return vld1q_f32(s);
    } else {
      return half4(w.d);
    }
  }

  static constexpr int kChunks = 1;
  // The signed quants of chunk j (the block) of w.
  static void chunk(const PB& w, int /*j*/, int8x16_t q[8]) {
    if constexpr (kBits == 8) {
      for (int i = 0; i < 8; ++i) q[i] = vld1q_s8(w.qs + 16 * i);
    } else {
      uint8x16_t r[8];
      load_nibbles(w.qs, r);
      if constexpr (kBits == 5) add_bit4(w.qh, r);
      if constexpr (kBook != nullptr) {
        const int8x16_t book = vld1q_s8(kBook);
        for (int i = 0; i < 8; ++i) q[i] = vqtbl1q_s8(book, r[i]);
      } else {
        to_signed<kOff>(r, q);
      }
    }
  }

  // Rows' running sums f[t] += the block's terms for tokens t < T (the scalar expression). pre:
  // null, or the group's quants already decoded (decode_group).
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    for (int64_t b = 0; b < nb; ++b) {
      const PB& w = wb[b];
      int8x16_t q[8];
      chunk_or_pre<LegacyFormat>(w, b, 0, pre, q);
      int32x4_t isum[kTok];
      subblock_regs<kQK, kQK, T>(q, a[b].qs, 0, isum);
      const float32x4_t dw = scale4(w);
      for (int t = 0; t < T; ++t) {
        float32x4_t v = vmulq_f32(vmulq_n_f32(dw, a[b].d[t]), vcvtq_f32_s32(isum[t]));
        if constexpr (kWithMin<Act>) v = vaddq_f32(v, vmulq_n_f32(half4(w.m), a[b].s[t]));
        f[t] = vaddq_f32(f[t], v);
      }
    }
  }
};

using FmtQ8_0 = LegacyFormat<BlockQ8_0, PQ8_0, ActQ8_0, unpack_q8_0, 0, 8>;
using FmtQ4_0 = LegacyFormat<BlockQ4_0, PQ4_0, ActQ8_0, unpack_q4_0, 8, 4>;
using FmtQ4_1 = LegacyFormat<BlockQ4_1, PQ4_1, ActQ8_1, unpack_q4_1, 0, 4>;
using FmtQ5_0 = LegacyFormat<BlockQ5_0, PQ5_0, ActQ8_0, unpack_q5_0, 16, 5>;
using FmtQ5_1 = LegacyFormat<BlockQ5_1, PQ5_1, ActQ8_1, unpack_q5_1, 0, 5>;

// IQ4_NL and MXFP4: Q4_0's nibble order (16 bytes, elements 0-15 low, 16-31 high) with codebook
// indices for quants, so Q4_0's packed nibbles; IQ4_NL keeps its fp16 d (Q4_0's packed bytes),
// MXFP4 its E8M0 exponent byte (the file's 17 bytes a block). Scalar vec_dot: (scale dy) isum per
// block.
template <typename BX>
inline void unpack_nibble_index(const BX& x, int8_t* q) {
  const uint8x16_t v = vld1q_u8(x.qs);
  vst1q_s8(q, vreinterpretq_s8_u8(low_nibbles(v)));
  vst1q_s8(q + 16, vreinterpretq_s8_u8(high_nibbles(v)));
}
struct PQMXFP4 {
  uint8_t qs[4 * 16];
  uint8_t e[kRows];
};
static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0) && sizeof(PQMXFP4) == kRows * sizeof(BlockMXFP4));
using FmtIQ4_NL = LegacyFormat<BlockIQ4_NL, PQ4_0, ActQ8_0, unpack_nibble_index<BlockIQ4_NL>, 0, 4, kIq4Values>;
using FmtMXFP4 = LegacyFormat<BlockMXFP4, PQMXFP4, ActQ8_0, unpack_nibble_index<BlockMXFP4>, 0, 4, kFp4Values>;

// ---- K formats (256-element super-blocks) -------------------------------------------------------

struct PQ4_K {
  uint8_t qs[8][4 * 16];  // chunk j = sub-block j
  uint8_t sc[8][kRows];
  uint8_t mn[8][kRows];
  uint16_t d[kRows];
  uint16_t dmin[kRows];
};
struct PQ5_K {
  uint8_t qs[8][4 * 16];
  uint8_t qh[8][16];
  uint8_t sc[8][kRows];
  uint8_t mn[8][kRows];
  uint16_t d[kRows];
  uint16_t dmin[kRows];
};
struct PQ6_K {
  uint8_t ql[8][4 * 16];  // chunk j = 16-element sub-blocks 2j, 2j + 1
  uint8_t qh[8][2 * 16];
  int8_t sc[16][kRows];
  uint16_t d[kRows];
};
static_assert(sizeof(PQ4_K) == 592 && sizeof(PQ5_K) == 720 && sizeof(PQ6_K) == kRows * sizeof(BlockQ6_K));

// 8 or 16 bytes of [sub-block][row] scales -> int32 lanes per sub-block.
inline void widen_u8x16(uint8x16_t v, int32x4_t out[4]) {
  const uint16x8_t lo = vmovl_u8(vget_low_u8(v)), hi = vmovl_u8(vget_high_u8(v));
  out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo)));
  out[1] = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(lo)));
  out[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi)));
  out[3] = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(hi)));
}

// Q4_K (kFive false) and Q5_K.
template <typename BX_, typename PB_, void (*Unpack)(const BX_&, int8_t*), bool kFive>
struct KMinFormat {
  using BX = BX_;
  using PB = PB_;
  using Act = ActQ8_K;
  static constexpr int64_t kBlock = kQK_K;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) {
    alignas(16) int8_t u[kRows * kQK_K];
    group_block<BX, kQK_K, Unpack>(rows, b, u);
    for (int j = 0; j < 8; ++j) {
      pack_nibbles<0>(u + 128 * j, o.qs[j]);
      if constexpr (kFive) pack_bit4<0>(u + 128 * j, o.qh[j]);
    }
    for (int r = 0; r < kRows; ++r) {
      const BX& x = rows[r][b];
      o.d[r] = x.d;
      o.dmin[r] = x.dmin;
      for (int j = 0; j < 8; ++j) k4_get_scale_min(j, x.scales, &o.sc[j][r], &o.mn[j][r]);
    }
  }

  static constexpr int kChunks = 8;
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    uint8x16_t r[8];
    load_nibbles(w.qs[j], r);
    if constexpr (kFive) add_bit4(w.qh[j], r);
    to_signed<0>(r, q);
  }

  // |qsum| < 2^26 (Q5_K: 8 sub-blocks of 63 * 32 * 31 * 127), as the scalar kernel's int32.
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    for (int64_t b = 0; b < nb; ++b) {
      const PB& w = wb[b];
      int32x4_t sc[8], mn[8];
      widen_u8x16(vld1q_u8(&w.sc[0][0]), sc);
      widen_u8x16(vld1q_u8(&w.sc[4][0]), sc + 4);
      widen_u8x16(vld1q_u8(&w.mn[0][0]), mn);
      widen_u8x16(vld1q_u8(&w.mn[4][0]), mn + 4);
      int32x4_t qs[kTok], ms[kTok];
      for (int t = 0; t < T; ++t) qs[t] = ms[t] = vdupq_n_s32(0);
      for (int j = 0; j < 8; ++j) {
        int8x16_t q[8];
        chunk_or_pre<KMinFormat>(w, b, j, pre, q);
        int32x4_t isum[kTok];
        subblock_regs<32, kQK_K, T>(q, a[b].qs, 32 * j, isum);
        for (int t = 0; t < T; ++t) {
          qs[t] = vmlaq_s32(qs[t], isum[t], sc[j]);
          ms[t] = vmlaq_n_s32(ms[t], mn[j], a[b].bsum[j][t]);
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

using FmtQ4_K = KMinFormat<BlockQ4_K, PQ4_K, unpack_q4_k, false>;
using FmtQ5_K = KMinFormat<BlockQ5_K, PQ5_K, unpack_q5_k, true>;

// The super-block formats of 16 sub-blocks of 16 with a signed scale each and no minimum (Q6_K,
// Q3_K; PB with sc[16][kRows] and d[kRows]): per super-block the sub-block dots times their
// scales summed in int32, then (d dy) qsum, as the scalar vec_dot.
template <typename F, int T>
inline void k16_tile(const typename F::PB* wb, int64_t nb, const typename F::Act* a, float32x4_t f[kTok],
                     const int8_t* pre) {
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::PB& w = wb[b];
    int32x4_t qs[kTok];
    for (int t = 0; t < T; ++t) qs[t] = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
      const int16x8_t s16 = vmovl_s8(vld1_s8(&w.sc[2 * j][0]));  // sub-blocks 2j, 2j + 1
      const int32x4_t sc0 = vmovl_s16(vget_low_s16(s16)), sc1 = vmovl_s16(vget_high_s16(s16));
      int8x16_t q[8];
      chunk_or_pre<F>(w, b, j, pre, q);
      int32x4_t i0[kTok], i1[kTok];
      subblock_regs<16, kQK_K, T>(q, a[b].qs, 32 * j, i0);
      subblock_regs<16, kQK_K, T>(q + 4, a[b].qs, 32 * j + 16, i1);
      for (int t = 0; t < T; ++t) qs[t] = vmlaq_s32(vmlaq_s32(qs[t], i0[t], sc0), i1[t], sc1);
    }
    const float32x4_t d = half4(w.d);
    for (int t = 0; t < T; ++t) f[t] = vaddq_f32(f[t], vmulq_f32(vmulq_n_f32(d, a[b].d[t]), vcvtq_f32_s32(qs[t])));
  }
}

struct FmtQ6_K {
  using BX = BlockQ6_K;
  using PB = PQ6_K;
  using Act = ActQ8_K;
  static constexpr int64_t kBlock = kQK_K;

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) {
    alignas(16) int8_t u[kRows * kQK_K];
    group_block<BX, kQK_K, unpack_q6_k>(rows, b, u);
    for (int j = 0; j < 8; ++j) {
      pack_nibbles<32>(u + 128 * j, o.ql[j]);
      pack_top2<32>(u + 128 * j, o.qh[j]);
    }
    for (int r = 0; r < kRows; ++r) {
      o.d[r] = rows[r][b].d;
      for (int j = 0; j < 16; ++j) o.sc[j][r] = rows[r][b].scales[j];
    }
  }

  static constexpr int kChunks = 8;
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    uint8x16_t r[8];
    load_nibbles(w.ql[j], r);
    add_top2(w.qh[j], r);
    to_signed<32>(r, q);
  }

  // |qsum| < 2^28 (16 sub-blocks of 128 * 16 * 32 * 127), as the scalar kernel's int32.
  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    k16_tile<FmtQ6_K, T>(wb, nb, a, f, pre);
  }
};

// ---- The GemmKernel entry points ----------------------------------------------------------------

template <typename F>
size_t packed_weight_bytes_of(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + kRows - 1) / kRows * (cols / F::kBlock)) * sizeof(typename F::PB);
}

// Rows [r0, r1) of w (r0 a multiple of kRows) into their groups of the packed matrix dst.
template <typename F>
void pack_weights_of(const GemmWeights& w, int64_t r0, int64_t r1, uint8_t* dst) {
  const int64_t nb = w.cols / F::kBlock;
  auto* out = reinterpret_cast<typename F::PB*>(dst) + (r0 / kRows) * nb;
  for (int64_t g = r0; g < r1; g += kRows) {
    const typename F::BX* rows[kRows];
    group_rows(w, g, static_cast<int>(w.rows - g < kRows ? w.rows - g : kRows), rows);
    for (int64_t b = 0; b < nb; ++b) F::pack(rows, b, *out++);
  }
}

template <typename F, int T>
void packed_tile(const typename F::PB* wb, int64_t nb, const typename F::Act* a, float* out, int64_t ldo, int n_rows,
                 const int8_t* pre) {
  float32x4_t f[kTok];
  for (int t = 0; t < T; ++t) f[t] = vdupq_n_f32(0.0f);
  F::template tile<T>(wb, nb, a, f, pre);
  for (int t = 0; t < T; ++t) store_rows(out + t * ldo, f[t], n_rows);
}

// From this many tokens on (GemmKernel::packed_unpack_tokens), run_packed decodes each group's
// quants once into scratch (the signed bytes of the group layout, 4 cols bytes: less than the
// per-call GEMM's scratch_bytes(cols)) and every tile of tokens loads them from there: the
// nibble / fifth-bit / top-bit extraction would otherwise be repeated for every 4 tokens of a
// prefill. The registers are the same either way, so are the results (bit for bit).
constexpr int64_t kUnpackTokens = 2 * kTok;

template <typename F>
void decode_group(const typename F::PB* wb, int64_t nb, int8_t* pre) {
  for (int64_t b = 0; b < nb; ++b)
    for (int j = 0; j < F::kChunks; ++j, pre += 128) {
      int8x16_t q[8];
      F::chunk(wb[b], j, q);
      for (int i = 0; i < 8; ++i) vst1q_s8(pre + 16 * i, q[i]);
    }
}

// Groups of [r0, r1) (r0 a multiple of kRows) from the packed matrix pw, every tile of tokens.
template <typename F>
void run_packed_of(const uint8_t* pw, int64_t /*rows*/, int64_t cols, const uint8_t* packed, int64_t n_tok, int64_t r0,
                   int64_t r1, float* out, int64_t ldo, uint8_t* scratch) {
  using PB = typename F::PB;
  using Act = typename F::Act;
  const int64_t nb = cols / F::kBlock;
  const auto* act = reinterpret_cast<const Act*>(packed);
  int8_t* pre = n_tok >= kUnpackTokens ? reinterpret_cast<int8_t*>(scratch) : nullptr;
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const PB* wb = reinterpret_cast<const PB*>(pw) + (g / kRows) * nb;
    if (pre != nullptr) decode_group<F>(wb, nb, pre);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const Act* a = act + (t0 / kTok) * nb;
      float* o = out + t0 * ldo + g;
      switch (n_tok - t0 < kTok ? n_tok - t0 : kTok) {
        case 1: packed_tile<F, 1>(wb, nb, a, o, ldo, n_rows, pre); break;
        case 2: packed_tile<F, 2>(wb, nb, a, o, ldo, n_rows, pre); break;
        case 3: packed_tile<F, 3>(wb, nb, a, o, ldo, n_rows, pre); break;
        default: packed_tile<F, 4>(wb, nb, a, o, ldo, n_rows, pre); break;
      }
    }
  }
}

// ---- Float formats (F32, F16, BF16) -------------------------------------------------------------

// Layout of a group (4 rows of cols elements of E::T, the stored bytes rearranged): the columns
// below c16 = cols / 16 * 16 as [16-column chunk][row][16], those up to c4 = cols / 4 * 4 as
// [4-column quad][row][4], the rest as [row][cols - c4]. A tile of one token (decode) then
// evaluates the vec_dot row's expression (kernels_neon.cpp float_vec_dot: 4 accumulators of 4
// lanes per row, quads into the first, the tail in scalar order), and a tile of 2..4 tokens the
// per-call GEMM's (float_run: one accumulator per row and token, 4 columns a step, the tail
// after the reduction): every output is bit-identical to what the unpacked matrix gives today,
// one token or many, with one contiguous stream instead of 4 row streams.
template <typename E>
size_t float_packed_weight_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + kRows - 1) / kRows * kRows * cols) * sizeof(typename E::T);
}

template <typename E>
void float_pack_weights(const GemmWeights& w, int64_t r0, int64_t r1, uint8_t* dst) {
  using T = typename E::T;
  const int64_t cols = w.cols, c16 = cols / 16 * 16, c4 = cols / 4 * 4, tail = cols - c4;
  for (int64_t g = r0; g < r1; g += kRows) {
    const T* rows[kRows];
    group_rows(w, g, static_cast<int>(w.rows - g < kRows ? w.rows - g : kRows), rows);
    T* o = reinterpret_cast<T*>(dst) + g * cols;
    for (int64_t k = 0; k < c16; k += 16)
      for (int r = 0; r < kRows; ++r, o += 16) std::memcpy(o, rows[r] + k, 16 * sizeof(T));
    for (int64_t i = c16; i < c4; i += 4)
      for (int r = 0; r < kRows; ++r, o += 4) std::memcpy(o, rows[r] + i, 4 * sizeof(T));
    for (int r = 0; r < kRows; ++r, o += tail) std::memcpy(o, rows[r] + c4, static_cast<size_t>(tail) * sizeof(T));
  }
}

// One token: float_vec_dot's expression per row.
template <typename E>
void float_packed_tile1(const typename E::T* p, int64_t cols, const float* x, float* out, int n_rows) {
  const int64_t c16 = cols / 16 * 16, c4 = cols / 4 * 4, tail = cols - c4;
  float32x4_t a[kRows][4];
  for (auto& ar : a)
    for (float32x4_t& v : ar) v = vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < c16; k += 16, p += 16 * kRows) {
    float32x4_t y[4];
    for (int j = 0; j < 4; ++j) y[j] = vld1q_f32(x + k + 4 * j);
    for (int r = 0; r < kRows; ++r)
      for (int j = 0; j < 4; ++j) a[r][j] = vfmaq_f32(a[r][j], E::load4(p + 16 * r + 4 * j), y[j]);
  }
  for (int64_t i = c16; i < c4; i += 4, p += 4 * kRows) {
    const float32x4_t y = vld1q_f32(x + i);
    for (int r = 0; r < kRows; ++r) a[r][0] = vfmaq_f32(a[r][0], E::load4(p + 4 * r), y);
  }
  for (int r = 0; r < n_rows; ++r) {
    float t = 0.0f;
    for (int64_t i = 0; i < tail; ++i) t += E::load1(p + r * tail + i) * x[c4 + i];
    out[r] = vaddvq_f32(vaddq_f32(vaddq_f32(a[r][0], a[r][1]), vaddq_f32(a[r][2], a[r][3]))) + t;
  }
}

// T = 2..4 tokens (x: token t at x + t cols): float_run's expression per row and token.
template <typename E, int T>
void float_packed_tile(const typename E::T* p, int64_t cols, const float* x, float* out, int64_t ldo, int n_rows) {
  const int64_t c16 = cols / 16 * 16, c4 = cols / 4 * 4, tail = cols - c4;
  float32x4_t acc[kRows][T];
  for (auto& ar : acc)
    for (float32x4_t& v : ar) v = vdupq_n_f32(0.0f);
  auto step = [&](const typename E::T* wp, int64_t stride, int64_t i) {  // columns i..i+3, row r at wp + r stride
    float32x4_t wr[kRows], xv[T];
    for (int r = 0; r < kRows; ++r) wr[r] = E::load4(wp + r * stride);
    for (int t = 0; t < T; ++t) xv[t] = vld1q_f32(x + t * cols + i);
    for (int r = 0; r < kRows; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = vfmaq_f32(acc[r][t], wr[r], xv[t]);
  };
  for (int64_t k = 0; k < c16; k += 16, p += 16 * kRows)
    for (int j = 0; j < 4; ++j) step(p + 4 * j, 16, k + 4 * j);
  for (int64_t i = c16; i < c4; i += 4, p += 4 * kRows) step(p, 4, i);
  for (int t = 0; t < T; ++t) {
    float32x4_t v = vpaddq_f32(vpaddq_f32(acc[0][t], acc[1][t]), vpaddq_f32(acc[2][t], acc[3][t]));
    if (tail > 0) {
      float tl[kRows] = {};
      for (int r = 0; r < kRows; ++r)
        for (int64_t i = 0; i < tail; ++i) tl[r] += E::load1(p + r * tail + i) * x[t * cols + c4 + i];
      v = vaddq_f32(v, vld1q_f32(tl));
    }
    store_rows(out + t * ldo, v, n_rows);
  }
}

template <typename E>
void float_run_packed(const uint8_t* pw, int64_t /*rows*/, int64_t cols, const uint8_t* packed, int64_t n_tok,
                      int64_t r0, int64_t r1, float* out, int64_t ldo, uint8_t* /*scratch*/) {
  const auto* x = reinterpret_cast<const float*>(packed);
  for (int64_t g = r0; g < r1; g += kRows) {
    const int n_rows = static_cast<int>(r1 - g < kRows ? r1 - g : kRows);
    const auto* p = reinterpret_cast<const typename E::T*>(pw) + g * cols;
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTok) {
      const float* xt = x + t0 * cols;
      float* o = out + t0 * ldo + g;
      switch (n_tok - t0 < kTok ? n_tok - t0 : kTok) {
        case 1: float_packed_tile1<E>(p, cols, xt, o, n_rows); break;
        case 2: float_packed_tile<E, 2>(p, cols, xt, o, ldo, n_rows); break;
        case 3: float_packed_tile<E, 3>(p, cols, xt, o, ldo, n_rows); break;
        default: float_packed_tile<E, 4>(p, cols, xt, o, ldo, n_rows); break;
      }
    }
  }
}

}  // namespace

// The packed members of a GemmKernel row (after its per-call members): packed_row_group,
// packed_weight_bytes, pack_weights, run_packed.
#define EDGELM_NEON_PACKED(F) kRows, packed_weight_bytes_of<F>, pack_weights_of<F>, run_packed_of<F>, kUnpackTokens
#define EDGELM_NEON_PACKED_FLOAT(E) kRows, float_packed_weight_bytes<E>, float_pack_weights<E>, float_run_packed<E>
