// load_model: after the tokenizer is built, the model file's metadata no longer holds the
// vocabulary's arrays (the tokenizer's compact tables replace them), and the tokenizer still works.
#include <gtest/gtest.h>

#include "engine/loaded_model.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

TEST(LoadedModel, VocabularyArraysLeaveTheMetadataAndTheTokenizerStillWorks) {
  auto lm = load_model(edgelm::test::shared_path("models/stories260K-f32.gguf"));
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
