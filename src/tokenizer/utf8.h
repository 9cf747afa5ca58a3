// UTF-8 helpers for the tokenizers.
//
// Two different notions of "a character" live here on purpose:
//  - utf8_lead_length(): the lenient split that llama.cpp's tokenizers use (length from the lead
//    byte's high nibble only, continuation bytes count as 1-byte characters). Tokenizers must use
//    it so that malformed input is cut into the same symbols as the reference implementation.
//  - utf8_next(): a strict decoder (RFC 3629: no overlong forms, no surrogates, nothing above
//    U+10FFFF) that reports the maximal invalid subpart, as Unicode recommends for U+FFFD
//    substitution. Output text (StreamDecoder, sanitizing) uses this one.
// Nothing here ever reads past the end of the given view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace edgelm::tokenizer {

// U+FFFD REPLACEMENT CHARACTER, encoded.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// Length of the character starting with `lead`, from its high nibble (0x0-0xB -> 1, 0xC-0xD -> 2,
// 0xE -> 3, 0xF -> 4). Always 1..4; callers clamp to the bytes that remain.
int utf8_lead_length(uint8_t lead);

enum class Utf8Status {
  valid,       // a complete, well-formed character of `length` bytes
  incomplete,  // the view ends inside a character that could still become valid
  invalid,     // `length` bytes (>= 1) form a maximal invalid subpart
};

struct Utf8Step {
  Utf8Status status;
  size_t length;  // bytes consumed: always >= 1 when pos < s.size()
};

// Strictly decodes the character at s[pos] (pos < s.size()).
Utf8Step utf8_next(std::string_view s, size_t pos);

// True when `s` is entirely well-formed UTF-8.
bool utf8_is_valid(std::string_view s);

// Copy of `s` with every maximal invalid subpart, and a truncated final character, replaced
// by U+FFFD.
std::string utf8_sanitize(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (must be <= 0x10FFFF and not a surrogate).
void utf8_append(std::string& out, char32_t cp);

}  // namespace edgelm::tokenizer
