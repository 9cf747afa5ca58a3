// AMX-INT8 tiles over the AVX-512 packed layouts: the last part of gemm_avx512.cpp (after
// gemm_x86_packed.h, whose layouts, group extractors and packed tiles it uses; the linkage rules
// of gemm_x86_impl.h apply). Reached only through isa_kernels(Isa::amx), after the CPU check and
// the OS grant of the tile state.
//
// Why on the packed layouts: a load-time packed group of 16 rows holds, per 4 elements, one
// 32-bit lane per row, which is exactly a row of an AMX B tile (K/4 rows x 16 columns x 4
// bytes). So the amx ISA keeps the avx512 packed matrices (decode and small batches stream them
// through the AVX-512 tiles, as on avx512) and, from 16 tokens on, multiplies the same bytes with
// TDPBSSD / TDPBSUD, after the groups of each 16 rows are extracted once per matmul into
// scratch (the extraction the AVX-512 tiles do per token tile). Nothing is stored twice.
//
// Exactness: per (token, row) and block, the tile product gives the exact int32 sum of the
// block's products, the very integer the AVX-512 tile sums with VPDPBUSD; the scales, zero points and
// minimums are then applied in the AVX-512 tile's integer and float operations, in its order.
// So a token's outputs are the same bits whether it is computed alone (AVX-512) or in a batch
// (AMX), and the tokens past the last full 16 go through the AVX-512 tiles.
//
// Tiles (amx_legacy, amx_iq4_xs, amx_tq2_0): 0-1 accumulators C (16 tokens x 16 rows, int32),
// 2-3 activations A (16 tokens x 32 bytes, read in place from the packed activations with the
// token stride), 4-5 weights B (8 rows x 64 bytes). Two accumulators alternate so that the next
// block's product overlaps the epilogue of the current one. Q4_K and Q5_K (amx_k4) instead fold
// their sub-block multipliers into two copies of the weights, Q6_K (amx_q6_k) its scales into
// three, and take full-depth products (their own tiles below).
//
// What bounds it: a block scale every 32 elements makes every product a half-depth tile (K 32
// of 64) followed by an epilogue over its 256 sums, which reach it through a tile store and
// reloads. bench_kernels packed/<type>/<isa>/128x4096/t128 (2-core Xeon VM with AMX, CPU time,
// loaded), AVX-512 tiles -> AMX: Q4_0 336 -> 227 us, Q8_0 298 -> 239, Q4_K 331 -> 251, Q5_K 309
// -> 274; consuming each tile store right after it instead of one step later: 255, 284, 329,
// 270; without any epilogue the Q4_0 products alone: 141. With split multipliers (amx_k4) and
// 64-byte aligned activations: Q4_K 268-273 -> 177-184 us, Q5_K 277-278 -> 174-180; at
// 4096x4096 t128 9.5-9.8 -> 5.8-6.4 ms and 9.5-9.8 -> 6.2 ms. The tile loads need aligned rows:
// a 64-byte row split over two lines (malloc's 16-byte alignment) cost 10-12%.
#pragma once
#if !EDGELM_GEMM_VNNI || !EDGELM_GEMM_ZMM
#error "gemm_x86_amx.h is part of gemm_avx512.cpp only"
#endif

