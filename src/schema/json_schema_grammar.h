// JSON Schema (and OpenAI response formats) to GBNF grammar text, for structured output: the
// server compiles a request's schema once and the grammar engine enforces it while decoding.
//
// Output language: JSON text without leading or trailing whitespace; between structural tokens
// (after '{' '[' ',' ':' and before '}' ']' ',' ':') bounded whitespace: nothing, one space, or
// one newline and at most 12 spaces/tabs of indentation. Numbers are bounded: integral part at
// most 16 digits (unless a bound needs more), fraction at most 16 digits, exponent at most 2.
// Object properties come in the schema's order; constants and enum values in compact form.
// So a model cannot loop on whitespace or digits, and a schema whose strings and arrays are bounded
// (and whose objects allow no additional properties) always finishes.
//
// Exactness: every document the grammar accepts validates against the schema (draft 2020-12
// semantics); where a construct cannot be enforced by a context-free grammar (uniqueItems,
// multipleOf, non-whole number bounds, ...) compilation fails with an error naming the keyword
// and its JSON-pointer path rather than silently accept more. Unknown keywords are errors too;
// annotations ($schema, $id, title, description, default, examples, $comment, deprecated,
// readOnly, writeOnly) are ignored.
//
// Documented choices:
//  - additionalProperties absent means allowed (JSON Schema), with extra properties (any key that
//    is not declared) after the declared ones; Options::extra_properties_by_default = false gives
//    OpenAI strict mode's reading (absent = false). Keys of additional properties have at most 128
//    characters (beyond a prefix they share with a declared name).
//  - oneOf is compiled as anyOf (exclusivity cannot be enforced): a document matching several
//    branches is accepted.
//  - nullable: true (OpenAPI) adds null.
//  - enum/const may only be combined with type/nullable (values of other types are dropped).
//  - minProperties/maxProperties and lengths next to pattern/format are accepted only where they
//    are implied by the rest of the schema; otherwise an error.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace edgelm::schema {

struct Options {
  // Whether an object schema without `additionalProperties` allows undeclared properties.
  bool extra_properties_by_default = true;
};

class GbnfBuilder {
 public:
  GbnfBuilder() = default;
  explicit GbnfBuilder(Options options) : options_(options) {}

  // Adds the rules for a JSON value that validates against `schema`; returns the name of its top
  // rule. `name` is a hint for rule names (sanitized, made unique). `schema` is the root that its
  // $refs resolve against. Errors name the keyword and the JSON pointer path, e.g. "unsupported
  // JSON Schema keyword 'patternProperties' at /properties/tags".
  Result<std::string> add_schema(const nlohmann::json& schema, std::string_view name);
  // The same for an ordered_json schema: properties then come in the schema's order (nlohmann::json
  // keeps object keys sorted, so with it the order is alphabetical). Parse requests with
  // nlohmann::ordered_json to keep the order the client wrote.
  Result<std::string> add_schema(const nlohmann::ordered_json& schema, std::string_view name);

  // Adds a raw GBNF rule body under a unique name derived from `name`; returns the name.
  std::string add_rule(std::string_view name, std::string body);

  // Shared building blocks, added on first use: any JSON value, any JSON object, a JSON string
  // (with its quotes), bounded whitespace.
  std::string json_value_rule();
  std::string json_object_rule();
  std::string string_rule();
  std::string ws_rule();
  // Also shared: one JSON string character (any representation), number, integer, boolean, null.
  std::string string_char_rule();
  std::string number_rule();
  std::string integer_rule();
  std::string boolean_rule();
  std::string null_rule();

  // The whole grammar text: `root ::= <root_rule>` followed by every rule added.
  std::string gbnf(std::string_view root_rule) const;

  const Options& options() const { return options_; }

  // Internal (used by the compiler): reserves a unique rule name to be defined later by
  // set_rule (for recursive $refs), and defines it.
  std::string reserve_rule(std::string_view name);
  void set_rule(const std::string& name, std::string body);
  // Adds a rule, reusing an existing rule with the same body when there is one.
  std::string intern_rule(std::string_view name, std::string body);

 private:
  std::string shared(const std::string& key, const std::string& body);
  std::string unique_name(std::string_view hint);

  Options options_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in order of addition
  std::set<std::string> names_;
  std::map<std::string, std::string> by_body_;  // body -> rule name (intern_rule)
  std::map<std::string, std::string> shared_;   // building block -> rule name
};

// One schema -> the whole grammar.
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, Options options = {});
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, Options options = {});

// An OpenAI `response_format` object: {"type":"json_schema","json_schema":{"name","schema","strict"}}
// (strict: true -> additionalProperties absent means false), {"type":"json_object"}, or
// {"type":"text"} (returns an empty string: no grammar).
Result<std::string> response_format_to_gbnf(const nlohmann::json& response_format);
Result<std::string> response_format_to_gbnf(const nlohmann::ordered_json& response_format);

// response_format json_object: any JSON object.
std::string json_object_gbnf();

}  // namespace edgelm::schema
