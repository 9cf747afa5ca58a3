// Jinja builtins, part 1: attribute/item access, Python's str/dict/list methods, slicing,
// iteration, the binary operators and the globals (range, dict, namespace, raise_exception,
// strftime_now). Filters and tests are in filters.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "jinja/eval.h"
#include "jinja/strings.h"

namespace edgelm::jinja {

void fail_undefined(const Value& v) { throw RenderException(v.hint().empty() ? "undefined value" : v.hint()); }

namespace {

int64_t need_int(const Value& v, const char* what) {
  if (v.is_data() && (v.j().is_number_integer() || v.j().is_boolean()))
    return v.j().is_boolean() ? v.j().get<bool>() : v.j().get<int64_t>();
  throw RenderException(fmt::format("{}: '{}' object cannot be interpreted as an integer", what, v.type_name()));
}

std::string need_str(const Value& v, const char* what) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) fail_undefined(v);
  throw RenderException(fmt::format("{}: expected str, got '{}'", what, v.type_name()));
}

Value bound(const std::string& name, std::function<Value(Interp&, const Args&)> fn) {
  return Value::callable(name, std::move(fn));
}

// Python str methods bound to `s`.
Value str_method(const std::string& s, const std::string& name) {
  using A = const Args&;
  auto opt_chars = [](A a) -> std::optional<std::string> {
    const Value* c = a.get(0, "chars");
    if (!c || c->is_none()) return std::nullopt;
    return need_str(*c, "strip");
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return bound(name, [s, name, opt_chars](Interp&, A a) {
      return Value(json(py_strip(s, opt_chars(a), name != "rstrip", name != "lstrip")));
    });
  if (name == "upper") return bound(name, [s](Interp&, A) { return Value(json(ascii_upper(s))); });
  if (name == "lower") return bound(name, [s](Interp&, A) { return Value(json(ascii_lower(s))); });
  if (name == "title") return bound(name, [s](Interp&, A) { return Value(json(py_title(s))); });
  if (name == "capitalize") return bound(name, [s](Interp&, A) { return Value(json(py_capitalize(s))); });
  if (name == "startswith" || name == "endswith")
    return bound(name, [s, name](Interp&, A a) {
      const Value* p = a.get(0, "prefix");
      if (!p) throw RenderException(name + "() takes at least 1 argument");
      std::vector<std::string> options;
      if (p->is_array())
        for (const auto& e : p->j()) options.push_back(e.is_string() ? e.get<std::string>() : "");
      else
        options.push_back(need_str(*p, name.c_str()));
      for (const std::string& o : options) {
        const bool hit = name == "startswith"
                             ? s.compare(0, o.size(), o) == 0
                             : s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0;
        if (hit) return Value(json(true));
      }
      return Value(json(false));
    });
  if (name == "split" || name == "rsplit")
    return bound(name, [s, name](Interp&, A a) {
      const Value* sep = a.get(0, "sep");
      const Value* mx = a.get(1, "maxsplit");
      const int64_t maxsplit = mx ? need_int(*mx, "split") : -1;
      std::optional<std::string> sp;
      if (sep && !sep->is_none()) sp = need_str(*sep, "split");
      if (sp && sp->empty()) throw RenderException("empty separator");
      json out = json::array();
      for (auto& part : py_split(s, sp, maxsplit, name == "rsplit")) out.push_back(part);
      return Value(std::move(out));
    });
  if (name == "splitlines")
    return bound(name, [s](Interp&, A) {
      json out = json::array();
      for (auto& l : py_splitlines(s)) out.push_back(l);
      return Value(std::move(out));
    });
  if (name == "replace")
    return bound(name, [s](Interp&, A a) {
      const Value* o = a.get(0, "old");
      const Value* n = a.get(1, "new");
      const Value* c = a.get(2, "count");
      if (!o || !n) throw RenderException("replace() takes at least 2 arguments");
      return Value(
          json(py_replace(s, need_str(*o, "replace"), need_str(*n, "replace"), c ? need_int(*c, "replace") : -1)));
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count")
    return bound(name, [s, name](Interp&, A a) {
      const Value* sub = a.get(0, "sub");
      if (!sub) throw RenderException(name + "() takes at least 1 argument");
      const std::string t = need_str(*sub, name.c_str());
      if (name == "count") {
        if (t.empty()) return Value(json(static_cast<int64_t>(utf8_length(s) + 1)));
        int64_t n = 0;
        for (size_t p = s.find(t); p != std::string::npos; p = s.find(t, p + t.size())) ++n;
        return Value(json(n));
      }
      const size_t p = name[0] == 'r' ? s.rfind(t) : s.find(t);
      if (p == std::string::npos) {
        if (name.find("index") != std::string::npos) throw RenderException("substring not found");
        return Value(json(-1));
      }
      return Value(json(static_cast<int64_t>(utf8_length(s.substr(0, p)))));
    });
  if (name == "join")
    return bound(name, [s](Interp&, A a) {
      std::string out;
      bool first = true;
      if (a.pos.empty()) throw RenderException("join() takes exactly one argument");
      for (const Value& v : iterate(a.pos[0])) {
        if (!first) out += s;
        first = false;
        out += need_str(v, "join");
      }
      return Value(json(out));
    });
  if (name == "format") return bound(name, [s](Interp&, A a) { return Value(json(py_format(s, a))); });
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" || name == "isupper" ||
      name == "islower")
    return bound(name, [s, name](Interp&, A) { return Value(json(py_is(s, name))); });
  return Value::undefined(fmt::format("'str object' has no attribute '{}'", name));
}

Value dict_method(const json& d, const std::string& name) {
  using A = const Args&;
  if (name == "items")
    return bound(name, [d](Interp&, A) {
      json out = json::array();
      for (auto it = d.begin(); it != d.end(); ++it) out.push_back(json::array({it.key(), it.value()}));
      return Value(std::move(out));
    });
  if (name == "keys")
    return bound(name, [d](Interp&, A) {
      json out = json::array();
      for (auto it = d.begin(); it != d.end(); ++it) out.push_back(it.key());
      return Value(std::move(out));
    });
  if (name == "values")
    return bound(name, [d](Interp&, A) {
      json out = json::array();
      for (auto it = d.begin(); it != d.end(); ++it) out.push_back(it.value());
      return Value(std::move(out));
    });
  if (name == "get")
    return bound(name, [d](Interp&, A a) {
      const Value* k = a.get(0, "key");
      if (!k) throw RenderException("get expected at least 1 argument, got 0");
      if (k->is_string()) {
        auto it = d.find(k->str());
        if (it != d.end()) return Value(*it);
      }
      const Value* def = a.get(1, "default");
      return def ? *def : Value(json(nullptr));
    });
  if (name == "copy") return bound(name, [d](Interp&, A) { return Value(d); });
  if (name == "update" || name == "pop" || name == "setdefault" || name == "clear" || name == "popitem")
    return bound(name, [name](Interp&, A) -> Value {
      throw RenderException(fmt::format("access to attribute '{}' of 'dict' object is unsafe.", name));
    });
  return Value::undefined();
}

Value list_method(const json& l, const std::string& name) {
  using A = const Args&;
  if (name == "index" || name == "count")
    return bound(name, [l, name](Interp&, A a) {
      if (a.pos.empty()) throw RenderException(name + "() takes exactly one argument");
      int64_t n = 0;
      for (size_t i = 0; i < l.size(); ++i)
        if (py_equal(Value(l[i]), a.pos[0])) {
          if (name == "index") return Value(json(static_cast<int64_t>(i)));
          ++n;
        }
      if (name == "index") throw RenderException("value is not in list");
      return Value(json(n));
    });
  if (name == "copy") return bound(name, [l](Interp&, A) { return Value(l); });
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
      name == "reverse" || name == "sort" || name == "clear")
    return bound(name, [name](Interp&, A) -> Value {
      throw RenderException(fmt::format("access to attribute '{}' of 'list' object is unsafe.", name));
    });
  return Value::undefined();
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_object()) {
    auto it = obj.obj().attrs.find(name);
    if (it != obj.obj().attrs.end()) return it->second;
    return Value::undefined(fmt::format("'{}' object has no attribute '{}'", obj.type_name(), name));
  }
  if (obj.is_data()) {
    const json& j = obj.j();
    if (j.is_string()) return str_method(j.get<std::string>(), name);
    if (j.is_object()) {
      Value m = dict_method(j, name);
      if (!m.is_undefined()) return m;
      auto it = j.find(name);
      if (it != j.end()) return Value(*it);
    } else if (j.is_array()) {
      Value m = list_method(j, name);
      if (!m.is_undefined()) return m;
    }
  }
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_data()) {
    const json& j = obj.j();
    if (j.is_object() && key.is_string()) {
      auto it = j.find(key.str());
      if (it != j.end()) return Value(*it);
    } else if ((j.is_array() || j.is_string()) && key.is_data() &&
               (key.j().is_number_integer() || key.j().is_boolean())) {
      int64_t i = need_int(key, "index");
      if (j.is_array()) {
        const int64_t n = static_cast<int64_t>(j.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value(j[static_cast<size_t>(i)]);
      } else {
        std::vector<std::string> cs = utf8_chars(j.get_ref<const std::string&>());
        const int64_t n = static_cast<int64_t>(cs.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value(json(cs[static_cast<size_t>(i)]));
      }
      return Value::undefined(fmt::format("{} object has no element {}", obj.type_name(), py_str(key)));
    }
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", obj.type_name(), py_str(key)));
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto opt = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return need_int(v, "slice indices");
  };
  const int64_t st = opt(step).value_or(1);
  if (st == 0) throw RenderException("slice step cannot be zero");
  std::vector<Value> items;
  const bool is_str = obj.is_string();
  if (is_str) {
    for (auto& c : utf8_chars(obj.str())) items.emplace_back(json(c));
  } else if (obj.is_array()) {
    for (const auto& e : obj.j()) items.emplace_back(e);
  } else {
    throw RenderException(fmt::format("'{}' object is not subscriptable", obj.type_name()));
  }
  const int64_t n = static_cast<int64_t>(items.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t a = clamp(opt(start), st > 0 ? 0 : n - 1), b = clamp(opt(stop), st > 0 ? n : -1);
  std::string s;
  json arr = json::array();
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
    if (is_str)
      s += items[static_cast<size_t>(i)].str();
    else
      arr.push_back(items[static_cast<size_t>(i)].j());
  }
  return is_str ? Value(json(s)) : Value(std::move(arr));
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (v.is_data()) {
    const json& j = v.j();
    if (j.is_array()) {
      for (const auto& e : j) out.emplace_back(e);
      return out;
    }
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) out.emplace_back(json(it.key()));
      return out;
    }
    if (j.is_string()) {
      for (auto& c : utf8_chars(j.get_ref<const std::string&>())) out.emplace_back(json(c));
      return out;
    }
  }
  throw RenderException(fmt::format("'{}' object is not iterable", v.type_name()));
}

