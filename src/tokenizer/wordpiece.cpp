#include "tokenizer/wordpiece.h"

#include <algorithm>

#include "tokenizer/normalize.h"
#include "tokenizer/special_split.h"

namespace edgelm::tokenizer {
namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581, the converter's word-start mark

bool is_piece_type(TokenType t) { return t == TokenType::normal || t == TokenType::user_defined; }

bool is_utf8_continuation(char c) { return (static_cast<uint8_t>(c) & 0xC0) == 0x80; }

}  // namespace

Result<std::unique_ptr<Tokenizer>> WordPieceTokenizer::create(Vocab vocab) {
  TokenId unk = vocab.unk();
  if (unk == kNoToken) unk = vocab.find("[UNK]").value_or(kNoToken);
  if (unk == kNoToken) {
    return make_error("WordPiece vocabulary has no unknown token (tokenizer.ggml.unknown_token_id or \"[UNK]\")");
  }
  return std::unique_ptr<Tokenizer>(new WordPieceTokenizer(std::move(vocab)));
}

WordPieceTokenizer::WordPieceTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
  const Vocab& v = this->vocab();
  unk_ = v.unk() != kNoToken ? v.unk() : *v.find("[UNK]");  // create() checked that one exists

  for (TokenId id = 0; id < v.n_tokens(); ++id) {
    if (!is_piece_type(v.type(id))) continue;
    const std::string_view text = v.text(id);
    if (text.starts_with(kWordStart)) {
      max_start_bytes_ = std::max(max_start_bytes_, text.size() - kWordStart.size());
    } else {
      max_cont_bytes_ = std::max(max_cont_bytes_, text.size());
    }
  }
}

std::optional<TokenId> WordPieceTokenizer::find_piece(std::string_view text) const {
  const auto id = vocab().find(text);
  if (!id || !is_piece_type(vocab().type(*id))) return std::nullopt;
  return id;
}

std::vector<TokenId> WordPieceTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = vocab();
  std::vector<TokenId> out;
  if (add_special && v.add_bos()) out.push_back(v.bos());

  std::string scratch;
  std::vector<size_t> bounds;
  for (const Fragment& f : split_special(vocab(), text, parse_special)) {
    if (f.is_token()) {
      out.push_back(f.token);
      continue;
    }
    const std::string words = bert_pretokenize(f.text);
    for (size_t pos = 0; pos < words.size();) {
      size_t end = words.find(' ', pos);
      if (end == std::string::npos) end = words.size();
      encode_word(std::string_view(words).substr(pos, end - pos), scratch, bounds, out);
      pos = end + 1;
    }
  }

  if (add_special && v.add_eos()) out.push_back(v.eos());
  return out;
}

void WordPieceTokenizer::encode_word(std::string_view word, std::string& scratch, std::vector<size_t>& bounds,
                                     std::vector<TokenId>& out) const {
  // Character boundaries, as byte offsets into the word: [0, ..., word.size()].
  bounds.clear();
  for (size_t i = 0; i < word.size(); ++i) {
    if (!is_utf8_continuation(word[i])) bounds.push_back(i);
  }
  const size_t n_chars = bounds.size();
  bounds.push_back(word.size());
  if (n_chars > kMaxWordChars) {
    out.push_back(unk_);
    return;
  }

  // Word-start candidates are prefixes of "▁word", so build that once.
  scratch.assign(kWordStart);
  scratch.append(word);
  const std::string_view marked = scratch;
  const size_t mark = kWordStart.size();

  const size_t n_out = out.size();
  size_t start = 0;  // index into bounds
  while (start < n_chars) {
    const bool first = start == 0;
    const size_t begin = bounds[start];
    // A continuation candidate starting with U+2581 would look like a word-start token (the
    // converter cannot have produced a "##▁..." piece distinctly), so none can match there.
    std::optional<TokenId> found;
    size_t stop = start;
    if (first || !word.substr(begin).starts_with(kWordStart)) {
      // The farthest end within the longest piece of the vocabulary, then shorter and shorter.
      const size_t limit = begin + (first ? max_start_bytes_ : max_cont_bytes_);
      const auto first_past = std::upper_bound(bounds.begin() + static_cast<ptrdiff_t>(start) + 1, bounds.end(), limit);
      stop = static_cast<size_t>(first_past - bounds.begin()) - 1;
      for (; stop > start; --stop) {
        const std::string_view candidate =
            first ? marked.substr(0, mark + bounds[stop]) : marked.substr(mark + begin, bounds[stop] - begin);
        found = find_piece(candidate);
        if (found) break;
      }
    }
    if (!found) {
      // Greedy matching is not backtracked: the whole word is unknown, as in BERT.
      out.resize(n_out);
      out.push_back(unk_);
      return;
    }
    out.push_back(*found);
    start = stop;
  }
}

std::string WordPieceTokenizer::token_to_piece(TokenId id) const {
  const Vocab& v = vocab();
  const std::string_view text = v.text(id);
  switch (v.type(id)) {
    case TokenType::normal:
      if (text.starts_with(kWordStart)) {
        std::string piece = " ";
        piece.append(text, kWordStart.size());
        return piece;
      }
      return std::string(text);
    case TokenType::user_defined: return std::string(text);
    default: return "";
  }
}

}  // namespace edgelm::tokenizer
