// Micro-benchmark of the decode attention kernel (kernels/attention_kernels.h) on every ISA this
// CPU supports: one token's query heads over a context of paged K/V rows in the stored type.
//
//  attention/qwen35/<kv type>/<isa>/...: Qwen3.5-0.8B's attention layers instead (2 KV heads of 4
//    query heads, head_dim 256); 6x8192/split128 is one decode step's attention at depth 8192.
//  attention/<kv type>/<isa>/<layers>x<positions>: TinyLlama-1.1B's attention shape (4 KV heads,
//    8 query heads each, head_dim 64), blocks of 16 positions laid out as the engine's KvStore
//    lays them out ([layer, K|V, block, position, row]; <type>_kt: K transposed in its blocks,
//    [layer, K, block, row element, position], as KvStore stores f16 and f32), the sequence's
//    blocks in order as a fresh server allocates them. Each iteration runs one layer's attention over the whole context; the layer advances every iteration, so with 22 layers the
//    context read per iteration (22 x 2 MB at f16, depth 2048) comes from DRAM as in a real
//    decode step, while 1 layer shows the kernel's speed from cache (1x512: from L2). One thread (the engine splits
//    a long context across threads at fixed positions; /split128 runs it as the engine's work
//    items, one call per 128 positions, the default AttnScratch::split_positions). Reports bytes of K and V read per second
//    and positions per second.
//
// Typical use: bench_attention --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/huge_pages.h"
#include "kernels/attention_kernels.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"

namespace edgelm::kernels {
namespace {

constexpr int32_t kBlock = 16;

// A model's attention heads: TinyLlama's (4 KV heads of 8 query heads, head_dim 64) and
// Qwen3.5-0.8B's attention layers (2 KV heads of 4, head_dim 256).
struct Heads {
  int32_t kv, gqa, dim;
  const char* name;
};
constexpr Heads kTinyLlama{4, 8, 64, ""};
constexpr Heads kQwen35{2, 4, 256, "qwen35/"};

size_t row_bytes(KvElem t, const Heads& h) {
  const int64_t n = int64_t{h.kv} * h.dim;
  switch (t) {
    case KvElem::f32: return static_cast<size_t>(n) * 4;
    case KvElem::f16: return static_cast<size_t>(n) * 2;
    case KvElem::q8_0: return static_cast<size_t>(n / 32) * 34;
  }
  return 0;
}

struct Context {
  HugePageBuffer data;          // [layer, 2, block, kBlock, row]; huge pages, as KvStore allocates its rows
  std::vector<int32_t> blocks;
  std::vector<float> q;
  size_t row = 0, layer_bytes = 0, block_stride = 0;

  Heads heads;

  Context(KvElem t, bool kt, const Heads& h, int32_t n_layer, int32_t n_pos)
      : data(HugePageBuffer::allocate(static_cast<size_t>(n_layer) * 2 * kBlock * row_bytes(t, h) *
                                      static_cast<size_t>((n_pos + kBlock - 1) / kBlock))
                 .value()),
        heads(h) {
    row = row_bytes(t, h);
    const int32_t n_blocks = (n_pos + kBlock - 1) / kBlock;
    block_stride = kBlock * row;
    layer_bytes = 2 * block_stride * static_cast<size_t>(n_blocks);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    if (t == KvElem::f16) {
      auto* h = reinterpret_cast<uint16_t*>(data.data());
      for (size_t i = 0; i < data.size() / 2; ++i) h[i] = fp32_to_fp16(u(rng));
    } else if (t == KvElem::q8_0 && kt) {  // groups of 32 elements: 16 slots' scales, then quants (KtLayout)
      for (size_t b = 0; b + 34 * kBlock <= data.size(); b += 34 * kBlock) {
        const uint16_t d = fp32_to_fp16(0.01f);
        for (size_t s = 0; s < kBlock; ++s) std::memcpy(data.data() + b + 2 * s, &d, 2);
        for (size_t i = 2 * kBlock; i < 34 * kBlock; ++i) data.data()[b + i] = static_cast<std::byte>(rng() & 0x7f);
      }
    } else if (t == KvElem::q8_0) {
      for (size_t b = 0; b + 34 <= data.size(); b += 34) {
        const uint16_t d = fp32_to_fp16(0.01f);
        std::memcpy(data.data() + b, &d, 2);
        for (int i = 0; i < 32; ++i) data.data()[b + 2 + static_cast<size_t>(i)] = static_cast<std::byte>(rng() & 0x7f);
      }
    } else {
      auto* f = reinterpret_cast<float*>(data.data());
      for (size_t i = 0; i < data.size() / 4; ++i) f[i] = u(rng);
    }
    blocks.resize(static_cast<size_t>(n_blocks));
    for (int32_t i = 0; i < n_blocks; ++i) blocks[static_cast<size_t>(i)] = i;
    q.resize(static_cast<size_t>(h.kv) * h.gqa * h.dim);
    for (float& x : q) x = u(rng);
  }

