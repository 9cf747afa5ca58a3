// Keyword dispatch, objects, arrays, $ref and combinators (see schema_compiler.h).
#include "schema/schema_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "schema/gbnf_text.h"
#include "schema/json_schema_grammar.h"
#include "schema/schema_merge.h"
#include "schema/schema_numbers.h"
#include "schema/schema_path.h"
#include "schema/schema_strings.h"

namespace edgelm::schema {

using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

const std::set<std::string>& general_keywords() {
  static const std::set<std::string> k = {"type",  "enum", "const", "anyOf",       "oneOf",
                                          "allOf", "$ref", "$defs", "definitions", "nullable"};
  return k;
}
const std::set<std::string>& object_keywords() {
  static const std::set<std::string> k = {"properties", "required", "additionalProperties", "minProperties",
                                          "maxProperties"};
  return k;
}
const std::set<std::string>& array_keywords() {
  static const std::set<std::string> k = {"items",    "prefixItems", "additionalItems",
                                          "minItems", "maxItems",    "uniqueItems"};
  return k;
}
const std::set<std::string>& string_keywords() {
  static const std::set<std::string> k = {"minLength", "maxLength", "pattern", "format"};
  return k;
}
const std::set<std::string>& number_keywords() {
  static const std::set<std::string> k = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return k;
}

bool has_any(const ojson& s, const std::set<std::string>& keys) {
  for (const auto& [k, v] : s.items()) {
    if (keys.count(k)) return true;
  }
  return false;
}

// Non-annotation keys other than `skip` and $defs/definitions.
ojson constraining_siblings(const ojson& s, std::initializer_list<const char*> skip) {
  ojson out = ojson::object();
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (is_annotation(k) || k == "$defs" || k == "definitions") continue;
    if (std::any_of(skip.begin(), skip.end(), [&k](const char* x) { return k == x; })) continue;
    out[k] = it.value();
  }
  return out;
}

bool is_rule_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

std::string join(const std::vector<std::string>& alts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? sep : "") + alts[i];
  return out;
}

std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// {min,max} repetition of `g` (a parenthesized group or a rule name); "" for {0,0}.
std::string repeat(const std::string& g, size_t min, size_t max) {
  if (max == 0) return "";
  if (max == kUnbounded) {
    if (min == 0) return g + "*";
    if (min == 1) return g + "+";
    return fmt::format("{}{{{},}}", g, min);
  }
  if (min == 0 && max == 1) return g + "?";
  if (min == max) return min == 1 ? g : fmt::format("{}{{{}}}", g, min);
  return fmt::format("{}{{{},{}}}", g, min, max);
}

bool value_has_type(const ojson& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()));
  }
  return false;
}

Result<std::optional<size_t>> read_count(const ojson& s, const char* key, const std::string& path) {
  const auto it = s.find(key);
  if (it == s.end()) return std::optional<size_t>();
  if (!it->is_number() || it->get<double>() < 0 || it->get<double>() != std::floor(it->get<double>())) {
    return invalid_keyword(key, path, "not a non-negative integer");
  }
  if (it->get<double>() > 100000) return unsupported_keyword(key, path, "counts above 100000 are not supported");
  return std::optional<size_t>(static_cast<size_t>(it->get<double>()));
}

