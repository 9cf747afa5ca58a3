// GbnfBuilder (rule bookkeeping, shared building blocks) and the whole-grammar entry points (see
// json_schema_grammar.h). The schema walking itself is in schema_compiler.cpp.
#include "schema/json_schema_grammar.h"

#include <fmt/format.h>

#include "schema/schema_compiler.h"
#include "schema/schema_numbers.h"
#include "schema/schema_path.h"
#include "schema/schema_strings.h"

namespace edgelm::schema {

namespace {

std::string sanitize(std::string_view hint) {
  std::string out;
  for (const char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (ok) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 48) out.resize(48);
  if (out.empty()) out = "rule";
  return out;
}

}  // namespace

std::string GbnfBuilder::unique_name(std::string_view hint) {
  std::string base = sanitize(hint);
  if (base == "root") base = "root-value";  // "root" is the grammar's start rule
  std::string name = base;
  for (int n = 2; names_.count(name); ++n) name = fmt::format("{}-{}", base, n);
  names_.insert(name);
  return name;
}

std::string GbnfBuilder::reserve_rule(std::string_view name) {
  std::string n = unique_name(name);
  rules_.emplace_back(n, "");
  return n;
}

void GbnfBuilder::set_rule(const std::string& name, std::string body) {
  for (auto& r : rules_) {
    if (r.first == name) {
      r.second = std::move(body);
      return;
    }
  }
  EDGELM_CHECK(false, "set_rule of an unreserved rule ", name);
}

std::string GbnfBuilder::add_rule(std::string_view name, std::string body) {
  std::string n = unique_name(name);
  rules_.emplace_back(n, std::move(body));
  return n;
}

std::string GbnfBuilder::intern_rule(std::string_view name, std::string body) {
  const auto it = by_body_.find(body);
  if (it != by_body_.end()) return it->second;
  std::string n = add_rule(name, body);
  by_body_.emplace(std::move(body), n);
  return n;
}

std::string GbnfBuilder::shared(const std::string& key, const std::string& body) {
  const auto it = shared_.find(key);
  if (it != shared_.end()) return it->second;
  std::string n = intern_rule(key, body);
  shared_[key] = n;
  return n;
}

// One space, or a newline and an indentation of at most 12: pretty-printed JSON fits, and a
// small model sampled at temperature 1 cannot spend its tokens on blanks.
std::string GbnfBuilder::ws_rule() { return shared("ws", "(\" \" | \"\\n\" [ \\t]{0,12})?"); }
std::string GbnfBuilder::string_char_rule() { return shared("char", string_char_gbnf()); }
std::string GbnfBuilder::string_rule() {
  const std::string ch = string_char_rule();
  return shared("string", fmt::format("\"\\\"\" {}* \"\\\"\"", ch));
}
std::string GbnfBuilder::number_rule() { return shared("number", number_gbnf()); }
std::string GbnfBuilder::integer_rule() { return shared("integer", integer_gbnf()); }
std::string GbnfBuilder::boolean_rule() { return shared("boolean", "\"true\" | \"false\""); }
std::string GbnfBuilder::null_rule() { return shared("null", "\"null\""); }

std::string GbnfBuilder::json_value_rule() {
  const auto it = shared_.find("value");
  if (it != shared_.end()) return it->second;
  // value, object and array refer to each other: reserve first.
  const std::string value = reserve_rule("value");
  shared_["value"] = value;
  const std::string ws = ws_rule();
  const std::string object = shared(
      "object", fmt::format("\"{{\" {0} ({1} {0} \":\" {0} {2} {0} (\",\" {0} {1} {0} \":\" {0} {2} {0})*)? \"}}\"", ws,
                            string_rule(), value));
  const std::string array = shared("array", fmt::format("\"[\" {0} ({1} {0} (\",\" {0} {1} {0})*)? \"]\"", ws, value));
  set_rule(value, fmt::format("{} | {} | {} | {} | {} | {}", object, array, string_rule(), number_rule(),
                              boolean_rule(), null_rule()));
  return value;
}

std::string GbnfBuilder::json_object_rule() {
  json_value_rule();
  return shared_.at("object");
}

std::string GbnfBuilder::gbnf(std::string_view root_rule) const {
  std::string out = fmt::format("root ::= {}\n", root_rule);
  for (const auto& [name, body] : rules_) out += fmt::format("{} ::= {}\n", name, body);
  return out;
}

Result<std::string> GbnfBuilder::add_schema(const nlohmann::json& schema, std::string_view name) {
  return add_schema(nlohmann::ordered_json(schema), name);
}

Result<std::string> GbnfBuilder::add_schema(const nlohmann::ordered_json& schema, std::string_view name) {
  SchemaCompiler compiler(*this, schema);
  return compiler.compile(schema, "", sanitize(name));
}

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, Options options) {
  return json_schema_to_gbnf(nlohmann::ordered_json(schema), options);
}

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, Options options) {
  GbnfBuilder b(options);
  EDGELM_TRY(const std::string top, b.add_schema(schema, "value"));
  return b.gbnf(top);
}

std::string json_object_gbnf() {
  GbnfBuilder b;
  const std::string top = b.json_object_rule();
  return b.gbnf(top);
}

Result<std::string> response_format_to_gbnf(const nlohmann::ordered_json& rf) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
    return make_error("invalid 'response_format': needs a string 'type'");
  }
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::string();
  if (type == "json_object") return json_object_gbnf();
  if (type != "json_schema") return make_error("unsupported 'response_format' type '{}'", type);
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object()) {
    return make_error("invalid 'response_format': 'json_schema' must be an object");
  }
  const auto& js = rf["json_schema"];
  Options options;
  if (js.contains("strict") && js["strict"].is_boolean() && js["strict"].get<bool>()) {
    options.extra_properties_by_default = false;
  }
  const nlohmann::ordered_json schema = js.contains("schema") ? js["schema"] : nlohmann::ordered_json::object();
  GbnfBuilder b(options);
  std::string hint = js.contains("name") && js["name"].is_string() ? js["name"].get<std::string>() : "value";
  EDGELM_TRY(const std::string top, b.add_schema(schema, hint));
  return b.gbnf(top);
}

Result<std::string> response_format_to_gbnf(const nlohmann::json& rf) {
  return response_format_to_gbnf(nlohmann::ordered_json(rf));
}

}  // namespace edgelm::schema
