// See neon_iqgrid_check.h.
#include "neon_iqgrid_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/kernels_neon.h"
#include "kernels/matmul.h"
#include "kernels/quant_traits.h"
#include "kernels/quants_iq_grid.h"
#include "kernels/quants_k.h"
#include "kernels/quants_weighted.h"
#include "budget_check.h"

namespace edgelm::kernels {
namespace {

constexpr DType kTypes[] = {DType::iq3_s, DType::iq2_xs, DType::iq2_xxs, DType::iq3_xxs,
                            DType::iq2_s, DType::iq1_s,  DType::iq1_m};
static_assert(std::size(kTypes) == kNeonIqGridGemms);

constexpr uint16_t kModerate = 0xffff;  // a random moderate fp16 value (pick_half)
constexpr uint16_t kHalfMax = 0x7bff;   // 65504
constexpr uint16_t kHalfMinNormal = 0x0400;

struct Checker {
  CheckCounts counts;
  int printed = 0;
  void expect(bool ok, const std::string& what) {
    if (ok) {
      ++counts.passed;
      return;
    }
    ++counts.failed;
    if (printed++ < 20) std::printf("FAIL: %s\n", what.c_str());
  }
};

std::string name_of(DType t) { return std::string(dtype_name(t)); }
const QuantTraits& traits_of(DType t) { return *quant_traits(t); }

std::vector<float> normal_data(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

std::vector<float> dequantize(DType t, const void* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  traits_of(t).to_float(p, out.data(), n);
  return out;
}

uint16_t pick_half(std::mt19937& rng, uint16_t h) {
  std::uniform_real_distribution<float> mod(0.01f, 2.0f);
  const uint16_t v = h == kModerate ? fp32_to_fp16(mod(rng)) : h;
  return static_cast<uint16_t>(v | ((rng() & 1) << 15));
}

// The fp16 scale of one block: the d field, or IQ1_M's, spread over the top nibbles of its four
// scale words.
void set_d(DType type, uint8_t* blk, uint16_t d) {
  if (type != DType::iq1_m) {
    std::memcpy(blk, &d, 2);  // d is the first field of the other grid blocks
    return;
  }
  for (int k = 0; k < 4; ++k) {
    uint16_t sc;
    std::memcpy(&sc, blk + offsetof(BlockIQ1_M, scales) + 2 * k, 2);
    sc = static_cast<uint16_t>((sc & 0x0fff) | (((d >> (4 * k)) & 0xf) << 12));
    std::memcpy(blk + offsetof(BlockIQ1_M, scales) + 2 * k, &sc, 2);
  }
}

// Random quant bits (every index, sign and scale pattern is a valid block), fp16 d from pick_half.
std::vector<uint8_t> random_rows(DType type, int64_t rows, int64_t n, std::mt19937& rng, uint16_t h) {
  std::vector<uint8_t> b(dtype_row_bytes(type, n) * static_cast<size_t>(rows));
  for (uint8_t& v : b) v = static_cast<uint8_t>(rng());
  const size_t bs = dtype_traits(type).type_size;
  for (size_t at = 0; at < b.size(); at += bs) set_d(type, b.data() + at, pick_half(rng, h));
  return b;
}

// Rows of Gaussians quantized by the type's importance-weighted quantizer (unit importances).
std::vector<uint8_t> quantized_rows(DType type, int64_t rows, int64_t n, uint32_t seed) {
  const std::vector<float> x = normal_data(rows * n, seed);
  const std::vector<float> qw(static_cast<size_t>(n), 1.0f);
  const size_t rb = dtype_row_bytes(type, n);
  std::vector<uint8_t> b(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) weighted_quantizer(type)(x.data() + r * n, b.data() + r * rb, n, qw.data());
  return b;
}

// A Q8_K row of random quants in [-127, 127] with consistent bsums and d from pick_half.
std::vector<uint8_t> random_q8k(int64_t n, std::mt19937& rng, uint16_t h) {
  std::vector<uint8_t> bytes(dtype_row_bytes(DType::q8_k, n));
  auto* b = reinterpret_cast<BlockQ8_K*>(bytes.data());
  std::uniform_int_distribution<int> q(-127, 127);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    b[i].d = fp16_to_fp32(pick_half(rng, h));
    for (int8_t& v : b[i].qs) v = static_cast<int8_t>(q(rng));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
  }
  return bytes;
}

std::vector<uint8_t> q8k_of(const std::vector<float>& x) {
  std::vector<uint8_t> y(dtype_row_bytes(DType::q8_k, static_cast<int64_t>(x.size())));
  traits_of(DType::q8_k).from_float(x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

// ---- Selection ----------------------------------------------------------------------------------

void check_tables(Checker& c) {
  const IsaKernels& k = *isa_kernels(Isa::neon);
  for (DType t : kTypes) {
    c.expect(k.vec_dot(t) != nullptr && k.vec_dot(t) != traits_of(t).vec_dot, "neon vec_dot for " + name_of(t));
    const ResolvedKernels r = kernel_or_scalar(k, t);
    c.expect(r.vec_dot == k.vec_dot(t) && r.vec_dot_type == DType::q8_k &&
                 r.quantize_activation == k.from_float(DType::q8_k),
             name_of(t) + " resolves to the neon vec_dot and Q8_K quantizer");
    for (neon::NeonLevel level : {neon::NeonLevel::base, neon::NeonLevel::dotprod, neon::NeonLevel::i8mm})
      if (const IsaKernels* v = neon::neon_kernels(level))
        c.expect(v->gemm(t) != nullptr, "neon gemm for " + name_of(t) + " in every supported variant");
  }
}

// ---- vec_dot ------------------------------------------------------------------------------------

struct DotStats {
  double worst = 0.0;  // of the budget
  int cases = 0;
};

void check_dot(Checker& c, DType type, const std::vector<uint8_t>& x, const std::vector<uint8_t>& y, int64_t n,
               const std::string& what, DotStats& st) {
  const std::vector<float> xf = dequantize(type, x.data(), n), yf = dequantize(DType::q8_k, y.data(), n);
  double mag = 0.0;
  for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(xf[i])) * std::fabs(static_cast<double>(yf[i]));
  const float want = traits_of(type).vec_dot(n, x.data(), y.data());
  const float got = isa_kernels(Isa::neon)->vec_dot(type)(n, x.data(), y.data());
  ++st.cases;
  const std::string label = name_of(type) + " vec_dot " + what + " (n " + std::to_string(n) + ")";
  if (!std::isfinite(want) || !std::isfinite(mag)) {
    c.expect(false, label + ": non-finite reference");
    return;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, ": got %.9g, want %.9g, magnitude %.6g", static_cast<double>(got),
                static_cast<double>(want), mag);
  c.expect(std::memcmp(&got, &want, sizeof(float)) == 0, label + " not bit-identical" + buf);
  const double k = 2.0 * static_cast<double>(n / kQK_K) + 4;
  const double tol = (2 * k + 8) * std::ldexp(1.0, -24) * mag;
  const double diff = std::fabs(static_cast<double>(got) - want);
  c.expect(diff <= tol, label + " over budget" + buf);
  if (mag == 0.0) c.expect(got == 0.0f, label + ": zero magnitude, nonzero result" + buf);
  if (tol > 0) st.worst = std::max(st.worst, diff / tol);
}

void check_vec_dots(Checker& c, DType type) {
  DotStats st;
  const int failed_before = c.counts.failed;
  std::mt19937 rng(4321 + static_cast<uint32_t>(type));
  const int64_t bs = kQK_K;
  for (int rep = 0; rep < 8; ++rep)
    for (int64_t n : {bs, 3 * bs, 7 * bs, 2 * bs, 5 * bs})
      check_dot(c, type, random_rows(type, 1, n, rng, kModerate), random_q8k(n, rng, kModerate), n, "random", st);
  // Quantized Gaussians (the importance-weighted quantizers are slow under qemu: one 2048-element
  // row), and random bits against quantized activations on the long row.
  for (int64_t n : {int64_t{2048}, int64_t{11008}}) {
    const std::vector<uint8_t> y = q8k_of(normal_data(n, static_cast<uint32_t>(n + 1)));
    if (n == 2048)
      check_dot(c, type, quantized_rows(type, 1, n, static_cast<uint32_t>(n)), y, n, "quantized gaussian", st);
    check_dot(c, type, random_rows(type, 1, n, rng, kModerate), y, n, "random bits, quantized activations", st);
  }
  const struct {
    const char* what;
    uint16_t x, y;
  } scales[] = {
      {"huge x, huge y", kHalfMax, kHalfMax},
      {"huge x, min-normal y", kHalfMax, kHalfMinNormal},
      {"min-normal x, huge y", kHalfMinNormal, kHalfMax},
      {"min-normal x and y", kHalfMinNormal, kHalfMinNormal},
      {"near-max x, moderate y", 0x7bfe, kModerate},
      {"near-min-normal x, moderate y", 0x0401, kModerate},
  };
  for (const auto& s : scales)
    for (int64_t n : {bs, 3 * bs, 7 * bs, int64_t{11008}})
      check_dot(c, type, random_rows(type, 1, n, rng, s.x), random_q8k(n, rng, s.y), n, s.what, st);
  for (int64_t n : {3 * bs, 7 * bs}) {  // all-zero blocks and rows
    std::vector<uint8_t> x = random_rows(type, 1, n, rng, kModerate), y = random_q8k(n, rng, kModerate);
    const size_t xb = dtype_traits(type).type_size, yb = sizeof(BlockQ8_K);
    std::memset(x.data() + xb, 0, xb);
    std::memset(y.data() + 2 * yb, 0, yb);
    check_dot(c, type, x, y, n, "zero blocks", st);
    check_dot(c, type, std::vector<uint8_t>(x.size(), 0), y, n, "zero x", st);
    check_dot(c, type, x, std::vector<uint8_t>(y.size(), 0), n, "zero y", st);
  }
  for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x7f}, uint8_t{0x55}}) {
    const int64_t n = 3 * bs;
    std::vector<uint8_t> x(dtype_row_bytes(type, n), fill);
    for (size_t at = 0; at < x.size(); at += dtype_traits(type).type_size)
      set_d(type, x.data() + at, pick_half(rng, kModerate));
    check_dot(c, type, x, random_q8k(n, rng, kModerate), n, "fill " + std::to_string(fill), st);
  }
  std::printf("[ info ] neon %s vec_dot: worst |simd - scalar| = %.2f of the budget, %d cases, %d failed checks\n",
              name_of(type).c_str(), st.worst, st.cases, c.counts.failed - failed_before);
}

