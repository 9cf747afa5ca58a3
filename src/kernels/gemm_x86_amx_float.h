// AMX-BF16 tiles for the F16 and BF16 weight GEMMs of the amx ISA (and its relaxed F32 GEMM): the last part of
// gemm_avx512.cpp (after gemm_x86_amx.h; the linkage rules of gemm_x86_impl.h apply). Reached
// only through isa_kernels(Isa::amx), after the CPU check (AMX-BF16 included) and the OS grant.
//
// Why: the AVX-512 float tiles (gemm_x86_float.h) do 32 multiply-adds a cycle at best; a
// TDPBF16PS does 16 x 16 x 32 in about 16 cycles. A vision encoder (SigLIP, 86M to 400M
// parameters over 1024 to 4096 patches) spends most of its time in these GEMMs.
//
// Exactness by splitting the operands (no precision lost against the AVX-512 tiles beyond
// float reassociation, bounded below):
//  - BF16 weights: matmul rounds the activations to BF16, so weight and activation are BF16
//    values and each product is exact in the FP32 accumulator: one product per element.
//  - F16 weights: matmul rounds the activations to F16, and an F16 value v is exactly hi + lo
//    with hi = v rounded to BF16 and lo = v - hi (at most 4 significant bits; F16's range lies
//    within BF16's). The dot product over k of (ha + la)(hw + lw) is taken as ha hw + la hw + ha
//    lw: the split K holds, per source element, the activation triple (ha, la, ha) against the
//    weight triple (hw, hw, lw). The dropped la lw is below 2^-18 of each product, under the
//    FP32 rounding of the sums it joins; the three kept products are exact.
// So a result differs from the AVX-512 float tiles only by the order and rounding of the FP32
// sums (AMX accumulates pairs, with denormals flushed); tests/kernels/test_gemm.cpp checks it
// against the scalar reference within the type's budget, like every GEMM.
//  - F32 (the relaxed GEMM only, IsaKernels::relaxed_gemms: matrices that ask for it): split as
//    F16 is, but hi + lo keeps 16 of F32's 24 significant bits, so each operand is within 2^-17
//    and each product within about 2^-15 of FP32's (PyTorch's "high" precision, "bf16x3").
//
// Layout: the activations packed per call as [tokens padded to 16][kp] bf16, kp = the split K
// (kSplit x cols) padded to 32, zeros past the data; each group of 16 weight rows split into the
// same row form and turned into B tiles: pair j (split elements 2j, 2j + 1) of row i is the
// 32-bit lane i of B row j ([kp / 2][16] lanes, 64 bytes a row). Tiles 0-3 accumulate 2 token
// tiles x 2 row groups, 4-5 hold A, 6-7 B: 4 tile loads per 4 products.
#pragma once
#if !EDGELM_GEMM_VNNI || !EDGELM_GEMM_ZMM
#error "gemm_x86_amx_float.h is part of gemm_avx512.cpp only"
#endif

namespace edgelm::kernels::x86 {
namespace {

constexpr int64_t kBfTileK = 32;  // bf16 elements of an A tile row (64 bytes)

// Split elements per source element: F16's and F32's hi, lo (and hi again against the weight's
// lo); BF16 as it is.
template <DType kType>
constexpr int64_t kSplit = kType == DType::bf16 ? 1 : 3;

template <DType kType>
inline int64_t split_cols(int64_t cols) {
  return (kSplit<kType> * cols + kBfTileK - 1) / kBfTileK * kBfTileK;
}
inline int64_t pad_tokens(int64_t n) { return (n + kAmxTok - 1) / kAmxTok * kAmxTok; }

// permutexvar indices from (hi_i, lo_i) pairs (16-bit elements 2i, 2i + 1) to the 48 split
// elements of 16 sources: activations (ha, la, ha), weights (hw, hw, lw).
struct SplitIndex {
  alignas(64) uint16_t v[64];
};
constexpr SplitIndex split_index(bool weights) {
  SplitIndex s{};
  for (int j = 0; j < 48; ++j) {
    const int i = j / 3, r = j % 3;
    s.v[j] = static_cast<uint16_t>(2 * i + (weights ? r == 2 : r == 1));
  }
  return s;
}
constexpr SplitIndex kSplitActivation = split_index(false), kSplitWeight = split_index(true);

// Float bits -> the BF16 nearest (ties to even), in the low 16 bits of each lane (finite values).
inline VI bf16_rne(VI x) {
  const VI lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  return _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
}

// 16 halves -> 32-bit lanes (hi_i | lo_i << 16), hi_i = v_i rounded to BF16 (nearest even),
// lo_i = v_i - hi_i (exact, so its float's low 16 bits are zero).
inline VI f16_hi_lo(const uint16_t* p) {
  const __m512 f = _mm512_cvtph_ps(load256(p));
  const VI hi = bf16_rne(_mm512_castps_si512(f));
  const __m512 lo = _mm512_sub_ps(f, _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16)));
  return _mm512_or_si512(hi, _mm512_andnot_si512(_mm512_set1_epi32(0xffff), _mm512_castps_si512(lo)));
}

