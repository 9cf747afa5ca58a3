// NEON kernels against the scalar oracle, as a standalone program (no GoogleTest, no fmt), so
// that it cross-compiles with nothing but the aarch64 toolchain and runs under qemu-user
// (scripts/test-aarch64.sh). It links only the kernels sources and core/check.cpp, dtype.cpp.
//
// Checks, mirroring tests/kernels/test_simd.cpp (same inputs in spirit, same error budgets; see
// that file's header for how the budgets are derived):
//  - ISA selection on AArch64: neon is supported, best, has a table with a vec_dot for every
//    GEMM type and a quantizer for every activation type; types the table lacks (NVFP4)
//    fall back to the scalar rows.
//  - Activation quantizers (every row of the NEON table with a from_float: Q8_0, Q8_1, Q8_K,
//    F16, BF16): bytes identical to the scalar from_float on normal data of several scales and
//    lengths, rounding ties, zeros, sign ties, huge and tiny values; F16 and BF16 also on odd
//    lengths, NaN, infinities, their overflow and rounding boundaries and subnormals.
//  - vec_dot (every row of the NEON table with a vec_dot but the grid IQ ones: F32, F16, BF16,
//    Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K): within the per-type budget of the scalar vec_dot on
//    random-bit and quantized-Gaussian rows, all-zero blocks, extreme fp16 scales (65504, the
//    smallest normal; 16 for Q8_1's d, whose s must stay finite), 1, 3, 7 blocks and an
//    11008-element row; the K formats bit-identical.
//  - Multi-token GEMMs (gemm_neon.cpp: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F32, F16,
//    BF16; the grid IQ ones below), each variant the CPU has (baseline, dotprod, i8mm; one the CPU lacks prints SKIPPED
//    and runs nothing): matmul_with(variant table) against matmul_with(scalar table), which runs
//    the scalar vec_dot per (row, token), on row counts that are not multiples of the 4-row
//    group or the 16-row tile, token counts 1..17 (partial 4-token tiles), quantized Gaussians,
//    random bits, all-zero blocks, extreme fp16 scales (65504, the smallest normal; for the float
//    types huge, tiny and zero elements) and large activations; plus direct run() calls on row
//    ranges that start inside a group. Budget as tests/kernels/test_gemm.cpp: (2 nb + 16) u mag,
//    nb the sub-blocks of a row (16-element ones for Q6_K, single elements for the float types),
//    mag = sum_i (|w_i| + 2 |min_i|) |a_i| (min_i: the min part of Q4_1, Q5_1, Q4_K, Q5_K).
//  - Load-time packed GEMMs (gemm_neon_packed.h: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4,
//    Q4_K, Q5_K, Q6_K, F32, F16, BF16; gemm_neon_lowbit.h: Q2_K, Q3_K, TQ2_0, TQ1_0, IQ4_XS;
//    gemm_neon_iqgrid_packed.h: the 7 grid IQ formats), each variant the CPU has: bit-identical to the scalar matmul for 1..17 tokens, sizes, decode
//    reading the packed bytes (neon_packed_check.cpp, which says how).
//  - The low-bit formats (Q2_K, Q3_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4): vec_dot bit-identical
//    and the GEMMs within the same budget, in neon_lowbit_check.cpp (which says how); their
//    vec_dot rows also run the checks above.
//  - Attention (attention_neon.cpp) against the scalar kernel over paged f32 / f16 / q8_0
//    contexts, K as rows and transposed (neon_attention_check.cpp, which says how).
//  - The grid IQ formats (IQ3_S, IQ2_XS, IQ2_XXS, IQ3_XXS, IQ2_S, IQ1_S, IQ1_M): vec_dot
//    bit-identical to the scalar one and every GEMM variant within budget
//    (neon_iqgrid_check.cpp, which says how; the generic vec_dot loop here skips them).
// Usage: neon_selftest [--expect LEVEL,...]: each named GEMM level (base, dotprod, i8mm) must be
// supported by the CPU, so that a CPU model that should have a feature cannot skip it silently.
// Prints one line per failure, a summary per group, and "N passed, M failed, K skipped" last;
// exits 1 on any failure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/kernels_neon.h"
#include "kernels/matmul.h"
#include "kernels/quant_traits.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "../sample/logit_scan_check.h"
#include "budget_check.h"
#include "neon_attention_check.h"
#include "neon_iqgrid_check.h"
#include "neon_lowbit_check.h"
#include "neon_packed_check.h"
#include "vector_ops_check.h"

