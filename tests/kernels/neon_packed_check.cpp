#include "neon_packed_check.h"

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
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/kernels_neon.h"
#include "kernels/matmul.h"
#include "kernels/quant_traits.h"
#include "kernels/quants_k.h"
#include "kernels/quants_fp4.h"
#include "kernels/quants_iq_grid.h"
#include "kernels/quants_ternary.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)
namespace {

struct Checker {
  CheckCounts counts;
  int printed = 0;
  void expect(bool ok, const std::string& what) {
    if (ok) {
      ++counts.passed;
      return;
    }
    ++counts.failed;
    if (++printed <= 40) std::printf("FAIL: %s\n", what.c_str());
  }
};

enum class Data { gaussian, random_bits, zero_blocks, extreme_scales };

std::string type_name(DType t) { return std::string(dtype_name(t)); }

// Offsets of the fp16 fields of a block (d first; m / dmin of the formats that have one).
std::vector<size_t> half_fields(DType t) {
  switch (t) {
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k: return {0, 2};
    case DType::q6_k: return {sizeof(BlockQ6_K) - 2};
    case DType::q3_k: return {sizeof(BlockQ3_K) - 2};
    case DType::q2_k: return {sizeof(BlockQ2_K) - 4, sizeof(BlockQ2_K) - 2};
    case DType::tq2_0: return {sizeof(BlockTQ2_0) - 2};
    case DType::tq1_0: return {sizeof(BlockTQ1_0) - 2};
    case DType::iq4_xs: return {0};
    case DType::mxfp4: return {};  // its scale is an E8M0 byte, not fp16
    default: return {0};
  }
}

// A [rows, cols] matrix of `type` per `data` (as neon_selftest.cpp's gemm_weights).
bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

bool is_grid(DType t) {
  return t == DType::iq3_s || t == DType::iq2_xs || t == DType::iq2_xxs || t == DType::iq3_xxs || t == DType::iq2_s ||
         t == DType::iq1_s || t == DType::iq1_m;
}

// The fp16 scale of a grid IQ block: its first field, or IQ1_M's, spread over the top nibbles of
// its four scale words.
void set_grid_d(DType type, uint8_t* blk, uint16_t d) {
  if (type != DType::iq1_m) {
    std::memcpy(blk, &d, 2);
    return;
  }
  for (int k = 0; k < 4; ++k) {
    uint16_t sc;
    std::memcpy(&sc, blk + offsetof(BlockIQ1_M, scales) + 2 * k, 2);
    sc = static_cast<uint16_t>((sc & 0x0fff) | (((d >> (4 * k)) & 0xf) << 12));
    std::memcpy(blk + offsetof(BlockIQ1_M, scales) + 2 * k, &sc, 2);
  }
}

// Grid IQ rows: random bits (every index, sign, scale and delta pattern is a valid block; most of
// these types have no quantizer without an importance matrix), fp16 d of either sign in
// [0.01, 2) (random_bits: up to 100), or per `data` zero blocks or the largest and smallest
// normal fp16 scales.
std::vector<uint8_t> make_grid_weights(DType type, int64_t rows, int64_t cols, Data data, std::mt19937& rng) {
  std::vector<uint8_t> w(dtype_row_bytes(type, cols) * static_cast<size_t>(rows));
  for (uint8_t& v : w) v = static_cast<uint8_t>(rng());
  const size_t bs = dtype_traits(type).type_size;
  for (size_t b = 0; b < w.size() / bs; ++b) {
    uint8_t* blk = w.data() + b * bs;
    const float mod = 0.01f * static_cast<float>(rng() % (data == Data::random_bits ? 10000 : 200) + 1);
    uint16_t d = data == Data::extreme_scales ? (b % 2 == 0 ? uint16_t{0x7bff} : uint16_t{0x0400}) : fp32_to_fp16(mod);
    d = static_cast<uint16_t>(d | ((rng() & 1) << 15));
    set_grid_d(type, blk, d);
    if (data == Data::zero_blocks && b % 3 == 1) std::memset(blk, 0, bs);
  }
  return w;
}

std::vector<uint8_t> make_weights(DType type, int64_t rows, int64_t cols, Data data, uint32_t seed) {
  std::mt19937 rng(seed);
  if (is_grid(type)) return make_grid_weights(type, rows, cols, data, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t rb = dtype_row_bytes(type, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  std::vector<float> f(static_cast<size_t>(cols));
  // Float types: zeros, large, huge and tiny elements among the Gaussians (F16: its top and its
  // subnormals); no NaN or infinity.
  const float huge = type == DType::f16 ? 2e3f : 1e30f, tiny = type == DType::f16 ? 1e-5f : 1e-30f;
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < f.size(); ++i) {
      f[i] = normal(rng);
      if (!is_float(type)) continue;
      if (data == Data::zero_blocks && i % 3 == 1) f[i] = 0.0f;
      if (data == Data::random_bits) f[i] *= static_cast<float>(i % 7 + 1) * 50.0f;
      if (data == Data::extreme_scales) f[i] *= i % 2 == 0 ? huge : tiny;
    }
    quant_traits(type)->from_float(f.data(), w.data() + static_cast<size_t>(r) * rb, cols);
  }
  if (is_float(type)) return w;
  const size_t bs = dtype_traits(type).type_size;
  for (size_t b = 0; b < w.size() / bs; ++b) {
    uint8_t* blk = w.data() + b * bs;
    if (data == Data::random_bits) {
      for (size_t i = 0; i < bs; ++i) blk[i] = static_cast<uint8_t>(rng());
      if (type == DType::q8_0)
        for (size_t i = 2; i < bs; ++i)
          if (blk[i] == 0x80) blk[i] = 0x81;  // -128 is outside Q8_0's range
      const uint16_t d = fp32_to_fp16(0.01f * static_cast<float>(rng() % 100 + 1));
      for (size_t at : half_fields(type)) std::memcpy(blk + at, &d, 2);
      if (type == DType::mxfp4) blk[0] = static_cast<uint8_t>(110 + rng() % 30);  // E8M0: 2^-18 .. 2^11
    } else if (data == Data::zero_blocks && b % 3 == 1) {
      std::memset(blk, 0, bs);
    } else if (data == Data::extreme_scales) {
      if (type == DType::mxfp4) {  // the largest and smallest finite E8M0 exponents
        blk[0] = b % 2 == 0 ? 254 : 0;
        continue;
      }
      const uint16_t h = (b % 2 == 0) ? fp32_to_fp16(65504.0f) : uint16_t{0x0400};
      std::memcpy(blk + half_fields(type)[0], &h, 2);
    }
  }
  return w;
}

std::string label_of(const char* level, DType type, int64_t rows, int64_t cols, int64_t n_tok, Data data) {
  return std::string("neon ") + level + " packed " + type_name(type) + " " + std::to_string(rows) + "x" +
         std::to_string(cols) + " x " + std::to_string(n_tok) + " tokens data " + std::to_string(static_cast<int>(data));
}

// The first differing output, or "" when got and want are equal bit for bit.
std::string first_difference(const std::vector<float>& got, const std::vector<float>& want, int64_t rows) {
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": token %lld row %lld got %.9g want %.9g", static_cast<long long>(i / rows),
                    static_cast<long long>(i % rows), static_cast<double>(got[i]), static_cast<double>(want[i]));
      return buf;
    }
  return "";
}

