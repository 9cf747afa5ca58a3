// NEON load-time packed weights of the grid IQ formats (IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S,
// IQ1_S, IQ1_M), on gemm_neon_packed.h's method (read it first: chunks, tiles of T tokens, the
// decode into scratch from kUnpackTokens tokens on). A piece of the body gemm_neon_impl.h,
// compiled once per level with it, after gemm_neon_packed.h (its integer kernel over registers,
// chunk_or_pre, run_packed_of) and gemm_neon_k.h (the Q8_K activations); nothing else includes it.
//
// Layout: a grid index covers 8 (IQ2, IQ1) or 4 (IQ3) elements, so the quants cannot be stored in
// register order as the nibbles of the other formats are; the stored fields are regrouped
// instead. Block b of a group of 4 rows (PG* below) holds every field of the 4 rows' blocks b as
// [32-element sub-block][row][the field's bytes of that sub-block]: the 4 fp16 scales d side by
// side (one FCVTL; IQ1_M keeps its 4 scale words, whose top nibbles are d, as [word][row]), and
// sub-block j's indices, sign words, high index bits and scales of the 4 rows next to each other,
// so that one vector load gives a field of all 4 rows: the 4 rows' 7-bit sign words get their
// parity bits (IQ2_XXS, IQ3_XXS, IQ2_XS) and the 4 rows' sub-block scales become the 4 int32
// lanes the integer sums are scaled by in a few lane-parallel instructions. Every byte of the
// file is kept and nothing is added: the packed matrix is exactly the stored rows' size (a last
// short group padded to 4 rows).
//
// A chunk (the 32 elements of sub-block j of the 4 rows, 8 registers of the group layout) is
// decoded as the vec_dot decodes a sub-block (iq_grid_neon.h: grid entries loaded into lanes,
// sign bits to byte masks by a table lookup and a bit test), row after row, into each row's two
// registers of 16 elements, then transposed into the level's group layout (grid_rows_to_group:
// the 4x4 dword transpose of interleave(), or its 8-byte row pairs for i8mm).
//
// Arithmetic: per super-block and (row, token) the sub-block dots (of 32 elements where the
// format has one scale per 32, else of 16) times their odd scales 2 s + 1 summed in int32
// (|qsum| <= 256 * 62 * 127 * 31 < 2^26), the scalar vec_dot's exact isum, then (d dy) qsum added
// to the row's running sum without a fused multiply-add, d the fp16 scale times the format's
// power of two (exact): the scalar vec_dot's float expression in its order, so every output is
// bit-identical to it at any token count (tests/kernels/neon_packed_check.cpp).
#if !defined(EDGELM_NEON_GEMM_LEVEL)
#error "gemm_neon_iqgrid_packed.h is a piece of the body of gemm_neon.cpp only"
#endif