namespace {

bool is_num(const Value& v) { return v.is_data() && (v.j().is_number() || v.j().is_boolean()); }
bool is_intish(const Value& v) { return v.is_data() && (v.j().is_number_integer() || v.j().is_boolean()); }

int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(json(py_str(a) + py_str(b)));
  if (op == "==") return Value(json(py_equal(a, b)));
  if (op == "!=") return Value(json(!py_equal(a, b)));
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_undefined()) {
      found = false;
    } else if (b.is_string()) {
      found = b.str().find(need_str(a, "'in <string>' requires string as left operand")) != std::string::npos;
    } else if (b.is_array()) {
      for (const auto& e : b.j()) found = found || py_equal(a, Value(e));
    } else if (b.is_mapping()) {
      found = a.is_string() && b.j().contains(a.str());
    } else if (b.is_object()) {
      found = a.is_string() && b.obj().attrs.count(a.str());
    } else {
      throw RenderException(fmt::format("argument of type '{}' is not iterable", b.type_name()));
    }
    return Value(json(found != (op == "notin")));
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    if (!a.is_data() || !b.is_data()) throw RenderException("unorderable values");
    const int c = py_compare(a.j(), b.j());
    return Value(json(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0));
  }
  if (is_num(a) && is_num(b)) {
    const bool ints = is_intish(a) && is_intish(b);
    const double x = as_double(a.j()), y = as_double(b.j());
    const int64_t i = ints ? need_int(a, op.c_str()) : 0, k = ints ? need_int(b, op.c_str()) : 0;
    if (op == "+") return ints ? Value(json(i + k)) : Value(json(x + y));
    if (op == "-") return ints ? Value(json(i - k)) : Value(json(x - y));
    if (op == "*") return ints ? Value(json(i * k)) : Value(json(x * y));
    if (op == "/") {
      if (y == 0) throw RenderException("division by zero");
      return Value(json(x / y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) throw RenderException(op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
      if (ints) return Value(json(op == "//" ? floordiv(i, k) : i - floordiv(i, k) * k));
      const double q = std::floor(x / y);
      return op == "//" ? Value(json(q)) : Value(json(x - q * y));
    }
    if (op == "**") {
      if (ints && k >= 0) {
        int64_t r = 1;
        for (int64_t t = 0; t < k; ++t) r *= i;
        return Value(json(r));
      }
      return Value(json(std::pow(x, y)));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value(json(a.str() + b.str()));
  if (op == "+" && a.is_array() && b.is_array()) {
    json r = a.j();
    for (const auto& e : b.j()) r.push_back(e);
    return Value(std::move(r));
  }
  if (op == "*" && ((a.is_string() || a.is_array()) && is_intish(b))) {
    const int64_t n = need_int(b, "*");
    if (a.is_string()) {
      std::string r;
      for (int64_t t = 0; t < n; ++t) r += a.str();
      return Value(json(r));
    }
    json r = json::array();
    for (int64_t t = 0; t < n; ++t)
      for (const auto& e : a.j()) r.push_back(e);
    return Value(std::move(r));
  }
  if (op == "*" && is_intish(a) && (b.is_string() || b.is_array())) return binary_op("*", b, a);
  if (op == "%" && a.is_string()) return Value(json(py_percent(a.str(), b)));
  throw RenderException(
      fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

void add_globals(Scope& s, const RenderOptions& opts) {
  using A = const Args&;
  s.vars["range"] = Value::callable("range", [](Interp&, A a) {
    int64_t start = 0, stop = 0, step = 1;
    if (a.pos.size() == 1)
      stop = need_int(a.pos[0], "range");
    else if (a.pos.size() >= 2) {
      start = need_int(a.pos[0], "range");
      stop = need_int(a.pos[1], "range");
      if (a.pos.size() >= 3) step = need_int(a.pos[2], "range");
    } else {
      throw RenderException("range expected at least 1 argument, got 0");
    }
    if (step == 0) throw RenderException("range() arg 3 must not be zero");
    json out = json::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(i);
      if (out.size() > 100000) throw RenderException("range too big");
    }
    return Value(std::move(out));
  });
  s.vars["dict"] = Value::callable("dict", [](Interp&, A a) {
    json out = json::object();
    if (!a.pos.empty() && a.pos[0].is_mapping()) out = a.pos[0].j();
    for (const auto& [k, v] : a.kw) out[k] = to_json(v);
    return Value(std::move(out));
  });
  s.vars["namespace"] = Value::callable("namespace", [](Interp&, A a) {
    auto o = std::make_shared<Object>();
    o->type = "namespace";
    if (!a.pos.empty() && a.pos[0].is_mapping())
      for (auto it = a.pos[0].j().begin(); it != a.pos[0].j().end(); ++it) o->attrs[it.key()] = Value(it.value());
    for (const auto& [k, v] : a.kw) o->attrs[k] = v;
    return Value::object(o);
  });
  s.vars["raise_exception"] = Value::callable("raise_exception", [](Interp&, A a) -> Value {
    throw RenderException(a.pos.empty() ? std::string() : py_str(a.pos[0]), /*raised=*/true);
  });
  std::optional<std::tm> fixed = opts.now;
  s.vars["strftime_now"] = Value::callable("strftime_now", [fixed](Interp&, A a) {
    std::tm tm{};
    if (fixed) {
      tm = *fixed;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    const std::string f = a.pos.empty() ? "" : need_str(a.pos[0], "strftime_now");
    char buf[512];
    const size_t n = f.empty() ? 0 : std::strftime(buf, sizeof buf, f.c_str(), &tm);
    return Value(json(std::string(buf, n)));
  });
}

}  // namespace edgelm::jinja