void check_case(Checker& c, const IsaKernels& k, const char* level, DType type, int64_t rows, int64_t cols,
                int64_t n_tok, Data data, uint32_t seed, ThreadPool& pool) {
  const std::vector<uint8_t> w = make_weights(type, rows, cols, data, seed);
  WeightMatrix m{type, rows, cols, w.data(), dtype_row_bytes(type, cols)};
  const PackedMatrix p = pack_matrix_with(k, m, pool);
  const std::string label = label_of(level, type, rows, cols, n_tok, data);
  c.expect(p.data != nullptr && p.kernel == k.gemm(type), label + ": not packed");
  if (p.data == nullptr) return;
  std::mt19937 rng(seed + 7);
  std::normal_distribution<float> normal(0.0f, data == Data::random_bits ? 3.0f : 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tok * cols));
  for (float& v : x) v = normal(rng);
  std::vector<float> got(static_cast<size_t>(n_tok * rows), -1.0f), want(got.size(), -2.0f);
  MatmulScratch scratch;
  if (!is_float(type)) {
    matmul_with(*isa_kernels(Isa::scalar), m, x.data(), n_tok, want.data(), pool, scratch);
  } else {  // as today's unpacked matrix: the per-call GEMM, or the NEON vec_dot for a 1-token tile
    matmul_with(k, m, x.data(), n_tok, want.data(), pool, scratch);
    if (n_tok >= 2 && n_tok % 4 == 1) {
      const ResolvedKernels rk = kernel_or_scalar(k, type);
      const float* xt = x.data() + (n_tok - 1) * cols;
      std::vector<uint8_t> act(dtype_row_bytes(rk.vec_dot_type, cols));
      if (rk.vec_dot_type == DType::f32)
        std::memcpy(act.data(), xt, act.size());
      else
        rk.quantize_activation(xt, act.data(), cols);
      for (int64_t r = 0; r < rows; ++r)
        want[static_cast<size_t>((n_tok - 1) * rows + r)] = rk.vec_dot(cols, m.row(r), act.data());
    }
  }
  m.packed = p.data.get();
  m.packed_kernel = p.kernel;
  matmul_with(k, m, x.data(), n_tok, got.data(), pool, scratch);
  c.expect(first_difference(got, want, rows).empty(),
           label + " not bit-identical to " + (is_float(type) ? "the unpacked NEON path" : "scalar") +
               first_difference(got, want, rows));
}