namespace edgelm::kernels::x86 {
namespace {

constexpr int kAmxTok = 16;  // tokens of an AMX tile (A and C rows)
static_assert(kRows == 16, "an AMX B tile row holds 16 weight rows of 4 bytes");
// The extracted groups fit the per-call scratch of the same type (scratch_bytes(cols)).
static_assert(sizeof(WLegacy) >= 8 * kGroupBytes && sizeof(WK4) >= 64 * kGroupBytes && sizeof(WK6) >= 64 * kGroupBytes &&
              2 * kQK_K * kRows == 128 * kGroupBytes);  // k4_scratch: amx_k4's split copies

// Keeps the compiler from moving plain loads and stores across a tile instruction whose asm
// does not declare the memory it reads or writes.
inline void amx_barrier() { __asm__ volatile("" ::: "memory"); }

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// ks: elements (bytes) per product.
inline void amx_configure(int ks) {
  TileConfig c;
  std::memset(&c, 0, sizeof c);
  c.palette_id = 1;
  for (int t = 0; t < 2; ++t) {
    c.rows[t] = kAmxTok;
    c.colsb[t] = kRows * 4;
  }
  for (int t = 2; t < 4; ++t) {
    c.rows[t] = kAmxTok;
    c.colsb[t] = static_cast<uint16_t>(ks);
  }
  for (int t = 4; t < 6; ++t) {
    c.rows[t] = static_cast<uint8_t>(ks / 4);
    c.colsb[t] = kRows * 4;
  }
  amx_barrier();
  _tile_loadconfig(&c);
}

// One product's operands: A rows of 16 tokens (a_stride bytes apart), the B tile (64-byte rows).
struct AmxOperands {
  const int8_t* a;
  const uint8_t* b;
};

// The product into accumulator C, and the store of its sums (the AMX intrinsics take tile
// numbers as literals). kSigned: signed weights (TDPBSSD), else unsigned (TDPBSUD); activations
// are signed.
#define EDGELM_AMX_PRODUCT(C, A, B)             \
  _tile_zero(C);                                \
  _tile_loadd(A, o.a, a_stride);                \
  _tile_loadd(B, o.b, kRows * 4);               \
  if constexpr (kSigned)                        \
    _tile_dpbssd(C, A, B);                      \
  else                                          \
    _tile_dpbsud(C, A, B)
template <int C, bool kSigned>
inline void amx_product(AmxOperands o, int64_t a_stride) {
  amx_barrier();
  if constexpr (C == 0) {
    EDGELM_AMX_PRODUCT(0, 2, 4);
  } else {
    EDGELM_AMX_PRODUCT(1, 3, 5);
  }
}
#undef EDGELM_AMX_PRODUCT
template <int C>
inline void amx_store(int32_t* isum) {
  if constexpr (C == 0)
    _tile_stored(0, isum, kRows * 4);
  else
    _tile_stored(1, isum, kRows * 4);
  amx_barrier();
}

// Products 0..n-1 (ops(i): their operands) in order, each consumed (consume(i, isum): isum[t *
// 16 + r] for token t, row r) one step after its tile was stored: the sums of product i + 1 are
// stored while product i's are consumed, so the epilogue never reloads a tile store that is
// still in flight (a tile store does not forward to the loads that follow it), and product i + 2
// computes meanwhile. Product i uses accumulator i % 2 and sum buffer i % 2.
template <bool kSigned, typename Ops, typename Consume>
inline void amx_products(int64_t n, int64_t a_stride, Ops ops, Consume consume) {
  alignas(64) int32_t isum[2][kAmxTok * kRows];
  const auto step = [&](auto tile, int64_t i) {  // product i is in isum[C], i + 1 in tile 1 - C
    constexpr int C = decltype(tile)::value;
    if (i + 2 < n) amx_product<C, kSigned>(ops(i + 2), a_stride);
    if (i + 1 < n) amx_store<1 - C>(isum[1 - C]);
    consume(i, isum[C]);
  };
  amx_product<0, kSigned>(ops(0), a_stride);
  if (n > 1) amx_product<1, kSigned>(ops(1), a_stride);
  amx_store<0>(isum[0]);
  for (int64_t i = 0; i < n; i += 2) {
    step(std::integral_constant<int, 0>{}, i);
    if (i + 1 < n) step(std::integral_constant<int, 1>{}, i + 1);
  }
}

inline VI isum_row(const int32_t* isum, int t) { return _mm512_load_si512(isum + t * kRows); }

// Q8_0 and Q4_0: the groups extracted once per group of rows into scratch as signed bytes (Q8_0:
// its biased quants - 128, Q4_0: nibbles - 8), 512 bytes a block, so that the product is the
// block's signed sum and no per-token zero point is left to add: per block and token, out +=
// (d * y.d) * sum, as tile_packed_legacy (whose bias + unsigned sum is the same integer).
template <typename PB>
void amx_legacy(const uint8_t* pw, int64_t cols, const uint8_t* packed, int64_t n_full, int64_t r0, int64_t r1,
                float* out, int64_t ldo, uint8_t* scratch) {
  const int64_t nb = cols / kQK;
  const int64_t a_stride = nb * static_cast<int64_t>(sizeof(ActQ8));
  const auto* act = reinterpret_cast<const ActQ8*>(packed);
  amx_configure(kQK);
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const PB* wb = reinterpret_cast<const PB*>(pw) + (g0 / kRows) * nb;
    const int n_rows = static_cast<int>(min64(kRows, r1 - g0));
    for (int64_t b = 0; b < nb; ++b) {
      prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
      for (int g = 0; g < 8; ++g) {
        VI q;
        if constexpr (std::is_same_v<PB, PQ8_0>)
          q = vi_xor(group_q8_0(wb[b], g), vi_set1_8(static_cast<char>(0x80)));
        else
          q = _mm512_sub_epi8(group_q4(wb[b], g), vi_set1_8(8));
        vi_store(scratch + (b * 8 + g) * kGroupBytes, q);
      }
    }
    for (int64_t t0 = 0; t0 < n_full; t0 += kAmxTok) {
      const ActQ8* y = act + t0 * nb;
      VF facc[kAmxTok];
      for (VF& f : facc) f = vf_zero();
      const auto ops = [&](int64_t b) { return AmxOperands{y[b].qs, scratch + b * 8 * kGroupBytes}; };
      const auto consume = [&](int64_t b, const int32_t* isum) {
        const VF d = vf_half(wb[b].d);
#pragma GCC unroll 16
        for (int t = 0; t < kAmxTok; ++t)
          facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t * nb + b].d)), vf_cvt(isum_row(isum, t)), facc[t]);
      };
      amx_products<true>(nb, a_stride, ops, consume);
      for (int t = 0; t < kAmxTok; ++t) vf_store_rows(out + (t0 + t) * ldo + g0, facc[t], n_rows);
    }
  }
  _tile_release();
}

