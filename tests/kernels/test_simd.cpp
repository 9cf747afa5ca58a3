// SIMD kernels (kernels/isa.h) against the scalar oracle of the traits table, on every ISA the
// running CPU supports:
//  - ISA selection: names, support, the tables, EDGELM_ISA parsing (choose_isa, called directly
//    with many values) and, in child processes (threadsafe death-test style re-executes this
//    binary, so the once-per-process choice starts fresh), that EDGELM_ISA really switches the
//    kernels matmul uses and that a bogus value warns and falls back.
//  - Activation quantizers (Q8_0, Q8_1, Q8_K): bytes identical to the scalar from_float on
//    random data, rounding ties, the classic roundf pitfalls, zeros, huge and tiny values.
//  - vec_dot: within a per-type rounding budget of the scalar vec_dot on random-bit and
//    quantized-Gaussian rows, all-zero blocks, extreme fp16 scales (65504, the smallest normal),
//    1, 3 and 7 blocks and a long row of 11008 elements; the K formats (and IQ4_XS, TQ2_0 and
//    the grid IQ formats, whose 256-element super-blocks are finished the same way: one exact
//    integer sum, one float expression) bit-identical. IQ4_NL counts as Q8_0.
//
// Error budgets. Write mag = sum_i (|x_i| + 2 |off_i|) |y_i| over the dequantized rows, where
// off_i is the min/offset part of x_i (formats with mins compute the scale part and the min part
// separately, and the two can cancel in x_i). Both kernels form every block's integer dot
// product exactly, so they differ only in how float terms, each a product of exact values
// rounded at most twice, are summed. With u = 2^-24, a chain of k roundings is within
// (k + O(k^2 u)) u of the exact value relative to mag (Higham's gamma_k), so
//    |simd - scalar| <= (k_scalar + k_simd + 8) u mag,
// with chain lengths counted per type:
//  - Q4_0, Q5_0, Q8_0 (one term per 32-block): k = nb + 4 each (nb blocks; the SIMD kernels
//    give each float lane at most nb terms, plus <= 4 levels of horizontal sum).
//    1 block: 18u = 1.1e-6; 7 blocks: 30u = 1.8e-6; 11008 elements (344 blocks): 704u = 4.2e-5.
//  - Q4_1, Q5_1 (scale term + min term per block): k = 2 nb + 4 each: 11008 -> 1392u = 8.3e-5.
//  - Q4_K, Q5_K, Q6_K: budget as 2 nb + 4, but these kernels are in fact bit-identical to the
//    scalar ones (same integer sums, same float expression, same order) and are tested so.
//  - F32, F16, BF16: products are exact in double (scalar) and fused (SIMD; F16 and BF16
//    products are exact even in float); the scalar sums in double and rounds once (k = 2), the
//    SIMD kernels keep at least 16 lanes (k = n / 16 + 8): 11008 -> 706u = 4.2e-5; 100
//    elements -> 24u = 1.4e-6.
// These are worst-case bounds, so no input can fail on legitimate reassociation; the observed
// errors (printed per test) are 10 to 1000 times smaller. A wrong quant in a 32-block changes
// the result by ~1/32 of a block's magnitude, far above the budgets of the short rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/quant_traits.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_iq_grid.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "quant_test_util.h"

namespace edgelm::kernels {
namespace {

using test::traits_of;

std::string name_of(DType t) { return std::string(dtype_name(t)); }

const Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx, Isa::neon};

// The SIMD ISAs this CPU runs.
std::vector<Isa> simd_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas)
    if (isa != Isa::scalar && isa_supported(isa)) out.push_back(isa);
  return out;
}

// Types every SIMD table must cover: vec_dot and activation quantizers.
const DType kVecDotTypes[] = {DType::f32,  DType::f16,  DType::q4_0, DType::q4_1, DType::q5_0,
                              DType::q5_1, DType::q8_0, DType::q4_k, DType::q5_k, DType::q6_k};
const DType kActivationTypes[] = {DType::q8_0, DType::q8_1, DType::q8_k};
// The low-bit types the x86 tables cover too (avx512 and amx through avx2's rows); NEON covers
// kNeonLowBitTypes and the grid IQ ones (kNeonGridTypes), and falls back to the scalar rows for the
// others (NVFP4).
const DType kX86LowBitTypes[] = {DType::q2_k,    DType::q3_k,    DType::iq4_nl, DType::iq4_xs, DType::tq2_0,
                                 DType::mxfp4,   DType::iq3_s,   DType::iq2_xs, DType::iq2_xxs, DType::iq3_xxs,
                                 DType::iq2_s,   DType::iq1_s,   DType::iq1_m};
const DType kNeonLowBitTypes[] = {DType::q2_k,  DType::q3_k,  DType::iq4_nl, DType::iq4_xs,
                                  DType::tq1_0, DType::tq2_0, DType::mxfp4};
const DType kNeonGridTypes[] = {DType::iq3_s, DType::iq2_xs, DType::iq2_xxs, DType::iq3_xxs,
                                DType::iq2_s, DType::iq1_s,  DType::iq1_m};

