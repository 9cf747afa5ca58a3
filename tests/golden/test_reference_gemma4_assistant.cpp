// The Gemma 4 assistant (gemma4_mtp) against the reference engine: three chained draft steps
// after each prompt (the target's final-normed hidden state at n - 1 and its next token, then
// each step's argmax and post-projected state), at the constant position n over the target's
// K/V, recorded from ik_llama.cpp (commit 8337e4cd3, CPU, F16 K/V with its flash attention;
// harness through its C API: target context with mtp outputs, assistant context with
// llama_set_mtp_target_context, MTP_OP_DRAFT_GEN) on files the test rebuilds byte for byte:
//   edgelm synth --shape gemma4-tiny --ctx 2048 --seed 81 --partial-rotary 1.0
//       --vocab ../shared/vocab/ggml-vocab-llama-spm.gguf -o t.gguf
//   edgelm synth --shape gemma4-tiny-assistant --seed 82 --vocab t.gguf -o a.gguf
// (the assistant's vocabulary keys do not change its tensors). The target rotates its global
// heads fully (--partial-rotary 1.0) because the reference's gemma4_mtp graph has no rope_freqs
// for the assistant's global layers (it turns every pair of the query), while the target's K
// turns only the proportional fraction: edgelm turns the query as the target turned the keys, so
// on a proportional-RoPE target the two differ in the global layer.
// Checked: the target's next token, each step's argmax, and 32 logits per step within 2e-3 of the
// largest (both sides keep the target's K/V in F16, edgelm in its paged store).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/assistant_drafter.h"
#include "engine/step_model.h"
#include "model/synthetic.h"
#include "model/synthetic_gemma4_assistant.h"
#include "support/test_data.h"