namespace {

// Row r's sub-block as rq[r][0] (elements 0-15) and rq[r][1] (16-31) -> the chunk's 8 registers
// in the group layout of interleave() (registers 0-3 elements 0-15, 4-7 elements 16-31).
inline void grid_rows_to_group(const int8x16_t rq[kRows][2], int8x16_t q[8]) {
  for (int h = 0; h < 2; ++h) {
    const int32x4_t a = vreinterpretq_s32_s8(rq[0][h]), b = vreinterpretq_s32_s8(rq[1][h]);
    const int32x4_t c = vreinterpretq_s32_s8(rq[2][h]), d = vreinterpretq_s32_s8(rq[3][h]);
    if constexpr (!kMmla) {  // register k: dword k of rows 0..3
      const int64x2_t ab0 = vreinterpretq_s64_s32(vzip1q_s32(a, b)), cd0 = vreinterpretq_s64_s32(vzip1q_s32(c, d));
      const int64x2_t ab1 = vreinterpretq_s64_s32(vzip2q_s32(a, b)), cd1 = vreinterpretq_s64_s32(vzip2q_s32(c, d));
      q[4 * h] = vreinterpretq_s8_s64(vzip1q_s64(ab0, cd0));
      q[4 * h + 1] = vreinterpretq_s8_s64(vzip2q_s64(ab0, cd0));
      q[4 * h + 2] = vreinterpretq_s8_s64(vzip1q_s64(ab1, cd1));
      q[4 * h + 3] = vreinterpretq_s8_s64(vzip2q_s64(ab1, cd1));
    } else {  // register (c, p): 8 bytes c of rows 2p, 2p + 1
      const int64x2_t a6 = vreinterpretq_s64_s32(a), b6 = vreinterpretq_s64_s32(b);
      const int64x2_t c6 = vreinterpretq_s64_s32(c), d6 = vreinterpretq_s64_s32(d);
      q[4 * h] = vreinterpretq_s8_s64(vzip1q_s64(a6, b6));
      q[4 * h + 1] = vreinterpretq_s8_s64(vzip1q_s64(c6, d6));
      q[4 * h + 2] = vreinterpretq_s8_s64(vzip2q_s64(a6, b6));
      q[4 * h + 3] = vreinterpretq_s8_s64(vzip2q_s64(c6, d6));
    }
  }
}

// 2 s + 1 of 4 bytes s (one per row) as int32 lanes.
inline int32x4_t grid_odd(uint32x4_t s) { return vreinterpretq_s32_u32(vorrq_u32(vshlq_n_u32(s, 1), vdupq_n_u32(1))); }
// The 4 rows' scale bytes s4[r] (low nibble, high nibble): their odd scales.
inline void grid_nibble_scales(const uint8_t* s4, int32x4_t& lo, int32x4_t& hi) {
  const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(iqgrid::load_u32(s4)));
  const uint32x4_t v = vmovl_u16(vget_low_u16(vmovl_u8(b)));
  lo = grid_odd(vandq_u32(v, vdupq_n_u32(15)));
  hi = grid_odd(vshrq_n_u32(v, 4));
}
// The 4 rows' u32 of 4 x 7 sign bits + 4-bit scale (IQ2_XXS, IQ3_XXS): the sign bytes with their
// parity bits per row, or the odd scales.
inline void grid_xxs_signs(const uint32_t* aux4, uint32_t sg[kRows]) {
  vst1q_u32(sg, iqgrid::xxs_sign_bytes(vld1q_u32(aux4)));
}
inline void grid_xxs_scales(const uint32_t* aux4, int32x4_t& lo, int32x4_t& hi) {
  lo = hi = grid_odd(vshrq_n_u32(vld1q_u32(aux4), 28));
}

// Row r's field into dst[i][r] for its N sub-blocks (or scale words) i: sizeof(F) bytes at
// src + i * stride (by default the field's pieces are adjacent in the block).
template <int N, typename F>
inline void regroup(F (&dst)[N][kRows], int r, const void* src, size_t stride = sizeof(F)) {
  for (int i = 0; i < N; ++i) std::memcpy(&dst[i][r], static_cast<const uint8_t*>(src) + i * stride, sizeof(F));
}

// ---- The formats: PG the packed block of a group, rows() the chunk's decode per row -------------
// Each: Block, PG, kScale32 (one scale per 32 elements), pack, d4 (the 4 rows' float d),
// scales(w, j, lo, hi): the 4 rows' odd scales of sub-block j's two 16-element halves (lo = hi
// where kScale32), and rows(w, j, rq): its signed values per row (as grid_rows_to_group takes them).

