// Recurrent-state snapshots and speculative decoding on a hybrid model (qwen35), through
// forward_batch and the whole engine:
//  - a state captured inside a step (StateCapture) equals the state of a run that stopped
//    there, and continuing from it gives bit-identical logits to the uninterrupted run;
//  - a prefix hit continues from the longest snapshot inside the KV match (interval 1 and > 1)
//    and the output equals a cold run token for token; only the tail is recomputed;
//  - snapshots are bounded, go with their evicted blocks and leave nothing behind;
//  - another tenant (cache salt) or a request without prefix caching never hits;
//  - with the KV disk tier, a new engine on the same directory restores the KV blocks and the
//    longest snapshot from disk (also after a RAM flush), equal to a cold run; another interval
//    or tenant reuses nothing;
//  - speculative decoding (prompt lookup, draft model) equals plain greedy decoding, with drafts
//    both accepted and rejected, also under preemption and cancellation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "hybrid_model.h"
#include "model/synthetic.h"

namespace edgelm::engine {
namespace {

using test::greedy;
using test::hybrid_model;
using test::hybrid_options;
using test::OneRun;
using test::reference_greedy;
using test::run_all;
using test::run_one;

std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % 96);
  return p;
}

TEST(StateCapture, EqualsARunThatStopsThereAndContinuesBitIdentically) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  BatchScratch scratch;
  auto store = kv::KvStore::create(m->config(), 16, 4, kv::KvType::f32).value();
  kv::StateStore states(m->config());
  const int32_t a = states.acquire(), b = states.acquire();
  const std::vector<kv::BlockId> ta = {0, 1, 2, 3}, tb = {4, 5, 6, 7};
  const auto V = static_cast<size_t>(m->config().n_vocab);
  std::mt19937 rng(3);
  const std::vector<int32_t> toks = random_tokens(rng, 13);
  const auto F = static_cast<size_t>(states.slot_floats());
  std::vector<float> at5(F), at8(F), at8b(F);
  // a: all 13 tokens in one step, capturing after 5 and 8 (8 twice: ties are allowed).
  const StateCapture caps[] = {{5, at5.data()}, {8, at8.data()}, {8, at8b.data()}};
  StepBatch all{toks, {{0, 13, ta, 1, a, caps}}, 0, &states, {}};
  std::vector<float> whole(V);
  ASSERT_TRUE(forward_batch(*m, all, store, whole, pool, scratch).ok());
  // b: the first 8 tokens alone: its state is the capture after 8.
  StepBatch first{{toks.begin(), toks.begin() + 8}, {{0, 8, tb, 0, b, {}}}, 0, &states, {}};
  std::vector<float> none;
  ASSERT_TRUE(forward_batch(*m, first, store, none, pool, scratch).ok());
  EXPECT_EQ(std::vector<float>(states.data(b), states.data(b) + F), at8);
  EXPECT_EQ(at8b, at8);
  EXPECT_NE(at5, at8);
  // A fresh slot loaded with the capture after 5 continues over tokens 5..12 (their K/V from
  // position 5 on written again into b's blocks, 0..4 copied from a's) to a's exact logits.
  for (int32_t blk = 0; blk < 2; ++blk) store.copy_block(tb[static_cast<size_t>(blk)], ta[static_cast<size_t>(blk)]);
  states.load(b, at5.data(), 5);
  StepBatch rest{{toks.begin() + 5, toks.end()}, {{5, 8, tb, 1, b, {}}}, 0, &states, {}};
  std::vector<float> cont(V);
  ASSERT_TRUE(forward_batch(*m, rest, store, cont, pool, scratch).ok());
  EXPECT_EQ(cont, whole) << "a snapshot continues exactly as the uninterrupted run";
  // A capture without a destination only splits the run (the engine's untaken snapshot
  // boundaries): same logits as the split with copies.
  const StateCapture split_only[] = {{5, nullptr}, {8, nullptr}};
  StepBatch split{toks, {{0, 13, tb, 1, b, split_only}}, 0, &states, {}};
  states.reset(b);
  std::vector<float> split_logits(V);
  ASSERT_TRUE(forward_batch(*m, split, store, split_logits, pool, scratch).ok());
  EXPECT_EQ(split_logits, whole);
  // Captures outside the slice or descending are refused.
  const StateCapture outside[] = {{14, at5.data()}}, descending[] = {{8, at8.data()}, {5, at5.data()}},
                     at_start[] = {{0, at5.data()}};
  for (std::span<const StateCapture> bad :
       {std::span<const StateCapture>(outside), std::span<const StateCapture>(descending),
        std::span<const StateCapture>(at_start)}) {
    StepBatch x{toks, {{0, 13, ta, 1, a, bad}}, 0, &states, {}};
    const Status st = forward_batch(*m, x, store, whole, pool, scratch);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("state capture"), std::string::npos) << st.error().message;
  }
}

