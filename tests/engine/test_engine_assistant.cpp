// The Gemma 4 assistant (gemma4_mtp, model/gemma4_assistant.h) as a speculative draft
// (engine/assistant_drafter.h): the loader reads the reference converter's keys and tensors and
// names a missing tensor, an unknown tensor and an unknown key; the assistant is refused for a
// target it does not fit; one draft step equals the assistant computed here in double precision
// over the reference forward's K/V and hidden state (Q-only layers over the target's last K/V
// layer of their kind, position n, local layers seeing the last n_swa - 1 positions); assistant
// speculation is token-identical to plain greedy decoding alone, concurrent, with preemption and
// with prefix hits; and with an assistant built to agree with its target (both predict from the
// current token alone), its drafts are accepted and the engine runs fewer target steps than it
// emits tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "engine/assistant_drafter.h"
#include "engine/draft_model.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/step_model.h"
#include "engine_runs.h"
#include "format/gguf_writer.h"
#include "model/gemma4_assistant.h"
#include "model/ops.h"
#include "model/synthetic.h"
#include "model/synthetic_gemma4_assistant.h"
#include "speculative_check.h"

namespace edgelm::engine {
namespace {

using test::expect_agreeing_draft_exact_and_accepted;
using test::greedy;
using test::reference_greedy;
using test::run_all;
using test::set_tensor;

constexpr int32_t kVocab = 96;

format::ModelFile target_file(uint64_t seed = 61) {
  model::SyntheticSpec s;
  EXPECT_TRUE(model::apply_synthetic_shape(s, "gemma4-tiny").ok());
  s.n_vocab = kVocab;
  s.seed = seed;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << file.error().message;
  return std::move(file).value();
}

model::AssistantSynthSpec assistant_spec() {
  model::AssistantSynthSpec a;
  EXPECT_TRUE(model::apply_gemma4_assistant_shape(a, "gemma4-tiny-assistant"));
  a.n_vocab = kVocab;
  a.seed = 5;
  return a;
}

format::ModelFile assistant_file(const model::AssistantSynthSpec& a = assistant_spec()) {
  auto file = model::make_synthetic_gemma4_assistant(a);
  EXPECT_TRUE(file.ok()) << file.error().message;
  return std::move(file).value();
}

std::unique_ptr<model::Model> load_target(format::ModelFile f) {
  auto m = model::Model::load(std::move(f));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

std::unique_ptr<model::Gemma4Assistant> load_assistant(format::ModelFile f) {
  auto a = model::Gemma4Assistant::load(std::move(f));
  EXPECT_TRUE(a.ok()) << a.error().message;
  return a.ok() ? std::move(a).value() : nullptr;
}

std::string load_error(format::ModelFile f) {
  auto a = model::Gemma4Assistant::load(std::move(f));
  return a.ok() ? std::string() : a.error().message;
}

TEST(Gemma4Assistant, LoadsTheReferenceConverterLayoutAndNamesWhatItRefuses) {
  format::ModelFile f = assistant_file();
  EXPECT_EQ(f.metadata.get_string("general.architecture").value(), "gemma4_mtp");
  for (const char* n : {"mtp_pre_proj.weight", "mtp_post_proj.weight", "token_embd.weight", "blk.0.attn_q.weight",
                        "blk.1.attn_q_norm.weight", "blk.1.post_ffw_norm.weight"})
    EXPECT_NE(f.find_tensor(n), nullptr) << n;
  EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight"), nullptr) << "Q-only layers";
  const auto a = load_assistant(f);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->config().n_layer, 2);
  EXPECT_EQ(a->config().n_backbone, 64);
  EXPECT_EQ(a->config().n_vocab, kVocab);
  EXPECT_TRUE(a->config().local[0]);
  EXPECT_FALSE(a->config().local[1]);

  format::ModelFile missing = f;
  std::erase_if(missing.tensors, [](const format::TensorInfo& t) { return t.name == "blk.1.attn_q_norm.weight"; });
  EXPECT_NE(load_error(std::move(missing)).find("blk.1.attn_q_norm.weight"), std::string::npos);
  format::ModelFile extra = f;
  format::TensorInfo t = *extra.find_tensor("blk.0.attn_norm.weight");
  t.name = "blk.0.attn_k_norm.weight";
  extra.tensors.push_back(t);
  EXPECT_NE(load_error(std::move(extra)).find("blk.0.attn_k_norm.weight"), std::string::npos);
  format::ModelFile key = f;
  key.metadata.set("gemma4_mtp.attention.shared_kv_layers", format::GgufValue::from_u32(2));
  EXPECT_NE(load_error(std::move(key)).find("gemma4_mtp.attention.shared_kv_layers"), std::string::npos);
  format::ModelFile other = f;
  other.metadata.set("general.architecture", format::GgufValue::from_string("gemma4-assistant"));
  EXPECT_NE(load_error(std::move(other)).find("gemma4-assistant"), std::string::npos);
}

TEST(Gemma4Assistant, RefusesATargetItDoesNotFit) {
  const auto target = load_target(target_file());
  model::AssistantSynthSpec wide = assistant_spec();
  wide.n_backbone = 48;
  const auto a = load_assistant(assistant_file(wide));
  ASSERT_NE(a, nullptr);
  const Status st = a->check_target(*target);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("backbone_embedding_length"), std::string::npos) << st.error().message;
  ThreadPool pool(1);
  EXPECT_FALSE(AssistantDrafter::create(*target, *a, pool).ok());
  const auto fits = load_assistant(assistant_file());
  EXPECT_TRUE(fits->check_target(*target).ok());
}

// The assistant step written out in double precision from the header's formula.
std::vector<double> oracle_step(const model::Model& t, const model::Gemma4Assistant& a, model::KvCache& cache,
                                int32_t token, const float* h, int32_t pos, std::vector<double>& h_out) {
  const model::AssistantConfig& c = a.config();
  const model::ModelConfig& tc = t.config();
  const int64_t E = c.n_embd, B = c.n_backbone;
  auto row = [](const kernels::WeightMatrix& w, int64_t r) {
    std::vector<float> out(static_cast<size_t>(w.cols));
    kernels::get_row(w, r, out.data());
    return out;
  };
  auto mat = [&](const kernels::WeightMatrix& w, const std::vector<double>& x) {
    std::vector<double> y(static_cast<size_t>(w.rows));
    for (int64_t r = 0; r < w.rows; ++r) {
      const std::vector<float> wr = row(w, r);
      double s = 0;
      for (int64_t i = 0; i < w.cols; ++i) s += static_cast<double>(wr[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      y[static_cast<size_t>(r)] = s;
    }
    return y;
  };
  auto rms = [&](const double* x, const float* w, int64_t n, double* out) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + c.rms_eps);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
  };
  std::vector<double> in(static_cast<size_t>(2 * B));
  const std::vector<float> e = row(t.weights().token_embd, token);
  for (int64_t i = 0; i < B; ++i) {
    in[static_cast<size_t>(i)] = static_cast<double>(e[static_cast<size_t>(i)]) * std::sqrt(static_cast<double>(B));
    in[static_cast<size_t>(B + i)] = h[i];
  }
  std::vector<double> x = mat(a.pre_proj(), in), xn(static_cast<size_t>(E));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const model::AssistantLayer& L = a.layer(l);
    const int64_t D = c.layer_head_dim(l), H = c.n_head;
    const bool local = c.local[static_cast<size_t>(l)];
    // The target layer: the last one with K/V of this kind.
    int32_t tl = tc.n_layer - 1;
    while (!(tc.layer_has_kv(tl) && tc.layer_is_local(tl) == local)) --tl;
    const int32_t kv = tc.kv_layer(tl);
    rms(x.data(), L.attn_norm, E, xn.data());
    std::vector<double> q = mat(L.wq, xn);
    std::vector<float> qf(q.size());
    for (int64_t hd = 0; hd < H; ++hd) {
      rms(&q[static_cast<size_t>(hd * D)], L.q_norm, D, &q[static_cast<size_t>(hd * D)]);
      for (int64_t i = 0; i < D; ++i) qf[static_cast<size_t>(hd * D + i)] = static_cast<float>(q[static_cast<size_t>(hd * D + i)]);
    }
    t.rope_for(tl, tc.n_ctx_train).apply(qf.data(), static_cast<int32_t>(H), static_cast<int32_t>(D), pos);
    const int32_t first = local ? std::max(0, pos - c.n_swa + 1) : 0;
    std::vector<double> att(static_cast<size_t>(H * D), 0.0);
    const int64_t gqa = H / tc.n_head_kv;
    for (int64_t hd = 0; hd < H; ++hd) {
      const int64_t kh = hd / gqa;
      std::vector<double> sc;
      double mx = -1e300;
      for (int32_t p = first; p < pos; ++p) {
        const float* k = cache.k(kv, p) + kh * D;
        double s = 0;
        for (int64_t i = 0; i < D; ++i) s += static_cast<double>(qf[static_cast<size_t>(hd * D + i)]) * k[i];
        sc.push_back(s);
        mx = std::max(mx, s);
      }
      double den = 0;
      for (double& s : sc) den += (s = std::exp(s - mx));
      for (int32_t p = first; p < pos; ++p) {
        const float* v = cache.v(kv, p) + kh * D;
        for (int64_t i = 0; i < D; ++i)
          att[static_cast<size_t>(hd * D + i)] += sc[static_cast<size_t>(p - first)] / den * v[i];
      }
    }
    std::vector<double> o = mat(L.wo, att);
    rms(o.data(), L.post_attn_norm, E, o.data());
    for (int64_t i = 0; i < E; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
    rms(x.data(), L.ffn_norm, E, xn.data());
    std::vector<double> g = mat(L.w_gate, xn), u = mat(L.w_up, xn);
    for (size_t i = 0; i < g.size(); ++i) {
      const double z = g[i];
      g[i] = 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (z + 0.044715 * z * z * z))) * u[i];
    }
    std::vector<double> f = mat(L.w_down, g);
    rms(f.data(), L.post_ffw_norm, E, f.data());
    for (int64_t i = 0; i < E; ++i) {
      x[static_cast<size_t>(i)] += f[static_cast<size_t>(i)];
      if (L.out_scale != nullptr) x[static_cast<size_t>(i)] *= L.out_scale[0];
    }
  }
  rms(x.data(), a.output_norm(), E, xn.data());
  h_out = mat(a.post_proj(), xn);
  return mat(a.token_embd(), xn);
}

