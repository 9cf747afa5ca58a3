// Multi-token GEMM kernels (kernels/gemm.h) against the scalar oracle: matmul_with(ISA) for
// every ISA that has GEMMs (AVX2 and AVX-512 through the AVX2 kernels, AMX on CPUs that have
// it; the test skips where the CPU has none) against matmul_with(scalar), which runs the scalar
// vec_dot per (row, token).
//
// Shapes cover the tile edges: rows not a multiple of 16 (a padded last tile), token counts
// below, at and above one 16-token tile (a padded last token tile), 1 to 40 sub-blocks, and
// row ranges of the thread pool that start inside a tile. Data: quantized Gaussians, random
// bits with finite scales, all-zero blocks, extreme scales (65504 and the smallest normal fp16)
// and large-magnitude activations. The grid IQ types have no quantizer: random bits with finite
// scales stand in for the quantized Gaussians.
//
// Budget: both sides compute each sub-block's integer dot exactly and differ only in the float
// summation of nb scaled terms (the scalar K kernels sum a super-block in integers first), so
// |gemm - scalar| <= (2 nb_terms + 16) u mag, mag = sum_i (|w_i| + 2 |min_i|) |a_i| over the
// dequantized weight row and the dequantized quantized activations (min_i: the min part of
// Q4_1, Q5_1, Q2_K, Q4_K and Q5_K). Float types are checked with the same bound, one term per element.
// A wrong quant in a sub-block moves the result by ~1/32 of that sub-block's magnitude, far
// above the budget.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_iq_grid.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "kernels/quants_ternary.h"
#include "quant_test_util.h"

