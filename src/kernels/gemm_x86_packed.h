// Load-time packed weights for the x86 multi-token GEMM (gemm.h: pack_weights / run_packed), and
// the GEMM table of the translation unit that includes this file (gemm_avx2.cpp or
// gemm_avx512.cpp; see gemm_x86_impl.h for the shared registers, activations and the per-call
// kernels, and for the linkage rules).
//
// Why: the per-call kernels unpack and transpose every weight group on every matmul, which a
// prefill of many tokens amortizes but a decode step (1 token) or a small batch does not. The
// packed layouts do that rearrangement once, at load, and keep the stored bit widths, so the
// packed matrix is about the size of the stored one (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K: exactly; Q4_K: +8%,
// Q5_K: +7%, their mins as int16 pairs; IQ4_XS: +1.5%, Q3_K: +3.6%, their scales as bytes; IQ4_NL and
// Q2_K: exactly), and every matmul, a single token included, streams it
// once:
//  - rows are interleaved in groups of kRows (the last group repeats its last row), blocks of a
//    group follow each other, groups follow each other;
//  - quants stay packed (nibbles, 6 bits) with 4 elements of a row per 32-bit lane: one load
//    and a mask or shift gives the lane-interleaved unsigned bytes the dot products take;
//  - scales stay fp16 (converted per block in registers) and 8-bit sub-block scales.
// Per block and token, the integer sums are exact and the float epilogue is that of the
// per-call kernels: the results equal theirs up to float reassociation, and do not depend on
// how many tokens share the call (batch == solo bit for bit).
#include <type_traits>

#include "kernels/gemm_x86_impl.h"
#include "kernels/prefetch.h"

namespace edgelm::kernels::x86 {
namespace {

// ---- Layouts (one block of a group of kRows rows) ------------------------------------------------

struct PQ4_0 {
  uint8_t qs[4][kGroupBytes];  // dword k of each row: low nibbles = elements 4k.., high = 16 + 4k..
  uint16_t d[kRows];
};
static_assert(sizeof(PQ4_0) == sizeof(BlockQ4_0) * kRows);

struct PQ4_1 {
  uint8_t qs[4][kGroupBytes];  // as PQ4_0
  uint16_t d[kRows];
  uint16_t m[kRows];
};
static_assert(sizeof(PQ4_1) == sizeof(BlockQ4_1) * kRows);

// Q5_0 / Q5_1: PQ4_0's nibbles plus the fifth bits, rearranged so that a group needs one shift:
// byte j of a row's qh dword holds in bit g the fifth bit of element 4g + j (group g, byte j).
struct PQ5_0 {
  uint8_t qs[4][kGroupBytes];
  uint8_t qh[kGroupBytes];
  uint16_t d[kRows];
};
static_assert(sizeof(PQ5_0) == sizeof(BlockQ5_0) * kRows);

struct PQ5_1 {
  uint8_t qs[4][kGroupBytes];
  uint8_t qh[kGroupBytes];
  uint16_t d[kRows];
  uint16_t m[kRows];
};
static_assert(sizeof(PQ5_1) == sizeof(BlockQ5_1) * kRows);

struct PQ8_0 {
  uint8_t qs[8][kGroupBytes];  // dword g of each row (VNNI: biased to w + 128)
  uint16_t d[kRows];
};
static_assert(sizeof(PQ8_0) == sizeof(BlockQ8_0) * kRows);

struct PQ4_K {
  uint8_t qs[4][8][kGroupBytes];  // chunk c, dword k: low nibbles = sub-block 2c, high = 2c + 1
  uint8_t sc[8][kRows];           // sub-block scales
  int16_t mn[4][2 * kRows];       // mins of sub-blocks 2p, 2p + 1 of row r in lanes 2r, 2r + 1
  uint16_t d[kRows];
  uint16_t dmin[kRows];
};

// IQ4_XS: the codebook indices in PQ4_K's nibble layout (sub-block s of a row in the low or high
// nibbles of chunk s / 2, as Q4_K stores them; the file keeps each sub-block's 32 indices in 16
// bytes, low nibbles first), the sub-block scales ls - 32 as signed bytes, d as fp16: 138 bytes
// per row and super-block against the file's 136 (+1.5%).
struct PQIQ4_XS {
  uint8_t qs[4][8][kGroupBytes];  // chunk c, dword k: low nibbles = sub-block 2c, high = 2c + 1
  int8_t sc[8][kRows];            // sub-block scales ls - 32
  uint16_t d[kRows];
};

// Q5_K: PQ4_K's layout plus the fifth bits: qh dword k of each row is the row's qh[4k..4k+3],
// whose bit s is the fifth bit of the element 32s + 4k + j (sub-block s).
struct PQ5_K {
  uint8_t qs[4][8][kGroupBytes];
  uint8_t qh[8][kGroupBytes];
  uint8_t sc[8][kRows];
  int16_t mn[4][2 * kRows];
  uint16_t d[kRows];
  uint16_t dmin[kRows];
};

struct PQ6_K {
  uint8_t ql[2][2][8][kGroupBytes];  // half h, chunk j, dword k: ql[64h + 32j + 4k ..]
  uint8_t qh[2][8][kGroupBytes];     // half h, dword k: qh[32h + 4k ..]
  int8_t sc[16][kRows];
  uint16_t d[kRows];
};
static_assert(sizeof(PQ6_K) == sizeof(BlockQ6_K) * kRows);

// Q2_K: the file's bytes, the 2-bit quants dword-interleaved as Q3_K's, each 16-element sub-block's
// scale (low nibble) and min (high nibble) byte as stored.
struct PQ2_K {
  uint8_t qs[2][8][kGroupBytes];  // half h, dword k: qs[32h + 4k ..]
  uint8_t scm[16][kRows];         // sub-block j: scale | min << 4
  uint16_t d[kRows];
  uint16_t dmin[kRows];
};
static_assert(sizeof(PQ2_K) == sizeof(BlockQ2_K) * kRows);

// TQ2_0: the file's bytes, the 2-bit quants dword-interleaved as Q2_K's (the same element order).
struct PQTQ2_0 {
  uint8_t qs[2][8][kGroupBytes];
  uint16_t d[kRows];
};
static_assert(sizeof(PQTQ2_0) == sizeof(BlockTQ2_0) * kRows);

// Q3_K: the 2-bit quants and the high-bit mask dword-interleaved as they are stored, the 16
// six-bit scales unpacked to ls - 32 as signed bytes: 114 bytes per row and super-block against
// the file's 110.
struct PQ3_K {
  uint8_t qs[2][8][kGroupBytes];  // half h, dword k: qs[32h + 4k ..]
  uint8_t hm[8][kGroupBytes];     // dword k: hmask[4k ..]
  int8_t sc[16][kRows];           // 16-element sub-block scales ls - 32
  uint16_t d[kRows];
};

// kBlock: elements per block of the layout (kQK or kQK_K).
template <typename PB, int64_t kBlock>
size_t packed_bytes_of(int64_t rows, int64_t cols) {
  constexpr int64_t block = kBlock;
  const int64_t groups = (rows + kRows - 1) / kRows;
  return static_cast<size_t>(groups * (cols / block)) * sizeof(PB);
}

inline void copy4(uint8_t* dst, const uint8_t* src) { std::memcpy(dst, src, 4); }

// ---- Packing (at load; rows [r0, r1) with r0 a multiple of kRows) -------------------------------

template <typename BX, typename PB, int64_t kBlock, void (*PackBlock)(const BX* const*, int64_t, PB&)>
void pack_groups(const GemmWeights& w, int64_t r0, int64_t r1, uint8_t* dst) {
  const int64_t nb = w.cols / kBlock;
  auto* out = reinterpret_cast<PB*>(dst) + (r0 / kRows) * nb;
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const BX* rows[kRows];
    group_rows(w, g0, static_cast<int>(min64(kRows, w.rows - g0)), rows);
    for (int64_t b = 0; b < nb; ++b) PackBlock(rows, b, *out++);
  }
}

void pack_block_q4_0(const BlockQ4_0* const* rows, int64_t b, PQ4_0& o) {
  for (int i = 0; i < kRows; ++i) {
    o.d[i] = rows[i][b].d;
    for (int k = 0; k < 4; ++k) copy4(o.qs[k] + 4 * i, rows[i][b].qs + 4 * k);
  }
}

// Q4_1, Q5_0, Q5_1 (BX / PB: BlockQ4_1 / PQ4_1, ...): the nibbles as Q4_0's, the minimum when
// the format has one, and the fifth bits regrouped (PQ5_0).
template <typename BX, typename PB>
void pack_block_legacy(const BX* const* rows, int64_t b, PB& o) {
  for (int i = 0; i < kRows; ++i) {
    const BX& x = rows[i][b];
    o.d[i] = x.d;
    if constexpr (requires { x.m; }) o.m[i] = x.m;
    for (int k = 0; k < 4; ++k) copy4(o.qs[k] + 4 * i, x.qs + 4 * k);
    if constexpr (requires { x.qh; }) {
      uint32_t bits;
      std::memcpy(&bits, x.qh, 4);  // bit e: element e
      uint8_t h[4] = {};
      for (int j = 0; j < 4; ++j)
        for (int g = 0; g < 8; ++g) h[j] = static_cast<uint8_t>(h[j] | (((bits >> (4 * g + j)) & 1u) << g));
      copy4(o.qh + 4 * i, h);
    }
  }
}

void pack_block_q8_0(const BlockQ8_0* const* rows, int64_t b, PQ8_0& o) {
  for (int i = 0; i < kRows; ++i) {
    o.d[i] = rows[i][b].d;
    for (int g = 0; g < 8; ++g) {
      uint8_t q[4];
      std::memcpy(q, rows[i][b].qs + 4 * g, 4);
      if (EDGELM_GEMM_VNNI)
        for (uint8_t& v : q) v ^= 0x80;
      copy4(o.qs[g] + 4 * i, q);
    }
  }
}

// The scales, mins and 4-bit quants of a Q4_K or Q5_K block (PB: PQ4_K or PQ5_K).
template <typename BX, typename PB>
void pack_k4_common(const BX& x, int i, PB& o) {
  o.d[i] = x.d;
  o.dmin[i] = x.dmin;
  uint8_t sc[8], mn[8];
  k4_scales(x.scales, sc, mn);
  for (int s = 0; s < 8; ++s) o.sc[s][i] = sc[s];
  for (int p = 0; p < 4; ++p) {
    o.mn[p][2 * i] = mn[2 * p];
    o.mn[p][2 * i + 1] = mn[2 * p + 1];
  }
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 8; ++k) copy4(o.qs[c][k] + 4 * i, x.qs + 32 * c + 4 * k);
}