// The super-block formats: 8 sub-blocks of 32 with a multiplier each (Q4_K, Q5_K, IQ4_XS), or
// one scale a block (TQ2_0).
enum class SuperFormat { q4_k, q5_k, iq4_xs, tq2_0 };

template <SuperFormat F>
using SuperBlock = std::conditional_t<
    F == SuperFormat::q4_k, PQ4_K,
    std::conditional_t<F == SuperFormat::q5_k, PQ5_K, std::conditional_t<F == SuperFormat::iq4_xs, PQIQ4_XS, PQTQ2_0>>>;

// Q4_K and Q5_K: split multipliers. A sub-block's multiplier m (6 bits) is 8 * hi + lo with hi
// and lo in 0..7, and a quant (at most 31) times either fits a byte. So the groups are extracted
// once per group of rows into scratch twice, as quant * lo and quant * hi (unsigned bytes), and
// for each 64 elements two full-depth products (TDPBSUD, K 64) add them over the whole
// super-block: the multipliers are applied by the tiles themselves, and per super-block and token
// the epilogue takes lo + (hi << 3), the very integer sum of multiplier * sub-block sum that
// tile_packed_k4 forms with VPMULLD per sub-block, before its minimums and float update (so
// the same bits as the AVX-512 tiles). Before: a half-depth product and an epilogue of 16
// VPMULLD per sub-block, 8 of them per super-block. bench_kernels packed/<type>/amx/t128 (2-core
// Xeon VM with AMX, CPU time): see the README's AMX paragraph.
constexpr int kSplitShift = 3;
constexpr int64_t kSplitTileBytes = 16 * kGroupBytes;            // one B tile: 64 elements of 16 rows
constexpr int64_t kSplitBlockBytes = 2 * (kQK_K / 64) * kSplitTileBytes;  // [4 depths][lo, hi][B tile]

// Scratch of a super-block: for depth step p (elements 64p ..) the lo tile then the hi tile,
// each the 16 groups of sub-blocks 2p and 2p + 1.
template <SuperFormat F>
inline void amx_extract_split(const SuperBlock<F>* wb, int64_t nb, uint8_t* scratch) {
  static_assert(F == SuperFormat::q4_k || F == SuperFormat::q5_k);
  const VI low = _mm512_set1_epi16(7);
  for (int64_t b = 0; b < nb; ++b) {
    const auto& w = wb[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    uint8_t* out = scratch + b * kSplitBlockBytes;
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const VI m = vi_u8_to_32(w.sc[s]);
      const VI m16 = vi_or(m, vi_shl16(m));  // row r's multiplier in both 16-bit halves of lane r
      const VI lo = vi_and(m16, low), hi = _mm512_srli_epi16(m16, kSplitShift);
      uint8_t* o = out + (s / 2) * 2 * kSplitTileBytes + (s % 2) * kSubBytes;
      for (int k = 0; k < 8; ++k) {
        // A 16-bit product of two such bytes and a multiplier below 8 carries nothing from the
        // low byte into the high one: both bytes are multiplied at once.
        const VI q = k4_group(w, s, k);
        vi_store(o + k * kGroupBytes, _mm512_mullo_epi16(q, lo));
        vi_store(o + kSplitTileBytes + k * kGroupBytes, _mm512_mullo_epi16(q, hi));
      }
    }
  }
}

