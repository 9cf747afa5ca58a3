// Python-exact conversions of Jinja values (see value.h).
#include "jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace edgelm::jinja {

const Value* Args::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Value Value::callable(std::string name, std::function<Value(Interp&, const Args&)> fn) {
  Value v;
  v.kind_ = Kind::callable;
  v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::object;
  v.obj_ = std::move(o);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined: return false;
    case Kind::callable:
    case Kind::object: return true;
    case Kind::data: break;
  }
  switch (j_.type()) {
    case json::value_t::null: return false;
    case json::value_t::boolean: return j_.get<bool>();
    case json::value_t::number_integer: return j_.get<int64_t>() != 0;
    case json::value_t::number_unsigned: return j_.get<uint64_t>() != 0;
    case json::value_t::number_float: return j_.get<double>() != 0.0;
    case json::value_t::string: return !j_.get_ref<const std::string&>().empty();
    case json::value_t::array:
    case json::value_t::object: return !j_.empty();
    default: return false;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::callable: return "builtin_function_or_method";
    case Kind::object: return obj_->type == "namespace" ? "Namespace" : "LoopContext";
    case Kind::data: break;
  }
  switch (j_.type()) {
    case json::value_t::null: return "NoneType";
    case json::value_t::boolean: return "bool";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "int";
    case json::value_t::number_float: return "float";
    case json::value_t::string: return "str";
    case json::value_t::array: return "list";
    case json::value_t::object: return "dict";
    default: return "object";
  }
}

json to_json(const Value& v) {
  if (v.is_data()) return v.j();
  if (v.is_undefined()) throw RenderException("Object of type Undefined is not JSON serializable");
  throw RenderException(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
}

std::string py_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's repr layout: fixed for 1e-4 <= |d| < 1e16.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  const size_t e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  std::string mant = s.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "") +
          fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  }
  return neg ? "-" + out : out;
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_sq = s.find('\'') != std::string::npos, has_dq = s.find('"') != std::string::npos;
  const char q = has_sq && !has_dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == static_cast<unsigned char>(q))
      out += std::string("\\") + q;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + q;
}

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  out += '"';
}

void dump(const json& j, const std::optional<std::string>& indent, const std::string& item_sep,
          const std::string& key_sep, bool sort_keys, int level, std::string& out) {
  auto newline = [&](int l) {
    out += '\n';
    for (int i = 0; i < l; ++i) out += *indent;
  };
  switch (j.type()) {
    case json::value_t::null: out += "null"; return;
    case json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case json::value_t::number_integer: out += std::to_string(j.get<int64_t>()); return;
    case json::value_t::number_unsigned: out += std::to_string(j.get<uint64_t>()); return;
    case json::value_t::number_float: {
      const double d = j.get<double>();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : py_float(d);
      return;
    }
    case json::value_t::string: dump_string(j.get_ref<const std::string&>(), out); return;
    case json::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += item_sep;
        first = false;
        if (indent) newline(level + 1);
        dump(e, indent, item_sep, key_sep, sort_keys, level + 1, out);
      }
      if (indent) newline(level);
      out += ']';
      return;
    }
    case json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<const std::string*, const json*>> items;
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(&it.key(), &it.value());
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
      out += '{';
      bool first = true;
      for (const auto& [k, v] : items) {
        if (!first) out += item_sep;
        first = false;
        if (indent) newline(level + 1);
        dump_string(*k, out);
        out += key_sep;
        dump(*v, indent, item_sep, key_sep, sort_keys, level + 1, out);
      }
      if (indent) newline(level);
      out += '}';
      return;
    }
    default: out += "null";
  }
}

}  // namespace

std::string py_dumps(const json& j, std::optional<std::string> indent, std::string item_sep, std::string key_sep,
                     bool sort_keys) {
  std::string out;
  dump(j, indent, item_sep, key_sep, sort_keys, 0, out);
  return out;
}

std::string py_repr(const json& j) {
  switch (j.type()) {
    case json::value_t::string: return repr_string(j.get_ref<const std::string&>());
    case json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + py_repr(j[i]);
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out += (first ? "" : ", ") + repr_string(it.key()) + ": " + py_repr(it.value());
        first = false;
      }
      return out + "}";
    }
    default: return py_str(j);
  }
}

std::string py_str(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "None";
    case json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case json::value_t::number_integer: return std::to_string(j.get<int64_t>());
    case json::value_t::number_unsigned: return std::to_string(j.get<uint64_t>());
    case json::value_t::number_float: return py_float(j.get<double>());
    case json::value_t::string: return j.get<std::string>();
    default: return py_repr(j);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "";
    case Value::Kind::callable: return fmt::format("<built-in method {}>", v.fn().name);
    case Value::Kind::object: {
      if (v.obj().type != "namespace") return "<LoopContext>";
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, a] : v.obj().attrs) {
        out += (first ? "'" : ", '") + k + "': " + (a.is_data() ? py_repr(a.j()) : py_str(a));
        first = false;
      }
      return out + "}>";
    }
    case Value::Kind::data: return py_str(v.j());
  }
  return "";
}

double as_double(const json& j) {
  if (j.is_boolean()) return j.get<bool>() ? 1.0 : 0.0;
  return j.get<double>();
}

bool py_equal(const json& a, const json& b) {
  const bool an = a.is_number() || a.is_boolean(), bn = b.is_number() || b.is_boolean();
  if (an && bn) {
    if ((a.is_number_integer() || a.is_boolean()) && (b.is_number_integer() || b.is_boolean())) {
      auto iv = [](const json& x) { return x.is_boolean() ? (x.get<bool>() ? 1 : 0) : x.get<int64_t>(); };
      return iv(a) == iv(b);
    }
    return as_double(a) == as_double(b);
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!py_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto f = b.find(it.key());
      if (f == b.end() || !py_equal(it.value(), *f)) return false;
    }
    return true;
  }
  return a == b;
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_data() && b.is_data()) return py_equal(a.j(), b.j());
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  return false;
}

int py_compare(const json& a, const json& b) {
  const bool an = a.is_number() || a.is_boolean(), bn = b.is_number() || b.is_boolean();
  if (an && bn) {
    if (a.is_number_integer() && b.is_number_integer()) {
      const int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
      return x < y ? -1 : x > y;
    }
    const double x = as_double(a), y = as_double(b);
    return x < y ? -1 : x > y;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : c > 0;
  }
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
      if (!py_equal(a[i], b[i])) return py_compare(a[i], b[i]);
    return a.size() < b.size() ? -1 : a.size() > b.size();
  }
  throw RenderException(
      fmt::format("'<' not supported between instances of '{}' and '{}'", Value(a).type_name(), Value(b).type_name()));
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace edgelm::jinja
