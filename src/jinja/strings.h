// Python string semantics the Jinja builtins need (str methods, jinja2's title/capitalize).
//
// Invariants: inputs and outputs are UTF-8; case mapping is ASCII-only (other characters keep
// their case); whitespace is Python's ASCII whitespace.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace edgelm::jinja {

bool py_isspace(char c);
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
std::string py_title(std::string_view s);       // str.title()
std::string jinja_title(std::string_view s);    // the |title filter
std::string py_capitalize(std::string_view s);  // str.capitalize() and |capitalize
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right);
std::vector<std::string> py_splitlines(std::string_view s);
std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
std::string py_format(std::string_view fmt, const Args& args);    // "{}", "{0}", "{name}", "{{"
std::string py_percent(std::string_view fmt, const Value& args);  // "%s" % x
bool py_is(std::string_view s, std::string_view what);            // isdigit, isalpha, ...

}  // namespace edgelm::jinja