// Every tile 16 rows x 64 bytes (amx_k4, amx_q6_k and the AMX-BF16 tiles of gemm_x86_amx_float.h).
// amx_k4's tiles: 0-1 the (lo, hi) accumulators, 2-3 activations (16 tokens x 64 bytes) of even and
// odd depth steps, 4-5 and 6-7 the lo and hi weights (16 x 64 bytes) of even and odd depth steps.
inline void amx_configure_full() {
  TileConfig c;
  std::memset(&c, 0, sizeof c);
  c.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = kAmxTok;
    c.colsb[t] = 64;
  }
  amx_barrier();
  _tile_loadconfig(&c);
}

#define EDGELM_AMX_SPLIT_STEP(A, BL, BH, P)                \
  _tile_loadd(A, a + 64 * (P), a_stride);                  \
  _tile_loadd(BL, b + (2 * (P)) * kSplitTileBytes, 64);    \
  _tile_dpbsud(0, A, BL);                                  \
  _tile_loadd(BH, b + (2 * (P) + 1) * kSplitTileBytes, 64); \
  _tile_dpbsud(1, A, BH)
// A super-block's products into the accumulators (activations a, 16 tokens a_stride apart; split
// weights b), then the store of their sums into isum [lo, hi][16 tokens x 16 rows].
inline void amx_split_block(const int8_t* a, const uint8_t* b, int64_t a_stride, int32_t* isum) {
  static_assert(kQK_K == 4 * 64);
  amx_barrier();
  _tile_zero(0);
  _tile_zero(1);
  EDGELM_AMX_SPLIT_STEP(2, 4, 5, 0);
  EDGELM_AMX_SPLIT_STEP(3, 6, 7, 1);
  EDGELM_AMX_SPLIT_STEP(2, 4, 5, 2);
  EDGELM_AMX_SPLIT_STEP(3, 6, 7, 3);
  _tile_stored(0, isum, kRows * 4);
  _tile_stored(1, isum + kAmxTok * kRows, kRows * 4);
  amx_barrier();
}
#undef EDGELM_AMX_SPLIT_STEP

// block(b) for super-blocks b in [0, nb), each two ahead of consume(b): b + 1 and b + 2 multiply
// while b's sums (stored by block(b) into slot b % 3) are consumed.
template <typename Block, typename Consume>
inline void amx_blocks_ahead(int64_t nb, Block block, Consume consume) {
  block(0);
  if (nb > 1) block(1);
  for (int64_t b = 0; b < nb; ++b) {
    if (b + 2 < nb) block(b + 2);
    consume(b);
  }
}

template <SuperFormat F>
void amx_k4(const uint8_t* pw, int64_t cols, const uint8_t* packed, int64_t n_full, int64_t r0, int64_t r1,
            float* out, int64_t ldo, uint8_t* scratch) {
  using PB = SuperBlock<F>;
  const int64_t nb = cols / kQK_K;
  const int64_t a_stride = nb * static_cast<int64_t>(sizeof(ActQ8K));
  const auto* act = reinterpret_cast<const ActQ8K*>(packed);
  amx_configure_full();
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const PB* wb = reinterpret_cast<const PB*>(pw) + (g0 / kRows) * nb;
    const int n_rows = static_cast<int>(min64(kRows, r1 - g0));
    amx_extract_split<F>(wb, nb, scratch);
    for (int64_t t0 = 0; t0 < n_full; t0 += kAmxTok) {
      const ActQ8K* y = act + t0 * nb;
      VF facc[kAmxTok];
      for (VF& f : facc) f = vf_zero();
      alignas(64) int32_t isum[3][2 * kAmxTok * kRows];
      const auto block = [&](int64_t b) {
        amx_split_block(y[b].qs, scratch + b * kSplitBlockBytes, a_stride, isum[b % 3]);
      };
      // The super-block's integer sum, then tile_packed_k4's minimums and float update.
      const auto consume = [&](int64_t b, const int32_t* sums) {
        const PB& w = wb[b];
        const VF d = vf_half(w.d), dmin = vf_half(w.dmin);
#pragma GCC unroll 16
        for (int t = 0; t < kAmxTok; ++t) {
          const ActQ8K& yt = y[t * nb + b];
          const VF yd = vf_set1(yt.d);
          const VI is = vi_add(isum_row(sums, t), vi_shl<kSplitShift>(isum_row(sums + kAmxTok * kRows, t)));
          VI mins = vi_zero();
          // VPDPWSSD: the pair products and their sum in one instruction (no wrap: |sum| < 2^20).
          for (int p = 0; p < 4; ++p) mins = _mm512_dpwssd_epi32(mins, vi_load(w.mn[p]), vi_bcast(yt.b32 + 2 * p));
          facc[t] = vf_fmadd(vf_mul(d, yd), vf_cvt(is), facc[t]);
          facc[t] = vf_fnmadd(vf_mul(dmin, yd), vf_cvt(mins), facc[t]);
        }
      };
      amx_blocks_ahead(nb, block, [&](int64_t b) { consume(b, isum[b % 3]); });
      for (int t = 0; t < kAmxTok; ++t) vf_store_rows(out + (t0 + t) * ldo + g0, facc[t], n_rows);
    }
  }
  _tile_release();
}