namespace edgelm::kernels {
namespace {

int g_passed = 0, g_failed = 0, g_skipped = 0;

void expect(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

std::string name_of(DType t) { return std::string(dtype_name(t)); }
const QuantTraits& traits_of(DType t) { return *quant_traits(t); }

std::vector<float> normal_data(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

std::vector<uint8_t> row_bytes(DType t, int64_t n) { return std::vector<uint8_t>(dtype_row_bytes(t, n), 0); }

std::vector<float> dequantize(DType t, const void* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  traits_of(t).to_float(p, out.data(), n);
  return out;
}

// ---- ISA selection ----------------------------------------------------------------------------

void test_selection() {
  expect(isa_supported(Isa::neon), "neon supported on aarch64");
  expect(best_isa() == Isa::neon, "best_isa() is neon");
  expect(!isa_supported(Isa::avx2) && !isa_supported(Isa::avxvnni) && !isa_supported(Isa::avx512),
         "no x86 ISAs on aarch64");
  const IsaKernels* k = isa_kernels(Isa::neon);
  expect(k != nullptr && k->isa == Isa::neon, "isa_kernels(neon) is the neon table");
  if (k == nullptr) return;
  for (size_t a = 0; a < k->rows.size(); ++a)
    for (size_t b = a + 1; b < k->rows.size(); ++b) expect(k->rows[a].type != k->rows[b].type, "one row per type");
  // A vec_dot for every weight type of the GEMMs, a quantizer for every activation type they use.
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q8_0,
                  DType::q4_k, DType::q5_k, DType::q6_k}) {
    expect(k->vec_dot(t) != nullptr && k->vec_dot(t) != traits_of(t).vec_dot, "neon vec_dot for " + name_of(t));
    const ResolvedKernels r = kernel_or_scalar(*k, t);
    const DType at = traits_of(t).vec_dot_type;
    expect(r.vec_dot == k->vec_dot(t) && r.vec_dot_type == at, name_of(t) + " resolves to the neon vec_dot");
    // F32 activations are copied: the scalar memcpy, no NEON row.
    expect(r.quantize_activation == (t == DType::f32 ? traits_of(at).from_float : k->from_float(at)),
           name_of(t) + " resolves to the neon quantizer of " + name_of(at));
  }
  for (DType t : {DType::q8_0, DType::q8_1, DType::q8_k, DType::f16, DType::bf16})
    expect(k->from_float(t) != nullptr && k->from_float(t) != traits_of(t).from_float,
           "neon from_float for " + name_of(t));
  for (DType t : {DType::nvfp4}) {  // no NEON vec_dot: scalar, with the NEON Q8_0 quantizer
    const ResolvedKernels r = kernel_or_scalar(*k, t);
    expect(k->vec_dot(t) == nullptr && r.vec_dot == traits_of(t).vec_dot &&
               r.quantize_activation == k->from_float(DType::q8_0),
           name_of(t) + " falls back to the scalar vec_dot");
  }
  expect(choose_isa("NEON").isa == Isa::neon && choose_isa("neon").warning.empty(), "EDGELM_ISA=neon honoured");
  expect(choose_isa("avx2").isa == Isa::neon && !choose_isa("avx2").warning.empty(), "EDGELM_ISA=avx2 falls back");
}

// ---- Activation quantizers --------------------------------------------------------------------

std::vector<std::pair<std::string, std::vector<float>>> quantizer_inputs() {
  std::vector<std::pair<std::string, std::vector<float>>> in;
  for (float sigma : {1e-3f, 1.0f, 1e3f})
    for (int64_t n : {256, 768, 1792, 11008})
      in.push_back({"normal sigma " + std::to_string(sigma) + " n " + std::to_string(n),
                    normal_data(n, static_cast<uint32_t>(n + sigma), sigma)});
  {  // rounding ties (d = 1 / iscale = 1 blocks) and the roundf pitfalls
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
  {  // zeros, signed zeros, lone nonzeros
    std::vector<float> x(768, 0.0f);
    for (size_t i = 256; i < 512; i += 2) x[i] = -0.0f;
    x[600] = 1e-3f;
    x[767] = -5.0f;
    in.push_back({"zeros", x});
  }
  {  // equal magnitudes of both signs: the first decides the sign of d (Q8_K)
    std::vector<float> x = normal_data(512, 3);
    x[10] = -40.0f;
    x[200] = 40.0f;
    x[256 + 3] = 60.0f;
    x[256 + 100] = -60.0f;
    in.push_back({"sign ties", x});
  }
  {  // huge, tiny, fp16-overflowing d, float subnormals
    std::vector<float> x = normal_data(1280, 4);
    for (size_t i = 0; i < 256; ++i) x[i] *= 1e30f;
    for (size_t i = 256; i < 512; ++i) x[i] *= 1e-30f;
    for (size_t i = 512; i < 768; ++i) x[i] *= (i % 32 < 16) ? 1e6f : 1e-6f;
    for (size_t i = 768; i < 1024; ++i) x[i] = (i % 16 == 0) ? x[i] * 1e-30f : std::ldexp(x[i], -140);
    for (size_t i = 1024; i < 1280; ++i) x[i] *= 1e-35f;
    in.push_back({"extremes", x});
  }
  return in;
}

// F16 and BF16 only (one-element blocks): odd lengths (the 4-lane loops' tails), random bit
// patterns (NaNs with any payload, subnormals, everything), and the conversions' special values
// at every lane position.
std::vector<std::pair<std::string, std::vector<float>>> float_quantizer_inputs() {
  std::vector<std::pair<std::string, std::vector<float>>> in;
  for (int64_t n : {1, 2, 3, 5, 7, 9, 33, 101})
    in.push_back({"normal n " + std::to_string(n), normal_data(n, static_cast<uint32_t>(7 * n), 10.0f)});
  {
    std::mt19937 rng(99);
    std::vector<float> x(4099);
    for (float& v : x) v = bits_to_float(static_cast<uint32_t>(rng()));
    in.push_back({"random bits", x});
  }
  const uint32_t specials[] = {
      0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0xffbfffff, 0x7fa00000,  // NaNs
      0x7f800000, 0xff800000, 0x00000000, 0x80000000, 0x7f7fffff, 0xff7fffff,              // inf, 0, max
      0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000, 0x47800000, 0x4f000000,              // F16 overflow
      0x38800000, 0x387fffff, 0x387fe000, 0x33800000, 0x33000000, 0x33000001, 0xb3000001,  // F16 subnormals
      0x33c00000, 0x34200000, 0x32ffffff, 0x00000001, 0x807fffff, 0x00400000,              // and float ones
      0x3f801000, 0x3f803000, 0x3f801001, 0xbf801000, 0x3f800fff,                          // F16 ties
      0x3f808000, 0x3f818000, 0x3f808001, 0xbf808000, 0x3f807fff, 0x7f7f8000, 0x7f7f7fff,  // BF16 ties
  };
  std::vector<float> x;
  for (int shift = 0; shift < 4; ++shift) {  // each special in every lane, and in the tail
    for (int k = 0; k < shift; ++k) x.push_back(0.5f);
    for (uint32_t b : specials) x.push_back(bits_to_float(b));
  }
  in.push_back({"specials", x});
  return in;
}

void test_quantizers() {
  const IsaKernels& k = *isa_kernels(Isa::neon);
  const auto inputs = quantizer_inputs();
  const auto float_inputs = float_quantizer_inputs();
  for (const IsaKernelRow& row : k.rows) {
    if (row.from_float == nullptr) continue;
    const DType type = row.type;
    std::vector<std::pair<std::string, std::vector<float>>> all = inputs;
    if (dtype_traits(type).block_size == 1) all.insert(all.end(), float_inputs.begin(), float_inputs.end());
    int cases = 0;
    for (const auto& [what, x] : all) {
      const auto n = static_cast<int64_t>(x.size());
      std::vector<uint8_t> want = row_bytes(type, n), got(want.size(), 0xa5);
      traits_of(type).from_float(x.data(), want.data(), n);
      row.from_float(x.data(), got.data(), n);
      const size_t bs = dtype_traits(type).type_size;
      size_t bad = want.size();
      for (size_t b = 0; b < want.size(); b += bs)
        if (std::memcmp(want.data() + b, got.data() + b, bs) != 0) {
          bad = b / bs;
          break;
        }
      expect(bad == want.size(), name_of(type) + " quantize " + what + ": block " + std::to_string(bad) + " differs");
      ++cases;
    }
    std::printf("[ info ] neon %s from_float: %d inputs compared byte for byte\n", name_of(type).c_str(), cases);
  }
}

// ---- vec_dot ----------------------------------------------------------------------------------

struct Fields {
  DType type;
  size_t d;
  std::vector<size_t> halves;
};
const std::vector<Fields> kFields = {
    {DType::q4_0, offsetof(BlockQ4_0, d), {offsetof(BlockQ4_0, d)}},
    {DType::q8_0, offsetof(BlockQ8_0, d), {offsetof(BlockQ8_0, d)}},
    {DType::q4_k, offsetof(BlockQ4_K, d), {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}},
    {DType::q5_k, offsetof(BlockQ5_K, d), {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}},
    {DType::q6_k, offsetof(BlockQ6_K, d), {offsetof(BlockQ6_K, d)}},
    {DType::q4_1, offsetof(BlockQ4_1, d), {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}},
    {DType::q5_0, offsetof(BlockQ5_0, d), {offsetof(BlockQ5_0, d)}},
    {DType::q5_1, offsetof(BlockQ5_1, d), {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}},
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
constexpr uint16_t kModerate = 0xffff;
constexpr uint16_t kHalfMax = 0x7bff;
constexpr uint16_t kHalfMinNormal = 0x0400;
uint16_t pick_half(std::mt19937& rng, uint16_t h) {
  std::uniform_real_distribution<float> mod(0.01f, 2.0f);
  return with_random_sign(rng, h == kModerate ? fp32_to_fp16(mod(rng)) : h);
}

std::vector<uint8_t> random_weights(DType type, int64_t n, std::mt19937& rng, uint16_t h) {
  std::vector<uint8_t> bytes = row_bytes(type, n);
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

std::vector<uint8_t> random_activations(DType weight, int64_t n, std::mt19937& rng, uint16_t h) {
  const DType type = traits_of(weight).vec_dot_type;
  std::vector<uint8_t> bytes = row_bytes(type, n);
  std::uniform_int_distribution<int> q(-127, 127);
  if (type == DType::q8_0) {
    auto* b = reinterpret_cast<BlockQ8_0*>(bytes.data());
    for (int64_t i = 0; i < n / kQK; ++i) {
      b[i].d = pick_half(rng, h);
      for (int8_t& v : b[i].qs) v = static_cast<int8_t>(q(rng));
    }
  } else if (type == DType::q8_1) {
    // s = d * sum(q) is stored in fp16: a d of 65504 would make it infinite, so "huge" is 16.
    auto* b = reinterpret_cast<BlockQ8_1*>(bytes.data());
    for (int64_t i = 0; i < n / kQK; ++i) {
      b[i].d = pick_half(rng, h == kHalfMax ? uint16_t{0x4c00} : h);
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

double budget_units(DType type, int64_t n) {
  if (is_float(type)) return 2.0 + (static_cast<double>(n) / 16 + 8) + 8;
  const int64_t nb = n / dtype_traits(type).block_size;
  const bool two_terms = type == DType::q4_1 || type == DType::q5_1 || is_k(type);
  const double k = static_cast<double>(two_terms ? 2 * nb : nb) + 4;
  return 2 * k + 8;
}

struct VecDotCase {
  DType type;
  VecDotFn simd;
  double worst_frac = 0.0;
  int cases = 0;

  void check(const std::vector<uint8_t>& x, const std::vector<uint8_t>& y, int64_t n, const std::string& what) {
    const QuantTraits& t = traits_of(type);
    const std::vector<float> xf = dequantize(type, x.data(), n);
    const std::vector<float> yf = dequantize(t.vec_dot_type, y.data(), n);
    std::vector<float> off(static_cast<size_t>(n), 0.0f);
    if (const Fields* f = fields_of(type)) {
      std::vector<uint8_t> x0 = x;
      const size_t bs = dtype_traits(type).type_size;
      for (size_t at = 0; at < x0.size(); at += bs) put_half(x0, at + f->d, 0);
      off = dequantize(type, x0.data(), n);
    }
    double mag = 0.0;
    for (int64_t i = 0; i < n; ++i)
      mag += (std::fabs(static_cast<double>(xf[i])) + 2.0 * std::fabs(off[i])) * std::fabs(static_cast<double>(yf[i]));
    const float want = t.vec_dot(n, x.data(), y.data());
    const float got = simd(n, x.data(), y.data());
    ++cases;
    const std::string label = name_of(type) + " vec_dot " + what + " (n " + std::to_string(n) + ")";
    if (!std::isfinite(want) || !std::isfinite(mag)) {
      expect(false, label + ": non-finite reference");
      return;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, ": got %.9g, want %.9g, magnitude %.6g", static_cast<double>(got),
                  static_cast<double>(want), mag);
    if (is_k(type)) expect(std::memcmp(&got, &want, sizeof(float)) == 0, label + " not bit-identical" + buf);
    const double diff = std::fabs(static_cast<double>(got) - want);
    const double tol = budget_units(type, n) * std::ldexp(1.0, -24) * mag;
    expect(diff <= tol, label + " over budget" + buf);
    if (tol > 0) worst_frac = std::max(worst_frac, diff / tol);
  }
};

void test_vec_dot() {
  const IsaKernels& k = *isa_kernels(Isa::neon);
  for (const IsaKernelRow& row : k.rows) {
    if (row.vec_dot == nullptr || is_neon_iqgrid_type(row.type)) continue;  // neon_iqgrid_check.cpp
    VecDotCase c{row.type, row.vec_dot};
    const DType type = row.type;
    const int64_t bs = dtype_traits(type).block_size;
    const std::vector<int64_t> shorts = is_float(type)
                                            ? std::vector<int64_t>{1, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129}
                                            : std::vector<int64_t>{bs, 3 * bs, 7 * bs, 2 * bs, 5 * bs};
    std::mt19937 rng(1234 + static_cast<uint32_t>(type));
    // Random bits / moderate scales, short rows.
    for (int rep = 0; rep < 8; ++rep)
      for (int64_t n : shorts)
        c.check(random_weights(type, n, rng, kModerate), random_activations(type, n, rng, kModerate), n, "random");
    // Quantized Gaussian weights (what real rows look like), with quantized activations.
    for (int64_t n : {bs * 8, int64_t{11008} / bs * bs, int64_t{4096}}) {
      if (n == 0 || n % bs != 0) continue;
      std::vector<uint8_t> x = row_bytes(type, n);
      if (traits_of(type).from_float != nullptr) traits_of(type).from_float(normal_data(n, 21).data(), x.data(), n);
      const DType at = traits_of(type).vec_dot_type;
      std::vector<uint8_t> y = row_bytes(at, n);
      const QuantTraits& ta = traits_of(at);
      ta.from_float(normal_data(n, 22).data(), y.data(), n);
      c.check(x, y, n, "quantized gaussian");
    }
    // The 11008-element row (Llama FFN width), random bits.
    if (11008 % bs == 0)
      c.check(random_weights(type, 11008, rng, kModerate), random_activations(type, 11008, rng, kModerate), 11008,
              "long random");
    // Extreme fp16 scales, on weights, activations, or both.
    for (uint16_t hx : {kHalfMax, kHalfMinNormal, kModerate})
      for (uint16_t hy : {kHalfMax, kHalfMinNormal, kModerate})
        for (int64_t n : {bs, 7 * bs})
          c.check(random_weights(type, n, rng, hx), random_activations(type, n, rng, hy), n,
                  "scales " + std::to_string(hx) + "/" + std::to_string(hy));
    // All-zero blocks between random ones, and all-zero rows.
    for (int64_t n : {3 * bs, 7 * bs}) {
      std::vector<uint8_t> x = random_weights(type, n, rng, kModerate);
      std::vector<uint8_t> y = random_activations(type, n, rng, kModerate);
      const size_t xb = dtype_traits(type).type_size;
      std::memset(x.data() + xb, 0, xb);  // block 1 of x zero
      const size_t yb = dtype_traits(traits_of(type).vec_dot_type).type_size;
      std::memset(y.data() + 2 * yb, 0, yb);  // block 2 of y zero
      c.check(x, y, n, "zero blocks");
      std::vector<uint8_t> zx(x.size(), 0), zy(y.size(), 0);
      c.check(zx, y, n, "zero x");
      c.check(x, zy, n, "zero y");
    }
    // Weight bit patterns at the extremes: all 0x00 / 0xff quant bytes with moderate scales.
    if (const Fields* f = fields_of(type)) {
      for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x7f}}) {
        const int64_t n = 3 * bs;
        std::vector<uint8_t> x = row_bytes(type, n);
        std::memset(x.data(), fill, x.size());
        const size_t xb = dtype_traits(type).type_size;
        for (size_t at = 0; at < x.size(); at += xb)
          for (size_t off : f->halves) put_half(x, at + off, pick_half(rng, kModerate));
        c.check(x, random_activations(type, n, rng, kModerate), n, "fill " + std::to_string(fill));
      }
    }
    std::printf("[ info ] neon %s vec_dot: worst |simd - scalar| = %.2f of the budget, %d cases\n",
                name_of(type).c_str(), c.worst_frac, c.cases);
  }
}

// ---- Multi-token GEMM -------------------------------------------------------------------------

enum class Data { gaussian, random_bits, zero_blocks, extreme_scales };

// A [rows, cols] weight matrix of `type` filled per `data` (as tests/kernels/test_gemm.cpp).
std::vector<uint8_t> gemm_weights(DType type, int64_t rows, int64_t cols, Data data, uint32_t seed) {
  const std::vector<float> f = normal_data(rows * cols, seed);
  const size_t rb = dtype_row_bytes(type, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) traits_of(type).from_float(f.data() + r * cols, w.data() + r * rb, cols);
  std::mt19937 rng(seed);
  if (is_float(type)) {  // no block fields: zeros, huge, tiny and large values among the elements
    // Extremes: F32 and BF16 (f32's exponent range) 1e30 / 1e-30; F16 values near its top and subnormals.
    const float huge = type == DType::f16 ? 2e3f : 1e30f, tiny = type == DType::f16 ? 1e-5f : 1e-30f;
    std::vector<float> g = f;
    for (size_t i = 0; i < g.size(); ++i) {
      if (data == Data::zero_blocks && i % 3 == 1) g[i] = 0.0f;
      if (data == Data::extreme_scales) g[i] *= (i % 2 == 0) ? huge : tiny;
      if (data == Data::random_bits) g[i] *= static_cast<float>(i % 7 + 1) * 50.0f;
    }
    for (int64_t r = 0; r < rows; ++r) traits_of(type).from_float(g.data() + r * cols, w.data() + r * rb, cols);
    return w;
  }
  const size_t bs = dtype_traits(type).type_size;
  // Offset of the fp16 super-block / block scale d: first for the legacy formats (then m for Q4_1,
  // Q5_1) and Q4_K, Q5_K (then dmin), last for Q6_K.
  const size_t d_at = type == DType::q6_k ? bs - 2 : 0;
  const bool second_half = type == DType::q4_1 || type == DType::q5_1 || type == DType::q4_k || type == DType::q5_k;
  for (size_t b = 0; b < w.size() / bs; ++b) {
    uint8_t* blk = w.data() + b * bs;
    switch (data) {
      case Data::gaussian: break;
      case Data::random_bits: {
        for (size_t i = 0; i < bs; ++i) blk[i] = static_cast<uint8_t>(rng());
        if (type == DType::q8_0)
          for (size_t i = 2; i < bs; ++i)
            if (blk[i] == 0x80) blk[i] = 0x81;  // -128 is outside Q8_0's range
        const uint16_t d = fp32_to_fp16(0.01f * static_cast<float>(rng() % 100 + 1));
        std::memcpy(blk + d_at, &d, 2);
        if (second_half) std::memcpy(blk + 2, &d, 2);  // m / dmin finite too
        break;
      }
      case Data::zero_blocks:
        if (b % 3 == 1) std::memset(blk, 0, bs);
        break;
      case Data::extreme_scales: {
        const uint16_t h = (b % 2 == 0) ? fp32_to_fp16(65504.0f) : uint16_t{0x0400};
        std::memcpy(blk + d_at, &h, 2);
        break;
      }
    }
  }
  return w;
}

// Per element of a weight row: |w_i| + 2 |min_i| (min_i: the min part of Q4_1, Q5_1 (m), Q4_K
// and Q5_K (dmin * m_j)).
std::vector<double> gemm_weight_mag(DType type, const uint8_t* row, int64_t cols) {
  const std::vector<float> w = dequantize(type, row, cols);
  std::vector<double> m(static_cast<size_t>(cols));
  auto k_min = [](const auto* blocks, int64_t i) {
    const auto& b = blocks[i / kQK_K];
    uint8_t sc = 0, mq = 0;
    k4_get_scale_min(static_cast<int>((i % kQK_K) / 32), b.scales, &sc, &mq);
    return std::fabs(static_cast<double>(fp16_to_fp32(b.dmin)) * mq);
  };
  auto legacy_min = [](const auto* blocks, int64_t i) {
    return std::fabs(static_cast<double>(fp16_to_fp32(blocks[i / kQK].m)));
  };
  for (int64_t i = 0; i < cols; ++i) {
    double mn = 0.0;
    if (type == DType::q4_k) mn = k_min(reinterpret_cast<const BlockQ4_K*>(row), i);
    if (type == DType::q5_k) mn = k_min(reinterpret_cast<const BlockQ5_K*>(row), i);
    if (type == DType::q4_1) mn = legacy_min(reinterpret_cast<const BlockQ4_1*>(row), i);
    if (type == DType::q5_1) mn = legacy_min(reinterpret_cast<const BlockQ5_1*>(row), i);
    m[static_cast<size_t>(i)] = std::fabs(static_cast<double>(w[static_cast<size_t>(i)])) + 2.0 * mn;
  }
  return m;
}

struct GemmCase {
  int64_t rows, cols, n_tok;
  Data data;
  float act_scale;
};

struct GemmStats {
  double worst = 0.0;  // of the budget
  int cases = 0;
};

// got: [n_tok, ldo] rows [r0, r1) against the scalar matmul `want` of the same layout.
void gemm_compare(DType type, const std::vector<uint8_t>& w, const std::vector<float>& x, const GemmCase& c,
                  const std::vector<float>& got, const std::vector<float>& want, int64_t r0, int64_t r1,
                  const std::string& label, GemmStats& st) {
  const DType at = traits_of(type).vec_dot_type;
  const size_t rb = dtype_row_bytes(type, c.cols);
  const int64_t block = type == DType::q6_k ? 16 : is_float(type) ? 1 : 32;
  const double budget_u = 2.0 * static_cast<double>(c.cols / block) + 16.0;
  std::vector<std::vector<double>> wmag;
  for (int64_t r = r0; r < r1; ++r) wmag.push_back(gemm_weight_mag(type, w.data() + r * rb, c.cols));
  BudgetCheck bc;
  for (int64_t t = 0; t < c.n_tok; ++t) {
    std::vector<uint8_t> q(dtype_row_bytes(at, c.cols));
    traits_of(at).from_float(x.data() + t * c.cols, q.data(), c.cols);
    const std::vector<float> a = dequantize(at, q.data(), c.cols);
    for (int64_t r = r0; r < r1; ++r) {
      double mag = 0.0;
      for (int64_t i = 0; i < c.cols; ++i)
        mag += wmag[static_cast<size_t>(r - r0)][static_cast<size_t>(i)] * std::fabs(a[static_cast<size_t>(i)]);
      const size_t i = static_cast<size_t>(t * c.rows + r);
      bc.add(got[i], want[i], budget_u * std::ldexp(1.0, -24) * mag + 1e-30, r, t);
    }
  }
  expect(bc.first_bad.empty(), label + bc.first_bad);
  st.worst = std::max(st.worst, bc.worst);
  ++st.cases;
}

std::string gemm_label(const char* level, DType type, const GemmCase& c) {
  return std::string("neon ") + level + " " + name_of(type) + " gemm " + std::to_string(c.rows) + "x" +
         std::to_string(c.cols) + " x " + std::to_string(c.n_tok) + " tokens data " +
         std::to_string(static_cast<int>(c.data));
}

void check_gemm_case(const IsaKernels& k, const char* level, DType type, const GemmCase& c, uint32_t seed,
                     ThreadPool& pool, GemmStats& st) {
  const std::vector<uint8_t> w = gemm_weights(type, c.rows, c.cols, c.data, seed);
  const WeightMatrix m{type, c.rows, c.cols, w.data(), dtype_row_bytes(type, c.cols)};
  const std::vector<float> x = normal_data(c.n_tok * c.cols, seed + 1, c.act_scale);
  std::vector<float> got(static_cast<size_t>(c.n_tok * c.rows), -1.0f), want(got.size());
  MatmulScratch scratch;
  matmul_with(k, m, x.data(), c.n_tok, got.data(), pool, scratch);
  matmul_with(*isa_kernels(Isa::scalar), m, x.data(), c.n_tok, want.data(), pool, scratch);
  gemm_compare(type, w, x, c, got, want, 0, c.rows, gemm_label(level, type, c), st);
}

// run() called directly on [r0, r1) (starting inside a 4-row group): those rows, and no others,
// are written.
void check_gemm_range(const IsaKernels& k, const char* level, DType type, int64_t r0, int64_t r1, GemmStats& st) {
  const GemmCase c{29, 512, 7, Data::gaussian, 1.0f};
  const GemmKernel* g = k.gemm(type);
  const std::vector<uint8_t> w = gemm_weights(type, c.rows, c.cols, c.data, 77);
  const size_t rb = dtype_row_bytes(type, c.cols);
  const std::vector<float> x = normal_data(c.n_tok * c.cols, 78);
  const DType at = traits_of(type).vec_dot_type;
  const size_t ab = dtype_row_bytes(at, c.cols);
  std::vector<uint8_t> act(ab * static_cast<size_t>(c.n_tok));
  for (int64_t t = 0; t < c.n_tok; ++t) traits_of(at).from_float(x.data() + t * c.cols, act.data() + t * ab, c.cols);
  std::vector<uint8_t> packed(g->packed_bytes(c.cols, c.n_tok)), scratch(g->scratch_bytes(c.cols) + 64);
  g->pack(act.data(), ab, c.cols, c.n_tok, packed.data());
  const float kSentinel = 12345.0f;
  std::vector<float> got(static_cast<size_t>(c.n_tok * c.rows), kSentinel), want(got.size());
  auto* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  g->run(GemmWeights{w.data(), rb, c.rows, c.cols}, packed.data(), c.n_tok, r0, r1, got.data(), c.rows, s);
  for (int64_t t = 0; t < c.n_tok; ++t)
    for (int64_t r = 0; r < c.rows; ++r)
      want[static_cast<size_t>(t * c.rows + r)] =
          traits_of(type).vec_dot(c.cols, w.data() + r * rb, act.data() + t * ab);
  bool untouched = true;
  for (int64_t t = 0; t < c.n_tok; ++t)
    for (int64_t r = 0; r < c.rows; ++r)
      if ((r < r0 || r >= r1) && got[static_cast<size_t>(t * c.rows + r)] != kSentinel) untouched = false;
  const std::string label =
      gemm_label(level, type, c) + " run rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ")";
  expect(untouched, label + ": wrote outside its row range");
  gemm_compare(type, w, x, c, got, want, r0, r1, label, st);
}

void test_gemm(const std::vector<std::string>& expected) {
  using neon::NeonLevel;
  const struct {
    NeonLevel level;
    const char* name;
  } levels[] = {{NeonLevel::base, "base"}, {NeonLevel::dotprod, "dotprod"}, {NeonLevel::i8mm, "i8mm"}};
  const DType types[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q4_k,
                         DType::q5_k, DType::q6_k, DType::f32,  DType::f16,  DType::bf16};
  ThreadPool pool(2);
  // The active table carries the most capable supported variant.
  const IsaKernels* best = nullptr;
  for (const auto& l : levels)
    if (const IsaKernels* k = neon::neon_kernels(l.level)) best = k;
  expect(best != nullptr && isa_kernels(Isa::neon) == best, "isa_kernels(neon) has the most capable GEMM variant");
  for (const auto& l : levels) {
    const bool want = std::find(expected.begin(), expected.end(), l.name) != expected.end();
    const IsaKernels* k = neon::neon_kernels(l.level);
    expect(k != nullptr || !want, std::string("this CPU should support NEON GEMM level ") + l.name);
    if (k == nullptr) {
      std::printf("[ SKIPPED ] neon %s gemm: the CPU lacks %s (hwcaps)\n", l.name, l.name);
      ++g_skipped;
      continue;
    }
    // These types, the low-bit ones of neon_lowbit_check.cpp and the grid IQ ones (neon_iqgrid_check.cpp).
    expect(k->gemms.size() == std::size(types) + 7 + kNeonIqGridGemms,
           std::string("neon ") + l.name + " has a GEMM per type");
    for (DType type : types) {
      const GemmKernel* g = k->gemm(type);
      expect(g != nullptr, std::string("neon ") + l.name + " gemm for " + name_of(type));
      if (g == nullptr) continue;
      const int64_t bs = is_float(type) ? 1 : dtype_traits(type).block_size;
      const int64_t cols = bs == kQK_K ? 512 : is_float(type) ? 257 : 256;  // float types: a 1-column tail
      GemmStats st;
      uint32_t seed = 500 + 31 * static_cast<uint32_t>(type);
      for (int64_t n_tok = 1; n_tok <= 17; ++n_tok)
        check_gemm_case(*k, l.name, type, {n_tok % 2 ? 37 : 22, cols, n_tok, Data::gaussian, 1.0f}, seed++, pool, st);
      const GemmCase more[] = {
          {13, 3 * cols, 5, Data::random_bits, 3.0f},
          {33, cols, 17, Data::random_bits, 1.0f},
          {7, 3 * cols, 6, Data::zero_blocks, 1.0f},
          {19, 2 * cols, 9, Data::extreme_scales, 1.0f},
          {5, cols, 3, Data::extreme_scales, 100.0f},
          {1, cols, 4, Data::gaussian, 1.0f},
          {3, 11264, 2, Data::gaussian, 1.0f},
          {50, 2 * cols, 16, Data::gaussian, 1e3f},
          {9, bs == 1 ? 7 : bs, 11, Data::random_bits, 1.0f},
          {71, 4096 / bs * bs, 8, Data::gaussian, 1.0f},
      };
      for (const GemmCase& c : more) check_gemm_case(*k, l.name, type, c, seed++, pool, st);
      check_gemm_range(*k, l.name, type, 5, 23, st);
      check_gemm_range(*k, l.name, type, 16, 29, st);
      std::printf("[ info ] neon %s %s gemm: worst |gemm - scalar| = %.2f of the budget, %d cases\n", l.name,
                  name_of(type).c_str(), st.worst, st.cases);
    }
  }
}

}  // namespace
}  // namespace edgelm::kernels

int main(int argc, char** argv) {
  using namespace edgelm::kernels;
  std::vector<std::string> expected;  // --expect base,dotprod,i8mm
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) != "--expect") continue;
    std::string list = argv[i + 1];
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      expected.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  }
  test_selection();
  if (isa_kernels(Isa::neon) != nullptr) {
    test_quantizers();
    test_vec_dot();
    test_gemm(expected);
    const CheckCounts packed = check_neon_packed();  // neon_packed_check.cpp
    g_passed += packed.passed;
    g_failed += packed.failed;
    const CheckCounts attention = check_neon_attention();  // neon_attention_check.cpp
    g_passed += attention.passed;
    g_failed += attention.failed;
    const CheckCounts lowbit = check_neon_lowbit();  // neon_lowbit_check.cpp
    g_passed += lowbit.passed;
    g_failed += lowbit.failed;
    const CheckCounts ops = check_vector_ops(Isa::neon);  // vector_ops_check.cpp
    g_passed += ops.passed;
    g_failed += ops.failed;
    const CheckCounts iqgrid = check_neon_iqgrid();  // neon_iqgrid_check.cpp
    g_passed += iqgrid.passed;
    g_failed += iqgrid.failed;
    const CheckCounts scan = edgelm::sample::check_logit_scan();  // tests/sample/logit_scan_check.cpp
    g_passed += scan.passed;
    g_failed += scan.failed;
  }
  std::printf("%d passed, %d failed, %d skipped\n", g_passed, g_failed, g_skipped);
  return g_failed == 0 ? 0 : 1;
}
