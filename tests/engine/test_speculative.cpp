// Speculative decoding (engine/speculative.h) in the batching engine, against fake models
// (fake_step_model.h) whose logits come from the context read back from the paged KV cache:
//  - greedy output with prompt lookup and with a draft model equals plain greedy decoding token
//    for token, for many concurrent sequences (speculating and plain ones in the same step),
//    under preemption, stop tokens and exact max_new_tokens;
//  - with sampling, the joint distribution of the generated tokens equals the target's
//    (chi-square over thousands of seeds on a 5-token vocabulary), for a draft model whose
//    distribution differs from the target's and for prompt lookup;
//  - rollback: rejected tokens leave no block behind (KvManager::check_invariants after every
//    step, zero blocks at the end in both pools) and the prefix cache never serves a block with
//    a rejected token's K/V;
//  - the n-gram lookup and the adaptive k controller alone.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "engine/speculative.h"
#include "engine_runs.h"
#include "fake_step_model.h"

namespace edgelm::engine {
namespace {

using test::FakeStepModel;
using test::Outcome;
using test::greedy;
using test::run_all;

EngineOptions options(int32_t n_blocks, int32_t block_size = 4) {
  EngineOptions o;
  o.block_size = block_size;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = static_cast<size_t>(n_blocks) * block_size * 2 * 32 * sizeof(float);
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;
  return o;
}

// A target that repeats itself (so prompt lookup has something to find) with a break now and
// then: next = 3 * last + 1 mod V, except every 11th position.
int32_t cyclic_next(std::span<const int32_t> ctx, int32_t V) {
  const int32_t last = ctx.back();
  if (ctx.size() % 11 == 0) return (last + 17) % V;
  return (3 * last + 1) % V;
}

void one_hot(std::span<float> lg, int32_t t) {
  std::fill(lg.begin(), lg.end(), 0.0f);
  lg[static_cast<size_t>(t)] = 10.0f;
}

// The chain-hash target's next token (FakeStepModel's default).
int32_t hash_next(std::span<const int32_t> ctx, int32_t V) {
  uint64_t h = 0;
  for (size_t p = 0; p < ctx.size(); ++p) h = test::fake_mix(h, ctx[p], static_cast<int32_t>(p));
  return static_cast<int32_t>(h % static_cast<uint64_t>(V));
}

template <typename F>
std::vector<int32_t> solo(std::vector<int32_t> ctx, int32_t n, F next) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    out.push_back(next(ctx));
    ctx.push_back(out.back());
  }
  return out;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t len, int32_t V) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
  return p;
}

// ---- unit pieces ----

TEST(Ngram, LongestLatestMatch) {
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 2, 3, 5, 6, 1, 2, 3};
  // "1 2 3" occurs at 0: continuation 4 9 2.
  EXPECT_EQ(NgramDrafter::lookup(t, 3, 3), (std::vector<int32_t>{4, 9, 2}));
  // Only 2-grams: "2 3" latest earlier at 5 -> 5 6.
  EXPECT_EQ(NgramDrafter::lookup(t, 2, 2), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(NgramDrafter::lookup(std::vector<int32_t>{7, 8, 9}, 3, 4), std::vector<int32_t>{});
  // The continuation stops at the end of the tokens.
  EXPECT_EQ(NgramDrafter::lookup(std::vector<int32_t>{5, 6, 5}, 2, 4), (std::vector<int32_t>{6, 5}));
}

TEST(SpecOptions, ParseAndValidate) {
  SpecOptions o;
  ASSERT_TRUE(parse_spec_mode("ngram", o).ok());
  EXPECT_EQ(o.mode, SpecMode::ngram);
  ASSERT_TRUE(parse_spec_mode("ngram:5", o).ok());
  EXPECT_EQ(o.ngram_n, 5);
  EXPECT_FALSE(parse_spec_mode("ngram:0", o).ok());
  EXPECT_FALSE(parse_spec_mode("ngramx", o).ok());
  EXPECT_FALSE(parse_spec_mode("draft", o).ok());
  o.mode = SpecMode::draft;
  EXPECT_FALSE(validate(o).ok()) << "draft mode without a draft model";
  o.mode = SpecMode::ngram;
  o.draft_min = 9;
  EXPECT_FALSE(validate(o).ok());
}