// Zeroed packed bytes: matmul must read them (zero outputs) for 1 and 5 tokens.
void check_reads_packed(Checker& c, const IsaKernels& k, const char* level, DType type, ThreadPool& pool) {
  const int64_t cols = dtype_traits(type).block_size * 4, rows = 21;
  const std::vector<uint8_t> w = make_weights(type, rows, cols, Data::gaussian, 99);
  WeightMatrix m{type, rows, cols, w.data(), dtype_row_bytes(type, cols)};
  const PackedMatrix p = pack_matrix_with(k, m, pool);
  if (p.data == nullptr) return;
  std::memset(p.data.get(), 0, p.n_bytes);
  m.packed = p.data.get();
  m.packed_kernel = p.kernel;
  for (int64_t n_tok : {1, 5}) {
    std::vector<float> x(static_cast<size_t>(n_tok * cols), 0.5f), got(static_cast<size_t>(n_tok * rows), -1.0f);
    MatmulScratch scratch;
    matmul_with(k, m, x.data(), n_tok, got.data(), pool, scratch);
    bool zero = true;
    for (float v : got) zero = zero && v == 0.0f;
    c.expect(zero, std::string("neon ") + level + " " + type_name(type) + " matmul of " + std::to_string(n_tok) +
                       " tokens does not read the packed matrix");
  }
}

