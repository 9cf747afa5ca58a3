// Multi-token GEMM (gemm.h) for AArch64: the body of the three NEON variants, included by
// gemm_neon.cpp once per variant inside its own namespace, each under its own instruction set:
//  - EDGELM_NEON_GEMM_LEVEL 0: baseline ARMv8.0 (vmull_s8 products, vpadalq_s16 into int32);
//  - 1: +dotprod (SDOT, vdotq_laneq_s32: 4 products of every lane summed into it);
//  - 2: +i8mm (SMMLA, vmmlaq_s32: a 2x8 by 8x2 int8 product into a 2x2 int32 tile).
// Nothing else may include it; only gemm_neon.cpp's tables reach it, after the CPU check.
//
// The body is this file (what every format shares: tile constants, the weight interleave, the
// integer sub-block kernel, the output) and the pieces it includes, one per family of formats:
//  - gemm_neon_legacy.h: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (32-element blocks, Q8_0 / Q8_1 activations);
//  - gemm_neon_k.h: Q4_K, Q5_K, Q6_K (256-element super-blocks, Q8_K activations);
//  - gemm_neon_float.h: F32, F16, BF16 (float lanes);
//  - gemm_neon_lowbit.h: Q2_K, Q3_K, IQ4_XS, TQ2_0, TQ1_0 (super-blocks, Q8_K), IQ4_NL, MXFP4
//    (32-element blocks, Q8_0);
//  - gemm_neon_iqgrid.h: IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S, IQ1_S, IQ1_M (grid IQ formats,
//    decoded by iq_grid_neon.h; Q8_K activations);
//  - gemm_neon_packed.h: the load-time packed layouts of the first three families and IQ4_NL,
//    MXFP4 (pack_weights / run_packed), which decode (one token) and prefill read directly;
//    gemm_neon_lowbit.h adds those of Q2_K, Q3_K, IQ4_XS, TQ2_0, TQ1_0 on the same method, and
//    gemm_neon_iqgrid_packed.h those of the grid IQ formats.
// The pieces, like this file, are compiled once per level; the table of the level, kGemms, is at
// the end of this file.
//
// Why not vec_dot per (row, token): every token would unpack every weight block again and end
// each block in a float conversion and a scaled add. Here a group of kRows = 4 weight rows is
// unpacked once per matmul into signed bytes (the formats' offsets subtracted: Q4_0 q - 8, Q5_0
// q - 16, Q6_K q - 32; Q4_1 nibbles 0..15, Q5_1 and Q5_K 0..31, Q4_K 0..15) and interleaved so that
// one register serves all 4 rows:
//  - levels 0 and 1: register k of a sub-block holds elements 4k..4k+3 of rows 0..3 (one row per
//    32-bit lane); a token's 4 activations are broadcast (level 0: ld1r) or picked by lane
//    (level 1: SDOT by element), so one instruction advances the sums of all 4 rows;
//  - level 2: register (c, p) holds elements 8c..8c+7 of rows 2p and 2p+1; the activations of two
//    tokens are interleaved the same way (place_token()), and one SMMLA gives 2 tokens x 2 rows.
// Every sub-block's sum is an exact int32 (int8 x int8 products, at most 32 of them, into
// int32), and every weight block then costs one float conversion and one FMA for 4 rows x 1
// token. Formats with a minimum add it from the activations' block sums: Q4_1 and Q5_1 one more
// FMA per block (m times Q8_1's stored s, as the scalar kernel); K formats combine their
// sub-block sums with the integer sub-block scales (and mins with the activations' block sums)
// in int32 first, exactly as the scalar kernel does, then evaluate the scalar kernel's float
// expression per super-block. The results differ from the scalar vec_dot by float
// reassociation of the per-block terms only (tests/kernels/neon_selftest.cpp).
//
// F32, F16 and BF16 keep float lanes (the 16-bit weights converted to f32 as they are loaded,
// which is exact): 4 rows x 4 tokens of 4-column FMAs, one reduction per (row, token).
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

// ---- Packed activations -------------------------------------------------------------------------

// Integer formats pack per tile of kTok tokens, per block; qs layouts (kBlk elements per token):
//  - levels 0, 1: [kTok tokens][kBlk];
//  - level 2: [kTok / 2 pairs][kBlk / 8 chunks][2 tokens][8].
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

// ---- Unpacked weights of one group of kRows rows --------------------------------------------------