// ---- ISA selection ----------------------------------------------------------------------------

TEST(IsaSelection, NamesSupportAndTables) {
  EXPECT_EQ(isa_name(Isa::scalar), "scalar");
  EXPECT_EQ(isa_name(Isa::avx2), "avx2");
  EXPECT_EQ(isa_name(Isa::avxvnni), "avxvnni");
  EXPECT_EQ(isa_name(Isa::avx512), "avx512");
  EXPECT_EQ(isa_name(Isa::amx), "amx");
  EXPECT_EQ(isa_name(Isa::neon), "neon");
  EXPECT_TRUE(isa_supported(Isa::scalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  for (Isa isa : kAllIsas) {
    SCOPED_TRACE(std::string(isa_name(isa)));
    const IsaKernels* k = isa_kernels(isa);
    EXPECT_EQ(k != nullptr, isa_supported(isa));
    if (k == nullptr) continue;
    EXPECT_EQ(k->isa, isa);
    // One row per type.
    for (size_t a = 0; a < k->rows.size(); ++a)
      for (size_t b = a + 1; b < k->rows.size(); ++b) EXPECT_NE(k->rows[a].type, k->rows[b].type);
    // The x86 and NEON tables cover every one of these types (others fall back to scalar).
    if (isa != Isa::scalar) {
      for (DType t : kVecDotTypes) EXPECT_NE(k->vec_dot(t), nullptr) << name_of(t);
      for (DType t : kActivationTypes) EXPECT_NE(k->from_float(t), nullptr) << name_of(t);
    }
    if (isa != Isa::scalar && isa != Isa::neon) {
      for (DType t : kX86LowBitTypes) EXPECT_NE(k->vec_dot(t), nullptr) << name_of(t);
    }
    if (isa == Isa::neon) {
      for (DType t : kNeonLowBitTypes) EXPECT_NE(k->vec_dot(t), nullptr) << name_of(t);
      for (DType t : kNeonGridTypes) EXPECT_NE(k->vec_dot(t), nullptr) << name_of(t);
    }
  }
  // AVX-512 CPUs all have AVX2 + FMA + F16C; AMX builds on AVX-512 and shares its vec_dot table.
  if (isa_supported(Isa::avx512)) {
    EXPECT_TRUE(isa_supported(Isa::avx2));
  }
  // AVX-VNNI builds on AVX2 and shares its vec_dot table; its GEMMs are its own.
  if (isa_supported(Isa::avxvnni)) {
    EXPECT_TRUE(isa_supported(Isa::avx2));
    EXPECT_EQ(isa_kernels(Isa::avxvnni)->rows.data(), isa_kernels(Isa::avx2)->rows.data());
    EXPECT_NE(isa_kernels(Isa::avxvnni)->gemms.data(), isa_kernels(Isa::avx2)->gemms.data());
  }
  if (isa_supported(Isa::amx)) {
    EXPECT_TRUE(isa_supported(Isa::avx512));
    EXPECT_EQ(isa_kernels(Isa::amx)->rows.data(), isa_kernels(Isa::avx512)->rows.data());
    for (DType t : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) EXPECT_NE(isa_kernels(Isa::amx)->gemm(t), nullptr);
  }
  // The scalar table is the oracle and has no GEMMs; every x86 SIMD table has one per type it
  // multiplies (AVX2 GEMMs for avx2 and avx512; AMX tiles where AMX has them, AVX2 elsewhere).
  if (isa_supported(Isa::scalar)) EXPECT_TRUE(isa_kernels(Isa::scalar)->gemms.empty());
  for (Isa isa : {Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx}) {
    if (!isa_supported(isa)) continue;
    for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q4_k, DType::q5_k,
                    DType::q6_k, DType::f32, DType::f16, DType::bf16, DType::q2_k, DType::q3_k, DType::iq4_nl,
                    DType::iq4_xs, DType::iq3_s, DType::iq2_xs, DType::iq2_xxs, DType::iq2_s, DType::iq3_xxs,
                    DType::iq1_s, DType::iq1_m})
      EXPECT_NE(isa_kernels(isa)->gemm(t), nullptr) << isa_name(isa) << " " << dtype_name(t);
  }
#if defined(__x86_64__)
  EXPECT_FALSE(isa_supported(Isa::neon));
#endif
  std::printf("[ info ] supported:");
  for (Isa isa : kAllIsas)
    if (isa_supported(isa)) std::printf(" %s", std::string(isa_name(isa)).c_str());
  std::printf("; best: %s\n", std::string(isa_name(best_isa())).c_str());
}