// "~1" -> "/", "~0" -> "~", %XX -> byte (a URI fragment).
std::string unescape_pointer_token(const std::string& t) {
  std::string pct;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '%' && i + 2 < t.size() + 0 && std::isxdigit(static_cast<unsigned char>(t[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(t[i + 2]))) {
      pct += static_cast<char>(std::stoi(t.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      pct += t[i];
    }
  }
  std::string out;
  for (size_t i = 0; i < pct.size(); ++i) {
    if (pct[i] == '~' && i + 1 < pct.size() && (pct[i + 1] == '0' || pct[i + 1] == '1')) {
      out += pct[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += pct[i];
    }
  }
  return out;
}

}  // namespace

Result<std::string> SchemaCompiler::compile(const ojson& schema, const std::string& path, const std::string& name) {
  if (depth_ > 64) return make_error("unsupported schema at {}: nested too deeply", path_text(path));
  ++depth_;
  auto r = compile_checked(schema, path, name);
  --depth_;
  return r;
}

Result<ojson> SchemaCompiler::resolve(const ojson& s, const std::string& path) {
  ojson cur = s;
  for (int hops = 0; cur.is_object() && cur.contains("$ref"); ++hops) {
    if (hops > 32) return invalid_keyword("$ref", path, "a cycle of references");
    const ojson siblings = constraining_siblings(cur, {"$ref"});
    if (!siblings.empty()) break;  // merged by compile() when it gets there
    if (!cur["$ref"].is_string()) return invalid_keyword("$ref", path, "not a string");
    const std::string ref = cur["$ref"].get<std::string>();
    if (ref.empty() || ref[0] != '#') {
      return unsupported_keyword("$ref", path,
                                 fmt::format("only local references ('#...') are supported, not '{}'", ref));
    }
    const ojson* at = &root_;
    size_t i = 1;
    while (i < ref.size()) {
      if (ref[i] != '/') return unsupported_keyword("$ref", path, fmt::format("'{}' is not a JSON pointer", ref));
      const size_t next = std::min(ref.find('/', i + 1), ref.size());
      const std::string token = unescape_pointer_token(ref.substr(i + 1, next - i - 1));
      if (at->is_object() && at->contains(token)) {
        at = &(*at)[token];
      } else if (at->is_array() && !token.empty() && std::all_of(token.begin(), token.end(), ::isdigit) &&
                 std::stoul(token) < at->size()) {
        at = &(*at)[std::stoul(token)];
      } else {
        return invalid_keyword("$ref", path, fmt::format("'{}' does not resolve", ref));
      }
      i = next;
    }
    cur = *at;
  }
  return cur;
}

Result<std::string> SchemaCompiler::compile_ref(const std::string& ref, const std::string& path) {
  const auto it = refs_.find(ref);
  if (it != refs_.end()) return it->second;
  EDGELM_TRY(const ojson target, resolve(ojson{{"$ref", ref}}, path));
  std::string hint = ref.substr(ref.rfind('/') == std::string::npos ? 0 : ref.rfind('/') + 1);
  if (hint.empty() || hint == "#") hint = "root";
  const std::string rule = b_.reserve_rule(hint);
  refs_[ref] = rule;
  EDGELM_TRY(const std::string body, compile(target, ref.size() > 1 ? ref.substr(1) : "", hint));
  b_.set_rule(rule, body);
  return rule;
}

Result<std::string> SchemaCompiler::compile_checked(const ojson& s, const std::string& path, const std::string& name) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return b_.json_value_rule();
    return make_error("invalid schema 'false' at {}: it can never be satisfied", path_text(path));
  }
  if (!s.is_object()) return make_error("invalid schema at {}: not an object or a boolean", path_text(path));
  for (const auto& [k, v] : s.items()) {
    if (is_annotation(k) || general_keywords().count(k) || object_keywords().count(k) || string_keywords().count(k) ||
        number_keywords().count(k)) {
      continue;
    }
    if (array_keywords().count(k)) {
      if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>())) {
        return unsupported_keyword(k, path, "uniqueness cannot be enforced by a grammar");
      }
      continue;
    }
    return unsupported_keyword(k, path);
  }

  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) return invalid_keyword("nullable", path, "not a boolean");
    ojson rest = s;
    rest.erase("nullable");
    EDGELM_TRY(const std::string inner, compile(rest, path, name));
    if (!s["nullable"].get<bool>()) return inner;
    return b_.intern_rule(name, inner + " | " + b_.null_rule());
  }
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) return invalid_keyword("$ref", path, "not a string");
    const ojson siblings = constraining_siblings(s, {"$ref"});
    if (siblings.empty()) return compile_ref(s["$ref"].get<std::string>(), path);
    auto resolver = [this](const ojson& x, const std::string& p) { return resolve(x, p); };
    EDGELM_TRY(const ojson target, resolve(ojson{{"$ref", s["$ref"]}}, path));
    EDGELM_TRY(const ojson merged, merge_schemas(target, siblings, path, resolver));
    return compile(merged, path, name);
  }
  if (s.contains("allOf")) {
    const ojson& all = s["allOf"];
    if (!all.is_array() || all.empty()) return invalid_keyword("allOf", path, "not a non-empty array");
    auto resolver = [this](const ojson& x, const std::string& p) { return resolve(x, p); };
    ojson merged = constraining_siblings(s, {"allOf"});
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string p = path_join(path_join(path, "allOf"), std::to_string(i));
      ojson branch = all[i];
      if (branch.is_object() && branch.contains("allOf")) {  // nested allOf: merge its branches first
        ojson inner = constraining_siblings(branch, {"allOf"});
        if (!branch["allOf"].is_array()) return invalid_keyword("allOf", p, "not a non-empty array");
        for (const auto& x : branch["allOf"]) {
          EDGELM_TRY(inner, merge_schemas(inner, x, p, resolver));
        }
        branch = inner;
      }
      EDGELM_TRY(merged, merge_schemas(merged, branch, p, resolver));
    }
    return compile(merged, path, name);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) {
    if (s.contains("anyOf") && s.contains("oneOf")) {
      return unsupported_keyword("oneOf", path, "'anyOf' and 'oneOf' in one schema are not supported");
    }
    return compile_alternatives(s, s.contains("anyOf") ? "anyOf" : "oneOf", path, name);
  }
  if (s.contains("enum") || s.contains("const")) return compile_enum(s, path, name);

  std::vector<std::string> types;
  if (s.contains("type")) {
    const ojson& t = s["type"];
    std::vector<ojson> list;
    if (t.is_array()) {
      list.assign(t.begin(), t.end());
    } else {
      list.push_back(t);
    }
    if (list.empty()) return invalid_keyword("type", path, "an empty list of types");
    static const std::set<std::string> known = {"object", "array", "string", "number", "integer", "boolean", "null"};
    for (const ojson& x : list) {
      if (!x.is_string() || !known.count(x.get<std::string>())) {
        return invalid_keyword("type", path, fmt::format("unknown type {}", x.dump()));
      }
      if (std::find(types.begin(), types.end(), x.get<std::string>()) == types.end())
        types.push_back(x.get<std::string>());
    }
    // number covers integer
    if (std::find(types.begin(), types.end(), "number") != types.end()) {
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
    }
  } else {
    if (!has_any(s, object_keywords()) && !has_any(s, array_keywords()) && !has_any(s, string_keywords()) &&
        !has_any(s, number_keywords())) {
      return b_.json_value_rule();
    }
    types = {"object", "array", "string", "number", "boolean", "null"};
  }
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    EDGELM_TRY(std::string r, compile_type(t, s, path, types.size() > 1 ? name + "-" + t : name));
    alts.push_back(std::move(r));
  }
  if (alts.size() == 1) return alts[0];
  return b_.intern_rule(name, join(alts, " | "));
}