  AttnKv layer(KvElem t, int32_t l, bool k_transposed) const {
    AttnKv kv;
    kv.type = t;
    kv.k_base = data.data() + static_cast<size_t>(l) * layer_bytes;
    kv.v_base = kv.k_base + layer_bytes / 2;
    kv.block_stride = block_stride;
    kv.row_bytes = row;
    kv.block_size = kBlock;
    kv.blocks = blocks.data();
    kv.head_dim = heads.dim;
    kv.k_transposed = k_transposed;  // the values are random either way
    return kv;
  }
};

void run(benchmark::State& state, Isa isa, KvElem t, bool kt, const Heads& h, int32_t n_layer, int32_t n_pos,
         int32_t split) {
  const AttentionKernels* k = attention_kernels(isa);
  if (k == nullptr) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const Context ctx(t, kt, h, n_layer, n_pos);
  const int32_t n_q = h.kv * h.gqa;
  std::vector<float> m(static_cast<size_t>(n_q)), l(static_cast<size_t>(n_q)),
      acc(static_cast<size_t>(n_q) * h.dim);
  int32_t layer = 0;
  for (auto _ : state) {
    const AttnKv kv = ctx.layer(t, layer, kt);
    for (int32_t p0 = 0; p0 < n_pos; p0 += split)
      attention_partial(*k, kv, ctx.q.data(), h.kv, h.gqa, 0.125f, p0, std::min(n_pos, p0 + split),
                        {m.data(), l.data(), acc.data()});
    benchmark::DoNotOptimize(acc.data());
    layer = layer + 1 == n_layer ? 0 : layer + 1;
  }
  state.SetBytesProcessed(state.iterations() * int64_t{n_pos} * 2 * static_cast<int64_t>(ctx.row));
  state.SetItemsProcessed(state.iterations() * n_pos);
}

// (layers, positions, positions per call). 1x512 stays in L2: the kernel's own speed, least
// disturbed by other tenants of a shared L3.
constexpr struct Shape {
  const Heads* heads;
  int32_t n_layer, n_pos, split;
} kShapes[] = {{&kTinyLlama, 1, 512, 512},   {&kTinyLlama, 1, 2048, 2048},  {&kTinyLlama, 1, 2048, 128},
               {&kTinyLlama, 22, 2048, 2048}, {&kTinyLlama, 22, 2048, 128}, {&kQwen35, 1, 512, 512},
               {&kQwen35, 6, 8192, 128}};

void register_all() {
  // "_kt": K transposed in its blocks, as kv::KvStore stores it (AttnKv::k_transposed).
  const struct {
    KvElem t;
    bool kt;
    const char* name;
  } types[] = {{KvElem::f16, true, "f16_kt"},
               {KvElem::f16, false, "f16"},
               {KvElem::q8_0, true, "q8_0_kt"},
               {KvElem::q8_0, false, "q8_0"},
               {KvElem::f32, true, "f32_kt"},
               {KvElem::f32, false, "f32"}};
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon}) {
    if (!isa_supported(isa)) continue;
    for (const auto& ty : types)
      for (const auto [heads, n_layer, n_pos, split] : kShapes) {
        std::string name = std::string("attention/") + heads->name + ty.name + "/" + std::string(isa_name(isa)) + "/" +
                           std::to_string(n_layer) + "x" + std::to_string(n_pos);
        if (split < n_pos) name += "/split" + std::to_string(split);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& s) { run(s, isa, ty.t, ty.kt, *heads, n_layer, n_pos, split); });
      }
  }
}

}  // namespace
}  // namespace edgelm::kernels

int main(int argc, char** argv) {
  edgelm::kernels::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
