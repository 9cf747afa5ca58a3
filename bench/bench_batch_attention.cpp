// Micro-benchmark of the engine's decode attention (engine/batch_attention.h) as a step runs it:
// attention_plan + attention_run over a real paged KvStore, on the engine's thread pool, for
// every ISA this CPU supports.
//
//  batch_attention/<kv type>/<isa>/t<threads>/n<tokens>xd<depth>: TinyLlama-1.1B's attention
//    shape (32 query heads over 4 KV heads, head_dim 64, 22 layers), blocks of 16 positions
//    (the engine's default), n sequences each decoding one token after `depth` positions of
//    context. Each iteration runs one layer (the layer advances every iteration, so the 22
//    layers' K/V, 46 MB at f16 and depth 2048, come from DRAM as in a real decode step):
//    split-K chunks over the threads, the folds, the finish.
//  batch_attention/qwen35/...: Qwen3.5-0.8B's attention layers instead (8 query heads over 2 KV
//    heads, head_dim 256): t2/n1xd8192 is one layer of a decode step at depth 8192, 16.8 MB of
//    f16 K/V. The model has 6 such layers (101 MB); the benchmark cycles through 36 (605 MB) so
//    they come from DRAM even under a 480 MB L3, as they do in decode, where the weights stream
//    between them. Where bench_attention
//    times the kernel, this times what the engine adds around it (balance over the threads,
//    dispatches, folds); it is the figure behind `edgelm bench -d 2048` minus the weights.
//
// Typical use: bench_batch_attention --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch_attention.h"
#include "engine/batch_forward.h"
#include "kernels/attention_kernels.h"
#include "kernels/isa.h"
#include "kv/kv_store.h"

namespace edgelm::engine {
namespace {

constexpr int32_t kBlock = 16;

// The attention heads of a model: TinyLlama-1.1B's and Qwen3.5-0.8B's attention layers.
struct Heads {
  int32_t n_layer, n_head, n_head_kv, head_dim;
  const char* name;
};
constexpr Heads kTinyLlama{22, 32, 4, 64, ""};
constexpr Heads kQwen35{36, 8, 2, 256, "qwen35/"};

struct Context {
  model::ModelConfig c;
  kv::KvStore store;
  std::vector<std::vector<kv::BlockId>> tables;
  std::vector<BatchSeq> seqs;
  std::vector<int32_t> tok_seq, tok_pos;
  std::vector<float> q, out;

  static model::ModelConfig shape(const Heads& h) {
    model::ModelConfig c;
    c.n_layer = h.n_layer;
    c.n_head = h.n_head;
    c.n_head_kv = h.n_head_kv;
    c.head_dim = h.head_dim;
    c.n_embd = h.n_head * h.head_dim;
    return c;
  }

  Context(const Heads& h, kv::KvType type, int32_t n_seqs, int32_t depth)
      : c(shape(h)), store(kv::KvStore::create(c, n_seqs * ((depth + kBlock) / kBlock), kBlock, type).value()) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(c.n_embd_kv())), v(k.size());
    const int32_t per_seq = (depth + kBlock) / kBlock;  // blocks for positions [0, depth]
    kv::BlockId next = 0;
    for (int32_t s = 0; s < n_seqs; ++s) {
      auto& t = tables.emplace_back();
      for (int32_t b = 0; b < per_seq; ++b) t.push_back(next++);
      for (int32_t pos = 0; pos <= depth; ++pos)
        for (int32_t l = 0; l < c.n_layer; ++l) {
          for (auto& x : k) x = nd(rng);
          for (auto& x : v) x = nd(rng);
          store.write(l, t[static_cast<size_t>(pos / kBlock)], pos % kBlock, k.data(), v.data());
        }
    }
    for (int32_t s = 0; s < n_seqs; ++s) {
      BatchSeq b;
      b.pos0 = depth;
      b.n_tokens = 1;
      b.blocks = tables[static_cast<size_t>(s)];
      b.n_logits = 1;
      seqs.push_back(b);
      tok_seq.push_back(s);
      tok_pos.push_back(depth);
    }
    q.resize(static_cast<size_t>(n_seqs) * static_cast<size_t>(c.n_head * c.head_dim));
    for (auto& x : q) x = nd(rng);
    out.resize(q.size());
  }
};

void run(benchmark::State& state, const Heads& h, kernels::Isa isa, kv::KvType type, int threads, int32_t n_seqs,
         int32_t depth) {
  const kernels::AttentionKernels* k = kernels::attention_kernels(isa);
  if (k == nullptr) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  Context ctx(h, type, n_seqs, depth);
  ThreadPool pool(threads);
  AttnScratch s;
  const auto n = static_cast<int64_t>(ctx.tok_seq.size());
  int32_t layer = 0;
  for (auto _ : state) {
    attention_plan(s, n, ctx.tok_pos.data(), ctx.c.n_head, ctx.c.head_dim, pool.n_threads());
    const AttnLayer a{ctx.store,          layer,          ctx.seqs.data(), ctx.tok_seq.data(),
                      ctx.tok_pos.data(), ctx.q.data(),   ctx.out.data(),  ctx.c.n_head,
                      ctx.c.n_head_kv,    ctx.c.head_dim, 0.125f,          k};
    attention_run(a, s, pool);
    benchmark::DoNotOptimize(ctx.out.data());
    layer = (layer + 1) % ctx.c.n_layer;
  }
  state.counters["positions"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n_seqs * (depth + 1), benchmark::Counter::kIsRate);
}

void register_all() {
  struct Ty {
    const char* name;
    kv::KvType t;
  };
  for (const Ty ty : {Ty{"f16", kv::KvType::f16}, Ty{"q8_0", kv::KvType::q8_0}})
    for (const kernels::Isa isa :
         {kernels::Isa::avx2, kernels::Isa::avx512, kernels::Isa::neon, kernels::Isa::scalar}) {
      if (kernels::attention_kernels(isa) == nullptr) continue;
      for (const auto& [heads, threads, n_seqs, depth] :
           {std::tuple{&kTinyLlama, 2, 1, 2048}, std::tuple{&kTinyLlama, 2, 8, 512}, std::tuple{&kTinyLlama, 1, 1, 2048},
            std::tuple{&kQwen35, 2, 1, 8192}}) {
        const std::string name = std::string("batch_attention/") + heads->name + ty.name + "/" + std::string(kernels::isa_name(isa)) +
                                 "/t" + std::to_string(threads) + "/n" + std::to_string(n_seqs) + "xd" +
                                 std::to_string(depth);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run(st, *heads, isa, ty.t, threads, n_seqs, depth);
        })->Unit(benchmark::kMicrosecond);
      }
    }
}

}  // namespace
}  // namespace edgelm::engine

int main(int argc, char** argv) {
  edgelm::engine::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