TEST(IsaSelection, ScalarTableIsTheTraitsTable) {
  const IsaKernels* k = isa_kernels(Isa::scalar);
  ASSERT_NE(k, nullptr);
  for (DType t :
       {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q8_1, DType::q2_k, DType::q6_k, DType::q8_k}) {
    const QuantTraits& tr = traits_of(t);
    EXPECT_EQ(k->vec_dot(t), tr.vec_dot) << name_of(t);
    EXPECT_EQ(k->from_float(t), tr.from_float) << name_of(t);
  }
  // Every weight type has a scalar row now (the grid IQ types too); the integer tensor types do not.
  EXPECT_EQ(k->vec_dot(DType::iq2_xxs), traits_of(DType::iq2_xxs).vec_dot);
  EXPECT_EQ(k->find(DType::i32), nullptr);
}

TEST(IsaSelection, KernelOrScalarFallsBackPerRole) {
  for (Isa isa : simd_isas()) {
    const IsaKernels& k = *isa_kernels(isa);
    // Accelerated weight type: both roles from the ISA.
    ResolvedKernels r = kernel_or_scalar(k, DType::q4_0);
    EXPECT_EQ(r.vec_dot, k.vec_dot(DType::q4_0));
    EXPECT_EQ(r.quantize_activation, k.from_float(DType::q8_0));
    EXPECT_EQ(r.vec_dot_type, DType::q8_0);
    // A weight type without a SIMD vec_dot on this ISA (NVFP4): the scalar one, with the ISA's
    // quantizer for its activations where it has one.
    const DType plain = DType::nvfp4;
    ASSERT_EQ(k.vec_dot(plain), nullptr);
    r = kernel_or_scalar(k, plain);
    EXPECT_EQ(r.vec_dot, traits_of(plain).vec_dot);
    const DType act = traits_of(plain).vec_dot_type;
    EXPECT_EQ(r.quantize_activation, k.from_float(act) != nullptr ? k.from_float(act) : traits_of(act).from_float);
    // BF16: both roles from every SIMD table.
    r = kernel_or_scalar(k, DType::bf16);
    EXPECT_NE(k.from_float(DType::bf16), nullptr);
    EXPECT_NE(k.vec_dot(DType::bf16), nullptr);
    EXPECT_EQ(r.quantize_activation, k.from_float(DType::bf16));
    EXPECT_EQ(r.vec_dot, k.vec_dot(DType::bf16));
  }
  EXPECT_EQ(kernel_or_scalar(*isa_kernels(Isa::scalar), DType::i32).vec_dot, nullptr);
}

TEST(IsaSelection, ChooseIsaFromTheEnvironmentValue) {
  const Isa best = best_isa();
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    const IsaChoice c = choose_isa(unset);
    EXPECT_EQ(c.isa, best);
    EXPECT_TRUE(c.warning.empty()) << c.warning;
  }
  const std::pair<const char*, Isa> names[] = {
      {"scalar", Isa::scalar}, {"Scalar", Isa::scalar},   {"avx2", Isa::avx2}, {"AVX2", Isa::avx2},
      {"avxvnni", Isa::avxvnni}, {"AVXVNNI", Isa::avxvnni}, {"avx512", Isa::avx512}, {"AvX512", Isa::avx512},
      {"amx", Isa::amx},       {"AMX", Isa::amx},         {"neon", Isa::neon}, {"NEON", Isa::neon}};
  for (const auto& [name, isa] : names) {
    SCOPED_TRACE(name);
    const IsaChoice c = choose_isa(name);
    if (isa_supported(isa)) {
      EXPECT_EQ(c.isa, isa);
      EXPECT_TRUE(c.warning.empty()) << c.warning;
    } else {
      EXPECT_EQ(c.isa, best);
      EXPECT_NE(c.warning.find("EDGELM_ISA=" + std::string(name) + " ignored"), std::string::npos) << c.warning;
      EXPECT_NE(c.warning.find("using " + std::string(isa_name(best))), std::string::npos) << c.warning;
      EXPECT_EQ(c.warning.find('\n'), std::string::npos) << "one line";
    }
  }
  for (const char* bogus : {"bogus", "avx", "avx-512", " avx2", "sse4"}) {
    const IsaChoice c = choose_isa(bogus);
    EXPECT_EQ(c.isa, best) << bogus;
    EXPECT_NE(c.warning.find("not one of scalar, avx2, avxvnni, avx512, amx, neon"), std::string::npos) << c.warning;
    EXPECT_EQ(c.warning.find('\n'), std::string::npos) << "one line";
  }
}

// ---- The environment in a fresh process -------------------------------------------------------