// ---- GEMM ---------------------------------------------------------------------------------------

struct GemmStats {
  double worst = 0.0;  // of the budget
  int cases = 0;
  int failed = 0;
};

// One GEMM case and its scalar reference, computed once and shared by the variants: want[t][r]
// matmul_with(scalar table) (the scalar vec_dot of row r and token t's Q8_K row; for run() cases
// that vec_dot called directly), tol[t][r] the budget (2 cols / 32 + 16) u
// mag, mag = sum_i |w_i| |a_i| (dequantized weights, dequantized activations). Rows [r0, r1) are
// computed by run() directly when direct is set, else every row through matmul_with.
struct GemmCase {
  DType type;
  const std::vector<uint8_t>* w;
  int64_t rows, cols, n_tok, r0, r1;
  bool direct;
  std::string label;
  std::vector<uint8_t> act;  // n_tok Q8_K rows
  std::vector<float> x;      // n_tok float rows (matmul_with's input)
  std::vector<float> want, tol;

  size_t act_bytes() const { return dtype_row_bytes(DType::q8_k, cols); }
  size_t row_bytes() const { return dtype_row_bytes(type, cols); }
};

GemmCase make_case(ThreadPool& pool, DType type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                   int64_t n_tok, float act_scale, uint32_t seed, const std::string& data, int64_t r0 = -1,
                   int64_t r1 = -1) {
  GemmCase g{type, &w, rows, cols, n_tok, r0 < 0 ? 0 : r0, r1 < 0 ? rows : r1, r0 >= 0, {}, {}, {}, {}, {}};
  g.label = name_of(type) + " gemm " + std::to_string(rows) + "x" + std::to_string(cols) + " x " +
            std::to_string(n_tok) + " tokens, " + data +
            (g.direct ? ", run rows [" + std::to_string(g.r0) + ", " + std::to_string(g.r1) + ")" : "");
  g.x = normal_data(n_tok * cols, seed, act_scale);
  g.act.resize(g.act_bytes() * static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t)
    traits_of(DType::q8_k).from_float(g.x.data() + t * cols, g.act.data() + t * g.act_bytes(), cols);
  const double budget_u = 2.0 * static_cast<double>(cols / 32) + 16.0;
  std::vector<std::vector<float>> wf;
  for (int64_t r = 0; r < rows; ++r) wf.push_back(dequantize(type, w.data() + r * g.row_bytes(), cols));
  g.want.resize(static_cast<size_t>(n_tok * rows));
  g.tol.resize(g.want.size());
  for (int64_t t = 0; t < n_tok; ++t) {
    const uint8_t* at = g.act.data() + t * g.act_bytes();
    const std::vector<float> a = dequantize(DType::q8_k, at, cols);
    for (int64_t r = 0; r < rows; ++r) {
      double mag = 0.0;
      for (int64_t i = 0; i < cols; ++i)
        mag += std::fabs(static_cast<double>(wf[static_cast<size_t>(r)][static_cast<size_t>(i)])) *
               std::fabs(static_cast<double>(a[static_cast<size_t>(i)]));
      const size_t i = static_cast<size_t>(t * rows + r);
      g.want[i] = traits_of(type).vec_dot(cols, w.data() + r * g.row_bytes(), at);
      g.tol[i] = budget_u * std::ldexp(1.0, -24) * mag + 1e-30;
    }
  }
  if (!g.direct) {
    const WeightMatrix m{type, rows, cols, w.data(), g.row_bytes()};
    MatmulScratch scratch;
    matmul_with(*isa_kernels(Isa::scalar), m, g.x.data(), n_tok, g.want.data(), pool, scratch);
  }
  return g;
}

