// Hand-built vocabularies for tokenizer unit tests: GGUF metadata made in memory, so that the
// tests need no files and every score and type is visible in the test itself.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "format/gguf_value.h"
#include "tokenizer/vocab.h"

namespace edgelm::tokenizer::test {

struct TokenSpec {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::normal;
};

// tokenizer.ggml.{model,tokens,scores,token_type} for `tokens`, in id order.
format::GgufMetadata make_metadata(const std::vector<TokenSpec>& tokens, const std::string& model = "llama");

// The usual SentencePiece layout: 0 <unk> (unknown), 1 <s>, 2 </s> (control), 3..258 the byte
// tokens <0x00>..<0xFF>, then `extra`.
std::vector<TokenSpec> spm_tokens(std::initializer_list<TokenSpec> extra);

// Id of the byte token for `b` in an spm_tokens() vocabulary.
inline TokenId byte_id(uint8_t b) { return 3 + static_cast<TokenId>(b); }

// Vocab::from_metadata that must succeed.
Vocab load_vocab(const format::GgufMetadata& md);

}  // namespace edgelm::tokenizer::test