// A small matmul per weight type (two tokens: the vec_dot path), checked bit for bit against
// the vec_dot and quantizer of `expected`; also checks that another ISA's vec_dots (the scalar
// ones, or the best ISA's when `expected` is scalar) differ somewhere, so that a switch that
// silently did nothing cannot pass. Returns true on success (child side).
bool matmul_uses(Isa expected) {
  if (active_isa() != expected) return false;
  ThreadPool pool(1);
  MatmulScratch scratch;
  constexpr int64_t kRows = 16, kCols = 512, kTok = kMinGemmTokens - 1;  // the vec_dot path: bit-exact per ISA
  const std::vector<float> x = test::normal_data(kTok * kCols, 7);
  const Isa other = expected == Isa::scalar ? best_isa() : Isa::scalar;
  bool differs = false;
  for (DType type : {DType::f32, DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k}) {
    const std::vector<uint8_t> w = test::quantize(type, test::normal_data(kRows * kCols, 11));
    const WeightMatrix m{type, kRows, kCols, w.data(), dtype_row_bytes(type, kCols)};
    std::vector<float> out(kTok * kRows);
    matmul(m, x.data(), kTok, out.data(), pool, scratch);
    for (Isa isa : {expected, other}) {
      const ResolvedKernels k = kernel_or_scalar(*isa_kernels(isa), type);
      std::vector<uint8_t> act(dtype_row_bytes(k.vec_dot_type, kCols) * kTok);
      const size_t act_row = act.size() / kTok;
      for (int64_t t = 0; t < kTok; ++t) {
        if (k.vec_dot_type == DType::f32)
          std::memcpy(act.data() + t * act_row, x.data() + t * kCols, act_row);
        else
          k.quantize_activation(x.data() + t * kCols, act.data() + t * act_row, kCols);
      }
      for (int64_t t = 0; t < kTok; ++t) {
        for (int64_t r = 0; r < kRows; ++r) {
          const float want = k.vec_dot(kCols, m.row(r), act.data() + t * act_row);
          const bool same = std::memcmp(&want, &out[t * kRows + r], sizeof(float)) == 0;
          if (isa == expected && !same) {
            std::fprintf(stderr, "mismatch: %s row %lld tok %lld\n", name_of(type).c_str(), static_cast<long long>(r),
                         static_cast<long long>(t));
            return false;
          }
          if (isa != expected && !same) differs = true;
        }
      }
    }
  }
  return expected == other || differs;
}

// Child: set EDGELM_ISA, then report the chosen ISA on stderr and exit 0 when matmul used it.
[[noreturn]] void child_with_env(const char* value, Isa expected) {
  setenv("EDGELM_ISA", value, 1);
  const bool ok = matmul_uses(expected);
  std::fprintf(stderr, "isa=%s\n", std::string(isa_name(active_isa())).c_str());
  std::exit(ok ? 0 : 1);
}

TEST(IsaEnvironmentDeathTest, ForcedIsaIsWhatMatmulUses) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    const std::string name(isa_name(isa));
    // Anchored: nothing (no warning) before the child's report.
    EXPECT_EXIT(child_with_env(name.c_str(), isa), ::testing::ExitedWithCode(0), "^isa=" + name) << name;
  }
}

TEST(IsaEnvironmentDeathTest, BogusOrUnsupportedValueWarnsAndFallsBack) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string best(isa_name(best_isa()));
  EXPECT_EXIT(child_with_env("bogus", best_isa()), ::testing::ExitedWithCode(0),
              "EDGELM_ISA=bogus is not one of scalar, avx2, avxvnni, avx512, amx, neon; using " + best +
                  "\nisa=" + best);
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) continue;
    const std::string name(isa_name(isa));
    EXPECT_EXIT(child_with_env(name.c_str(), best_isa()), ::testing::ExitedWithCode(0),
                "EDGELM_ISA=" + name + " ignored .*; using " + best + "\nisa=" + best)
        << name;
  }
}

// ---- Activation quantizers: byte-identical ----------------------------------------------------

// Inputs that stress the quantizers' decisions, n a multiple of 256 (so of 32 too).
std::vector<std::pair<std::string, std::vector<float>>> quantizer_inputs() {
  std::vector<std::pair<std::string, std::vector<float>>> in;
  for (float sigma : {1e-3f, 1.0f, 1e3f})
    for (int64_t n : {256, 768, 1792, 11008})
      in.push_back({"normal sigma " + std::to_string(sigma) + " n " + std::to_string(n),
                    test::normal_data(n, static_cast<uint32_t>(n + sigma), sigma)});
  // Rounding ties: a block with amax 127 has d = 1, id = 1 (Q8_0/Q8_1) and a max of -127 gives
  // iscale 1 (Q8_K), so k + 0.5 hits the tie itself; 0.49999997 is where roundf(x) != trunc(x+0.5).
  {
    std::vector<float> x(512);
    for (size_t i = 0; i < x.size(); ++i) {
      const float k = static_cast<float>(static_cast<int>(i % 254) - 127);
      x[i] = (i % 32 == 0) ? -127.0f : (i % 3 == 0 ? k + 0.5f : (i % 3 == 1 ? k - 0.5f : k));
      if (x[i] > 127.0f || x[i] < -127.0f) x[i] = 0.0f;
    }
    for (size_t i = 5; i < x.size(); i += 37) x[i] = (i % 2) ? 0.49999997f : -0.49999997f;
    for (size_t i = 9; i < x.size(); i += 41) x[i] = (i % 2) ? 1.4999999f : -2.5f;
    in.push_back({"ties", x});
  }
  // Zeros: all, signed, and single nonzero elements.
  {
    std::vector<float> x(768, 0.0f);
    for (size_t i = 256; i < 512; i += 2) x[i] = -0.0f;
    x[600] = 1e-3f;
    x[767] = -5.0f;
    in.push_back({"zeros", x});
  }
  // Equal magnitudes of both signs: the first one decides the sign of d (Q8_K).
  {
    std::vector<float> x = test::normal_data(512, 3);
    x[10] = -40.0f;
    x[200] = 40.0f;
    x[256 + 3] = 60.0f;
    x[256 + 100] = -60.0f;
    in.push_back({"sign ties", x});
  }
  // Huge and tiny inputs; d overflowing fp16 (1e6 / 127) and subnormal in fp16; float
  // subnormals next to normal values, and blocks whose 1 / d is near the float maximum.
  // Not covered: blocks with absmax below ~127 * 2^-128, where 1 / d overflows and the scalar
  // reference converts inf or NaN to int8 (undefined behaviour, so there is nothing to match).
  {
    std::vector<float> x = test::normal_data(1280, 4);
    for (size_t i = 0; i < 256; ++i) x[i] *= 1e30f;
    for (size_t i = 256; i < 512; ++i) x[i] *= 1e-30f;
    for (size_t i = 512; i < 768; ++i) x[i] *= (i % 32 < 16) ? 1e6f : 1e-6f;
    for (size_t i = 768; i < 1024; ++i) x[i] = (i % 16 == 0) ? x[i] * 1e-30f : std::ldexp(x[i], -140);
    for (size_t i = 1024; i < 1280; ++i) x[i] *= 1e-35f;
    in.push_back({"extremes", x});
  }
  return in;
}

