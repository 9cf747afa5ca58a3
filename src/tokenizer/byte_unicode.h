// GPT-2's byte-level alphabet: the bijection between the 256 byte values and 256 printable
// Unicode code points that byte-level BPE vocabularies spell their token texts in.
//
// Bytes that are printable Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
// themselves; the other 68 bytes (controls, space, DEL, NBSP, soft hyphen) map, in increasing
// byte order, to U+0100..U+0143. So space is U+0120 'Ġ' and '\n' is U+010A 'Ċ'.
// Invariants: every code point of the alphabet is below U+0144 and encodes to 1 or 2 UTF-8
// bytes; the two directions are inverse to each other (byte_unicode_test checks all 256).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace edgelm::tokenizer {

// The code point that byte `b` is written as.
char32_t byte_to_unicode(uint8_t b);

// UTF-8 encoding of byte_to_unicode(b); the view is into a static table (always valid).
std::string_view byte_to_unicode_utf8(uint8_t b);

// The byte a code point of the alphabet stands for; nullopt for any other code point.
std::optional<uint8_t> unicode_to_byte(char32_t cp);

// Appends `bytes` written in the alphabet (each byte becomes one 1- or 2-byte character).
void byte_encode_append(std::string& out, std::string_view bytes);

// Appends the bytes that a text written in the alphabet stands for. Characters outside the
// alphabet (added tokens spelled in plain text, stray malformed UTF-8) are copied through as
// they are, so that nothing is lost; llama.cpp prints "[UNK_BYTE_...]" for them instead.
void byte_decode_append(std::string& out, std::string_view text);

}  // namespace edgelm::tokenizer