TEST(SpecController, GrowsWithAcceptanceAndFallsToPlainDecoding) {
  SpecController c(0, 8);
  int32_t k = c.next_k();
  EXPECT_GE(k, 1);
  for (int i = 0; i < 10; ++i) {
    k = c.next_k();
    c.observe(k, k);
  }
  EXPECT_EQ(c.next_k(), 8);
  for (int i = 0; i < 10 && c.k() > 0; ++i) c.observe(c.next_k(), 0);
  EXPECT_EQ(c.next_k(), 0) << "speculation that never pays is turned off";
  int zeros = 1;
  while (c.next_k() == 0 && zeros < 1000) ++zeros;
  EXPECT_GT(zeros, 1);
  EXPECT_LT(zeros, 1000) << "it probes again after a cool-down";
  SpecController floor(2, 4);
  for (int i = 0; i < 20; ++i) floor.observe(floor.next_k(), 0);
  EXPECT_EQ(floor.next_k(), 2) << "draft_min > 0 never stops speculating";
}

// Sampler::distribution is the distribution Sampler::sample draws from (after the whole chain),
// and Sampler::draw samples a given distribution.
TEST(SamplerDistribution, MatchesSampleAndDraw) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 1.5f, 0.0f};
  const std::vector<int32_t> history = {1, 1, 4};
  sample::SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 5;
  sp.min_p = 0.05f;
  sp.repeat_penalty = 1.3f;
  std::vector<float> p;
  std::vector<float> lg = logits;
  sample::Sampler(sp).distribution(lg, history, 0, p);
  ASSERT_EQ(p.size(), logits.size());
  double total = 0;
  for (const float x : p) total += x;
  EXPECT_NEAR(total, 1.0, 1e-5);
  EXPECT_EQ(p[2], 0.0f) << "cut by top-k";
  constexpr int kN = 20000;
  std::vector<double> by_sample(logits.size()), by_draw(logits.size());
  sample::Sampler s(sp), d(sp);
  for (int i = 0; i < kN; ++i) {
    lg = logits;
    by_sample[static_cast<size_t>(s.sample(lg, history, 0))] += 1;
    by_draw[static_cast<size_t>(d.draw(p))] += 1;
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    EXPECT_NEAR(by_sample[i] / kN, p[i], 0.015) << i;
    EXPECT_NEAR(by_draw[i] / kN, p[i], 0.015) << i;
  }
  sp.temperature = 0.0f;
  sp.repeat_penalty = 2.5f;  // 2.0 -> 0.8 and 1.5 -> 0.6: token 3 wins
  lg = logits;
  sample::Sampler(sp).distribution(lg, history, 0, p);
  EXPECT_EQ(p, (std::vector<float>{0, 0, 0, 1, 0, 0})) << "greedy after the repeat penalty on 1 and 4";
}

// ---- greedy equals plain ----

struct GreedyCase {
  const char* name;
  bool cyclic_target;  // else the chain-hash target
  SpecMode mode;
};

