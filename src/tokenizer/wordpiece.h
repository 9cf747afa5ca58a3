// WordPiece ("bert" tokenizer model), token for token identical to the reference BERT tokenizer
// (normalizer, pre-tokenizer and WordPiece model) on GGUF vocabularies.
//
// Vocabulary convention: GGUF converters rewrite BERT's vocab.txt so that a piece that starts a
// word carries a U+2581 prefix ("hello" -> "▁hello") and a continuation piece loses its "##"
// ("##lo" -> "lo"); bracketed names ("[CLS]", "[unused0]") are kept as they are.
//
// encode: split out special tokens (special_split.h; control tokens such as "[CLS]" only with
// parse_special); each text fragment is normalized and cut into words (normalize.h: cleaning,
// CJK isolation, NFD without accents, lower case, whitespace and punctuation splits). Each word
// is then matched greedily, longest piece first, from left to right: the first piece must be a
// word-start token, the following ones continuation tokens. A word that cannot be covered this
// way, or that is longer than kMaxWordChars characters, becomes a single [UNK].
// Complexity: O(n) normalization, then per word of c characters at most c * L hash lookups of
// at most L bytes, where L is the longest piece of the vocabulary (candidates are capped at L),
// and c <= kMaxWordChars: linear in the input overall.
//
// Decoding: a word-start piece prints as " word", a continuation piece as its text, control
// tokens (including this vocabulary's [UNK], [CLS], [SEP]) as "". So decode() of the tokens of a
// text gives its normalized words joined by single spaces ("Hello, World!" -> "hello , world !")
// with one leading space, which Tokenizer::piece_after removes when the vocab's
// add_space_prefix() is set. WordPiece is lossy: case, accents, control characters and the
// spacing of the input are normalized away, and [UNK] words decode to nothing.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::tokenizer {

class WordPieceTokenizer final : public Tokenizer {
 public:
  // BERT's max_input_chars_per_word: longer words (in code points, after normalization) are [UNK].
  static constexpr size_t kMaxWordChars = 100;

  // Fails when the vocabulary has no unknown token (vocab.unk(), else a token "[UNK]").
  // [CLS]/[SEP]: vocab.bos()/eos() with add_bos()/add_eos() when the vocab sets them; otherwise
  // the tokens "[CLS]"/"[SEP]", both added with add_special (BERT's "[CLS] text [SEP]").
  static Result<std::unique_ptr<Tokenizer>> create(Vocab vocab);

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const override;

  // normal: " " + text for a word-start piece (the U+2581 prefix), else the text; user_defined:
  // the text; every other type (control, unknown, unused, byte, undefined): "".
  std::string token_to_piece(TokenId id) const override;

  TokenId unk() const { return unk_; }

 protected:
  bool strips_leading_space() const override { return true; }

 private:
  explicit WordPieceTokenizer(Vocab vocab);

  // Appends the tokens of one word (non-empty, no whitespace). `scratch` is reused storage.
  void encode_word(std::string_view word, std::string& scratch, std::vector<size_t>& bounds,
                   std::vector<TokenId>& out) const;
  // The token with exactly this text, if it may be a WordPiece piece (normal or user_defined).
  std::optional<TokenId> find_piece(std::string_view text) const;

  TokenId unk_ = kNoToken;
  size_t max_start_bytes_ = 0;  // longest word-start piece, without its U+2581 prefix
  size_t max_cont_bytes_ = 0;   // longest continuation piece
};

}  // namespace edgelm::tokenizer