// Request A, then B sharing A's first `shared` tokens: B's output equals a cold run of B and B
// takes `want_cached` prompt tokens from the cache.
void expect_hit(int32_t interval, size_t n_a, size_t shared, int32_t want_cached) {
  SCOPED_TRACE(testing::Message() << "interval " << interval << ", shared " << shared);
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  EngineOptions o = hybrid_options(*m, 128, 4, interval, 32);
  o.scheduler.max_batch_tokens = 6;  // A's prompt in chunks that cross block boundaries
  auto e = Engine::create(runner, nullptr, o).value();
  std::mt19937 rng(static_cast<uint32_t>(17 + shared));
  const std::vector<int32_t> pa = random_tokens(rng, n_a);
  std::vector<int32_t> pb(pa.begin(), pa.begin() + static_cast<std::ptrdiff_t>(shared));
  for (const int32_t t : random_tokens(rng, 7)) pb.push_back((t + 1) % 96 == pa[shared] ? (t + 2) % 96 : (t + 1) % 96);
  ASSERT_NE(pb[shared], pa[shared]);
  const OneRun ra = run_one(*e, greedy(pa, 5));
  EXPECT_EQ(ra.tokens, reference_greedy(*m, pa, 5));
  EXPECT_EQ(ra.n_cached, 0);
  EXPECT_GT(e->stats().state_snapshots, 0);
  const int64_t hit_before = e->stats().prefix_tokens_hit;
  const OneRun rb = run_one(*e, greedy(pb, 9));
  EXPECT_EQ(rb.tokens, reference_greedy(*m, pb, 9)) << "a snapshot hit equals a cold run";
  EXPECT_EQ(rb.n_cached, want_cached) << "the longest snapshot inside the KV match";
  EXPECT_EQ(e->stats().prefix_tokens_hit - hit_before, want_cached) << "only the tail is computed";
  // The same prompt once more hits as far as its own snapshots reach.
  const OneRun rb2 = run_one(*e, greedy(pb, 9));
  EXPECT_EQ(rb2.tokens, rb.tokens);
  EXPECT_GE(rb2.n_cached, want_cached);
  EXPECT_EQ(e->stats().state_slots_live, 0);
}

TEST(StateSnapshotHit, EveryBlockContinuesFromTheLastFullSharedBlock) {
  // Blocks of 4: 14 shared tokens match blocks 0-2 (12 tokens); block 3 differs at token 14.
  expect_hit(1, 22, 14, 12);
  // 16 shared tokens: 4 blocks match; B's prompt (23 tokens) hits at 16.
  expect_hit(1, 22, 16, 16);
}

TEST(StateSnapshotHit, LongerIntervalRestoresTheLongestSnapshotNotPastTheMatch) {
  // Interval 2 blocks: snapshots after 8, 16, 24 tokens. A match of 5 blocks (20 tokens) uses 16.
  expect_hit(2, 30, 22, 16);
  // A match of 6 blocks (24 tokens) uses 24.
  expect_hit(2, 30, 26, 24);
  // Interval 3 (every 12 tokens): a match of 2 blocks (8 tokens) has no snapshot: no hit.
  expect_hit(3, 30, 9, 0);
}

TEST(StateSnapshotHit, OtherTenantsAndUncachedRequestsNeverHit) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  auto e = Engine::create(runner, nullptr, hybrid_options(*m, 128, 4, 1, 32)).value();
  std::mt19937 rng(5);
  const std::vector<int32_t> p = random_tokens(rng, 18);
  const std::vector<int32_t> want = reference_greedy(*m, p, 6);
  auto req = [&](const std::string& salt, bool cache) {
    Request r = greedy(p, 6);
    r.cache_salt = salt;
    r.cache_prefix = cache;
    return r;
  };
  const OneRun first = run_one(*e, req("tenant-a", true));
  EXPECT_EQ(first.tokens, want);
  EXPECT_EQ(first.n_cached, 0);
  const int32_t snaps = e->stats().state_snapshots;
  EXPECT_GT(snaps, 0);
  for (const std::string salt : {"tenant-b", ""}) {
    const OneRun other = run_one(*e, req(salt, true));
    EXPECT_EQ(other.tokens, want);
    EXPECT_EQ(other.n_cached, 0) << "tenant '" << salt << "' must not see tenant-a's prefix";
  }
  const OneRun uncached = run_one(*e, req("tenant-a", false));
  EXPECT_EQ(uncached.tokens, want);
  EXPECT_EQ(uncached.n_cached, 0);
  const OneRun same = run_one(*e, req("tenant-a", true));
  EXPECT_EQ(same.tokens, want);
  EXPECT_EQ(same.n_cached, 16) << "the same tenant hits up to its last snapshot before the final token";
}