void expect_greedy_equal(const GreedyCase& gc, int32_t n_blocks, int32_t max_batch_tokens) {
  constexpr int32_t V = 64;
  FakeStepModel target(V), draft(V);
  if (gc.cyclic_target)
    target.logit_fn = [](std::span<const int32_t> ctx, std::span<float> lg) { one_hot(lg, cyclic_next(ctx, V)); };
  // The draft agrees with the target on about 3 of 4 positions.
  const bool cyc = gc.cyclic_target;
  draft.logit_fn = [cyc](std::span<const int32_t> ctx, std::span<float> lg) {
    const int32_t t = cyc ? cyclic_next(ctx, V) : hash_next(ctx, V);
    const bool wrong = test::fake_mix(7, static_cast<int32_t>(ctx.size()), ctx.back()) % 4 == 0;
    one_hot(lg, wrong ? (t + 1) % V : t);
  };
  auto next = [cyc](std::span<const int32_t> ctx) { return cyc ? cyclic_next(ctx, V) : hash_next(ctx, V); };
  EngineOptions o = options(n_blocks);
  o.scheduler.max_batch_tokens = max_batch_tokens;
  o.scheduler.max_batch_size = 12;
  o.spec.mode = gc.mode;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.draft_max = 6;
  o.spec.draft_model = &draft;
  auto e = Engine::create(target, nullptr, o).value();
  std::mt19937 rng(11);
  std::map<RequestId, std::vector<int32_t>> want;
  std::map<RequestId, int32_t> stop_of;
  for (int i = 0; i < 30; ++i) {
    const std::vector<int32_t> p = random_prompt(rng, 1 + static_cast<int32_t>(rng() % 30), V);
    const int32_t n = 1 + static_cast<int32_t>(rng() % 40);
    Request r = greedy(p, n);
    std::vector<int32_t> w = solo(p, n, next);
    if (i % 5 == 4 && w.size() > 3) {  // a stop token in the middle: not emitted, request ends there
      r.stop_tokens = {w[w.size() / 2]};
      w.resize(static_cast<size_t>(std::find(w.begin(), w.end(), w[w.size() / 2]) - w.begin()));
    }
    want[e->add_request(std::move(r)).value()] = w;
  }
  const auto got = run_all(*e);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [id, w] : want) {
    EXPECT_EQ(got.at(id).tokens, w) << gc.name << ": request " << id;
    EXPECT_EQ(got.at(id).finishes, 1);
  }
  const EngineStats st = e->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.spec_draft_kv_blocks_used, 0);
  EXPECT_GT(st.spec_draft_tokens, 0) << gc.name;
  EXPECT_LE(st.spec_accepted_tokens, st.spec_draft_tokens);
  if (gc.cyclic_target || gc.mode == SpecMode::draft) {
    EXPECT_GT(st.spec_accepted_tokens, 0) << gc.name;
  }
  std::printf("[ info ] %s, %d blocks: %lld of %lld drafts accepted in %lld verifications, %lld preemptions\n",
              gc.name, n_blocks, static_cast<long long>(st.spec_accepted_tokens),
              static_cast<long long>(st.spec_draft_tokens), static_cast<long long>(st.spec_verify_steps),
              static_cast<long long>(st.n_preemptions));
}

TEST(SpeculativeGreedy, EqualsPlainDecoding) {
  for (const GreedyCase& gc : {GreedyCase{"ngram, repetitive target", true, SpecMode::ngram},
                               GreedyCase{"ngram, hash target", false, SpecMode::ngram},
                               GreedyCase{"draft model, repetitive target", true, SpecMode::draft},
                               GreedyCase{"draft model, hash target", false, SpecMode::draft}}) {
    expect_greedy_equal(gc, 512, 64);
    expect_greedy_equal(gc, 40, 20);  // a small pool (preemption) and a tight token budget
    expect_greedy_equal(gc, 20, 20);  // a tiny one: the draft pool runs out too
  }
}

// Rejected drafts leave nothing behind: every step's block counts are those of the committed
// tokens (check_invariants), and prompts that reuse the published blocks of finished requests
// (whose drafts were mostly rejected) still get the right output.
TEST(SpeculativeGreedy, RollbackLeavesNoKvAndNoWrongPrefixBlocks) {
  constexpr int32_t V = 64;
  FakeStepModel target(V), draft(V);
  draft.logit_fn = [](std::span<const int32_t> ctx, std::span<float> lg) {  // agrees only on the first draft
    one_hot(lg, ctx.size() % 2 == 0 ? hash_next(ctx, V) : (hash_next(ctx, V) + 5) % V);
  };
  auto next = [](std::span<const int32_t> ctx) { return hash_next(ctx, V); };
  EngineOptions o = options(256);
  o.spec.mode = SpecMode::draft;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.draft_min = 3;  // keep speculating whatever the acceptance
  o.spec.draft_max = 3;
  o.spec.draft_model = &draft;
  auto e = Engine::create(target, nullptr, o).value();
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> full;
  std::map<RequestId, std::vector<int32_t>> want;
  for (int i = 0; i < 8; ++i) {
    const std::vector<int32_t> p = random_prompt(rng, 3 + i, V);
    want[e->add_request(greedy(p, 21)).value()] = solo(p, 21, next);
    full.push_back(p);
  }
  int steps = 0;
  std::map<RequestId, Outcome> got;
  while (e->has_work()) {
    for (const TokenEvent& ev : e->step())
      if (ev.token >= 0) got[ev.id].tokens.push_back(ev.token);
    ++steps;
    const EngineStats st = e->stats();
    // Each sequence holds exactly the blocks of its committed positions: nothing reserved is left.
    EXPECT_LE(st.kv_blocks_used, 8 * ((3 + 7 + 21 + 3) / 4 + 1));
  }
  for (const auto& [id, w] : want) EXPECT_EQ(got[id].tokens, w);
  const EngineStats st = e->stats();
  EXPECT_GT(st.spec_draft_tokens - st.spec_accepted_tokens, 20) << "the test needs rejections";
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.spec_draft_kv_blocks_used, 0);
  EXPECT_GT(st.kv_blocks_cached, 0);
  // Prompt = an earlier prompt + its output: served from published blocks written while drafts
  // were being rejected around them.
  size_t i = 0;
  std::map<RequestId, std::vector<int32_t>> again;
  for (const auto& [id, w] : want) {
    std::vector<int32_t> p = full[i++];
    p.insert(p.end(), w.begin(), w.end());
    again[e->add_request(greedy(p, 9)).value()] = solo(p, 9, next);
  }
  const int64_t hits = e->stats().prefix_hits;
  auto got2 = run_all(*e);
  for (const auto& [id, w] : again) EXPECT_EQ(got2[id].tokens, w);
  EXPECT_GT(e->stats().prefix_hits, hits);
}