// Q6_K: the same folding for signed scales of 16 elements. A scale (-128..127) is d0 + 8 d1 +
// 64 d2 with digits in -3..4 (d_i = ((x + 3) & 7) - 3 of what the lower digits leave), and a
// centred quant q - 32 (-32..31) times such a digit fits a signed byte. So the groups are
// extracted three times, as (q - 32) * d_i of their 16-element sub-block's scale, and each 64
// elements take three full-depth TDPBSSD; per super-block and token the epilogue takes
// C0 + (C1 << 3) + (C2 << 6), which is sum_j scale_j * (sum_j(q y) - 32 sum_j(y)), the integer
// tile_packed_k16 forms from its products and zero point, before the same float update.
// (Before: the AVX-512 tiles, since a product per 16-element sub-block measured slower there.)
constexpr int kQ6Parts = 3;
constexpr int64_t kQ6BlockBytes = kQ6Parts * (kQK_K / 64) * kSplitTileBytes;  // [4 depths][3 parts][B tile]
static_assert(kQ6BlockBytes == 3 * kQK_K * kRows);  // k6_scratch

// A digit of the scales in every row's lane, as amx_extract_q6_k applies it: |d| in both 16-bit
// halves (for the byte products), 32 |d| in every byte (the centring), all ones where d < 0.
struct Q6Digit {
  VI abs16, centre, neg;
};
inline Q6Digit q6_digit(VI d) {
  const VI a = _mm512_abs_epi32(d);
  return {vi_or(a, vi_shl16(a)), _mm512_mullo_epi32(vi_shl5(a), vi_set1(0x01010101)), _mm512_srai_epi32(d, 31)};
}

// Scratch of a super-block: for depth step p the three part tiles, each the 16 groups of
// sub-blocks 2p and 2p + 1.
inline void amx_extract_q6_k(const PQ6_K* wb, int64_t nb, uint8_t* scratch) {
  const VI three = vi_set1(3), seven = vi_set1(7);
  for (int64_t b = 0; b < nb; ++b) {
    const PQ6_K& w = wb[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    uint8_t* out = scratch + b * kQ6BlockBytes;
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s)
      for (int half = 0; half < 2; ++half) {
        VI x = vi_s8_to_32(w.sc[2 * s + half]);
        Q6Digit dig[kQ6Parts];
        for (int i = 0; i < kQ6Parts; ++i) {
          const VI d = vi_sub(vi_and(vi_add(x, three), seven), three);
          dig[i] = q6_digit(d);
          x = _mm512_srai_epi32(vi_sub(x, d), 3);
        }
        for (int k = 4 * half; k < 4 * half + 4; ++k) {
          // Quants 0..63 times |d| <= 4 stay below 256: the 16-bit product leaves each byte its own.
          const VI q = q6_group(w, s, k);
          for (int i = 0; i < kQ6Parts; ++i) {
            const VI c = _mm512_sub_epi8(_mm512_mullo_epi16(q, dig[i].abs16), dig[i].centre);
            vi_store(out + ((s / 2) * kQ6Parts + i) * kSplitTileBytes + ((s % 2) * 8 + k) * kGroupBytes,
                     _mm512_sub_epi8(vi_xor(c, dig[i].neg), dig[i].neg));
          }
        }
      }
  }
}

