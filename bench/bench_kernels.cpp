// Micro-benchmarks of the kernels on every ISA this CPU supports (kernels/isa.h).
//
//  vec_dot/<type>/<isa>/<rows>x4096: one activation row (quantized once, outside the timing)
//    dotted with every row of a weight matrix: the decode hot loop of matmul on one thread.
//    Reports the bytes of weights read per second. 4096 rows is the model-sized case (every
//    matrix is larger than a 4 MB L2); 128 rows stays in L2 (at most 2 MB, F32) and shows the
//    kernels' own speed.
//  packed/<type>/<isa>/<rows>x4096/t<T>: the load-time packed GEMM (gemm.h run_packed) on one
//    thread for T tokens (32768 rows: from DRAM; 4096: about L3; 128: L2): what decode (T = 1), a
//    small batch and a prefill (T = 32) run in the engine. Reports the
//    bytes of packed weights read per second; set_items counts tokens x rows.
//  quantize/<type>/<isa>: the activation quantizers on a 4096-float row (bytes of floats read).
//
// Weights are random quant bits with moderate fp16 scales (no NaN, inf or subnormal, which
// could change float timings); speed does not depend on the values otherwise.
//
// Typical use: bench_kernels --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/huge_pages.h"
#include "kernels/fp16.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/quant_traits.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_ternary.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kernels {
namespace {

constexpr int64_t kCols = 4096;
constexpr int64_t kMaxRows = 4096;
constexpr int64_t kDramRows = 32768;  // packed/ only: 32768 rows (Q4_0: 72 MiB) stream from DRAM, past any L3

const DType kWeightTypes[] = {DType::f32,  DType::f16,  DType::q4_0, DType::q4_1, DType::q5_0,
                              DType::q5_1, DType::q8_0, DType::q2_k, DType::q3_k, DType::q4_k,
                              DType::q5_k, DType::q6_k, DType::iq4_xs, DType::tq2_0};
const DType kActivationTypes[] = {DType::q8_0, DType::q8_1, DType::q8_k};

// Offsets of the fp16 fields of each block format.
std::vector<size_t> half_fields(DType t) {
  switch (t) {
    case DType::q4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::q5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::q4_k: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::q5_k: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::q6_k: return {offsetof(BlockQ6_K, d)};
    case DType::q2_k: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::q3_k: return {offsetof(BlockQ3_K, d)};
    case DType::tq2_0: return {offsetof(BlockTQ2_0, d)};
    default: return {0};  // Q4_0, Q5_0, Q8_0, IQ4_XS: d first
  }
}

// [rows, kCols] weights of `type`, made once per type and row count.
const std::vector<uint8_t>& weights(DType type, int64_t rows = kMaxRows) {
  static std::map<std::pair<DType, int64_t>, std::unique_ptr<std::vector<uint8_t>>> cache;
  auto& slot = cache[{type, rows}];
  if (slot) return *slot;
  std::mt19937_64 rng(static_cast<uint64_t>(type) + 1);
  const size_t bytes = dtype_row_bytes(type, kCols) * static_cast<size_t>(rows);
  slot = std::make_unique<std::vector<uint8_t>>(bytes);
  std::vector<uint8_t>& w = *slot;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), scale(0.01f, 0.1f);
  if (type == DType::f32 || type == DType::f16 || type == DType::bf16) {
    std::vector<float> row(kCols);
    const size_t row_bytes = dtype_row_bytes(type, kCols);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = value(rng);
      quant_traits(type)->from_float(row.data(), w.data() + r * row_bytes, kCols);
    }
    return w;
  }
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(w.data() + i, &v, 8);
  }
  const size_t block = dtype_traits(type).type_size;
  for (size_t at = 0; at < bytes; at += block)
    for (size_t off : half_fields(type)) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      std::memcpy(w.data() + at + off, &h, 2);
    }
  return w;
}

std::vector<float> activation_floats() {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kCols);
  for (float& v : x) v = normal(rng);
  return x;
}

void bm_vec_dot(benchmark::State& state, Isa isa, DType type, int64_t rows) {
  const IsaKernels& k = *isa_kernels(isa);
  const ResolvedKernels f = kernel_or_scalar(k, type);
  const std::vector<uint8_t>& w = weights(type);
  const size_t row_bytes = dtype_row_bytes(type, kCols);
  const std::vector<float> x = activation_floats();
  std::vector<uint8_t> act(dtype_row_bytes(f.vec_dot_type, kCols));
  if (f.vec_dot_type == DType::f32)
    std::memcpy(act.data(), x.data(), act.size());
  else
    f.quantize_activation(x.data(), act.data(), kCols);
  for (auto _ : state) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += f.vec_dot(kCols, w.data() + r * row_bytes, act.data());
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * rows * static_cast<int64_t>(row_bytes));
}

// One GEMM benchmark's inputs: the ISA's kernel for `type`, rows x kCols weights, n_tok copies of
// the activation row converted to the weights' vec_dot_type as matmul does (rows of act_bytes),
// the packed-activation and output buffers, and 64-byte aligned packed activations and tile
// scratch as matmul's.
struct GemmSetup {
  const GemmKernel* g = nullptr;
  GemmWeights w{};
  size_t act_bytes = 0;
  std::vector<uint8_t> act, packed, tile_buf;
  std::vector<float> out;
  uint8_t* packed_at = nullptr;
  uint8_t* tile = nullptr;
};

