#include "test_vocab.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace edgelm::tokenizer::test {

format::GgufMetadata make_metadata(const std::vector<TokenSpec>& tokens, const std::string& model) {
  format::GgufValue::Array texts, scores, types;
  for (const TokenSpec& t : tokens) {
    texts.push_back(format::GgufValue::from_string(t.text));
    scores.push_back(format::GgufValue::from_f32(t.score));
    types.push_back(format::GgufValue::from_i32(static_cast<int32_t>(t.type)));
  }
  format::GgufMetadata md;
  md.set("tokenizer.ggml.model", format::GgufValue::from_string(model));
  md.set("tokenizer.ggml.tokens", format::GgufValue::from_array(format::GgufType::string, texts));
  md.set("tokenizer.ggml.scores", format::GgufValue::from_array(format::GgufType::f32, scores));
  md.set("tokenizer.ggml.token_type", format::GgufValue::from_array(format::GgufType::i32, types));
  return md;
}

std::vector<TokenSpec> spm_tokens(std::initializer_list<TokenSpec> extra) {
  std::vector<TokenSpec> tokens = {
      {"<unk>", 0.0f, TokenType::unknown},
      {"<s>", 0.0f, TokenType::control},
      {"</s>", 0.0f, TokenType::control},
  };
  for (int b = 0; b < 256; ++b) tokens.push_back({fmt::format("<0x{:02X}>", b), 0.0f, TokenType::byte});
  tokens.insert(tokens.end(), extra);
  return tokens;
}

Vocab load_vocab(const format::GgufMetadata& md) {
  auto vocab = Vocab::from_metadata(md);
  EXPECT_TRUE(vocab.ok()) << (vocab.ok() ? "" : vocab.error().message);
  return std::move(vocab).value();
}

}  // namespace edgelm::tokenizer::test
