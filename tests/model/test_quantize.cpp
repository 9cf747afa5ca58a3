// Quantization against the reference implementation: quantizing the interop F32 model with
// each preset gives, tensor by tensor, the same type and the same bytes as the reference
// quantizer's file of that type. Plus the policy's fallbacks and the error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "format/gguf_reader.h"
#include "kernels/dequantize.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/synthetic.h"
#include "support/test_data.h"

namespace edgelm::model {
namespace {

TEST(Quantize, ByteIdenticalToTheReferenceQuantizer) {
  auto f32 = format::read_gguf(test::shared_path("models/interop/rand-small-f32.gguf"));
  ASSERT_TRUE(f32.ok());
  ThreadPool pool(2);
  for (const auto& [preset, file] : {std::pair{"q8_0", "Q8_0"}, {"q4_0", "Q4_0"}, {"q4_1", "Q4_1"}, {"q5_0", "Q5_0"},
                                     {"q5_1", "Q5_1"}, {"q4_k_m", "Q4_K_M"}, {"q5_k_m", "Q5_K_M"}, {"q6_k", "Q6_K"},
                                     {"f16", "F16"}, {"bf16", "BF16"}}) {
    SCOPED_TRACE(preset);
    auto ref = format::read_gguf(test::shared_path(std::string("models/interop/rand-small-") + file + ".gguf"));
    ASSERT_TRUE(ref.ok());
    auto ours = quantize_model(*f32, *quant_preset_from_name(preset), pool);
    ASSERT_TRUE(ours.ok()) << ours.error().message;
    ASSERT_EQ(ours->tensors.size(), ref->tensors.size());
    for (const auto& r : ref->tensors) {
      const format::TensorInfo* t = ours->find_tensor(r.name);
      ASSERT_NE(t, nullptr) << r.name;
      EXPECT_EQ(dtype_name(t->type), dtype_name(r.type)) << r.name;
      ASSERT_EQ(t->n_bytes, r.n_bytes) << r.name;
      EXPECT_EQ(std::memcmp(t->data, r.data, r.n_bytes), 0) << r.name;
    }
    EXPECT_EQ(*ours->metadata.get_u32("general.file_type"), *ref->metadata.get_u32("general.file_type"));
  }
}

TEST(Quantize, FallsBackPerTensorWhenRowsDoNotFitTheBlock) {
  // stories260K: FFN width 172 fits no block size; width 64 fits 32-blocks but not 256.
  auto f = format::read_gguf(test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(f.ok());
  ThreadPool pool(1);
  auto q = quantize_model(*f, QuantPreset::q4_k_m, pool);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->find_tensor("blk.0.ffn_down.weight")->type, DType::f16);   // 172 columns
  EXPECT_EQ(q->find_tensor("blk.0.attn_q.weight")->type, DType::q5_0);    // 64 columns: Q4_K -> Q5_0
  EXPECT_EQ(q->find_tensor("output.weight")->type, DType::q8_0);          // Q6_K -> Q8_0
  EXPECT_EQ(q->find_tensor("blk.0.attn_norm.weight")->type, DType::f32);  // norms stay F32
  auto m = Model::load(std::move(q).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  // Dequantizing back gives F32 everywhere.
  auto back = quantize_model(*format::read_gguf(test::shared_path("models/interop/rand-small-Q4_0.gguf")),
                             QuantPreset::f32, pool);
  ASSERT_TRUE(back.ok());
  for (const auto& t : back->tensors) EXPECT_EQ(t.type, DType::f32) << t.name;
}

// A hybrid qwen35 model: its DeltaNet convolution taps stay F32 (read whole as float; the
// reference engine requires F32), the projections are quantized, and the result loads and runs
// close to the F32 model.
TEST(Quantize, Qwen35KeepsConvolutionTapsF32) {
  SyntheticSpec s;
  s.arch = "qwen35";
  s.n_layer = 4;
  s.head_dim = 32;
  s.ssm_head_dim = 32;
  auto f = make_synthetic_model(s);
  ASSERT_TRUE(f.ok());
  ThreadPool pool(1);
  auto q = quantize_model(*f, QuantPreset::q8_0, pool);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->find_tensor("blk.0.ssm_conv1d.weight")->type, DType::f32);
  EXPECT_EQ(q->find_tensor("blk.0.attn_qkv.weight")->type, DType::q8_0);
  EXPECT_EQ(q->find_tensor("blk.0.ssm_a")->type, DType::f32);
  auto m = Model::load(std::move(q).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  KvCache cache((*m)->config(), 16);
  std::vector<float> logits(static_cast<size_t>((*m)->config().n_vocab));
  const std::vector<TokenId> toks = {1, 2, 3, 4};
  EXPECT_TRUE((*m)->forward(toks, cache, logits, pool).ok());
}

TEST(Quantize, NonFiniteWeightsAreAnErrorNamingTheTensor) {
  SyntheticSpec spec;
  auto f = make_synthetic_model(spec);
  ASSERT_TRUE(f.ok());
  std::vector<float> poisoned(64 * 64, 0.5f);
  poisoned[100] = NAN;
  for (auto& t : f->tensors) {
    if (t.name == "blk.1.attn_output.weight") t.data = reinterpret_cast<const uint8_t*>(poisoned.data());
  }
  ThreadPool pool(2);
  auto q = quantize_model(*f, QuantPreset::q8_0, pool);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message.find("'blk.1.attn_output.weight'"), std::string::npos) << q.error().message;
  EXPECT_NE(q.error().message.find("NaN"), std::string::npos);
}

// The low-bit presets on a llama-shape model with 256-wide rows: the per-tensor rules of the
// reference quantizer (quantize.h), and the result loads and runs close to the F32 model.
TEST(Quantize, LowBitPresetsFollowThePerTensorRulesAndRun) {
  SyntheticSpec s;
  s.n_embd = 256;
  s.n_ff = 256;
  s.n_layer = 16;
  s.n_head = 8;
  s.n_head_kv = 2;  // n_gqa 4
  auto f = make_synthetic_model(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ThreadPool pool(2);
  struct Want {
    QuantPreset preset;
    DType base, attn_v0, attn_v9, ffn_down0, ffn_down9, attn_output;
    double max_rel;  // last-token logits vs F32, relative RMS: ~1.3x the measured (16 random
                     // layers amplify the quantization error)
  };
  const Want wants[] = {
      {QuantPreset::q2_k, DType::q2_k, DType::q4_k, DType::q4_k, DType::q3_k, DType::q3_k, DType::q3_k, 1.05},
      {QuantPreset::q3_k_s, DType::q3_k, DType::q3_k, DType::q3_k, DType::q3_k, DType::q3_k, DType::q3_k, 0.8},
      {QuantPreset::q3_k_m, DType::q3_k, DType::q5_k, DType::q4_k, DType::q5_k, DType::q4_k, DType::q4_k, 0.6},
      {QuantPreset::q3_k_l, DType::q3_k, DType::q5_k, DType::q5_k, DType::q5_k, DType::q5_k, DType::q5_k, 0.63},
      {QuantPreset::iq4_nl, DType::iq4_nl, DType::q5_k, DType::q5_k, DType::q5_k, DType::iq4_nl, DType::iq4_nl, 0.39},
      {QuantPreset::iq4_xs, DType::iq4_xs, DType::q5_k, DType::q5_k, DType::q5_k, DType::iq4_xs, DType::iq4_xs, 0.41},
      {QuantPreset::tq1_0, DType::tq1_0, DType::tq1_0, DType::tq1_0, DType::tq1_0, DType::tq1_0, DType::tq1_0, 1.8},
      {QuantPreset::tq2_0, DType::tq2_0, DType::tq2_0, DType::tq2_0, DType::tq2_0, DType::tq2_0, DType::tq2_0, 1.8},
      {QuantPreset::mxfp4, DType::mxfp4, DType::mxfp4, DType::mxfp4, DType::mxfp4, DType::mxfp4, DType::mxfp4, 0.57},
      {QuantPreset::nvfp4, DType::nvfp4, DType::nvfp4, DType::nvfp4, DType::nvfp4, DType::nvfp4, DType::nvfp4, 0.53},
  };
  auto ref_model = Model::load(std::move(make_synthetic_model(s)).value());
  ASSERT_TRUE(ref_model.ok()) << ref_model.error().message;
  const std::vector<TokenId> toks = {1, 5, 9, 33, 2, 7};
  const int32_t n_vocab = (*ref_model)->config().n_vocab;
  std::vector<float> ref(static_cast<size_t>(n_vocab));
  {
    KvCache cache((*ref_model)->config(), 16);
    ASSERT_TRUE((*ref_model)->forward(toks, cache, ref, pool).ok());
  }
  for (const Want& w : wants) {
    SCOPED_TRACE(std::string(quant_preset_name(w.preset)));
    auto q = quantize_model(*f, w.preset, pool);
    ASSERT_TRUE(q.ok()) << q.error().message;
    EXPECT_EQ(q->find_tensor("blk.3.attn_q.weight")->type, w.base);
    EXPECT_EQ(q->find_tensor("blk.3.ffn_up.weight")->type, w.base);
    EXPECT_EQ(q->find_tensor("blk.0.attn_v.weight")->type, w.attn_v0);
    EXPECT_EQ(q->find_tensor("blk.9.attn_v.weight")->type, w.attn_v9);
    EXPECT_EQ(q->find_tensor("blk.0.ffn_down.weight")->type, w.ffn_down0);
    EXPECT_EQ(q->find_tensor("blk.9.ffn_down.weight")->type, w.ffn_down9);
    EXPECT_EQ(q->find_tensor("blk.9.attn_output.weight")->type, w.attn_output);
    EXPECT_EQ(q->find_tensor("output.weight")->type, DType::q6_k);
    EXPECT_EQ(q->find_tensor("blk.0.attn_norm.weight")->type, DType::f32);
    auto m = Model::load(std::move(q).value());
    ASSERT_TRUE(m.ok()) << m.error().message;
    KvCache cache((*m)->config(), 16);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    ASSERT_TRUE((*m)->forward(toks, cache, logits, pool).ok());
    double num = 0, den = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      num += (logits[i] - ref[i]) * (logits[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    const double rel = std::sqrt(num / den);
    std::printf("[ info ] %s: logits relative RMS error %.4f\n", std::string(quant_preset_name(w.preset)).c_str(), rel);
    EXPECT_LT(rel, w.max_rel);
    EXPECT_GT(rel, 0.0);
  }
  // Without grouped-query attention attn_v keeps the base type under Q2_K (Q3_K) and IQ4_XS.
  s.n_head_kv = 8;
  auto mha = make_synthetic_model(s);
  ASSERT_TRUE(mha.ok());
  EXPECT_EQ(quantize_model(*mha, QuantPreset::q2_k, pool)->find_tensor("blk.9.attn_v.weight")->type, DType::q3_k);
  EXPECT_EQ(quantize_model(*mha, QuantPreset::iq4_xs, pool)->find_tensor("blk.9.attn_v.weight")->type, DType::iq4_xs);
}

// The grid IQ mixes' per-tensor rules (llama.cpp's, quantize.h) on a 16-layer shape.
TEST(Quantize, GridIqMixesFollowTheReferenceRules) {
  auto type_of = [](QuantPreset p, const char* name, int32_t n_gqa, bool imatrix = true, bool tied = false,
                    int64_t cols = 2048) {
    format::TensorInfo t;
    t.name = name;
    t.n_dims = 2;
    t.ne = {cols, 2048, 1, 1};
    return dtype_name(choose_type(p, t, 16, n_gqa, imatrix, tied));
  };
  using P = QuantPreset;
  // The 2-bit mixes.
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.5.attn_q.weight", 4), "IQ2_XXS");
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.5.attn_v.weight", 4), "Q4_K");
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.5.attn_v.weight", 1), "Q2_K");
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.5.attn_qkv.weight", 1), "Q2_K");
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.1.ffn_down.weight", 1), "Q2_K");
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.2.ffn_down.weight", 1), "IQ2_XXS");
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.5.attn_output.weight", 1), "IQ2_XXS");
  EXPECT_EQ(type_of(P::iq2_xxs, "output.weight", 1), "Q5_K");
  EXPECT_EQ(type_of(P::iq2_xxs, "token_embd.weight", 1), "Q2_K");
  EXPECT_EQ(type_of(P::iq2_xxs, "token_embd.weight", 1, true, /*tied=*/true), "Q5_K");
  EXPECT_EQ(type_of(P::iq2_xs, "blk.5.ffn_up.weight", 1), "IQ2_XS");
  EXPECT_EQ(type_of(P::iq2_s, "blk.5.ffn_up.weight", 1), "IQ2_XS");  // IQ2_S's base is IQ2_XS
  EXPECT_EQ(type_of(P::iq2_s, "blk.5.attn_v.weight", 1), "IQ3_S");
  EXPECT_EQ(type_of(P::iq2_s, "blk.0.ffn_down.weight", 1), "IQ3_S");
  EXPECT_EQ(type_of(P::iq2_s, "blk.5.attn_output.weight", 1), "IQ3_S");
  EXPECT_EQ(type_of(P::iq2_s, "token_embd.weight", 1), "IQ3_S");
  EXPECT_EQ(type_of(P::iq2_m, "blk.5.ffn_up.weight", 1), "IQ2_S");
  EXPECT_EQ(type_of(P::iq1_s, "blk.5.ffn_up.weight", 1), "IQ1_S");
  EXPECT_EQ(type_of(P::iq1_m, "blk.5.ffn_up.weight", 1), "IQ1_M");
  EXPECT_EQ(type_of(P::iq1_s, "blk.5.attn_output.weight", 1), "IQ2_XXS");
  EXPECT_EQ(type_of(P::iq1_m, "blk.5.attn_v.weight", 1), "Q2_K");
  EXPECT_EQ(type_of(P::iq1_m, "token_embd.weight", 1), "Q2_K");
  // IQ3_XXS: attn_v and ffn_down depend on the imatrix.
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.ffn_up.weight", 1), "IQ3_XXS");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.attn_q.weight", 1), "IQ2_S");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.attn_k.weight", 1), "IQ2_S");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.attn_v.weight", 4), "Q4_K");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.attn_v.weight", 1, true), "IQ3_XXS");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.attn_v.weight", 1, false), "IQ3_S");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.1.ffn_down.weight", 1, false), "Q4_K");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.ffn_down.weight", 1, false), "Q3_K");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.ffn_down.weight", 1, true), "IQ3_XXS");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.attn_output.weight", 1), "IQ3_S");
  EXPECT_EQ(type_of(P::iq3_xxs, "output.weight", 1), "Q5_K");
  EXPECT_EQ(type_of(P::iq3_xxs, "token_embd.weight", 1), "IQ3_S");
  // IQ3_XS / IQ3_S / IQ3_M (base IQ3_S).
  EXPECT_EQ(type_of(P::iq3_xs, "blk.5.attn_q.weight", 1), "IQ3_XXS");
  EXPECT_EQ(type_of(P::iq3_xs, "blk.5.ffn_up.weight", 1), "IQ3_XXS");
  EXPECT_EQ(type_of(P::iq3_xs, "blk.1.ffn_gate.weight", 1), "IQ3_S");   // first eighth
  EXPECT_EQ(type_of(P::iq3_xs, "blk.14.ffn_gate.weight", 1), "IQ3_S");  // last eighth
  EXPECT_EQ(type_of(P::iq3_xs, "blk.5.ffn_down.weight", 1), "IQ3_S");
  EXPECT_EQ(type_of(P::iq3_xs, "blk.5.attn_v.weight", 4), "Q4_K");
  EXPECT_EQ(type_of(P::iq3_xs, "output.weight", 1), "Q6_K");
  EXPECT_EQ(type_of(P::iq3_s, "blk.5.attn_v.weight", 1), "IQ3_S");
  EXPECT_EQ(type_of(P::iq3_s, "blk.5.attn_v.weight", 4), "Q4_K");
  EXPECT_EQ(type_of(P::iq3_s, "token_embd.weight", 1, true, /*tied=*/true), "Q6_K");
  EXPECT_EQ(type_of(P::iq3_m, "blk.5.attn_v.weight", 1), "Q4_K");
  EXPECT_EQ(type_of(P::iq3_m, "blk.5.attn_output.weight", 1), "Q4_K");
  EXPECT_EQ(type_of(P::iq3_m, "blk.0.ffn_down.weight", 1), "Q4_K");
  EXPECT_EQ(type_of(P::iq3_m, "blk.5.ffn_down.weight", 1), "IQ3_S");
  // Rows that do not fit 256-blocks fall back to IQ4_NL.
  EXPECT_EQ(type_of(P::iq2_xxs, "blk.5.attn_q.weight", 1, true, false, 288), "IQ4_NL");
  EXPECT_EQ(type_of(P::iq3_xxs, "blk.5.ffn_up.weight", 1, true, false, 288), "IQ4_NL");
  // The names and file types the reference tool uses.
  EXPECT_EQ(*quant_preset_from_name("IQ2_M"), P::iq2_m);
  EXPECT_EQ(*quant_preset_from_name("iq3_xs"), P::iq3_xs);
}

