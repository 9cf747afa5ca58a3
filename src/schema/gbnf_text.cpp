// GBNF quoting, code-point sets and JSON-string character representations (see gbnf_text.h).
#include "schema/gbnf_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/utf8_encode.h"

namespace edgelm::schema {

CharSet CharSet::range(uint32_t lo, uint32_t hi) {
  CharSet s;
  s.add(lo, hi);
  return s;
}

void CharSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  std::vector<std::pair<uint32_t, uint32_t>> out;
  out.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const auto& r : ranges_) {
    if (r.second + 1 < lo) {
      out.push_back(r);
    } else if (hi + 1 < r.first) {
      if (!placed) out.emplace_back(lo, hi), placed = true;
      out.push_back(r);
    } else {  // overlapping or adjacent: merge into the new range
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  if (!placed) out.emplace_back(lo, hi);
  ranges_ = std::move(out);
}

void CharSet::add(const CharSet& other) {
  for (const auto& r : other.ranges_) add(r.first, r.second);
}

CharSet CharSet::complement() const {
  CharSet out;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) out.ranges_.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.emplace_back(next, kMaxCodePoint);
  return out;
}

CharSet CharSet::intersect(const CharSet& other) const {
  CharSet out;
  for (const auto& a : ranges_) {
    for (const auto& b : other.ranges_) {
      const uint32_t lo = std::max(a.first, b.first);
      const uint32_t hi = std::min(a.second, b.second);
      if (lo <= hi) out.add(lo, hi);
    }
  }
  return out;
}

bool CharSet::contains(uint32_t c) const {
  for (const auto& r : ranges_) {
    if (c >= r.first && c <= r.second) return true;
  }
  return false;
}

bool next_utf8(std::string_view s, size_t& i, uint32_t& c) {
  if (i >= s.size()) return false;
  const auto b0 = static_cast<unsigned char>(s[i]);
  int n = 0;
  if (b0 < 0x80) {
    c = b0, n = 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    c = b0 & 0x1F, n = 2;
  } else if ((b0 & 0xF0) == 0xE0) {
    c = b0 & 0x0F, n = 3;
  } else if ((b0 & 0xF8) == 0xF0) {
    c = b0 & 0x07, n = 4;
  } else {
    return false;
  }
  if (i + n > s.size()) return false;
  for (int k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return false;
    c = (c << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[n] || c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF)) return false;
  i += n;
  return true;
}

namespace {

// One code point as it is written inside a GBNF literal or class; `special` lists the ASCII
// characters that need a backslash in that context.
void append_gbnf_char(std::string& out, uint32_t c, std::string_view special) {
  if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c == '\t') {
    out += "\\t";
  } else if (c < 0x20 || c == 0x7F) {
    out += fmt::format("\\x{:02X}", c);
  } else if (c < 0x80 && special.find(static_cast<char>(c)) != std::string_view::npos) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02X}", c);  // class metacharacters: hex, which every GBNF reader takes
    }
  } else if (c >= 0xD800 && c <= 0xDFFF) {
    out += fmt::format("\\u{:04X}", c);  // not encodable as UTF-8
  } else {
    utf8_encode(out, c);
  }
}

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  size_t i = 0;
  while (i < bytes.size()) {
    uint32_t c = 0;
    if (next_utf8(bytes, i, c)) {
      append_gbnf_char(out, c, "\"\\");
    } else {  // not UTF-8: keep the byte
      out += fmt::format("\\x{:02X}", static_cast<unsigned char>(bytes[i]));
      ++i;
    }
  }
  out += '"';
  return out;
}

std::string gbnf_class(const CharSet& set, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& r : set.ranges()) {
    append_gbnf_char(out, r.first, "]\\^-[");
    if (r.second != r.first) {
      if (r.second != r.first + 1) out += '-';
      append_gbnf_char(out, r.second, "]\\^-[");
    }
  }
  out += ']';
  return out;
}

const CharSet& json_raw_chars() {
  static const CharSet raw = [] {
    CharSet s = CharSet::range(0x20, kMaxCodePoint).minus(CharSet::range(0xD800, 0xDFFF));  // no surrogates
    return s.minus(CharSet::single('"')).minus(CharSet::single('\\'));
  }();
  return raw;
}

std::string json_escape_char(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  std::string out;
  if (c < 0x20) {
    out = fmt::format("\\u{:04x}", c);
  } else {
    utf8_encode(out, c);
  }
  return out;
}

std::string json_chars_gbnf(const CharSet& set) {
  std::vector<std::string> alts;
  const CharSet raw = set.intersect(json_raw_chars());
  if (!raw.empty()) {
    // The shorter of the class and the negated class of its complement among raw characters.
    const CharSet others = CharSet::all().minus(raw);
    alts.push_back(others.ranges().size() < raw.ranges().size() ? gbnf_class(others, true) : gbnf_class(raw));
  }
  CharSet specials = CharSet::range(0, 0x1F);
  specials.add('"', '"');
  specials.add('\\', '\\');
  const CharSet escaped = set.intersect(specials);
  const CharSet controls = CharSet::range(0, 0x1F);
  if (controls.minus(set).empty()) {
    // Every control character: one class per escape form rather than 32 literals.
    alts.push_back("\"\\\\\" [bfnrt]");
    const std::string u = "\"\\\\u00\" [01] [0-9a-f]";
    alts.push_back(u);
    for (const uint32_t c : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (set.contains(c)) alts.push_back(gbnf_literal(json_escape_char(c)));
    }
    // \b \f \n \r \t also have a \u00XX form above that is not canonical; both decode alike.
  } else {
    for (const auto& r : escaped.ranges()) {
      for (uint32_t c = r.first; c <= r.second; ++c) alts.push_back(gbnf_literal(json_escape_char(c)));
    }
  }
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i) out += " | ";
    out += alts[i];
  }
  out += ')';
  return out;
}

}  // namespace edgelm::schema
