// A synthetic XLM-RoBERTa vocabulary "of its kind", generated deterministically (no download):
// what llama.cpp's converter writes for XLM-R models (bge-m3, bge-reranker-v2-m3,
// multilingual-e5) as tokenizer.ggml.* metadata, with made-up pieces.
//
// Layout (n tokens, XLM-R's 250002 by default): <s>=0, <pad>=1, </s>=2 (control), <unk>=3
// (unknown), then n - 5 SentencePiece-like normal pieces, <mask> last (control). The pieces, in
// descending score order (ids sorted by score, as SentencePiece's): "▁" and common English
// words, single characters of many scripts (Latin, Greek, Cyrillic, Arabic, Hebrew, Devanagari,
// Thai, Khmer consonants, kana, emoji, ...), with and without the U+2581 word-start mark, Latin
// bigrams and trigrams, Cyrillic bigrams, then CJK and Hangul characters and random words of
// those scripts. Scores are log-probability-like (-ln(rank + 2), in steps of 1/4096).
// Some characters are left out on purpose (e.g. U+1F900.. emoji, ZWJ) so that real text meets
// the unknown token; Khmer vowel signs occur only inside random Khmer words, so that the unknown
// token's score competes with pieces there. The precompiled charsmap (charsmap.h) holds NFKC-style
// rules: full-width ASCII, compatibility spaces, tab/newline -> space, deleted control and
// invisible characters, ligatures, super/subscripts, fractions, Roman numerals, circled digits,
// unit squares, half-width katakana (with a two-character voiced form) and a few NFC
// compositions (base + combining mark). Flags as the converter sets them for XLM-R:
// add_space_prefix, remove_extra_whitespaces, add_bos, add_eos.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "format/gguf_value.h"

namespace edgelm::tokenizer {

inline constexpr int32_t kXlmrVocabSize = 250002;

// Sets the tokenizer.ggml.* keys of the synthetic XLM-R vocabulary of n_tokens tokens in `md`
// (model "t5", pre "default", tokens, scores, token_type, precompiled_charsmap, special ids,
// flags, token_type_count 1). n_tokens >= 256; a smaller vocabulary keeps a prefix of the
// piece order above (below about 90000 tokens no random words, then fewer CJK/Hangul ...).
Status write_xlmr_vocab(format::GgufMetadata& md, int32_t n_tokens = kXlmrVocabSize);

// The (source, replacement) rules of its charsmap, in UTF-8.
std::vector<std::pair<std::string, std::string>> xlmr_charsmap_rules();

}  // namespace edgelm::tokenizer