TEST(StateSnapshotDisk, ANewEngineRestoresBlocksAndTheLongestSnapshot) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("edgelm-engine-snapdisk-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto options = [&](int32_t interval) {
    EngineOptions o = hybrid_options(*m, 128, 4, interval, 32);
    o.kv_disk.dir = dir.string();
    o.kv_disk.content_namespace = 42;
    return o;
  };
  std::mt19937 rng(23);
  const std::vector<int32_t> p = random_tokens(rng, 30);  // 7 full blocks of 4
  const std::vector<int32_t> want = reference_greedy(*m, p, 5);
  {
    auto e = Engine::create(runner, nullptr, options(2)).value();
    const OneRun cold = run_one(*e, greedy(p, 5));
    EXPECT_EQ(cold.tokens, want);
    e->drain_disk_writes();
    EXPECT_GE(e->stats().disk.state_writes, 3) << "snapshots after 8, 16 and 24 tokens";
  }
  {
    auto e = Engine::create(runner, nullptr, options(2)).value();
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(testing::Message() << "round " << round);
      const OneRun warm = run_one(*e, greedy(p, 5));
      EXPECT_EQ(warm.tokens, want) << "blocks and snapshot from disk equal a cold run";
      EXPECT_EQ(warm.n_cached, 24) << "the longest snapshot inside the 7 blocks";
      const EngineStats st = e->stats();
      EXPECT_EQ(st.disk.state_reads, round + 1);
      EXPECT_EQ(st.tier_disk_blocks, 6 * (round + 1));
      EXPECT_EQ(st.state_slots_live, 0);
      e->flush_prefix_cache(/*ram=*/true, /*disk=*/false);  // the next round reads the disk again
    }
    Request other = greedy(p, 5);
    other.cache_salt = "another-tenant";
    const OneRun b = run_one(*e, std::move(other));
    EXPECT_EQ(b.tokens, want);
    EXPECT_EQ(b.n_cached, 0) << "another tenant never hits";
    EXPECT_EQ(e->stats().disk.state_reads, 2);
  }
  {
    auto e = Engine::create(runner, nullptr, options(1)).value();
    const OneRun r = run_one(*e, greedy(p, 5));
    EXPECT_EQ(r.tokens, want);
    EXPECT_EQ(r.n_cached, 0) << "snapshots of another interval are never used";
    EXPECT_EQ(e->stats().disk.reads, 0);
  }
  std::filesystem::remove_all(dir);
}