TEST(SimdQuantize, ActivationBytesIdenticalToScalar) {
  const auto inputs = quantizer_inputs();
  for (Isa isa : simd_isas()) {
    const IsaKernels& k = *isa_kernels(isa);
    for (DType type : kActivationTypes) {
      for (const auto& [what, x] : inputs) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " " + name_of(type) + " " + what);
        const auto n = static_cast<int64_t>(x.size());
        std::vector<uint8_t> want = test::row_bytes(type, n), got(want.size(), 0xa5);
        traits_of(type).from_float(x.data(), want.data(), n);
        k.from_float(type)(x.data(), got.data(), n);
        const size_t bs = dtype_traits(type).type_size;
        for (size_t b = 0; b < want.size(); b += bs) {
          if (std::memcmp(want.data() + b, got.data() + b, bs) != 0) {
            ADD_FAILURE() << "block " << b / bs << " differs";
            break;
          }
        }
      }
    }
  }
}

// F16 and BF16 activations (the rounding matmul applies for weights of those types): every
// SIMD quantizer gives the scalar one's bytes, NaN (either sign, any payload), infinities,
// overflow to infinity, subnormals and the ties of each format included, over a length that
// leaves a tail.
TEST(SimdQuantize, HalfActivationsIdenticalToScalar) {
  auto inputs = quantizer_inputs();
  std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                                std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffc12345u),
                                std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                65504.0f, 65519.0f, 65520.0f, -65536.0f, 1e-8f, 2.9802322e-8f, 2.9802326e-8f,
                                -5.9604645e-8f, 6.1035156e-5f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-11f,
                                1.0f + 0x1p-9f, 3e38f, -1e-40f, 0.0f, -0.0f};
  for (int i = 0; i < 4; ++i) special.push_back(std::ldexp(1.0f + 0x1p-12f * static_cast<float>(i), -20 - i));
  inputs.push_back({"special", special});
  for (Isa isa : simd_isas()) {
    const IsaKernels& k = *isa_kernels(isa);
    for (DType type : {DType::f16, DType::bf16}) {
      const FromFloatFn f = k.from_float(type);
      if (isa != Isa::neon) ASSERT_NE(f, nullptr) << isa_name(isa) << " " << name_of(type);
      if (f == nullptr) continue;
      for (const auto& [what, x0] : inputs) {
        for (const size_t drop : {size_t{0}, size_t{3}}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " " + name_of(type) + " " + what + " drop " + std::to_string(drop));
          const std::vector<float> x(x0.begin(), x0.end() - static_cast<std::ptrdiff_t>(std::min(drop, x0.size())));
          const auto n = static_cast<int64_t>(x.size());
          std::vector<uint16_t> want(x.size()), got(x.size() + 1, 0xa5a5);
          traits_of(type).from_float(x.data(), want.data(), n);
          f(x.data(), got.data(), n);
          EXPECT_EQ(got[x.size()], 0xa5a5) << "wrote past the row";
          for (size_t i = 0; i < x.size(); ++i)
            if (want[i] != got[i]) {
              ADD_FAILURE() << "element " << i << " (" << x[i] << "): " << got[i] << " != " << want[i];
              break;
            }
        }
      }
    }
  }
}

// ---- vec_dot against the scalar kernel --------------------------------------------------------

// The fp16 fields of a weight block: `d` multiplies the quants (zeroing it leaves the min or
// offset part of each value), `halves` lists all of them.
struct Fields {
  DType type;
  size_t d;
  std::vector<size_t> halves;
};

