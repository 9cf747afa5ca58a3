// The MTP ("nextn") head of a qwen35 file as a built-in draft (--draft mtp, engine/mtp_drafter.h):
// the loader reads the MTP block under the reference's names (and names a missing tensor); a
// file without one is refused by --draft mtp; MTP speculation is token-identical to plain greedy
// decoding for one and for several concurrent sequences, with rejections, with preemption and
// with prefix hits through state snapshots (gaps in the head's input); and on a model whose
// weights make the head predict what the main model will (every layer's output projections
// zero, eh_proj passing the token embedding through), the drafts are accepted and the engine
// runs fewer main-model steps than it emits tokens. The drafter's first two drafts equal the
// head computed here from the reference forward's hidden states (entry i: the embedding of token
// i + 1 first, then h_i; the chained entry from the head's own final-normed output).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "engine/draft_model.h"
#include "engine/engine.h"
#include "engine/mtp_drafter.h"
#include "engine/scheduler.h"
#include "engine/step_model.h"
#include "kernels/ops_vector.h"
#include "model/ops.h"
#include "engine_runs.h"
#include "hybrid_model.h"
#include "model/synthetic.h"
#include "speculative_check.h"

namespace edgelm::engine {
namespace {

using test::expect_agreeing_draft_exact_and_accepted;
using test::greedy;
using test::hybrid_options;
using test::reference_greedy;
using test::run_all;
using test::set_tensor;

model::SyntheticSpec mtp_spec() {
  model::SyntheticSpec s;  // 4 main layers (DeltaNet 0-2, attention 3) and the MTP block 4
  s.arch = "qwen35";
  s.n_layer = 4;
  s.head_dim = 32;
  s.n_rot = 16;
  s.n_vocab = 96;
  s.seed = 77;
  s.n_nextn = 1;
  return s;
}

std::unique_ptr<model::Model> load(format::ModelFile file) {
  auto m = model::Model::load(std::move(file));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

EngineOptions mtp_options(const model::Model& m, ThreadPool& pool, int32_t max_batch) {
  EngineOptions o = hybrid_options(m, 256, max_batch, 0, 0, /*spec=*/true, 4);
  o.spec.mode = SpecMode::mtp;
  o.spec.mtp_model = &m;
  o.spec.mtp_pool = &pool;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.draft_min = 1;
  o.spec.draft_max = 4;
  return o;
}

TEST(EngineMtp, LoadsTheNextnBlockUnderTheReferenceNames) {
  auto file = model::make_synthetic_model(mtp_spec());
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->metadata.get_u32("qwen35.block_count").value(), 5u);
  EXPECT_EQ(file->metadata.get_u32("qwen35.nextn_predict_layers").value(), 1u);
  for (const char* n : {"blk.4.nextn.eh_proj.weight", "blk.4.nextn.enorm.weight", "blk.4.nextn.hnorm.weight",
                        "blk.4.nextn.shared_head_norm.weight", "blk.4.attn_q.weight", "blk.4.ffn_down.weight"})
    EXPECT_NE(file->find_tensor(n), nullptr) << n;
  format::ModelFile broken = *file;
  const auto m = load(std::move(file).value());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config().n_layer, 4) << "the main forward runs block_count - nextn_predict_layers layers";
  EXPECT_EQ(m->config().n_nextn, 1);
  EXPECT_TRUE(m->weights().mtp.present);
  EXPECT_TRUE(static_cast<bool>(m->weights().mtp.eh_proj));

  std::erase_if(broken.tensors, [](const format::TensorInfo& t) { return t.name == "blk.4.nextn.hnorm.weight"; });
  auto bad = model::Model::load(std::move(broken));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("blk.4.nextn.hnorm.weight"), std::string::npos) << bad.error().message;
}

TEST(EngineMtp, DraftMtpNeedsTheBlock) {
  const auto plain = test::hybrid_model();  // no MTP block
  ThreadPool pool(1);
  DraftSpec ds;
  ds.draft = "mtp";
  SpecOptions spec;
  DraftModel draft;
  const Status st = configure_speculation(ds, *plain, "", pool, spec, draft);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("no MTP layer"), std::string::npos) << st.error().message;
  ds.draft = "eagle";
  EXPECT_FALSE(configure_speculation(ds, *plain, "", pool, spec, draft).ok());
  EngineOptions o = mtp_options(*plain, pool, 1);
  ModelRunner runner(*plain, pool);
  auto e = Engine::create(runner, nullptr, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("no MTP layer"), std::string::npos) << e.error().message;
}