// run_packed on [r0, r1) directly: those rows as the scalar vec_dot, no others written.
// n_tok 6: below every packed_unpack_tokens (no scratch); 9: past it (scratch_bytes(cols) given).
void check_range(Checker& c, const IsaKernels& k, const char* level, DType type, int64_t r0, int64_t r1, int64_t n_tok,
                 ThreadPool& pool) {
  const int64_t rows = 29, cols = dtype_traits(type).block_size * 3;
  const GemmKernel* g = k.gemm(type);
  const std::vector<uint8_t> w = make_weights(type, rows, cols, Data::gaussian, 77);
  const size_t rb = dtype_row_bytes(type, cols);
  const WeightMatrix m{type, rows, cols, w.data(), rb};
  const PackedMatrix p = pack_matrix_with(k, m, pool);
  const DType at = quant_traits(type)->vec_dot_type;
  const size_t ab = dtype_row_bytes(at, cols);
  std::mt19937 rng(78);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tok * cols));
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> act(ab * static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t)
    quant_traits(at)->from_float(x.data() + t * cols, act.data() + static_cast<size_t>(t) * ab, cols);
  std::vector<uint8_t> tiles(g->packed_bytes(cols, n_tok));
  g->pack(act.data(), ab, cols, n_tok, tiles.data());
  const float kSentinel = 12345.0f;
  std::vector<float> got(static_cast<size_t>(n_tok * rows), kSentinel), per_call(got.size());
  std::vector<uint8_t> scratch(g->scratch_bytes(cols) + 64);
  uint8_t* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  g->run(GemmWeights{w.data(), rb, rows, cols}, tiles.data(), n_tok, r0, r1, per_call.data(), rows, s);
  const bool unpacks = g->packed_unpack_tokens > 0 && n_tok >= g->packed_unpack_tokens;
  g->run_packed(p.data.get(), rows, cols, tiles.data(), n_tok, r0, r1, got.data(), rows, unpacks ? s : nullptr);
  bool ok = true, untouched = true;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const float v = got[static_cast<size_t>(t * rows + r)];
      if (r < r0 || r >= r1) {
        untouched = untouched && v == kSentinel;
      } else {
        // Float types: the per-call GEMM's (tiles of 4 and 2, or 4, 4 and 1: the vec_dot row's);
        // the others: the scalar vec_dot.
        const uint8_t* wr = w.data() + static_cast<size_t>(r) * rb;
        const uint8_t* ar = act.data() + static_cast<size_t>(t) * ab;
        const bool solo = n_tok % 4 == 1 && t == n_tok - 1;  // the last 4-token tile has 1 token
        const float want = !is_float(type) ? quant_traits(type)->vec_dot(cols, wr, ar)
                           : solo          ? k.vec_dot(type)(cols, wr, ar)
                                           : per_call[static_cast<size_t>(t * rows + r)];
        ok = ok && std::memcmp(&v, &want, sizeof v) == 0;
      }
    }
  const std::string label = std::string("neon ") + level + " " + type_name(type) + " run_packed rows [" +
                            std::to_string(r0) + ", " + std::to_string(r1) + ") x " + std::to_string(n_tok) + " tokens";
  c.expect(untouched, label + ": wrote outside its row range");
  c.expect(ok, label + ": not bit-identical to the reference");
}

}  // namespace

