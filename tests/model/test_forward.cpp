// The FP32 reference forward against an independent double-precision computation
// (naive_forward.h), for llama (GQA, tied output, F16 weights; linear, YaRN and rope_freqs
// RoPE scaling), qwen2 (Q/K/V biases, NEOX rotary), qwen3 (per-head Q/K norms, head_dim
// other than n_embd / n_head), gemma2 (embedding scale, post-norms, GeGLU, soft-capping,
// alternating sliding-window layers), gemma3 (Q/K norms, 5:1 local layers with their own RoPE
// base, linear scaling of the global ones) and phi3 (fused tensors, partial rotary, LongRoPE's
// short and long factors, a window on every layer), on random-weight models written to GGUF by our writer and read
// back. The naive model's scaling parameters come from the test, not from our parsed config.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

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
  return {c.n_embd,        c.n_layer,   c.n_ff,
          c.n_head,        c.n_head_kv, c.n_vocab,
          c.rms_eps,       c.rope_base, c.arch->rope_style == RopeStyle::neox,
          c.arch->qkv_bias};
}

// The naive configuration of a spec from the spec alone (the architecture's published traits).
// cache_ctx: the context the model runs with (LongRoPE's long factors above the original one).
test::NaiveConfig naive_from_spec(const SyntheticSpec& s, int n_vocab, int cache_ctx = 64) {
  const bool qwen = s.arch == "qwen2" || s.arch == "qwen3" || s.arch == "qwen35";
  const bool gemma = s.arch == "gemma2" || s.arch == "gemma3", phi3 = s.arch == "phi3";
  test::NaiveConfig n{s.n_embd,
                      s.n_layer,
                      s.n_ff,
                      s.n_head,
                      s.n_head_kv,
                      n_vocab,
                      qwen || gemma ? 1e-6 : 1e-5,
                      s.rope_base > 0 ? s.rope_base : (qwen || s.arch == "gemma3" ? 1e6 : 1e4),
                      qwen || gemma || phi3,
                      s.arch == "qwen2"};
  n.head_dim = s.head_dim;
  n.qk_norm = s.arch == "qwen3" || s.arch == "gemma3" || s.arch == "qwen35";
  if (s.arch == "qwen35") {
    n.rope_base = s.rope_base > 0 ? s.rope_base : 1e7;
    n.interval = s.full_attn_interval;
    n.d_conv = s.ssm_d_conv;
    n.nk = s.ssm_k_heads;
    n.nv = s.ssm_v_heads;
    n.dk = s.ssm_head_dim;
  }
  n.n_rot = s.n_rot;
  if (gemma) {
    n.embd_scale = n.post_norms = n.gelu = true;
    n.swa = s.arch == "gemma2" ? test::NaiveConfig::Swa::gemma2 : test::NaiveConfig::Swa::gemma3;
    n.window = s.sliding_window > 0 ? s.sliding_window : 4096;
    if (s.arch == "gemma3") n.local_rope_base = 10000;
  }
  if (s.arch == "gemma2") {
    n.attn_softcap = s.attn_softcap > 0 ? s.attn_softcap : 50;
    n.final_softcap = s.final_softcap > 0 ? s.final_softcap : 30;
  }
  if (phi3) {
    n.fused = true;
    if (s.sliding_window > 0) n.swa = test::NaiveConfig::Swa::all, n.window = s.sliding_window;
    if (s.longrope_orig_ctx > 0) {
      n.longrope = cache_ctx > s.longrope_orig_ctx ? test::NaiveConfig::LongRope::long_factors
                                                   : test::NaiveConfig::LongRope::short_factors;
      const double orig = s.longrope_orig_ctx;
      n.longrope_attn = std::sqrt(1 + std::log(s.n_ctx / orig) / std::log(orig));
    }
  }
  if (s.rope_scaling == "linear") n.scaling = test::NaiveConfig::Scaling::linear;
  if (s.rope_scaling == "yarn") n.scaling = test::NaiveConfig::Scaling::yarn;
  n.factor = s.rope_factor;
  n.original_ctx = s.rope_orig_ctx > 0 ? s.rope_orig_ctx : s.n_ctx;
  n.attn_factor = s.rope_attn_factor;
  n.rope_freqs = s.llama3_factor > 0;
  return n;
}

