// Schema intersection for allOf (see schema_merge.h).
#include "schema/schema_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

#include "schema/schema_path.h"

namespace edgelm::schema {

using ojson = nlohmann::ordered_json;

bool is_annotation(const std::string& key) {
  static const std::set<std::string> keys = {"$schema",  "$id",      "title",      "description", "default",
                                             "examples", "$comment", "deprecated", "readOnly",    "writeOnly"};
  return keys.count(key) > 0;
}

namespace {

std::vector<std::string> type_list(const ojson& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array()) {
    for (const auto& x : t) {
      if (x.is_string()) out.push_back(x.get<std::string>());
    }
  }
  return out;
}

Result<ojson> merge_types(const ojson& a, const ojson& b, const std::string& path) {
  const auto ta = type_list(a), tb = type_list(b);
  std::vector<std::string> out;
  auto has = [](const std::vector<std::string>& v, const std::string& t) {
    return std::find(v.begin(), v.end(), t) != v.end();
  };
  for (const std::string& t : ta) {
    if (has(tb, t) || (t == "integer" && has(tb, "number"))) {
      if (!has(out, t)) out.push_back(t);
    } else if (t == "number" && has(tb, "integer")) {
      if (!has(out, "integer")) out.push_back("integer");
    }
  }
  if (out.empty()) return make_error("unsupported 'allOf' at {}: no value has all the types", path_text(path));
  if (out.size() == 1) return ojson(out[0]);
  return ojson(out);
}

// The constraint one side puts on property `key`: its schema, its additionalProperties schema,
// false, or null for none.
ojson side_constraint(const ojson& s, const std::string& key) {
  if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(key)) {
    return s["properties"][key];
  }
  if (s.contains("additionalProperties")) return s["additionalProperties"];
  return nullptr;
}

}  // namespace

Result<ojson> merge_schemas(const ojson& a_in, const ojson& b_in, const std::string& path, const RefResolver& resolve,
                            int depth) {
  if (depth > 32) return make_error("unsupported 'allOf' at {}: merging recurses too deeply", path_text(path));
  if (a_in == b_in) return a_in;
  if (a_in.is_boolean() && a_in.get<bool>()) return b_in;
  if (b_in.is_boolean() && b_in.get<bool>()) return a_in;
  if (a_in.is_boolean() || b_in.is_boolean()) {
    return make_error("invalid 'allOf' at {}: a 'false' schema can never be satisfied", path_text(path));
  }
  EDGELM_TRY(const ojson a, resolve(a_in, path));
  EDGELM_TRY(const ojson b, resolve(b_in, path));
  if (!a.is_object() || !b.is_object()) return invalid_keyword("allOf", path, "not a schema");
  if ((a.contains("anyOf") || a.contains("oneOf")) && (b.contains("anyOf") || b.contains("oneOf"))) {
    return unsupported_keyword("anyOf", path, "two alternatives ('anyOf'/'oneOf') in one 'allOf' are not supported");
  }

  ojson out = ojson::object();
  std::vector<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.push_back(k);
  for (const auto& [k, v] : b.items()) {
    if (!a.contains(k)) keys.push_back(k);
  }
  const bool objects = a.contains("properties") || b.contains("properties") || a.contains("additionalProperties") ||
                       b.contains("additionalProperties");
  for (const std::string& k : keys) {
    if (is_annotation(k) || k == "$defs" || k == "definitions") continue;
    const bool in_a = a.contains(k), in_b = b.contains(k);
    if (objects && (k == "properties" || k == "additionalProperties")) continue;  // below
    if (!(in_a && in_b)) {
      out[k] = in_a ? a[k] : b[k];
      continue;
    }
    const ojson& va = a[k];
    const ojson& vb = b[k];
    if (va == vb) {
      out[k] = va;
    } else if (k == "type") {
      EDGELM_TRY(out[k], merge_types(va, vb, path));
    } else if (k == "required") {
      ojson r = va;
      for (const auto& x : vb) {
        if (std::find(r.begin(), r.end(), x) == r.end()) r.push_back(x);
      }
      out[k] = r;
    } else if ((k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" ||
                k == "minProperties") &&
               va.is_number() && vb.is_number()) {
      out[k] = va.get<double>() >= vb.get<double>() ? va : vb;
    } else if ((k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" ||
                k == "maxProperties") &&
               va.is_number() && vb.is_number()) {
      out[k] = va.get<double>() <= vb.get<double>() ? va : vb;
    } else if (k == "enum" && va.is_array() && vb.is_array()) {
      ojson e = ojson::array();
      for (const auto& x : va) {
        if (std::find(vb.begin(), vb.end(), x) != vb.end()) e.push_back(x);
      }
      if (e.empty()) return make_error("unsupported 'allOf' at {}: the enums have no value in common", path_text(path));
      out[k] = e;
    } else if (k == "nullable") {
      out[k] = va.is_boolean() && vb.is_boolean() && va.get<bool>() && vb.get<bool>();
    } else if (k == "items" || k == "additionalItems") {
      EDGELM_TRY(out[k], merge_schemas(va, vb, path_join(path, k), resolve, depth + 1));
    } else {
      return unsupported_keyword(k, path, "different values in 'allOf' branches cannot be combined");
    }
  }
  if (objects) {
    std::vector<std::string> names;
    for (const ojson* s : {&a, &b}) {
      if (!s->contains("properties")) continue;
      if (!(*s)["properties"].is_object()) return invalid_keyword("properties", path, "not an object");
      for (const auto& [k, v] : (*s)["properties"].items()) {
        if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
      }
    }
    ojson props = ojson::object();
    for (const std::string& n : names) {
      const ojson ca = side_constraint(a, n), cb = side_constraint(b, n);
      const bool forbidden = (ca.is_boolean() && !ca.get<bool>()) || (cb.is_boolean() && !cb.get<bool>());
      if (forbidden) {
        props[n] = false;
      } else if (ca.is_null() || cb.is_null()) {
        props[n] = ca.is_null() ? (cb.is_null() ? ojson(true) : cb) : ca;
      } else {
        EDGELM_TRY(props[n], merge_schemas(ca, cb, path_join(path_join(path, "properties"), n), resolve, depth + 1));
      }
    }
    if (!props.empty()) out["properties"] = props;
    const bool ha = a.contains("additionalProperties"), hb = b.contains("additionalProperties");
    if (ha && hb) {
      const ojson& xa = a["additionalProperties"];
      const ojson& xb = b["additionalProperties"];
      if ((xa.is_boolean() && !xa.get<bool>()) || (xb.is_boolean() && !xb.get<bool>())) {
        out["additionalProperties"] = false;
      } else {
        EDGELM_TRY(out["additionalProperties"],
                   merge_schemas(xa, xb, path_join(path, "additionalProperties"), resolve, depth + 1));
      }
    } else if (ha || hb) {
      out["additionalProperties"] = ha ? a["additionalProperties"] : b["additionalProperties"];
    }
  }
  return out;
}

}  // namespace edgelm::schema
