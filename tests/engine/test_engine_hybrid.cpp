// A hybrid recurrent model (qwen35: Gated DeltaNet + gated attention) through the whole engine:
// concurrent, chunked and preempted greedy requests equal each request alone through the
// reference forward (without and with state snapshots, prompts sharing prefixes); without
// snapshots a repeated prompt is recomputed (the recurrent state exists only for a sequence's
// own history); the recurrent states come out of --kv-memory; and forward_batch refuses state
// slots that are missing, shared or at another position, and bad captures, without touching
// them. Prefix reuse through snapshots and speculation: test_engine_snapshots.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "hybrid_model.h"
#include "model/deltanet.h"
#include "model/synthetic.h"

namespace edgelm::engine {
namespace {

using test::greedy;
using test::hybrid_model;
using test::hybrid_options;
using test::reference_greedy;
using test::run_all;

TEST(EngineHybrid, ConcurrentChunkedAndPreemptedRequestsEqualTheReference) {
  const auto m = hybrid_model();
  ASSERT_EQ(m->config().n_kv_layers(), 1);
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  // Plenty of KV; a pool so small that sequences are preempted; both with snapshots every block
  // (the prompts share prefixes, so resumed and later requests continue from snapshots).
  struct Case {
    int32_t n_blocks, block_size, interval, n_snapshots;
  };
  for (const Case c : {Case{256, 4, 0, 0}, Case{12, 16, 0, 0}, Case{256, 4, 1, 16}, Case{12, 16, 1, 2}}) {
    const int32_t n_blocks = c.n_blocks, interval = c.interval;
    SCOPED_TRACE(testing::Message() << n_blocks << " blocks of " << c.block_size << ", snapshot interval " << interval);
    EngineOptions o = hybrid_options(*m, n_blocks, 4, interval, c.n_snapshots, false, c.block_size);
    o.scheduler.max_batch_tokens = 8;  // prompts arrive in chunks, mixed with decodes
    o.scheduler.watermark = 1.0;
    auto e = Engine::create(runner, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    ASSERT_EQ((*e)->options().scheduler.max_batch_size, 4);
    ASSERT_LE((*e)->stats().kv_blocks, n_blocks);
    ASSERT_EQ((*e)->stats().state_snapshot_capacity > 0, interval > 0);
    std::mt19937 rng(7);
    std::map<RequestId, std::vector<int32_t>> want;
    const std::vector<int32_t> shared = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(3 + rng() % 14));
      for (int32_t& t : p) t = static_cast<int32_t>(rng() % 96);
      if (i % 2 == 1) p.insert(p.begin(), shared.begin(), shared.end());
      want[(*e)->add_request(greedy(p, 40)).value()] = reference_greedy(*m, p, 40);
    }
    const auto got = run_all(**e);
    for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    const EngineStats st = (*e)->stats();
    if (n_blocks == 12) {
      EXPECT_GT(st.n_preemptions, 0);
    }
    if (interval > 0) {
      EXPECT_GT(st.prefix_tokens_hit, 0) << "later requests continue the shared prefix from a snapshot";
      EXPECT_GT(st.state_snapshots, 0);
    } else {
      EXPECT_EQ(st.state_snapshots, 0);
      EXPECT_EQ(st.prefix_tokens_hit, 0);
    }
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.state_slots_live, 0) << "every finished sequence returned its state slot";
    const auto slot_bytes = static_cast<int64_t>(test::state_bytes(*m));
    EXPECT_GE(st.state_bytes, slot_bytes);      // slots are kept for reuse
    EXPECT_LE(st.state_bytes, 4 * slot_bytes);  // at most the batch cap: waiting sequences hold none
  }
}