// Feeds tokens one at a time through the cached forward and compares every step's logits
// with the naive recomputation of the whole prefix.
// tolerance: max |error| / max |logit|. F32 weights: float vs double rounding only; F16 and
// quantized weights: also the activations' rounding to the paired type (F16, Q8_0, Q8_K).
void expect_matches_naive(const Model& m, const std::vector<int>& tokens, int n_threads, double tolerance = 1e-4,
                          const test::NaiveConfig* cfg = nullptr) {
  ThreadPool pool(n_threads);
  KvCache cache(m.config(), 64);
  test::NaiveModel naive(m.file(), cfg != nullptr ? *cfg : naive_config(m.config()));
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

// The max |difference| / max |logit| between the model's logits of `tokens` and the naive ones.
double naive_difference(const Model& m, const std::vector<int>& tokens, const test::NaiveConfig& cfg) {
  ThreadPool pool(1);
  KvCache cache(m.config(), 64);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  EXPECT_TRUE(m.forward(tokens, cache, logits, pool).ok());
  const auto ref = test::NaiveModel(m.file(), cfg).logits(tokens);
  double max_ref = 0, max_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(ref[i]));
    max_err = std::max(max_err, std::abs(ref[i] - logits[i]));
  }
  return max_err / max_ref;
}

const std::vector<int> kLongTokens = {5, 17, 99, 0, 42, 42, 7, 128, 3, 77, 12, 140, 31, 8, 64, 2, 150, 9, 1, 33};

// One scaled model per case: matches the naive computation with the same scaling, and not the
// naive computation without it (so the scaling is really applied and really checked).
struct ScaledCase {
  const char* name;
  SyntheticSpec spec;
};

std::vector<ScaledCase> scaled_cases() {
  SyntheticSpec base;
  base.n_embd = 64;
  base.n_head = 4;
  base.n_head_kv = 2;
  base.n_ff = 96;
  base.n_vocab = 160;
  base.n_ctx = 1024;
  base.seed = 13;
  std::vector<ScaledCase> cases;
  SyntheticSpec linear = base;
  linear.rope_scaling = "linear";
  linear.rope_factor = 4.0f;
  cases.push_back({"llama_linear", linear});
  // Head size 16, base 1e4, original context 256: the ramp runs over pairs 0..4 of 8, so pairs
  // keep, blend and divide their frequency.
  SyntheticSpec yarn = base;
  yarn.rope_scaling = "yarn";
  yarn.rope_factor = 4.0f;
  yarn.rope_orig_ctx = 256;
  cases.push_back({"llama_yarn", yarn});
  SyntheticSpec yarn_attn = yarn;  // NEOX layout, an explicit attn_factor, ramp from the context default
  yarn_attn.arch = "qwen2";
  yarn_attn.rope_orig_ctx = 0;
  yarn_attn.n_ctx = 64;
  yarn_attn.rope_base = 10000.0f;
  yarn_attn.rope_factor = 8.0f;
  yarn_attn.rope_attn_factor = 0.9f;
  cases.push_back({"qwen2_yarn_attn_factor", yarn_attn});
  // Original context 64 with head size 16: pair 0 keeps its frequency, pairs 1-2 blend, 3+ divide.
  SyntheticSpec freqs = base;
  freqs.llama3_factor = 8.0f;
  freqs.llama3_orig_ctx = 64;
  cases.push_back({"llama_rope_freqs", freqs});
  SyntheticSpec freqs_linear = freqs;  // both: factors first, then the linear scaling
  freqs_linear.rope_scaling = "linear";
  freqs_linear.rope_factor = 2.0f;
  cases.push_back({"llama_rope_freqs_linear", freqs_linear});
  return cases;
}

