// A hybrid recurrent model (qwen35: Gated DeltaNet + gated attention) through the whole engine:
// concurrent, chunked and preempted greedy requests equal each request alone through the
// reference forward; a repeated prompt is recomputed (no prefix reuse: the recurrent state
// exists only for a sequence's own history); speculative decoding is refused at startup; and
// forward_batch refuses state slots that are missing, shared or at another position, without
// touching them.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "model/synthetic.h"

namespace edgelm::engine {
namespace {

using test::greedy;
using test::run_all;

std::unique_ptr<model::Model> hybrid_model() {
  model::SyntheticSpec s;  // 4 layers: DeltaNet 0-2, attention 3
  s.arch = "qwen35";
  s.n_layer = 4;
  s.head_dim = 32;
  s.n_rot = 16;
  s.n_vocab = 96;
  s.seed = 51;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto m = model::Model::load(std::move(file).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

// Greedy continuation of one prompt through the reference forward, from a fresh cache.
std::vector<int32_t> reference_greedy(const model::Model& m, const std::vector<int32_t>& prompt, int32_t n) {
  ThreadPool pool(1);
  model::KvCache cache(m.config(), 256);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  std::vector<int32_t> out;
  EXPECT_TRUE(m.forward(prompt, cache, logits, pool).ok());
  for (int32_t i = 0; i < n; ++i) {
    const auto t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    EXPECT_TRUE(m.forward(std::span(&t, 1), cache, logits, pool).ok());
  }
  return out;
}

EngineOptions options(int32_t n_blocks) {
  EngineOptions o;
  o.block_size = 4;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = static_cast<size_t>(n_blocks) * 4 * 2 * 2 * 32 * sizeof(float);  // 1 K/V layer of 64
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;
  return o;
}

TEST(EngineHybrid, ConcurrentChunkedAndPreemptedRequestsEqualTheReference) {
  const auto m = hybrid_model();
  ASSERT_EQ(m->config().n_kv_layers(), 1);
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  for (const int32_t n_blocks : {256, 12}) {  // plenty of KV; a pool so small that sequences are preempted
    SCOPED_TRACE(n_blocks);
    EngineOptions o = options(n_blocks);
    o.scheduler.max_batch_tokens = 8;  // prompts arrive in chunks, mixed with decodes
    o.scheduler.max_batch_size = 4;
    o.scheduler.watermark = 1.0;
    auto e = Engine::create(runner, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::mt19937 rng(7);
    std::map<RequestId, std::vector<int32_t>> want;
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(3 + rng() % 14));
      for (int32_t& t : p) t = static_cast<int32_t>(rng() % 96);
      want[(*e)->add_request(greedy(p, 10)).value()] = reference_greedy(*m, p, 10);
    }
    const auto got = run_all(**e);
    for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    if (n_blocks == 12) EXPECT_GT((*e)->stats().n_preemptions, 0);
    EXPECT_EQ((*e)->stats().kv_blocks_used, 0);
    EXPECT_EQ((*e)->stats().state_slots_live, 0) << "every finished sequence returned its state slot";
    const auto& c = m->config();
    const int64_t slot_bytes = int64_t{c.n_recurrent_layers()} * c.deltanet.state_floats() * 4;
    EXPECT_GE((*e)->stats().state_bytes, slot_bytes);          // slots are kept for reuse
    EXPECT_LE((*e)->stats().state_bytes, 4 * 2 * slot_bytes);  // at most batch cap + preempted ones
  }
}

TEST(EngineHybrid, RepeatedPromptIsRecomputedNotReused) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, options(64)).value();
  const std::vector<int32_t> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> cached;
  std::vector<std::vector<int32_t>> outs;
  for (int round = 0; round < 2; ++round) {
    Request r = greedy(p, 6);
    std::vector<int32_t> toks;
    int32_t n_cached = -1;
    r.on_event = [&](const TokenEvent& ev) {
      if (ev.token >= 0) toks.push_back(ev.token);
      if (ev.finish != Finish::none) n_cached = ev.n_prompt_cached;
    };
    ASSERT_TRUE(e->add_request(std::move(r)).ok());
    run_all(*e);
    outs.push_back(toks);
    cached.push_back(n_cached);
  }
  EXPECT_EQ(outs[0], reference_greedy(*m, p, 6));
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_EQ(cached[1], 0) << "a hybrid model cannot reuse another request's KV prefix";
}

TEST(EngineHybrid, SpeculativeDecodingIsRefused) {
  const auto m = hybrid_model();
  ThreadPool pool(1);
  ModelRunner runner(*m, pool);
  EngineOptions o = options(64);
  o.spec.mode = SpecMode::ngram;
  auto e = Engine::create(runner, nullptr, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("hybrid recurrent"), std::string::npos) << e.error().message;
}

TEST(EngineHybrid, ForwardBatchChecksStateSlots) {
  const auto m = hybrid_model();
  ThreadPool pool(1);
  BatchScratch scratch;
  auto store = kv::KvStore::create(m->config(), 8, 4, kv::KvType::f32).value();
  kv::StateStore states(m->config());
  const int32_t a = states.acquire(), b = states.acquire();
  const std::vector<kv::BlockId> ta = {0, 1}, tb = {2, 3};
  const auto V = static_cast<size_t>(m->config().n_vocab);
  std::vector<float> one(V), two(2 * V);
  auto call = [&](StepBatch batch, std::span<float> logits) {
    return forward_batch(*m, batch, store, logits, pool, scratch);
  };
  auto expect_error = [](const Status& st, const char* what) {
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_NE(st.error().message.find(what), std::string::npos) << st.error().message;
  };
  expect_error(call({{1, 2, 3}, {{0, 3, ta, 1, a}}, 0, nullptr}, one), "recurrent state store");
  expect_error(call({{1, 2, 3}, {{0, 3, ta, 1, 99}}, 0, &states}, one), "no live recurrent state slot");
  ASSERT_TRUE(call({{1, 2, 3}, {{0, 3, ta, 1, a}}, 0, &states}, one).ok());
  EXPECT_EQ(states.n_tokens(a), 3);
  const std::vector<float> first(states.ssm(a, 0), states.ssm(a, 0) + 16);
  expect_error(call({{4, 5}, {{2, 2, ta, 1, a}}, 0, &states}, one), "cannot be rewound");
  expect_error(call({{4}, {{3, 1, ta, 1, a}, {0, 1, tb, 1, a}}, 0, &states}, two), "tokens in all");
  expect_error(call({{4, 5}, {{3, 1, ta, 1, a}, {0, 1, tb, 1, a}}, 0, &states}, two), "share recurrent state slot");
  EXPECT_EQ(states.n_tokens(a), 3) << "a refused step leaves the state alone";
  EXPECT_EQ(std::vector<float>(states.ssm(a, 0), states.ssm(a, 0) + 16), first);
  ASSERT_TRUE(call({{4, 5}, {{3, 1, ta, 1, a}, {0, 1, tb, 1, b}}, 0, &states}, two).ok());
  EXPECT_EQ(states.n_tokens(a), 4);
  EXPECT_EQ(states.n_tokens(b), 1);
  // Restarting a slot at position 0 resets it: the same tokens give the first step's logits.
  std::vector<float> again(V), first_logits(V);
  ASSERT_TRUE(call({{1, 2, 3}, {{0, 3, tb, 1, b}}, 0, &states}, first_logits).ok());
  ASSERT_TRUE(call({{1, 2, 3}, {{0, 3, ta, 1, a}}, 0, &states}, again).ok());
  EXPECT_EQ(again, first_logits);
}

}  // namespace
}  // namespace edgelm::engine