// The variant k on case g: matmul_with (all rows), or run() on [r0, r1) with no row outside it
// written.
void run_case(Checker& c, const IsaKernels& k, const char* level, const GemmCase& g, ThreadPool& pool,
              GemmStats& st) {
  const float kSentinel = 12345.0f;
  std::vector<float> got(g.want.size(), kSentinel);
  const std::string label = std::string("neon ") + level + " " + g.label;
  if (g.direct) {
    const GemmKernel* gk = k.gemm(g.type);
    std::vector<uint8_t> packed(gk->packed_bytes(g.cols, g.n_tok)), scratch(gk->scratch_bytes(g.cols) + 64);
    gk->pack(g.act.data(), g.act_bytes(), g.cols, g.n_tok, packed.data());
    auto* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    gk->run(GemmWeights{g.w->data(), g.row_bytes(), g.rows, g.cols}, packed.data(), g.n_tok, g.r0, g.r1,
            got.data(), g.rows, s);
    bool untouched = true;
    for (int64_t t = 0; t < g.n_tok; ++t)
      for (int64_t r = 0; r < g.rows; ++r)
        if ((r < g.r0 || r >= g.r1) && got[static_cast<size_t>(t * g.rows + r)] != kSentinel) untouched = false;
    c.expect(untouched, label + ": wrote outside its row range");
  } else {
    const WeightMatrix m{g.type, g.rows, g.cols, g.w->data(), g.row_bytes()};
    MatmulScratch scratch;
    matmul_with(k, m, g.x.data(), g.n_tok, got.data(), pool, scratch);
  }
  BudgetCheck bc;
  for (int64_t t = 0; t < g.n_tok; ++t)
    for (int64_t r = g.r0; r < g.r1; ++r) {
      const size_t i = static_cast<size_t>(t * g.rows + r);
      bc.add(got[i], g.want[i], g.tol[i], r, t);
    }
  st.worst = std::max(st.worst, bc.worst);
  c.expect(bc.first_bad.empty(), label + bc.first_bad);
  if (!bc.first_bad.empty()) ++st.failed;
  ++st.cases;
}