// max_new_tokens and the context bound the drafts: exactly n tokens, never more.
TEST(SpeculativeGreedy, ExactLengthAndContext) {
  constexpr int32_t V = 64;
  FakeStepModel target(V, /*n_ctx=*/40);
  target.logit_fn = [](std::span<const int32_t> ctx, std::span<float> lg) { one_hot(lg, cyclic_next(ctx, V)); };
  EngineOptions o = options(128);
  o.spec.mode = SpecMode::ngram;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.draft_min = 8;
  o.spec.draft_max = 8;
  auto e = Engine::create(target, nullptr, o).value();
  const std::vector<int32_t> p = {1, 4, 13, 40, 1, 4};
  std::map<RequestId, size_t> want;
  for (int32_t n : {1, 2, 3, 7, 9, 17, 30}) want[e->add_request(greedy(p, n)).value()] = static_cast<size_t>(n);
  const RequestId ctx_id = e->add_request(greedy(p, 34)).value();  // 6 + 34 = the whole context
  const auto got = run_all(*e);
  for (const auto& [id, n] : want) {
    EXPECT_EQ(got.at(id).tokens.size(), n);
    EXPECT_EQ(got.at(id).finish, Finish::length);
  }
  EXPECT_EQ(got.at(ctx_id).tokens.size(), 34u);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  EXPECT_GT(e->stats().spec_accepted_tokens, 0);
}

// Cancel mid-generation frees both pools' blocks; a deadline ends a speculating request with
// one finishing event.
TEST(SpeculativeGreedy, CancelAndDeadlineFreeBothPools) {
  constexpr int32_t V = 64;
  FakeStepModel target(V), draft(V);
  draft.logit_fn = [](std::span<const int32_t> ctx, std::span<float> lg) { one_hot(lg, hash_next(ctx, V)); };
  EngineOptions o = options(256);
  o.spec.mode = SpecMode::draft;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.draft_min = 2;
  o.spec.draft_model = &draft;
  auto e = Engine::create(target, nullptr, o).value();
  std::mt19937 rng(9);
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(e->add_request(greedy(random_prompt(rng, 10, V), 60)).value());
  Request late = greedy(random_prompt(rng, 10, V), 60);
  late.deadline = Clock::now() + std::chrono::milliseconds(400);
  const RequestId late_id = e->add_request(std::move(late)).value();
  std::map<RequestId, int> finishes;
  for (int i = 0; i < 4; ++i)
    for (const TokenEvent& ev : e->step()) finishes[ev.id] += ev.finish != Finish::none;
  EXPECT_GT(e->stats().spec_draft_kv_blocks_used, 0);
  EXPECT_GT(e->stats().spec_accepted_tokens, 0);
  for (const RequestId id : ids) EXPECT_TRUE(e->cancel(id));
  EXPECT_GT(e->stats().kv_blocks_used, 0) << "the late request still runs";
  std::this_thread::sleep_for(std::chrono::milliseconds(420));
  while (e->has_work())
    for (const TokenEvent& ev : e->step()) {
      finishes[ev.id] += ev.finish != Finish::none;
      if (ev.id == late_id && ev.finish != Finish::none) {
        EXPECT_EQ(ev.finish, Finish::deadline);
      }
    }
  for (const RequestId id : ids) EXPECT_EQ(finishes[id], 1);
  EXPECT_EQ(finishes[late_id], 1);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  EXPECT_EQ(e->stats().spec_draft_kv_blocks_used, 0);
}