// The kRows rows of the group starting at row g, of which n_rows exist: a short last group
// repeats its last row.
template <typename T>
void group_rows(const GemmWeights& w, int64_t g, int n_rows, const T* rows[kRows]) {
  for (int r = 0; r < kRows; ++r)
    rows[r] = reinterpret_cast<const T*>(w.data + static_cast<size_t>(g + (r < n_rows ? r : n_rows - 1)) * w.row_bytes);
}

// Integer formats unpack every block of the group; q layouts (kBlk elements per row, 4 * kBlk
// bytes; the elements from e on start at q + 4 e):
//  - levels 0, 1: [kBlk / 4 dwords][kRows rows][4];
//  - level 2: [kBlk / 8 chunks][kRows / 2 pairs][2 rows][8].
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

// 4 bits -> bytes: low nibbles and high nibbles of 16 packed bytes.
inline uint8x16_t low_nibbles(uint8x16_t v) { return vandq_u8(v, vdupq_n_u8(0x0f)); }
inline uint8x16_t high_nibbles(uint8x16_t v) { return vshrq_n_u8(v, 4); }

// 0x10 in the lanes of `bits` that have any bit of `mask` set, else 0: the 5th bit of a 5-bit quant.
inline uint8x16_t fifth_bit(uint8x16_t bits, uint8x16_t mask) {
  return vandq_u8(vtstq_u8(bits, mask), vdupq_n_u8(0x10));
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

}  // namespace

// The formats, each family in its own piece (compiled in this level's namespace, as this file).
#include "kernels/gemm_neon_float.h"
#include "kernels/gemm_neon_k.h"
#include "kernels/gemm_neon_iqgrid.h"  // after gemm_neon_k.h (its Q8_K activations)
#include "kernels/gemm_neon_legacy.h"
#include "kernels/gemm_neon_packed.h"  // load-time packing of the integer rows (after the two above)
#include "kernels/gemm_neon_lowbit.h"  // after gemm_neon_k.h and gemm_neon_legacy.h: uses their packing
#include "kernels/gemm_neon_iqgrid_packed.h"  // after gemm_neon_packed.h: the grid IQ formats' packing