// The head's input rows, written out here: eh_proj(concat(enorm(embd(token)), hnorm(h))).
std::vector<float> head_rows(const model::Model& m, std::span<const int32_t> tokens, const float* h, ThreadPool& pool) {
  const auto E = static_cast<size_t>(m.config().n_embd);
  const model::MtpWeights& w = m.weights().mtp;
  const kernels::VectorOps& ops = kernels::active_vector_ops();
  std::vector<float> cat(tokens.size() * 2 * E), out(tokens.size() * E);
  for (size_t t = 0; t < tokens.size(); ++t) {
    kernels::get_row(m.weights().token_embd, tokens[t], &cat[t * 2 * E]);
    ops.rms_norm(&cat[t * 2 * E], &cat[t * 2 * E], w.enorm, static_cast<int64_t>(E), m.config().rms_eps);
    ops.rms_norm(&cat[t * 2 * E + E], h + t * E, w.hnorm, static_cast<int64_t>(E), m.config().rms_eps);
  }
  kernels::MatmulScratch mm;
  model::linear(out.data(), cat.data(), static_cast<int64_t>(tokens.size()), w.eh_proj, nullptr, pool, mm);
  return out;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(EngineMtp, DraftsAreTheHeadOverTheMainHiddenStates) {
  auto file = model::make_synthetic_model(mtp_spec());
  ASSERT_TRUE(file.ok());
  const auto m = load(std::move(file).value());
  ASSERT_NE(m, nullptr);
  auto head = m->mtp_head();
  ASSERT_TRUE(head.ok()) << head.error().message;
  const auto E = static_cast<size_t>(m->config().n_embd), V = static_cast<size_t>(m->config().n_vocab);
  ThreadPool pool(1);
  std::mt19937 rng(5);
  int differs = 0;  // drafts that differ from the main model's own next token (the check bites)
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int32_t> prompt(static_cast<size_t>(4 + trial));
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % V);
    const auto L = prompt.size();
    model::KvCache cache(m->config(), 64);
    std::vector<float> logits(V), hidden(L * E);
    ASSERT_TRUE(m->forward(prompt, cache, logits, pool, hidden).ok());
    const int32_t next = argmax(logits);  // pending token L
    // Head entries i = 0 .. L-1: token i + 1 with h_i; then the chained entry.
    std::vector<int32_t> ent(prompt.begin() + 1, prompt.end());
    ent.push_back(next);
    std::vector<float> rows = head_rows(*m, ent, hidden.data(), pool);
    model::KvCache hc((*head)->config(), 64);
    std::vector<float> hl(V), hh(L * E);
    model::EmbdSpan span{0, static_cast<int32_t>(L), rows.data(), true};
    ASSERT_TRUE((*head)->forward(ent, hc, hl, pool, hh, std::span(&span, 1)).ok());
    const int32_t d1 = argmax(hl);
    const std::vector<float> chained = head_rows(*m, std::span(&d1, 1), &hh[(L - 1) * E], pool);
    model::EmbdSpan span2{static_cast<int32_t>(L), 1, chained.data(), true};
    ASSERT_TRUE((*head)->forward(std::span(&d1, 1), hc, hl, pool, {}, std::span(&span2, 1)).ok());
    const int32_t d2 = argmax(hl);

    auto drafter = MtpDrafter::create(*m, pool, 4, kv::KvType::f32, 64);
    ASSERT_TRUE(drafter.ok()) << drafter.error().message;
    Sequence s(1, greedy(prompt, 8), 0);
    s.tokens = prompt;
    s.tokens.push_back(next);
    s.n_prompt = static_cast<int32_t>(L);
    s.kv.n_tokens = static_cast<int32_t>(L);  // the main K/V holds the prompt; `next` is pending
    (*drafter)->observe(s, 0, std::span(hidden).first(3 * E));  // in two steps, as prefill chunks
    (*drafter)->observe(s, 3, std::span(hidden).subspan(3 * E));
    Sequence* seqs[] = {&s};
    const int32_t k[] = {2};
    (*drafter)->propose(seqs, k);
    ASSERT_EQ(s.draft.size(), 2u);
    EXPECT_EQ(s.draft[0], d1) << "trial " << trial;
    EXPECT_EQ(s.draft[1], d2) << "trial " << trial;
    differs += d1 != next ? 1 : 0;
    (*drafter)->sync(s);
    (*drafter)->check_invariants();
    EXPECT_GT((*drafter)->kv_blocks_used(), 0) << "the catch-up entries stay";
    (*drafter)->release(s.id);
    EXPECT_EQ((*drafter)->kv_blocks_used(), 0);
  }
  EXPECT_GT(differs, 0);
}

