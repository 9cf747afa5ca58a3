// NEON kernels against the scalar oracle, as a standalone program (no GoogleTest, no fmt), so
// that it cross-compiles with nothing but the aarch64 toolchain and runs under qemu-user
// (scripts/test-aarch64.sh). It links only the kernels sources and core/check.cpp, dtype.cpp.
//
// Checks, mirroring tests/kernels/test_simd.cpp (same inputs in spirit, same error budgets; see
// that file's header for how the budgets are derived):
//  - ISA selection on AArch64: neon is supported, best, has a table; types the table lacks
//    fall back to the scalar rows.
//  - Activation quantizers (Q8_0, Q8_K): bytes identical to the scalar from_float on normal
//    data of several scales and lengths, rounding ties, zeros, sign ties, huge and tiny values.
//  - vec_dot (every row of the NEON table with a vec_dot): within the per-type budget of the
//    scalar vec_dot on random-bit and quantized-Gaussian rows, all-zero blocks, extreme fp16
//    scales (65504, the smallest normal), 1, 3, 7 blocks and an 11008-element row; the K
//    formats bit-identical.
// Prints one line per failure, a summary per group, and "N passed, M failed" last; exits 1 on
// any failure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/quant_traits.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {
namespace {

int g_passed = 0, g_failed = 0;

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
  expect(!isa_supported(Isa::avx2) && !isa_supported(Isa::avx512), "no x86 ISAs on aarch64");
  const IsaKernels* k = isa_kernels(Isa::neon);
  expect(k != nullptr && k->isa == Isa::neon, "isa_kernels(neon) is the neon table");
  if (k == nullptr) return;
  for (size_t a = 0; a < k->rows.size(); ++a)
    for (size_t b = a + 1; b < k->rows.size(); ++b) expect(k->rows[a].type != k->rows[b].type, "one row per type");
  for (DType t : {DType::f32, DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k})
    expect(k->vec_dot(t) != nullptr && k->vec_dot(t) != traits_of(t).vec_dot, "neon vec_dot for " + name_of(t));
  for (DType t : {DType::q8_0, DType::q8_k})
    expect(k->from_float(t) != nullptr && k->from_float(t) != traits_of(t).from_float,
           "neon from_float for " + name_of(t));
  ResolvedKernels r = kernel_or_scalar(*k, DType::q4_k);
  expect(r.vec_dot == k->vec_dot(DType::q4_k) && r.quantize_activation == k->from_float(DType::q8_k),
         "q4_k resolves to neon");
  r = kernel_or_scalar(*k, DType::q5_k);  // no NEON vec_dot: scalar, with the NEON Q8_K quantizer
  expect(r.vec_dot == traits_of(DType::q5_k).vec_dot && r.quantize_activation == k->from_float(DType::q8_k),
         "q5_k falls back to scalar vec_dot");
  r = kernel_or_scalar(*k, DType::q4_1);  // nothing: both scalar
  expect(r.vec_dot == traits_of(DType::q4_1).vec_dot && r.quantize_activation == traits_of(DType::q8_1).from_float,
         "q4_1 falls back to scalar");
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

void test_quantizers() {
  const IsaKernels& k = *isa_kernels(Isa::neon);
  const auto inputs = quantizer_inputs();
  for (DType type : {DType::q8_0, DType::q8_k}) {
    int cases = 0;
    for (const auto& [what, x] : inputs) {
      const auto n = static_cast<int64_t>(x.size());
      std::vector<uint8_t> want = row_bytes(type, n), got(want.size(), 0xa5);
      traits_of(type).from_float(x.data(), want.data(), n);
      k.from_float(type)(x.data(), got.data(), n);
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
bool is_float(DType t) { return t == DType::f32 || t == DType::f16; }
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
    if (row.vec_dot == nullptr) continue;
    VecDotCase c{row.type, row.vec_dot};
    const DType type = row.type;
    const int64_t bs = dtype_traits(type).block_size;
    const std::vector<int64_t> shorts = is_float(type) ? std::vector<int64_t>{1, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65,
                                                                               100, 129}
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

}  // namespace
}  // namespace edgelm::kernels

int main() {
  using namespace edgelm::kernels;
  test_selection();
  if (isa_kernels(Isa::neon) != nullptr) {
    test_quantizers();
    test_vec_dot();
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
