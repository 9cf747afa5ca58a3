// Gemma 4 (text) through the whole engine: concurrent, chunked and preempted greedy requests
// whose prompts and continuations run past the sliding window give exactly the tokens of each
// request alone through the reference forward; a repeated prompt reuses its cached prefix
// (the shared-KV layers need no K/V of their own, so the cached blocks hold everything).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "model/synthetic.h"

namespace edgelm::engine {
namespace {

using test::greedy;
using test::reference_greedy;
using test::run_all;

std::unique_ptr<model::Model> gemma4_model() {
  model::SyntheticSpec s;  // 7 layers (2 local : 1 global), window 8, the last 3 share K/V, PLE of 8
  EXPECT_TRUE(model::apply_synthetic_shape(s, "gemma4-tiny").ok());
  s.n_vocab = 96;
  s.seed = 61;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto m = model::Model::load(std::move(file).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

EngineOptions options(const model::ModelConfig& c, int32_t n_blocks) {
  EngineOptions o;
  o.block_size = 4;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = static_cast<size_t>(n_blocks) * 4 * kv::kv_bytes_per_token(c, o.kv_type);
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;
  return o;
}

TEST(EngineGemma4, ConcurrentChunkedAndPreemptedRequestsEqualTheReference) {
  const auto m = gemma4_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  for (const int32_t n_blocks : {256, 14}) {  // plenty of KV; a pool so small that sequences are preempted
    SCOPED_TRACE(n_blocks);
    EngineOptions o = options(m->config(), n_blocks);
    o.scheduler.max_batch_tokens = 8;  // prompts arrive in chunks, mixed with decodes
    o.scheduler.max_batch_size = 4;
    o.scheduler.watermark = 1.0;
    auto e = Engine::create(runner, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::mt19937 rng(9);
    std::map<RequestId, std::vector<int32_t>> want;
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(3 + rng() % 18));  // up to 20 tokens: past the window of 8
      for (int32_t& t : p) t = static_cast<int32_t>(rng() % 96);
      want[(*e)->add_request(greedy(p, 12)).value()] = reference_greedy(*m, p, 12);
    }
    const auto got = run_all(**e);
    for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    if (n_blocks == 14) EXPECT_GT((*e)->stats().n_preemptions, 0);
    EXPECT_EQ((*e)->stats().kv_blocks_used, 0);
  }
}

TEST(EngineGemma4, RepeatedPromptReusesItsPrefix) {
  const auto m = gemma4_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, options(m->config(), 64)).value();
  const std::vector<int32_t> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const std::vector<int32_t> want = reference_greedy(*m, p, 6);
  for (int round = 0; round < 2; ++round) {
    const test::OneRun run = test::run_one(*e, greedy(p, 6));
    EXPECT_EQ(run.tokens, want) << "round " << round;
    if (round == 1) EXPECT_GT(run.n_cached, 0) << "the second run reuses the cached prefix";
  }
}

}  // namespace
}  // namespace edgelm::engine