TEST(Forward, RopeScalingMatchesIndependentComputation) {
  test::TempDir dir;
  for (const ScaledCase& sc : scaled_cases()) {
    SCOPED_TRACE(sc.name);
    auto m = load_via_gguf(sc.spec, dir);
    const test::NaiveConfig cfg = naive_from_spec(sc.spec, m->config().n_vocab);
    expect_matches_naive(*m, kLongTokens, 2, 1e-4, &cfg);
    test::NaiveConfig unscaled = cfg;
    unscaled.scaling = test::NaiveConfig::Scaling::none;
    unscaled.rope_freqs = false;
    EXPECT_GT(naive_difference(*m, kLongTokens, unscaled), 1e-3) << "the scaling must change the logits";
  }
}

// Qwen3.5: 8 layers (DeltaNet 0-2, 4-6; gated attention 3 and 7), 2 key and 4 value heads of 16
// (each key head shared by value heads h and h + 2), partial rotary 16 of 32, against the naive
// recomputation of the whole sequence from a zero state; knocking out the
// convolution changes the logits, so it is applied and checked.
TEST(Forward, Qwen35HybridMatchesIndependentComputation) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.arch = "qwen35";
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.head_dim = 32;
  spec.n_rot = 16;
  spec.n_ff = 96;
  spec.n_layer = 8;
  spec.n_vocab = 300;
  spec.seed = 41;
  auto m = load_via_gguf(spec, dir);
  const ModelConfig& c = m->config();
  ASSERT_EQ(c.n_kv_layers(), 2);
  ASSERT_EQ(c.n_recurrent_layers(), 6);
  EXPECT_TRUE(c.layer_is_recurrent(0));
  EXPECT_FALSE(c.layer_is_recurrent(3));
  EXPECT_EQ(c.kv_layer(7), 1);
  EXPECT_EQ(c.recurrent_index(6), 5);
  EXPECT_EQ(c.deltanet.conv_dim(), 2 * 32 + 64);
  EXPECT_EQ(c.rope_sections[0] + c.rope_sections[1] + c.rope_sections[2], 8);
  const test::NaiveConfig cfg = naive_from_spec(spec, c.n_vocab);
  expect_matches_naive(*m, kLongTokens, 2, 1e-4, &cfg);
  test::NaiveConfig no_conv = cfg;
  no_conv.d_conv = 1;  // only the current input's tap
  EXPECT_GT(naive_difference(*m, kLongTokens, no_conv), 1e-3) << "the convolution must change the logits";
}

// Interleaved M-RoPE for text (the reference engine's positions t, t, t, 0): pair i of sector
// i % sum(sections) turns only in the t/h/w sectors; sections that leave pairs to the fourth
// give them frequency 0 (tests/golden/test_reference_qwen35.cpp's "sections" model holds the
// rule to the reference engine's logits).
TEST(Forward, Qwen35TextRopeSkipsTheFourthSection) {
  SyntheticSpec spec;
  spec.arch = "qwen35";
  spec.n_layer = 4;
  spec.head_dim = 32;
  spec.n_rot = 16;
  auto file = make_synthetic_model(spec);
  ASSERT_TRUE(file.ok());
  auto m = Model::load(std::move(file).value());
  ASSERT_TRUE(m.ok());
  ModelConfig c = (*m)->config();
  for (int32_t i = 0; i < 8; ++i) EXPECT_TRUE(c.text_rotates_pair(i)) << i;  // synth writes 3, 3, 2
  c.rope_sections[0] = 2, c.rope_sections[1] = 2, c.rope_sections[2] = 4;
  const std::vector<bool> want = {true, true, true, true, true, true, false, false};
  for (int32_t i = 0; i < 8; ++i) EXPECT_EQ(c.text_rotates_pair(i), want[static_cast<size_t>(i)]) << i;
  const RopeTable table(c);
  EXPECT_EQ(table.inv_freq()[6], 0.0f);
  EXPECT_GT(table.inv_freq()[5], 0.0f);
}

