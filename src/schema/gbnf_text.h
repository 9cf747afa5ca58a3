// GBNF text building blocks shared by the schema compilers: quoting literals and character
// classes in GBNF syntax, sets of code points, and the JSON-string representations of a set of
// decoded characters.
//
// Invariants: every function here returns a complete GBNF expression (a literal, a class or a
// parenthesized alternation) that can be placed anywhere in a sequence; non-ASCII code points are
// written as raw UTF-8 and control bytes as \xHH, so the output is plain UTF-8 text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edgelm::schema {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A set of Unicode code points as sorted, disjoint, non-adjacent closed ranges.
class CharSet {
 public:
  CharSet() = default;
  static CharSet range(uint32_t lo, uint32_t hi);
  static CharSet single(uint32_t c) { return range(c, c); }
  static CharSet all() { return range(0, kMaxCodePoint); }

  void add(uint32_t lo, uint32_t hi);
  void add(const CharSet& other);
  CharSet complement() const;
  CharSet intersect(const CharSet& other) const;
  CharSet minus(const CharSet& other) const { return intersect(other.complement()); }
  bool contains(uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};


// Decodes one UTF-8 code point at s[i] and advances i; returns false (leaving i) on invalid UTF-8.
bool next_utf8(std::string_view s, size_t& i, uint32_t& c);

// "..." : a GBNF literal matching exactly `bytes` (which should be UTF-8).
std::string gbnf_literal(std::string_view bytes);

// [...] or [^...]: a GBNF character class of `set` (negated: of its complement). `set` must not be
// empty.
std::string gbnf_class(const CharSet& set, bool negated = false);

// The canonical JSON-string-body text of the decoded character `c`: raw UTF-8 where JSON allows the
// character unescaped, else \" \\ \b \f \n \r \t or \u00XX.
std::string json_escape_char(uint32_t c);

// A GBNF expression matching the canonical JSON-string-body text (json_escape_char) of any one
// character of `set`; empty string if `set` is empty.
std::string json_chars_gbnf(const CharSet& set);

// Characters JSON writes raw inside a string: every scalar value but '"', '\\' and U+0000..U+001F.
const CharSet& json_raw_chars();

}  // namespace edgelm::schema
