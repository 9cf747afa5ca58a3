// GBNF text -> syntax tree. Recursive descent over the bytes of the text with line:col tracking.
//
// Syntax: rules `name ::= alternatives`; a rule ends where the next `name ::=` starts (so a
// rule may continue on following lines); inside ( ) newlines are free. Elements: "literal",
// [class], [^class], `.`, rule names, ( group ); postfix * + ? {m} {m,} {m,n} {,n}; `#` comments
// run to the end of the line. The text must be UTF-8; literals and classes are code points.
#include <algorithm>

#include "grammar/gbnf_ast.h"

namespace edgelm::grammar::detail {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  Result<std::vector<RuleDef>> parse() {
    std::vector<RuleDef> rules;
    while (true) {
      skip_space(true);
      if (eof()) break;
      RuleDef rule;
      rule.line = line_;
      rule.col = col_;
      if (!is_name_char(peek())) return error("syntax error: expected a rule name, got {}", describe());
      rule.name = parse_name();
      skip_space(false);
      if (t_.substr(pos_, 3) != "::=") return error("syntax error: expected '::=' after rule name '{}'", rule.name);
      advance(3);
      EDGELM_TRY(rule.body, parse_alternatives(false));
      if (!eof() && peek() == ')') return error("syntax error: unmatched ')'");
      rules.push_back(std::move(rule));
    }
    return rules;
  }