TEST(EngineMtp, EqualsPlainGreedyAloneAndConcurrentWithRejections) {
  auto file = model::make_synthetic_model(mtp_spec());
  ASSERT_TRUE(file.ok());
  const auto m = load(std::move(file).value());
  ASSERT_NE(m, nullptr);
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  for (const int32_t n_seqs : {1, 4}) {
    SCOPED_TRACE(testing::Message() << n_seqs << " sequences");
    EngineOptions o = mtp_options(*m, pool, n_seqs);
    o.scheduler.max_batch_tokens = 8;  // prompts in chunks, mixed with decodes
    auto e = Engine::create(runner, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::mt19937 rng(11);
    std::map<RequestId, std::vector<int32_t>> want;
    for (int i = 0; i < n_seqs; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(3 + rng() % 14));
      for (int32_t& t : p) t = static_cast<int32_t>(rng() % 96);
      want[(*e)->add_request(greedy(p, 32)).value()] = reference_greedy(*m, p, 32);
    }
    const auto got = run_all(**e);
    for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    const EngineStats st = (*e)->stats();
    EXPECT_GT(st.spec_draft_tokens, 0);
    EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens) << "random weights: some drafts are rejected";
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.spec_draft_kv_blocks_used, 0) << "finished sequences returned their MTP K/V";
  }
}

// Preemption (a small pool: sequences are recomputed) and prefix reuse through state snapshots
// (a shared prefix is not recomputed, so its hidden states never reach the head): the head's K/V
// restarts after the gap and the output stays plain greedy's.
TEST(EngineMtp, EqualsPlainGreedyWithPreemptionAndPrefixHits) {
  auto file = model::make_synthetic_model(mtp_spec());
  ASSERT_TRUE(file.ok());
  const auto m = load(std::move(file).value());
  ASSERT_NE(m, nullptr);
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  struct Case {
    int32_t n_blocks, interval, n_snapshots;
  };
  for (const Case c : {Case{8, 0, 0}, Case{256, 1, 16}}) {
    SCOPED_TRACE(testing::Message() << c.n_blocks << " blocks, snapshot interval " << c.interval);
    EngineOptions o = hybrid_options(*m, c.n_blocks, 4, c.interval, c.n_snapshots, /*spec=*/true, 16);
    o.spec.mode = SpecMode::mtp;
    o.spec.mtp_model = m.get();
    o.spec.mtp_pool = &pool;
    o.spec.cost_gate = false;
    o.spec.draft_min = 1;
    o.spec.draft_max = 4;
    o.scheduler.max_batch_tokens = 8;
    o.scheduler.watermark = 1.0;
    auto e = Engine::create(runner, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::mt19937 rng(3);
    const std::vector<int32_t> shared = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
    std::map<RequestId, std::vector<int32_t>> want;
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(3 + rng() % 14));
      for (int32_t& t : p) t = static_cast<int32_t>(rng() % 96);
      p.insert(p.begin(), shared.begin(), shared.end());
      const int32_t n_new = c.interval == 0 ? 120 : 40;  // long enough to overflow the small pool
      want[(*e)->add_request(greedy(p, n_new)).value()] = reference_greedy(*m, p, n_new);
    }
    const auto got = run_all(**e);
    for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    const EngineStats st = (*e)->stats();
    EXPECT_GT(st.spec_draft_tokens, 0);
    if (c.interval == 0) {
      EXPECT_GT(st.n_preemptions, 0) << st.kv_blocks << " blocks, batch cap " << st.batch_cap;
    }
    if (c.interval > 0) {
      EXPECT_GT(st.prefix_tokens_hit, 0);
    }
    EXPECT_EQ(st.spec_draft_kv_blocks_used, 0);
  }
}

TEST(EngineMtp, AgreeingHeadIsAcceptedAndSavesMainSteps) {
  const model::SyntheticSpec s = mtp_spec();
  auto made = model::make_synthetic_model(s);
  ASSERT_TRUE(made.ok());
  format::ModelFile file = std::move(made).value();
  // Every layer (main and MTP) adds nothing to the residual stream, so the main model predicts
  // from its current token's embedding alone: next = f(token). The head's input is the normed
  // token embedding (eh_proj = [I | 0], unit norms), so it predicts f(token) for the token it is
  // given: exactly the main model's next token.
  auto zero = [](const format::TensorInfo&, int64_t) { return 0.0f; };
  auto one = [](const format::TensorInfo&, int64_t) { return 1.0f; };
  for (int32_t l = 0; l <= s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    set_tensor(file, p + (l < s.n_layer && l % 4 != 3 ? "ssm_out.weight" : "attn_output.weight"), zero);
    set_tensor(file, p + "ffn_down.weight", zero);
  }
  set_tensor(file, "output_norm.weight", one);
  set_tensor(file, "blk.4.nextn.enorm.weight", one);
  set_tensor(file, "blk.4.nextn.shared_head_norm.weight", one);
  set_tensor(file, "blk.4.nextn.eh_proj.weight", [](const format::TensorInfo& t, int64_t i) {
    return i % t.ne[0] == i / t.ne[0] ? 1.0f : 0.0f;  // row r: 1 at input r (the embedding half)
  });
  const auto m = load(std::move(file));
  ASSERT_NE(m, nullptr);
  ThreadPool pool(2);
  ModelRunner runner(*m, pool);
  expect_agreeing_draft_exact_and_accepted(*m, runner, [&](int32_t n_seqs) { return mtp_options(*m, pool, n_seqs); });
}

}  // namespace
}  // namespace edgelm::engine
