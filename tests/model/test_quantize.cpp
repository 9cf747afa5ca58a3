// Quantization against the reference implementation: quantizing the interop F32 model with
// each preset gives, tensor by tensor, the same type and the same bytes as the reference
// quantizer's file of that type. Plus the policy's fallbacks and the error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "format/gguf_reader.h"
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

TEST(Quantize, PresetNames) {
  EXPECT_EQ(*quant_preset_from_name("Q4_K_M"), QuantPreset::q4_k_m);
  auto bad = quant_preset_from_name("q3_xl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("q4_k_m"), std::string::npos);
}

}  // namespace
}  // namespace edgelm::model
