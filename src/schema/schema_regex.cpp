// Regular expression (JSON Schema `pattern`) to GBNF over JSON string bodies (see schema_regex.h).
#include "schema/schema_regex.h"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "schema/gbnf_text.h"

namespace edgelm::schema {

namespace {

constexpr size_t kInf = static_cast<size_t>(-1);

struct Node {
  enum Kind { kChars, kSeq, kAlt, kRepeat } kind = kSeq;
  CharSet chars;                            // kChars
  std::vector<std::unique_ptr<Node>> kids;  // kSeq, kAlt; kRepeat: one
  size_t min = 0, max = 0;                  // kRepeat; max kInf = unbounded
};

using NodePtr = std::unique_ptr<Node>;

NodePtr make_node(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}

const CharSet& ascii() {
  static const CharSet s = CharSet::range(0, 0x7F);
  return s;
}
CharSet digits() { return CharSet::range('0', '9'); }
CharSet word() {
  CharSet s = CharSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
CharSet spaces() {  // what Python's \s matches in a str pattern (str.isspace)
  CharSet s = CharSet::range('\t', '\r');
  s.add(0x1C, 0x20);
  s.add(0x85, 0x85);
  s.add(0xA0, 0xA0);
  s.add(0x1680, 0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F, 0x202F);
  s.add(0x205F, 0x205F);
  s.add(0x3000, 0x3000);
  return s;
}

class Parser {
 public:
  explicit Parser(std::string_view p) {
    size_t i = 0;
    while (i < p.size()) {
      uint32_t c = 0;
      if (!next_utf8(p, i, c)) {
        bad_utf8_ = true;
        return;
      }
      cps_.push_back(c);
    }
  }

  // The top level: alternatives, each with its own anchors.
  Result<RegexGbnf> run(const std::string& any_char) {
    if (bad_utf8_) return make_error("not valid UTF-8");
    std::vector<std::string> alts;
    RegexGbnf out;
    out.min_length = kInf;
    out.max_length = 0;
    while (true) {
      bool start_anchor = false, end_anchor = false;
      if (peek() == '^') ++pos_, start_anchor = true;
      EDGELM_TRY(NodePtr seq, parse_seq(true));
      if (peek() == '$') ++pos_, end_anchor = true;
      if (pos_ < cps_.size() && peek() != '|') {
        if (peek() == ')') return make_error("unbalanced ')'");
        return make_error("'{}' is only supported at the end of the pattern", "$");
      }
      std::string body = emit(*seq);
      size_t lo = 0, hi = 0;
      lengths(*seq, lo, hi);
      if (!start_anchor) body = any_char + "* " + body, hi = kInf;
      if (!end_anchor) body = body + " " + any_char + "*", hi = kInf;
      alts.push_back(body);
      out.min_length = std::min(out.min_length, lo);
      if (out.max_length && (hi == kInf || hi > *out.max_length)) out.max_length = hi;
      if (out.max_length && *out.max_length == kInf) out.max_length.reset();
      if (pos_ >= cps_.size()) break;
      ++pos_;  // '|'
    }
    // An empty alternative (an anchored empty pattern) becomes an optional group.
    std::vector<std::string> nonempty;
    for (auto& a : alts) {
      if (!a.empty()) nonempty.push_back(std::move(a));
    }
    if (nonempty.size() == 1 && nonempty.size() == alts.size()) {
      out.body = nonempty[0];
    } else if (!nonempty.empty()) {
      out.body = "(";
      for (size_t i = 0; i < nonempty.size(); ++i) out.body += (i ? " | " : "") + nonempty[i];
      out.body += nonempty.size() == alts.size() ? ")" : ")?";
    }
    return out;
  }

 private:
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0; }
  bool at_end() const { return pos_ >= cps_.size(); }

  Result<NodePtr> parse_alt() {
    auto alt = make_node(Node::kAlt);
    while (true) {
      EDGELM_TRY(NodePtr seq, parse_seq(false));
      alt->kids.push_back(std::move(seq));
      if (at_end() || peek() != '|') break;
      ++pos_;
    }
    if (alt->kids.size() == 1) return std::move(alt->kids[0]);
    return alt;
  }

  // A sequence up to '|', ')' or the end (top level: also up to a final '$').
  Result<NodePtr> parse_seq(bool top) {
    auto seq = make_node(Node::kSeq);
    while (!at_end()) {
      const uint32_t c = peek();
      if (c == '|' || c == ')') break;
      if (c == '$') {
        if (top && pos_ + 1 == cps_.size()) break;
        if (top && peek(1) == '|') break;
        return make_error("'$' is only supported at the end of the pattern");
      }
      if (c == '^') return make_error("'^' is only supported at the start of the pattern");
      EDGELM_TRY(NodePtr atom, parse_atom());
      EDGELM_TRY_STATUS(parse_quantifier(atom));
      seq->kids.push_back(std::move(atom));
    }
    return seq;
  }

  Result<NodePtr> parse_atom() {
    const uint32_t c = cps_[pos_++];
    if (c == '(') {
      if (peek() == '?') {
        const uint32_t k = peek(1);
        if (k == ':') {
          pos_ += 2;
        } else if (k == 'P' && peek(2) == '<') {
          pos_ += 3;
          while (!at_end() && peek() != '>') ++pos_;
          if (at_end()) return make_error("unterminated group name");
          ++pos_;
        } else if (k == '=' || k == '!') {
          return make_error("lookahead '(?{}' is not supported", static_cast<char>(k));
        } else if (k == '<' && (peek(2) == '=' || peek(2) == '!')) {
          return make_error("lookbehind '(?<{}' is not supported", static_cast<char>(peek(2)));
        } else if (k == '<') {
          return make_error("named group '(?<' is not supported (use '(?P<')");
        } else if (k == 'P' && peek(2) == '=') {
          return make_error("backreference '(?P=' is not supported");
        } else {
          return make_error("group modifier '(?{}' (inline flags, conditionals, comments) is not supported",
                            k < 0x80 ? std::string(1, static_cast<char>(k)) : std::string("..."));
        }
      }
      EDGELM_TRY(NodePtr inner, parse_alt());
      if (at_end() || peek() != ')') return make_error("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') return parse_class();
    if (c == '.') return chars(CharSet::all().minus(CharSet::single('\n')));
    if (c == '*' || c == '+' || c == '?') return make_error("nothing to repeat before '{}'", static_cast<char>(c));
    if (c == '{' && quantifier_ahead(pos_ - 1)) return make_error("nothing to repeat before '{{'");
    if (c == '\\') {
      CharSet set;
      bool inexact = false;
      EDGELM_TRY_STATUS(parse_escape(false, set, inexact));
      return chars(std::move(set));
    }
    return chars(CharSet::single(c));
  }

  static NodePtr chars(CharSet set) {
    auto n = make_node(Node::kChars);
    n->chars = std::move(set);
    return n;
  }

  // After a backslash (consumed). Sets `set`; `inexact` if it is a subset of what Python matches.
  Status parse_escape(bool in_class, CharSet& set, bool& inexact) {
    if (at_end()) return make_error("trailing backslash");
    const uint32_t c = cps_[pos_++];
    switch (c) {
      case 'd': set = digits(), inexact = true; return {};
      case 'D': set = ascii().minus(digits()); return {};
      case 'w': set = word(), inexact = true; return {};
      case 'W': set = ascii().minus(word()); return {};
      case 's': set = spaces(); return {};
      case 'S': set = spaces().complement(); return {};
      case 'n': set = CharSet::single('\n'); return {};
      case 't': set = CharSet::single('\t'); return {};
      case 'r': set = CharSet::single('\r'); return {};
      case 'f': set = CharSet::single('\f'); return {};
      case 'v': set = CharSet::single('\v'); return {};
      case 'a': set = CharSet::single(0x07); return {};
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (size_t k = 0; k < n; ++k) {
          const uint32_t h = peek();
          int d = -1;
          if (h >= '0' && h <= '9') d = static_cast<int>(h - '0');
          if (h >= 'a' && h <= 'f') d = static_cast<int>(h - 'a' + 10);
          if (h >= 'A' && h <= 'F') d = static_cast<int>(h - 'A' + 10);
          if (d < 0) return make_error("'\\{}' needs {} hex digits", static_cast<char>(c), n);
          v = v * 16 + static_cast<uint32_t>(d);
          ++pos_;
        }
        if (v > kMaxCodePoint) return make_error("'\\{}' escape above U+10FFFF", static_cast<char>(c));
        set = CharSet::single(v);
        return {};
      }
      case 'b':
        if (in_class) {
          set = CharSet::single('\b');
          return {};
        }
        return make_error("word boundary '\\b' is not supported");
      case 'B': return make_error("'\\B' (not a word boundary) is not supported");
      case 'A':
      case 'Z':
      case 'z':
      case 'G': return make_error("anchor '\\{}' is not supported", static_cast<char>(c));
      case '0': return make_error("octal escape '\\0' is not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') return make_error("backreference '\\{}' is not supported", static_cast<char>(c));
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      return make_error("escape '\\{}' is not supported", static_cast<char>(c));
    }
    set = CharSet::single(c);  // escaped punctuation (or any other character) stands for itself
    return {};
  }

  // After '['.
  Result<NodePtr> parse_class() {
    bool negated = false;
    if (peek() == '^') ++pos_, negated = true;
    CharSet set;
    bool inexact = false;
    bool first = true;
    while (true) {
      if (at_end()) return make_error("missing ']'");
      uint32_t c = cps_[pos_];
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      ++pos_;
      CharSet item;
      bool item_inexact = false;
      bool single = true;
      uint32_t lo = c;
      if (c == '\\') {
        EDGELM_TRY_STATUS(parse_escape(true, item, item_inexact));
        single = item.ranges().size() == 1 && item.ranges()[0].first == item.ranges()[0].second;
        lo = single ? item.ranges()[0].first : 0;
      } else if (c == '[' && (peek() == ':' || peek() == '=' || peek() == '.')) {
        return make_error("POSIX class '[{}' is not supported", static_cast<char>(peek()));
      } else {
        item = CharSet::single(c);
      }
      // A range lo-hi: '-' followed by something other than the closing ']'.
      if (single && peek() == '-' && pos_ + 1 < cps_.size() && peek(1) != ']') {
        ++pos_;
        uint32_t hi = cps_[pos_++];
        if (hi == '\\') {
          CharSet hs;
          bool hi_inexact = false;
          EDGELM_TRY_STATUS(parse_escape(true, hs, hi_inexact));
          if (hs.ranges().size() != 1 || hs.ranges()[0].first != hs.ranges()[0].second) {
            return make_error("bad character range in a class");
          }
          hi = hs.ranges()[0].first;
        }
        if (hi < lo) return make_error("bad character range in a class");
        item = CharSet::range(lo, hi);
      }
      set.add(item);
      inexact = inexact || item_inexact;
    }
    if (negated) {
      set = set.complement();
      if (inexact) set = set.intersect(ascii());
    }
    if (set.empty()) return make_error("a character class that matches nothing");
    return chars(std::move(set));
  }

  // Whether cps_[at] == '{' starts a valid {m}, {m,}, {m,n} or {,n}.
  bool quantifier_ahead(size_t at) const {
    size_t i = at + 1;
    size_t digits_before = 0, digits_after = 0;
    while (i < cps_.size() && cps_[i] >= '0' && cps_[i] <= '9') ++i, ++digits_before;
    if (i < cps_.size() && cps_[i] == ',') {
      ++i;
      while (i < cps_.size() && cps_[i] >= '0' && cps_[i] <= '9') ++i, ++digits_after;
    } else if (digits_before == 0) {
      return false;
    }
    return i < cps_.size() && cps_[i] == '}';
  }

  Status parse_quantifier(NodePtr& atom) {
    while (!at_end()) {
      const uint32_t c = peek();
      size_t lo = 0, hi = kInf;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_, lo = 1;
      } else if (c == '?') {
        ++pos_, hi = 1;
      } else if (c == '{' && quantifier_ahead(pos_)) {
        ++pos_;
        auto number = [this]() {
          size_t v = 0;
          bool any = false;
          while (!at_end() && peek() >= '0' && peek() <= '9') {
            v = std::min<size_t>(v * 10 + (peek() - '0'), 100000);
            ++pos_, any = true;
          }
          return any ? std::optional<size_t>(v) : std::nullopt;
        };
        const auto m = number();
        lo = m.value_or(0);
        if (peek() == ',') {
          ++pos_;
          const auto n = number();
          hi = n.value_or(kInf);
        } else {
          hi = lo;
        }
        ++pos_;  // '}'
        if (hi != kInf && hi < lo) return make_error("quantifier {{{},{}}} has max below min", lo, hi);
        if (lo > 10000 || (hi != kInf && hi > 10000)) return make_error("quantifier bound above 10000");
      } else {
        return {};
      }
      if (!at_end() && peek() == '?') return make_error("lazy quantifier '?' is not supported");
      if (!at_end() && peek() == '+') return make_error("possessive quantifier '+' is not supported");
      if (atom->kind == Node::kRepeat) return make_error("multiple repeat (a quantifier after a quantifier)");
      auto rep = make_node(Node::kRepeat);
      rep->min = lo, rep->max = hi;
      rep->kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return {};
  }

  // GBNF of a node; "" for the empty sequence.
  static std::string emit(const Node& n) {
    switch (n.kind) {
      case Node::kChars: {
        const auto& r = n.chars.ranges();
        if (r.size() == 1 && r[0].first == r[0].second) return gbnf_literal(json_escape_char(r[0].first));
        return json_chars_gbnf(n.chars);
      }
      case Node::kSeq: {
        std::string out, literal;
        auto flush = [&]() {
          if (literal.empty()) return;
          if (!out.empty()) out += ' ';
          out += gbnf_literal(literal);
          literal.clear();
        };
        for (const auto& k : n.kids) {
          const auto& r = k->chars.ranges();
          if (k->kind == Node::kChars && r.size() == 1 && r[0].first == r[0].second) {
            literal += json_escape_char(r[0].first);
            continue;
          }
          flush();
          const std::string s = emit(*k);
          if (!s.empty()) out += (out.empty() ? "" : " ") + s;
        }
        flush();
        return out;
      }
      case Node::kAlt: {
        std::vector<std::string> alts;
        bool has_empty = false;
        for (const auto& k : n.kids) {
          std::string s = emit(*k);
          if (s.empty()) {
            has_empty = true;
          } else {
            alts.push_back(std::move(s));
          }
        }
        if (alts.empty()) return "";
        std::string out = "(";
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        out += ")";
        return has_empty ? out + "?" : out;
      }
      case Node::kRepeat: {
        const std::string inner = emit(*n.kids[0]);
        if (inner.empty() || n.max == 0) return "";
        const std::string g = "(" + inner + ")";
        if (n.min == 0 && n.max == kInf) return g + "*";
        if (n.min == 1 && n.max == kInf) return g + "+";
        if (n.min == 0 && n.max == 1) return g + "?";
        if (n.max == kInf) return fmt::format("{}{{{},}}", g, n.min);
        if (n.min == n.max) return n.min == 1 ? g : fmt::format("{}{{{}}}", g, n.min);
        return fmt::format("{}{{{},{}}}", g, n.min, n.max);
      }
    }
    return "";
  }

  // Fewest and most characters a node matches (kInf: unbounded).
  static void lengths(const Node& n, size_t& lo, size_t& hi) {
    auto mul = [](size_t a, size_t b) { return a == 0 || b == 0 ? 0 : (a == kInf || b == kInf ? kInf : a * b); };
    auto add = [](size_t a, size_t b) { return a == kInf || b == kInf ? kInf : a + b; };
    switch (n.kind) {
      case Node::kChars: lo = hi = 1; return;
      case Node::kSeq:
        lo = hi = 0;
        for (const auto& k : n.kids) {
          size_t a = 0, b = 0;
          lengths(*k, a, b);
          lo = add(lo, a), hi = add(hi, b);
        }
        return;
      case Node::kAlt:
        lo = kInf, hi = 0;
        for (const auto& k : n.kids) {
          size_t a = 0, b = 0;
          lengths(*k, a, b);
          lo = std::min(lo, a), hi = std::max(hi, b);
        }
        return;
      case Node::kRepeat: {
        size_t a = 0, b = 0;
        lengths(*n.kids[0], a, b);
        lo = mul(a, n.min), hi = mul(b, n.max);
        return;
      }
    }
  }

  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  bool bad_utf8_ = false;
};

}  // namespace

Result<RegexGbnf> regex_to_gbnf(std::string_view pattern, const std::string& any_char) {
  Parser p(pattern);
  return p.run(any_char);
}

}  // namespace edgelm::schema
