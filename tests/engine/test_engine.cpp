// The batching engine and its scheduler against the fake model (fake_step_model.h): outputs of
// concurrent, chunked, prefix-cached and preempted requests equal each request run alone;
// cancel frees blocks; deadlines, priorities, the adaptive cap, exact max_new_tokens, input
// errors; and a randomized stress run with a tiny pool and the block invariants checked after
// every step (this binary also runs under ASan in CI).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine.h"
#include "engine_runs.h"
#include "fake_step_model.h"

namespace edgelm::engine {
namespace {

using test::expected_tokens;
using test::FakeStepModel;
using test::Outcome;
using test::greedy;
using test::run_all;

constexpr int32_t kVocab = 64;

EngineOptions small_options(int32_t n_blocks, int32_t block_size = 4) {
  EngineOptions o;
  o.block_size = block_size;
  o.kv_type = kv::KvType::f32;
  // The fake's KV: 1 layer x K and V x 32 floats per token.
  o.kv_memory_bytes = static_cast<size_t>(n_blocks) * block_size * 2 * 32 * sizeof(float);
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;  // fixed cap unless a test sets one
  return o;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t len) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % kVocab);
  return p;
}

TEST(Engine, ConcurrentChunkedRequestsEqualSoloRuns) {
  FakeStepModel m(kVocab);
  EngineOptions o = small_options(256);
  o.scheduler.max_batch_tokens = 16;  // prompts arrive in chunks, mixed with decodes
  o.scheduler.max_batch_size = 8;
  auto e = Engine::create(m, nullptr, o).value();
  std::mt19937 rng(1);
  std::map<RequestId, std::vector<int32_t>> want;
  for (int i = 0; i < 20; ++i) {
    const std::vector<int32_t> p = random_prompt(rng, 1 + static_cast<int32_t>(rng() % 40));
    const int32_t n = 1 + static_cast<int32_t>(rng() % 12);
    want[e->add_request(greedy(p, n)).value()] = expected_tokens(p, n, kVocab);
  }
  const auto got = run_all(*e);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [id, w] : want) {
    EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    EXPECT_EQ(got.at(id).finish, Finish::length);
    EXPECT_EQ(got.at(id).finishes, 1);
  }
  EXPECT_LE(m.max_batch_tokens_seen, 16);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
}

TEST(Engine, PrefixCacheHitGivesTheSameOutput) {
  FakeStepModel m(kVocab);
  auto e = Engine::create(m, nullptr, small_options(64)).value();
  std::mt19937 rng(2);
  const std::vector<int32_t> shared = random_prompt(rng, 21);
  std::vector<int32_t> a = shared, b = shared;
  a.push_back(5);
  b.push_back(9);
  const RequestId ia = e->add_request(greedy(a, 6)).value();
  EXPECT_EQ(run_all(*e)[ia].tokens, expected_tokens(a, 6, kVocab));
  const int64_t hits_before = e->stats().prefix_hits;
  const RequestId ib = e->add_request(greedy(b, 6)).value();
  EXPECT_EQ(run_all(*e)[ib].tokens, expected_tokens(b, 6, kVocab));
  EXPECT_GE(e->stats().prefix_hits - hits_before, 5) << "21 shared tokens = 5 full blocks of 4";
  // The whole prompt cached: the last token is recomputed into a copy of its block.
  const RequestId ic = e->add_request(greedy(a, 6)).value();
  EXPECT_EQ(run_all(*e)[ic].tokens, expected_tokens(a, 6, kVocab));
  // Opting out, and a different salt, still give the same tokens.
  Request r = greedy(a, 6);
  r.cache_prefix = false;
  const RequestId id = e->add_request(r).value();
  Request s = greedy(a, 6);
  s.cache_salt = "tenant-2";
  const RequestId is = e->add_request(s).value();
  const int64_t hits = e->stats().prefix_hits;
  auto got = run_all(*e);
  EXPECT_EQ(got[id].tokens, expected_tokens(a, 6, kVocab));
  EXPECT_EQ(got[is].tokens, expected_tokens(a, 6, kVocab));
  EXPECT_EQ(e->stats().prefix_hits, hits) << "no hit across salts or when opted out";
}