// ---- sampling: the output distribution is the target's ----

constexpr int32_t kV = 5;

// Target and draft logits after a context: functions of the last token.
void target_logits(std::span<const int32_t> ctx, std::span<float> lg) {
  static const float table[kV][kV] = {{2.0f, 1.0f, 0.5f, 0.0f, -1.0f},
                                      {0.0f, 0.3f, 1.5f, 0.2f, 0.9f},
                                      {1.2f, 1.2f, 0.0f, -0.5f, 0.4f},
                                      {-1.0f, 0.0f, 1.0f, 2.0f, 0.5f},
                                      {0.7f, -0.3f, 0.1f, 1.1f, 0.0f}};
  for (int32_t i = 0; i < kV; ++i) lg[static_cast<size_t>(i)] = table[ctx.back() % kV][i];
}
void draft_logits(std::span<const int32_t> ctx, std::span<float> lg) {  // deliberately different
  static const float table[kV][kV] = {{0.0f, 2.0f, 0.0f, 1.0f, 0.0f},
                                      {1.0f, 1.0f, -1.0f, 0.0f, 2.0f},
                                      {0.0f, 0.0f, 2.5f, 0.0f, 0.0f},
                                      {1.0f, 0.5f, 0.0f, 0.0f, 1.5f},
                                      {0.0f, 1.0f, 0.0f, -1.0f, 2.0f}};
  for (int32_t i = 0; i < kV; ++i) lg[static_cast<size_t>(i)] = table[ctx.back() % kV][i];
}

// Exact probability of the target's next token after ctx, through the sampler chain.
std::vector<float> target_probs(const sample::SamplingParams& sp, std::vector<int32_t> ctx, int32_t n_prompt) {
  std::vector<float> lg(kV), p;
  target_logits(ctx, lg);
  sample::Sampler s(sp);
  s.distribution(lg, ctx, n_prompt, p);
  return p;
}

struct SamplingCase {
  const char* name;
  SpecMode mode;
  sample::SamplingParams sp;
};

