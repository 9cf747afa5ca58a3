#include "tokenizer/spm.h"

#include <algorithm>
#include <queue>

#include "tokenizer/special_split.h"
#include "tokenizer/space_mark.h"
#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

constexpr std::string_view kUnknownPiece = "\xE2\x96\x85";  // U+2585, how unk tokens print

// A run of the input, linked to its neighbours; n == 0 once merged into its left neighbour.
struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t n;
};

// A candidate merge of symbols left and right into a token of `score`; `size` is their joint
// length when the candidate was made, so a pair whose sides changed since is recognised as stale.
struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

// Max-heap order: higher score first, then smaller left index (llama.cpp's comparator).
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// Appends `text` with every ' ' replaced by U+2581.
void append_escaped(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (c == ' ') {
      out.append(kSpaceMark);
    } else {
      out += c;
    }
  }
}

}  // namespace

std::vector<TokenId> SpmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = vocab();
  std::vector<TokenId> out;
  if (add_special && v.add_bos()) out.push_back(v.bos());

  // The dummy prefix goes before the first fragment and after every special token (BOS
  // included), as SentencePiece would see each fragment as a sentence of its own.
  bool prev_special = true;
  std::string escaped;
  for (const Fragment& f : split_special(v, text, parse_special)) {
    if (f.is_token()) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    escaped.clear();
    if (v.add_space_prefix() && prev_special) escaped.append(kSpaceMark);
    append_escaped(escaped, f.text);
    encode_fragment(escaped, out);
    prev_special = false;
  }

  if (add_special && v.add_eos()) out.push_back(v.eos());
  return out;
}

void SpmTokenizer::encode_fragment(std::string_view text, std::vector<TokenId>& out) const {
  const Vocab& v = vocab();

  // One symbol per (leniently split) UTF-8 character; a truncated last character is clamped.
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = std::min<size_t>(utf8_lead_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
    offset += len;
  }
  if (symbols.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  const auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const size_t size = symbols[left].n + symbols[right].n;
    const auto id = v.find(text.substr(symbols[left].offset, size));
    if (!id) return;
    queue.push({left, right, v.score(*id), size});
  };

  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    // Stale: one side was merged away, or grew, since this candidate was made. (Sizes only
    // grow, so an unchanged joint size means both sides are unchanged.)
    if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;

    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;

    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  // Every merged symbol is a token by construction; single characters may not be, and then
  // go out byte by byte. (llama.cpp's rev_merge re-segmentation can never trigger for that
  // reason, so it is not reproduced.)
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].n);
    if (const auto id = v.find(piece)) {
      out.push_back(*id);
      continue;
    }
    for (const char c : piece) {
      const auto byte_id = v.byte_token(static_cast<uint8_t>(c));
      if (byte_id) {
        out.push_back(*byte_id);
      } else if (v.unk() != kNoToken) {
        out.push_back(v.unk());
      }
      // With neither byte tokens nor unk the byte cannot be represented and is dropped
      // (llama.cpp throws here).
    }
  }
}

std::string SpmTokenizer::token_to_piece(TokenId id) const {
  const Vocab& v = vocab();
  switch (v.type(id)) {
    case TokenType::normal: return unescape_space_marks(v.text(id));
    case TokenType::user_defined: return std::string(v.text(id));
    case TokenType::byte: return std::string(1, static_cast<char>(v.token_byte(id)));
    case TokenType::unknown: return std::string(kUnknownPiece);
    case TokenType::control:
    case TokenType::unused:
    case TokenType::undefined: return {};
  }
  return {};
}

}  // namespace edgelm::tokenizer