uint8_t* aligned64(std::vector<uint8_t>& buf) {
  return buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
}
void setup_gemm(GemmSetup& s, Isa isa, DType type, int64_t rows, int64_t n_tok) {
  const IsaKernels& k = *isa_kernels(isa);
  const ResolvedKernels f = kernel_or_scalar(k, type);
  s.g = k.gemm(type);
  s.w = GemmWeights{weights(type, rows).data(), dtype_row_bytes(type, kCols), rows, kCols};
  const std::vector<float> x = activation_floats();
  s.act_bytes = dtype_row_bytes(f.vec_dot_type, kCols);
  s.act.resize(s.act_bytes * static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t) {
    if (f.vec_dot_type == DType::f32)
      std::memcpy(s.act.data() + t * s.act_bytes, x.data(), s.act_bytes);
    else
      f.quantize_activation(x.data(), s.act.data() + t * s.act_bytes, kCols);
  }
  s.packed.resize(s.g->packed_bytes(kCols, n_tok) + 64);
  s.packed_at = aligned64(s.packed);
  s.out.resize(static_cast<size_t>(rows * n_tok));
  s.tile_buf.resize(s.g->scratch_bytes(kCols) + 64);
  s.tile = aligned64(s.tile_buf);
}

void bm_packed(benchmark::State& state, Isa isa, DType type, int64_t rows, int64_t n_tok) {
  GemmSetup s;
  setup_gemm(s, isa, type, rows, n_tok);
  // In huge pages where the kernel gives them, as the engine packs its weights (model/weights.cpp):
  // on 4 KiB pages the TLB misses cost a decode tile a third of its speed on the Intel Xeon VM.
  HugePageBuffer pw = HugePageBuffer::allocate(s.g->packed_weight_bytes(rows, kCols)).value();
  auto* pwd = reinterpret_cast<uint8_t*>(pw.data());
  s.g->pack_weights(s.w, 0, rows, pwd);
  s.g->pack(s.act.data(), s.act_bytes, kCols, n_tok, s.packed_at);
  for (auto _ : state) {
    s.g->run_packed(pwd, rows, kCols, s.packed_at, n_tok, 0, rows, s.out.data(), rows, s.tile);
    benchmark::DoNotOptimize(s.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(pw.size()));
  state.SetItemsProcessed(state.iterations() * rows * n_tok);
}

// The per-call GEMM of a type without a load-time packed form (the float types): the activations
// packed and run() over all rows per iteration, single-threaded.
void bm_gemm(benchmark::State& state, Isa isa, DType type, int64_t rows, int64_t n_tok) {
  GemmSetup s;
  setup_gemm(s, isa, type, rows, n_tok);
  for (auto _ : state) {
    s.g->pack(s.act.data(), s.act_bytes, kCols, n_tok, s.packed_at);
    s.g->run(s.w, s.packed_at, n_tok, 0, rows, s.out.data(), rows, s.tile);
    benchmark::DoNotOptimize(s.out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows * n_tok);
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(rows * n_tok * kCols) * 1e-9 *
                                                    static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void bm_quantize(benchmark::State& state, Isa isa, DType type) {
  const FromFloatFn quantize = isa_kernels(isa)->from_float(type);
  const std::vector<float> x = activation_floats();
  std::vector<uint8_t> out(dtype_row_bytes(type, kCols));
  for (auto _ : state) {
    quantize(x.data(), out.data(), kCols);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kCols * static_cast<int64_t>(sizeof(float)));
}

void register_all() {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx, Isa::neon}) {
    if (!isa_supported(isa)) continue;
    const std::string isa_str(isa_name(isa));
    for (DType type : kWeightTypes) {
      for (int64_t rows : {kMaxRows, int64_t{128}}) {
        const std::string name = "vec_dot/" + std::string(dtype_name(type)) + "/" + isa_str + "/" +
                                 std::to_string(rows) + "x" + std::to_string(kCols);
        benchmark::RegisterBenchmark(name.c_str(), bm_vec_dot, isa, type, rows)->Unit(benchmark::kMicrosecond);
      }
    }
    for (DType type : kWeightTypes) {
      const GemmKernel* g = isa_kernels(isa)->gemm(type);
      if (g == nullptr || g->run_packed == nullptr) continue;
      for (int64_t rows : {kDramRows, kMaxRows, int64_t{128}})
        for (int64_t t : {1, 4, 8, 32, 128}) {
          const std::string name = "packed/" + std::string(dtype_name(type)) + "/" + isa_str + "/" +
                                   std::to_string(rows) + "x" + std::to_string(kCols) + "/t" + std::to_string(t);
          benchmark::RegisterBenchmark(name.c_str(), bm_packed, isa, type, rows, t)->Unit(benchmark::kMicrosecond);
        }
    }
    for (DType type : {DType::f32, DType::f16, DType::bf16}) {
      const GemmKernel* g = isa_kernels(isa)->gemm(type);
      if (g == nullptr) continue;
      for (int64_t t : {16, 128, 1024}) {
        const std::string name = "gemm/" + std::string(dtype_name(type)) + "/" + isa_str + "/512x" +
                                 std::to_string(kCols) + "/t" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), bm_gemm, isa, type, int64_t{512}, t)->Unit(benchmark::kMicrosecond);
      }
    }
    for (DType type : kActivationTypes) {
      const std::string name = "quantize/" + std::string(dtype_name(type)) + "/" + isa_str;
      benchmark::RegisterBenchmark(name.c_str(), bm_quantize, isa, type);
    }
  }
}

}  // namespace
}  // namespace edgelm::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("edgelm best ISA", std::string(edgelm::kernels::isa_name(edgelm::kernels::best_isa())));
  edgelm::kernels::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
