#include "tokenizer/tokenizer.h"

#include "tokenizer/spm.h"

namespace edgelm::tokenizer {

std::string Tokenizer::piece_after(TokenId prev, TokenId id) const {
  std::string piece = token_to_piece(id);
  const bool at_start = prev == kNoToken || (vocab_.bos() != kNoToken && prev == vocab_.bos());
  if (vocab_.add_space_prefix() && at_start && !piece.empty() && piece.front() == ' ') {
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

Result<std::unique_ptr<Tokenizer>> make_tokenizer(Vocab vocab) {
  if (vocab.model() == "llama") {
    return std::unique_ptr<Tokenizer>(std::make_unique<SpmTokenizer>(std::move(vocab)));
  }
  return make_error("tokenizer model '{}' is not supported yet", vocab.model());
}

}  // namespace edgelm::tokenizer
