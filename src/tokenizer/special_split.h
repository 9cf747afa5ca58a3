// Splitting input text around special tokens, before any tokenizer model sees it.
//
// Follows llama.cpp's tokenizer_st_partition: the vocabulary's special tokens are tried one at a
// time, longest text first; each one splits every remaining text fragment at all of its
// (non-overlapping, left-to-right) occurrences. With parse_special = false only user_defined
// tokens are split out (control and unknown texts stay plain text); with true all three types
// are. A token flagged strips_left/strips_right also swallows the ASCII whitespace next to it.
// Cost: O(n_special_tokens * text length) string searches, as in llama.cpp.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace edgelm::tokenizer {

// A piece of the input: either raw text (token == kNoToken; never empty) or a special token.
// Text fragments point into the string given to split_special.
struct Fragment {
  std::string_view text;
  TokenId token = kNoToken;

  bool is_token() const { return token != kNoToken; }
};

// Fragments of `text` in order; empty for empty input.
std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special);

}  // namespace edgelm::tokenizer
