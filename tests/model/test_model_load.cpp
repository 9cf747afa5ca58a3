// Model loading: config from metadata, shape checks, and clear errors for what a file can get
// wrong (missing or misshapen tensors, unknown architecture or tensor type, absurd sizes).
#include <gtest/gtest.h>

#include "format/gguf_reader.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "support/test_data.h"

namespace edgelm::model {
namespace {

std::string load_error(format::ModelFile f) {
  auto m = Model::load(std::move(f));
  EXPECT_FALSE(m.ok());
  return m.ok() ? std::string() : m.error().message;
}

format::ModelFile synthetic() {
  auto f = make_synthetic_model(SyntheticSpec{});
  EXPECT_TRUE(f.ok());
  return std::move(f).value();
}

TEST(ModelLoad, ReferenceStoriesGguf) {
  for (const char* name : {"models/stories260K-f32.gguf", "models/stories260K-f16.gguf"}) {
    auto f = format::read_gguf(test::shared_path(name));
    ASSERT_TRUE(f.ok());
    auto m = Model::load(std::move(f).value());
    ASSERT_TRUE(m.ok()) << m.error().message;
    const ModelConfig& c = (*m)->config();
    EXPECT_EQ(c.n_embd, 64);
    EXPECT_EQ(c.n_layer, 5);
    EXPECT_EQ(c.n_head, 8);
    EXPECT_EQ(c.n_head_kv, 4);
    EXPECT_EQ(c.n_ff, 172);
    EXPECT_EQ(c.n_vocab, 512);
    EXPECT_EQ(c.n_rot, 8);
    EXPECT_EQ(c.arch->name, "llama");
    EXPECT_FLOAT_EQ(c.rope_base, 10000.0f);
  }
}

TEST(ModelLoad, MissingTensorIsNamed) {
  auto f = synthetic();
  f.tensors.erase(f.tensors.begin() + 5);
  const std::string name = synthetic().tensors[5].name;
  EXPECT_NE(load_error(std::move(f)).find("'" + name + "' is missing"), std::string::npos);
}

TEST(ModelLoad, WrongShapeIsNamed) {
  auto f = synthetic();
  for (auto& t : f.tensors)
    if (t.name == "blk.1.attn_k.weight") std::swap(t.ne[0], t.ne[1]);
  const std::string e = load_error(std::move(f));
  EXPECT_NE(e.find("'blk.1.attn_k.weight' has shape"), std::string::npos) << e;
}

TEST(ModelLoad, UnknownArchitectureIsNamed) {
  auto f = synthetic();
  f.metadata.set("general.architecture", format::GgufValue::from_string("mamba"));
  const std::string e = load_error(std::move(f));
  EXPECT_NE(e.find("'mamba'"), std::string::npos) << e;
  EXPECT_NE(e.find("llama"), std::string::npos) << e;
}

TEST(ModelLoad, AbsurdOrInconsistentSizes) {
  auto f = synthetic();
  f.metadata.set("llama.embedding_length", format::GgufValue::from_u32(4000000000u));
  EXPECT_NE(load_error(std::move(f)).find("llama.embedding_length"), std::string::npos);
  f = synthetic();
  f.metadata.set("llama.attention.head_count", format::GgufValue::from_u32(0));
  EXPECT_NE(load_error(std::move(f)).find("head_count"), std::string::npos);
  f = synthetic();
  f.metadata.set("llama.attention.head_count_kv", format::GgufValue::from_u32(3));
  EXPECT_NE(load_error(std::move(f)).find("head_count_kv"), std::string::npos);
  f = synthetic();
  f.metadata.set("llama.block_count", format::GgufValue::from_string("two"));
  EXPECT_NE(load_error(std::move(f)).find("llama.block_count"), std::string::npos);
}

TEST(ModelLoad, QuantizedFilesOfTheReferenceLoadInPlace) {
  for (const char* name : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K_M", "Q5_K_M", "Q6_K", "F16", "BF16"}) {
    auto f = format::read_gguf(test::shared_path(std::string("models/interop/rand-small-") + name + ".gguf"));
    ASSERT_TRUE(f.ok());
    auto m = Model::load(std::move(f).value());
    ASSERT_TRUE(m.ok()) << name << ": " << m.error().message;
    EXPECT_EQ((*m)->config().n_embd, 256);
  }
}

TEST(ModelLoad, TypeWithoutKernelsIsNamed) {
  auto f = synthetic();
  for (auto& t : f.tensors)
    if (t.name == "blk.0.ffn_up.weight") t.type = DType::i32;  // same byte size as F32
  const std::string e = load_error(std::move(f));
  EXPECT_NE(e.find("'blk.0.ffn_up.weight' has type I32"), std::string::npos) << e;
}

}  // namespace
}  // namespace edgelm::model