// The finishing event reports the prompt length, the prompt tokens served from the prefix
// cache, and the tokens generated.
TEST(Engine, FinishingEventReportsCachedPromptTokens) {
  FakeStepModel m(kVocab);
  auto e = Engine::create(m, nullptr, small_options(64)).value();
  std::mt19937 rng(7);
  const std::vector<int32_t> prompt = random_prompt(rng, 14);  // > 2 blocks of 4
  auto finishing = [&](RequestId id) {
    TokenEvent last;
    int n = 0;
    for (int i = 0; i < 10000 && e->has_work(); ++i)
      for (const TokenEvent& ev : e->step()) {
        if (ev.id == id && ev.finish != Finish::none) {
          last = ev;
          ++n;
        } else if (ev.finish == Finish::none) {
          EXPECT_EQ(ev.n_prompt, 0) << "only the finishing event carries counts";
          EXPECT_EQ(ev.n_prompt_cached, 0);
        }
      }
    EXPECT_EQ(n, 1);
    return last;
  };
  const RequestId a = e->add_request(greedy(prompt, 5)).value();
  const TokenEvent fa = finishing(a);
  EXPECT_EQ(fa.finish, Finish::length);
  EXPECT_EQ(fa.n_prompt, 14);
  EXPECT_EQ(fa.n_prompt_cached, 0) << "a cold cache";
  EXPECT_EQ(fa.n_generated, 5);
  const RequestId b = e->add_request(greedy(prompt, 5)).value();
  const TokenEvent fb = finishing(b);
  EXPECT_EQ(fb.n_prompt, 14);
  EXPECT_GE(fb.n_prompt_cached, 12) << "3 full blocks of 4 are shared";
  EXPECT_LT(fb.n_prompt_cached, 14) << "the last prompt token is always recomputed";
  EXPECT_EQ(fb.n_generated, 5);
  // Opting out reports no cached tokens; max_new_tokens = 0 reports the prompt length.
  Request r = greedy(prompt, 3);
  r.cache_prefix = false;
  const RequestId c = e->add_request(r).value();
  const TokenEvent fc = finishing(c);
  EXPECT_EQ(fc.n_prompt_cached, 0);
  EXPECT_EQ(fc.n_generated, 3);
  const RequestId d = e->add_request(greedy(prompt, 0)).value();
  const TokenEvent fd = finishing(d);
  EXPECT_EQ(fd.n_prompt, 14);
  EXPECT_EQ(fd.n_generated, 0);
}

TEST(Engine, PreemptedRequestsEqualUnpreempted) {
  FakeStepModel m(kVocab);
  EngineOptions o = small_options(14);  // 56 tokens of KV for 6 requests of up to 30 tokens
  o.scheduler.watermark = 1.0;
  auto e = Engine::create(m, nullptr, o).value();
  std::mt19937 rng(3);
  std::map<RequestId, std::vector<int32_t>> want;
  for (int i = 0; i < 6; ++i) {
    const std::vector<int32_t> p = random_prompt(rng, 6 + i);
    want[e->add_request(greedy(p, 20)).value()] = expected_tokens(p, 20, kVocab);
  }
  const auto got = run_all(*e);
  for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
  EXPECT_GT(e->stats().n_preemptions, 0);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
}

TEST(Engine, CancelFreesEveryBlockAtOnce) {
  FakeStepModel m(kVocab);
  auto e = Engine::create(m, nullptr, small_options(64)).value();
  std::mt19937 rng(4);
  const RequestId a = e->add_request(greedy(random_prompt(rng, 30), 50)).value();
  const RequestId b = e->add_request(greedy(random_prompt(rng, 9), 50)).value();
  for (int i = 0; i < 3; ++i) e->step();
  const int32_t used = e->stats().kv_blocks_used;
  EXPECT_TRUE(e->cancel(a));
  EXPECT_LT(e->stats().kv_blocks_used, used);
  EXPECT_FALSE(e->cancel(a)) << "already gone";
  EXPECT_TRUE(e->cancel(b));
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  const auto got = run_all(*e);
  EXPECT_EQ(got.at(a).finish, Finish::cancelled);
  EXPECT_EQ(got.at(b).finish, Finish::cancelled);
  EXPECT_EQ(got.at(a).finishes, 1);
}

