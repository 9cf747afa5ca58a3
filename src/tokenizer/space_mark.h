// SentencePiece's escaped space, shared by the SentencePiece BPE (spm.h) and unigram (ugm.h)
// tokenizers: normalization writes U+2581 for a space, decoding turns it back.
#pragma once

#include <string>
#include <string_view>

namespace edgelm::tokenizer {

inline constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// `text` with every U+2581 replaced by a space (a normal piece's surface form).
inline std::string unescape_space_marks(std::string_view text) {
  std::string piece;
  piece.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
      piece += ' ';
      pos += kSpaceMark.size();
    } else {
      piece += text[pos++];
    }
  }
  return piece;
}

}  // namespace edgelm::tokenizer