// Tiles: 0-2 the parts' accumulators, 3 and 7 activations of even and odd depth steps, 4-6 the
// parts' weights (all 16 x 64 bytes: amx_configure_full).
#define EDGELM_AMX_Q6_STEP(A, P)                                    \
  _tile_loadd(A, a + 64 * (P), a_stride);                           \
  _tile_loadd(4, b + (kQ6Parts * (P)) * kSplitTileBytes, 64);       \
  _tile_dpbssd(0, A, 4);                                            \
  _tile_loadd(5, b + (kQ6Parts * (P) + 1) * kSplitTileBytes, 64);   \
  _tile_dpbssd(1, A, 5);                                            \
  _tile_loadd(6, b + (kQ6Parts * (P) + 2) * kSplitTileBytes, 64);   \
  _tile_dpbssd(2, A, 6)
inline void amx_q6_block(const int8_t* a, const uint8_t* b, int64_t a_stride, int32_t* isum) {
  amx_barrier();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  EDGELM_AMX_Q6_STEP(3, 0);
  EDGELM_AMX_Q6_STEP(7, 1);
  EDGELM_AMX_Q6_STEP(3, 2);
  EDGELM_AMX_Q6_STEP(7, 3);
  _tile_stored(0, isum, kRows * 4);
  _tile_stored(1, isum + kAmxTok * kRows, kRows * 4);
  _tile_stored(2, isum + 2 * kAmxTok * kRows, kRows * 4);
  amx_barrier();
}
#undef EDGELM_AMX_Q6_STEP

void amx_q6_k(const uint8_t* pw, int64_t cols, const uint8_t* packed, int64_t n_full, int64_t r0, int64_t r1,
              float* out, int64_t ldo, uint8_t* scratch) {
  const int64_t nb = cols / kQK_K;
  const int64_t a_stride = nb * static_cast<int64_t>(sizeof(ActQ8K));
  const auto* act = reinterpret_cast<const ActQ8K*>(packed);
  amx_configure_full();
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const PQ6_K* wb = reinterpret_cast<const PQ6_K*>(pw) + (g0 / kRows) * nb;
    const int n_rows = static_cast<int>(min64(kRows, r1 - g0));
    amx_extract_q6_k(wb, nb, scratch);
    for (int64_t t0 = 0; t0 < n_full; t0 += kAmxTok) {
      const ActQ8K* y = act + t0 * nb;
      VF facc[kAmxTok];
      for (VF& f : facc) f = vf_zero();
      alignas(64) int32_t isum[3][kQ6Parts * kAmxTok * kRows];
      const auto block = [&](int64_t b) {
        amx_q6_block(y[b].qs, scratch + b * kQ6BlockBytes, a_stride, isum[b % 3]);
      };
      const auto consume = [&](int64_t b, const int32_t* sums) {
        const VF d = vf_half(wb[b].d);
#pragma GCC unroll 16
        for (int t = 0; t < kAmxTok; ++t) {
          const VI is = vi_add(vi_add(isum_row(sums, t), vi_shl<3>(isum_row(sums + kAmxTok * kRows, t))),
                               vi_shl<6>(isum_row(sums + 2 * kAmxTok * kRows, t)));
          facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t * nb + b].d)), vf_cvt(is), facc[t]);
        }
      };
      amx_blocks_ahead(nb, block, [&](int64_t b) { consume(b, isum[b % 3]); });
      for (int t = 0; t < kAmxTok; ++t) vf_store_rows(out + (t0 + t) * ldo + g0, facc[t], n_rows);
    }
  }
  _tile_release();
}

// IQ4_XS: its values are signed and its multipliers too (-32..31), so no split keeps products in
// bytes; its groups (unsigned bytes: iq4_xs_group biased) are extracted once per group of rows
// into scratch as [block][8 sub-blocks][8 groups][64 bytes], so the B tile of a sub-block is 512
// contiguous bytes, and every sub-block is a half-depth product with its own epilogue (16
// VPMULLD).
// (TQ2_0 shares the extraction only: amx_tq2_0 below.)
template <SuperFormat F>
inline void amx_extract(const SuperBlock<F>* wb, int64_t nb, uint8_t* scratch) {
  static_assert(F == SuperFormat::iq4_xs || F == SuperFormat::tq2_0);
  [[maybe_unused]] const VI book = vi_bcast16(kIq4Values);
  for (int64_t b = 0; b < nb; ++b) {
    const auto& w = wb[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s)
      for (int k = 0; k < 8; ++k) {
        VI q;
        if constexpr (F == SuperFormat::iq4_xs)
          q = iq4_xs_group(w, book, s, k);
        else
          q = tq2_group(w, s, k);
        vi_store(scratch + ((b * 8 + s) * 8 + k) * kGroupBytes, q);
      }
  }
}