namespace edgelm::kernels {
namespace {

using test::traits_of;

constexpr DType kGemmTypes[] = {DType::q8_0,  DType::q4_0,   DType::q4_1,    DType::q5_0,   DType::q5_1,
                                DType::q4_k,  DType::q5_k,   DType::q6_k,    DType::f32,    DType::f16,
                                DType::bf16,  DType::q2_k,   DType::q3_k,    DType::iq4_nl, DType::iq4_xs,
                                DType::iq3_s, DType::iq2_xs, DType::iq2_xxs, DType::iq2_s,  DType::iq3_xxs,
                                DType::iq1_s, DType::iq1_m,  DType::tq2_0};

bool is_float(DType type) { return type == DType::f32 || type == DType::f16 || type == DType::bf16; }
bool is_legacy(DType type) {
  return type == DType::q8_0 || type == DType::q4_0 || type == DType::q4_1 || type == DType::q5_0 ||
         type == DType::q5_1 || type == DType::iq4_nl;
}
// Offsets of the fp16 fields of a K-format block (the super-block scales).
std::vector<size_t> k_halves(DType type) {
  switch (type) {
    case DType::q4_k: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::q5_k: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::q2_k: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::q3_k: return {offsetof(BlockQ3_K, d)};
    case DType::q6_k: return {offsetof(BlockQ6_K, d)};
    case DType::iq4_xs: return {offsetof(BlockIQ4_XS, d)};
    case DType::iq3_s: return {offsetof(BlockIQ3_S, d)};
    case DType::iq2_xs: return {offsetof(BlockIQ2_XS, d)};
    case DType::iq2_xxs: return {offsetof(BlockIQ2_XXS, d)};
    case DType::iq2_s: return {offsetof(BlockIQ2_S, d)};
    case DType::iq3_xxs: return {offsetof(BlockIQ3_XXS, d)};
    case DType::iq1_s: return {offsetof(BlockIQ1_S, d)};
    case DType::tq2_0: return {offsetof(BlockTQ2_0, d)};
    default: return {};
  }
}
// Sets the fp16 scale of a block of a type without a quantizer: the d field, or IQ1_M's, spread
// over the top nibbles of its four scale words.
void set_grid_d(DType type, uint8_t* blk, uint16_t d) {
  if (type != DType::iq1_m) {
    std::memcpy(blk + k_halves(type).front(), &d, 2);
    return;
  }
  for (int k = 0; k < 4; ++k) {
    uint16_t sc;
    std::memcpy(&sc, blk + offsetof(BlockIQ1_M, scales) + 2 * k, 2);
    sc = static_cast<uint16_t>((sc & 0x0fff) | (((d >> (4 * k)) & 0xf) << 12));
    std::memcpy(blk + offsetof(BlockIQ1_M, scales) + 2 * k, &sc, 2);
  }
}
// Bytes of fp16 fields at the start of a legacy block (d, and m for the formats with a min).
size_t legacy_header(DType type) { return type == DType::q4_1 || type == DType::q5_1 ? 4 : 2; }

std::vector<const IsaKernels*> gemm_isas() {
  std::vector<const IsaKernels*> out;
  for (Isa isa : {Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx, Isa::neon})
    if (const IsaKernels* k = isa_kernels(isa); k != nullptr && !k->gemms.empty()) out.push_back(k);
  return out;
}

enum class Data { gaussian, random_bits, zero_blocks, extreme_scales };

// A [rows, cols] weight matrix of `type` filled per `data`.
std::vector<uint8_t> make_weights(DType type, int64_t rows, int64_t cols, Data data, uint32_t seed) {
  std::vector<float> f = test::normal_data(rows * cols, seed);
  if (is_float(type)) {  // no block fields: zeros, huge and tiny values among the elements
    for (size_t i = 0; i < f.size(); ++i) {
      if (data == Data::zero_blocks && i % 3 == 1) f[i] = 0.0f;
      if (data == Data::extreme_scales) f[i] *= (i % 2 == 0) ? 2e3f : 1e-4f;  // within fp16 range
      if (data == Data::random_bits) f[i] *= static_cast<float>(i % 7 + 1) * 50.0f;
    }
  }
  std::vector<uint8_t> w(dtype_row_bytes(type, cols) * static_cast<size_t>(rows));
  std::mt19937 rng(seed);
  if (traits_of(type).from_float == nullptr) {
    // The grid IQ formats have no quantizer (llama.cpp writes them): random bits with a finite
    // scale stand for "gaussian" (any index, sign and scale pattern is a valid block).
    const size_t bs = dtype_traits(type).type_size;
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
    for (size_t at = 0; at < w.size(); at += bs)
      set_grid_d(type, w.data() + at, fp32_to_fp16(0.01f * static_cast<float>(rng() % 100 + 1)));
  } else {
    for (int64_t r = 0; r < rows; ++r)
      traits_of(type).from_float(f.data() + r * cols, w.data() + r * dtype_row_bytes(type, cols), cols);
  }
  const size_t block_bytes = dtype_traits(type).type_size;
  const size_t n_blocks = w.size() / block_bytes;
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = w.data() + b * block_bytes;
    switch (data) {
      case Data::gaussian: break;
      case Data::random_bits:
        if (is_float(type)) break;
        if (is_legacy(type)) {  // any quants, finite scales
          for (size_t i = legacy_header(type); i < block_bytes; ++i) blk[i] = static_cast<uint8_t>(rng());
          if (type == DType::q8_0)
            for (size_t i = 2; i < block_bytes; ++i)
              if (blk[i] == 0x80) blk[i] = 0x81;  // -128 is outside Q8_0's range
        } else {
          for (size_t i = 0; i < block_bytes; ++i) blk[i] = static_cast<uint8_t>(rng());
          // fp16 fields back to finite values.
          const uint16_t d = fp32_to_fp16(0.01f * static_cast<float>(rng() % 100 + 1));
          for (size_t at : k_halves(type)) std::memcpy(blk + at, &d, 2);
          if (type == DType::iq1_m) set_grid_d(type, blk, d);
        }
        break;
      case Data::zero_blocks:
        if (!is_float(type) && b % 3 == 1) std::memset(blk, 0, block_bytes);
        break;
      case Data::extreme_scales: {
        if (is_float(type)) break;
        const uint16_t h = (b % 2 == 0) ? fp32_to_fp16(65504.0f) : uint16_t{0x0400};  // max, smallest normal
        if (type == DType::iq1_m) {
          set_grid_d(type, blk, h);
        } else {
          const size_t at = is_legacy(type) ? 0 : k_halves(type).front();
          std::memcpy(blk + at, &h, 2);
        }
        break;
      }
    }
  }
  return w;
}

// mag of the budget for one (row, token): weights dequantized, activations as quantized.
double magnitude(DType type, const uint8_t* wrow, const std::vector<float>& a, int64_t cols) {
  const std::vector<float> w = test::dequantize(type, wrow, cols);
  std::vector<double> mins(static_cast<size_t>(cols), 0.0);
  auto k_mins = [&](const auto* blocks) {
    for (int64_t i = 0; i < cols; ++i) {
      uint8_t sc = 0, m = 0;
      k4_get_scale_min(static_cast<int>((i % kQK_K) / 32), blocks[i / kQK_K].scales, &sc, &m);
      mins[static_cast<size_t>(i)] = std::fabs(fp16_to_fp32(blocks[i / kQK_K].dmin) * m);
    }
  };
  auto legacy_mins = [&](const auto* blocks) {
    for (int64_t i = 0; i < cols; ++i) mins[static_cast<size_t>(i)] = std::fabs(fp16_to_fp32(blocks[i / kQK].m));
  };
  if (type == DType::q4_k) k_mins(reinterpret_cast<const BlockQ4_K*>(wrow));
  if (type == DType::q5_k) k_mins(reinterpret_cast<const BlockQ5_K*>(wrow));
  if (type == DType::q2_k) {
    const auto* blocks = reinterpret_cast<const BlockQ2_K*>(wrow);
    for (int64_t i = 0; i < cols; ++i) {
      const BlockQ2_K& b = blocks[i / kQK_K];
      mins[static_cast<size_t>(i)] = std::fabs(fp16_to_fp32(b.dmin) * (b.scales[(i % kQK_K) / 16] >> 4));
    }
  }
  if (type == DType::q4_1) legacy_mins(reinterpret_cast<const BlockQ4_1*>(wrow));
  if (type == DType::q5_1) legacy_mins(reinterpret_cast<const BlockQ5_1*>(wrow));
  double mag = 0.0;
  for (int64_t i = 0; i < cols; ++i)
    mag += (std::fabs(w[static_cast<size_t>(i)]) + 2.0 * mins[static_cast<size_t>(i)]) *
           std::fabs(a[static_cast<size_t>(i)]);
  return mag;
}

struct Case {
  int64_t rows, cols, n_tok;
  Data data;
  float act_scale;
};

void check_gemm(const IsaKernels& isa, DType type, const Case& c, uint32_t seed, bool packed = false,
                bool relaxed = false) {
  SCOPED_TRACE(std::string(isa_name(isa.isa)) + " " + std::string(dtype_name(type)) + " rows " +
               std::to_string(c.rows) + " cols " + std::to_string(c.cols) + " tokens " + std::to_string(c.n_tok) +
               " data " + std::to_string(static_cast<int>(c.data)));
  const std::vector<uint8_t> w = make_weights(type, c.rows, c.cols, c.data, seed);
  WeightMatrix m{type, c.rows, c.cols, w.data(), dtype_row_bytes(type, c.cols)};
  m.relaxed = relaxed;
  const std::vector<float> x = test::normal_data(c.n_tok * c.cols, seed + 1, c.act_scale);
  std::vector<float> got(static_cast<size_t>(c.n_tok * c.rows)), want(got.size());
  ThreadPool pool(2);
  MatmulScratch scratch;
  WeightMatrix mp = m;
  PackedMatrix pm;
  if (packed) {  // the load-time layout: the packed copy alone must give the product
    pm = pack_matrix_with(isa, m, pool);
    ASSERT_NE(pm.data, nullptr);
    std::vector<uint8_t> garbage(w.size(), 0xa5);
    mp.data = garbage.data();  // must not be read
    mp.packed = pm.data.get();
    mp.packed_kernel = pm.kernel;
    matmul_with(isa, mp, x.data(), c.n_tok, got.data(), pool, scratch);
  } else {
    matmul_with(isa, m, x.data(), c.n_tok, got.data(), pool, scratch);
  }
  matmul_with(*isa_kernels(Isa::scalar), m, x.data(), c.n_tok, want.data(), pool, scratch);

  const DType act_type = traits_of(type).vec_dot_type;
  const bool k16 = type == DType::q6_k || type == DType::q3_k || type == DType::q2_k;
  const int64_t block = k16 ? 16 : is_float(type) ? 1 : 32;
  const double u = std::ldexp(1.0, -24);
  // amx's F16 tiles drop the product of the two BF16 remainders (gemm_x86_amx_float.h): each at
  // most 2^-8 of its operand, so at most 2^-16 = 256u of |w a|, summed into the magnitude.
  // A relaxed F32 GEMM keeps 16 of each operand's 24 significant bits (within 2^-17) and drops
  // the remainders' product (2^-16): within 2^-15 = 512u of |w a|.
  double split_u = isa.isa == Isa::amx && type == DType::f16 ? 256.0 : 0.0;
  if (relaxed && isa.gemm(type, true) != isa.gemm(type)) split_u = 512.0;
  const double budget_u = 2.0 * static_cast<double>(c.cols / block) + 16.0 + split_u;
  double worst = 0.0;
  for (int64_t t = 0; t < c.n_tok; ++t) {
    const std::vector<float> xt(x.begin() + t * c.cols, x.begin() + (t + 1) * c.cols);
    const std::vector<float> a = test::dequantize(act_type, test::quantize(act_type, xt).data(), c.cols);
    for (int64_t r = 0; r < c.rows; ++r) {
      const double mag = magnitude(type, m.row(r), a, c.cols);
      const size_t i = static_cast<size_t>(t * c.rows + r);
      const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
      ASSERT_TRUE(std::isfinite(got[i])) << "row " << r << " token " << t;
      ASSERT_LE(err, budget_u * u * mag + 1e-30)
          << "row " << r << " token " << t << ": " << got[i] << " vs " << want[i];
      if (mag > 0) worst = std::max(worst, err / (u * mag));
    }
  }
  std::printf("[ info ] %s %s %lldx%lld x %lld tokens: worst %.1fu of budget %.0fu\n",
              std::string(isa_name(isa.isa)).c_str(), std::string(dtype_name(type)).c_str(),
              static_cast<long long>(c.rows), static_cast<long long>(c.cols), static_cast<long long>(c.n_tok), worst,
              budget_u);
}

TEST(Gemm, MatchesScalarOnTileEdgesAndAdversarialData) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with tile GEMM kernels on this CPU";
  const Case cases[] = {
      {37, 256, 4, Data::gaussian, 1.0f},        {16, 512, 16, Data::gaussian, 1.0f},
      {33, 768, 17, Data::random_bits, 3.0f},    {5, 256, 40, Data::zero_blocks, 1.0f},
      {48, 512, 33, Data::extreme_scales, 1.0f}, {70, 2560, 9, Data::gaussian, 100.0f},
      {13, 256, 2, Data::gaussian, 1.0f},        {9, 512, 3, Data::random_bits, 1.0f},
      {1, 256, 6, Data::gaussian, 1.0f},
  };
  uint32_t seed = 100;
  for (const IsaKernels* isa : isas)
    for (DType type : kGemmTypes) {
      if (isa->gemm(type) == nullptr) continue;  // which tables have which GEMMs: test_simd's IsaSelection
      for (const Case& c : cases) check_gemm(*isa, type, c, seed++);
    }
}