void expect_target_distribution(const SamplingCase& c) {
  FakeStepModel target(kV), draft(kV);
  target.logit_fn = target_logits;
  draft.logit_fn = draft_logits;
  EngineOptions o = options(4096);
  o.scheduler.max_batch_size = 64;
  o.scheduler.max_batch_tokens = 512;
  o.spec.mode = c.mode;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.ngram_n = 2;
  o.spec.draft_min = 3;  // speculate every step
  o.spec.draft_max = 3;
  o.spec.draft_model = &draft;
  auto e = Engine::create(target, nullptr, o).value();
  // The prompt repeats itself so that prompt lookup proposes continuations.
  const std::vector<int32_t> prompt = {0, 1, 2, 0, 1, 3, 0, 1};
  constexpr int kSeeds = 6000;
  constexpr int kNew = 6;
  for (int i = 0; i < kSeeds; ++i) {
    Request r;
    r.prompt = prompt;
    r.sampling = c.sp;
    r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    r.max_new_tokens = kNew;
    r.stop_at_eog = false;
    ASSERT_TRUE(e->add_request(std::move(r)).ok());
  }
  const auto got = run_all(*e);
  // p(b | a): the target's next-token distribution after last token a (its logits depend on the
  // last token only, and there are no penalties).
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  std::vector<std::vector<float>> next(kV);
  for (int32_t a = 0; a < kV; ++a) {
    std::vector<int32_t> ctx = prompt;
    ctx.push_back(a);
    next[static_cast<size_t>(a)] = target_probs(c.sp, ctx, n_prompt);
  }
  // Marginal of each generated token, then the joint of consecutive pairs (t_i, t_i+1).
  std::vector<std::vector<double>> marg(kNew, std::vector<double>(kV, 0.0));
  const std::vector<float> p1 = target_probs(c.sp, prompt, n_prompt);
  for (int32_t a = 0; a < kV; ++a) marg[0][static_cast<size_t>(a)] = p1[static_cast<size_t>(a)];
  for (int i = 1; i < kNew; ++i)
    for (int32_t a = 0; a < kV; ++a)
      for (int32_t b = 0; b < kV; ++b)
        marg[static_cast<size_t>(i)][static_cast<size_t>(b)] +=
            marg[static_cast<size_t>(i - 1)][static_cast<size_t>(a)] * next[static_cast<size_t>(a)][static_cast<size_t>(b)];
  for (const int i : {0, 1, 3}) {  // (t1, t2): prefill + first verification; (t2, t3), (t4, t5): within drafts
    std::vector<double> count(kV * kV, 0.0);
    for (const auto& [id, o2] : got) {
      ASSERT_EQ(o2.tokens.size(), static_cast<size_t>(kNew));
      count[static_cast<size_t>(o2.tokens[static_cast<size_t>(i)] * kV + o2.tokens[static_cast<size_t>(i) + 1])] += 1;
    }
    double chi2 = 0.0, tv = 0.0;
    int df = -1;
    for (int32_t a = 0; a < kV; ++a)
      for (int32_t b = 0; b < kV; ++b) {
        const double pr = marg[static_cast<size_t>(i)][static_cast<size_t>(a)] * next[static_cast<size_t>(a)][static_cast<size_t>(b)];
        const double expect = kSeeds * pr;
        const double seen = count[static_cast<size_t>(a * kV + b)];
        tv += std::abs(seen - expect) / kSeeds / 2;
        if (expect < 1e-9) {
          EXPECT_EQ(seen, 0) << c.name << ": impossible pair " << a << " " << b;
          continue;
        }
        chi2 += (seen - expect) * (seen - expect) / expect;
        ++df;
      }
    // df <= 24: the 0.9999 quantile of chi-square(24) is about 59.
    EXPECT_LT(chi2, 59.0) << c.name << ", tokens " << i + 1 << "-" << i + 2 << ": chi-square " << chi2 << ", df " << df;
    EXPECT_LT(tv, 0.04) << c.name << ", tokens " << i + 1 << "-" << i + 2;
    std::printf("[ info ] %s, tokens %d-%d: chi-square %.1f (df %d), total variation %.4f\n", c.name, i + 1, i + 2,
                chi2, df, tv);
  }
  const EngineStats st = e->stats();
  EXPECT_GT(st.spec_draft_tokens, kSeeds) << c.name;
  EXPECT_GT(st.spec_accepted_tokens, 0) << c.name;
  EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens) << c.name << ": the test needs rejections";
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.spec_draft_kv_blocks_used, 0);
  std::printf("[ info ] %s: %lld of %lld drafts accepted\n", c.name, static_cast<long long>(st.spec_accepted_tokens),
              static_cast<long long>(st.spec_draft_tokens));
}

TEST(SpeculativeSampling, OutputDistributionIsTheTargets) {
  sample::SamplingParams plain;
  plain.temperature = 1.0f;
  plain.top_k = 0;
  plain.top_p = 1.0f;
  plain.min_p = 0.0f;
  sample::SamplingParams chain;  // filters and a temperature: p is the chain's final distribution
  chain.temperature = 0.7f;
  chain.top_k = 4;
  chain.top_p = 0.95f;
  chain.min_p = 0.05f;
  for (const SamplingCase& c : {SamplingCase{"draft model, T=1", SpecMode::draft, plain},
                                SamplingCase{"draft model, top-k/top-p/min-p, T=0.7", SpecMode::draft, chain},
                                SamplingCase{"prompt lookup, T=1", SpecMode::ngram, plain},
                                SamplingCase{"prompt lookup, top-k/top-p/min-p, T=0.7", SpecMode::ngram, chain}})
    expect_target_distribution(c);
}

