// Jinja lexer (see lexer.h).
#include "jinja/lexer.h"

#include <algorithm>
#include <cstring>

#include "core/utf8_encode.h"

namespace edgelm::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t tag = find_tag(pos);
      std::string text = src_.substr(pos, tag - pos);
      if (tag == src_.size()) {
        emit_data(text, pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%', '#'
      const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        text.erase(std::find_if(text.rbegin(), text.rend(), [](char c) { return !is_space(c); }).base(), text.end());
      } else if (sign != '+' && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(), is_space))
          text.resize(l_pos);
      }
      emit_data(text, pos);
      size_t p = tag + 2 + (sign == '-' || sign == '+');
      if (kind == '#') {
        size_t end = src_.find("#}", p);
        if (end == std::string::npos) return err(tag, "missing end of comment tag");
        const bool strip = end > p && src_[end - 1] == '-';
        const bool keep = end > p && src_[end - 1] == '+';
        p = after_end(end + 2, strip, keep);
      } else if (kind == '%' && is_raw(p)) {
        Result<size_t> r = lex_raw(tag, p);
        if (!r.ok()) return r.error();
        p = *r;
      } else {
        Result<size_t> r = lex_tag(tag, p, kind == '{');
        if (!r.ok()) return r.error();
        p = *r;
      }
      line_starting = p > 0 && src_[p - 1] == '\n';
      pos = p;
    }
    toks_.push_back({Token::T::eof, "", position(src_.size())});
    return std::move(toks_);
  }

 private:
  Pos position(size_t off) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(off - line_starts_[line - 1] + 1)};
  }
  Error err(size_t off, const std::string& what) const {
    const Pos p = position(off);
    return make_error("line {}:{}: {}", p.line, p.col, what);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void emit_data(const std::string& text, size_t off) {
    if (!text.empty()) toks_.push_back({Token::T::data, text, position(off)});
  }

  // Past an end delimiter: "-" strips all whitespace, else trim_blocks drops one newline.
  size_t after_end(size_t p, bool strip, bool keep) const {
    if (strip) {
      while (p < src_.size() && is_space(src_[p])) ++p;
    } else if (!keep && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    return p;
  }

  bool is_raw(size_t p) const {
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    return src_.compare(p, 2, "%}") == 0;
  }

  Result<size_t> lex_raw(size_t tag, size_t p) {
    size_t close = src_.find("%}", p);
    const bool strip_start = src_[close - 1] == '-';
    size_t body = after_end(close + 2, strip_start, src_[close - 1] == '+');
    for (size_t q = body; (q = src_.find("{%", q)) != std::string::npos; q += 2) {
      size_t r = q + 2;
      const bool strip_before = r < src_.size() && src_[r] == '-';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) ++r;
      while (r < src_.size() && is_space(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && is_space(src_[r])) ++r;
      const char s = r < src_.size() ? src_[r] : '\0';
      if (s == '-' || s == '+') ++r;
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, q - body);
      if (strip_before)
        text.erase(std::find_if(text.rbegin(), text.rend(), [](char c) { return !is_space(c); }).base(), text.end());
      emit_data(text, body);
      return after_end(r + 2, s == '-', s == '+');
    }
    return err(tag, "missing end of raw directive");
  }

  Result<size_t> lex_tag(size_t tag, size_t p, bool var) {
    toks_.push_back({var ? Token::T::var_begin : Token::T::block_begin, "", position(tag)});
    const char close = var ? '}' : '%';
    int depth = 0;
    while (true) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size())
        return err(tag, var ? "unexpected end of template: missing '}}'" : "unexpected end of template: missing '%}'");
      if (depth == 0) {
        const bool sign = (src_[p] == '-' || src_[p] == '+') && src_.compare(p + 1, 1, std::string(1, close)) == 0 &&
                          src_.compare(p + 2, 1, "}") == 0;
        if (sign || (src_[p] == close && src_.compare(p + 1, 1, "}") == 0)) {
          toks_.push_back({var ? Token::T::var_end : Token::T::block_end, "", position(p)});
          const size_t end = p + (sign ? 3 : 2);
          if (var) return sign && src_[p] == '-' ? after_end(end, true, false) : end;
          return after_end(end, sign && src_[p] == '-', sign && src_[p] == '+');
        }
      }
      const char c = src_[p];
      const Pos at = position(p);
      if (is_name_start(c)) {
        size_t q = p;
        while (q < src_.size() && is_name_char(src_[q])) ++q;
        toks_.push_back({Token::T::name, src_.substr(p, q - p), at});
        p = q;
      } else if (is_digit(c) && !(p > 0 && src_[p - 1] == '.')) {
        size_t q = p;
        auto digits = [&] {
          while (q < src_.size() &&
                 (is_digit(src_[q]) || (src_[q] == '_' && q + 1 < src_.size() && is_digit(src_[q + 1]))))
            ++q;
        };
        digits();
        bool flt = false;
        if (q + 1 < src_.size() && src_[q] == '.' && is_digit(src_[q + 1])) {
          ++q;
          digits();
          flt = true;
        }
        if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
          size_t e = q + 1;
          if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
          if (e < src_.size() && is_digit(src_[e])) {
            q = e;
            digits();
            flt = true;
          }
        }
        std::string num = src_.substr(p, q - p);
        num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
        toks_.push_back({flt ? Token::T::floating : Token::T::integer, num, at});
        p = q;
      } else if (c == '\'' || c == '"') {
        Result<size_t> r = lex_string(p);
        if (!r.ok()) return r.error();
        p = *r;
      } else {
        static const char* const ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                          ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", ";"};
        const char* found = nullptr;
        for (const char* op : ops)
          if (src_.compare(p, std::strlen(op), op) == 0) {
            found = op;
            break;
          }
        if (!found) return err(p, std::string("unexpected character '") + c + "'");
        const std::string op = found;
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) return err(p, "unexpected '" + op + "'");
          --depth;
        }
        toks_.push_back({Token::T::op, op, at});
        p += op.size();
      }
    }
  }

  // A quoted string with Python's unicode-escape decoding (unknown escapes keep the backslash).
  Result<size_t> lex_string(size_t p) {
    const char q = src_[p];
    std::string out;
    size_t i = p + 1;
    for (; i < src_.size() && src_[i] != q; ++i) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        out += src_[i];
        continue;
      }
      const char e = src_[++i];
      auto hex = [&](int n) -> int64_t {
        if (i + static_cast<size_t>(n) >= src_.size()) return -1;
        uint32_t v = 0;
        for (int k = 1; k <= n; ++k) {
          const char h = src_[i + static_cast<size_t>(k)];
          if (!std::isxdigit(static_cast<unsigned char>(h))) return -1;
          v = v * 16 + static_cast<uint32_t>(
                           std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        i += static_cast<size_t>(n);
        return v;
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const int64_t v = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
          if (v < 0) return err(i, "malformed \\" + std::string(1, e) + " escape in a string");
          utf8_encode(out, static_cast<uint32_t>(v));
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < src_.size() && src_[i + 1] >= '0' && src_[i + 1] <= '7'; ++k)
              v = v * 8 + static_cast<uint32_t>(src_[++i] - '0');
            utf8_encode(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    if (i >= src_.size()) return err(p, "unterminated string");
    toks_.push_back({Token::T::string, out, position(p)});
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> toks_;
};

std::string normalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

Result<std::vector<Token>> lex(std::string_view source) { return Lexer(normalize(source)).run(); }

}  // namespace edgelm::jinja