// 16 floats -> the same lanes: hi_i = v_i rounded to BF16, lo_i = v_i - hi_i rounded to BF16
// (within 2^-17 of v_i: F32's 24-bit significand does not fit in two BF16s).
inline VI f32_hi_lo(const float* p) {
  const __m512 f = _mm512_loadu_ps(p);
  const VI hi = bf16_rne(_mm512_castps_si512(f));
  const __m512 lo = _mm512_sub_ps(f, _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16)));
  return _mm512_or_si512(hi, _mm512_slli_epi32(bf16_rne(_mm512_castps_si512(lo)), 16));
}

// A row of `cols` elements of kType -> kp split bf16 elements (zeros past kSplit * cols).
template <DType kType, bool kWeights>
void split_row(const void* row, int64_t cols, uint16_t* dst, int64_t kp) {
  int64_t done = 0;  // split elements written
  if constexpr (kType == DType::bf16) {
    std::memcpy(dst, row, static_cast<size_t>(cols) * 2);
    done = cols;
  } else {
    using Src = std::conditional_t<kType == DType::f16, uint16_t, float>;
    const auto* src = static_cast<const Src*>(row);
    const auto hi_lo = [](const Src* p) {
      if constexpr (kType == DType::f16)
        return f16_hi_lo(p);
      else
        return f32_hi_lo(p);
    };
    const SplitIndex& ix = kWeights ? kSplitWeight : kSplitActivation;
    const VI i0 = _mm512_load_si512(ix.v), i1 = _mm512_load_si512(ix.v + 32);
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16, done += 48) {
      const VI v = hi_lo(src + c);
      _mm512_storeu_si512(dst + done, _mm512_permutexvar_epi16(i0, v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + done + 32),
                          _mm512_castsi512_si256(_mm512_permutexvar_epi16(i1, v)));
    }
    if (c < cols) {
      alignas(64) Src tail[16] = {};
      alignas(64) uint16_t split[48];
      std::memcpy(tail, src + c, static_cast<size_t>(cols - c) * sizeof(Src));
      const VI v = hi_lo(tail);
      _mm512_store_si512(split, _mm512_permutexvar_epi16(i0, v));
      _mm256_store_si256(reinterpret_cast<__m256i*>(split + 32), _mm512_castsi512_si256(_mm512_permutexvar_epi16(i1, v)));
      std::memcpy(dst + done, split, static_cast<size_t>(3 * (cols - c)) * 2);
      done += 3 * (cols - c);
    }
  }
  std::memset(dst + done, 0, static_cast<size_t>(kp - done) * 2);
}

template <DType kType>
size_t amx_float_packed_bytes(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(pad_tokens(n_tok) * split_cols<kType>(cols)) * 2;
}

// The activations (rows of kType halves, as matmul rounded them) -> [padded tokens][kp] split.
template <DType kType>
void pack_amx_float(const uint8_t* act, size_t act_row_bytes, int64_t cols, int64_t n_tok, uint8_t* packed) {
  const int64_t kp = split_cols<kType>(cols);
  auto* out = reinterpret_cast<uint16_t*>(packed);
  for (int64_t t = 0; t < n_tok; ++t)
    split_row<kType, false>(act + static_cast<size_t>(t) * act_row_bytes, cols, out + t * kp, kp);
  std::memset(out + n_tok * kp, 0, static_cast<size_t>((pad_tokens(n_tok) - n_tok) * kp) * 2);
}