Result<std::string> SchemaCompiler::compile_alternatives(const ojson& s, const std::string& key,
                                                         const std::string& path, const std::string& name) {
  const ojson& list = s[key];
  if (!list.is_array() || list.empty()) return invalid_keyword(key, path, "not a non-empty array");
  const ojson siblings = constraining_siblings(s, {key.c_str()});
  auto resolver = [this](const ojson& x, const std::string& p) { return resolve(x, p); };
  std::vector<std::string> alts;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = path_join(path_join(path, key), std::to_string(i));
    const std::string n = fmt::format("{}-{}", name, i);
    if (list[i].is_boolean() && !list[i].get<bool>()) continue;  // a false branch adds nothing
    if (siblings.empty()) {
      EDGELM_TRY(std::string r, compile(list[i], p, n));
      alts.push_back(std::move(r));
    } else {
      EDGELM_TRY(const ojson merged, merge_schemas(siblings, list[i], p, resolver));
      EDGELM_TRY(std::string r, compile(merged, p, n));
      alts.push_back(std::move(r));
    }
  }
  if (alts.empty()) return invalid_keyword(key, path, "every branch is 'false'");
  if (alts.size() == 1) return alts[0];
  return b_.intern_rule(name, join(alts, " | "));
}

Result<std::string> SchemaCompiler::compile_enum(const ojson& s, const std::string& path, const std::string& name) {
  for (const auto& [k, v] : s.items()) {
    if (is_annotation(k) || k == "type" || k == "enum" || k == "const" || k == "$defs" || k == "definitions") continue;
    return unsupported_keyword(
        k, path, fmt::format("'{}' together with '{}' is not supported", k, s.contains("enum") ? "enum" : "const"));
  }
  std::vector<ojson> values;
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty()) return invalid_keyword("enum", path, "not a non-empty array");
    for (const auto& v : s["enum"]) {
      if (!s.contains("const") || v == s["const"]) values.push_back(v);
    }
  } else {
    values.push_back(s["const"]);
  }
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string()) types.push_back(s["type"].get<std::string>());
    if (s["type"].is_array()) {
      for (const auto& t : s["type"]) {
        if (t.is_string()) types.push_back(t.get<std::string>());
      }
    }
    std::vector<ojson> kept;
    for (const auto& v : values) {
      if (std::any_of(types.begin(), types.end(), [&](const std::string& t) { return value_has_type(v, t); })) {
        kept.push_back(v);
      }
    }
    values = std::move(kept);
  }
  const char* key = s.contains("enum") ? "enum" : "const";
  if (values.empty()) return invalid_keyword(key, path, "no value satisfies the schema");
  std::vector<std::string> alts;
  for (const auto& v : values) {
    std::string text;
    try {
      text = v.dump();
    } catch (const std::exception& e) {
      return invalid_keyword(key, path, "a string that is not valid UTF-8");
    }
    const std::string lit = gbnf_literal(text);
    if (std::find(alts.begin(), alts.end(), lit) == alts.end()) alts.push_back(lit);
  }
  return b_.intern_rule(name, join(alts, " | "));
}