struct GridIq2Xxs {
  using Block = BlockIQ2_XXS;
  struct PG {
    uint16_t d[kRows];
    uint8_t idx[8][kRows][4];  // grid indices (bytes)
    uint32_t aux[8][kRows];    // 4 x 7 sign bits + 4-bit scale
  };
  static constexpr bool kScale32 = true;
  static void pack(const Block* const rows[kRows], int64_t b, PG& o) {
    for (int r = 0; r < kRows; ++r) {
      const Block& x = rows[r][b];
      const auto* q = reinterpret_cast<const uint8_t*>(x.qs);
      o.d[r] = x.d;
      regroup(o.idx, r, q, 8);
      regroup(o.aux, r, q + 4, 8);
    }
  }
  static float32x4_t d4(const PG& w) { return vmulq_n_f32(half4(w.d), 0.125f); }
  static void scales(const PG& w, int j, int32x4_t& lo, int32x4_t& hi) { grid_xxs_scales(w.aux[j], lo, hi); }
  static void rows(const PG& w, int j, int8x16_t rq[kRows][2]) {
    alignas(16) uint32_t sg[kRows];
    grid_xxs_signs(w.aux[j], sg);
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* i = w.idx[j][r];
      iqgrid::signed_sub(iqgrid::grid2(grids::kIq2xxsGrid, i[0], i[1]), iqgrid::grid2(grids::kIq2xxsGrid, i[2], i[3]),
                         sg[r], rq[r][0], rq[r][1]);
    }
  }
};

struct GridIq3Xxs {
  using Block = BlockIQ3_XXS;
  struct PG {
    uint16_t d[kRows];
    uint8_t idx[8][kRows][8];  // grid indices of 4 elements each
    uint32_t aux[8][kRows];
  };
  static constexpr bool kScale32 = true;
  static void pack(const Block* const rows[kRows], int64_t b, PG& o) {
    for (int r = 0; r < kRows; ++r) {
      const Block& x = rows[r][b];
      o.d[r] = x.d;
      regroup(o.idx, r, x.qs);
      regroup(o.aux, r, x.scales_and_signs);
    }
  }
  static float32x4_t d4(const PG& w) { return vmulq_n_f32(half4(w.d), 0.25f); }
  static void scales(const PG& w, int j, int32x4_t& lo, int32x4_t& hi) { grid_xxs_scales(w.aux[j], lo, hi); }
  static void rows(const PG& w, int j, int8x16_t rq[kRows][2]) {
    alignas(16) uint32_t sg[kRows];
    grid_xxs_signs(w.aux[j], sg);
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* i = w.idx[j][r];
      iqgrid::signed_sub(iqgrid::grid4(grids::kIq3xxsGrid, i[0], i[1], i[2], i[3]),
                         iqgrid::grid4(grids::kIq3xxsGrid, i[4], i[5], i[6], i[7]), sg[r], rq[r][0], rq[r][1]);
    }
  }
};

struct GridIq2Xs {
  using Block = BlockIQ2_XS;
  struct PG {
    uint16_t d[kRows];
    uint16_t qs[8][kRows][4];  // 9-bit grid index | 7-bit sign index << 9
    uint8_t sc[8][kRows];      // the two 4-bit scales of the sub-block
  };
  static constexpr bool kScale32 = false;
  static void pack(const Block* const rows[kRows], int64_t b, PG& o) {
    for (int r = 0; r < kRows; ++r) {
      const Block& x = rows[r][b];
      o.d[r] = x.d;
      regroup(o.qs, r, x.qs);
      regroup(o.sc, r, x.scales);
    }
  }
  static float32x4_t d4(const PG& w) { return vmulq_n_f32(half4(w.d), 0.125f); }
  static void scales(const PG& w, int j, int32x4_t& lo, int32x4_t& hi) { grid_nibble_scales(w.sc[j], lo, hi); }
  static void rows(const PG& w, int j, int8x16_t rq[kRows][2]) {
    alignas(16) uint32_t sg[kRows];  // row r: its 4 sign bytes, parity included
    const uint8x8_t s01 = vmovn_u16(vshrq_n_u16(vld1q_u16(w.qs[j][0]), 9));
    const uint8x8_t s23 = vmovn_u16(vshrq_n_u16(vld1q_u16(w.qs[j][2]), 9));
    vst1q_u8(reinterpret_cast<uint8_t*>(sg), iqgrid::with_parity(vcombine_u8(s01, s23)));
    for (int r = 0; r < kRows; ++r) {
      const uint16_t* q = w.qs[j][r];
      iqgrid::signed_sub(iqgrid::grid2(grids::kIq2xsGrid, q[0] & 511u, q[1] & 511u),
                         iqgrid::grid2(grids::kIq2xsGrid, q[2] & 511u, q[3] & 511u), sg[r], rq[r][0], rq[r][1]);
    }
  }
};

