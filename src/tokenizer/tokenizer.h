// Tokenizer: the text <-> token-id interface every tokenizer model implements (SentencePiece
// BPE here; byte-level BPE and WordPiece later), and the factory that picks one from a Vocab.
//
// Tokenizers are immutable after construction: encode/decode are const and keep no state, so
// one instance can serve many threads. decode() returns raw bytes (token pieces may split a
// UTF-8 character); use StreamDecoder for text that must always be valid UTF-8.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/vocab.h"

namespace edgelm::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  const Vocab& vocab() const { return vocab_; }

  // add_special: prepend BOS / append EOS as the vocab says. parse_special: control-token texts
  // in `text` become those tokens (otherwise they are plain text; user_defined tokens are always
  // matched).
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // Raw bytes of one token as output text (may be part of a UTF-8 character); "" for control
  // tokens. `id` must be in the vocabulary.
  virtual std::string token_to_piece(TokenId id) const = 0;

  // The piece of `id` as it appears in decoded text when it follows `prev` (kNoToken at the
  // start). With add_space_prefix, SentencePiece's dummy prefix is removed: the first piece of a
  // sequence and a piece right after BOS lose one leading space.
  std::string piece_after(TokenId prev, TokenId id) const;

  // The whole text of `ids`: their pieces, with the leading-space rule of piece_after().
  std::string decode(std::span<const TokenId> ids) const;

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

  // Whether decoded text drops the leading space of its first word (piece_after). SentencePiece
  // does when it added a dummy prefix; WordPiece marks every word start with a space.
  virtual bool strips_leading_space() const { return vocab_.add_space_prefix(); }

 private:
  Vocab vocab_;
};

// The tokenizer for vocab.model(): "llama" -> SentencePiece BPE, "gpt2" -> byte-level BPE (its
// merges and pre-tokenizer come from `md`), "bert" -> WordPiece, "t5" -> SentencePiece unigram
// (its charsmap and whitespace flag come from `md`). Any other model is an error that names it.
Result<std::unique_ptr<Tokenizer>> make_tokenizer(Vocab vocab, const format::GgufMetadata& md);

// Vocab::from_metadata + make_tokenizer.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const format::GgufMetadata& md);

}  // namespace edgelm::tokenizer