Result<std::string> SchemaCompiler::compile_type(const std::string& type, const ojson& s, const std::string& path,
                                                 const std::string& name) {
  if (type == "null") return b_.null_rule();
  if (type == "boolean") return b_.boolean_rule();
  if (type == "string") {
    if (!has_any(s, string_keywords())) return b_.string_rule();
    EDGELM_TRY(std::string body, string_gbnf(b_, s, path));
    return is_rule_name(body) ? body : b_.intern_rule(name, std::move(body));
  }
  if (type == "number" || type == "integer") return compile_number(type == "integer", s, path, name);
  if (type == "object") return compile_object(s, path, name);
  return compile_array(s, path, name);
}

Result<std::string> SchemaCompiler::compile_number(bool integer, const ojson& s, const std::string& path,
                                                   const std::string& name) {
  std::optional<NumberBound> lo, hi;
  std::string lo_key, hi_key;
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    if (!s.contains(k)) continue;
    const ojson& v = s[k];
    const bool is_min = k[0] == 'm' ? std::string(k) == "minimum" : std::string(k) == "exclusiveMinimum";
    if (v.is_boolean()) {  // draft 4: makes minimum / maximum exclusive
      if (std::string(k).rfind("exclusive", 0) != 0) return invalid_keyword(k, path, "not a number");
      if (!v.get<bool>()) continue;
      const char* base = is_min ? "minimum" : "maximum";
      if (!s.contains(base)) return invalid_keyword(k, path, fmt::format("'true' needs '{}'", base));
      continue;  // applied below
    }
    if (!v.is_number()) return invalid_keyword(k, path, "not a number");
    const double x = v.get<double>();
    if (!std::isfinite(x)) return invalid_keyword(k, path, "not a finite number");
    if (!integer && x != std::floor(x)) {
      return unsupported_keyword(k, path,
                                 fmt::format("a bound of type 'number' must be a whole number (got {})", v.dump()));
    }
    const bool excl = std::string(k).rfind("exclusive", 0) == 0;
    auto& slot = is_min ? lo : hi;
    auto& slot_key = is_min ? lo_key : hi_key;
    const bool stricter = !slot || (is_min ? x > slot->value : x < slot->value) || (x == slot->value && excl);
    if (stricter) slot = NumberBound{x, excl}, slot_key = k;
  }
  for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (s.contains(k) && s[k].is_boolean() && s[k].get<bool>()) {
      auto& slot = std::string(k) == "exclusiveMinimum" ? lo : hi;
      const double base = s[std::string(k) == "exclusiveMinimum" ? "minimum" : "maximum"].get<double>();
      if (slot && slot->value == base) slot->exclusive = true;
    }
  }
  if (!lo && !hi) return integer ? b_.integer_rule() : b_.number_rule();
  const std::string key = !lo_key.empty() ? lo_key : hi_key;
  if (integer) {
    auto range = integer_bounds(lo, hi);
    if (!range.ok()) return invalid_keyword(key, path, range.error().message);
    return b_.intern_rule(name, int_range_gbnf(range->first, range->second));
  }
  auto body = bounded_number_gbnf(lo, hi);
  if (!body.ok()) return invalid_keyword(key, path, body.error().message);
  return b_.intern_rule(name, std::move(body).value());
}