void pack_block_q4_k(const BlockQ4_K* const* rows, int64_t b, PQ4_K& o) {
  for (int i = 0; i < kRows; ++i) pack_k4_common(rows[i][b], i, o);
}

void pack_block_q5_k(const BlockQ5_K* const* rows, int64_t b, PQ5_K& o) {
  for (int i = 0; i < kRows; ++i) {
    pack_k4_common(rows[i][b], i, o);
    for (int k = 0; k < 8; ++k) copy4(o.qh[k] + 4 * i, rows[i][b].qh + 4 * k);
  }
}

void pack_block_iq4_xs(const BlockIQ4_XS* const* rows, int64_t b, PQIQ4_XS& o) {
  for (int i = 0; i < kRows; ++i) {
    const BlockIQ4_XS& x = rows[i][b];
    o.d[i] = x.d;
    uint8_t q4[128];  // Q4_K's order: byte 32c + e = index e of sub-block 2c | index e of 2c + 1 << 4
    for (int s = 0; s < 8; ++s) {
      o.sc[s][i] = static_cast<int8_t>((((x.scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | (((x.scales_h >> (2 * s)) & 3) << 4)) - 32);
      for (int e = 0; e < 32; ++e) {
        const uint8_t idx = e < 16 ? x.qs[16 * s + e] & 0x0f : x.qs[16 * s + e - 16] >> 4;
        uint8_t& dst = q4[32 * (s / 2) + e];
        dst = s % 2 == 0 ? idx : static_cast<uint8_t>(dst | idx << 4);
      }
    }
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 8; ++k) copy4(o.qs[c][k] + 4 * i, q4 + 32 * c + 4 * k);
  }
}

void pack_block_q6_k(const BlockQ6_K* const* rows, int64_t b, PQ6_K& o) {
  for (int i = 0; i < kRows; ++i) {
    const BlockQ6_K& x = rows[i][b];
    o.d[i] = x.d;
    for (int j = 0; j < 16; ++j) o.sc[j][i] = x.scales[j];
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 8; ++k) {
        copy4(o.qh[h][k] + 4 * i, x.qh + 32 * h + 4 * k);
        for (int j = 0; j < 2; ++j) copy4(o.ql[h][j][k] + 4 * i, x.ql + 64 * h + 32 * j + 4 * k);
      }
  }
}