struct GridIq2S {
  using Block = BlockIQ2_S;
  struct PG {
    uint16_t d[kRows];
    uint8_t qs[8][kRows][4];     // low 8 bits of the 4 grid indices
    uint8_t signs[8][kRows][4];  // one bit per element
    uint8_t qh[8][kRows];        // top 2 bits of the 4 indices
    uint8_t sc[8][kRows];        // the two 4-bit scales
  };
  static constexpr bool kScale32 = false;
  static void pack(const Block* const rows[kRows], int64_t b, PG& o) {
    for (int r = 0; r < kRows; ++r) {
      const Block& x = rows[r][b];
      o.d[r] = x.d;
      regroup(o.qs, r, x.qs);
      regroup(o.signs, r, x.signs);
      regroup(o.qh, r, x.qh);
      regroup(o.sc, r, x.scales);
    }
  }
  static float32x4_t d4(const PG& w) { return vmulq_n_f32(half4(w.d), 0.125f); }
  static void scales(const PG& w, int j, int32x4_t& lo, int32x4_t& hi) { grid_nibble_scales(w.sc[j], lo, hi); }
  static void rows(const PG& w, int j, int8x16_t rq[kRows][2]) {
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* q = w.qs[j][r];
      const uint32_t h = w.qh[j][r];
      iqgrid::signed_sub(iqgrid::grid2(grids::kIq2sGrid, q[0] | (h & 3) << 8, q[1] | ((h >> 2) & 3) << 8),
                         iqgrid::grid2(grids::kIq2sGrid, q[2] | ((h >> 4) & 3) << 8, q[3] | (h >> 6) << 8),
                         iqgrid::load_u32(w.signs[j][r]), rq[r][0], rq[r][1]);
    }
  }
};

struct GridIq3S {
  using Block = BlockIQ3_S;
  struct PG {
    uint16_t d[kRows];
    uint8_t qs[8][kRows][8];     // low 8 bits of the 8 grid indices
    uint8_t signs[8][kRows][4];  // one bit per element
    uint8_t qh[8][kRows];        // bit l: the top bit of index l
    uint8_t sc[4][kRows];        // the 4-bit scales of sub-blocks 2 k (low nibble), 2 k + 1
  };
  static constexpr bool kScale32 = true;
  static void pack(const Block* const rows[kRows], int64_t b, PG& o) {
    for (int r = 0; r < kRows; ++r) {
      const Block& x = rows[r][b];
      o.d[r] = x.d;
      regroup(o.qs, r, x.qs);
      regroup(o.signs, r, x.signs);
      regroup(o.qh, r, x.qh);
      regroup(o.sc, r, x.scales);
    }
  }
  static float32x4_t d4(const PG& w) { return half4(w.d); }
  static void scales(const PG& w, int j, int32x4_t& lo, int32x4_t& hi) {
    int32x4_t s_lo, s_hi;
    grid_nibble_scales(w.sc[j / 2], s_lo, s_hi);
    lo = hi = j % 2 == 0 ? s_lo : s_hi;
  }
  static void rows(const PG& w, int j, int8x16_t rq[kRows][2]) {
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* q = w.qs[j][r];
      const uint32_t h = w.qh[j][r];
      uint32_t i[8];
      for (int l = 0; l < 8; ++l) i[l] = q[l] | ((h >> l) & 1) << 8;
      iqgrid::signed_sub(iqgrid::grid4(grids::kIq3sGrid, i[0], i[1], i[2], i[3]),
                         iqgrid::grid4(grids::kIq3sGrid, i[4], i[5], i[6], i[7]), iqgrid::load_u32(w.signs[j][r]),
                         rq[r][0], rq[r][1]);
    }
  }
};