const std::vector<Fields> kFields = {
    {DType::q4_0, offsetof(BlockQ4_0, d), {offsetof(BlockQ4_0, d)}},
    {DType::q4_1, offsetof(BlockQ4_1, d), {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}},
    {DType::q5_0, offsetof(BlockQ5_0, d), {offsetof(BlockQ5_0, d)}},
    {DType::q5_1, offsetof(BlockQ5_1, d), {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}},
    {DType::q8_0, offsetof(BlockQ8_0, d), {offsetof(BlockQ8_0, d)}},
    {DType::q4_k, offsetof(BlockQ4_K, d), {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}},
    {DType::q5_k, offsetof(BlockQ5_K, d), {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}},
    {DType::q6_k, offsetof(BlockQ6_K, d), {offsetof(BlockQ6_K, d)}},
    {DType::q2_k, offsetof(BlockQ2_K, d), {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}},
    {DType::q3_k, offsetof(BlockQ3_K, d), {offsetof(BlockQ3_K, d)}},
    {DType::iq4_nl, offsetof(BlockIQ4_NL, d), {offsetof(BlockIQ4_NL, d)}},
    {DType::iq4_xs, offsetof(BlockIQ4_XS, d), {offsetof(BlockIQ4_XS, d)}},
    {DType::iq3_s, offsetof(BlockIQ3_S, d), {offsetof(BlockIQ3_S, d)}},
    {DType::iq2_xs, offsetof(BlockIQ2_XS, d), {offsetof(BlockIQ2_XS, d)}},
    {DType::iq2_xxs, offsetof(BlockIQ2_XXS, d), {offsetof(BlockIQ2_XXS, d)}},
    {DType::iq3_xxs, offsetof(BlockIQ3_XXS, d), {offsetof(BlockIQ3_XXS, d)}},
    {DType::iq2_s, offsetof(BlockIQ2_S, d), {offsetof(BlockIQ2_S, d)}},
    {DType::iq1_s, offsetof(BlockIQ1_S, d), {offsetof(BlockIQ1_S, d)}},
};

const Fields* fields_of(DType t) {
  for (const Fields& f : kFields)
    if (f.type == t) return &f;
  return nullptr;
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_k(DType t) { return dtype_traits(t).block_size == kQK_K; }

void put_half(std::vector<uint8_t>& bytes, size_t at, uint16_t h) { std::memcpy(bytes.data() + at, &h, 2); }
uint16_t with_random_sign(std::mt19937& rng, uint16_t h) { return static_cast<uint16_t>(h | ((rng() & 1) << 15)); }

constexpr uint16_t kModerate = 0xffff;  // "a random moderate fp16 value" below
constexpr uint16_t kHalfMax = 0x7bff;   // 65504
constexpr uint16_t kHalfMinNormal = 0x0400;

uint16_t pick_half(std::mt19937& rng, uint16_t h) {
  std::uniform_real_distribution<float> mod(0.01f, 2.0f);
  return with_random_sign(rng, h == kModerate ? fp32_to_fp16(mod(rng)) : h);
}

// Weight row: random quant bits (every bit pattern, e.g. Q8_0 -128 and Q6_K scale -128), fp16
// fields from pick_half; plain types: values of magnitude up to `h` (or N(0, 1)).
std::vector<uint8_t> random_weights(DType type, int64_t n, std::mt19937& rng, uint16_t h) {
  std::vector<uint8_t> bytes = test::row_bytes(type, n);
  if (type == DType::iq1_m) {  // its fp16 d is spread over the top nibbles of its 4 scale words
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    for (size_t at = 0; at < bytes.size(); at += sizeof(BlockIQ1_M)) {
      const uint16_t d = pick_half(rng, h);
      for (size_t k = 0; k < 4; ++k) {
        uint8_t& top = bytes[at + offsetof(BlockIQ1_M, scales) + 2 * k + 1];
        top = static_cast<uint8_t>((top & 0x0f) | (((d >> (4 * k)) & 0x0f) << 4));
      }
    }
    return bytes;
  }
  if (const Fields* f = fields_of(type)) {
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const size_t bs = dtype_traits(type).type_size;
    for (size_t at = 0; at < bytes.size(); at += bs)
      for (size_t off : f->halves) put_half(bytes, at + off, pick_half(rng, h));
    return bytes;
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x)
    v = h == kModerate ? normal(rng) : fp16_to_fp32(with_random_sign(rng, h)) * static_cast<float>(rng() % 101) / 100;
  traits_of(type).from_float(x.data(), bytes.data(), n);
  return bytes;
}

// Activation row of the type `weight` pairs with: quants in [-127, 127] with consistent sums
// (Q8_1 s, Q8_K bsums) and the scale `h` (fp16 bits; Q8_K takes fp16_to_fp32(h) as its float d);
// plain types: values of magnitude up to h.
std::vector<uint8_t> random_activations(DType weight, int64_t n, std::mt19937& rng, uint16_t h) {
  const DType type = traits_of(weight).vec_dot_type;
  std::vector<uint8_t> bytes = test::row_bytes(type, n);
  std::uniform_int_distribution<int> q(-127, 127);
  if (type == DType::q8_0) {
    auto* b = reinterpret_cast<BlockQ8_0*>(bytes.data());
    for (int64_t i = 0; i < n / kQK; ++i) {
      b[i].d = pick_half(rng, h);
      for (int8_t& v : b[i].qs) v = static_cast<int8_t>(q(rng));
    }
  } else if (type == DType::q8_1) {
    auto* b = reinterpret_cast<BlockQ8_1*>(bytes.data());
    for (int64_t i = 0; i < n / kQK; ++i) {
      b[i].d = pick_half(rng, h);
      int sum = 0;
      for (int8_t& v : b[i].qs) sum += v = static_cast<int8_t>(q(rng));
      b[i].s = fp32_to_fp16(fp16_to_fp32(b[i].d) * static_cast<float>(sum));
    }
  } else if (type == DType::q8_k) {
    auto* b = reinterpret_cast<BlockQ8_K*>(bytes.data());
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      b[i].d = fp16_to_fp32(pick_half(rng, h));
      for (int8_t& v : b[i].qs) v = static_cast<int8_t>(q(rng));
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
        b[i].bsums[g] = static_cast<int16_t>(sum);
      }
    }
  } else {
    return random_weights(type, n, rng, h);
  }
  return bytes;
}