// Prefill in chunks, one token at a time and all at once leave the same recurrent state: the
// logits after the last token agree, and a cleared cache starts again from the zero state.
TEST(Forward, Qwen35StateCarriesAcrossChunks) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.arch = "qwen35";
  spec.n_layer = 4;
  spec.head_dim = 32;
  spec.seed = 43;
  auto m = load_via_gguf(spec, dir);
  ThreadPool pool(2);
  const auto V = static_cast<size_t>(m->config().n_vocab);
  std::vector<float> whole(V), chunked(V), again(V);
  KvCache a(m->config(), 64), b(m->config(), 64);
  ASSERT_TRUE(m->forward(kLongTokens, a, whole, pool).ok());
  const std::span<const TokenId> all(kLongTokens);
  ASSERT_TRUE(m->forward(all.subspan(0, 5), b, {}, pool).ok());
  ASSERT_TRUE(m->forward(all.subspan(5, 1), b, {}, pool).ok());
  ASSERT_TRUE(m->forward(all.subspan(6), b, chunked, pool).ok());
  double diff = 0, mx = 0;
  for (size_t i = 0; i < V; ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(whole[i] - chunked[i])));
    mx = std::max(mx, static_cast<double>(std::abs(whole[i])));
  }
  EXPECT_LT(diff, 1e-4 * mx);
  a.clear();
  ASSERT_TRUE(m->forward(kLongTokens, a, again, pool).ok());
  EXPECT_EQ(std::memcmp(whole.data(), again.data(), V * sizeof(float)), 0);
}

TEST(Forward, Qwen3MatchesIndependentComputation) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.arch = "qwen3";
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 96;
  spec.n_vocab = 300;
  spec.seed = 17;
  for (const int32_t head_dim : {0, 32, 8}) {  // E / H = 16; 32: Q wider than n_embd (as Qwen3-0.6B); 8: narrower
    SCOPED_TRACE(head_dim);
    spec.head_dim = head_dim;
    auto m = load_via_gguf(spec, dir);
    ASSERT_TRUE(m->config().arch->qk_norm);
    ASSERT_FALSE(m->config().arch->qkv_bias);
    EXPECT_EQ(m->config().head_dim, head_dim == 0 ? 16 : head_dim);
    EXPECT_EQ(m->weights().layers[0].bq, nullptr);
    ASSERT_NE(m->weights().layers[1].attn_k_norm, nullptr);
    const test::NaiveConfig cfg = naive_from_spec(spec, m->config().n_vocab);
    expect_matches_naive(*m, kLongTokens, 2, 1e-4, &cfg);
    test::NaiveConfig no_norm = cfg;
    no_norm.qk_norm = false;
    EXPECT_GT(naive_difference(*m, kLongTokens, no_norm), 1e-3) << "the Q/K norms must change the logits";
  }
}

TEST(Forward, ExplicitHeadDimLlamaAndF16Qwen3) {
  test::TempDir dir;
  SyntheticSpec spec;  // llama with head_dim 24 != 64 / 4 and a linear scaling
  spec.n_embd = 64;
  spec.head_dim = 24;
  spec.n_vocab = 160;
  spec.rope_scaling = "linear";
  spec.rope_factor = 2.0f;
  spec.seed = 19;
  auto m = load_via_gguf(spec, dir);
  const test::NaiveConfig cfg = naive_from_spec(spec, m->config().n_vocab);
  expect_matches_naive(*m, kLongTokens, 1, 1e-4, &cfg);
  SyntheticSpec q3 = spec;
  q3.arch = "qwen3";
  q3.head_dim = 32;
  q3.rope_scaling = "yarn";
  q3.rope_factor = 4.0f;
  q3.rope_orig_ctx = 128;
  q3.weight_type = DType::f16;
  q3.tied_output = true;
  auto m3 = load_via_gguf(q3, dir);
  const test::NaiveConfig cfg3 = naive_from_spec(q3, m3->config().n_vocab);
  expect_matches_naive(*m3, kLongTokens, 2, 3e-3, &cfg3);
}

