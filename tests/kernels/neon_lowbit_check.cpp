// See neon_lowbit_check.h.
#include "neon_lowbit_check.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
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
#include "kernels/quants_fp4.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "kernels/quants_ternary.h"
#include "budget_check.h"

namespace edgelm::kernels {
namespace {

CheckCounts g_counts;

void expect(bool ok, const std::string& what) {
  if (ok) {
    ++g_counts.passed;
  } else {
    ++g_counts.failed;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

// A low-bit type and where its block scales are: fp16 fields (halves) or MXFP4's E8M0 byte.
struct LowType {
  DType type;
  std::vector<size_t> halves;
  bool e8m0 = false;
};
const LowType kTypes[] = {
    {DType::q3_k, {offsetof(BlockQ3_K, d)}},     {DType::q2_k, {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}},
    {DType::iq4_xs, {offsetof(BlockIQ4_XS, d)}}, {DType::iq4_nl, {offsetof(BlockIQ4_NL, d)}},
    {DType::tq2_0, {offsetof(BlockTQ2_0, d)}},   {DType::mxfp4, {}, true},
    {DType::tq1_0, {offsetof(BlockTQ1_0, d)}},
};

std::string name_of(DType t) { return std::string(dtype_name(t)); }
const QuantTraits& traits_of(DType t) { return *quant_traits(t); }
size_t block_bytes(DType t) { return dtype_traits(t).type_size; }

std::vector<float> normal_data(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_row_bytes(t, static_cast<int64_t>(x.size())));
  traits_of(t).from_float(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const uint8_t* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  traits_of(t).to_float(p, out.data(), n);
  return out;
}

// Scale choices: moderate (random in [0.01, 2) with a random sign), the largest fp16, the
// smallest normal fp16 (MXFP4: e in [115, 140], 200, 1 (subnormal 2^-127)).
enum class Scale { moderate, huge, tiny };

void set_scales(const LowType& lt, uint8_t* blk, Scale s, std::mt19937& rng) {
  if (lt.e8m0) {
    blk[0] = s == Scale::moderate ? static_cast<uint8_t>(115 + rng() % 26) : s == Scale::huge ? 200 : 1;
    return;
  }
  for (size_t at : lt.halves) {
    std::uniform_real_distribution<float> mod(0.01f, 2.0f);
    uint16_t h = s == Scale::moderate ? fp32_to_fp16(mod(rng)) : s == Scale::huge ? uint16_t{0x7bff} : uint16_t{0x0400};
    h = static_cast<uint16_t>(h | ((rng() & 1) << 15));
    std::memcpy(blk + at, &h, 2);
  }
}

std::vector<uint8_t> random_weights(const LowType& lt, int64_t n, Scale s, std::mt19937& rng) {
  std::vector<uint8_t> w(dtype_row_bytes(lt.type, n));
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  for (size_t at = 0; at < w.size(); at += block_bytes(lt.type)) set_scales(lt, w.data() + at, s, rng);
  return w;
}

// Random activation quants in [-127, 127] with consistent Q8_K sums; d per `s` (fp16 values).
std::vector<uint8_t> random_activations(DType weight, int64_t n, Scale s, std::mt19937& rng) {
  const DType at = traits_of(weight).vec_dot_type;
  std::vector<uint8_t> bytes(dtype_row_bytes(at, n));
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> mod(0.01f, 2.0f);
  auto pick = [&] {
    const float v = s == Scale::moderate ? mod(rng) : s == Scale::huge ? 65504.0f : fp16_to_fp32(0x0400);
    return (rng() & 1) ? -v : v;
  };
  if (at == DType::q8_0) {
    auto* b = reinterpret_cast<BlockQ8_0*>(bytes.data());
    for (int64_t i = 0; i < n / kQK; ++i) {
      b[i].d = fp32_to_fp16(pick());
      for (int8_t& v : b[i].qs) v = static_cast<int8_t>(q(rng));
    }
  } else {
    auto* b = reinterpret_cast<BlockQ8_K*>(bytes.data());
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      b[i].d = pick();
      for (int8_t& v : b[i].qs) v = static_cast<int8_t>(q(rng));
      for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
        b[i].bsums[g] = static_cast<int16_t>(sum);
      }
    }
  }
  return bytes;
}

// ---- vec_dot ----------------------------------------------------------------------------------

// The vec_dot of `lt` in the table of `level` (every table has one; the dotprod and i8mm tables
// the dotprod variant, the base table the baseline one).
void check_vec_dot(const LowType& lt, neon::NeonLevel level, const char* level_name) {
  const IsaKernels& k = *neon::neon_kernels(level);
  const DType type = lt.type;
  const VecDotFn neon = k.vec_dot(type);
  const VecDotFn scalar = traits_of(type).vec_dot;
  const std::string tag = std::string(level_name) + " " + name_of(type);
  expect(neon != nullptr && neon != scalar, "neon vec_dot for " + tag);
  if (level != neon::NeonLevel::base)
    expect(neon != neon::neon_kernels(neon::NeonLevel::base)->vec_dot(type), tag + ": the dotprod vec_dot");
  const ResolvedKernels r = kernel_or_scalar(k, type);
  expect(r.vec_dot == neon && r.quantize_activation == k.from_float(traits_of(type).vec_dot_type),
         tag + " resolves to the neon vec_dot and quantizer");
  if (neon == nullptr) return;
  int cases = 0, bad = 0;
  auto check = [&](const std::vector<uint8_t>& x, const std::vector<uint8_t>& y, int64_t n, const std::string& what) {
    const float want = scalar(n, x.data(), y.data());
    const float got = neon(n, x.data(), y.data());
    ++cases;
    if (std::memcmp(&got, &want, sizeof got) != 0 && bad++ < 4) {
      char buf[120];
      std::snprintf(buf, sizeof buf, " (n %lld): got %.9g, want %.9g", static_cast<long long>(n),
                    static_cast<double>(got), static_cast<double>(want));
      expect(false, tag + " vec_dot " + what + " not bit-identical" + buf);
    } else {
      expect(std::memcmp(&got, &want, sizeof got) == 0, tag + " vec_dot " + what);
    }
  };
  const int64_t bs = dtype_traits(type).block_size;
  std::mt19937 rng(4321 + static_cast<uint32_t>(type));
  for (int rep = 0; rep < 6; ++rep)
    for (int64_t nb : {1, 3, 7, 2, 5})
      check(random_weights(lt, nb * bs, Scale::moderate, rng), random_activations(type, nb * bs, Scale::moderate, rng),
            nb * bs, "random bits");
  for (Scale sx : {Scale::moderate, Scale::huge, Scale::tiny})
    for (Scale sy : {Scale::moderate, Scale::huge, Scale::tiny})
      for (int64_t nb : {1, 7})
        check(random_weights(lt, nb * bs, sx, rng), random_activations(type, nb * bs, sy, rng), nb * bs,
              "scales " + std::to_string(static_cast<int>(sx)) + "/" + std::to_string(static_cast<int>(sy)));
  for (int64_t n : {bs, 3 * bs, 7 * bs, int64_t{4096}, int64_t{11008}}) {
    const DType at = traits_of(type).vec_dot_type;
    check(quantize(type, normal_data(n, 31 + static_cast<uint32_t>(n))),
          quantize(at, normal_data(n, 32 + static_cast<uint32_t>(n))), n, "quantized gaussian");
  }
  check(random_weights(lt, 11008, Scale::moderate, rng), random_activations(type, 11008, Scale::moderate, rng), 11008,
        "long random");
  for (int64_t n : {3 * bs, 7 * bs}) {
    std::vector<uint8_t> x = random_weights(lt, n, Scale::moderate, rng);
    std::vector<uint8_t> y = random_activations(type, n, Scale::moderate, rng);
    const size_t xb = block_bytes(type), yb = block_bytes(traits_of(type).vec_dot_type);
    std::memset(x.data() + xb, 0, xb);      // block 1 of x zero
    std::memset(y.data() + 2 * yb, 0, yb);  // block 2 of y zero
    check(x, y, n, "zero blocks");
    check(std::vector<uint8_t>(x.size(), 0), y, n, "zero x");
    check(x, std::vector<uint8_t>(y.size(), 0), n, "zero y");
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0xaa}, uint8_t{0x55}}) {
      std::vector<uint8_t> f(x.size(), fill);
      for (size_t at = 0; at < f.size(); at += xb) set_scales(lt, f.data() + at, Scale::moderate, rng);
      check(f, y, n, "fill " + std::to_string(fill));
    }
  }
  std::printf("[ info ] neon %s vec_dot: %d cases, %d not bit-identical\n", tag.c_str(), cases, bad);
}