// Matrices packed at load (pack_matrix_with): every token count, one included, goes through the
// packed layout, and so does every row count (partial last groups).
TEST(Gemm, PackedWeightsMatchScalar) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with GEMM kernels on this CPU";
  const Case cases[] = {
      {37, 256, 1, Data::gaussian, 1.0f},     {16, 512, 2, Data::random_bits, 3.0f},
      {33, 768, 9, Data::zero_blocks, 1.0f},  {5, 256, 17, Data::extreme_scales, 1.0f},
      {70, 2560, 3, Data::gaussian, 100.0f},  {1, 256, 1, Data::gaussian, 1.0f},
      {21, 512, 40, Data::random_bits, 3.0f},  // two AMX tiles of 16 tokens and 8 past them
  };
  uint32_t seed = 900;
  int n_packed = 0;
  for (const IsaKernels* isa : isas)
    for (DType type : kGemmTypes) {
      const GemmKernel* g = isa->gemm(type);
      if (g == nullptr || g->pack_weights == nullptr) continue;
      ++n_packed;
      for (const Case& c : cases) check_gemm(*isa, type, c, seed++, /*packed=*/true);
    }
  EXPECT_GT(n_packed, 0);
}

// The packed product of one token equals the same token inside any batch, bit for bit.
TEST(Gemm, PackedBatchEqualsSolo) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with GEMM kernels on this CPU";
  ThreadPool pool(1);
  MatmulScratch scratch;
  for (const IsaKernels* isa : isas)
    for (DType type : {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q8_0, DType::q4_k, DType::q5_k,
                       DType::q6_k, DType::iq4_xs, DType::q3_k, DType::q2_k, DType::iq4_nl, DType::tq2_0}) {
      // 512 columns: two super-blocks; 768: three (an odd count ends the AMX pipelines of
      // accumulator pairs on the first of a pair).
      for (const int64_t cols : {int64_t{512}, int64_t{768}}) {
        SCOPED_TRACE(std::string(isa_name(isa->isa)) + " " + std::string(dtype_name(type)) + " " +
                     std::to_string(cols));
        const std::vector<uint8_t> w = make_weights(type, 40, cols, Data::gaussian, 5);
        WeightMatrix m{type, 40, cols, w.data(), dtype_row_bytes(type, cols)};
        const PackedMatrix pm = pack_matrix_with(*isa, m, pool);
        ASSERT_NE(pm.data, nullptr);
        m.packed = pm.data.get();
        m.packed_kernel = pm.kernel;
        // 33: past every ISA's packed_unpack_tokens, the batch runs the unpacked tiles (amx: two AMX
        // tiles of 16 tokens, the last token through the AVX-512 packed tile); 9 and 29: fewer
        // than a tile alone, and a large rest after a whole one.
        for (const int64_t n : {int64_t{33}, int64_t{9}, int64_t{29}}) {
          const std::vector<float> x = test::normal_data(n * cols, 6);
          std::vector<float> batch(static_cast<size_t>(n * 40)), solo(40);
          matmul_with(*isa, m, x.data(), n, batch.data(), pool, scratch);
          for (int64_t t = 0; t < n; ++t) {
            matmul_with(*isa, m, x.data() + t * cols, 1, solo.data(), pool, scratch);
            for (int64_t r = 0; r < 40; ++r)
              ASSERT_EQ(solo[static_cast<size_t>(r)], batch[static_cast<size_t>(t * 40 + r)]) << n << " tokens";
          }
        }
      }
    }
}