void pack_block_q2_k(const BlockQ2_K* const* rows, int64_t b, PQ2_K& o) {
  for (int i = 0; i < kRows; ++i) {
    const BlockQ2_K& x = rows[i][b];
    o.d[i] = x.d;
    o.dmin[i] = x.dmin;
    for (int j = 0; j < 16; ++j) o.scm[j][i] = x.scales[j];
    for (int k = 0; k < 8; ++k)
      for (int h = 0; h < 2; ++h) copy4(o.qs[h][k] + 4 * i, x.qs + 32 * h + 4 * k);
  }
}

void pack_block_tq2_0(const BlockTQ2_0* const* rows, int64_t b, PQTQ2_0& o) {
  for (int i = 0; i < kRows; ++i) {
    const BlockTQ2_0& x = rows[i][b];
    o.d[i] = x.d;
    for (int k = 0; k < 8; ++k)
      for (int h = 0; h < 2; ++h) copy4(o.qs[h][k] + 4 * i, x.qs + 32 * h + 4 * k);
  }
}

void pack_block_q3_k(const BlockQ3_K* const* rows, int64_t b, PQ3_K& o) {
  for (int i = 0; i < kRows; ++i) {
    const BlockQ3_K& x = rows[i][b];
    o.d[i] = x.d;
    for (int j = 0; j < 16; ++j) {  // the 6-bit scales' packing (q3_k_unpack_scales)
      const int low = j < 8 ? (x.scales[j] & 0x0f) : (x.scales[j - 8] >> 4);
      const int high = (x.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      o.sc[j][i] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    for (int k = 0; k < 8; ++k) {
      copy4(o.hm[k] + 4 * i, x.hmask + 4 * k);
      for (int h = 0; h < 2; ++h) copy4(o.qs[h][k] + 4 * i, x.qs + 32 * h + 4 * k);
    }
  }
}

// ---- Tiles over packed blocks --------------------------------------------------------------------

// Each block's tile touches the lines `ahead` bytes past the block (prefetch.h: 8 KiB for a tile
// of several tokens, the CPU's decode distance for one token; 0 touches the block itself, in
// effect none, with no branch: GCC 12 drops the prefetch loop behind an early return). The
// packed matrix streams from DRAM, and a tile of several tokens computes for long enough per
// block that the out-of-order window reaches only a block or two ahead. Blocks ahead by count (4 Q4_0 blocks of
// 16 rows were 1.1 KiB) kept too few lines in flight for the DRAM latency: the memory time then
// added to the compute time instead of hiding under it. A distance in bytes holds the same lines
// in flight for every format. bench_kernels packed/<type>/<isa>/32768x4096 (DRAM, one thread,
// Zen 5 VM): Q4_0 avx512 t8 6.2 -> 3.4 ms, t1 2.2 -> 1.6; Q8_0 avx512 t8 6.9 -> 4.3; Q4_0 avx2 t8
// 11.7 -> 8.0; Q4_K and Q6_K (whose 2 blocks were already 5-7 KiB on avx512) about unchanged.
template <int T>
inline int64_t prefetch_bytes() {
  return T == 1 ? decode_prefetch_bytes() : kMultiTokenPrefetchBytes;
}
template <typename PB>
inline void prefetch_ahead(const PB* wb, int64_t b, int64_t ahead) {
  const char* c = reinterpret_cast<const char*>(wb + b) + ahead;
  for (size_t off = 0; off < sizeof(PB); off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

// Group k (elements 32s + 4k .. + 3 of every row, unsigned bytes) of sub-block s of a packed
// Q4_K or Q5_K block: the nibbles of chunk s / 2 (high ones for odd s), and for Q5_K bit s of
// the qh bytes as bit 4 (16-bit shifts: the bits that cross into a neighbouring byte are masked).
template <typename PB>
inline VI k4_group(const PB& w, int s, int k) {
  const VI raw = vi_load(w.qs[s / 2][k]);
  const VI nib = vi_and(s % 2 == 0 ? raw : vi_srl16(raw, 4), vi_set1_8(0x0f));
  if constexpr (std::is_same_v<PB, PQ5_K>) {
    const VI h = vi_load(w.qh[k]);
    const VI top = s < 4 ? vi_sll16(h, 4 - s) : s > 4 ? vi_srl16(h, s - 4) : h;
    return vi_or(nib, vi_and(top, vi_set1_8(0x10)));
  } else {
    return nib;
  }
}

// The same for Q6_K: sub-block s = 4h + kk takes its low 4 bits from chunk kk & 1 (high nibbles
// for kk >= 2) and its top 2 bits from bits 2kk of qh.
inline VI q6_group(const PQ6_K& w, int s, int k) {
  const int h = s / 4, kk = s % 4;
  const VI ql = vi_load(w.ql[h][kk & 1][k]);
  const VI nib = vi_and(kk < 2 ? ql : vi_srl16(ql, 4), vi_set1_8(0x0f));
  const VI top = vi_sll16(vi_and(vi_srl16(vi_load(w.qh[h][k]), 2 * kk), vi_set1_8(3)), 4);
  return vi_or(nib, top);
}

// The same for Q3_K: sub-block s = 4h + kk takes its 2 low bits from bits 2kk of chunk h and
// its third bit (q' = q + 4 in [0, 7]) from bit s of the mask, moved to bit 2 (16-bit shifts of
// at most 5: no bit crosses into bit 2 of a neighbouring byte).
template <typename PB>
inline VI two_bits(const PB& w, int s, int k) {  // bits 2 (s % 4) of chunk s / 4: Q2_K's and Q3_K's low bits
  return vi_and(vi_srl16(vi_load(w.qs[s / 4][k]), 2 * (s % 4)), vi_set1_8(3));
}
inline VI q2_group(const PQ2_K& w, int s, int k) { return two_bits(w, s, k); }
inline VI q3_group(const PQ3_K& w, int s, int k) {
  const VI lo = two_bits(w, s, k);
  const VI m = vi_load(w.hm[k]);
  const VI top = s < 2 ? vi_sll16(m, 2 - s) : s > 2 ? vi_srl16(m, s - 2) : m;
  return vi_or(lo, vi_and(top, vi_set1_8(4)));
}

// Group g (elements 4g..4g+3 of every row, unsigned bytes) of a packed legacy block: the
// nibbles (Q4_0, Q4_1 and the low bits of Q5_0, Q5_1) of g < 4 are the low nibbles of dword g,
// of g >= 4 the high nibbles of dword g - 4; the fifth bits are bit g of the qh bytes, moved to
// bit 4 by one 16-bit shift (the bits that cross into the neighbouring byte are masked).
template <typename PB>
inline VI group_q4(const PB& b, int g) {
  const VI raw = vi_load(b.qs[g % 4]);
  return vi_and(g < 4 ? raw : vi_srl16(raw, 4), vi_set1_8(0x0f));
}
template <typename PB>
inline VI group_q5(const PB& b, int g) {
  const VI h = vi_load(b.qh);
  const VI top = g < 4 ? vi_sll16(h, 4 - g) : g > 4 ? vi_srl16(h, g - 4) : h;
  return vi_or(group_q4(b, g), vi_and(top, vi_set1_8(0x10)));
}
inline VI group_q8_0(const PQ8_0& b, int g) { return vi_load(b.qs[g]); }
// IQ4_NL (packed as Q4_0: the same block bytes): the nibbles looked up in the codebook, as the
// per-call kernels' quants (VNNI: biased to v + 128 for vpdpbusd; AVX2: signed, the sign trick).
inline VI group_iq4_nl(const PQ4_0& b, int g) {
  const VI book = vi_bcast16(kIq4Values);
#if EDGELM_GEMM_VNNI
  return vi_xor(vi_lookup16(book, group_q4(b, g)), vi_set1_8(static_cast<char>(0x80)));
#else
  return vi_lookup16(book, group_q4(b, g));
#endif
}

// The integer sums are those of the per-call tiles (sub_dot_u8 / sub_dot_s8 of
// gemm_x86_impl.h, fed from registers instead of scratch): on AVX2, int16 sums of maddubs
// products over as many groups as the weights' range allows, widened once per flush.

// The legacy formats (kSigned: Q8_0 on AVX2), started at the activations' bias (the format's
// zero point times their sum); kFlush: groups summed in int16 on AVX2 (as the per-call tile:
// 8 for 4-bit quants, 4 for 5-bit); kMin: plus the minimum times the activations' stored sum
// (Q4_1, Q5_1).
template <int T, typename PB, VI (*Group)(const PB&, int), bool kSigned, int kFlush = 8, bool kMin = false>
void tile_packed_legacy(const PB* wb, int64_t nb, const ActQ8* const y[T], float* out, int64_t ldo, int n_rows) {
  const int64_t ahead = prefetch_bytes<T>();
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(wb, b, ahead);
    const int8_t* yq[T];
    VI a[T];
    for (int t = 0; t < T; ++t) {
      yq[t] = y[t][b].qs;
      a[t] = vi_set1(y[t][b].bias);
    }
    const PB& w = wb[b];
    const auto q = [&w](int g) { return Group(w, g); };
#if EDGELM_GEMM_VNNI
    sub_dot_u8<T, kFlush, false>(q, yq, vi_zero(), vi_zero(), a);
#else
    if constexpr (kSigned) {
      sub_dot_s8<T>(q, yq, a);
    } else {
      const VI ones = _mm256_set1_epi16(1);
      sub_dot_u8<T, kFlush, false>(q, yq, ones, ones, a);
    }
#endif
    const VF d = vf_half(w.d);
    for (int t = 0; t < T; ++t) {
      facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t][b].d)), vf_cvt(a[t]), facc[t]);
      if constexpr (kMin) facc[t] = vf_fmadd(vf_half(w.m), vf_set1(y[t][b].s), facc[t]);
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// Q4_K and Q5_K (PB: PQ4_K or PQ5_K): unsigned 4- or 5-bit quants times the sub-block scales,
// minus the mins times the activations' sub-block sums. Q5_K's int16 sums are flushed every 4
// groups on AVX2 (a product pair reaches 2 * 31 * 127), as in the per-call tile.
template <int T, typename PB>
void tile_packed_k4(const PB* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  const int64_t ahead = prefetch_bytes<T>();
  constexpr bool kFive = std::is_same_v<PB, PQ5_K>;
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const PB& w = wb[b];
    prefetch_ahead(wb, b, ahead);
    VI acc[T], mins[T];
    for (int t = 0; t < T; ++t) acc[t] = mins[t] = vi_zero();
      // Sub-block s = 2c + 1 takes the high nibbles of chunk c.
      // Unrolled so that each sub-block's nibble half and shifts are constants.
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      const auto q = [&w, s](int k) { return k4_group(w, s, k); };
      const VI sc = mult_u8(w.sc[s]);
      sub_dot_u8<T, kFive ? 4 : 8>(q, yq, sc, sc, acc);
    }
    for (int p = 0; p < 4; ++p) {
      const VI mn = vi_load(w.mn[p]);
      for (int t = 0; t < T; ++t) add_in_order(mins[t], vi_madd16(mn, vi_bcast(y[t][b].b32 + 2 * p)));
    }
    const VF d = vf_half(w.d), dmin = vf_half(w.dmin);
    for (int t = 0; t < T; ++t) {
      const VF yd = vf_set1(y[t][b].d);
      facc[t] = vf_fmadd(vf_mul(d, yd), vf_cvt(acc[t]), facc[t]);
      facc[t] = vf_fnmadd(vf_mul(dmin, yd), vf_cvt(mins[t]), facc[t]);
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// IQ4_XS: the codebook values looked up from the indices (VNNI: biased to v + 128), then the
// per-call tile's arithmetic (tile_iq4_xs), so the sums and the float epilogue are its own.
inline VI iq4_xs_group(const PQIQ4_XS& w, VI book, int s, int k) {
  const VI v = vi_lookup16(book, k4_group(w, s, k));
  return EDGELM_GEMM_VNNI ? vi_xor(v, vi_set1_8(static_cast<char>(0x80))) : v;
}

template <int T>
void tile_packed_iq4_xs(const PQIQ4_XS* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo,
                        int n_rows) {
  const int64_t ahead = prefetch_bytes<T>();
  const VI book = vi_bcast16(kIq4Values);
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const PQIQ4_XS& w = wb[b];
    prefetch_ahead(wb, b, ahead);
    VI acc[T];
    for (int t = 0; t < T; ++t) acc[t] = vi_zero();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      const auto q = [&w, book, s](int k) { return iq4_xs_group(w, book, s, k); };
      const VI sc = mult_s8(w.sc[s]);
#if EDGELM_GEMM_VNNI
      sub_dot_u8<T, 8>(q, yq, sc, sc, acc);
#else
      sub_dot_s8_scaled<T>(q, yq, sc, acc);
#endif
    }
#if EDGELM_GEMM_VNNI
    VI offs[T];
    for (int t = 0; t < T; ++t) offs[t] = vi_zero();
    for (int p = 0; p < 4; ++p) {
      const VI sc = pair_s8(w.sc[2 * p], w.sc[2 * p + 1]);
      for (int t = 0; t < T; ++t) add_in_order(offs[t], vi_madd16(sc, vi_bcast(y[t][b].b32 + 2 * p)));
    }
    for (int t = 0; t < T; ++t) acc[t] = vi_sub(acc[t], vi_shl<7>(offs[t]));
#endif
    const VF d = vf_half(w.d);
    for (int t = 0; t < T; ++t) facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t][b].d)), vf_cvt(acc[t]), facc[t]);
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// The formats of 16-element sub-blocks with signed byte scales and a zero point 1 << kShift (Q6_K:
// 32, Q3_K: 4), as tile_k16 over WK6 (kFlush: its int16 flush interval for the format).
template <int T, typename PB, VI (*Group)(const PB&, int, int), int kFlush, int kShift>
void tile_packed_k16(const PB* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  const int64_t ahead = prefetch_bytes<T>();
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const PB& w = wb[b];
    prefetch_ahead(wb, b, ahead);
    VI acc[T], offs[T];
    for (int t = 0; t < T; ++t) acc[t] = offs[t] = vi_zero();
      // Sub-block s (32 elements): its halves (groups 0-3, 4-7) have scales 2s and 2s + 1.
      // Unrolled so that each sub-block's bit positions and shifts are constants.
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      const auto q = [&w, s](int k) { return Group(w, s, k); };
      sub_dot_u8<T, kFlush, true, true>(q, yq, mult_s8(w.sc[2 * s]), mult_s8(w.sc[2 * s + 1]), acc);
    }
    // The zero point: (1 << kShift) * sum over 16-element sub-blocks j of scale_j * sum_j(y).
    for (int p = 0; p < 8; ++p) {
      const VI sc = pair_s8(w.sc[2 * p], w.sc[2 * p + 1]);
      for (int t = 0; t < T; ++t) add_in_order(offs[t], vi_madd16(sc, vi_bcast(y[t][b].b16 + 2 * p)));
    }
    const VF d = vf_half(w.d);
    for (int t = 0; t < T; ++t) {
      const VI is = vi_sub(acc[t], vi_shl<kShift>(offs[t]));
      facc[t] = vf_fmadd(vf_mul(d, vf_set1(y[t][b].d)), vf_cvt(is), facc[t]);
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// Q2_K's sub-block j scale and min (its byte's nibbles) of every row, one row per 32-bit lane.
inline VI q2_scale32(const PQ2_K& w, int j) { return vi_and(vi_u8_to_32(w.scm[j]), vi_set1(15)); }
inline VI q2_min32(const PQ2_K& w, int j) { return vi_srl16(vi_u8_to_32(w.scm[j]), 4); }

// Q2_K: q in [0, 3] times the sub-block scales, minus dmin times the mins times the activations'
// sub-block sums, as tile_k16's kMins form over WK6 (K2Tile: the same flush and order).
template <int T>
void tile_packed_q2_k(const PQ2_K* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo, int n_rows) {
  const int64_t ahead = prefetch_bytes<T>();
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const PQ2_K& w = wb[b];
    prefetch_ahead(wb, b, ahead);
    VI acc[T], mins[T];
    for (int t = 0; t < T; ++t) acc[t] = mins[t] = vi_zero();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int8_t* yq[T];
      for (int t = 0; t < T; ++t) yq[t] = y[t][b].qs + 32 * s;
      const auto q = [&w, s](int k) { return q2_group(w, s, k); };
      sub_dot_u8<T, 4, true, true>(q, yq, mult_of(q2_scale32(w, 2 * s)), mult_of(q2_scale32(w, 2 * s + 1)), acc);
    }
    for (int p = 0; p < 8; ++p) {
      const VI mn = pair16(q2_min32(w, 2 * p), q2_min32(w, 2 * p + 1));
      for (int t = 0; t < T; ++t) add_in_order(mins[t], vi_madd16(mn, vi_bcast(y[t][b].b16 + 2 * p)));
    }
    const VF d = vf_half(w.d), dmin = vf_half(w.dmin);
    for (int t = 0; t < T; ++t) {
      const VF yd = vf_set1(y[t][b].d);
      facc[t] = vf_fmadd(vf_mul(d, yd), vf_cvt(acc[t]), facc[t]);
      facc[t] = vf_fnmadd(vf_mul(dmin, yd), vf_cvt(mins[t]), facc[t]);
    }
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// TQ2_0: tq2_block (gemm_x86_kquants.h) per block over the 2-bit planes in registers, the
// arithmetic of tile_tq2_0 over the unpacked scratch, so the same bits at any token count.
inline VI tq2_group(const PQTQ2_0& w, int s, int k) { return two_bits(w, s, k); }
template <int T>
void tile_packed_tq2_0(const PQTQ2_0* wb, int64_t nb, const ActQ8K* const y[T], float* out, int64_t ldo,
                       int n_rows) {
  const int64_t ahead = prefetch_bytes<T>();
  VF facc[T];
  for (int t = 0; t < T; ++t) facc[t] = vf_zero();
  for (int64_t b = 0; b < nb; ++b) {
    const PQTQ2_0& w = wb[b];
    prefetch_ahead(wb, b, ahead);
    const auto groups = [&w](int s) { return [&w, s](int k) { return tq2_group(w, s, k); }; };
    tq2_block<T>(groups, vf_half(w.d), y, b, facc);
  }
  for (int t = 0; t < T; ++t) vf_store_rows(out + t * ldo, facc[t], n_rows);
}

// Groups of kRows rows of [r0, r1) (r0 a multiple of kRows) from the packed matrix.
template <typename PB, typename Act, template <int> class Tile>
void run_packed_groups(const uint8_t* pw, int64_t rows, int64_t cols, const uint8_t* packed, int64_t n_tok, int64_t r0,
                       int64_t r1, float* out, int64_t ldo, uint8_t* /*scratch*/) {
  constexpr int64_t block = sizeof(Act) == sizeof(ActQ8) ? kQK : kQK_K;
  const int64_t nb = cols / block;
  const auto* act = reinterpret_cast<const Act*>(packed);
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    const auto* wb = reinterpret_cast<const PB*>(pw) + (g0 / kRows) * nb;
    run_tiles<Tile>(wb, nb, act, nb, n_tok, out + g0, ldo, static_cast<int>(min64(kRows, r1 - g0)));
  }
}

