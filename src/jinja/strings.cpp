// Python string semantics (see strings.h).
#include "jinja/strings.h"

#include <algorithm>
#include <cctype>

namespace edgelm::jinja {

bool py_isspace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f);
}

namespace {
bool is_alpha(unsigned char c) { return std::isalpha(c) || c >= 0x80; }
char up(char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); }
char low(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
}  // namespace

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<std::string> cs = utf8_chars(s);
  std::vector<std::string> set;
  if (chars) set = utf8_chars(*chars);
  auto strip_it = [&](const std::string& c) {
    if (!chars) return c.size() == 1 && py_isspace(c[0]);
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t a = 0, b = cs.size();
  if (left)
    while (a < b && strip_it(cs[a])) ++a;
  if (right)
    while (b > a && strip_it(cs[b - 1])) --b;
  std::string out;
  for (size_t i = a; i < b; ++i) out += cs[i];
  return out;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = up(c);
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s) c = low(c);
  return s;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char c : s) {
    const bool alpha = is_alpha(static_cast<unsigned char>(c));
    out += alpha ? (prev_cased ? low(c) : up(c)) : c;
    // continuation bytes of a multi-byte character keep the state
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) prev_cased = alpha;
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // jinja2: words start after runs of '-', whitespace, '(', '{', '[', '<'.
  std::string out;
  bool start = true;
  for (char c : s) {
    const bool sep = c == '-' || py_isspace(c) || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      out += c;
      start = true;
    } else {
      out += start ? up(c) : low(c);
      start = false;
    }
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out = ascii_lower(std::string(s));
  if (!out.empty()) out[0] = up(out[0]);
  return out;
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (!from_right) {
      size_t p = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        const size_t q = s.find(*sep, p);
        if (q == std::string_view::npos) break;
        out.emplace_back(s.substr(p, q - p));
        p = q + sep->size();
      }
      out.emplace_back(s.substr(p));
      return out;
    }
    size_t end = s.size();
    std::vector<std::string> rev;
    while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t q = s.rfind(*sep, end - sep->size());
      if (q == std::string_view::npos) break;
      rev.emplace_back(s.substr(q + sep->size(), end - q - sep->size()));
      end = q;
    }
    rev.emplace_back(s.substr(0, end));
    return {rev.rbegin(), rev.rend()};
  }
  // Whitespace runs; leading/trailing whitespace ignored.
  if (!from_right) {
    size_t p = 0;
    while (p < s.size()) {
      while (p < s.size() && py_isspace(s[p])) ++p;
      if (p >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        std::string rest(s.substr(p));
        while (!rest.empty() && py_isspace(rest.back())) rest.pop_back();
        out.push_back(rest);
        break;
      }
      size_t q = p;
      while (q < s.size() && !py_isspace(s[q])) ++q;
      out.emplace_back(s.substr(p, q - p));
      p = q;
    }
    return out;
  }
  std::vector<std::string> words = py_split(s, std::nullopt, -1, false);
  if (maxsplit < 0 || static_cast<int64_t>(words.size()) <= maxsplit + 1) return words;
  // rsplit with maxsplit: join the leading words back (approximation: single spaces kept as in s)
  std::string_view rest = s;
  while (!rest.empty() && py_isspace(rest.back())) rest.remove_suffix(1);
  std::vector<std::string> rev;
  size_t end = rest.size();
  for (int64_t k = 0; k < maxsplit; ++k) {
    size_t q = end;
    while (q > 0 && !py_isspace(rest[q - 1])) --q;
    rev.emplace_back(rest.substr(q, end - q));
    while (q > 0 && py_isspace(rest[q - 1])) --q;
    end = q;
  }
  size_t a = 0;
  while (a < end && py_isspace(rest[a])) ++a;
  rev.emplace_back(rest.substr(a, end - a));
  return {rev.rbegin(), rev.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p < s.size()) {
    size_t q = p;
    while (q < s.size() && s[q] != '\n' && s[q] != '\r' && s[q] != '\v' && s[q] != '\f' &&
           !(s[q] >= 0x1c && s[q] <= 0x1e))
      ++q;
    out.emplace_back(s.substr(p, q - p));
    if (q < s.size() && s[q] == '\r' && q + 1 < s.size() && s[q + 1] == '\n') ++q;
    p = q + 1;
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` between every character (and at both ends).
    std::vector<std::string> cs = utf8_chars(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cs.size(); ++i) {
      if (count < 0 || n < count) {
        out += with;
        ++n;
      }
      if (i < cs.size()) out += cs[i];
    }
    return out;
  }
  size_t p = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t q = s.find(old, p);
    if (q == std::string_view::npos) break;
    out += s.substr(p, q - p);
    out += with;
    p = q + old.size();
    ++n;
  }
  out += s.substr(p);
  return out;
}

std::string py_format(std::string_view f, const Args& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (f[i] == '{') {
      const size_t close = f.find('}', i);
      if (close == std::string_view::npos) throw RenderException("Single '{' encountered in format string");
      std::string field(f.substr(i + 1, close - i - 1));
      const size_t colon = field.find_first_of(":!");
      if (colon != std::string::npos) field.resize(colon);
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_idx < args.pos.size() ? &args.pos[auto_idx] : nullptr;
        ++auto_idx;
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        const size_t k = std::stoul(field);
        v = k < args.pos.size() ? &args.pos[k] : nullptr;
      } else {
        for (const auto& [k, val] : args.kw)
          if (k == field) v = &val;
      }
      if (!v) throw RenderException("Replacement index out of range for positional args tuple");
      out += py_str(*v);
      i = close;
    } else {
      out += f[i];
    }
  }
  return out;
}

std::string py_percent(std::string_view f, const Value& args) {
  std::vector<Value> vals;
  if (args.is_array())
    for (const auto& e : args.j()) vals.emplace_back(e);
  else
    vals.push_back(args);
  std::string out;
  size_t k = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (i + 1 >= f.size()) throw RenderException("incomplete format");
    const char c = f[++i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (k >= vals.size()) throw RenderException("not enough arguments for format string");
    const Value& v = vals[k++];
    if (c == 's')
      out += py_str(v);
    else if (c == 'r')
      out += v.is_data() ? py_repr(v.j()) : py_str(v);
    else if (c == 'd' || c == 'i')
      out += v.is_data() && v.j().is_number() ? std::to_string(static_cast<int64_t>(as_double(v.j()))) : py_str(v);
    else
      throw RenderException(std::string("unsupported format character '") + c + "'");
  }
  if (k < vals.size()) throw RenderException("not all arguments converted during string formatting");
  return out;
}

bool py_is(std::string_view s, std::string_view what) {
  if (s.empty()) return false;
  bool any_cased = false;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (what == "isdigit" && !std::isdigit(c)) return false;
    if (what == "isalpha" && !std::isalpha(c)) return false;
    if (what == "isalnum" && !std::isalnum(c)) return false;
    if (what == "isspace" && !py_isspace(ch)) return false;
    if (what == "isupper" && std::islower(c)) return false;
    if (what == "islower" && std::isupper(c)) return false;
    any_cased = any_cased || std::isalpha(c);
  }
  return (what == "isupper" || what == "islower") ? any_cased : true;
}

}  // namespace edgelm::jinja