TEST(Gemma4Assistant, DraftStepEqualsTheAssistantOverTheTargetKv) {
  const auto target = load_target(target_file());
  const auto a = load_assistant(assistant_file());
  ASSERT_NE(a, nullptr);
  ThreadPool pool(2);
  auto drafter = AssistantDrafter::create(*target, *a, pool);
  ASSERT_TRUE(drafter.ok()) << drafter.error().message;
  const model::ModelConfig& tc = target->config();
  const auto E = static_cast<size_t>(tc.n_embd);
  constexpr int32_t kBlock = 4;
  auto store = kv::KvStore::create(tc, 16, kBlock, kv::KvType::f32);
  ASSERT_TRUE(store.ok());
  (*drafter)->attach_target_kv(*store);
  std::mt19937 rng(3);
  // Prompts of 3 and 19 tokens: inside and past the window of 8; two rows in one step.
  std::vector<int32_t> lens = {3, 19};
  std::vector<model::KvCache> caches;
  std::vector<std::vector<kv::BlockId>> tables;
  std::vector<int32_t> tokens, pos;
  std::vector<float> hid;
  for (size_t r = 0; r < lens.size(); ++r) {
    std::vector<int32_t> p(static_cast<size_t>(lens[r]));
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % kVocab);
    caches.emplace_back(tc, 64);
    std::vector<float> logits(kVocab), hidden(p.size() * E);
    ASSERT_TRUE(target->forward(p, caches.back(), logits, pool, hidden).ok());
    std::vector<kv::BlockId> blocks;
    const int32_t n_blocks = (lens[r] + kBlock - 1) / kBlock;
    for (int32_t b = 0; b < n_blocks; ++b) blocks.push_back(static_cast<kv::BlockId>(r * 8 + static_cast<size_t>(b)));
    for (int32_t kvl = 0; kvl < tc.n_kv_layers(); ++kvl)
      for (int32_t q = 0; q < lens[r]; ++q)
        store->write(kvl, blocks[static_cast<size_t>(q / kBlock)], q % kBlock, caches.back().k(kvl, q),
                     caches.back().v(kvl, q));
    tables.push_back(blocks);
    tokens.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    pos.push_back(lens[r]);
    hid.insert(hid.end(), hidden.end() - static_cast<std::ptrdiff_t>(E), hidden.end());
  }
  std::vector<std::span<const kv::BlockId>> spans(tables.begin(), tables.end());
  std::vector<float> logits(lens.size() * kVocab), h_out(lens.size() * E);
  (*drafter)->step(tokens, hid.data(), pos, spans, logits.data(), h_out.data());
  for (size_t r = 0; r < lens.size(); ++r) {
    std::vector<double> ho;
    const std::vector<double> want = oracle_step(*target, *a, caches[r], tokens[r], &hid[r * E], pos[r], ho);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (int32_t i = 0; i < kVocab; ++i)
      // 2e-6 of the largest: float sums vs double (~3e-6 / 17 seen); one position more in a local
      // layer's window moves them by 2e-5 of it.
      ASSERT_NEAR(logits[r * kVocab + static_cast<size_t>(i)], want[static_cast<size_t>(i)], 2e-6 * scale)
          << "row " << r << " logit " << i;
    for (size_t i = 0; i < E; ++i) ASSERT_NEAR(h_out[r * E + i], ho[i], 1e-5 * (1 + std::abs(ho[i])));
  }
}