// ---- Unpacking for long batches (GemmKernel::packed_unpack_tokens) ------------------------------

// From this many tokens on, the K-quant matrices' groups are unpacked once into the per-call
// tiles' byte layout (WK4 / WK6 / WLegacy of gemm_x86_impl.h) and multiplied from there: the
// packed tiles extract the 5th or top 2 bits (and convert the fp16 scales and minimums) per tile
// of tokens, which a prefill of n tokens repeats n / kTok times. The integer sums and the float
// epilogue are the same either way (bit-identical). Q4_1 / Q5_0 / Q5_1 on AVX2, `edgelm bench -p
// 128 -t 1` (Zen 5), the packed tiles against the per-call ones: 81 / 91 / 75 against 87 / 111 /
// 82 tok/s.
constexpr int64_t kUnpackTokens = 2 * kTok;

template <typename PB>
void unpack_k4(const PB* wb, int64_t nb, WK4* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const PB& w = wb[b];
    WK4& o = out[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    vf_store(o.d, vf_half(w.d));
    vf_store(o.dmin, vf_half(w.dmin));
    for (int p = 0; p < 4; ++p) vi_store(o.mn[p], vi_load(w.mn[p]));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      vi_store(o.sc[s], mult_u8(w.sc[s]));
      for (int k = 0; k < 8; ++k) vi_store(o.q[s] + k * kGroupBytes, k4_group(w, s, k));
    }
  }
}

