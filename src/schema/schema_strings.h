// JSON strings as GBNF: length bounds, `format` (date, time, date-time, uuid), `pattern` (via
// schema_regex.h), and object keys that must differ from a set of declared names.
//
// Invariants: each function returns the body of a rule that matches a whole JSON string, quotes
// included; lengths count code points of the decoded string (an escape sequence, and a surrogate
// pair, is one character); everything matched decodes to a value the keywords allow.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"

namespace edgelm::schema {

class GbnfBuilder;

// The string keywords of `schema` (minLength, maxLength, pattern, format) at JSON pointer `path`.
Result<std::string> string_gbnf(GbnfBuilder& b, const nlohmann::ordered_json& schema, const std::string& path);

// Body of the rule for one JSON string character (any representation; surrogate escapes only as
// a valid pair).
std::string string_char_gbnf();

// Keys of additional (undeclared) properties are bounded so that a model cannot loop on a key.
inline constexpr size_t kMaxExtraKeyLength = 128;

// A JSON string (with quotes) of at most kMaxExtraKeyLength characters: a key of an additional
// property of an object without declared properties.
std::string extra_key_gbnf(GbnfBuilder& b);

// A JSON string (with quotes) whose decoded value is none of `names`, at most about
// kMaxExtraKeyLength characters (the declared prefix it shares plus that many); its characters next to a
// declared prefix are written in canonical form (json_escape_char). Rules are added under `name`.
std::string key_not_in_gbnf(GbnfBuilder& b, const std::vector<std::string>& names, const std::string& name);

// Formats whose grammar is known; the message names the format otherwise.
bool is_supported_format(const std::string& format);

}  // namespace edgelm::schema