void amx_iq4_xs(const uint8_t* pw, int64_t cols, const uint8_t* packed, int64_t n_full, int64_t r0, int64_t r1,
                float* out, int64_t ldo, uint8_t* scratch) {
  using PB = PQIQ4_XS;
  constexpr int kSubs = kQK_K / kQK;  // products (sub-blocks) per super-block
  const int64_t nb = cols / kQK_K;
  const int64_t a_stride = nb * static_cast<int64_t>(sizeof(ActQ8K));
  const auto* act = reinterpret_cast<const ActQ8K*>(packed);
  amx_configure(kQK);
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const PB* wb = reinterpret_cast<const PB*>(pw) + (g0 / kRows) * nb;
    const int n_rows = static_cast<int>(min64(kRows, r1 - g0));
    amx_extract<SuperFormat::iq4_xs>(wb, nb, scratch);
    for (int64_t t0 = 0; t0 < n_full; t0 += kAmxTok) {
      const ActQ8K* y = act + t0 * nb;
      alignas(64) float facc[kAmxTok * kRows] = {};
      VI acc[kAmxTok];
      for (VI& a : acc) a = vi_zero();
      const auto ops = [&](int64_t i) {
        const int64_t b = i / kSubs, j = i % kSubs;
        return AmxOperands{y[b].qs + kQK * j, scratch + (b * kSubs + j) * 8 * kGroupBytes};
      };
      // The super-block's integer sum is complete: its zero point, then the float update of
      // tile_packed_iq4_xs.
      const auto finish = [&](int64_t b) {
        const PB& w = wb[b];
        const VF d = vf_half(w.d);
        for (int t = 0; t < kAmxTok; ++t) {
          const ActQ8K& yt = y[t * nb + b];
          const VF yd = vf_set1(yt.d);
          float* f = facc + t * kRows;
          VI offs = vi_zero();
          for (int p = 0; p < 4; ++p)
            offs = vi_add(offs, vi_madd16(pair_s8(w.sc[2 * p], w.sc[2 * p + 1]), vi_bcast(yt.b32 + 2 * p)));
          vf_store(f, vf_fmadd(vf_mul(d, yd), vf_cvt(vi_sub(acc[t], vi_shl<7>(offs))), vf_load(f)));
          acc[t] = vi_zero();
        }
      };
      const auto consume = [&](int64_t i, const int32_t* isum) {
        const int64_t b = i / kSubs;
        const int j = static_cast<int>(i % kSubs);
        const VI m = mult_s8(wb[b].sc[j]);
#pragma GCC unroll 16
        for (int t = 0; t < kAmxTok; ++t) acc[t] = vi_add(acc[t], vi_mullo(isum_row(isum, t), m));
        if (j == kSubs - 1) finish(b);
      };
      amx_products<false>(nb * kSubs, a_stride, ops, consume);
      for (int t = 0; t < kAmxTok; ++t) vf_store_rows(out + (t0 + t) * ldo + g0, vf_load(facc + t * kRows), n_rows);
    }
  }
  _tile_release();
}