// The GEMM rows of this variant (gemm_neon.cpp gathers them into the tables).
constexpr GemmKernel kGemms[kNeonGemmCount] = {
    {DType::q8_0, legacy_packed_bytes<ActQ8_0>, legacy_pack<BlockQ8_0, ActQ8_0>, legacy_scratch_bytes,
     legacy_run<BlockQ8_0, ActQ8_0, unpack_q8_0>, EDGELM_NEON_PACKED(FmtQ8_0)},
    {DType::q4_0, legacy_packed_bytes<ActQ8_0>, legacy_pack<BlockQ8_0, ActQ8_0>, legacy_scratch_bytes,
     legacy_run<BlockQ4_0, ActQ8_0, unpack_q4_0>, EDGELM_NEON_PACKED(FmtQ4_0)},
    {DType::q4_1, legacy_packed_bytes<ActQ8_1>, legacy_pack<BlockQ8_1, ActQ8_1>, legacy_scratch_bytes,
     legacy_run<BlockQ4_1, ActQ8_1, unpack_q4_1>, EDGELM_NEON_PACKED(FmtQ4_1)},
    {DType::q5_0, legacy_packed_bytes<ActQ8_0>, legacy_pack<BlockQ8_0, ActQ8_0>, legacy_scratch_bytes,
     legacy_run<BlockQ5_0, ActQ8_0, unpack_q5_0>, EDGELM_NEON_PACKED(FmtQ5_0)},
    {DType::q5_1, legacy_packed_bytes<ActQ8_1>, legacy_pack<BlockQ8_1, ActQ8_1>, legacy_scratch_bytes,
     legacy_run<BlockQ5_1, ActQ8_1, unpack_q5_1>, EDGELM_NEON_PACKED(FmtQ5_1)},
    {DType::q4_k, q8_k_packed_bytes, q8_k_pack, k_min_scratch_bytes, k_min_run<BlockQ4_K, unpack_q4_k>,
     EDGELM_NEON_PACKED(FmtQ4_K)},
    {DType::q5_k, q8_k_packed_bytes, q8_k_pack, k_min_scratch_bytes, k_min_run<BlockQ5_K, unpack_q5_k>,
     EDGELM_NEON_PACKED(FmtQ5_K)},
    {DType::q6_k, q8_k_packed_bytes, q8_k_pack, q6_k_scratch_bytes, q6_k_run, EDGELM_NEON_PACKED(FmtQ6_K)},
    {DType::f32, float_packed_bytes, float_pack<F32Lanes>, float_scratch_bytes, float_run<F32Lanes>,
     EDGELM_NEON_PACKED_FLOAT(F32Lanes)},
    {DType::f16, float_packed_bytes, float_pack<F16Lanes>, float_scratch_bytes, float_run<F16Lanes>,
     EDGELM_NEON_PACKED_FLOAT(F16Lanes)},
    {DType::bf16, float_packed_bytes, float_pack<BF16Lanes>, float_scratch_bytes, float_run<BF16Lanes>,
     EDGELM_NEON_PACKED_FLOAT(BF16Lanes)},
    // gemm_neon_lowbit.h
    {DType::q2_k, lowk_packed_bytes<Q2KFormat>, lowk_pack<Q2KFormat>, lowk_scratch_bytes<Q2KFormat>,
     lowk_run<Q2KFormat>, EDGELM_NEON_PACKED(FmtQ2_K)},
    {DType::q3_k, lowk_packed_bytes<Q3KFormat>, lowk_pack<Q3KFormat>, lowk_scratch_bytes<Q3KFormat>,
     lowk_run<Q3KFormat>, EDGELM_NEON_PACKED(FmtQ3_K)},
    {DType::iq4_xs, lowk_packed_bytes<IQ4XSFormat>, lowk_pack<IQ4XSFormat>, lowk_scratch_bytes<IQ4XSFormat>,
     lowk_run<IQ4XSFormat>, EDGELM_NEON_PACKED(FmtIQ4_XS)},
    {DType::tq2_0, lowk_packed_bytes<TQ2Format>, lowk_pack<TQ2Format>, lowk_scratch_bytes<TQ2Format>,
     lowk_run<TQ2Format>, EDGELM_NEON_PACKED(FmtTQ2_0)},
    {DType::tq1_0, lowk_packed_bytes<TQ1Format>, lowk_pack<TQ1Format>, lowk_scratch_bytes<TQ1Format>,
     lowk_run<TQ1Format>, EDGELM_NEON_PACKED(FmtTQ1_0)},
    {DType::iq4_nl, legacy_packed_bytes<ActQ8_0>, legacy_pack<BlockQ8_0, ActQ8_0>, legacy_scratch_bytes,
     block32_run<IQ4NLFormat>, EDGELM_NEON_PACKED(FmtIQ4_NL)},
    {DType::mxfp4, legacy_packed_bytes<ActQ8_0>, legacy_pack<BlockQ8_0, ActQ8_0>, legacy_scratch_bytes,
     block32_run<MXFP4Format>, EDGELM_NEON_PACKED(FmtMXFP4)},
    // gemm_neon_iqgrid.h
    {DType::iq3_s, q8_k_packed_bytes, q8_k_pack, grid_scratch_bytes, grid_run<iqgrid::Iq3S>,
     EDGELM_NEON_PACKED(FmtIQ3_S)},
    {DType::iq2_xs, q8_k_packed_bytes, q8_k_pack, grid_scratch_bytes, grid_run<iqgrid::Iq2Xs>,
     EDGELM_NEON_PACKED(FmtIQ2_XS)},
    {DType::iq2_xxs, q8_k_packed_bytes, q8_k_pack, grid_scratch_bytes, grid_run<iqgrid::Iq2Xxs>,
     EDGELM_NEON_PACKED(FmtIQ2_XXS)},
    {DType::iq3_xxs, q8_k_packed_bytes, q8_k_pack, grid_scratch_bytes, grid_run<iqgrid::Iq3Xxs>,
     EDGELM_NEON_PACKED(FmtIQ3_XXS)},
    {DType::iq2_s, q8_k_packed_bytes, q8_k_pack, grid_scratch_bytes, grid_run<iqgrid::Iq2S>,
     EDGELM_NEON_PACKED(FmtIQ2_S)},
    {DType::iq1_s, q8_k_packed_bytes, q8_k_pack, grid_scratch_bytes, grid_run<iqgrid::Iq1S>,
     EDGELM_NEON_PACKED(FmtIQ1_S)},
    {DType::iq1_m, q8_k_packed_bytes, q8_k_pack, grid_scratch_bytes, grid_run<iqgrid::Iq1M>,
     EDGELM_NEON_PACKED(FmtIQ1_M)},
};