// IQ4_XS into repack_iq4_xs's WK4: the looked-up values, the scales as multipliers and as pairs.
void unpack_iq4_xs(const PQIQ4_XS* wb, int64_t nb, WK4* out) {
  const VI book = vi_bcast16(kIq4Values);
  for (int64_t b = 0; b < nb; ++b) {
    const PQIQ4_XS& w = wb[b];
    WK4& o = out[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    vf_store(o.d, vf_half(w.d));
    vf_store(o.dmin, vf_zero());
    for (int p = 0; p < 4; ++p) vi_store(o.mn[p], pair_s8(w.sc[2 * p], w.sc[2 * p + 1]));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      vi_store(o.sc[s], mult_s8(w.sc[s]));
      for (int k = 0; k < 8; ++k) vi_store(o.q[s] + k * kGroupBytes, iq4_xs_group(w, book, s, k));
    }
  }
}

// Q6_K and Q3_K (Group: q6_group / q3_group) into the per-call tiles' WK6.
template <typename PB, VI (*Group)(const PB&, int, int)>
void unpack_k16(const PB* wb, int64_t nb, WK6* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const PB& w = wb[b];
    WK6& o = out[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    vf_store(o.d, vf_half(w.d));
    vf_store(o.dmin, vf_zero());
    for (int j = 0; j < 16; ++j) vi_store(o.sc[j], mult_s8(w.sc[j]));
    for (int p = 0; p < 8; ++p) vi_store(o.scp[p], pair_s8(w.sc[2 * p], w.sc[2 * p + 1]));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s)
      for (int k = 0; k < 8; ++k) vi_store(o.q[s] + k * kGroupBytes, Group(w, s, k));
  }
}