EngineOptions assistant_options(const model::Model& t, const model::Gemma4Assistant& a, ThreadPool& pool,
                                int32_t n_blocks, int32_t max_batch) {
  EngineOptions o;
  o.block_size = 4;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = static_cast<size_t>(n_blocks) * 4 * kv::kv_bytes_per_token(t.config(), o.kv_type);
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;
  o.scheduler.max_batch_size = max_batch;
  o.spec.mode = SpecMode::assistant;
  o.spec.assistant = &a;
  o.spec.mtp_model = &t;
  o.spec.mtp_pool = &pool;
  o.spec.cost_gate = false;  // every step speculates, whatever the timing
  o.spec.draft_min = 1;
  o.spec.draft_max = 4;
  return o;
}

TEST(Gemma4Assistant, SpeculationEqualsPlainGreedyAloneConcurrentPreemptedAndWithPrefixHits) {
  const auto target = load_target(target_file());
  const auto a = load_assistant(assistant_file());
  ASSERT_NE(a, nullptr);
  ThreadPool pool(2);
  ModelRunner runner(*target, pool);
  struct Case {
    int32_t n_seqs, n_blocks;
    bool shared_prefix;
  };
  for (const Case c : {Case{1, 256, false}, Case{4, 256, false}, Case{4, 14, false}, Case{4, 256, true}}) {
    SCOPED_TRACE(testing::Message() << c.n_seqs << " sequences, " << c.n_blocks << " blocks, prefix "
                                    << c.shared_prefix);
    EngineOptions o = assistant_options(*target, *a, pool, c.n_blocks, c.n_seqs);
    o.scheduler.max_batch_tokens = 8;
    o.scheduler.watermark = 1.0;
    auto e = Engine::create(runner, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    std::mt19937 rng(11);
    const std::vector<int32_t> shared = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
    std::map<RequestId, std::vector<int32_t>> want;
    for (int i = 0; i < c.n_seqs; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(3 + rng() % 14));
      for (int32_t& t : p) t = static_cast<int32_t>(rng() % kVocab);
      if (c.shared_prefix) p.insert(p.begin(), shared.begin(), shared.end());
      want[(*e)->add_request(greedy(p, 24)).value()] = reference_greedy(*target, p, 24);
      if (c.shared_prefix && i == 0) {  // the first finishes, so the others hit its cached prefix
        const auto first = run_all(**e);
        for (const auto& [id, w] : want) EXPECT_EQ(first.at(id).tokens, w);
        want.clear();
      }
    }
    const auto got = run_all(**e);
    for (const auto& [id, w] : want) EXPECT_EQ(got.at(id).tokens, w) << "request " << id;
    const EngineStats st = (*e)->stats();
    EXPECT_GT(st.spec_draft_tokens, 0);
    EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens) << "random weights: some drafts are rejected";
    if (c.n_blocks == 14) {
      EXPECT_GT(st.n_preemptions, 0);
    }
    if (c.shared_prefix) {
      EXPECT_GT(st.prefix_tokens_hit, 0);
    }
    EXPECT_EQ(st.kv_blocks_used, 0);
  }
}

