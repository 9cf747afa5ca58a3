#include "tokenizer/utf8.h"

#include "core/check.h"
#include "core/utf8_encode.h"

namespace edgelm::tokenizer {

int utf8_lead_length(uint8_t lead) {
  static constexpr int kByNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByNibble[lead >> 4];
}

Utf8Step utf8_next(std::string_view s, size_t pos) {
  EDGELM_CHECK(pos < s.size(), "utf8_next past the end");
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {Utf8Status::valid, 1};

  // Per lead byte: total length and the allowed range of the second byte (Unicode table 3-7);
  // narrowing only the second byte is what rules out overlongs, surrogates and > U+10FFFF.
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 == 0xE0) {
    n = 3, lo = 0xA0;
  } else if (b0 == 0xED) {
    n = 3, hi = 0x9F;
  } else if (b0 >= 0xE1 && b0 <= 0xEF) {
    n = 3;
  } else if (b0 == 0xF0) {
    n = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    n = 4;
  } else if (b0 == 0xF4) {
    n = 4, hi = 0x8F;
  } else {
    return {Utf8Status::invalid, 1};  // 0x80-0xC1 and 0xF5-0xFF never start a character
  }

  for (size_t i = 1; i < n; ++i) {
    if (pos + i >= s.size()) return {Utf8Status::incomplete, i};
    const auto b = static_cast<uint8_t>(s[pos + i]);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {Utf8Status::invalid, i};
  }
  return {Utf8Status::valid, n};
}

bool utf8_is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Step step = utf8_next(s, pos);
    if (step.status != Utf8Status::valid) return false;
    pos += step.length;
  }
  return true;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Step step = utf8_next(s, pos);
    if (step.status == Utf8Status::valid) {
      out.append(s.substr(pos, step.length));
    } else {
      out.append(kUtf8Replacement);
    }
    pos += step.length;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  EDGELM_CHECK(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF),
               "not a Unicode scalar value: ", static_cast<uint32_t>(cp));
  utf8_encode(out, static_cast<uint32_t>(cp));
}

}  // namespace edgelm::tokenizer