void check_gemms(Checker& c, DType type, ThreadPool& pool) {
  const int64_t cols = 512;
  // The weights: quantized Gaussians (37 rows; prefixes of 1, 22 and 37 rows), random bits (one of
  // 3 x 11264), zero blocks, extreme scales.
  std::mt19937 rng(900 + static_cast<uint32_t>(type));
  const std::vector<uint8_t> gauss = quantized_rows(type, 37, cols, 31 + static_cast<uint32_t>(type));
  const std::vector<uint8_t> wide = random_rows(type, 3, 11264, rng, kModerate);
  const std::vector<uint8_t> bits13 = random_rows(type, 13, 3 * cols, rng, kModerate);
  const std::vector<uint8_t> bits33 = random_rows(type, 33, cols, rng, kModerate);
  const std::vector<uint8_t> bits71 = random_rows(type, 71, 4096, rng, kModerate);
  const std::vector<uint8_t> bits29 = random_rows(type, 29, cols, rng, kModerate);
  std::vector<uint8_t> zeros = random_rows(type, 7, 3 * cols, rng, kModerate);
  const size_t bs = dtype_traits(type).type_size;
  for (size_t b = 0; b < zeros.size() / bs; ++b)
    if (b % 3 == 1) std::memset(zeros.data() + b * bs, 0, bs);
  std::vector<uint8_t> extreme = random_rows(type, 19, 2 * cols, rng, kModerate);
  for (size_t b = 0; b < extreme.size() / bs; ++b)
    set_d(type, extreme.data() + b * bs, (b % 2 == 0) ? kHalfMax : kHalfMinNormal);
  std::vector<GemmCase> cases;
  uint32_t seed = 700 + 31 * static_cast<uint32_t>(type);
  for (int64_t n_tok = 1; n_tok <= 17; ++n_tok)
    cases.push_back(make_case(pool, type, gauss, n_tok % 2 ? 37 : 22, cols, n_tok, 1.0f, seed++, "quantized"));
  cases.push_back(make_case(pool, type, bits13, 13, 3 * cols, 5, 3.0f, seed++, "random bits"));
  cases.push_back(make_case(pool, type, bits33, 33, cols, 17, 1.0f, seed++, "random bits"));
  cases.push_back(make_case(pool, type, zeros, 7, 3 * cols, 6, 1.0f, seed++, "zero blocks"));
  cases.push_back(make_case(pool, type, extreme, 19, 2 * cols, 9, 1.0f, seed++, "extreme scales"));
  cases.push_back(make_case(pool, type, extreme, 5, 2 * cols, 3, 100.0f, seed++, "extreme scales, large activations"));
  cases.push_back(make_case(pool, type, gauss, 1, cols, 4, 1.0f, seed++, "quantized"));
  cases.push_back(make_case(pool, type, gauss, 37, cols, 16, 1e3f, seed++, "quantized, large activations"));
  cases.push_back(make_case(pool, type, wide, 3, 11264, 2, 1.0f, seed++, "random bits"));
  cases.push_back(make_case(pool, type, bits71, 71, 4096, 8, 1.0f, seed++, "random bits"));
  cases.push_back(make_case(pool, type, bits29, 29, cols, 7, 1.0f, seed++, "random bits", 5, 23));
  cases.push_back(make_case(pool, type, bits29, 29, cols, 7, 1.0f, seed++, "random bits", 16, 29));
  const struct {
    neon::NeonLevel level;
    const char* name;
  } levels[] = {{neon::NeonLevel::base, "base"}, {neon::NeonLevel::dotprod, "dotprod"}, {neon::NeonLevel::i8mm, "i8mm"}};
  for (const auto& l : levels) {
    const IsaKernels* k = neon::neon_kernels(l.level);
    if (k == nullptr || k->gemm(type) == nullptr) continue;  // check_tables / neon_selftest report these
    GemmStats st;
    for (const GemmCase& g : cases) run_case(c, *k, l.name, g, pool, st);
    std::printf("[ info ] neon %s %s gemm: worst |gemm - scalar| = %.2f of the budget, %d cases, %d failed\n",
                l.name, name_of(type).c_str(), st.worst, st.cases, st.failed);
  }
}

}  // namespace

bool is_neon_iqgrid_type(DType type) { return std::find(std::begin(kTypes), std::end(kTypes), type) != std::end(kTypes); }

CheckCounts check_neon_iqgrid() {
  Checker c;
  check_tables(c);
  ThreadPool pool(2);
  for (DType type : kTypes) {
    check_vec_dots(c, type);
    check_gemms(c, type, pool);
  }
  return c.counts;
}

}  // namespace edgelm::kernels