TEST(Gemma4Assistant, AgreeingAssistantIsAcceptedAndSavesTargetSteps) {
  // Target: every layer adds nothing to the residual stream (attn_output, ffn_down and the PLE
  // projection zero), so it predicts from its current token's embedding alone: next = f(token).
  // Assistant of the target's width: its layers add nothing either, pre_proj passes the scaled
  // target embedding through ([I | 0]), and its head is the target's (token_embd and output_norm
  // copied): it predicts f(token) for the token it is given, exactly the target's next token.
  format::ModelFile tf = target_file();
  auto zero = [](const format::TensorInfo&, int64_t) { return 0.0f; };
  for (int32_t l = 0; l < 8; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    set_tensor(tf, p + "attn_output.weight", zero);
    set_tensor(tf, p + "ffn_down.weight", zero);
    set_tensor(tf, p + "proj.weight", zero);
  }
  model::AssistantSynthSpec as = assistant_spec();
  as.n_embd = 64;
  format::ModelFile af = assistant_file(as);
  for (const char* name : {"token_embd.weight", "output_norm.weight"}) {
    const format::TensorInfo* src = tf.find_tensor(name);
    ASSERT_NE(src, nullptr);
    set_tensor(af, name, [src](const format::TensorInfo&, int64_t i) {
      return reinterpret_cast<const float*>(src->data)[i];
    });
  }
  for (int32_t l = 0; l < as.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    set_tensor(af, p + "attn_output.weight", zero);
    set_tensor(af, p + "ffn_down.weight", zero);
  }
  set_tensor(af, "mtp_pre_proj.weight", [](const format::TensorInfo& t, int64_t i) {
    return i % t.ne[0] == i / t.ne[0] ? 1.0f : 0.0f;  // row r: 1 at input r (the embedding half)
  });
  const auto target = load_target(std::move(tf));
  const auto a = load_assistant(std::move(af));
  ASSERT_NE(a, nullptr);
  ThreadPool pool(2);
  ModelRunner runner(*target, pool);
  expect_agreeing_draft_exact_and_accepted(
      *target, runner, [&](int32_t n_seqs) { return assistant_options(*target, *a, pool, 256, n_seqs); });
}

TEST(Gemma4Assistant, DraftModelFlagDetectsTheAssistant) {
  const auto target = load_target(target_file());
  const std::string path = ::testing::TempDir() + "/g4_assistant_test.gguf";
  ASSERT_TRUE(format::write_gguf(path, assistant_file()).ok());
  ThreadPool pool(1);
  DraftSpec ds;
  ds.draft_model = path;
  SpecOptions spec;
  DraftModel draft;
  const Status st = configure_speculation(ds, *target, "", pool, spec, draft);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(spec.mode, SpecMode::assistant);
  EXPECT_EQ(spec.assistant, draft.assistant.get());
  EXPECT_EQ(spec.mtp_model, target.get());
}

}  // namespace
}  // namespace edgelm::engine