// Row groups whose B tiles are extracted before the token loop: as many pairs (up to 4) as fit
// in about 1.5 MB of L2 beside one token pair's activations (64 kp bytes each), so that the
// activations stream from L3 once per block of pairs rather than once per pair.
inline int64_t amx_block_groups(int64_t kp) {
  constexpr int64_t kL2Budget = int64_t{3} << 19;
  const int64_t pairs = (kL2Budget - 64 * kp) / (64 * kp);
  return 2 * (pairs < 1 ? 1 : pairs > 4 ? 4 : pairs);
}

// Scratch: the B tiles of a block of groups (32 kp bytes each) and one group's split rows (32 kp).
template <DType kType>
size_t amx_float_scratch(int64_t cols) {
  const int64_t kp = split_cols<kType>(cols);
  return static_cast<size_t>(kp * 32 * (amx_block_groups(kp) + 1));
}

// Rows [r, r + n_rows) of w (n_rows <= 16; missing rows repeat the last, never stored) -> the
// B tiles of the group at b, through the split rows at rows.
template <DType kType>
void extract_group(const GemmWeights& w, int64_t r, int n_rows, int64_t kp, uint16_t* rows, uint8_t* b) {
  for (int i = 0; i < kRows; ++i)
    split_row<kType, true>(w.data + static_cast<size_t>(r + (i < n_rows ? i : n_rows - 1)) * w.row_bytes, w.cols,
                           rows + i * kp, kp);
  // B row j = the 32-bit pair j of each of the 16 rows: 8 x 8 transposes of 8 pairs of 8 rows
  // (half the gathers' time; kp / 2 is a multiple of 16).
  for (int64_t j = 0; j < kp / 2; j += 8)
    for (int h = 0; h < 2; ++h) {
      __m256i v[8];
      for (int i = 0; i < 8; ++i) v[i] = load256(rows + (8 * h + i) * kp + 2 * j);
      transpose8(v);  // v[g] = pair j + g of rows 8h .. 8h + 7
      for (int g = 0; g < 8; ++g) store256(b + (j + g) * 64 + 32 * h, v[g]);
    }
}

// _tile_stored of accumulator C (the intrinsic takes the tile number as a literal).
template <int C>
inline void tile_store(float* p, int64_t stride_bytes) {
  if constexpr (C == 0) _tile_stored(0, p, stride_bytes);
  if constexpr (C == 1) _tile_stored(1, p, stride_bytes);
  if constexpr (C == 2) _tile_stored(2, p, stride_bytes);
  if constexpr (C == 3) _tile_stored(3, p, stride_bytes);
  amx_barrier();
}

// Accumulator tile C's sums (16 tokens x 16 rows) into out for the first n_tok tokens and n_rows rows.
template <int C>
inline void store_float_tile(float* out, int64_t ldo, int n_tok, int n_rows) {
  if (n_tok == kAmxTok && n_rows == kRows) {
    tile_store<C>(out, ldo * 4);
    return;
  }
  alignas(64) float sums[kAmxTok * kRows];
  tile_store<C>(sums, kRows * 4);
  for (int t = 0; t < n_tok; ++t) std::memcpy(out + t * ldo, sums + t * kRows, static_cast<size_t>(n_rows) * 4);
}

