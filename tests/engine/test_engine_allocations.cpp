// A warm engine step allocates nothing: schedule -> forward_batch -> sample -> update, over a
// decode batch, counted by replacing the global operator new of this test binary.
//
// Two setups: a synthetic model wide enough that every matmul and per-token loop runs on the
// thread pool (so parallel_for dispatch is covered) with quantized Q8_0 weights and an f16 KV
// store; and the real stories260K with its tokenizer (text pieces per token) and the full
// sampling chain (top-k, top-p, min-p, temperature, penalties). Each warms up (prefill plus a
// few decode steps), then counts the allocations of the next steps, which cross KV block
// boundaries (a block is reserved and a full one published on the way).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "model/quantize.h"
#include "model/synthetic.h"
#include "support/counting_new.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

// Steps `n_warm` times, then counts the allocations of each of the next `n_count` steps, with
// every request still decoding; returns the total.
int64_t count_warm_step_allocations(Engine& e, int n_warm, int n_count) {
  for (int i = 0; i < n_warm; ++i) e.step();
  EXPECT_EQ(e.stats().n_waiting, 0);
  int64_t total = 0;
  for (int i = 0; i < n_count; ++i) {
    const int64_t before = test::heap_allocations();
    const std::vector<TokenEvent>& events = e.step();
    const int64_t n = test::heap_allocations() - before;
    EXPECT_EQ(n, 0) << "step " << n_warm + i;
    total += n;
    EXPECT_EQ(events.size(), 4u) << "every request decodes a token per step";
    for (const TokenEvent& ev : events) EXPECT_EQ(ev.finish, Finish::none);
  }
  return total;
}

EngineOptions options() {
  EngineOptions o;
  o.kv_type = kv::KvType::f16;
  o.kv_memory_bytes = size_t{16} << 20;
  o.block_size = 8;
  o.check_invariants = false;  // its bookkeeping vectors are a debugging aid, not part of a step
  o.scheduler.target_step_ms = 0;
  return o;
}

TEST(EngineAllocations, WarmDecodeStepOnThePoolAllocatesNothing) {
  model::SyntheticSpec spec;
  spec.arch = "qwen2";
  spec.n_embd = 256;
  spec.n_ff = 1024;  // SwiGLU of a 4-token step runs on the pool too
  spec.n_head = 8;
  spec.n_head_kv = 2;
  spec.n_vocab = 300;
  auto file = model::make_synthetic_model(spec);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto m = model::Model::load(std::move(file).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  ThreadPool pool(2);
  auto q8_file = model::quantize_model((*m)->file(), model::QuantPreset::q8_0, pool);
  ASSERT_TRUE(q8_file.ok()) << q8_file.error().message;
  auto q8 = model::Model::load(std::move(q8_file).value());
  ASSERT_TRUE(q8.ok()) << q8.error().message;
  ModelRunner runner(**q8, pool);
  auto e = Engine::create(runner, nullptr, options());
  ASSERT_TRUE(e.ok()) << e.error().message;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt.assign(static_cast<size_t>(11 + i), 5 + i);
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = 60;
    r.stop_at_eog = false;
    ASSERT_TRUE((*e)->add_request(std::move(r)).ok());
  }
  EXPECT_EQ(count_warm_step_allocations(**e, 4, 20), 0);
}

TEST(EngineAllocations, WarmDecodeStepWithTextAndSamplingAllocatesNothing) {
  auto lm = load_model(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  ASSERT_TRUE(lm.ok()) << lm.error().message;
  ThreadPool pool(2);
  ModelRunner runner(*lm->model, pool);
  auto e = Engine::create(runner, lm->tokenizer.get(), options());
  ASSERT_TRUE(e.ok()) << e.error().message;
  const auto prompt = lm->tokenizer->encode("Once upon a time", /*add_special=*/true, /*parse_special=*/false);
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = prompt;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.sampling.repeat_penalty = 1.1f;
    r.sampling.presence_penalty = 0.1f;
    r.max_new_tokens = 60;
    r.stop_at_eog = false;
    r.cache_prefix = i % 2 == 0;  // two share the prompt's blocks, two do not
    ASSERT_TRUE((*e)->add_request(std::move(r)).ok());
  }
  EXPECT_EQ(count_warm_step_allocations(**e, 4, 20), 0);
}

}  // namespace
}  // namespace edgelm::engine