// Q2_K into WK6 (as repack_k2): the scales as multipliers, the mins as pairs, the quants.
void unpack_q2_k(const PQ2_K* wb, int64_t nb, WK6* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const PQ2_K& w = wb[b];
    WK6& o = out[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    vf_store(o.d, vf_half(w.d));
    vf_store(o.dmin, vf_half(w.dmin));
    for (int j = 0; j < 16; ++j) vi_store(o.sc[j], mult_of(q2_scale32(w, j)));
    for (int p = 0; p < 8; ++p) vi_store(o.scp[p], pair16(q2_min32(w, 2 * p), q2_min32(w, 2 * p + 1)));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s)
      for (int k = 0; k < 8; ++k) vi_store(o.q[s] + k * kGroupBytes, q2_group(w, s, k));
  }
}

// TQ2_0 into WK6 (as repack_k2): unit multipliers and pairs, the quants.
void unpack_tq2_0(const PQTQ2_0* wb, int64_t nb, WK6* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const PQTQ2_0& w = wb[b];
    WK6& o = out[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    vf_store(o.d, vf_half(w.d));
    vf_store(o.dmin, vf_zero());
    for (int j = 0; j < 16; ++j) vi_store(o.sc[j], mult_of(vi_set1(1)));
    for (int p = 0; p < 8; ++p) vi_store(o.scp[p], pair16(vi_set1(1), vi_set1(1)));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s)
      for (int k = 0; k < 8; ++k) vi_store(o.q[s] + k * kGroupBytes, tq2_group(w, s, k));
  }
}

// Q4_1, Q5_0, Q5_1 into the per-call tiles' WLegacy (scales and minimums as floats, the groups'
// unsigned bytes); Group: group_q4 / group_q5 of PB.
template <typename PB, VI (*Group)(const PB&, int)>
void unpack_legacy(const PB* wb, int64_t nb, WLegacy* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const PB& w = wb[b];
    WLegacy& o = out[b];
    prefetch_ahead(wb, b, kMultiTokenPrefetchBytes);
    vf_store(o.d, vf_half(w.d));
    if constexpr (requires { w.m; })
      vf_store(o.m, vf_half(w.m));
    else
      vf_store(o.m, vf_zero());
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) vi_store(o.q + g * kGroupBytes, Group(w, g));
  }
}

