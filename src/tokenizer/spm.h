// SentencePiece BPE ("llama" tokenizer model), token for token identical to llama.cpp's
// llm_tokenizer_spm.
//
// encode: split out special tokens (special_split.h); each text fragment gets a dummy-prefix
// space (add_space_prefix, when it is first or follows a special token), spaces become U+2581,
// and it is cut into UTF-8 characters (lenient split, utf8_lead_length). Then adjacent symbols
// are merged greedily: always the pair whose concatenation is the highest-scoring vocabulary
// token, the leftmost on ties. Final symbols that are not tokens fall back to byte tokens
// "<0xXX>" (or unk if the vocabulary has none).
// Complexity: O(n log n) per fragment of n characters (a binary heap of candidate pairs with
// lazy deletion, and an allocation-free hash lookup per candidate).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace edgelm::tokenizer {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {}

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const override;

  // normal: text with U+2581 as ' '; user_defined: text as is (as llama.cpp); byte: that byte;
  // unknown: U+2585; control, unused, undefined: "".
  std::string token_to_piece(TokenId id) const override;

 private:
  // Appends the tokens of one escaped text fragment (non-empty).
  void encode_fragment(std::string_view text, std::vector<TokenId>& out) const;
};

}  // namespace edgelm::tokenizer
