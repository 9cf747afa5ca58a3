// BERT text normalization and pre-tokenization, as the reference BERT tokenizer does it before
// WordPiece (the "BertNormalizer" with clean_text, handle_chinese_chars, strip_accents and
// lowercase all on, followed by the "BertPreTokenizer").
//
// Normalization, per code point, in this order:
//  1. clean: NUL, U+FFFD and "other" characters (general category Cc, Cf, Cn, Co, Cs; but
//     \t \n \r count as whitespace) are dropped; whitespace (White_Space property) becomes ' '.
//     Invalid UTF-8 is first replaced by U+FFFD (maximal subparts, utf8.h), so it is dropped too.
//  2. CJK ideographs (the BERT ranges, see is_cjk in the .cpp) get a space on either side.
//  3. NFD (canonical decomposition and canonical ordering of combining marks), then every
//     nonspacing mark (Mn) is dropped: "é" -> "e".
//  4. Simple lower-case mapping (the only full mapping that differs, U+0130, is decomposed to
//     "I" + U+0307 by step 3 before it could apply).
// Pre-tokenization splits the normalized text on whitespace (dropped) and around punctuation:
// every character of a Unicode P* category, and the ASCII symbols !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~,
// is a word of its own.
//
// Invariants: the output is valid UTF-8; bert_pretokenize's words are non-empty, contain no
// whitespace and are separated by exactly one ' ' (no leading or trailing space). Both functions
// are a single pass, O(n) in the input length, allocation apart from the result amortized O(1).
// ASCII takes a fast path that needs no Unicode tables. Unicode data: utf8proc (15.0 for 2.8).
#pragma once

#include <string>
#include <string_view>

namespace edgelm::tokenizer {

// Steps 1-4: the normalized text, whitespace kept (as ' ').
std::string bert_normalize(std::string_view text);

// Steps 1-4 and the pre-tokenizer: the words of `text`, joined by single spaces.
std::string bert_pretokenize(std::string_view text);

// Whether `cp` is a word of its own for the pre-tokenizer (P* or an ASCII symbol).
bool bert_is_punctuation(char32_t cp);

}  // namespace edgelm::tokenizer