TEST(EngineHybrid, StatesComeOutOfTheKvBudget) {
  const auto m = hybrid_model();
  ThreadPool pool(1);
  ModelRunner runner(*m, pool);
  const size_t slot = test::state_bytes(*m), block = 4 * 2 * 64 * sizeof(float);
  EngineOptions o = hybrid_options(*m, 40, 4);
  o.kv_memory_bytes = 4 * slot + 40 * block;
  auto e = Engine::create(runner, nullptr, o).value();
  EXPECT_EQ(e->stats().kv_blocks, 40) << "four live states first, the rest is KV";
  EXPECT_EQ(e->stats().state_snapshot_capacity, 0);
  // States beyond half the budget lower the batch size instead.
  o.kv_memory_bytes = 4 * slot;
  e = Engine::create(runner, nullptr, o).value();
  EXPECT_EQ(e->options().scheduler.max_batch_size, 2);
  EXPECT_EQ(e->stats().kv_blocks, static_cast<int32_t>(2 * slot / block));
  // Snapshots share the rest in proportion (one per interval blocks), at most half of it.
  o.kv_memory_bytes = 4 * slot + 1000 * block;
  o.state_snapshot_interval = 1;
  e = Engine::create(runner, nullptr, o).value();
  const EngineStats st = e->stats();
  EXPECT_GT(st.state_snapshot_capacity, 0);
  EXPECT_LE(static_cast<size_t>(st.state_snapshot_capacity) * slot, 500 * block);
  EXPECT_LE(
      4 * slot + static_cast<size_t>(st.state_snapshot_capacity) * slot + static_cast<size_t>(st.kv_blocks) * block,
      o.kv_memory_bytes);
  EXPECT_GE(static_cast<size_t>(st.kv_blocks) * block, 500 * block - block);
  // Too little for one state and its KV: refused, naming the states.
  o.kv_memory_bytes = slot;
  auto bad = Engine::create(runner, nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("recurrent state"), std::string::npos) << bad.error().message;
}

// reserve() commits slots ahead (bench --concurrency's prefault_kv): acquire then takes them
// without allocating, zeroed whatever their last sequence left; an engine that prefaults holds
// one per batch slot before its first step.
TEST(EngineHybrid, ReservedStateSlotsAreReusedZeroed) {
  const auto m = hybrid_model();
  kv::StateStore states(m->config());
  states.reserve(3);
  EXPECT_EQ(states.n_bytes(), 3 * states.slot_bytes());
  EXPECT_EQ(states.n_live(), 0);
  const int32_t a = states.acquire();
  std::fill(states.data(a), states.data(a) + states.slot_floats(), 7.0f);
  states.set_n_tokens(a, 5);
  states.release(a);
  for (int i = 0; i < 3; ++i) {
    const int32_t s = states.acquire();
    EXPECT_EQ(states.n_tokens(s), 0);
    EXPECT_TRUE(std::all_of(states.data(s), states.data(s) + states.slot_floats(), [](float x) { return x == 0.0f; }))
        << "slot " << s;
  }
  EXPECT_EQ(states.n_bytes(), 3 * states.slot_bytes()) << "three acquires fit the reserve";
  states.reserve(2);
  EXPECT_EQ(states.n_bytes(), 3 * states.slot_bytes()) << "reserve never shrinks nor adds below the count";

  ThreadPool pool(1);
  ModelRunner runner(*m, pool);
  EngineOptions o = hybrid_options(*m, 40, 4);
  o.prefault_kv = true;
  auto e = Engine::create(runner, nullptr, o).value();
  EXPECT_EQ(e->stats().state_bytes,
            int64_t{e->options().scheduler.max_batch_size} * static_cast<int64_t>(states.slot_bytes()));
}

TEST(EngineHybrid, WithoutSnapshotsARepeatedPromptIsRecomputed) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, hybrid_options(*m, 64, 4, /*interval=*/0)).value();
  const std::vector<int32_t> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> cached;
  std::vector<std::vector<int32_t>> outs;
  for (int round = 0; round < 2; ++round) {
    const test::OneRun run = test::run_one(*e, greedy(p, 6));
    outs.push_back(run.tokens);
    cached.push_back(run.n_cached);
  }
  EXPECT_EQ(outs[0], reference_greedy(*m, p, 6));
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_EQ(cached[1], 0) << "without snapshots a hybrid model cannot reuse another request's KV prefix";
}