// TQ2_0: one scale per 256 elements and no sub-block scales, so its products take the tile's
// full depth (K 64, two 32-element groups of tq2_group) and the four of a block add up in int32;
// the block's float update is then tile_packed_tq2_0's (sums minus the activations' sum, times d
// y.d). The quants (0..2) are extracted once per group of rows into scratch as amx_super's are
// ([block][8 sub-blocks][8 groups][64 bytes]), so a product's B tile is 1024 contiguous bytes.
void amx_tq2_0(const uint8_t* pw, int64_t cols, const uint8_t* packed, int64_t n_full, int64_t r0, int64_t r1,
               float* out, int64_t ldo, uint8_t* scratch) {
  constexpr int kDepth = 2 * kQK;                 // elements per product
  constexpr int kProducts = kQK_K / kDepth;       // products per block
  const int64_t nb = cols / kQK_K;
  const int64_t a_stride = nb * static_cast<int64_t>(sizeof(ActQ8K));
  const auto* act = reinterpret_cast<const ActQ8K*>(packed);
  amx_configure(kDepth);
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const PQTQ2_0* wb = reinterpret_cast<const PQTQ2_0*>(pw) + (g0 / kRows) * nb;
    const int n_rows = static_cast<int>(min64(kRows, r1 - g0));
    amx_extract<SuperFormat::tq2_0>(wb, nb, scratch);
    for (int64_t t0 = 0; t0 < n_full; t0 += kAmxTok) {
      const ActQ8K* y = act + t0 * nb;
      VF facc[kAmxTok];
      VI acc[kAmxTok];
      for (int t = 0; t < kAmxTok; ++t) facc[t] = vf_zero(), acc[t] = vi_zero();
      const auto ops = [&](int64_t i) {
        const int64_t b = i / kProducts, j = i % kProducts;
        return AmxOperands{y[b].qs + kDepth * j, scratch + (b * 8 + 2 * j) * 8 * kGroupBytes};
      };
      const auto consume = [&](int64_t i, const int32_t* isum) {
#pragma GCC unroll 16
        for (int t = 0; t < kAmxTok; ++t) acc[t] = vi_add(acc[t], isum_row(isum, t));
        if (i % kProducts != kProducts - 1) return;
        const int64_t b = i / kProducts;
        const VF d = vf_half(wb[b].d);
        for (int t = 0; t < kAmxTok; ++t) {
          const ActQ8K& yt = y[t * nb + b];
          int32_t ysum = 0;
          for (int j = 0; j < 16; ++j) ysum += yt.b16[j];
          facc[t] = vf_fmadd(vf_mul(d, vf_set1(yt.d)), vf_cvt(vi_sub(acc[t], vi_set1(ysum))), facc[t]);
          acc[t] = vi_zero();
        }
      };
      amx_products<false>(nb * kProducts, a_stride, ops, consume);
      for (int t = 0; t < kAmxTok; ++t) vf_store_rows(out + (t0 + t) * ldo + g0, facc[t], n_rows);
    }
  }
  _tile_release();
}

// This table's run_packed of `type` (the AVX-512 packed tiles).
inline decltype(GemmKernel::run_packed) avx512_run_packed(DType type) {
  for (const GemmKernel& g : EDGELM_GEMM_TABLE)
    if (g.type == type) return g.run_packed;
  return nullptr;
}

// run_packed of the amx ISA: the full 16-token tiles through Amx, the rest through the AVX-512
// packed tiles (the same bits per token either way).
template <DType kType, typename Act,
          void (*Amx)(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t, int64_t, float*, int64_t, uint8_t*)>
void run_packed_amx(const uint8_t* pw, int64_t rows, int64_t cols, const uint8_t* packed, int64_t n_tok, int64_t r0,
                    int64_t r1, float* out, int64_t ldo, uint8_t* scratch) {
  const int64_t n_full = n_tok / kAmxTok * kAmxTok;
  if (n_full > 0) Amx(pw, cols, packed, n_full, r0, r1, out, ldo, scratch);
  if (n_full < n_tok) {
    constexpr int64_t block = std::is_same_v<Act, ActQ8> ? kQK : kQK_K;
    const size_t token_bytes = static_cast<size_t>(cols / block) * sizeof(Act);
    avx512_run_packed(kType)(pw, rows, cols, packed + static_cast<size_t>(n_full) * token_bytes, n_tok - n_full, r0,
                             r1, out + n_full * ldo, ldo, scratch);
  }
}

}  // namespace

constinit const AmxRunPacked kAmxRunPacked[kAmxGemmCount] = {
    {DType::q8_0, run_packed_amx<DType::q8_0, ActQ8, amx_legacy<PQ8_0>>},
    {DType::q4_0, run_packed_amx<DType::q4_0, ActQ8, amx_legacy<PQ4_0>>},
    {DType::q4_k, run_packed_amx<DType::q4_k, ActQ8K, amx_k4<SuperFormat::q4_k>>},
    {DType::q5_k, run_packed_amx<DType::q5_k, ActQ8K, amx_k4<SuperFormat::q5_k>>},
    {DType::q6_k, run_packed_amx<DType::q6_k, ActQ8K, amx_q6_k>},
    {DType::iq4_xs, run_packed_amx<DType::iq4_xs, ActQ8K, amx_iq4_xs>},
    {DType::tq2_0, run_packed_amx<DType::tq2_0, ActQ8K, amx_tq2_0>},
};

}  // namespace edgelm::kernels::x86
