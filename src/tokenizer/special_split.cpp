#include "tokenizer/special_split.h"

#include <algorithm>

namespace edgelm::tokenizer {
namespace {

// C isspace() in the "C" locale, which llama.cpp relies on.
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// Splits one text fragment around every occurrence of `id`'s text, appending to `out`.
void split_fragment(const Vocab& vocab, TokenId id, std::string_view rest, std::vector<Fragment>& out) {
  const std::string_view needle = vocab.text(id);
  while (true) {
    const size_t match = rest.find(needle);
    if (match == std::string_view::npos) {
      if (!rest.empty()) out.push_back({rest, kNoToken});
      return;
    }
    std::string_view left = rest.substr(0, match);
    if (vocab.strips_left(id)) {
      while (!left.empty() && is_ascii_space(left.back())) left.remove_suffix(1);
    }
    if (!left.empty()) out.push_back({left, kNoToken});
    out.push_back({{}, id});
    rest.remove_prefix(match + needle.size());
    if (vocab.strips_right(id)) {
      while (!rest.empty() && is_ascii_space(rest.front())) rest.remove_prefix(1);
    }
  }
}

}  // namespace

std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text, kNoToken});

  std::vector<Fragment> next;
  for (const TokenId id : vocab.special_tokens()) {
    const TokenType type = vocab.type(id);
    if (!parse_special && (type == TokenType::control || type == TokenType::unknown)) continue;
    const std::string_view needle = vocab.text(id);
    // Most special tokens occur nowhere; only rebuild the list when one does.
    const bool found = std::any_of(fragments.begin(), fragments.end(), [&](const Fragment& f) {
      return !f.is_token() && f.text.find(needle) != std::string_view::npos;
    });
    if (!found) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.is_token()) {
        next.push_back(f);
      } else {
        split_fragment(vocab, id, f.text, next);
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace edgelm::tokenizer