// run_packed of a K-quant, Q4_1, Q5_0 or Q5_1 (WB: the per-call tiles' block, WK4 / WK6 /
// WLegacy): the packed tiles (PTile) below kUnpackTokens tokens; from there each group is
// unpacked into scratch (one group of the per-call scratch, scratch_bytes(cols)) and the
// per-call tiles (UTile) run over it.
template <typename PB, typename WB, void (*Unpack)(const PB*, int64_t, WB*), template <int> class PTile,
          template <int> class UTile>
void run_packed_unpacking(const uint8_t* pw, int64_t rows, int64_t cols, const uint8_t* packed, int64_t n_tok,
                          int64_t r0, int64_t r1, float* out, int64_t ldo, uint8_t* scratch) {
  using Act = std::conditional_t<std::is_same_v<WB, WLegacy>, ActQ8, ActQ8K>;
  if (n_tok < kUnpackTokens) {
    run_packed_groups<PB, Act, PTile>(pw, rows, cols, packed, n_tok, r0, r1, out, ldo, scratch);
    return;
  }
  const int64_t nb = cols / (std::is_same_v<Act, ActQ8> ? kQK : kQK_K);
  const auto* act = reinterpret_cast<const Act*>(packed);
  auto* wk = reinterpret_cast<WB*>(scratch);
  for (int64_t g0 = r0; g0 < r1; g0 += kRows) {
    Unpack(reinterpret_cast<const PB*>(pw) + (g0 / kRows) * nb, nb, wk);
    run_tiles<UTile>(wk, nb, act, nb, n_tok, out + g0, ldo, static_cast<int>(min64(kRows, r1 - g0)));
  }
}