struct GridIq1S {
  using Block = BlockIQ1_S;
  struct PG {
    uint16_t d[kRows];
    uint8_t qs[8][kRows][4];  // low 8 bits of the 4 grid indices
    uint16_t qh[8][kRows];    // 4 x 3 index bits, 3-bit scale, delta sign
  };
  static constexpr bool kScale32 = true;
  static void pack(const Block* const rows[kRows], int64_t b, PG& o) {
    for (int r = 0; r < kRows; ++r) {
      const Block& x = rows[r][b];
      o.d[r] = x.d;
      regroup(o.qs, r, x.qs);
      regroup(o.qh, r, x.qh);
    }
  }
  static float32x4_t d4(const PG& w) { return vmulq_n_f32(half4(w.d), 0.125f); }
  static void scales(const PG& w, int j, int32x4_t& lo, int32x4_t& hi) {
    lo = hi = grid_odd(vandq_u32(vshrq_n_u32(vmovl_u16(vld1_u16(w.qh[j])), 12), vdupq_n_u32(7)));
  }
  static void rows(const PG& w, int j, int8x16_t rq[kRows][2]) {
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* q = w.qs[j][r];
      const uint32_t qh = w.qh[j][r];
      const int8x16_t delta = vdupq_n_s8((qh & 0x8000) ? -1 : 1);
      rq[r][0] = iqgrid::iq1_values(
          iqgrid::grid2(grids::kIq1sGrid, q[0] | ((qh << 8) & 0x700), q[1] | ((qh << 5) & 0x700)), delta);
      rq[r][1] = iqgrid::iq1_values(
          iqgrid::grid2(grids::kIq1sGrid, q[2] | ((qh << 2) & 0x700), q[3] | ((qh >> 1) & 0x700)), delta);
    }
  }
};

struct GridIq1M {
  using Block = BlockIQ1_M;
  struct PG {
    uint16_t sc[4][kRows];    // the scale words as stored: 3-bit scales, d in the top nibbles
    uint8_t qs[8][kRows][4];  // low 8 bits of the 4 grid indices
    uint8_t qh[8][kRows][2];  // per group of 8 a nibble: 3 index bits, the delta sign
  };
  static constexpr bool kScale32 = false;
  static void pack(const Block* const rows[kRows], int64_t b, PG& o) {
    for (int r = 0; r < kRows; ++r) {
      const Block& x = rows[r][b];
      regroup(o.sc, r, x.scales);
      regroup(o.qs, r, x.qs);
      regroup(o.qh, r, x.qh);
    }
  }
  static float32x4_t d4(const PG& w) {
    const uint16x4_t bits = vorr_u16(
        vorr_u16(vshr_n_u16(vld1_u16(w.sc[0]), 12), vand_u16(vshr_n_u16(vld1_u16(w.sc[1]), 8), vdup_n_u16(0x00f0))),
        vorr_u16(vand_u16(vshr_n_u16(vld1_u16(w.sc[2]), 4), vdup_n_u16(0x0f00)),
                 vand_u16(vld1_u16(w.sc[3]), vdup_n_u16(0xf000))));
    return vmulq_n_f32(vcvt_f32_f16(vreinterpret_f16_u16(bits)), 0.125f);
  }
  static void scales(const PG& w, int j, int32x4_t& lo, int32x4_t& hi) {
    uint16x4_t s = vld1_u16(w.sc[j / 2]);  // halves 2 j, 2 j + 1: 3 bits each
    if (j % 2 != 0) s = vshr_n_u16(s, 6);
    const uint32x4_t s32 = vmovl_u16(s);
    lo = grid_odd(vandq_u32(s32, vdupq_n_u32(7)));
    hi = grid_odd(vandq_u32(vshrq_n_u32(s32, 3), vdupq_n_u32(7)));
  }
  static void rows(const PG& w, int j, int8x16_t rq[kRows][2]) {
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* q = w.qs[j][r];
      const uint32_t h0 = w.qh[j][r][0], h1 = w.qh[j][r][1];
      const uint32_t n[4] = {h0 & 15u, h0 >> 4, h1 & 15u, h1 >> 4};
      int8x8_t dl[4];  // +1, or -1 where the nibble's bit 3 is set
      for (int g = 0; g < 4; ++g) dl[g] = vdup_n_s8((n[g] & 8) ? -1 : 1);
      rq[r][0] = iqgrid::iq1_values(iqgrid::grid2(grids::kIq1sGrid, q[0] | (n[0] & 7) << 8, q[1] | (n[1] & 7) << 8),
                                    vcombine_s8(dl[0], dl[1]));
      rq[r][1] = iqgrid::iq1_values(iqgrid::grid2(grids::kIq1sGrid, q[2] | (n[2] & 7) << 8, q[3] | (n[3] & 7) << 8),
                                    vcombine_s8(dl[2], dl[3]));
    }
  }
};