namespace edgelm {
namespace {

struct Step {
  int32_t token, argmax;
  std::vector<float> logits;  // the first 32
};
struct Golden {
  std::vector<int32_t> prompt;
  int32_t target_next;
  std::vector<Step> steps;
};

const std::vector<Golden> kGoldens = {
    {{1, 450, 4996, 17354, 1701, 432, 29871, 29896, 29906, 29941, 3, 5, 7, 11, 13, 17, 19},
     10122,
     {{10122, 30044, {-6.35258, -15.6313, -7.73965, -4.27716, 6.89009, -4.3084, -5.59097, 5.71831, -5.77563, 0.0371709, 6.90243, 2.48215, -2.49664, -2.12947, -6.16549, 14.379, 2.98849, -4.25578, 3.61169, -0.885747, -4.13301, -6.44542, -7.27002, -6.6478, -0.183228, 3.14654, 5.97384, -0.362345, 19.9426, -9.10071, 1.28869, 4.71148}},
      {30044, 6673, {-2.15211, 4.29971, 11.6628, -5.89213, -5.96163, -10.0621, 2.5073, 3.65447, 1.06483, 0.362376, 3.48133, 7.01041, -1.99296, -8.38584, 2.71925, 2.61558, -2.23341, -4.77953, 2.32889, 1.77508, 3.61158, -3.21194, -9.44838, 11.4164, -10.8859, 1.73552, 5.97658, -0.273735, -4.14871, 9.41675, -1.23399, -6.77848}},
      {6673, 19325, {6.65737, -5.067, -8.59452, 7.29846, 5.67648, 4.22452, 9.00857, 0.660637, -9.5476, -6.12154, -11.0981, -15.4423, 12.2075, 2.01807, 1.2435, -3.96557, 1.57013, 8.40881, -6.24949, 0.560046, -1.46513, 6.86197, 6.67431, 3.2854, 6.48603, -6.38737, 0.64993, 3.60743, 0.774705, -6.04372, 3.96605, 6.248}}}},
    {{1, 15043, 29892},
     839,
     {{839, 7848, {6.65045, 8.25426, -6.31274, 9.21894, -0.214615, 8.15894, -5.4221, -3.29329, 9.29634, 1.37944, -12.8726, -1.85307, 0.951704, -5.52885, -1.15605, 10.3801, -5.18398, -4.65936, -5.00281, 0.635887, 2.53608, -3.25764, 12.1589, 2.15596, -4.1319, -7.98018, -2.58488, 16.244, -7.20116, 2.56478, -10.0492, -2.40395}},
      {7848, 30337, {-3.4959, -1.1421, -8.72197, -0.281559, 5.64447, -0.968676, -3.29999, 1.4284, -0.205022, 1.99403, 0.0934439, 2.44265, 4.20667, -4.50807, 2.35331, -6.60401, 1.68972, 1.57084, -10.1319, -2.84414, -5.7829, -0.4444, 0.788582, -1.67603, -1.36685, 0.13076, -6.00331, 3.58851, 12.7419, -3.69179, -6.69011, -0.824894}},
      {30337, 22038, {2.55937, -4.42179, -1.50809, -2.78849, -6.71325, 1.20088, -11.4139, 1.06693, 2.05139, 0.552202, 6.54549, -2.47744, 4.32931, 6.93902, -1.3455, 1.41061, 3.00212, -5.6686, 5.09622, 7.05059, -9.21866, 5.02014, 8.57675, 2.08405, -2.67932, 0.949331, -5.09859, 1.13075, -18.0413, -1.1976, -10.4195, -2.13972}}}},
};

TEST(Gemma4AssistantReference, DraftStepsReproduceTheReferenceEngine) {
  model::SyntheticSpec ts;
  ASSERT_TRUE(model::apply_synthetic_shape(ts, "gemma4-tiny").ok());
  ts.n_ctx = 2048;
  ts.seed = 81;
  ts.partial_rotary = 1.0f;
  ts.vocab_from = test::shared_path("vocab/ggml-vocab-llama-spm.gguf");
  auto tf = model::make_synthetic_model(ts);
  ASSERT_TRUE(tf.ok()) << tf.error().message;
  auto target = model::Model::load(std::move(tf).value());
  ASSERT_TRUE(target.ok()) << target.error().message;
  model::AssistantSynthSpec as;
  ASSERT_TRUE(model::apply_gemma4_assistant_shape(as, "gemma4-tiny-assistant"));
  as.seed = 82;
  as.n_vocab = 32000;
  auto af = model::make_synthetic_gemma4_assistant(as);
  ASSERT_TRUE(af.ok()) << af.error().message;
  auto assistant = model::Gemma4Assistant::load(std::move(af).value());
  ASSERT_TRUE(assistant.ok()) << assistant.error().message;
  const model::Model& t = **target;
  const auto V = static_cast<size_t>(t.config().n_vocab), E = static_cast<size_t>(t.config().n_embd);
  ThreadPool pool(2);
  engine::ModelRunner runner(t, pool);
  auto drafter = engine::AssistantDrafter::create(t, **assistant, pool);
  ASSERT_TRUE(drafter.ok()) << drafter.error().message;
  constexpr int32_t kBlock = 16;
  for (const Golden& g : kGoldens) {
    SCOPED_TRACE(testing::Message() << g.prompt.size() << "-token prompt");
    auto store = kv::KvStore::create(t.config(), 4, kBlock, kv::KvType::f16);
    ASSERT_TRUE(store.ok());
    (*drafter)->attach_target_kv(*store);
    const auto n = static_cast<int32_t>(g.prompt.size());
    std::vector<kv::BlockId> blocks;
    for (int32_t b = 0; b * kBlock < n + 1; ++b) blocks.push_back(b);
    engine::StepBatch batch;
    batch.tokens = g.prompt;
    engine::BatchSeq bs;
    bs.n_tokens = n;
    bs.blocks = blocks;
    bs.n_logits = 1;
    batch.seqs.push_back(bs);
    batch.want_hidden = true;
    std::vector<float> logits(V);
    ASSERT_TRUE(runner.forward(batch, *store, logits).ok());
    EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), g.target_next);
    std::vector<float> h(runner.hidden().end() - static_cast<std::ptrdiff_t>(E), runner.hidden().end()), h_next(E);
    const std::span<const kv::BlockId> table(blocks);
    for (const Step& st : g.steps) {
      std::vector<float> out(V);
      (*drafter)->step(std::span(&st.token, 1), h.data(), std::span(&n, 1), std::span(&table, 1), out.data(),
                       h_next.data());
      double scale = 0;
      for (float x : st.logits) scale = std::max(scale, std::abs(static_cast<double>(x)));
      for (size_t i = 0; i < st.logits.size(); ++i) EXPECT_NEAR(out[i], st.logits[i], 2e-3 * scale) << "logit " << i;
      EXPECT_EQ(std::max_element(out.begin(), out.end()) - out.begin(), st.argmax);
      h = h_next;
    }
  }
}

}  // namespace
}  // namespace edgelm
