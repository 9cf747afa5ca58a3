// SentencePiece's precompiled character map (GGUF tokenizer.ggml.precompiled_charsmap): the
// normalization rules of a unigram ("t5") vocabulary, e.g. NFKC folding, as one binary blob.
//
// Blob layout (little endian): uint32 N, the size in bytes of a darts-clone double-array trie;
// N / 4 uint32 trie units; then the replacement strings, each NUL-terminated. The trie maps
// the UTF-8 bytes of a source sequence (one or more characters) to the offset of its
// replacement in the string section. A unit packs: bits 0-7 the label (the byte that leads to
// the node), bit 8 "a key ends here" (its value sits in the unit at the node's child base), bits
// 10-30 the offset to the child base (shifted left 8 more when bit 9 is set), and bit 31 marks
// a value unit, whose low 31 bits are the value. The children of a node at index i lie at
// (i ^ offset(i)) ^ byte.
//
// Charsmap::parse validates the sizes; the walk checks every index, so a corrupt trie can
// only make a match shorter, never read out of bounds. build_charsmap() writes this format from
// plain rules (synthetic vocabularies, tests).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace edgelm::tokenizer {

class Charsmap {
 public:
  Charsmap() = default;  // no rules: longest_match never matches

  // Takes the blob; an error says what is wrong with it.
  static Result<Charsmap> parse(std::string blob);

  bool empty() const { return units_.empty(); }

  struct Match {
    size_t length = 0;             // bytes of `text` matched; 0: no rule applies
    std::string_view replacement;  // what they become (may be empty: the bytes are deleted)
  };
  // The longest rule whose source is a prefix of `text` (the walk stops at a NUL byte).
  Match longest_match(std::string_view text) const;

 private:
  std::vector<uint32_t> units_;
  std::string strings_;  // the replacement strings, NUL-terminated
};

// A charsmap blob with the given (source, replacement) rules. Sources must be non-empty and
// contain no NUL byte; a source given twice keeps its last replacement. Equal replacements are
// stored once.
Result<std::string> build_charsmap(std::span<const std::pair<std::string, std::string>> rules);

}  // namespace edgelm::tokenizer