// A ModelRunner that records every slice of every step: its positions, whether it ends its
// sequence's pending tokens (n_logits > 0), and its state captures (snapshots and splits).
struct RecordingRunner final : StepModel {
  struct Slice {
    int32_t pos0, n_tokens, n_logits;
    std::vector<int32_t> captures;
  };
  ModelRunner inner;
  std::vector<Slice> slices;
  RecordingRunner(const model::Model& m, ThreadPool& pool) : inner(m, pool) {}
  const model::ModelConfig& config() const override { return inner.config(); }
  Status forward(const StepBatch& batch, kv::KvStore& store, std::span<float> logits) override {
    for (const BatchSeq& q : batch.seqs) {
      Slice sl{q.pos0, q.n_tokens, q.n_logits, {}};
      for (const StateCapture& c : q.captures) sl.captures.push_back(c.n_tokens);
      slices.push_back(std::move(sl));
    }
    return inner.forward(batch, store, logits);
  }
};

// Prompts longer than the delta rule's chunk (model/deltanet.h: whole aligned chunks run in the
// chunked form), arriving together under a step budget that is not a multiple of the chunk,
// with snapshots every 64 tokens, then a repeat that continues from a snapshot: the tokens equal
// the reference forward's (one run over each whole prompt); a prompt piece that does not finish
// its prompt ends at a multiple of the chunk whenever it reaches one (the scheduler's
// prompt_align), and every snapshot boundary splits the recurrence, taken or not, so the runs
// depend on positions alone.
TEST(EngineHybrid, LongPromptsRunWholeAlignedChunksAndEqualTheReference) {
  const auto m = hybrid_model();
  const int32_t C = static_cast<int32_t>(model::kDeltaChunk);
  ThreadPool pool(2);
  RecordingRunner runner(*m, pool);
  EngineOptions o = hybrid_options(*m, 96, 4, /*interval=*/4, /*n_snapshots=*/8, false, /*block_size=*/16);
  o.scheduler.max_batch_tokens = 100;
  auto e = Engine::create(runner, nullptr, o).value();
  std::mt19937 rng(3);
  auto prompt = [&](size_t n) {
    std::vector<int32_t> p(n);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 96);
    return p;
  };
  const std::vector<int32_t> a = prompt(150), c = prompt(90);
  std::vector<int32_t> b(a.begin(), a.begin() + 130);
  const std::vector<int32_t> b_tail = prompt(70);
  b.insert(b.end(), b_tail.begin(), b_tail.end());  // 200 tokens, the first 130 shared with a
  std::map<RequestId, std::vector<int32_t>> want;
  for (const std::vector<int32_t>* p : {&a, static_cast<const std::vector<int32_t>*>(&b), &c})
    want[e->add_request(greedy(*p, 10)).value()] = reference_greedy(*m, *p, 10);
  const auto got = run_all(*e);
  for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
  const test::OneRun again = test::run_one(*e, greedy(b, 10));
  EXPECT_EQ(again.tokens, reference_greedy(*m, b, 10));
  EXPECT_EQ(again.n_cached, 192) << "the repeat continues from the snapshot after 192 tokens";

  const int32_t every = 4 * 16;
  int32_t aligned = 0;
  for (const RecordingRunner::Slice& sl : runner.slices) {
    const int32_t end = sl.pos0 + sl.n_tokens;
    SCOPED_TRACE(testing::Message() << "slice [" << sl.pos0 << ", " << end << ")");
    if (sl.n_logits == 0) {  // a prompt piece that does not finish the prompt
      EXPECT_TRUE(end % C == 0 || sl.pos0 / C == (end - 1) / C) << "it reached a multiple of " << C;
      aligned += end % C == 0 ? 1 : 0;
    }
    for (int32_t p = (sl.pos0 / every + 1) * every; p <= end; p += every)
      EXPECT_NE(std::find(sl.captures.begin(), sl.captures.end(), p), sl.captures.end())
          << "the snapshot boundary " << p << " splits the recurrence";
  }
  EXPECT_GT(aligned, 0) << "the budget cut some prompt pieces";
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