// Chain lengths of the error budget (header comment).
double budget_units(DType type, int64_t n) {
  if (is_float(type)) return 2.0 + (static_cast<double>(n) / 16 + 8) + 8;
  const int64_t nb = n / dtype_traits(type).block_size;
  const bool two_terms = type == DType::q4_1 || type == DType::q5_1 || is_k(type);
  const double k = static_cast<double>(two_terms ? 2 * nb : nb) + 4;
  return 2 * k + 8;
}

struct SimdCase {
  Isa isa;
  DType type;
};

void PrintTo(const SimdCase& c, std::ostream* os) { *os << isa_name(c.isa) << " " << dtype_name(c.type); }

std::vector<SimdCase> simd_cases() {
  std::vector<SimdCase> out;
  for (Isa isa : simd_isas())
    for (const IsaKernelRow& row : isa_kernels(isa)->rows)
      if (row.vec_dot != nullptr) out.push_back({isa, row.type});
  return out;
}

class SimdVecDot : public ::testing::TestWithParam<SimdCase> {
 protected:
  void TearDown() override {
    if (cases_ == 0) return;
    std::printf("[ info ] %s %s: max |simd - scalar| / mag = %.2e (%.2f of the budget), %d cases\n",
                std::string(isa_name(GetParam().isa)).c_str(), name_of(GetParam().type).c_str(), worst_rel_,
                worst_frac_, cases_);
  }

  VecDotFn simd() const { return isa_kernels(GetParam().isa)->vec_dot(GetParam().type); }

  // Element counts for "1, 3, 7 blocks" (plain types: odd element counts around the SIMD widths).
  std::vector<int64_t> short_lengths() const {
    if (is_float(GetParam().type)) return {1, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129};
    const int64_t bs = dtype_traits(GetParam().type).block_size;
    return {bs, 3 * bs, 7 * bs, 2 * bs, 5 * bs};
  }

  void check(const std::vector<uint8_t>& x, const std::vector<uint8_t>& y, int64_t n, const std::string& what) {
    const DType type = GetParam().type;
    const QuantTraits& t = traits_of(type);
    const std::vector<float> xf = test::dequantize(type, x.data(), n);
    const std::vector<float> yf = test::dequantize(t.vec_dot_type, y.data(), n);
    std::vector<float> off(static_cast<size_t>(n), 0.0f);
    if (const Fields* f = fields_of(type)) {
      std::vector<uint8_t> x0 = x;
      const size_t bs = dtype_traits(type).type_size;
      for (size_t at = 0; at < x0.size(); at += bs) put_half(x0, at + f->d, 0);
      off = test::dequantize(type, x0.data(), n);
    }
    double mag = 0.0;
    for (int64_t i = 0; i < n; ++i)
      mag += (std::fabs(static_cast<double>(xf[i])) + 2.0 * std::fabs(off[i])) * std::fabs(static_cast<double>(yf[i]));
    const float want = t.vec_dot(n, x.data(), y.data());
    const float got = simd()(n, x.data(), y.data());
    ++cases_;
    ASSERT_TRUE(std::isfinite(want)) << what;
    ASSERT_TRUE(std::isfinite(mag)) << what;
    if (is_k(type)) {
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << what << ": got " << got << ", want " << want;
    }
    const double diff = std::fabs(static_cast<double>(got) - want);
    const double tol = budget_units(type, n) * std::ldexp(1.0, -24) * mag;
    EXPECT_LE(diff, tol) << what << ": got " << got << ", want " << want << ", magnitude " << mag;
    if (mag > 0) {
      worst_rel_ = std::max(worst_rel_, diff / mag);
      worst_frac_ = std::max(worst_frac_, diff / tol);
    } else {
      EXPECT_EQ(got, 0.0f) << what;
    }
  }