TEST(Gemm, LegacyRowsOfFewBlocks) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with tile GEMM kernels on this CPU";
  for (const IsaKernels* isa : isas)
    for (DType type :
         {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::f32, DType::f16})
      if (isa->gemm(type) != nullptr)
        for (int64_t cols : {32, 96, 224}) check_gemm(*isa, type, {19, cols, 5, Data::gaussian, 1.0f}, 7);
}

// The float types over any row length (a block of 1): widths that leave a tail inside an 8- or
// 16-element step and in amx's split K (F16: 3 elements per column, padded to 32), with token
// and row counts that leave partial AMX tiles and a lone row group.
TEST(Gemm, FloatRowsOfAnyLength) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with tile GEMM kernels on this CPU";
  for (const IsaKernels* isa : isas)
    for (DType type : {DType::f32, DType::f16, DType::bf16})
      if (isa->gemm(type) != nullptr)
        for (int64_t cols : {1, 5, 8, 13, 21, 43, 100}) {
          check_gemm(*isa, type, {19, cols, 35, Data::gaussian, 1.0f}, 11);
          check_gemm(*isa, type, {40, cols, 3, Data::random_bits, 1.0f}, 12);
        }
}

// Relaxed F32 matrices (the vision encoder's attention): the ISA's relaxed GEMM where it has one
// (amx), within its stated precision of the scalar product; elsewhere the exact F32 GEMM.
TEST(Gemm, RelaxedF32WithinItsPrecision) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with tile GEMM kernels on this CPU";
  int relaxed_isas = 0;
  for (const IsaKernels* isa : isas) {
    if (isa->gemm(DType::f32) == nullptr) continue;
    relaxed_isas += isa->gemm(DType::f32, true) != isa->gemm(DType::f32);
    for (const Case& c : {Case{19, 64, 35, Data::gaussian, 1.0f}, Case{64, 1024, 40, Data::gaussian, 30.0f},
                          Case{40, 13, 3, Data::random_bits, 1.0f}, Case{33, 768, 17, Data::extreme_scales, 1.0f}})
      check_gemm(*isa, DType::f32, c, 21, false, true);
  }
  std::printf("[ info ] %d ISA(s) with a relaxed F32 GEMM\n", relaxed_isas);
}

