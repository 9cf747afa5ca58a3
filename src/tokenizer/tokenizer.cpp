#include "tokenizer/tokenizer.h"

#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/ugm.h"
#include "tokenizer/wordpiece.h"

namespace edgelm::tokenizer {

std::string Tokenizer::piece_after(TokenId prev, TokenId id) const {
  std::string piece = token_to_piece(id);
  const bool at_start = prev == kNoToken || (vocab_.bos() != kNoToken && prev == vocab_.bos());
  if (strips_leading_space() && at_start && !piece.empty() && piece.front() == ' ') {
    piece.erase(0, 1);
  }
  return piece;
}

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string text;
  TokenId prev = kNoToken;
  for (const TokenId id : ids) {
    text += piece_after(prev, id);
    prev = id;
  }
  return text;
}

Result<std::unique_ptr<Tokenizer>> make_tokenizer(Vocab vocab, const format::GgufMetadata& md) {
  if (vocab.model() == "llama") {
    return std::unique_ptr<Tokenizer>(std::make_unique<SpmTokenizer>(std::move(vocab)));
  }
  if (vocab.model() == "gpt2") return BpeTokenizer::create(std::move(vocab), md);
  if (vocab.model() == "bert") return WordPieceTokenizer::create(std::move(vocab));
  if (vocab.model() == "t5") return UgmTokenizer::create(std::move(vocab), md);
  return make_error("tokenizer model '{}' is not supported (supported: llama, gpt2, bert, t5)", vocab.model());
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const format::GgufMetadata& md) {
  EDGELM_TRY(Vocab vocab, Vocab::from_metadata(md));
  return make_tokenizer(std::move(vocab), md);
}

}  // namespace edgelm::tokenizer