Result<std::string> SchemaCompiler::compile_object(const ojson& s, const std::string& path, const std::string& name) {
  if (!has_any(s, object_keywords()) && b_.options().extra_properties_by_default) return b_.json_object_rule();
  struct Prop {
    std::string key;
    ojson schema;
    bool required = false;
    std::string path;
  };
  std::vector<Prop> props;
  std::vector<std::string> declared;  // every declared name, also those whose schema is false
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) return invalid_keyword("properties", path, "not an object");
    for (const auto& [k, v] : s["properties"].items()) {
      props.push_back(Prop{k, v, false, path_join(path_join(path, "properties"), k)});
      declared.push_back(k);
    }
  }
  // additionalProperties: false (none), true (any value) or a schema.
  ojson extra = b_.options().extra_properties_by_default ? ojson(true) : ojson(false);
  if (s.contains("additionalProperties")) extra = s["additionalProperties"];
  if (!extra.is_boolean() && !extra.is_object()) return invalid_keyword("additionalProperties", path, "not a schema");
  const bool extras = !(extra.is_boolean() && !extra.get<bool>());
  if (s.contains("required")) {
    if (!s["required"].is_array()) return invalid_keyword("required", path, "not an array of strings");
    for (const auto& r : s["required"]) {
      if (!r.is_string()) return invalid_keyword("required", path, "not an array of strings");
      const std::string key = r.get<std::string>();
      auto it = std::find_if(props.begin(), props.end(), [&](const Prop& p) { return p.key == key; });
      if (it == props.end()) {
        if (!extras) {
          return invalid_keyword("required", path,
                                 fmt::format("'{}' is required but 'additionalProperties' forbids it", key));
        }
        props.push_back(Prop{key, extra, true, path_join(path, "additionalProperties")});
        declared.push_back(key);
      } else {
        it->required = true;
      }
    }
  }
  // A property whose schema is false may only be absent.
  std::vector<Prop> kept;
  for (auto& p : props) {
    if (p.schema.is_boolean() && !p.schema.get<bool>()) {
      if (p.required)
        return invalid_keyword("required", path, fmt::format("'{}' is required but its schema is false", p.key));
      continue;
    }
    kept.push_back(std::move(p));
  }
  props = std::move(kept);

  size_t n_required = 0;
  for (const auto& p : props) n_required += p.required;
  EDGELM_TRY(const auto min_props, read_count(s, "minProperties", path));
  EDGELM_TRY(const auto max_props, read_count(s, "maxProperties", path));
  const size_t extra_min = 0;
  size_t extra_max = kUnbounded;
  const size_t most = extras ? kUnbounded : props.size();
  // minProperties beyond the required ones cannot be counted on: a JSON object may repeat an
  // additional key, and the parsed object then holds fewer properties than were written.
  if (min_props && *min_props > n_required) {
    return unsupported_keyword("minProperties", path, "only a count implied by 'required' is supported");
  }
  if (max_props && *max_props < most) {
    if (*max_props < n_required)
      return invalid_keyword("maxProperties", path, "below the number of required properties");
    if (!(n_required == props.size())) {
      return unsupported_keyword("maxProperties", path,
                                 "only a count implied by the declared properties, or on objects whose declared "
                                 "properties are all required, is supported");
    }
    extra_max = *max_props - n_required;
  }

  const std::string ws = b_.ws_rule();
  std::vector<std::string> kv;
  for (size_t i = 0; i < props.size(); ++i) {
    EDGELM_TRY(const std::string value, compile(props[i].schema, props[i].path, name + "-" + props[i].key));
    kv.push_back(b_.intern_rule(
        name + "-" + props[i].key + "-kv",
        fmt::format("{} {} \":\" {} {} {}", gbnf_literal(ojson(props[i].key).dump()), ws, ws, value, ws)));
  }
  std::string extra_first, extra_rest;
  if (extras && extra_max > 0) {
    EDGELM_TRY(const std::string value, compile(extra, path_join(path, "additionalProperties"), name + "-additional"));
    const std::string key = declared.empty() ? extra_key_gbnf(b_) : key_not_in_gbnf(b_, declared, name);
    const std::string one =
        b_.intern_rule(name + "-additional-kv", fmt::format("{} {} \":\" {} {} {}", key, ws, ws, value, ws));
    const std::string next = "(\",\" " + ws + " " + one + ")";
    extra_rest = repeat(next, extra_min, extra_max);
    const std::string first =
        seq(one, repeat(next, extra_min ? extra_min - 1 : 0, extra_max == kUnbounded ? kUnbounded : extra_max - 1));
    extra_first = extra_min ? first : "(" + first + ")?";
  }
  // rest(i): properties i.. after something was written (each starts with ','); first(i): the
  // same when nothing was written yet. Rules so that shared tails are not copied.
  std::vector<std::string> rest(props.size() + 1), first(props.size() + 1);
  rest[props.size()] = extra_rest;
  first[props.size()] = extra_first;
  for (size_t i = props.size(); i-- > 0;) {
    const std::string comma_kv = "\",\" " + ws + " " + kv[i];
    const std::string r = props[i].required ? seq(comma_kv, rest[i + 1]) : seq("(" + comma_kv + ")?", rest[i + 1]);
    rest[i] = b_.intern_rule(fmt::format("{}-rest-{}", name, i), r);
    std::string f = seq(kv[i], rest[i + 1]);
    if (!props[i].required) {
      f = first[i + 1].empty() ? "(" + f + ")?" : f + " | " + first[i + 1];
    }
    first[i] = b_.intern_rule(fmt::format("{}-first-{}", name, i), f);
  }
  return b_.intern_rule(name, seq(seq("\"{\" " + ws, first[0]), "\"}\""));
}

