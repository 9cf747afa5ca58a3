#include "tokenizer/byte_unicode.h"

#include <array>

#include "tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

// One past the largest code point of the alphabet (U+0100 + 68 remapped bytes).
constexpr char32_t kAlphabetEnd = 0x144;

constexpr bool stands_for_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<std::array<char, 2>, 256> utf8{};  // the encoding, padded
  std::array<uint8_t, 256> utf8_len{};
  std::array<int16_t, kAlphabetEnd> to_byte{};  // -1 outside the alphabet
};

constexpr Tables make_tables() {
  Tables t;
  for (auto& b : t.to_byte) b = -1;
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const char32_t cp = stands_for_itself(b) ? b : next++;
    t.to_cp[b] = cp;
    t.to_byte[cp] = static_cast<int16_t>(b);
    if (cp < 0x80) {
      t.utf8[b] = {static_cast<char>(cp), 0};
      t.utf8_len[b] = 1;
    } else {
      t.utf8[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      t.utf8_len[b] = 2;
    }
  }
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables.to_cp[' '] == 0x120 && kTables.to_cp['\n'] == 0x10A && kTables.to_cp[0xAD] == 0x143);

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return kTables.to_cp[b]; }

std::string_view byte_to_unicode_utf8(uint8_t b) { return {kTables.utf8[b].data(), kTables.utf8_len[b]}; }

std::optional<uint8_t> unicode_to_byte(char32_t cp) {
  if (cp >= kAlphabetEnd || kTables.to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(kTables.to_byte[cp]);
}

void byte_encode_append(std::string& out, std::string_view bytes) {
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    out.append(kTables.utf8[b].data(), kTables.utf8_len[b]);
  }
}

void byte_decode_append(std::string& out, std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const auto lead = static_cast<uint8_t>(text[pos]);
    // ASCII in the alphabet stands for itself; ASCII outside it (space, controls) is copied.
    // Either way the byte is kept.
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++pos;
      continue;
    }
    // Every non-ASCII character of the alphabet is a well-formed 2-byte sequence.
    const Utf8Step step = utf8_next(text, pos);
    if (step.status == Utf8Status::valid && step.length == 2) {
      const char32_t cp = (static_cast<char32_t>(lead & 0x1F) << 6) | (static_cast<uint8_t>(text[pos + 1]) & 0x3F);
      if (const auto b = unicode_to_byte(cp)) {
        out += static_cast<char>(*b);
        pos += 2;
        continue;
      }
    }
    out.append(text.substr(pos, step.length));
    pos += step.length;
  }
}

}  // namespace edgelm::tokenizer