// Plain sampling (speculation off) through the same statistic: the test's own calibration.
TEST(SpeculativeSampling, PlainSamplingPassesTheSameTest) {
  sample::SamplingParams plain;
  plain.temperature = 1.0f;
  plain.top_k = 0;
  plain.top_p = 1.0f;
  plain.min_p = 0.0f;
  FakeStepModel target(kV);
  target.logit_fn = target_logits;
  EngineOptions o = options(4096);
  o.scheduler.max_batch_size = 64;
  auto e = Engine::create(target, nullptr, o).value();
  const std::vector<int32_t> prompt = {0, 1, 2, 0, 1, 3, 0, 1};
  for (int i = 0; i < 6000; ++i) {
    Request r;
    r.prompt = prompt;
    r.sampling = plain;
    r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    r.max_new_tokens = 1;
    ASSERT_TRUE(e->add_request(std::move(r)).ok());
  }
  std::vector<double> count(kV, 0.0);
  for (const auto& [id, o2] : run_all(*e)) count[static_cast<size_t>(o2.tokens.at(0))] += 1;
  const std::vector<float> p1 = target_probs(plain, prompt, 8);
  double chi2 = 0.0;
  for (int32_t a = 0; a < kV; ++a) chi2 += std::pow(count[a] - 6000 * p1[a], 2) / (6000 * p1[a]);
  EXPECT_LT(chi2, 23.5);  // chi-square(4) 0.9999 quantile
}

}  // namespace
}  // namespace edgelm::engine

namespace edgelm::engine {
namespace {

// Feeds the gate `n` decode steps at one batch size.
void feed(SpecGate& g, int32_t batch, bool spec, int n, int32_t emitted, double ms) {
  for (int i = 0; i < n; ++i) g.observe(batch, spec, emitted, ms);
}

TEST(SpecGate, SlowerSpeculationPausesThenProbesAgainWithALongerPause) {
  SpecGate g;
  EXPECT_TRUE(g.allow(1));  // nothing measured: speculate
  feed(g, 1, false, 5, 1, 10.0);  // plain: 0.1 token/ms
  // Drafts that emit 1.5 tokens in a 20 ms step: 0.075 token/ms, slower.
  feed(g, 1, true, SpecGate::kProbeSteps, 3, 40.0);
  EXPECT_FALSE(g.allow(1));
  feed(g, 1, false, SpecGate::kFirstPause - 1, 1, 10.0);
  EXPECT_FALSE(g.allow(1));
  feed(g, 1, false, 1, 1, 10.0);
  EXPECT_TRUE(g.allow(1));  // probing again
  feed(g, 1, true, SpecGate::kProbeSteps, 3, 40.0);
  EXPECT_FALSE(g.allow(1));
  feed(g, 1, false, SpecGate::kFirstPause, 1, 10.0);
  EXPECT_FALSE(g.allow(1)) << "the second pause is longer";
  feed(g, 1, false, SpecGate::kFirstPause, 1, 10.0);
  EXPECT_TRUE(g.allow(1));
}

TEST(SpecGate, FasterSpeculationKeepsGoing) {
  SpecGate g;
  feed(g, 2, false, 5, 2, 10.0);  // 0.2 token/ms
  for (int round = 0; round < 20; ++round) {
    feed(g, 2, true, SpecGate::kProbeSteps, 5, 12.0);  // 0.42 token/ms
    EXPECT_TRUE(g.allow(2)) << round;
  }
  EXPECT_GT(g.spec_rate(2), g.plain_rate(2));
}

TEST(SpecGate, BatchSizesAreJudgedApartAndABaselineIsTakenFirst) {
  SpecGate g;
  // Speculative steps at batch 4 with no plain baseline there: two plain steps to measure one.
  feed(g, 4, true, SpecGate::kProbeSteps, 4, 10.0);
  EXPECT_FALSE(g.allow(4));
  feed(g, 4, false, 2, 4, 10.0);
  EXPECT_TRUE(g.allow(4));
  // A losing batch size does not stop another.
  feed(g, 1, false, 3, 1, 10.0);
  feed(g, 1, true, SpecGate::kProbeSteps, 1, 30.0);
  EXPECT_FALSE(g.allow(1));
  EXPECT_TRUE(g.allow(4));
  EXPECT_TRUE(g.allow(8));
}

}  // namespace
}  // namespace edgelm::engine