TEST(Engine, DeadlinesPrioritiesAndExactLength) {
  FakeStepModel m(kVocab);
  EngineOptions o = small_options(64);
  o.scheduler.max_batch_size = 1;
  auto e = Engine::create(m, nullptr, o).value();
  Request late = greedy({1, 2, 3}, 5);
  late.deadline = Clock::now() - std::chrono::milliseconds(1);
  const RequestId il = e->add_request(late).value();
  const RequestId low = e->add_request(greedy({4, 5}, 3)).value();
  Request hi = greedy({6, 7}, 3);
  hi.priority = 5;
  const RequestId ih = e->add_request(hi).value();
  std::vector<RequestId> order;
  std::map<RequestId, Outcome> got;
  while (e->has_work())
    for (const TokenEvent& ev : e->step()) {
      if (ev.token >= 0 && (order.empty() || order.back() != ev.id)) order.push_back(ev.id);
      if (ev.token >= 0) got[ev.id].tokens.push_back(ev.token);
      if (ev.finish != Finish::none) got[ev.id].finish = ev.finish;
    }
  EXPECT_EQ(got[il].finish, Finish::deadline);
  EXPECT_TRUE(got[il].tokens.empty());
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], ih) << "higher priority first with a cap of 1";
  EXPECT_EQ(got[ih].tokens.size(), 3u);
  EXPECT_EQ(got[low].tokens.size(), 3u);
  // max_new_tokens 0: finishes at once with length and no forward.
  const int64_t calls = m.n_calls;
  const RequestId z = e->add_request(greedy({1}, 0)).value();
  auto zr = run_all(*e);
  EXPECT_EQ(zr[z].finish, Finish::length);
  EXPECT_EQ(m.n_calls, calls);
}

TEST(Engine, StopTokensAndContextEnd) {
  FakeStepModel m(kVocab, /*n_ctx=*/12);
  auto e = Engine::create(m, nullptr, small_options(64)).value();
  const std::vector<int32_t> p = {3, 1, 4, 1, 5};
  const std::vector<int32_t> w = expected_tokens(p, 7, kVocab);
  Request r = greedy(p, 100);  // the context (12) ends it after 7 tokens
  const RequestId a = e->add_request(r).value();
  Request s = greedy(p, 100);
  s.stop_tokens = {w[3]};
  const RequestId b = e->add_request(s).value();
  auto got = run_all(*e);
  EXPECT_EQ(got[a].tokens, w);
  EXPECT_EQ(got[a].finish, Finish::length);
  const auto first = std::find(w.begin(), w.end(), w[3]);
  EXPECT_EQ(got[b].tokens, std::vector<int32_t>(w.begin(), first)) << "the stop token is not emitted";
  EXPECT_EQ(got[b].finish, Finish::stop);
}

TEST(Engine, AdaptiveBatchCapShrinksAndGrows) {
  FakeStepModel m(kVocab);
  EngineOptions o = small_options(256);
  o.scheduler.max_batch_size = 8;
  o.scheduler.target_step_ms = 1e-9;  // every step overshoots
  auto e = Engine::create(m, nullptr, o).value();
  std::mt19937 rng(5);
  for (int i = 0; i < 8; ++i) (void)e->add_request(greedy(random_prompt(rng, 5), 30)).value();
  for (int i = 0; i < 10; ++i) e->step();
  EXPECT_EQ(e->stats().batch_cap, 1);
  run_all(*e);
  o.scheduler.target_step_ms = 1e9;  // never overshoots: grows while requests wait on the cap
  auto g = Engine::create(m, nullptr, o).value();
  for (int i = 0; i < 16; ++i) (void)g->add_request(greedy(random_prompt(rng, 5), 30)).value();
  g->step();
  EXPECT_EQ(g->stats().batch_cap, 8);
  EXPECT_EQ(g->stats().n_running, 8);
}

