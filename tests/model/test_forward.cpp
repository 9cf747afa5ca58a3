// The FP32 reference forward against an independent double-precision computation
// (naive_forward.h), for llama (GQA, tied output, F16 weights) and qwen2 (Q/K/V biases, NEOX
// rotary), on random-weight models written to GGUF by our writer and read back.
#include <gtest/gtest.h>

#include <cmath>

#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/synthetic.h"
#include "naive_forward.h"
#include "support/test_data.h"

namespace edgelm::model {
namespace {

// Writes the synthetic model to GGUF and loads it back, so the writer is part of the path.
std::unique_ptr<Model> load_via_gguf(const SyntheticSpec& spec, const test::TempDir& dir) {
  auto file = make_synthetic_model(spec);
  EXPECT_TRUE(file.ok()) << file.error().message;
  const std::string path = dir.file(spec.arch + ".gguf");
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  auto read = format::read_gguf(path);
  EXPECT_TRUE(read.ok()) << read.error().message;
  auto model = Model::load(std::move(read).value());
  EXPECT_TRUE(model.ok()) << model.error().message;
  return std::move(model).value();
}

test::NaiveConfig naive_config(const ModelConfig& c) {
  return {c.n_embd, c.n_layer, c.n_ff, c.n_head, c.n_head_kv, c.n_vocab, c.rms_eps, c.rope_base,
          c.arch->rope_style == RopeStyle::neox, c.arch->qkv_bias};
}

// Feeds tokens one at a time through the cached forward and compares every step's logits
// with the naive recomputation of the whole prefix.
// tolerance: max |error| / max |logit|. F32 weights: float vs double rounding only; F16 and
// quantized weights: also the activations' rounding to the paired type (F16, Q8_0, Q8_K).
void expect_matches_naive(const Model& m, const std::vector<int>& tokens, int n_threads, double tolerance = 1e-4) {
  ThreadPool pool(n_threads);
  KvCache cache(m.config(), 64);
  test::NaiveModel naive(m.file(), naive_config(m.config()));
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  for (size_t t = 0; t < tokens.size(); ++t) {
    ASSERT_TRUE(m.forward(std::span(&tokens[t], 1), cache, logits, pool).ok());
    const auto ref = naive.logits(std::vector<int>(tokens.begin(), tokens.begin() + static_cast<long>(t) + 1));
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::abs(ref[i]));
      max_err = std::max(max_err, std::abs(ref[i] - logits[i]));
    }
    ASSERT_GT(max_ref, 0.1);  // the check is meaningful only with non-trivial logits
    EXPECT_LT(max_err / max_ref, tolerance) << "position " << t;
  }
}

TEST(Forward, Qwen2MatchesIndependentComputation) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.arch = "qwen2";
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 96;
  spec.n_vocab = 300;
  spec.seed = 7;
  auto m = load_via_gguf(spec, dir);
  ASSERT_TRUE(m->config().arch->qkv_bias);
  ASSERT_EQ(m->config().arch->rope_style, RopeStyle::neox);
  EXPECT_FLOAT_EQ(m->config().rope_base, 1e6f);
  expect_matches_naive(*m, {5, 17, 299, 0, 42, 42, 7, 128, 3}, 2);
}

TEST(Forward, LlamaGqaTiedF16MatchesIndependentComputation) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.n_embd = 48;
  spec.n_head = 6;
  spec.n_head_kv = 2;
  spec.n_ff = 80;
  spec.n_layer = 3;
  spec.n_vocab = 200;
  spec.tied_output = true;
  spec.weight_type = DType::f16;
  spec.seed = 11;
  auto m = load_via_gguf(spec, dir);
  EXPECT_TRUE(m->weights().tied_output);
  expect_matches_naive(*m, {1, 2, 3, 199, 100, 50}, 1, 3e-3);
}