// The tile instantiations per token count (Tile<T> of run_tiles).
template <int T>
struct Q4_0Packed {
  static void run(const PQ4_0* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_legacy<T, PQ4_0, group_q4<PQ4_0>, false>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct IQ4_NLPacked {  // signed values, as Q8_0Packed
  static void run(const PQ4_0* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_legacy<T, PQ4_0, group_iq4_nl, true>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q4_1Packed {
  static void run(const PQ4_1* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_legacy<T, PQ4_1, group_q4<PQ4_1>, false, 8, true>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q5_0Packed {
  static void run(const PQ5_0* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_legacy<T, PQ5_0, group_q5<PQ5_0>, false, 4>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q5_1Packed {
  static void run(const PQ5_1* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_legacy<T, PQ5_1, group_q5<PQ5_1>, false, 4, true>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q8_0Packed {
  static void run(const PQ8_0* wb, int64_t nb, const ActQ8* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_legacy<T, PQ8_0, group_q8_0, true>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q4_KPacked {
  static void run(const PQ4_K* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_k4<T, PQ4_K>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q5_KPacked {
  static void run(const PQ5_K* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_k4<T, PQ5_K>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q6_KPacked {  // the flush and zero point of K6Tile
  static void run(const PQ6_K* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_k16<T, PQ6_K, q6_group, 2, 5>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q2_KPacked {
  static void run(const PQ2_K* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_q2_k<T>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct Q3_KPacked {  // those of K3Tile
  static void run(const PQ3_K* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_k16<T, PQ3_K, q3_group, 4, 2>(wb, nb, y, out, ldo, n_rows);
  }
};

template <int T>
struct TQ2_0Packed {
  static void run(const PQTQ2_0* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_tq2_0<T>(wb, nb, y, out, ldo, n_rows);
  }
};
template <int T>
struct IQ4_XSPacked {
  static void run(const PQIQ4_XS* wb, int64_t nb, const ActQ8K* const* y, float* out, int64_t ldo, int n_rows) {
    tile_packed_iq4_xs<T>(wb, nb, y, out, ldo, n_rows);
  }
};

}  // namespace

// Q8_0: signed with |w| . sign(y, w) on AVX2; biased to w + 128 (offset 128) with VNNI.
// IQ4_NL: Q8_0's paths with the codebook values as quants.
#if EDGELM_GEMM_VNNI
#define EDGELM_GEMM_IQ4_NL \
  pack_q8<BlockQ8_0, false, 128>, legacy_scratch, run_legacy<BlockIQ4_NL, quants_iq4_nl_biased, 8, false>
#else
#define EDGELM_GEMM_IQ4_NL pack_q8<BlockQ8_0, false, 0>, legacy_scratch, run_legacy<BlockIQ4_NL, quants_iq4_nl, 0, false>
#endif
#if EDGELM_GEMM_VNNI
#define EDGELM_GEMM_Q8_0 \
  pack_q8<BlockQ8_0, false, 128>, legacy_scratch, run_legacy<BlockQ8_0, quants_q8_0_biased, 8, false>
#else
#define EDGELM_GEMM_Q8_0 pack_q8<BlockQ8_0, false, 0>, legacy_scratch, run_legacy<BlockQ8_0, quants_q8_0, 0, false>
#endif

constinit const GemmKernel EDGELM_GEMM_TABLE[kX86GemmCount] = {
    {DType::q4_0, act_packed_bytes<ActQ8>, pack_q8<BlockQ8_0, false, 8>, legacy_scratch,
     run_legacy<BlockQ4_0, quants_q4_0, 8, false>, kRows, packed_bytes_of<PQ4_0, kQK>,
     pack_groups<BlockQ4_0, PQ4_0, kQK, pack_block_q4_0>, run_packed_groups<PQ4_0, ActQ8, Q4_0Packed>},
    {DType::q4_1, act_packed_bytes<ActQ8>, pack_q8<BlockQ8_1, true, 0>, legacy_scratch,
     run_legacy<BlockQ4_1, quants_q4_1, 8, true>, kRows, packed_bytes_of<PQ4_1, kQK>,
     pack_groups<BlockQ4_1, PQ4_1, kQK, pack_block_legacy<BlockQ4_1, PQ4_1>>,
     run_packed_unpacking<PQ4_1, WLegacy, unpack_legacy<PQ4_1, group_q4<PQ4_1>>, Q4_1Packed, LegacyTile<8, true>::Of>,
     kUnpackTokens},
    {DType::q5_0, act_packed_bytes<ActQ8>, pack_q8<BlockQ8_0, false, 16>, legacy_scratch,
     run_legacy<BlockQ5_0, quants_q5<BlockQ5_0>, 4, false>, kRows, packed_bytes_of<PQ5_0, kQK>,
     pack_groups<BlockQ5_0, PQ5_0, kQK, pack_block_legacy<BlockQ5_0, PQ5_0>>,
     run_packed_unpacking<PQ5_0, WLegacy, unpack_legacy<PQ5_0, group_q5<PQ5_0>>, Q5_0Packed, LegacyTile<4, false>::Of>,
     kUnpackTokens},
    {DType::q5_1, act_packed_bytes<ActQ8>, pack_q8<BlockQ8_1, true, 0>, legacy_scratch,
     run_legacy<BlockQ5_1, quants_q5<BlockQ5_1>, 4, true>, kRows, packed_bytes_of<PQ5_1, kQK>,
     pack_groups<BlockQ5_1, PQ5_1, kQK, pack_block_legacy<BlockQ5_1, PQ5_1>>,
     run_packed_unpacking<PQ5_1, WLegacy, unpack_legacy<PQ5_1, group_q5<PQ5_1>>, Q5_1Packed, LegacyTile<4, true>::Of>,
     kUnpackTokens},
    {DType::q8_0, act_packed_bytes<ActQ8>, EDGELM_GEMM_Q8_0, kRows, packed_bytes_of<PQ8_0, kQK>,
     pack_groups<BlockQ8_0, PQ8_0, kQK, pack_block_q8_0>, run_packed_groups<PQ8_0, ActQ8, Q8_0Packed>},
    {DType::q4_k, act_packed_bytes<ActQ8K>, pack_q8_k, k4_scratch, run_k4<false, BlockQ4_K>, kRows,
     packed_bytes_of<PQ4_K, kQK_K>, pack_groups<BlockQ4_K, PQ4_K, kQK_K, pack_block_q4_k>,
     run_packed_unpacking<PQ4_K, WK4, unpack_k4<PQ4_K>, Q4_KPacked, K4Tile<8>::Of>, kUnpackTokens},
    {DType::q5_k, act_packed_bytes<ActQ8K>, pack_q8_k, k4_scratch, run_k4<true, BlockQ5_K>, kRows,
     packed_bytes_of<PQ5_K, kQK_K>, pack_groups<BlockQ5_K, PQ5_K, kQK_K, pack_block_q5_k>,
     run_packed_unpacking<PQ5_K, WK4, unpack_k4<PQ5_K>, Q5_KPacked, K4Tile<4>::Of>, kUnpackTokens},
    {DType::q6_k, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_q6_k, kRows, packed_bytes_of<PQ6_K, kQK_K>,
     pack_groups<BlockQ6_K, PQ6_K, kQK_K, pack_block_q6_k>,
     run_packed_unpacking<PQ6_K, WK6, unpack_k16<PQ6_K, q6_group>, Q6_KPacked, K6Tile>, kUnpackTokens},
    {DType::iq4_nl, act_packed_bytes<ActQ8>, EDGELM_GEMM_IQ4_NL, kRows, packed_bytes_of<PQ4_0, kQK>,
     pack_groups<BlockIQ4_NL, PQ4_0, kQK, pack_block_legacy<BlockIQ4_NL, PQ4_0>>,
     run_packed_unpacking<PQ4_0, WLegacy, unpack_legacy<PQ4_0, group_iq4_nl>, IQ4_NLPacked,
                          LegacyTile<EDGELM_GEMM_VNNI ? 8 : 0, false>::Of>,
     kUnpackTokens},
    {DType::q2_k, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_k2<false, BlockQ2_K>, kRows,
     packed_bytes_of<PQ2_K, kQK_K>, pack_groups<BlockQ2_K, PQ2_K, kQK_K, pack_block_q2_k>,
     run_packed_unpacking<PQ2_K, WK6, unpack_q2_k, Q2_KPacked, K2Tile>, kUnpackTokens},
    {DType::q3_k, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_k2<true, BlockQ3_K>, kRows,
     packed_bytes_of<PQ3_K, kQK_K>, pack_groups<BlockQ3_K, PQ3_K, kQK_K, pack_block_q3_k>,
     run_packed_unpacking<PQ3_K, WK6, unpack_k16<PQ3_K, q3_group>, Q3_KPacked, K3Tile>, kUnpackTokens},
    {DType::iq4_xs, act_packed_bytes<ActQ8K>, pack_q8_k, k4_scratch, run_iq4_xs, kRows,
     packed_bytes_of<PQIQ4_XS, kQK_K>, pack_groups<BlockIQ4_XS, PQIQ4_XS, kQK_K, pack_block_iq4_xs>,
     run_packed_unpacking<PQIQ4_XS, WK4, unpack_iq4_xs, IQ4_XSPacked, IQ4XSTile>, kUnpackTokens},
    {DType::tq2_0, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_k2<true, BlockTQ2_0>, kRows,
     packed_bytes_of<PQTQ2_0, kQK_K>, pack_groups<BlockTQ2_0, PQTQ2_0, kQK_K, pack_block_tq2_0>,
     run_packed_unpacking<PQTQ2_0, WK6, unpack_tq2_0, TQ2_0Packed, KT2Tile>, kUnpackTokens},
    {DType::iq3_s, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_iq_grid<Iq3S, true>},
    {DType::iq2_xs, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_iq_grid<Iq2Xs, false>},
    {DType::iq2_xxs, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_iq_grid<Iq2Xxs, false>},
    {DType::iq2_s, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_iq_grid<Iq2S, false>},
    {DType::iq3_xxs, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_iq_grid<Iq3Xxs, false>},
    {DType::iq1_s, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_iq_grid<Iq1S, true>},
    {DType::iq1_m, act_packed_bytes<ActQ8K>, pack_q8_k, k6_scratch, run_iq_grid<Iq1M, true>},
    {DType::f32, float_packed_bytes<DType::f32>, pack_float<DType::f32>, float_scratch, run_float<DType::f32>},
    {DType::f16, float_packed_bytes<DType::f16>, pack_float<DType::f16>, float_scratch, run_float<DType::f16>},
    {DType::bf16, float_packed_bytes<DType::bf16>, pack_float<DType::bf16>, float_scratch, run_float<DType::bf16>},
};
#undef EDGELM_GEMM_Q8_0
#undef EDGELM_GEMM_IQ4_NL

}  // namespace edgelm::kernels::x86
