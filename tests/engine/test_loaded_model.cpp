// load_model with LoadOptions::release_vocabulary (what serve passes): after the tokenizer is
// built, the model file's metadata no longer holds the vocabulary's arrays (the tokenizer's compact
// tables replace them), the tokenizer still works, and an in-memory quantization says why it
// cannot run. Without the option (the default) the arrays stay and the quantization runs.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "engine/evaluator.h"
#include "engine/loaded_model.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

TEST(LoadedModel, VocabularyArraysLeaveTheMetadataAndTheTokenizerStillWorks) {
  auto lm = load_model(edgelm::test::shared_path("models/stories260K-f32.gguf"), "",
                       format::LoadOptions{.release_vocabulary = true});
  ASSERT_TRUE(lm.ok()) << lm.error().message;
  const format::GgufMetadata& md = lm->model->file().metadata;
  EXPECT_FALSE(md.contains("tokenizer.ggml.tokens"));
  EXPECT_FALSE(md.contains("tokenizer.ggml.scores"));
  EXPECT_FALSE(md.contains("tokenizer.ggml.token_type"));
  EXPECT_TRUE(md.contains("general.architecture"));
  EXPECT_TRUE(md.contains("tokenizer.ggml.model"));
  EXPECT_EQ(lm->tokenizer->vocab().n_tokens(), lm->model->config().n_vocab);
  const auto ids = lm->tokenizer->encode("Once upon a time", false, false);
  ASSERT_FALSE(ids.empty());
  const std::string text = lm->tokenizer->decode(ids);
  EXPECT_NE(text.find("Once upon a time"), std::string::npos) << text;
  ThreadPool pool(1);
  auto q = quantize_loaded_model(*lm, model::QuantPreset::q8_0, pool);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message.find("release_vocabulary"), std::string::npos) << q.error().message;
}

TEST(LoadedModel, ByDefaultTheVocabularyArraysStayAndTheModelQuantizesInMemory) {
  auto lm = load_model(edgelm::test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(lm.ok()) << lm.error().message;
  EXPECT_TRUE(lm->model->file().metadata.contains("tokenizer.ggml.tokens"));
  ThreadPool pool(1);
  auto q = quantize_loaded_model(*lm, model::QuantPreset::q8_0, pool);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->tokenizer->vocab().n_tokens(), lm->tokenizer->vocab().n_tokens());
}

TEST(LoadedModel, ReleaseVocabularyMetadataErasesOnlyTheVocabularyArrays) {
  format::GgufMetadata md;
  md.set("general.architecture", format::GgufValue::from_string("llama"));
  md.set("tokenizer.ggml.tokens", format::GgufValue::from_array(format::GgufType::string, {}));
  md.set("tokenizer.ggml.merges", format::GgufValue::from_array(format::GgufType::string, {}));
  md.set("tokenizer.chat_template", format::GgufValue::from_string("{{ x }}"));
  EXPECT_EQ(release_vocabulary_metadata(md), 2u);
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md.entries()[0].first, "general.architecture");
  EXPECT_EQ(md.entries()[1].first, "tokenizer.chat_template");
  ASSERT_NE(md.find("tokenizer.chat_template"), nullptr);  // the index follows the shifted entries
  EXPECT_EQ(*md.find("tokenizer.chat_template")->as_string(), "{{ x }}");
  EXPECT_EQ(release_vocabulary_metadata(md), 0u);
}

}  // namespace
}  // namespace edgelm::engine
