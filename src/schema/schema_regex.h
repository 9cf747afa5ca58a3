// `pattern` (a regular expression, Python/ECMA-style practical subset) as GBNF over the body of a
// JSON string.
//
// Semantics are JSON Schema's: the pattern is searched for, not anchored, so an unanchored side
// gets "any characters" (a leading ^ or trailing $ of a top-level alternative anchors it). The
// grammar matches the JSON-escaped text: each character the regex allows is written in its
// canonical JSON form (raw, or \" \\ \n ... \u00XX for the ones JSON escapes), and the
// "any characters" padding accepts every JSON string character. Supported: literals, escapes
// (\d \w \s \D \W \S \n \t \r \f \v \xHH \uHHHH and escaped punctuation), classes with ranges and
// negation, '.', groups (...) (?:...) (?P<name>...), '|', quantifiers * + ? {m} {m,} {m,n} {,n}.
// Unsupported constructs (backreferences, lookaround, lazy or possessive quantifiers, word
// boundaries, inline flags, anchors inside the pattern) are errors that name the construct.
//
// Invariant: everything the grammar accepts is matched by the regex (under Python's re.search,
// which the JSON Schema validators of the Python ecosystem use). \d and \w mean ASCII digits and
// word characters (a subset of Unicode's); a negated class holding \d or \w, and \D \W, are
// limited to ASCII so that they stay subsets too.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace edgelm::schema {

struct RegexGbnf {
  std::string body;                  // GBNF sequence for the characters between the quotes
  size_t min_length = 0;             // fewest characters (code points) a match can have
  std::optional<size_t> max_length;  // most, if bounded
};

// `any_char` is the GBNF of one arbitrary JSON string character, used for the unanchored sides.
// Errors read "<what>" without keyword or path (the caller adds those).
Result<RegexGbnf> regex_to_gbnf(std::string_view pattern, const std::string& any_char);

}  // namespace edgelm::schema
