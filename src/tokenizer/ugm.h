// SentencePiece unigram ("t5" tokenizer model: T5, XLM-RoBERTa, bge-m3, multilingual-e5), token
// for token identical to llama.cpp's llm_tokenizer_ugm.
//
// encode: split out special tokens (special_split.h); each text fragment is then normalized
// and segmented on its own.
//  - Normalization, left to right: a prefix of the input that walks the trie of user_defined
//    token texts (however short, whether or not a token ends there) is kept as is; else the
//    longest precompiled-charsmap rule (charsmap.h) replaces its source; else one UTF-8
//    character is kept (an invalid byte becomes U+FFFD). Of the result, a ' ' ends a word:
//    with remove_extra_whitespaces every word is preceded by exactly one U+2581 and the spaces
//    themselves vanish; without it every ' ' becomes U+2581 and add_space_prefix puts one
//    U+2581 before the first word.
//  - Segmentation: Viterbi over UTF-8 characters (lenient split, utf8_lead_length): the
//    segmentation into vocabulary pieces (normal, user_defined, unused tokens) with the highest
//    sum of scores (double precision; user_defined pieces score 0). A character that no piece
//    covers alone may become the unknown token, scored as the lowest normal score minus 10;
//    runs of unknown tokens collapse into one. Ties keep the candidate found first (shorter
//    starts earlier, then shorter pieces, then the unknown token).
// BOS/EOS are added with add_special as the vocabulary says (for "t5": EOS only by default).
// Complexity: O(n * L) per fragment of n bytes, L the longest piece; memory O(n).
//
// Decoding: normal pieces with U+2581 as ' ', user_defined as is, byte tokens as their byte;
// control, unknown and unused tokens as "".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/byte_trie.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::tokenizer {

class UgmTokenizer final : public Tokenizer {
 public:
  // Reads tokenizer.ggml.precompiled_charsmap (optional; an array of u8 or i8) and
  // tokenizer.ggml.remove_extra_whitespaces (default false) from `md`. Fails when the
  // vocabulary has no unknown token or the charsmap is malformed.
  static Result<std::unique_ptr<Tokenizer>> create(Vocab vocab, const format::GgufMetadata& md);

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(TokenId id) const override;

  // The normalized form of one text fragment, as segmented (exposed for tests).
  std::string normalize(std::string_view text) const;

 private:
  UgmTokenizer(Vocab vocab, Charsmap charsmap, bool remove_extra_whitespaces);

  // Appends the tokens of one text fragment.
  void encode_fragment(std::string_view text, std::vector<TokenId>& out) const;

  Charsmap charsmap_;
  bool remove_extra_whitespaces_ = false;
  ByteTrie pieces_;        // normal, user_defined and unused token texts -> id
  ByteTrie user_defined_;  // user_defined token texts
  float unknown_score_ = 0.0f;
};

}  // namespace edgelm::tokenizer