 private:
  double worst_rel_ = 0.0, worst_frac_ = 0.0;
  int cases_ = 0;
};

TEST_P(SimdVecDot, RandomBitsAndQuantizedGaussianRows) {
  const DType type = GetParam().type;
  const QuantTraits& t = traits_of(type);
  std::vector<int64_t> lengths = short_lengths();
  lengths.push_back(11008);
  for (int64_t n : lengths) {
    const std::string len = "n " + std::to_string(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    // Activations as matmul makes them: the scalar quantizer (identical bytes to the SIMD one).
    const std::vector<uint8_t> y = test::quantize(t.vec_dot_type, test::normal_data(n, static_cast<uint32_t>(n + 1)));
    check(random_weights(type, n, rng, kModerate), y, n, "random bits, " + len);
    check(random_weights(type, n, rng, kModerate), random_activations(type, n, rng, kModerate), n,
          "random bits both, " + len);
    if (t.from_float != nullptr)
      check(test::quantize(type, test::normal_data(n, static_cast<uint32_t>(n + 2), 0.05f)), y, n, "gaussian, " + len);
  }
}

TEST_P(SimdVecDot, AllZeroBlocks) {
  const DType type = GetParam().type;
  for (int64_t n : short_lengths()) {
    std::mt19937 rng(static_cast<uint32_t>(n + 5));
    const std::vector<uint8_t> zero_x = test::row_bytes(type, n);
    const std::vector<uint8_t> zero_y = test::row_bytes(traits_of(type).vec_dot_type, n);
    const std::vector<uint8_t> x = random_weights(type, n, rng, kModerate);
    const std::vector<uint8_t> y = random_activations(type, n, rng, kModerate);
    EXPECT_EQ(simd()(n, zero_x.data(), y.data()), 0.0f) << n;
    EXPECT_EQ(simd()(n, x.data(), zero_y.data()), 0.0f) << n;
    // Zero blocks (d = 0, quants 0) among random ones.
    std::vector<uint8_t> mixed = x;
    const size_t bs = dtype_traits(type).type_size;
    for (size_t at = 0; at < mixed.size(); at += 2 * bs) std::memset(mixed.data() + at, 0, bs);
    check(mixed, y, n, "every other block zero, n " + std::to_string(n));
  }
}

TEST_P(SimdVecDot, ExtremeScales) {
  const DType type = GetParam().type;
  const DType act = traits_of(type).vec_dot_type;
  struct Case {
    const char* what;
    uint16_t x, y;
  };
  // Q8_1 keeps s = d * sum(q) in fp16, so its d must stay far enough below 65504.
  const uint16_t y_huge = act == DType::q8_1 ? 0x4c00 /* 16 */ : kHalfMax;
  const Case cases[] = {
      {"huge x, huge y", kHalfMax, y_huge},
      {"huge x, min-normal y", kHalfMax, kHalfMinNormal},
      {"min-normal x, huge y", kHalfMinNormal, y_huge},
      {"min-normal x and y", kHalfMinNormal, kHalfMinNormal},
      {"near-max x, moderate y", 0x7bfe, kModerate},
      {"near-min-normal x, moderate y", 0x0401, kModerate},
  };
  std::vector<int64_t> lengths = short_lengths();
  lengths.push_back(11008);
  for (const Case& c : cases) {
    for (int64_t n : lengths) {
      std::mt19937 rng(static_cast<uint32_t>(n * 31));
      check(random_weights(type, n, rng, c.x), random_activations(type, n, rng, c.y), n,
            std::string(c.what) + ", n " + std::to_string(n));
    }
  }
}

TEST_P(SimdVecDot, RowLengthMustBeAMultipleOfTheBlockSize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int64_t bs = dtype_traits(GetParam().type).block_size;
  if (bs == 1) GTEST_SKIP() << "any length is valid";
  std::vector<uint8_t> buf(4096);
  EXPECT_DEATH((void)simd()(bs + 1, buf.data(), buf.data()), "multiple of the block size");
}

INSTANTIATE_TEST_SUITE_P(Simd, SimdVecDot, ::testing::ValuesIn(simd_cases()), [](const auto& info) {
  return std::string(isa_name(info.param.isa)) + "_" + name_of(info.param.type);
});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SimdVecDot);

TEST(SimdQuantizeDeathTest, RowLengthMustBeAMultipleOfTheBlockSize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> f(1024);
  std::vector<uint8_t> buf(4096);
  for (Isa isa : simd_isas()) {
    for (DType type : kActivationTypes) {
      const int64_t bs = dtype_traits(type).block_size;
      EXPECT_DEATH(isa_kernels(isa)->from_float(type)(f.data(), buf.data(), bs / 2), "multiple of the block size")
          << isa_name(isa) << " " << name_of(type);
    }
  }
}

}  // namespace
}  // namespace edgelm::kernels
