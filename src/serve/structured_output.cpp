// Structured output in the server (see structured_output.h).
#include "serve/structured_output.h"

#include <list>
#include <mutex>
#include <unordered_map>

#include "schema/json_schema_grammar.h"

namespace edgelm::serve {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kGrammarCacheEntries = 64;

// Compiled grammars by text, least recently used first out. Grammars are immutable and shared.
class GrammarCache {
 public:
  Result<grammar::GrammarPtr> get(const std::string& gbnf) {
    {
      std::lock_guard lock(mu_);
      if (auto it = index_.find(gbnf); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
    }
    Result<grammar::GrammarPtr> g = grammar::parse_gbnf(gbnf, "root");  // outside the lock: may take a while
    if (!g.ok()) return g;
    std::lock_guard lock(mu_);
    if (index_.count(gbnf) == 0) {
      lru_.emplace_front(gbnf, *g);
      index_.emplace(gbnf, lru_.begin());
      if (lru_.size() > kGrammarCacheEntries) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
      }
    }
    return g;
  }

 private:
  std::mutex mu_;
  std::list<std::pair<std::string, grammar::GrammarPtr>> lru_;
  std::unordered_map<std::string, std::list<std::pair<std::string, grammar::GrammarPtr>>::iterator> index_;
};

GrammarCache& grammar_cache() {
  static GrammarCache cache;
  return cache;
}

ApiError bad(const std::string& param, std::string message, const char* code = "invalid_value") {
  return ApiError{400, std::move(message), "invalid_request_error", param, code};
}

std::optional<ApiError> finish(std::string kind, std::string gbnf, const std::string& param,
                               std::optional<OutputConstraint>& out) {
  Result<grammar::GrammarPtr> g = compile_grammar(gbnf);
  if (!g.ok()) return bad(param, fmt::format("'{}': {}", param, g.error().message));
  out = OutputConstraint{std::move(kind), std::move(gbnf), {}, *g};
  return std::nullopt;
}

bool valid_schema_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

std::optional<ApiError> parse_response_format(const json& rf, std::optional<OutputConstraint>& out) {
  if (!rf.is_object()) return bad("response_format", "'response_format' must be an object", "invalid_type");
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string())
    return bad("response_format.type", "'response_format.type' is required: text, json_object or json_schema",
               "missing_field");
  const std::string t = type->get<std::string>();
  for (const auto& [key, value] : rf.items())
    if (key != "type" && key != "json_schema")
      return bad("response_format." + key, fmt::format("unsupported field 'response_format.{}'", key),
                 "unsupported_parameter");
  if (t == "text") return std::nullopt;
  if (t == "json_object") return finish("json_object", schema::json_object_gbnf(), "response_format", out);
  if (t != "json_schema")
    return bad("response_format.type",
               fmt::format("unsupported response_format type '{}' (expected text, json_object or json_schema)", t),
               "unsupported_value");
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object())
    return bad("response_format.json_schema", "'response_format.json_schema' must be an object with a 'schema'",
               "missing_field");
  for (const auto& [key, value] : js->items())
    if (key != "name" && key != "schema" && key != "strict" && key != "description")
      return bad("response_format.json_schema." + key,
                 fmt::format("unsupported field 'response_format.json_schema.{}'", key), "unsupported_parameter");
  if (auto n = js->find("name"); n != js->end() && !(n->is_string() && valid_schema_name(n->get<std::string>())))
    return bad("response_format.json_schema.name",
               "'response_format.json_schema.name' must be 1-64 characters of a-z, A-Z, 0-9, _ and -");
  if (auto s = js->find("strict"); s != js->end() && !s->is_boolean() && !s->is_null())
    return bad("response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean",
               "invalid_type");
  auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null())
    return bad("response_format.json_schema.schema", "'response_format.json_schema.schema' is required",
               "missing_field");
  const bool strict = js->contains("strict") && (*js)["strict"].is_boolean() && (*js)["strict"].get<bool>();
  std::string gbnf;
  if (auto e = schema_gbnf(*schema, strict, "response_format.json_schema.schema", gbnf)) return e;
  return finish("json_schema", std::move(gbnf), "response_format.json_schema.schema", out);
}

}  // namespace

Result<grammar::GrammarPtr> compile_grammar(const std::string& gbnf) { return grammar_cache().get(gbnf); }

json ordered_body(const http::Request& req) {
  json out = json::object();
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return out;
  for (const char* key : {"response_format", "grammar", "tools", "tool_choice", "parallel_tool_calls", "schema"})
    if (auto it = body.find(key); it != body.end()) out[key] = std::move(*it);
  return out;
}

std::optional<ApiError> schema_gbnf(const json& schema, bool strict, const std::string& param, std::string& out) {
  Result<std::string> g = schema::json_schema_to_gbnf(schema, schema::Options{!strict});
  if (!g.ok()) return bad(param, fmt::format("'{}': {}", param, g.error().message), "unsupported_schema");
  out = std::move(*g);
  return std::nullopt;
}

std::optional<ApiError> parse_output_constraint(const json& body, std::optional<OutputConstraint>& out) {
  out.reset();
  auto rf = body.find("response_format");
  auto gr = body.find("grammar");
  const bool has_rf = rf != body.end() && !rf->is_null();
  const bool has_grammar = gr != body.end() && !gr->is_null();
  if (has_rf) {
    if (auto e = parse_response_format(*rf, out)) return e;
  }
  if (!has_grammar) return std::nullopt;
  if (out)
    return bad("grammar", "'grammar' and a JSON 'response_format' cannot be combined: send one of them",
               "invalid_value");
  if (!gr->is_string() || gr->get<std::string>().empty())
    return bad("grammar", "'grammar' must be a non-empty string in GBNF notation", "invalid_type");
  return finish("grammar", gr->get<std::string>(), "grammar", out);
}

std::optional<ApiError> parse_predict_schema(const json& body, std::optional<OutputConstraint>& out) {
  out.reset();
  auto s = body.find("schema");
  if (s == body.end() || s->is_null()) return std::nullopt;
  std::string gbnf;
  if (auto e = schema_gbnf(*s, /*strict=*/false, "schema", gbnf)) return e;
  return finish("json_schema", std::move(gbnf), "schema", out);
}

}  // namespace edgelm::serve