Result<std::string> SchemaCompiler::compile_array(const ojson& s, const std::string& path, const std::string& name) {
  if (!has_any(s, array_keywords()))
    return b_.intern_rule("array", "\"[\" " + b_.ws_rule() + " (" + b_.json_value_rule() + " " + b_.ws_rule() +
                                       " (\",\" " + b_.ws_rule() + " " + b_.json_value_rule() + " " + b_.ws_rule() +
                                       ")*)? \"]\"");
  if (s.contains("contains")) return unsupported_keyword("contains", path);
  std::vector<ojson> prefix;
  std::vector<std::string> prefix_paths;
  ojson rest = true;
  std::string rest_path = path_join(path, "items");
  const ojson* items = s.contains("items") ? &s["items"] : nullptr;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return invalid_keyword("prefixItems", path, "not an array");
    for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
      prefix.push_back(s["prefixItems"][i]);
      prefix_paths.push_back(path_join(path_join(path, "prefixItems"), std::to_string(i)));
    }
    if (s.contains("additionalItems"))
      return unsupported_keyword("additionalItems", path, "use 'items' with 'prefixItems'");
  }
  if (items && items->is_array()) {  // draft 4..2019 tuple form
    if (s.contains("prefixItems")) return invalid_keyword("items", path, "an array together with 'prefixItems'");
    for (size_t i = 0; i < items->size(); ++i) {
      prefix.push_back((*items)[i]);
      prefix_paths.push_back(path_join(path_join(path, "items"), std::to_string(i)));
    }
    if (s.contains("additionalItems")) rest = s["additionalItems"], rest_path = path_join(path, "additionalItems");
  } else if (items) {
    rest = *items;
    if (s.contains("additionalItems") && !s.contains("prefixItems")) {
      // ignored by JSON Schema when items is a schema
    }
  } else if (s.contains("additionalItems") && !s.contains("prefixItems")) {
    // additionalItems without a tuple applies to nothing
  }
  if (!rest.is_boolean() && !rest.is_object()) return invalid_keyword("items", path, "not a schema");
  const bool has_rest = !(rest.is_boolean() && !rest.get<bool>());
  EDGELM_TRY(const auto min_items, read_count(s, "minItems", path));
  EDGELM_TRY(const auto max_items_opt, read_count(s, "maxItems", path));
  const size_t min_len = min_items.value_or(0);
  size_t max_len = max_items_opt.value_or(kUnbounded);
  if (!has_rest) max_len = std::min(max_len, prefix.size());
  // A false prefix item ends the array before it.
  for (size_t i = 0; i < prefix.size() && i < max_len; ++i) {
    if (prefix[i].is_boolean() && !prefix[i].get<bool>()) max_len = i;
  }
  if (min_len > max_len) return invalid_keyword("minItems", path, "no array of that length satisfies the schema");

  const std::string ws = b_.ws_rule();
  std::vector<std::string> item;  // item[i] for i < prefix.size(); then the rest
  for (size_t i = 0; i < prefix.size() && i < max_len; ++i) {
    EDGELM_TRY(const std::string v, compile(prefix[i], prefix_paths[i], fmt::format("{}-{}", name, i)));
    item.push_back(b_.intern_rule(fmt::format("{}-item-{}", name, i), v + " " + ws));
  }
  std::string rest_item;
  if (has_rest && max_len > prefix.size()) {
    EDGELM_TRY(const std::string v, compile(rest, rest_path, name + "-item"));
    rest_item = b_.intern_rule(name + "-item", v + " " + ws);
  }
  auto item_at = [&](size_t i) { return i < prefix.size() ? item[i] : rest_item; };
  // tail(i): elements i.. after element i-1.
  std::string tail;
  {
    const size_t k = std::min(prefix.size(), max_len);
    if (max_len > prefix.size()) {
      const size_t from = std::max<size_t>(k, 1);
      const size_t need = min_len > from ? min_len - from : 0;
      const size_t upto = max_len == kUnbounded ? kUnbounded : max_len - from;
      tail = repeat("(\",\" " + ws + " " + rest_item + ")", need, upto);
    }
    for (size_t i = k; i-- > 1;) {
      const std::string elem = seq("\",\" " + ws + " " + item[i], tail);
      tail = i < min_len ? elem : "(" + elem + ")?";
    }
  }
  std::string body = "\"[\" " + ws;
  if (max_len > 0) {
    const std::string elems = seq(item_at(0), tail);
    body = seq(body, min_len > 0 ? elems : "(" + elems + ")?");
  }
  return b_.intern_rule(name, body + " \"]\"");
}

}  // namespace edgelm::schema
