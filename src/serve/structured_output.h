// Structured output in the server: the request fields that constrain decoding, compiled into the
// grammar the engine enforces (engine/constraint.h).
//
//   response_format {"type": "text"}                       no constraint
//   response_format {"type": "json_object"}                any JSON object
//   response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//                                                          a JSON value valid against the schema
//                                                          (strict false constrains too)
//   grammar "<GBNF>"                                       llama.cpp's GBNF notation, root rule "root"
//   /predict: schema {...}                                 as json_schema
//
// Schemas compile through schema::GbnfBuilder (schema/json_schema_grammar.h); a schema or grammar
// the engine cannot honour is a 400 naming the keyword and path. Compiled grammars are cached by
// their text (LRU), so a client that sends the same schema each time compiles it once.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "serve/http_server.h"

namespace edgelm::serve {

struct OutputConstraint {
  std::string kind;     // json_object | json_schema | grammar | tools (the metric's label)
  std::string gbnf;     // the grammar's text (what the response cache keys on)
  std::string trigger;  // lazy grammars (tool calls under tool_choice auto): see engine::Request
  grammar::GrammarPtr grammar;
};

// The request body with its objects' keys in the order the client wrote them (schemas compile
// their properties in that order; nlohmann::json would sort them). Only the fields that carry
// schemas and grammars (response_format, grammar, tools, tool_choice, parallel_tool_calls, schema)
// are kept; the body was already checked by
// ServerContext::parse_body.
nlohmann::ordered_json ordered_body(const http::Request& req);

// response_format and grammar of a /v1/completions or /v1/chat/completions body. `out` stays
// empty when neither asks for a constraint. Compiles the grammar.
std::optional<ApiError> parse_output_constraint(const nlohmann::ordered_json& body,
                                                std::optional<OutputConstraint>& out);
// /predict's optional schema.
std::optional<ApiError> parse_predict_schema(const nlohmann::ordered_json& body, std::optional<OutputConstraint>& out);

// The grammar of `gbnf` (root rule "root"), from the cache or compiled now. The error is the
// parser's message.
Result<grammar::GrammarPtr> compile_grammar(const std::string& gbnf);

// The GBNF of a JSON Schema as a 400 naming `param` on failure. strict: an object without
// additionalProperties allows no others (OpenAI's strict mode).
std::optional<ApiError> schema_gbnf(const nlohmann::ordered_json& schema, bool strict, const std::string& param,
                                    std::string& out);

}  // namespace edgelm::serve
