// Jinja builtins, part 2: jinja2's filters and tests, with Hugging Face's tojson
// (json.dumps(ensure_ascii=False, indent=..., separators=..., sort_keys=...)).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "jinja/eval.h"
#include "jinja/strings.h"

namespace edgelm::jinja {
namespace {

using A = const Args&;
using FilterFn = Value (*)(Interp&, const Value&, A);
using TestFn = bool (*)(Interp&, const Value&, A);

Value arg_or(A a, size_t i, const char* name, Value def) {
  const Value* v = a.get(i, name);
  return v ? *v : def;
}
bool arg_bool(A a, size_t i, const char* name, bool def) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : def;
}
Value str_value(std::string s) { return Value(json(std::move(s))); }

std::vector<Value> seq(const Value& v) { return iterate(v); }
Value list_of(const std::vector<Value>& vs) {
  json arr = json::array();
  for (const Value& v : vs) arr.push_back(to_json(v));
  return Value(std::move(arr));
}

// attribute="a.b" or "0": jinja2's make_attrgetter (dots walk, digits index).
Value attr_path(const Value& v, const Value& attr) {
  if (!attr.is_string()) return get_item(v, attr);
  Value cur = v;
  const std::string& s = attr.str();
  size_t p = 0;
  while (true) {
    const size_t q = s.find('.', p);
    std::string part = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = get_item(cur, digits ? Value(json(std::stoll(part))) : Value(json(part)));
    if (q == std::string::npos) return cur;
    p = q + 1;
  }
}

int64_t to_int(const Value& v, int64_t def) {
  if (!v.is_data()) return def;
  const json& j = v.j();
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) return static_cast<int64_t>(j.get<double>());
  if (j.is_string()) {
    std::string s = py_strip(j.get<std::string>(), std::nullopt, true, true);
    try {
      size_t n = 0;
      const int64_t r = std::stoll(s, &n);
      if (n == s.size()) return r;
      const double d = std::stod(s, &n);
      if (n == s.size()) return static_cast<int64_t>(d);
    } catch (...) {
    }
  }
  return def;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value f_tojson(Interp&, const Value& v, A a) {
  const Value ind = arg_or(a, 1, "indent", Value(json(nullptr)));
  std::optional<std::string> indent;
  if (ind.is_string())
    indent = ind.str();
  else if (ind.is_data() && ind.j().is_number())
    indent = std::string(static_cast<size_t>(std::max<int64_t>(0, to_int(ind, 0))), ' ');
  std::string item = indent ? "," : ", ", key = ": ";
  const Value seps = arg_or(a, 2, "separators", Value(json(nullptr)));
  if (seps.is_array() && seps.j().size() == 2) {
    item = seps.j()[0].get<std::string>();
    key = seps.j()[1].get<std::string>();
  }
  const bool sort = arg_bool(a, 3, "sort_keys", false);
  return str_value(py_dumps(to_json(v), indent, item, key, sort));
}

Value f_length(Interp&, const Value& v, A) {
  if (v.is_undefined()) return Value(json(0));
  if (v.is_string()) return Value(json(static_cast<int64_t>(utf8_length(v.str()))));
  if (v.is_array() || v.is_mapping()) return Value(json(static_cast<int64_t>(v.j().size())));
  if (v.is_object()) return Value(json(static_cast<int64_t>(v.obj().attrs.size())));
  throw RenderException(fmt::format("object of type '{}' has no len()", v.type_name()));
}

Value f_trim(Interp&, const Value& v, A a) {
  const Value* c = a.get(0, "chars");
  std::optional<std::string> chars;
  if (c && c->is_string()) chars = c->str();
  return str_value(py_strip(py_str(v), chars, true, true));
}
Value f_upper(Interp&, const Value& v, A) { return str_value(ascii_upper(py_str(v))); }
Value f_lower(Interp&, const Value& v, A) { return str_value(ascii_lower(py_str(v))); }
Value f_capitalize(Interp&, const Value& v, A) { return str_value(py_capitalize(py_str(v))); }
Value f_title(Interp&, const Value& v, A) { return str_value(jinja_title(py_str(v))); }
Value f_string(Interp&, const Value& v, A) { return str_value(py_str(v)); }
Value f_safe(Interp&, const Value& v, A) { return v; }
Value f_escape(Interp&, const Value& v, A) { return str_value(html_escape(py_str(v))); }

Value f_replace(Interp&, const Value& v, A a) {
  const Value* o = a.get(0, "old");
  const Value* n = a.get(1, "new");
  if (!o || !n) throw RenderException("replace() takes at least 2 arguments");
  const Value c = arg_or(a, 2, "count", Value(json(nullptr)));
  return str_value(py_replace(py_str(v), py_str(*o), py_str(*n), c.is_none() ? -1 : to_int(c, -1)));
}

Value f_join(Interp&, const Value& v, A a) {
  const std::string sep = py_str(arg_or(a, 0, "d", str_value("")));
  const Value* attr = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& e : seq(v)) {
    if (!first) out += sep;
    first = false;
    out += py_str(attr ? attr_path(e, *attr) : e);
  }
  return str_value(out);
}