CheckCounts check_neon_packed() {
  using neon::NeonLevel;
  Checker c;
  const struct {
    NeonLevel level;
    const char* name;
  } levels[] = {{NeonLevel::base, "base"}, {NeonLevel::dotprod, "dotprod"}, {NeonLevel::i8mm, "i8mm"}};
  const DType types[] = {DType::q8_0,    DType::q4_0,    DType::q4_1,  DType::q5_0,   DType::q5_1,
                         DType::iq4_nl,  DType::q4_k,    DType::q5_k,  DType::q6_k,   DType::q3_k,
                         DType::q2_k,    DType::tq2_0,   DType::tq1_0, DType::iq4_xs, DType::mxfp4,
                         DType::f32,     DType::f16,     DType::bf16,  DType::iq3_s,  DType::iq2_xs,
                         DType::iq2_xxs, DType::iq3_xxs, DType::iq2_s, DType::iq1_s,  DType::iq1_m};
  ThreadPool pool(2);
  for (const auto& l : levels) {
    const IsaKernels* k = neon::neon_kernels(l.level);
    if (k == nullptr) continue;  // the CPU lacks the level (neon_selftest.cpp's --expect checks which must exist)
    for (DType type : types) {
      const GemmKernel* g = k->gemm(type);
      const bool has = g != nullptr && g->pack_weights != nullptr && g->run_packed != nullptr &&
                       g->packed_weight_bytes != nullptr && g->packed_row_group == 4 &&
                       kGemmRowTile % g->packed_row_group == 0;
      c.expect(has, std::string("neon ") + l.name + " " + type_name(type) + " has a packed form");
      if (!has) continue;
      const int64_t bs = dtype_traits(type).block_size;
      // Size: the stored bytes of the rows rounded up to a group of 4 (K formats with 4-bit
      // quants: their 8-bit scales and mins, 64 bytes per group against 48; Q3_K: its 16 scales
      // as bytes, 64 against 48; the grid IQ formats: exactly the stored bytes, regrouped).
      const int64_t rows = 37, cols = 4 * bs;
      const size_t stored = static_cast<size_t>((rows + 3) / 4 * 4) * dtype_row_bytes(type, cols);
      const size_t packed = g->packed_weight_bytes(rows, cols);
      // IQ4_XS: its 8 six-bit scales as bytes, 40 bytes per group and super-block with d against
      // 32, 8 bytes a row over cols = 4 super-blocks.
      const size_t extra = type == DType::q4_k || type == DType::q5_k || type == DType::q3_k
                               ? static_cast<size_t>((rows + 3) / 4 * 4) * 16
                           : type == DType::iq4_xs ? static_cast<size_t>((rows + 3) / 4 * 4) * 8
                                                   : 0;
      c.expect(packed == stored + extra, std::string("neon ") + l.name + " " + type_name(type) + " packed size " +
                                             std::to_string(packed) + " for stored " + std::to_string(stored));
      const int before = c.counts.failed;
      uint32_t seed = 900 + 17 * static_cast<uint32_t>(type);
      for (int64_t n_tok = 1; n_tok <= 17; ++n_tok)
        check_case(c, *k, l.name, type, n_tok % 2 ? 37 : 22, bs == kQK_K ? 512 : bs == 1 ? 283 : 256, n_tok,
                   Data::gaussian, seed++, pool);
      const struct {
        int64_t rows, cols, n_tok;
        Data data;
      } more[] = {
          {13, 3 * bs, 1, Data::random_bits},    {13, 3 * bs, 5, Data::random_bits},
          {33, 2 * bs, 17, Data::random_bits},   {7, 3 * bs, 1, Data::zero_blocks},
          {7, 3 * bs, 6, Data::zero_blocks},     {19, 2 * bs, 1, Data::extreme_scales},
          {19, 2 * bs, 9, Data::extreme_scales}, {1, bs, 1, Data::gaussian},
          {3, 11264 / bs * bs, 1, Data::gaussian}, {50, 4096 / bs * bs, 3, Data::gaussian},
          {6, bs == 1 ? 20 : bs, 5, Data::gaussian}, {6, bs == 1 ? 7 : 2 * bs, 5, Data::random_bits},
      };
      for (const auto& m : more) check_case(c, *k, l.name, type, m.rows, m.cols, m.n_tok, m.data, seed++, pool);
      check_reads_packed(c, *k, l.name, type, pool);
      check_range(c, *k, l.name, type, 4, 23, 6, pool);
      check_range(c, *k, l.name, type, 16, 29, 9, pool);
      std::printf("[ info ] neon %s %s packed: %zu bytes for %zu stored (%+.1f%%), bit-identical: %s\n",
                  l.name, type_name(type).c_str(), packed, stored,
                  100.0 * (static_cast<double>(packed) / static_cast<double>(stored) - 1.0),
                  c.counts.failed == before ? "yes" : "NO");
    }
  }
  return c.counts;
}

#else
CheckCounts check_neon_packed() { return {}; }
#endif

}  // namespace edgelm::kernels