// The rope table's frequencies against YaRN's written out in double for one configuration.
TEST(RopeTable, YarnFrequenciesAndMscale) {
  ModelConfig c;
  auto arch = find_arch("llama");
  ASSERT_TRUE(arch.ok());
  c.arch = *arch;
  c.n_rot = 16;
  c.rope_base = 10000.0f;
  c.n_ctx_train = 1024;
  c.rope_scaling.type = RopeScalingType::yarn;
  c.rope_scaling.factor = 4.0f;
  c.rope_scaling.original_ctx = 256;
  const RopeTable t(c);
  // Pairs turning more than 32 times in 256 positions keep their frequency, fewer than once are
  // divided by 4: turns(j) = 256 * 1e4^(-j/8) / (2 pi) gives 40.7 at j = 0, 12.9, 4.1, 1.29, 0.41 ...:
  // ramp floor(0.23) = 0 .. ceil(3.22) = 4.
  for (int j = 0; j < 8; ++j) {
    const double f = std::pow(1e4, -j / 8.0);
    const double r = std::clamp(j / 4.0, 0.0, 1.0);
    EXPECT_NEAR(t.inv_freq()[static_cast<size_t>(j)], f * (1 - r) + f / 4 * r, 1e-6 * f) << j;
  }
  EXPECT_NEAR(t.mscale(), 1 + 0.1 * std::log(4.0), 1e-6);
  ModelConfig plain = c;
  plain.rope_scaling = RopeScaling{};
  EXPECT_EQ(RopeTable(plain).mscale(), 1.0f);
}

// One trait of an architecture knocked out of the naive model: the naive model without it must
// disagree with ours, so the trait is both applied and checked.
struct Knockout {
  const char* what;
  std::function<void(test::NaiveConfig&)> change;
};

// The model of `spec` (through GGUF) against the naive computation of the architecture's
// published definition, then against each knocked-out variant.
void expect_arch_matches_naive(const SyntheticSpec& spec, const std::vector<Knockout>& knockouts,
                               double tolerance = 1e-4) {
  test::TempDir dir;
  auto m = load_via_gguf(spec, dir);
  const test::NaiveConfig cfg = naive_from_spec(spec, m->config().n_vocab);
  expect_matches_naive(*m, kLongTokens, 2, tolerance, &cfg);
  for (const Knockout& k : knockouts) {
    test::NaiveConfig other = cfg;
    k.change(other);
    EXPECT_GT(naive_difference(*m, kLongTokens, other), 1e-3) << k.what << " must change the logits";
  }
}

using Swa = test::NaiveConfig::Swa;
using LongRope = test::NaiveConfig::LongRope;