Value f_default(Interp&, const Value& v, A a) {
  const Value def = arg_or(a, 0, "default_value", str_value(""));
  const bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return def;
  return v;
}

Value f_first(Interp&, const Value& v, A) {
  std::vector<Value> s = seq(v);
  return s.empty() ? Value::undefined("No first item, sequence was empty.") : s.front();
}
Value f_last(Interp&, const Value& v, A) {
  std::vector<Value> s = seq(v);
  return s.empty() ? Value::undefined("No last item, sequence was empty.") : s.back();
}
Value f_list(Interp&, const Value& v, A) { return list_of(seq(v)); }
Value f_items(Interp&, const Value& v, A) {
  if (v.is_undefined()) return Value(json::array());
  if (!v.is_mapping()) throw RenderException("Can only get item pairs from a mapping.");
  json out = json::array();
  for (auto it = v.j().begin(); it != v.j().end(); ++it) out.push_back(json::array({it.key(), it.value()}));
  return Value(std::move(out));
}
Value f_reverse(Interp&, const Value& v, A) {
  if (v.is_string()) {
    std::vector<std::string> cs = utf8_chars(v.str());
    std::string out;
    for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
    return str_value(out);
  }
  std::vector<Value> s = seq(v);
  std::reverse(s.begin(), s.end());
  return list_of(s);
}

Value f_int(Interp&, const Value& v, A a) {
  return Value(json(to_int(v, to_int(arg_or(a, 0, "default", Value(json(0))), 0))));
}
Value f_float(Interp&, const Value& v, A a) {
  if (v.is_data() && (v.j().is_number() || v.j().is_boolean())) return Value(json(as_double(v.j())));
  if (v.is_string()) {
    try {
      size_t n = 0;
      const std::string s = py_strip(v.str(), std::nullopt, true, true);
      const double d = std::stod(s, &n);
      if (n == s.size()) return Value(json(d));
    } catch (...) {
    }
  }
  const Value def = arg_or(a, 0, "default", Value(json(0.0)));
  return def;
}
Value f_abs(Interp&, const Value& v, A) {
  if (v.is_data() && v.j().is_number_integer()) return Value(json(std::llabs(v.j().get<int64_t>())));
  if (v.is_data() && v.j().is_number()) return Value(json(std::fabs(v.j().get<double>())));
  throw RenderException(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
}
Value f_round(Interp&, const Value& v, A a) {
  if (!v.is_number()) throw RenderException("round() needs a number");
  const int64_t prec = to_int(arg_or(a, 0, "precision", Value(json(0))), 0);
  const std::string method = py_str(arg_or(a, 1, "method", str_value("common")));
  const double m = std::pow(10.0, static_cast<double>(prec)), x = as_double(v.j()) * m;
  const double r = method == "floor"  ? std::floor(x)
                   : method == "ceil" ? std::ceil(x)
                                      : std::nearbyint(x);  // Python's round: half to even
  return Value(json(r / m));
}

Value f_indent(Interp&, const Value& v, A a) {
  const Value w = arg_or(a, 0, "width", Value(json(4)));
  const std::string ind =
      w.is_string() ? w.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, to_int(w, 4))), ' ');
  const bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  std::vector<std::string> lines = py_splitlines(py_str(v) + "\n");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind) + lines[i];
  }
  return str_value(first ? ind + rv : rv);
}