// Below kMinGemmTokens the vec_dot path runs: bit-identical to the same ISA's vec_dot.
TEST(Gemm, SmallBatchesTakeTheVecDotPath) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with tile GEMM kernels on this CPU";
  const std::vector<uint8_t> w = make_weights(DType::q4_0, 20, 256, Data::gaussian, 3);
  const WeightMatrix m{DType::q4_0, 20, 256, w.data(), dtype_row_bytes(DType::q4_0, 256)};
  const int64_t n = kMinGemmTokens - 1;
  const std::vector<float> x = test::normal_data(n * 256, 4);
  ThreadPool pool(1);
  MatmulScratch scratch;
  for (const IsaKernels* isa : isas) {
    std::vector<float> out(static_cast<size_t>(n * 20));
    matmul_with(*isa, m, x.data(), n, out.data(), pool, scratch);
    const ResolvedKernels k = kernel_or_scalar(*isa, DType::q4_0);
    std::vector<uint8_t> act(dtype_row_bytes(DType::q8_0, 256));
    for (int64_t t = 0; t < n; ++t) {
      k.quantize_activation(x.data() + t * 256, act.data(), 256);
      for (int64_t r = 0; r < 20; ++r)
        EXPECT_EQ(out[static_cast<size_t>(t * 20 + r)], k.vec_dot(256, m.row(r), act.data()));
    }
  }
}