// Gemma 2: head_dim 32 (Q wider than n_embd), window 5 over 20 tokens on layers 0 and 2, soft
// caps small enough to bend the scores and logits.
TEST(Forward, Gemma2MatchesIndependentComputation) {
  SyntheticSpec spec;
  spec.arch = "gemma2";
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.head_dim = 32;
  spec.n_ff = 96;
  spec.n_layer = 3;
  spec.n_vocab = 300;
  spec.sliding_window = 5;
  spec.attn_softcap = 3.0f;
  spec.final_softcap = 8.0f;
  spec.seed = 31;
  auto file = make_synthetic_model(spec);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto cfg = config_from_metadata(file->metadata);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->n_swa, 5);
  EXPECT_TRUE(cfg->layer_is_local(0));
  EXPECT_FALSE(cfg->layer_is_local(1));
  EXPECT_TRUE(cfg->layer_is_local(2));
  EXPECT_FLOAT_EQ(cfg->attn_softcap, 3.0f);
  EXPECT_FLOAT_EQ(cfg->final_softcap, 8.0f);
  expect_arch_matches_naive(spec, {{"the window", [](auto& c) { c.swa = Swa::none; }},
                                   {"the even/odd pattern", [](auto& c) { c.swa = Swa::all; }},
                                   {"attention soft-capping", [](auto& c) { c.attn_softcap = 0; }},
                                   {"final soft-capping", [](auto& c) { c.final_softcap = 0; }},
                                   {"the embedding scale", [](auto& c) { c.embd_scale = false; }},
                                   {"the post-norms", [](auto& c) { c.post_norms = false; }},
                                   {"GELU", [](auto& c) { c.gelu = false; }}});
  spec.attn_softcap = spec.final_softcap = 0.0f;  // the published 50 / 30
  spec.weight_type = DType::f16;
  spec.tied_output = true;
  expect_arch_matches_naive(spec, {}, 3e-3);
}

// Gemma 3: 7 layers (0-4 and 6 local, 5 global), window 4, one KV head, Q/K norms, local layers
// at base 1e4 and the global one at 1e6, plain and with the 4B+ models' linear factor 8 on the
// global layer only.
TEST(Forward, Gemma3MatchesIndependentComputation) {
  SyntheticSpec spec;
  spec.arch = "gemma3";
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 1;
  spec.head_dim = 32;
  spec.n_ff = 96;
  spec.n_layer = 7;
  spec.n_vocab = 300;
  spec.sliding_window = 4;
  spec.seed = 33;
  expect_arch_matches_naive(spec, {{"the window", [](auto& c) { c.swa = Swa::none; }},
                                   {"the 5:1 pattern", [](auto& c) { c.swa = Swa::gemma2; }},
                                   {"the local RoPE base", [](auto& c) { c.local_rope_base = 0; }},
                                   {"the Q/K norms", [](auto& c) { c.qk_norm = false; }}});
  spec.rope_scaling = "linear";
  spec.rope_factor = 8.0f;
  expect_arch_matches_naive(
      spec, {{"the global layer's scaling", [](auto& c) { c.scaling = test::NaiveConfig::Scaling::none; }}});
}

// Phi-3 / Phi-4-mini: fused QKV and gate/up; 12 of 16 head dims rotated; LongRoPE with the long
// factors (the cache's 64 positions exceed an original context of 32) or the short ones (128),
// the latter with a window of 6 on every layer; and a Phi-3-mini-4k-like file without factors.
TEST(Forward, Phi3MatchesIndependentComputation) {
  SyntheticSpec spec;
  spec.arch = "phi3";
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 96;
  spec.n_vocab = 300;
  spec.n_ctx = 512;
  spec.n_rot = 12;
  spec.longrope_orig_ctx = 32;
  spec.seed = 35;
  expect_arch_matches_naive(spec, {{"12 rotated dims (8 instead)", [](auto& c) { c.n_rot = 8; }},
                                   {"the long factors", [](auto& c) { c.longrope = LongRope::short_factors; }},
                                   {"LongRoPE's attention factor", [](auto& c) { c.longrope_attn = 1; }}});
  spec.longrope_orig_ctx = 128;
  spec.sliding_window = 6;
  expect_arch_matches_naive(spec, {{"the short factors", [](auto& c) { c.longrope = LongRope::long_factors; }},
                                   {"the window", [](auto& c) { c.swa = Swa::none; }}});
  spec.longrope_orig_ctx = 0;
  spec.sliding_window = 0;
  spec.n_rot = 0;
  spec.tied_output = true;
  expect_arch_matches_naive(spec, {});
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
