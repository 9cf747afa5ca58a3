// UTF-8 encoding of one code point, the one encoder every layer uses (tokenizer, grammar
// schemas, the Jinja lexer). No validation: callers that must refuse surrogates or values above
// U+10FFFF check first (tokenizer::utf8_append asserts; Jinja strings, like Python's, may hold
// lone surrogates and get their 3-byte form).
#pragma once

#include <cstdint>
#include <string>

namespace edgelm {

inline void utf8_encode(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace edgelm