// matmul_many (one layer's Q, K, V in one loop) gives each part exactly matmul's result, on
// every ISA (scalar included), packed and unpacked, across the runs of parts that share their
// activations (Q4_K and Q6_K share Q8_K; Q4_0 and Q8_0 share Q8_0; F32 takes floats), for one
// token (the vec_dot and packed paths) and batches (the GEMMs), over 1 and 2 threads.
TEST(Matmul, ManyEqualsOneAtATime) {
  std::vector<const IsaKernels*> isas = gemm_isas();
  isas.push_back(isa_kernels(Isa::scalar));
  struct Spec {
    DType type;
    int64_t rows;
    bool packed;
  };
  const Spec specs[] = {{DType::q4_k, 37, true}, {DType::q6_k, 20, true}, {DType::q4_0, 13, false},
                        {DType::q4_0, 50, true}, {DType::q8_0, 16, true}, {DType::f32, 9, false}};
  constexpr int64_t kCols = 512;
  for (const int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (const IsaKernels* isa : isas) {
      std::vector<std::vector<uint8_t>> data;
      std::vector<PackedMatrix> packs;
      std::vector<WeightMatrix> ms;
      uint32_t seed = 40;
      for (const Spec& sp : specs) {
        data.push_back(make_weights(sp.type, sp.rows, kCols, Data::gaussian, seed++));
        WeightMatrix m{sp.type, sp.rows, kCols, data.back().data(), dtype_row_bytes(sp.type, kCols)};
        packs.push_back(sp.packed ? pack_matrix_with(*isa, m, pool) : PackedMatrix{});
        m.packed = packs.back().data.get();
        m.packed_kernel = packs.back().kernel;
        ms.push_back(m);
      }
      for (const int64_t n : {1, 3, 12}) {
        SCOPED_TRACE(std::string(isa_name(isa->isa)) + " threads " + std::to_string(threads) + " tokens " +
                     std::to_string(n));
        const std::vector<float> x = test::normal_data(n * kCols, 77 + static_cast<uint32_t>(n));
        std::vector<std::vector<float>> got(ms.size());
        std::vector<MatmulPart> parts;
        for (size_t i = 0; i < ms.size(); ++i) {
          got[i].assign(static_cast<size_t>(n * ms[i].rows), -1.0f);
          parts.push_back({&ms[i], got[i].data()});
        }
        MatmulScratch scratch;
        matmul_many_with(*isa, parts, x.data(), n, pool, scratch);
        for (size_t i = 0; i < ms.size(); ++i) {
          std::vector<float> want(got[i].size());
          matmul_with(*isa, ms[i], x.data(), n, want.data(), pool, scratch);
          ASSERT_EQ(0, std::memcmp(want.data(), got[i].data(), want.size() * sizeof(float)))
              << "part " << i << " (" << dtype_name(ms[i].type) << ")";
        }
      }
    }
  }
}