// ---- GEMM -------------------------------------------------------------------------------------

enum class Data { gaussian, random_bits, zero_blocks, extreme_scales };

std::vector<uint8_t> gemm_weights(const LowType& lt, int64_t rows, int64_t cols, Data data, uint32_t seed) {
  const size_t rb = dtype_row_bytes(lt.type, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  const std::vector<float> f = normal_data(rows * cols, seed);
  for (int64_t r = 0; r < rows; ++r) traits_of(lt.type).from_float(f.data() + r * cols, w.data() + r * rb, cols);
  std::mt19937 rng(seed);
  const size_t bs = block_bytes(lt.type);
  for (size_t b = 0; b < w.size() / bs; ++b) {
    uint8_t* blk = w.data() + b * bs;
    switch (data) {
      case Data::gaussian: break;
      case Data::random_bits:
        for (size_t i = 0; i < bs; ++i) blk[i] = static_cast<uint8_t>(rng());
        set_scales(lt, blk, Scale::moderate, rng);
        break;
      case Data::zero_blocks:
        if (b % 3 == 1) std::memset(blk, 0, bs);
        break;
      case Data::extreme_scales: set_scales(lt, blk, b % 2 == 0 ? Scale::huge : Scale::tiny, rng); break;
    }
  }
  return w;
}

// sum_i (|w_i| + 2 |min_i|) |a_i| for one (row, token); min_i: Q2_K's dmin * (sc_j >> 4).
double magnitude(DType type, const uint8_t* wrow, const std::vector<float>& a, int64_t cols) {
  const std::vector<float> w = dequantize(type, wrow, cols);
  double mag = 0.0;
  for (int64_t i = 0; i < cols; ++i) {
    double mn = 0.0;
    if (type == DType::q2_k) {
      const BlockQ2_K& b = reinterpret_cast<const BlockQ2_K*>(wrow)[i / kQK_K];
      mn = std::fabs(static_cast<double>(fp16_to_fp32(b.dmin)) * (b.scales[(i % kQK_K) / 16] >> 4));
    }
    mag +=
        (std::fabs(static_cast<double>(w[static_cast<size_t>(i)])) + 2.0 * mn) * std::fabs(a[static_cast<size_t>(i)]);
  }
  return mag;
}

struct GemmCase {
  int64_t rows, cols, n_tok;
  Data data;
  float act_scale;
};

// Returns the worst error as a fraction of the budget.
double check_gemm_case(const IsaKernels& k, const char* level, const LowType& lt, const GemmCase& c, uint32_t seed,
                       ThreadPool& pool) {
  const DType type = lt.type;
  const std::vector<uint8_t> w = gemm_weights(lt, c.rows, c.cols, c.data, seed);
  const WeightMatrix m{type, c.rows, c.cols, w.data(), dtype_row_bytes(type, c.cols)};
  const std::vector<float> x = normal_data(c.n_tok * c.cols, seed + 1, c.act_scale);
  std::vector<float> got(static_cast<size_t>(c.n_tok * c.rows), -1.0f), want(got.size());
  MatmulScratch scratch;
  matmul_with(k, m, x.data(), c.n_tok, got.data(), pool, scratch);
  matmul_with(*isa_kernels(Isa::scalar), m, x.data(), c.n_tok, want.data(), pool, scratch);
  const DType at = traits_of(type).vec_dot_type;
  const int64_t block = type == DType::q2_k || type == DType::q3_k ? 16 : 32;
  const double budget_u = 2.0 * static_cast<double>(c.cols / block) + 16.0;
  BudgetCheck bc;
  for (int64_t t = 0; t < c.n_tok; ++t) {
    const std::vector<float> xt(x.begin() + t * c.cols, x.begin() + (t + 1) * c.cols);
    const std::vector<float> a = dequantize(at, quantize(at, xt).data(), c.cols);
    for (int64_t r = 0; r < c.rows; ++r) {
      const double mag = magnitude(type, m.data + r * m.row_bytes, a, c.cols);
      const size_t i = static_cast<size_t>(t * c.rows + r);
      bc.add(got[i], want[i], budget_u * std::ldexp(1.0, -24) * mag + 1e-30, r, t);
    }
  }
  expect(bc.first_bad.empty(), std::string("neon ") + level + " " + name_of(type) + " gemm " +
                                   std::to_string(c.rows) + "x" + std::to_string(c.cols) + " x " +
                                   std::to_string(c.n_tok) + " tokens data " + std::to_string(static_cast<int>(c.data)) +
                                   bc.first_bad);
  return bc.worst;
}

// run() called directly on rows [r0, r1) of a 29-row matrix (a range that starts inside a 4-row
// group): those rows match the scalar vec_dot within the budget and no other output is written.
double check_gemm_range(const IsaKernels& k, const char* level, const LowType& lt, int64_t r0, int64_t r1) {
  const DType type = lt.type, at = traits_of(type).vec_dot_type;
  const int64_t rows = 29, cols = dtype_traits(type).block_size == kQK_K ? 512 : 256, n_tok = 7;
  const GemmKernel* g = k.gemm(type);
  const std::vector<uint8_t> w = gemm_weights(lt, rows, cols, Data::random_bits, 77);
  const size_t rb = dtype_row_bytes(type, cols), ab = dtype_row_bytes(at, cols);
  const std::vector<float> x = normal_data(n_tok * cols, 78);
  std::vector<uint8_t> act(ab * static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t) traits_of(at).from_float(x.data() + t * cols, act.data() + t * ab, cols);
  std::vector<uint8_t> packed(g->packed_bytes(cols, n_tok)), scratch(g->scratch_bytes(cols) + 64);
  g->pack(act.data(), ab, cols, n_tok, packed.data());
  uint8_t* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  const float kSentinel = 12345.0f;
  std::vector<float> got(static_cast<size_t>(n_tok * rows), kSentinel);
  g->run(GemmWeights{w.data(), rb, rows, cols}, packed.data(), n_tok, r0, r1, got.data(), rows, s);
  const int64_t block = type == DType::q2_k || type == DType::q3_k ? 16 : 32;
  const double budget_u = 2.0 * static_cast<double>(cols / block) + 16.0;
  bool untouched = true, within = true;
  double worst = 0.0;
  for (int64_t t = 0; t < n_tok; ++t) {
    const std::vector<float> a = dequantize(at, act.data() + t * ab, cols);
    for (int64_t r = 0; r < rows; ++r) {
      const float v = got[static_cast<size_t>(t * rows + r)];
      if (r < r0 || r >= r1) {
        untouched = untouched && v == kSentinel;
        continue;
      }
      const float want = traits_of(type).vec_dot(cols, w.data() + r * rb, act.data() + t * ab);
      const double tol = budget_u * std::ldexp(1.0, -24) * magnitude(type, w.data() + r * rb, a, cols) + 1e-30;
      const double err = std::fabs(static_cast<double>(v) - want);
      within = within && err <= tol;
      worst = std::max(worst, err / tol);
    }
  }
  const std::string label = std::string("neon ") + level + " " + name_of(type) + " gemm run rows [" +
                            std::to_string(r0) + ", " + std::to_string(r1) + ")";
  expect(untouched, label + ": wrote outside its row range");
  expect(within, label + ": over budget against the scalar vec_dot");
  return worst;
}

void check_gemms(const LowType& lt, ThreadPool& pool) {
  using neon::NeonLevel;
  const struct {
    NeonLevel level;
    const char* name;
  } levels[] = {{NeonLevel::base, "base"}, {NeonLevel::dotprod, "dotprod"}, {NeonLevel::i8mm, "i8mm"}};
  for (const auto& l : levels) {
    const IsaKernels* k = neon::neon_kernels(l.level);
    if (k == nullptr) continue;  // neon_selftest's test_gemm reports the missing level
    const DType type = lt.type;
    expect(k->gemm(type) != nullptr, std::string("neon ") + l.name + " gemm for " + name_of(type));
    if (k->gemm(type) == nullptr) continue;
    const int64_t bs = dtype_traits(type).block_size;
    const int64_t cols = bs == kQK_K ? 512 : 256;
    uint32_t seed = 900 + 37 * static_cast<uint32_t>(type);
    double worst = 0.0;
    int cases = 0;
    for (int64_t n_tok = 1; n_tok <= 17; ++n_tok, ++cases)
      worst = std::max(worst, check_gemm_case(*k, l.name, lt, {n_tok % 2 ? 37 : 22, cols, n_tok, Data::gaussian, 1.0f},
                                              seed++, pool));
    const GemmCase more[] = {
        {13, 3 * cols, 5, Data::random_bits, 3.0f}, {33, cols, 17, Data::random_bits, 1.0f},
        {7, 3 * cols, 6, Data::zero_blocks, 1.0f},  {19, 2 * cols, 9, Data::extreme_scales, 1.0f},
        {1, cols, 4, Data::gaussian, 1.0f},         {3, 11264 / bs * bs, 2, Data::gaussian, 1.0f},
        {9, bs, 11, Data::random_bits, 1.0f},       {50, 2 * cols, 16, Data::gaussian, 1e3f},
    };
    for (const GemmCase& c : more) {
      worst = std::max(worst, check_gemm_case(*k, l.name, lt, c, seed++, pool));
      ++cases;
    }
    worst = std::max(worst, check_gemm_range(*k, l.name, lt, 5, 23));
    worst = std::max(worst, check_gemm_range(*k, l.name, lt, 16, 29));
    cases += 2;
    std::printf("[ info ] neon %s %s gemm: worst |gemm - scalar| = %.2f of the budget, %d cases\n", l.name,
                name_of(type).c_str(), worst, cases);
  }
}

}  // namespace

CheckCounts check_neon_lowbit() {
  g_counts = {};
  ThreadPool pool(2);
  using neon::NeonLevel;
  for (const LowType& lt : kTypes) {
    check_vec_dot(lt, NeonLevel::base, "base");
    if (neon::neon_kernels(NeonLevel::dotprod) != nullptr) check_vec_dot(lt, NeonLevel::dotprod, "dotprod");
    if (neon::neon_kernels(NeonLevel::i8mm) != nullptr) check_vec_dot(lt, NeonLevel::i8mm, "i8mm");
    check_gemms(lt, pool);
  }
  return g_counts;
}

}  // namespace edgelm::kernels
