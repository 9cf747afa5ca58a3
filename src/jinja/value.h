// Jinja values: the data model of the edgelm_jinja interpreter.
//
// A Value is JSON data (nlohmann::ordered_json: null, booleans, integers, floats, strings,
// arrays, objects in insertion order), jinja2's Undefined, a callable (builtin function, bound
// method or macro) or an object with attributes (namespace(), the loop variable). Conversions
// follow Python/jinja2 exactly where templates can observe them: str() and repr() of every
// JSON value, truthiness, ==, ordering, json.dumps(ensure_ascii=False) as Hugging Face's
// tojson. Strings are UTF-8; lengths, indexing and slicing count code points as Python does.
//
// Invariants: Values are immutable except Object attributes (namespace assignment); copying a
// Value shares its callable/object, never its JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace edgelm::jinja {

using json = nlohmann::ordered_json;

// A template error while rendering; `raised` when the template called raise_exception(msg).
struct RenderException : std::runtime_error {
  RenderException(const std::string& msg, bool raised_ = false) : std::runtime_error(msg), raised(raised_) {}
  bool raised;
};

class Value;
struct Interp;

// Call arguments: positional, then keyword in call order.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* get(size_t i, std::string_view name) const;  // positional i, else keyword `name`
};

struct Callable {
  std::string name;
  std::function<Value(Interp&, const Args&)> fn;
};

struct Object {
  std::string type;  // "namespace", "loop"
  std::map<std::string, Value> attrs;
};

class Value {
 public:
  enum class Kind { undefined, data, callable, object };

  Value() = default;                                      // undefined
  Value(json j) : kind_(Kind::data), j_(std::move(j)) {}  // NOLINT(google-explicit-constructor)
  static Value undefined(std::string hint = {}) {
    Value v;
    v.hint_ = std::move(hint);
    return v;
  }
  static Value callable(std::string name, std::function<Value(Interp&, const Args&)> fn);
  static Value object(std::shared_ptr<Object> o);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_data() const { return kind_ == Kind::data; }
  bool is_callable() const { return kind_ == Kind::callable; }
  bool is_object() const { return kind_ == Kind::object; }
  bool is_string() const { return is_data() && j_.is_string(); }
  bool is_array() const { return is_data() && j_.is_array(); }
  bool is_mapping() const { return is_data() && j_.is_object(); }
  bool is_none() const { return is_data() && j_.is_null(); }
  bool is_bool() const { return is_data() && j_.is_boolean(); }
  bool is_int() const { return is_data() && (j_.is_number_integer()); }
  bool is_number() const { return is_data() && (j_.is_number() || j_.is_boolean()); }  // bool is an int

  const json& j() const { return j_; }
  const std::string& str() const { return j_.get_ref<const std::string&>(); }
  const std::string& hint() const { return hint_; }  // why undefined: "'x' is undefined"
  const Callable& fn() const { return *fn_; }
  Object& obj() const { return *obj_; }

  bool truthy() const;
  // Python's type name as jinja2 error messages print it: "dict object", "str object", ...
  std::string type_name() const;

 private:
  Kind kind_ = Kind::undefined;
  json j_;
  std::string hint_;
  std::shared_ptr<Callable> fn_;
  std::shared_ptr<Object> obj_;
};

// The JSON form of a value inside a list/dict literal or for tojson: undefined -> error.
json to_json(const Value& v);

// Python str(): strings as they are, None/True/False, float repr, repr() of containers;
// undefined prints as "".
std::string py_str(const Value& v);
std::string py_str(const json& j);
std::string py_repr(const json& j);
std::string py_float(double d);
// json.dumps(j, ensure_ascii=False, indent=..., separators=..., sort_keys=...); indent "" with
// has_indent false means no indent.
std::string py_dumps(const json& j, std::optional<std::string> indent, std::string item_sep, std::string key_sep,
                     bool sort_keys);

bool py_equal(const Value& a, const Value& b);
bool py_equal(const json& a, const json& b);
// <0, 0, >0; throws RenderException for unorderable types.
int py_compare(const json& a, const json& b);
double as_double(const json& j);  // int, float or bool

// UTF-8 helpers (invalid bytes count as one code point each).
std::vector<std::string> utf8_chars(std::string_view s);
size_t utf8_length(std::string_view s);

}  // namespace edgelm::jinja