TEST(Engine, BadRequestsAreErrors) {
  FakeStepModel m(kVocab, 32);
  auto e = Engine::create(m, nullptr, small_options(8)).value();
  auto msg = [&](Request r) {
    auto id = e->add_request(std::move(r));
    return id ? std::string("accepted") : id.error().message;
  };
  EXPECT_NE(msg(greedy({}, 1)).find("empty"), std::string::npos);
  EXPECT_NE(msg(greedy({1, 64}, 1)).find("token 64"), std::string::npos);
  EXPECT_NE(msg(greedy({1}, -1)).find("max_new_tokens"), std::string::npos);
  EXPECT_NE(msg(greedy(std::vector<int32_t>(33, 1), 1)).find("context of 32"), std::string::npos);
  EXPECT_NE(msg(greedy(std::vector<int32_t>(30, 1), 2)).find("raise --kv-memory"), std::string::npos);
  Request s = greedy({1}, 1);
  s.stop_strings = {"x"};
  EXPECT_NE(msg(s).find("tokenizer"), std::string::npos);
  Request t = greedy({1}, 1);
  t.sampling.top_p = 2.0f;
  EXPECT_NE(msg(t).find("top_p"), std::string::npos);
  EXPECT_FALSE(e->has_work());
  EngineOptions bad = small_options(8);
  bad.scheduler.max_batch_tokens = 4;
  bad.scheduler.max_batch_size = 8;
  EXPECT_FALSE(Engine::create(m, nullptr, bad));
  EXPECT_FALSE(Engine::create(m, nullptr, small_options(1)));
}

// Random arrivals, cancels and deadlines on a tiny pool; invariants after every step.
TEST(Engine, RandomizedStressOnATinyPool) {
  int64_t preemptions = 0, hits = 0;
  for (uint32_t seed = 10; seed < 14; ++seed) {
    FakeStepModel m(kVocab);
    EngineOptions o = small_options(12, 2);
    o.scheduler.max_batch_tokens = 6;
    o.scheduler.max_batch_size = 4;
    auto e = Engine::create(m, nullptr, o).value();
    std::mt19937 rng(seed);
    std::map<RequestId, std::vector<int32_t>> want;
    std::map<RequestId, Outcome> got;
    std::vector<RequestId> live;
    for (int step = 0; step < 600; ++step) {
      if (rng() % 3 == 0) {
        // Shared prefixes make prefix hits and copy-on-write likely.
        std::vector<int32_t> p = {1, 2, 3, 4, 5, 6};
        p.resize(1 + rng() % 6);
        for (int k = static_cast<int>(rng() % 4); k > 0; --k) p.push_back(static_cast<int32_t>(rng() % kVocab));
        const int32_t n = static_cast<int32_t>(rng() % 8);
        const RequestId id = e->add_request(greedy(p, n)).value();
        want[id] = expected_tokens(p, n, kVocab);
        live.push_back(id);
      }
      if (!live.empty() && rng() % 10 == 0) (void)e->cancel(live[rng() % live.size()]);
      for (const TokenEvent& ev : e->step()) {
        if (ev.token >= 0) got[ev.id].tokens.push_back(ev.token);
        if (ev.finish != Finish::none) {
          got[ev.id].finish = ev.finish;
          ++got[ev.id].finishes;
        }
      }
    }
    for (auto& [id, rest] : run_all(*e)) {
      Outcome& g = got[id];
      g.tokens.insert(g.tokens.end(), rest.tokens.begin(), rest.tokens.end());
      g.finishes += rest.finishes;
      if (rest.finish != Finish::none) g.finish = rest.finish;
    }
    for (const auto& [id, o2] : got) EXPECT_EQ(o2.finishes, 1) << id;
    for (const auto& [id, w] : want) {
      const Outcome& g = got[id];
      if (g.finish == Finish::cancelled) {  // a prefix of the solo output
        ASSERT_LE(g.tokens.size(), w.size());
        EXPECT_TRUE(std::equal(g.tokens.begin(), g.tokens.end(), w.begin())) << id;
      } else {
        EXPECT_EQ(g.tokens, w) << "seed " << seed << " request " << id;
      }
    }
    EXPECT_EQ(e->stats().kv_blocks_used, 0);
    preemptions += e->stats().n_preemptions;
    hits += e->stats().prefix_hits;
  }
  EXPECT_GT(preemptions, 0) << "the pool is small enough to force preemption";
  EXPECT_GT(hits, 0) << "shared prefixes hit the cache";
}

}  // namespace
}  // namespace edgelm::engine