Value f_wordcount(Interp&, const Value& v, A) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : py_str(v)) {
    const bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(json(n));
}

Value f_unique(Interp&, const Value& v, A a) {
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = a.get(1, "attribute");
  std::vector<Value> out;
  std::vector<json> seen;
  for (const Value& e : seq(v)) {
    Value key = attr ? attr_path(e, *attr) : e;
    json k = to_json(key);
    if (!cs && k.is_string()) k = ascii_lower(k.get<std::string>());
    if (std::none_of(seen.begin(), seen.end(), [&](const json& s) { return py_equal(s, k); })) {
      seen.push_back(k);
      out.push_back(e);
    }
  }
  return list_of(out);
}

Value f_sort(Interp&, const Value& v, A a) {
  const bool rev = arg_bool(a, 0, "reverse", false), cs = arg_bool(a, 1, "case_sensitive", false);
  const Value* attr = a.get(2, "attribute");
  std::vector<Value> s = seq(v);
  auto key = [&](const Value& e) {
    json k = to_json(attr ? attr_path(e, *attr) : e);
    if (!cs && k.is_string()) k = ascii_lower(k.get<std::string>());
    return k;
  };
  std::stable_sort(s.begin(), s.end(), [&](const Value& x, const Value& y) {
    return rev ? py_compare(key(y), key(x)) < 0 : py_compare(key(x), key(y)) < 0;
  });
  return list_of(s);
}

Value f_dictsort(Interp&, const Value& v, A a) {
  if (!v.is_mapping()) throw RenderException("dictsort needs a mapping");
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const bool by_value = py_str(arg_or(a, 1, "by", str_value("key"))) == "value";
  const bool rev = arg_bool(a, 2, "reverse", false);
  std::vector<json> items;
  for (auto it = v.j().begin(); it != v.j().end(); ++it) items.push_back(json::array({it.key(), it.value()}));
  auto key = [&](const json& p) {
    json k = p[by_value ? 1 : 0];
    if (!cs && k.is_string()) k = ascii_lower(k.get<std::string>());
    return k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const json& x, const json& y) {
    return rev ? py_compare(key(y), key(x)) < 0 : py_compare(key(x), key(y)) < 0;
  });
  return Value(json(items));
}

Value f_batch(Interp&, const Value& v, A a) {
  const int64_t n = to_int(arg_or(a, 0, "linecount", Value(json(1))), 1);
  if (n <= 0) throw RenderException("batch size must be positive");
  const Value* fill = a.get(1, "fill_with");
  json out = json::array(), cur = json::array();
  for (const Value& e : seq(v)) {
    cur.push_back(to_json(e));
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(cur);
      cur = json::array();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(to_json(*fill));
    out.push_back(cur);
  }
  return Value(std::move(out));
}

Value f_sum(Interp&, const Value& v, A a) {
  const Value* attr = a.get(0, "attribute");
  Value acc = arg_or(a, 1, "start", Value(json(0)));
  for (const Value& e : seq(v)) acc = binary_op("+", acc, attr ? attr_path(e, *attr) : e);
  return acc;
}