// NT token tiles (from a, kp split elements a token) x NG row groups (B tiles at b0, b1).
template <int NT, int NG>
void amx_float_block(const uint16_t* a, int64_t kp, const uint8_t* b0, const uint8_t* b1, float* out, int64_t ldo,
                     int tok0, int tok1, int rows0, int rows1) {
  const int64_t a_stride = kp * 2;
  amx_barrier();
  _tile_zero(0);
  if constexpr (NG == 2) _tile_zero(1);
  if constexpr (NT == 2) {
    _tile_zero(2);
    if constexpr (NG == 2) _tile_zero(3);
  }
  for (int64_t k = 0; k < kp; k += kBfTileK) {
    _tile_loadd(4, a + k, a_stride);
    _tile_loadd(6, b0 + k * 32, 64);  // pair k / 2 of 64 bytes
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NG == 2) {
      _tile_loadd(7, b1 + k * 32, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (NT == 2) {
      _tile_loadd(5, a + kAmxTok * kp + k, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NG == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  store_float_tile<0>(out, ldo, tok0, rows0);
  if constexpr (NG == 2) store_float_tile<1>(out + kRows, ldo, tok0, rows1);
  if constexpr (NT == 2) {
    store_float_tile<2>(out + kAmxTok * ldo, ldo, tok1, rows0);
    if constexpr (NG == 2) store_float_tile<3>(out + kAmxTok * ldo + kRows, ldo, tok1, rows1);
  }
}

template <DType kType>
void run_amx_float(const GemmWeights& w, const uint8_t* packed, int64_t n_tok, int64_t r0, int64_t r1, float* out,
                   int64_t ldo, uint8_t* scratch) {
  const int64_t kp = split_cols<kType>(w.cols), block_groups = amx_block_groups(kp);
  const int64_t group_bytes = 32 * kp;
  auto* rows = reinterpret_cast<uint16_t*>(scratch + block_groups * group_bytes);
  const auto* act = reinterpret_cast<const uint16_t*>(packed);
  amx_configure_full();
  for (int64_t rb0 = r0; rb0 < r1; rb0 += block_groups * kRows) {
    const int64_t rb1 = min64(r1, rb0 + block_groups * kRows);
    for (int64_t g = rb0; g < rb1; g += kRows)
      extract_group<kType>(w, g, static_cast<int>(min64(kRows, rb1 - g)), kp, rows,
                           scratch + (g - rb0) / kRows * group_bytes);
    amx_barrier();
    for (int64_t t0 = 0; t0 < n_tok; t0 += 2 * kAmxTok) {
      const int tok0 = static_cast<int>(min64(kAmxTok, n_tok - t0));
      const int tok1 = static_cast<int>(min64(kAmxTok, n_tok - t0 - kAmxTok));
      const uint16_t* a = act + t0 * kp;
      for (int64_t g0 = rb0; g0 < rb1; g0 += 2 * kRows) {
        const int rows0 = static_cast<int>(min64(kRows, rb1 - g0));
        const int rows1 = static_cast<int>(min64(kRows, rb1 - g0 - kRows));
        const uint8_t* b0 = scratch + (g0 - rb0) / kRows * group_bytes;
        const uint8_t* b1 = b0 + group_bytes;
        float* o = out + t0 * ldo + g0;
        if (tok1 > 0 && rows1 > 0)
          amx_float_block<2, 2>(a, kp, b0, b1, o, ldo, tok0, tok1, rows0, rows1);
        else if (tok1 > 0)
          amx_float_block<2, 1>(a, kp, b0, b1, o, ldo, tok0, tok1, rows0, rows1);
        else if (rows1 > 0)
          amx_float_block<1, 2>(a, kp, b0, b1, o, ldo, tok0, tok1, rows0, rows1);
        else
          amx_float_block<1, 1>(a, kp, b0, b1, o, ldo, tok0, tok1, rows0, rows1);
      }
    }
  }
  _tile_release();
}

}  // namespace

constinit const GemmKernel kAmxRelaxedGemms[kAmxRelaxedGemmCount] = {
    {DType::f32, amx_float_packed_bytes<DType::f32>, pack_amx_float<DType::f32>, amx_float_scratch<DType::f32>,
     run_amx_float<DType::f32>},
};

constinit const GemmKernel kAmxFloatGemms[kAmxFloatGemmCount] = {
    {DType::f16, amx_float_packed_bytes<DType::f16>, pack_amx_float<DType::f16>, amx_float_scratch<DType::f16>,
     run_amx_float<DType::f16>},
    {DType::bf16, amx_float_packed_bytes<DType::bf16>, pack_amx_float<DType::bf16>, amx_float_scratch<DType::bf16>,
     run_amx_float<DType::bf16>},
};

}  // namespace edgelm::kernels::x86