 private:
  template <typename... Args>
  Error error(fmt::format_string<Args...> f, Args&&... args) const {
    return make_error("{}:{}: {}", line_, col_, fmt::format(f, std::forward<Args>(args)...));
  }
  bool eof() const { return pos_ >= t_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < t_.size() ? t_[pos_ + k] : '\0'; }
  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < t_.size(); ++i, ++pos_) {
      if (t_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else if ((static_cast<uint8_t>(t_[pos_]) & 0xC0) != 0x80) {
        ++col_;  // columns count code points
      }
    }
  }
  std::string describe() const {
    if (eof()) return "end of input";
    if (peek() == '\n') return "end of line";
    return fmt::format("'{}'", peek());
  }

  // Spaces, tabs, comments; newlines too when newline_ok.
  void skip_space(bool newline_ok) {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r') {
        advance();
      } else if (c == '#') {
        while (!eof() && peek() != '\n') advance();
      } else if (c == '\n' && newline_ok) {
        advance();
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!eof() && is_name_char(peek())) advance();
    return std::string(t_.substr(start, pos_ - start));
  }

  // At a `name ::=` (the start of the next rule)?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < t_.size() && is_name_char(t_[p])) ++p;
    if (p == pos_) return false;
    while (p < t_.size() && (t_[p] == ' ' || t_[p] == '\t')) ++p;
    return t_.substr(p, 3) == "::=";
  }

  Result<Expr> parse_alternatives(bool nested) {
    Expr alt;
    alt.kind = Expr::Kind::kAlt;
    alt.line = line_;
    alt.col = col_;
    while (true) {
      EDGELM_TRY(Expr seq, parse_sequence(nested));
      alt.children.push_back(std::move(seq));
      if (!eof() && peek() == '|') {
        advance();
        continue;
      }
      return alt;
    }
  }

  Result<Expr> parse_sequence(bool nested) {
    Expr seq;
    seq.kind = Expr::Kind::kSeq;
    seq.line = line_;
    seq.col = col_;
    while (true) {
      skip_space(nested);
      if (!eof() && peek() == '\n') {
        // Top level: the rule goes on unless the next line starts a new rule.
        skip_space(true);
        if (eof() || at_rule_start()) return seq;
        continue;
      }
      if (eof() || peek() == '|' || peek() == ')') return seq;
      EDGELM_TRY(Expr e, parse_element());
      EDGELM_TRY(e, parse_postfix(std::move(e)));
      seq.children.push_back(std::move(e));
    }
  }

  Result<Expr> parse_element() {
    Expr e;
    e.line = line_;
    e.col = col_;
    const char c = peek();
    if (c == '"') {
      advance();
      e.kind = Expr::Kind::kSeq;
      while (true) {
        if (eof() || peek() == '\n') return error("syntax error: unterminated string literal");
        if (peek() == '"') break;
        Expr ch;
        ch.kind = Expr::Kind::kChars;
        ch.line = line_;
        ch.col = col_;
        EDGELM_TRY(uint32_t cp, parse_char());
        ch.ranges = {{cp, cp}};
        e.children.push_back(std::move(ch));
      }
      advance();
      return e;
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      advance();
      e.kind = Expr::Kind::kChars;
      e.ranges = {{0, kMaxCodePoint}};
      return e;
    }
    if (c == '(') {
      advance();
      EDGELM_TRY(e, parse_alternatives(true));
      skip_space(true);
      if (eof() || peek() != ')') return error("syntax error: expected ')', got {}", describe());
      advance();
      return e;
    }
    if (is_name_char(c)) {
      e.kind = Expr::Kind::kRef;
      e.name = parse_name();
      return e;
    }
    return error("syntax error: unexpected {}", describe());
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = hex_value(peek());
      if (h < 0) return error("bad escape: expected {} hex digits", digits);
      v = v * 16 + static_cast<uint32_t>(h);
      advance();
    }
    return v;
  }

  // One code point of a literal or class: an escape or a UTF-8 character.
  Result<uint32_t> parse_char() {
    const uint8_t b = static_cast<uint8_t>(peek());
    if (b == '\\') {
      const int line = line_, col = col_;
      advance();
      const char c = peek();
      uint32_t cp = 0;
      switch (c) {
        case 'n': advance(); return 0x0Au;
        case 'r': advance(); return 0x0Du;
        case 't': advance(); return 0x09u;
        case '\\':
        case '"':
        case '[':
        case ']': advance(); return static_cast<uint32_t>(c);
        case 'x':
        case 'u':
        case 'U': {
          advance();
          EDGELM_TRY(cp, parse_hex(c == 'x' ? 2 : c == 'u' ? 4 : 8));
          break;
        }
        default:
          return make_error("{}:{}: bad escape '\\{}'", line, col,
                            eof() || c == '\n' ? std::string() : std::string(1, c));
      }
      if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
        return make_error("{}:{}: bad escape: U+{:X} is not a Unicode scalar value", line, col, cp);
      return cp;
    }
    if (b < 0x80) {
      advance();
      return static_cast<uint32_t>(b);
    }
    const int len = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xC2 && b < 0xE0 ? 2 : 0;
    if (len == 0 || pos_ + len > t_.size()) return error("invalid UTF-8 in grammar text");
    uint32_t cp = b & (0x7Fu >> len);
    for (int i = 1; i < len; ++i) {
      const uint8_t c = static_cast<uint8_t>(t_[pos_ + i]);
      if ((c & 0xC0) != 0x80) return error("invalid UTF-8 in grammar text");
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
      return error("invalid UTF-8 in grammar text");
    advance(static_cast<size_t>(len));
    return cp;
  }

  Result<Expr> parse_class() {
    Expr e;
    e.kind = Expr::Kind::kChars;
    e.line = line_;
    e.col = col_;
    advance();  // [
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      advance();
    }
    std::vector<std::pair<uint32_t, uint32_t>> r;
    while (true) {
      if (eof() || peek() == '\n') return error("syntax error: unterminated character class");
      if (peek() == ']') break;
      EDGELM_TRY(uint32_t lo, parse_char());
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        advance();
        EDGELM_TRY(hi, parse_char());
        if (hi < lo) return error("bad range in character class: U+{:X} > U+{:X}", lo, hi);
      }
      r.emplace_back(lo, hi);
    }
    advance();  // ]
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& x : r) {
      if (!merged.empty() && x.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, x.second);
      } else {
        merged.push_back(x);
      }
    }
    if (negated) {
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (const auto& x : merged) {
        if (x.first > next) inv.emplace_back(next, x.first - 1);
        next = x.second + 1;
      }
      if (next <= kMaxCodePoint) inv.emplace_back(next, kMaxCodePoint);
      merged = std::move(inv);
    }
    if (merged.empty()) return make_error("{}:{}: empty class", e.line, e.col);
    e.ranges = std::move(merged);
    return e;
  }

  Result<uint32_t> parse_bound() {
    uint64_t v = 0;
    const int line = line_, col = col_;
    if (!(peek() >= '0' && peek() <= '9')) return error("syntax error: expected a number in {{}}, got {}", describe());
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > kMaxRepeat) return make_error("{}:{}: repetition bound too large (more than {})", line, col, kMaxRepeat);
      advance();
    }
    return static_cast<uint32_t>(v);
  }

  Result<Expr> parse_postfix(Expr e) {
    while (!eof()) {
      const char c = peek();
      uint32_t lo = 0, hi = 0;
      const int line = line_, col = col_;
      if (c == '*') {
        lo = 0, hi = kRepeatInf;
        advance();
      } else if (c == '+') {
        lo = 1, hi = kRepeatInf;
        advance();
      } else if (c == '?') {
        lo = 0, hi = 1;
        advance();
      } else if (c == '{') {
        advance();
        skip_space(false);
        if (peek() != ',') {
          EDGELM_TRY(lo, parse_bound());
        }
        skip_space(false);
        if (peek() == ',') {
          advance();
          skip_space(false);
          if (peek() == '}') {
            hi = kRepeatInf;
          } else {
            EDGELM_TRY(hi, parse_bound());
          }
        } else {
          hi = lo;
        }
        skip_space(false);
        if (peek() != '}') return error("syntax error: expected '}}', got {}", describe());
        advance();
        if (hi < lo) return make_error("{}:{}: bad repetition: {{{},{}}} has max < min", line, col, lo, hi);
      } else {
        break;
      }
      Expr rep;
      rep.kind = Expr::Kind::kRepeat;
      rep.line = line;
      rep.col = col;
      rep.min = lo;
      rep.max = hi;
      rep.children.push_back(std::move(e));
      e = std::move(rep);
    }
    return e;
  }

  std::string_view t_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace

Result<std::vector<RuleDef>> parse_gbnf_ast(std::string_view text) { return Parser(text).parse(); }

}  // namespace edgelm::grammar::detail