Value f_minmax(const Value& v, A a, bool want_max) {
  std::vector<Value> s = seq(v);
  if (s.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = a.get(1, "attribute");
  auto key = [&](const Value& e) {
    json k = to_json(attr ? attr_path(e, *attr) : e);
    if (!cs && k.is_string()) k = ascii_lower(k.get<std::string>());
    return k;
  };
  size_t best = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    const int c = py_compare(key(s[i]), key(s[best]));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return s[best];
}
Value f_min(Interp&, const Value& v, A a) { return f_minmax(v, a, false); }
Value f_max(Interp&, const Value& v, A a) { return f_minmax(v, a, true); }

Value f_attr(Interp&, const Value& v, A a) { return get_attr(v, py_str(arg_or(a, 0, "name", str_value("")))); }

Value f_format(Interp&, const Value& v, A a) {
  if (!a.kw.empty()) throw RenderException("can't handle positional and keyword arguments at the same time");
  json arr = json::array();
  for (const Value& p : a.pos) arr.push_back(to_json(p));
  return str_value(py_percent(py_str(v), a.pos.size() == 1 ? a.pos[0] : Value(arr)));
}

// map/select/reject/selectattr/rejectattr yield nothing for a falsy value (jinja2's `if value:`).
Value f_map(Interp& in, const Value& v, A a) {
  std::vector<Value> out;
  if (!v.truthy()) return list_of(out);
  const Value* attr = nullptr;
  for (const auto& [k, val] : a.kw)
    if (k == "attribute") attr = &val;
  if (attr) {
    const Value* def = nullptr;
    for (const auto& [k, val] : a.kw)
      if (k == "default") def = &val;
    for (const Value& e : seq(v)) {
      Value r = attr_path(e, *attr);
      out.push_back(r.is_undefined() && def ? *def : r);
    }
    return list_of(out);
  }
  if (a.pos.empty()) throw RenderException("map requires a filter argument");
  Args rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& e : seq(v)) out.push_back(apply_filter(in, py_str(a.pos[0]), e, rest));
  return list_of(out);
}

Value select_impl(Interp& in, const Value& v, A a, bool by_attr, bool want) {
  std::vector<Value> out;
  if (!v.truthy()) return list_of(out);
  size_t i = 0;
  Value attr;
  if (by_attr) {
    if (a.pos.empty()) throw RenderException("selectattr needs an attribute name");
    attr = a.pos[i++];
  }
  std::string test;
  Args rest;
  if (i < a.pos.size()) {
    test = py_str(a.pos[i++]);
    rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(i), a.pos.end());
    rest.kw = a.kw;
  }
  for (const Value& e : seq(v)) {
    const Value x = by_attr ? attr_path(e, attr) : e;
    const bool ok = test.empty() ? x.truthy() : apply_test(in, test, x, rest);
    if (ok == want) out.push_back(e);
  }
  return list_of(out);
}
Value f_select(Interp& in, const Value& v, A a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interp& in, const Value& v, A a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, A a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, A a) { return select_impl(in, v, a, true, false); }

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> m = {
      {"tojson", f_tojson},
      {"length", f_length},
      {"count", f_length},
      {"trim", f_trim},
      {"upper", f_upper},
      {"lower", f_lower},
      {"capitalize", f_capitalize},
      {"title", f_title},
      {"string", f_string},
      {"safe", f_safe},
      {"e", f_escape},
      {"escape", f_escape},
      {"forceescape", f_escape},
      {"replace", f_replace},
      {"join", f_join},
      {"default", f_default},
      {"d", f_default},
      {"first", f_first},
      {"last", f_last},
      {"list", f_list},
      {"items", f_items},
      {"reverse", f_reverse},
      {"int", f_int},
      {"float", f_float},
      {"abs", f_abs},
      {"round", f_round},
      {"indent", f_indent},
      {"wordcount", f_wordcount},
      {"unique", f_unique},
      {"sort", f_sort},
      {"dictsort", f_dictsort},
      {"batch", f_batch},
      {"sum", f_sum},
      {"min", f_min},
      {"max", f_max},
      {"attr", f_attr},
      {"format", f_format},
      {"map", f_map},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
  };
  return m;
}

const Value& arg0(A a, const char* what) {
  if (a.pos.empty()) throw RenderException(fmt::format("test '{}' needs an argument", what));
  return a.pos[0];
}