// Quantized weights through the quantized kernels, against the naive computation on the same
// weights dequantized: the difference is the activations' 8-bit rounding.
TEST(Forward, QuantizedModelsMatchIndependentComputation) {
  SyntheticSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 512;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_vocab = 256;
  spec.seed = 3;
  auto f32 = make_synthetic_model(spec);
  ASSERT_TRUE(f32.ok());
  ThreadPool pool(2);
  for (const auto& [preset, tolerance] : {std::pair{QuantPreset::q8_0, 0.02}, std::pair{QuantPreset::q4_0, 0.05},
                                          std::pair{QuantPreset::q4_k_m, 0.05}, std::pair{QuantPreset::q5_1, 0.05}}) {
    auto q = quantize_model(*f32, preset, pool);
    ASSERT_TRUE(q.ok()) << q.error().message;
    auto m = Model::load(std::move(q).value());
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_NE((*m)->weights().layers[0].wq.type, DType::f32);
    SCOPED_TRACE(std::string(quant_preset_name(preset)));
    expect_matches_naive(**m, {7, 3, 200, 45}, 2, tolerance);
  }
}

TEST(Forward, BiasesAndRotaryLayoutMatter) {
  // The naive model with the wrong rotary layout or without biases must disagree: proof that
  // the comparison above can fail.
  test::TempDir dir;
  SyntheticSpec spec;
  spec.arch = "qwen2";
  spec.n_vocab = 100;
  auto m = load_via_gguf(spec, dir);
  ThreadPool pool(1);
  KvCache cache(m->config(), 16);
  std::vector<int> tokens = {3, 9, 27, 81};
  std::vector<float> logits(100);
  ASSERT_TRUE(m->forward(tokens, cache, logits, pool).ok());
  for (int variant = 0; variant < 2; ++variant) {
    auto cfg = naive_config(m->config());
    (variant == 0 ? cfg.neox : cfg.biases) = false;
    const auto ref = test::NaiveModel(m->file(), cfg).logits(tokens);
    double max_err = 0;
    for (size_t i = 0; i < ref.size(); ++i) max_err = std::max(max_err, std::abs(ref[i] - logits[i]));
    EXPECT_GT(max_err, 1e-3) << "variant " << variant;
  }
}

TEST(Forward, ChunkedPrefillEqualsTokenByToken) {
  auto file = make_synthetic_model(SyntheticSpec{});
  ASSERT_TRUE(file.ok());
  auto m = Model::load(std::move(file).value());
  ASSERT_TRUE(m.ok());
  const std::vector<int> tokens = {1, 50, 60, 70, 80, 90, 100, 110, 120, 130};
  ThreadPool pool(2);
  std::vector<float> a(512), b(512);
  KvCache c1((*m)->config(), 32), c2((*m)->config(), 32);
  ASSERT_TRUE((*m)->forward(tokens, c1, a, pool).ok());
  for (size_t i = 0; i < tokens.size(); i += 3) {
    const size_t n = std::min<size_t>(3, tokens.size() - i);
    ASSERT_TRUE((*m)->forward(std::span(tokens).subspan(i, n), c2, b, pool).ok());
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::abs(a[i])));
  EXPECT_EQ(c1.n_past(), 10);
  EXPECT_EQ(c2.n_past(), 10);
}

TEST(Forward, RejectsBadTokensAndContextOverflow) {
  auto file = make_synthetic_model(SyntheticSpec{});
  ASSERT_TRUE(file.ok());
  auto m = Model::load(std::move(file).value());
  ASSERT_TRUE(m.ok());
  ThreadPool pool(1);
  KvCache cache((*m)->config(), 4);
  std::vector<float> logits(512);
  const std::vector<int> bad = {512};
  EXPECT_NE((*m)->forward(bad, cache, logits, pool).error().message.find("outside the vocabulary"), std::string::npos);
  const std::vector<int> five = {1, 2, 3, 4, 5};
  EXPECT_NE((*m)->forward(five, cache, logits, pool).error().message.find("context overflow"), std::string::npos);
  EXPECT_EQ(cache.n_past(), 0);
}

}  // namespace
}  // namespace edgelm::model
