// llama2.c checkpoints and tokenizer.bin: equivalence with the reference converter's GGUF of
// the same model, and clear errors for damaged or mismatched files.
#include <gtest/gtest.h>

#include <cstring>

#include "format/gguf_reader.h"
#include "format/llama2c.h"
#include "support/test_data.h"

namespace edgelm::format {
namespace {

std::string model_path() { return test::shared_path("models/stories260K.bin"); }
std::string tok_path() { return test::shared_path("models/tok512.bin"); }

// Every tensor of the reference GGUF exists in ours with the same shape and the same bytes
// (the reference writes a copy of the tied classifier as output.weight; ours ties it).
TEST(Llama2c, TensorsMatchTheReferenceConverter) {
  auto ours = read_llama2c(model_path(), tok_path());
  ASSERT_TRUE(ours.ok()) << ours.error().message;
  auto ref = read_gguf(test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(ref.ok());
  for (const TensorInfo& r : ref->tensors) {
    const std::string name = r.name == "output.weight" ? "token_embd.weight" : r.name;
    const TensorInfo* t = ours->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ne, r.ne) << name;
    ASSERT_EQ(t->n_bytes, r.n_bytes) << name;
    EXPECT_EQ(std::memcmp(t->data, r.data, r.n_bytes), 0) << name;
  }
  EXPECT_EQ(ours->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(ours->tensors.size(), ref->tensors.size() - 1);
}

TEST(Llama2c, VocabularyMatchesTheReferenceConverter) {
  auto ours = read_llama2c(model_path(), tok_path());
  ASSERT_TRUE(ours.ok());
  auto ref = read_gguf(test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(ref.ok());
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
    const auto* a = *ours->metadata.get_array(key);
    const auto* b = *ref->metadata.get_array(key);
    ASSERT_EQ(a->size(), b->size()) << key;
    for (size_t i = 0; i < a->size(); ++i) {
      if ((*a)[i].as_string() != nullptr) {
        EXPECT_EQ(*(*a)[i].as_string(), *(*b)[i].as_string()) << key << "[" << i << "]";
      } else {
        EXPECT_EQ(*(*a)[i].as_double(), *(*b)[i].as_double()) << key << "[" << i << "]";
      }
    }
  }
  for (const char* key : {"llama.embedding_length", "llama.feed_forward_length", "llama.block_count",
                          "llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.dimension_count",
                          "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"}) {
    EXPECT_EQ(*ours->metadata.get_u32(key), *ref->metadata.get_u32(key)) << key;
  }
  EXPECT_EQ(*ours->metadata.get_u32("llama.context_length"), 512u);  // from the checkpoint header
  EXPECT_EQ(*ours->metadata.get_string("tokenizer.ggml.model"), "llama");
}

TEST(Llama2c, SecondModelWithPlainMultiHeadAttention) {
  auto f = read_llama2c(test::shared_path("models/aidreams260K.bin"), test::shared_path("models/aidreams-tok512.bin"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*f->metadata.get_u32("llama.block_count"), 4u);
  EXPECT_EQ(*f->metadata.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*f->metadata.get_u32("llama.context_length"), 128u);
}

TEST(Llama2c, Errors) {
  test::TempDir dir;
  const std::string bin = test::read_file(model_path());
  // Truncated checkpoint: size mismatch names both sizes.
  test::write_file(dir.file("short.bin"), std::string_view(bin).substr(0, bin.size() - 4));
  auto r = read_llama2c(dir.file("short.bin"), "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("size mismatch"), std::string::npos) << r.error().message;
  // Absurd header values.
  std::string bad = bin;
  const int32_t huge = 1 << 30;
  std::memcpy(bad.data(), &huge, 4);
  test::write_file(dir.file("huge.bin"), bad);
  r = read_llama2c(dir.file("huge.bin"), "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("dim"), std::string::npos) << r.error().message;
  // Header shorter than 28 bytes.
  test::write_file(dir.file("tiny.bin"), "abc");
  EXPECT_FALSE(read_llama2c(dir.file("tiny.bin"), "").ok());
  // Vocab/model mismatch: the Llama 2 vocabulary (32000 tokens) with the 512-token model.
  r = read_llama2c(model_path(), test::shared_path("models/llama2-tokenizer.bin"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("vocab/model mismatch"), std::string::npos) << r.error().message;
  // Truncated tokenizer.
  const std::string tok = test::read_file(tok_path());
  test::write_file(dir.file("tok.bin"), std::string_view(tok).substr(0, tok.size() - 3));
  r = read_llama2c(model_path(), dir.file("tok.bin"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
  // Missing tokenizer file.
  EXPECT_FALSE(read_llama2c(model_path(), dir.file("none.bin")).ok());
}

}  // namespace
}  // namespace edgelm::format