bool t_defined(Interp&, const Value& v, A) { return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, A) { return v.is_undefined(); }
bool t_none(Interp&, const Value& v, A) { return v.is_none(); }
bool t_string(Interp&, const Value& v, A) { return v.is_string(); }
bool t_number(Interp&, const Value& v, A) { return v.is_number(); }
bool t_integer(Interp&, const Value& v, A) { return v.is_int(); }
bool t_float(Interp&, const Value& v, A) { return v.is_data() && v.j().is_number_float(); }
bool t_boolean(Interp&, const Value& v, A) { return v.is_bool(); }
bool t_true(Interp&, const Value& v, A) { return v.is_bool() && v.j().get<bool>(); }
bool t_false(Interp&, const Value& v, A) { return v.is_bool() && !v.j().get<bool>(); }
bool t_mapping(Interp&, const Value& v, A) { return v.is_mapping(); }
bool t_iterable(Interp&, const Value& v, A) {
  return v.is_undefined() || v.is_string() || v.is_array() || v.is_mapping();
}
bool t_sequence(Interp&, const Value& v, A) { return v.is_string() || v.is_array() || v.is_mapping(); }
bool t_callable(Interp&, const Value& v, A) { return v.is_callable(); }
int64_t need_num(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) throw RenderException(fmt::format("not all arguments converted during string formatting"));
  return v.j().is_boolean() ? v.j().get<bool>() : static_cast<int64_t>(as_double(v.j()));
}
bool t_even(Interp&, const Value& v, A) { return need_num(v) % 2 == 0; }
bool t_odd(Interp&, const Value& v, A) { return need_num(v) % 2 != 0; }
bool t_divisibleby(Interp&, const Value& v, A a) {
  const int64_t d = need_num(arg0(a, "divisibleby"));
  if (d == 0) throw RenderException("integer division or modulo by zero");
  return need_num(v) % d == 0;
}
bool t_eq(Interp&, const Value& v, A a) { return py_equal(v, arg0(a, "eq")); }
bool t_ne(Interp&, const Value& v, A a) { return !py_equal(v, arg0(a, "ne")); }
bool t_cmp(const Value& v, A a, const char* op) { return binary_op(op, v, arg0(a, op)).truthy(); }
bool t_lt(Interp&, const Value& v, A a) { return t_cmp(v, a, "<"); }
bool t_le(Interp&, const Value& v, A a) { return t_cmp(v, a, "<="); }
bool t_gt(Interp&, const Value& v, A a) { return t_cmp(v, a, ">"); }
bool t_ge(Interp&, const Value& v, A a) { return t_cmp(v, a, ">="); }
bool t_in(Interp&, const Value& v, A a) { return binary_op("in", v, arg0(a, "in")).truthy(); }
bool t_sameas(Interp&, const Value& v, A a) {
  const Value& o = arg0(a, "sameas");
  if (v.is_data() && o.is_data() && (v.j().is_null() || v.j().is_boolean())) return v.j() == o.j();
  return false;
}
bool t_lower(Interp&, const Value& v, A) { return v.is_string() && ascii_lower(v.str()) == v.str(); }
bool t_upper(Interp&, const Value& v, A) { return v.is_string() && ascii_upper(v.str()) == v.str(); }

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> m = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"string", t_string},
      {"number", t_number},
      {"integer", t_integer},
      {"float", t_float},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"even", t_even},
      {"odd", t_odd},
      {"divisibleby", t_divisibleby},
      {"equalto", t_eq},
      {"eq", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"<", t_lt},
      {"lessthan", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {">", t_gt},
      {"greaterthan", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"sameas", t_sameas},
      {"lower", t_lower},
      {"upper", t_upper},
      {"escaped", [](Interp&, const Value&, A) { return false; }},
  };
  return m;
}

}  // namespace

Value apply_filter(Interp& in, const std::string& name, const Value& v, const Args& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw RenderException(fmt::format("No filter named '{}'.", name));
  return it->second(in, v, args);
}

bool apply_test(Interp& in, const std::string& name, const Value& v, const Args& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw RenderException(fmt::format("No test named '{}'.", name));
  return it->second(in, v, args);
}

}  // namespace edgelm::jinja