// matmul reuses its scratch without clearing it (a call after a larger one finds that call's
// bytes): no kernel may read what its pack or tile setup did not write. Each GEMM, on plain and
// on load-time packed weights, gives the same bits with a fresh scratch and with one whose
// buffers are large and full of 0xff (NaN as floats and halves).
TEST(Matmul, ScratchContentsDoNotMatter) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "no ISA with GEMM kernels on this CPU";
  ThreadPool pool(2);
  constexpr int64_t kRowsW = 37;
  int checked = 0;
  for (const IsaKernels* isa : isas)
    for (DType type : kGemmTypes) {
      if (isa->gemm(type) == nullptr) continue;
      const int64_t kCols = is_float(type) ? 100 : 512;  // float rows: a padded tail too
      const std::vector<uint8_t> w = make_weights(type, kRowsW, kCols, Data::gaussian, 61);
      WeightMatrix m{type, kRowsW, kCols, w.data(), dtype_row_bytes(type, kCols)};
      const PackedMatrix pm = pack_matrix_with(*isa, m, pool);
      for (const bool packed : {false, true}) {
        if (packed && pm.data == nullptr) continue;
        WeightMatrix mm = m;
        if (packed) {
          mm.packed = pm.data.get();
          mm.packed_kernel = pm.kernel;
        }
        for (const int64_t n : {int64_t{5}, int64_t{19}, int64_t{40}}) {
          SCOPED_TRACE(std::string(isa_name(isa->isa)) + " " + std::string(dtype_name(type)) +
                       (packed ? " packed" : "") + " tokens " + std::to_string(n));
          const std::vector<float> x = test::normal_data(n * kCols, 62 + static_cast<uint32_t>(n));
          std::vector<float> fresh(static_cast<size_t>(n * kRowsW)), poisoned(fresh.size());
          MatmulScratch clean;
          matmul_with(*isa, mm, x.data(), n, fresh.data(), pool, clean);
          MatmulScratch dirty;
          dirty.activations.assign(size_t{1} << 20, 0xff);
          dirty.packed.assign(size_t{1} << 20, 0xff);
          dirty.tile.assign(4, std::vector<uint8_t>(size_t{1} << 20, 0xff));
          matmul_with(*isa, mm, x.data(), n, poisoned.data(), pool, dirty);
          ASSERT_EQ(0, std::memcmp(fresh.data(), poisoned.data(), fresh.size() * sizeof(float)));
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace edgelm::kernels