// The disk tier reads straight into KV blocks the engine allocates at add_request: they are
// held (used, unpublished) while the read is in flight, even when the request is cancelled
// meanwhile; once the read is back they are published (cached) and the next request hits them.
TEST(StateSnapshotDisk, ACancelledReadKeepsItsBlocksHeldUntilTheReadIsBack) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("edgelm-engine-snapcancel-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  EngineOptions o = hybrid_options(*m, 128, 4, 2, 32);
  o.kv_disk.dir = dir.string();
  o.kv_disk.content_namespace = 43;
  o.check_invariants = true;  // the held blocks are accounted for in every step's check
  std::mt19937 rng(29);
  const std::vector<int32_t> p = random_tokens(rng, 30);  // 7 full blocks of 4
  const std::vector<int32_t> want = reference_greedy(*m, p, 5);
  {
    auto e = Engine::create(runner, nullptr, o).value();
    EXPECT_EQ(run_one(*e, greedy(p, 5)).tokens, want);
    e->drain_disk_writes();
  }
  auto e = Engine::create(runner, nullptr, o).value();
  const Result<RequestId> id = e->add_request(greedy(p, 5));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(e->stats().kv_blocks_used, 6) << "the destinations of the 6 blocks up to the snapshot at 24";
  EXPECT_TRUE(e->cancel(*id));
  for (int i = 0; i < 400 && (e->has_work() || e->stats().kv_blocks_used > 0); ++i) {
    e->step();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(e->stats().kv_blocks_used, 0) << "released once the read came back";
  const EngineStats st = e->stats();
  EXPECT_EQ(st.disk.reads, 7) << "6 blocks and the snapshot after 24 tokens";
  EXPECT_EQ(st.state_snapshots, 1) << "the snapshot installed although its request is gone";
  const OneRun warm = run_one(*e, greedy(p, 5));
  EXPECT_EQ(warm.tokens, want);
  EXPECT_EQ(warm.n_cached, 24) << "the cancelled request's blocks and snapshot serve from RAM";
  EXPECT_EQ(e->stats().disk.reads, 7) << "nothing read again";
  std::filesystem::remove_all(dir);
}

TEST(StateSnapshotEviction, BoundedAndGoneWithTheirBlocks) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  EngineOptions o = hybrid_options(*m, 40, 2, 1, 4);
  o.scheduler.max_batch_tokens = 16;
  o.scheduler.watermark = 1.0;
  auto e = Engine::create(runner, nullptr, o).value();
  const EngineStats st0 = e->stats();
  ASSERT_EQ(st0.kv_blocks, 40);
  ASSERT_EQ(st0.state_snapshot_capacity, 4);
  ASSERT_GT(st0.state_snapshot_capacity, 0);
  ASSERT_LT(st0.state_snapshot_capacity, st0.kv_blocks) << "the test wants snapshots scarcer than blocks";
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> prompts;
  int32_t most = 0;
  for (int i = 0; i < 12; ++i) {
    prompts.push_back(random_tokens(rng, 9 + rng() % 12));
    Request r = greedy(prompts.back(), 4);
    ASSERT_TRUE(e->add_request(std::move(r)).ok());
    for (int k = 0; k < 3 && e->has_work(); ++k) {
      e->step();
      most = std::max(most, e->stats().state_snapshots);
      ASSERT_LE(e->stats().state_snapshots, st0.state_snapshot_capacity);
    }
  }
  run_all(*e);
  EXPECT_EQ(most, st0.state_snapshot_capacity) << "the store fills up";
  EXPECT_GT(e->stats().state_snapshot_evictions, 0);
  EXPECT_LE(e->stats().state_snapshot_bytes,
            static_cast<int64_t>(st0.state_snapshot_capacity) * static_cast<int64_t>(test::state_bytes(*m)));
  // Two uncached requests that need more than the whole pool together evict every cached
  // block, and the snapshots with them.
  // (Decoding, so that a sequence needs one block at a time and a reservation fails only once
  // no free or cached block is left.)
  const int32_t n_gen = 2 * st0.kv_blocks + 8;
  std::vector<RequestId> flood;
  for (int i = 0; i < 2; ++i) {
    Request r = greedy(random_tokens(rng, 8), n_gen);
    r.cache_prefix = false;
    flood.push_back(e->add_request(std::move(r)).value());
  }
  const auto got = run_all(*e);
  for (const RequestId id : flood) EXPECT_EQ(got.at(id).tokens.size(), static_cast<size_t>(n_gen));
  EXPECT_GT(e->stats().n_preemptions, 0) << "the flood needed more than the pool";
  const EngineStats st = e->stats();
  EXPECT_EQ(st.kv_blocks_cached, 0);
  EXPECT_EQ(st.state_snapshots, 0) << "no snapshot outlives its block";
  EXPECT_EQ(st.state_slots_live, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  // And a prompt seen before is computed from scratch, still exactly.
  const OneRun again = run_one(*e, greedy(prompts[3], 4));
  EXPECT_EQ(again.n_cached, 0);
  EXPECT_EQ(again.tokens, reference_greedy(*m, prompts[3], 4));
}

// A llama-architecture draft model of the hybrid model's vocabulary.
std::unique_ptr<model::Model> draft_model() {
  model::SyntheticSpec s;
  s.arch = "llama";
  s.n_layer = 1;
  s.n_vocab = 96;
  s.seed = 52;
  auto m = model::Model::load(model::make_synthetic_model(s).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

void expect_speculative_equal(SpecMode mode, int32_t n_blocks, int32_t interval, int32_t n_snapshots) {
  SCOPED_TRACE(testing::Message() << (mode == SpecMode::ngram ? "ngram" : "draft model") << ", " << n_blocks
                                  << " blocks, snapshot interval " << interval);
  const auto m = hybrid_model();
  const auto dm = draft_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool), draft(*dm, pool);
  // Blocks of 16 tokens (three sequences' states and rollback copies take 6 states).
  EngineOptions o = hybrid_options(*m, n_blocks, 3, interval, n_snapshots, /*spec=*/true, 16);
  o.scheduler.max_batch_tokens = 16;
  o.scheduler.watermark = 1.0;
  o.spec.mode = mode;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.draft_min = 1;
  o.spec.draft_max = 4;
  o.spec.draft_model = &draft;
  auto e = Engine::create(runner, nullptr, o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  ASSERT_LE((*e)->stats().kv_blocks, n_blocks);
  ASSERT_EQ((*e)->options().scheduler.max_batch_size, 3);
  std::mt19937 rng(21);
  std::map<RequestId, std::vector<int32_t>> want;
  for (int i = 0; i < 6; ++i) {
    // Repetition, so that prompt lookup has something to propose.
    const std::vector<int32_t> unit = random_tokens(rng, 3 + rng() % 4);
    std::vector<int32_t> p;
    for (int r = 0; r < 3; ++r) p.insert(p.end(), unit.begin(), unit.end());
    const int32_t n = 30 + static_cast<int32_t>(rng() % 16);
    want[(*e)->add_request(greedy(p, n)).value()] = reference_greedy(*m, p, n);
  }
  const auto got = run_all(**e);
  for (const auto& [id, w] : want) {
    EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    EXPECT_EQ(got.at(id).finishes, 1);
  }
  const EngineStats st = (*e)->stats();
  std::printf("[ info ] %d of %lld drafts accepted in %lld verifications, %lld preemptions, %lld snapshot tokens\n",
              static_cast<int>(st.spec_accepted_tokens), static_cast<long long>(st.spec_draft_tokens),
              static_cast<long long>(st.spec_verify_steps), static_cast<long long>(st.n_preemptions),
              static_cast<long long>(st.prefix_tokens_hit));
  EXPECT_GT(st.spec_accepted_tokens, 0) << "some drafts accepted";
  EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens) << "some drafts rejected (the state rolled back)";
  if (n_blocks <= 8) {
    EXPECT_GT(st.n_preemptions, 0);
  }
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.spec_draft_kv_blocks_used, 0);
  EXPECT_EQ(st.state_slots_live, 0);
}

TEST(HybridSpeculative, NgramEqualsPlainGreedy) {
  expect_speculative_equal(SpecMode::ngram, 64, 0, 0);
  expect_speculative_equal(SpecMode::ngram, 64, 1, 8);
  expect_speculative_equal(SpecMode::ngram, 8, 2, 3);  // preemption
}

TEST(HybridSpeculative, DraftModelEqualsPlainGreedy) {
  expect_speculative_equal(SpecMode::draft, 64, 1, 8);
  expect_speculative_equal(SpecMode::draft, 8, 2, 3);  // preemption
}

TEST(HybridSpeculative, AHybridDraftModelIsRefused) {
  const auto m = hybrid_model();
  ThreadPool pool(1);
  ModelRunner runner(*m, pool), draft(*m, pool);
  EngineOptions o = hybrid_options(*m, 64, 2, 1, 4, true);
  o.spec.mode = SpecMode::draft;
  o.spec.draft_model = &draft;
  auto e = Engine::create(runner, nullptr, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("hybrid recurrent draft"), std::string::npos) << e.error().message;
}

TEST(HybridSpeculative, CancelMidRunLeavesNothing) {
  const auto m = hybrid_model();
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  EngineOptions o = hybrid_options(*m, 128, 3, 1, 16, true);
  o.scheduler.max_batch_tokens = 8;
  o.spec.mode = SpecMode::ngram;
  o.spec.cost_gate = false;
  o.spec.draft_min = 1;
  auto e = Engine::create(runner, nullptr, o).value();
  std::mt19937 rng(4);
  std::vector<RequestId> ids;
  std::vector<std::vector<int32_t>> prompts;
  std::map<RequestId, std::vector<int32_t>> got;
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(random_tokens(rng, 14));
    Request r = greedy(prompts.back(), 30);
    r.on_event = [&got](const TokenEvent& ev) {
      if (ev.token >= 0) got[ev.id].push_back(ev.token);
    };
    ids.push_back(e->add_request(std::move(r)).value());
  }
  for (int k = 0; k < 6; ++k) e->step();
  EXPECT_TRUE(e->cancel(ids[1]));
  for (int k = 0; k < 3; ++k) e->step();
  EXPECT_TRUE(e->cancel(ids[0]));
  run_all(*e);
  EXPECT_EQ(got.at(ids[2]), reference_greedy(*m, prompts[2], 30));
  EXPECT_EQ(e->stats().state_slots_live, 0);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  // A cancelled request's prompt is reused from its snapshots afterwards, exactly.
  const OneRun again = run_one(*e, greedy(prompts[1], 8));
  EXPECT_GT(again.n_cached, 0);
  EXPECT_EQ(again.tokens, reference_greedy(*m, prompts[1], 8));
}

}  // namespace
}  // namespace edgelm::engine