// ---- The packed format over a grid decoder (gemm_neon_packed.h's format interface) -------------

template <typename G>
struct GridPackedFormat {
  using BX = typename G::Block;
  using PB = typename G::PG;
  using Act = ActQ8_K;
  static constexpr int64_t kBlock = kQK_K;
  static constexpr int kChunks = 8;
  static_assert(sizeof(PB) == kRows * sizeof(BX), "a packed group block keeps the stored bytes, no more");
  static_assert(sizeof(UGrid) >= kChunks * 128, "decode_group's bytes per block fit grid_scratch_bytes");

  static void pack(const BX* const rows[kRows], int64_t b, PB& o) { G::pack(rows, b, o); }
  static void chunk(const PB& w, int j, int8x16_t q[8]) {
    int8x16_t rq[kRows][2];
    G::rows(w, j, rq);
    grid_rows_to_group(rq, q);
  }

  template <int T>
  static void tile(const PB* wb, int64_t nb, const Act* a, float32x4_t f[kTok], const int8_t* pre) {
    for (int64_t b = 0; b < nb; ++b) {
      const PB& w = wb[b];
      int32x4_t qs[kTok];
      for (int t = 0; t < T; ++t) qs[t] = vdupq_n_s32(0);
      for (int j = 0; j < 8; ++j) {
        int8x16_t q[8];
        chunk_or_pre<GridPackedFormat>(w, b, j, pre, q);
        int32x4_t lo, hi;  // the scales come from w whether or not the quants come from pre
        G::scales(w, j, lo, hi);
        if constexpr (G::kScale32) {
          int32x4_t isum[kTok];
          subblock_regs<32, kQK_K, T>(q, a[b].qs, 32 * j, isum);
          for (int t = 0; t < T; ++t) qs[t] = vmlaq_s32(qs[t], isum[t], lo);
        } else {
          int32x4_t i0[kTok], i1[kTok];
          subblock_regs<16, kQK_K, T>(q, a[b].qs, 32 * j, i0);
          subblock_regs<16, kQK_K, T>(q + 4, a[b].qs, 32 * j + 16, i1);
          for (int t = 0; t < T; ++t) qs[t] = vmlaq_s32(vmlaq_s32(qs[t], i0[t], lo), i1[t], hi);
        }
      }
      const float32x4_t d = G::d4(w);
      for (int t = 0; t < T; ++t) f[t] = vaddq_f32(f[t], vmulq_f32(vmulq_n_f32(d, a[b].d[t]), vcvtq_f32_s32(qs[t])));
    }
  }
};

using FmtIQ3_S = GridPackedFormat<GridIq3S>;
using FmtIQ2_XS = GridPackedFormat<GridIq2Xs>;
using FmtIQ2_XXS = GridPackedFormat<GridIq2Xxs>;
using FmtIQ3_XXS = GridPackedFormat<GridIq3Xxs>;
using FmtIQ2_S = GridPackedFormat<GridIq2S>;
using FmtIQ1_S = GridPackedFormat<GridIq1S>;
using FmtIQ1_M = GridPackedFormat<GridIq1M>;

}  // namespace