// A 2-D-weight imatrix of ones for every blk matrix of `f` (what ik's tests use as a neutral one).
ImportanceMatrix ones_imatrix(const format::ModelFile& f) {
  ImportanceMatrix m;
  for (const auto& t : f.tensors) {
    if (t.n_dims < 2 || t.name.rfind("blk.", 0) != 0) continue;
    ImatrixEntry e;
    e.sums.assign(static_cast<size_t>(t.ne[0]), 1.0f);
    e.counts = {1};
    m.entries[t.name] = e;
  }
  m.datasets = {"ones"};
  m.chunk_count = 1;
  return m;
}

// The grid IQ presets end to end on a llama shape with 256-wide rows: the types the rules give,
// the file type the reference numbers them by, and the model runs close to the F32 one. IQ2_XXS,
// IQ2_XS, IQ2_S, IQ1_S and IQ1_M need an importance matrix (an error naming the preset without).
TEST(Quantize, GridIqPresetsRun) {
  SyntheticSpec s;
  s.n_embd = 256;
  s.n_ff = 256;
  s.n_layer = 4;
  s.n_head = 8;
  s.n_head_kv = 8;  // n_gqa 1: attn_v takes the mixes' low-bit choice
  auto f = make_synthetic_model(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ThreadPool pool(2);
  auto ref_model = Model::load(std::move(make_synthetic_model(s)).value());
  ASSERT_TRUE(ref_model.ok()) << ref_model.error().message;
  const std::vector<TokenId> toks = {1, 5, 9, 33, 2, 7};
  const int32_t n_vocab = (*ref_model)->config().n_vocab;
  std::vector<float> ref(static_cast<size_t>(n_vocab));
  {
    KvCache cache((*ref_model)->config(), 16);
    ASSERT_TRUE((*ref_model)->forward(toks, cache, ref, pool).ok());
  }
  const ImportanceMatrix ones = ones_imatrix(*f);
  struct Want {
    QuantPreset preset;
    bool imatrix;
    DType attn_q, ffn_up, attn_v;
    uint32_t file_type;
    double max_rel;  // last-token logits vs F32, relative RMS (~1.3x the measured)
  };
  const Want wants[] = {
      {QuantPreset::iq1_s, true, DType::iq1_s, DType::iq1_s, DType::q2_k, 24, 0.92},
      {QuantPreset::iq1_m, true, DType::iq1_m, DType::iq1_m, DType::q2_k, 31, 0.98},
      {QuantPreset::iq2_xxs, true, DType::iq2_xxs, DType::iq2_xxs, DType::q2_k, 19, 0.85},
      {QuantPreset::iq2_s, true, DType::iq2_xs, DType::iq2_xs, DType::iq3_s, 28, 0.6},
      {QuantPreset::iq2_m, false, DType::iq2_s, DType::iq2_s, DType::iq3_s, 29, 0.6},
      {QuantPreset::iq3_xxs, false, DType::iq2_s, DType::iq3_xxs, DType::iq3_s, 23, 0.6},
      {QuantPreset::iq3_xxs, true, DType::iq2_s, DType::iq3_xxs, DType::iq3_xxs, 23, 0.5},
      {QuantPreset::iq3_xs, false, DType::iq3_xxs, DType::iq3_xxs, DType::iq3_s, 22, 0.52},
      {QuantPreset::iq3_m, false, DType::iq3_s, DType::iq3_s, DType::q4_k, 27, 0.46},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(std::string(quant_preset_name(w.preset)) + (w.imatrix ? " imatrix" : ""));
    int weighted = 0;
    auto q = quantize_model(*f, w.preset, pool, [&](const QuantizeProgress& p) { weighted += p.weighted; }, {},
                            w.imatrix ? ImatrixSource{&ones, "ones.dat"} : ImatrixSource{});
    ASSERT_TRUE(q.ok()) << q.error().message;
    EXPECT_EQ(weighted, w.imatrix ? 4 * 7 : 0);  // every blk matrix
    EXPECT_EQ(q->find_tensor("blk.1.attn_q.weight")->type, w.attn_q);
    EXPECT_EQ(q->find_tensor("blk.1.ffn_up.weight")->type, w.ffn_up);
    EXPECT_EQ(q->find_tensor("blk.1.attn_v.weight")->type, w.attn_v);
    EXPECT_EQ(*q->metadata.get_u32("general.file_type"), w.file_type);
    auto m = Model::load(std::move(q).value());
    ASSERT_TRUE(m.ok()) << m.error().message;
    KvCache cache((*m)->config(), 16);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    ASSERT_TRUE((*m)->forward(toks, cache, logits, pool).ok());
    double num = 0, den = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      num += (logits[i] - ref[i]) * (logits[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    const double rel = std::sqrt(num / den);
    std::printf("[ info ] %s: logits relative RMS error %.4f\n", std::string(quant_preset_name(w.preset)).c_str(), rel);
    EXPECT_LT(rel, w.max_rel);
    EXPECT_GT(rel, 0.0);
  }
  for (const QuantPreset p :
       {QuantPreset::iq2_xxs, QuantPreset::iq2_xs, QuantPreset::iq2_s, QuantPreset::iq1_s, QuantPreset::iq1_m}) {
    EXPECT_TRUE(quant_preset_needs_imatrix(p));
    auto q = quantize_model(*f, p, pool);
    ASSERT_FALSE(q.ok());
    EXPECT_NE(q.error().message.find("needs an importance matrix"), std::string::npos) << q.error().message;
    EXPECT_NE(q.error().message.find(std::string(quant_preset_name(p))), std::string::npos) << q.error().message;
  }
  EXPECT_FALSE(quant_preset_needs_imatrix(QuantPreset::iq3_xxs));
}

// The grid IQ formats: a model whose matrices hold random valid blocks of each runs through Model::forward (vec_dot with Q8_K activations) close to
// the same model with those matrices dequantized to F32 (only the activation quantization differs).
TEST(Quantize, ReadOnlyGridTypesRunLikeTheirDequantizedWeights) {
  SyntheticSpec s;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  ThreadPool pool(2);
  const std::vector<TokenId> toks = {1, 5, 9, 33, 2, 7};
  for (const DType type : {DType::iq2_xxs, DType::iq2_xs, DType::iq2_s, DType::iq3_xxs, DType::iq3_s, DType::iq1_s,
                           DType::iq1_m}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    auto quant = make_synthetic_model(s);
    auto plain = make_synthetic_model(s);
    ASSERT_TRUE(quant.ok() && plain.ok());
    std::vector<std::shared_ptr<std::vector<uint8_t>>> keep;
    uint64_t state = 0x1234 + static_cast<uint64_t>(type);
    for (size_t ti = 0; ti < quant->tensors.size(); ++ti) {
      format::TensorInfo& t = quant->tensors[ti];
      if (t.n_dims < 2 || t.name.rfind("blk.", 0) != 0) continue;
      // Random bytes with every block's scale set to a small positive half (IQ1_M keeps its
      // scale in the top nibbles of its last four words).
      const size_t block = dtype_traits(type).type_size, n_blocks = static_cast<size_t>(t.n_elements() / 256);
      auto bytes = std::make_shared<std::vector<uint8_t>>(block * n_blocks);
      for (uint8_t& b : *bytes) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        b = static_cast<uint8_t>(state >> 56);
      }
      for (size_t i = 0; i < n_blocks; ++i) {
        uint8_t* blk = bytes->data() + i * block;
        if (type == DType::iq1_m) {
          for (int k = 0; k < 4; ++k) blk[48 + 2 * k + 1] = static_cast<uint8_t>((blk[48 + 2 * k + 1] & 0x0f) | (k == 3 ? 0x10 : 0));
        } else {
          const uint16_t h = 0x1400;  // 2^-10
          std::memcpy(blk, &h, 2);
        }
      }
      std::vector<float> deq(static_cast<size_t>(t.n_elements()));
      kernels::to_float(type, bytes->data(), deq.data(), t.n_elements());
      t.type = type;
      t.data = bytes->data();
      t.n_bytes = bytes->size();
      keep.push_back(bytes);
      format::TensorInfo& p = plain->tensors[ti];
      auto fbytes = std::make_shared<std::vector<uint8_t>>(deq.size() * sizeof(float));
      std::memcpy(fbytes->data(), deq.data(), fbytes->size());
      p.data = fbytes->data();
      keep.push_back(fbytes);
    }
    for (const auto& k : keep) quant->keep_alive(k), plain->keep_alive(k);
    auto mq = Model::load(std::move(quant).value());
    auto mp = Model::load(std::move(plain).value());
    ASSERT_TRUE(mq.ok()) << mq.error().message;
    ASSERT_TRUE(mp.ok()) << mp.error().message;
    const auto n_vocab = static_cast<size_t>((*mq)->config().n_vocab);
    std::vector<float> lq(n_vocab), lp(n_vocab);
    KvCache cq((*mq)->config(), 16), cp((*mp)->config(), 16);
    ASSERT_TRUE((*mq)->forward(toks, cq, lq, pool).ok());
    ASSERT_TRUE((*mp)->forward(toks, cp, lp, pool).ok());
    double num = 0, den = 0;
    for (size_t i = 0; i < n_vocab; ++i) {
      num += (lq[i] - lp[i]) * (lq[i] - lp[i]);
      den += lp[i] * lp[i];
    }
    const double rel = std::sqrt(num / den);
    std::printf("[ info ] %s: logits relative RMS vs the dequantized F32 model %.5f\n",
                std::string(dtype_name(type)).c_str(), rel);
    EXPECT_LT(rel, 0.08);  // measured 2e-5 (IQ1_M) .. 0.055 (IQ3_S, whose random scales give the largest weights)
    EXPECT_GT(rel, 0.0);
  }
}

TEST(Quantize, LowBitTypesFallBackToIq4NlThenF16) {
  // stories260K: 64-wide rows fit 32-blocks (IQ4_NL) but not 256; 172 fits neither.
  auto f = format::read_gguf(test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(f.ok());
  ThreadPool pool(1);
  auto q = quantize_model(*f, QuantPreset::q3_k_s, pool);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->find_tensor("blk.0.attn_q.weight")->type, DType::iq4_nl);
  EXPECT_EQ(q->find_tensor("blk.0.ffn_down.weight")->type, DType::f16);
  EXPECT_TRUE(Model::load(std::move(q).value()).ok());
}

TEST(Quantize, PresetNames) {
  EXPECT_EQ(*quant_preset_from_name("Q4_K_M"), QuantPreset::q4_k_m);
  EXPECT_EQ(*quant_preset_from_name("Q3_K"), QuantPreset::q3_k_m);
  EXPECT_EQ(*quant_preset_from_name("iq4_xs"), QuantPreset::iq4_xs);
  auto bad = quant_preset_from_name("q3_xl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("q4_k_m"), std::string::npos);
}

}  // namespace
}  // namespace edgelm::model

namespace edgelm::model {
namespace {

TEST(QuantizeOverrides, TensorTypePatternsWinOverThePreset) {
  SyntheticSpec s;
  s.n_embd = 256;
  s.n_ff = 256;
  s.n_layer = 4;
  s.n_head = 4;
  s.n_head_kv = 2;
  auto f = make_synthetic_model(s);
  ASSERT_TRUE(f.ok());
  std::vector<TensorTypeOverride> ov;
  for (const char* spec : {"attn_v=q8_0", "blk\\.1\\.ffn_(up|gate)=F16", "norm=q8_0", "ffn=tq2_0"})
    ov.push_back(std::move(parse_tensor_type_override(spec)).value());
  ThreadPool pool(2);
  auto q = quantize_model(*f, QuantPreset::q4_0, pool, {}, ov);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->find_tensor("blk.0.attn_v.weight")->type, DType::q8_0);
  EXPECT_EQ(q->find_tensor("blk.1.ffn_up.weight")->type, DType::f16);   // the earlier match wins
  EXPECT_EQ(q->find_tensor("blk.2.ffn_up.weight")->type, DType::tq2_0);
  EXPECT_EQ(q->find_tensor("blk.1.ffn_down.weight")->type, DType::tq2_0);
  EXPECT_EQ(q->find_tensor("blk.0.attn_q.weight")->type, DType::q4_0);  // the preset's
  EXPECT_EQ(q->find_tensor("blk.0.attn_norm.weight")->type, DType::f32);  // 1-D: never overridden
  // The block-size fallback still applies: stories260K's 64-wide rows do not fit Q4_K's 256.
  auto st = format::read_gguf(test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(st.ok());
  std::vector<TensorTypeOverride> k4 = {std::move(parse_tensor_type_override("attn_q=q4_k")).value()};
  auto qs = quantize_model(*st, QuantPreset::q8_0, pool, {}, k4);
  ASSERT_TRUE(qs.ok()) << qs.error().message;
  EXPECT_EQ(qs->find_tensor("blk.0.attn_q.weight")->type, DType::q5_0);
}

TEST(QuantizeOverrides, BadSpecsAreErrorsNamingThem) {
  auto err = [](const char* spec) {
    auto o = parse_tensor_type_override(spec);
    EXPECT_FALSE(o.ok()) << spec;
    return o.ok() ? std::string() : o.error().message;
  };
  EXPECT_NE(err("attn_v").find("PATTERN=TYPE"), std::string::npos);
  EXPECT_NE(err("=q8_0").find("empty pattern"), std::string::npos);
  EXPECT_NE(err("attn_v=q9_9").find("'q9_9'"), std::string::npos);
  EXPECT_NE(err("attn_v=q8_1").find("not a type edgelm can write"), std::string::npos);
  EXPECT_NE(err("attn_v=q8_k").find("not a type edgelm can write"), std::string::npos);
  EXPECT_NE(err("([=q8_0").find("invalid pattern"), std::string::npos);
  auto ok = parse_tensor_type_override("a=b=Q6_K");  // split at the last '='
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->pattern, "a=b");
  EXPECT_EQ(ok->type, DType::q6_k);
}

}  // namespace
}  // namespace edgelm::model
